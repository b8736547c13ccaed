//! `--listen-addr`: a passive peer reaches the speaker through its listener, a router
//! the config does not name is refused, and `--log-format json` writes one JSON object
//! per line.

use std::time::Duration;

use crate::fixture::{start_tors, BgpConfig, Peer};
use crate::harness::{hold_for, v4, BgpDaemon, Origin, Route};
use crate::isolated;
use crate::speaker::{net, node_ip, Inputs, NodeSpec, Speaker};
use crate::{wait_exact, WAIT};

#[test]
fn a_passive_peer_connects_through_the_listener_and_strangers_are_refused() {
    let n1 = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), v4(3), n1], Duration::from_secs(120)) else {
        return;
    };
    // BIRD dials the speaker; FRR dials it too but is not in the config.
    let (bird, frr) = start_tors(ns.dir(), &[n1]);
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&BgpConfig::new([Peer::bird().key("passive", true)]).yaml());
    inputs.write_node(&NodeSpec::new("n1", n1).node_cidrs(&["10.244.1.0/24"]));
    let mut args = Speaker::standalone_args(&inputs, "n1", n1);
    args.push(format!("--listen-addr={n1}:179"));
    args.push("--log-format=json".into());
    let speaker = Speaker::start(ns.dir(), "n1", &args);

    bird.wait_established(n1, WAIT)
        .unwrap_or_else(|e| panic!("BIRD through the listener: {e}\n{}", speaker.log_tail(30)));
    let want = [(
        n1,
        vec![Route {
            prefix: net("10.244.1.0/24"),
            next_hop: n1,
            as_path: vec![65001],
            local_pref: Some(100),
            med: None,
            communities: vec![],
            large_communities: vec![],
            origin: Origin::Incomplete,
            stale: false,
        }],
    )]
    .into_iter()
    .collect();
    wait_exact(&bird, &want, "passive peer");
    hold_for("FRR stays out", Duration::from_secs(3), || {
        match frr.session_state(n1) {
            Ok(s) if s.established() => Err(format!("{s:?}")),
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap_or_else(|e| panic!("a router not in the config got a session: {e}"));

    let log = speaker.log_tail(1000);
    assert!(!log.trim().is_empty());
    for line in log.lines() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("--log-format json wrote a non-JSON line ({e}): {line}"));
        assert!(
            v.get("level").is_some() && v.get("message").is_some(),
            "{line}"
        );
    }
    assert!(
        log.contains("\"message\":\"podcidr-speaker started\""),
        "{log}"
    );
}
