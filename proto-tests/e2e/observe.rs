//! The speaker's endpoint through one session's life, against BIRD: established,
//! routes announced, BIRD shuts the session down (Cease / Administrative Shutdown),
//! the session comes back, the peer leaves the config. Checked in `/metrics`, in
//! `/status` and through the `status` command's exit status.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use crate::fixture::{BgpConfig, Peer};
use crate::harness::bird::Bird;
use crate::harness::process::run;
use crate::harness::{v4, BgpDaemon, Neighbor, PeerOpts};
use crate::isolated;
use crate::scrape::{get, mentions_peer, value, wait_metrics};
use crate::speaker::{node_ip, Inputs, NodeSpec, Speaker, BINARY};
use crate::WAIT;

fn config(with_bird: bool) -> String {
    let bird = with_bird.then(|| Peer::new(v4(2), 65000, 65001));
    // A second peer, selected by a label, that nothing answers (its address exists in
    // no namespace): the status command must call that unhealthy.
    let unanswered = Peer::new(v4(9), 65009, 65001).selector("unanswered", "yes");
    BgpConfig::new(bird.into_iter().chain([unanswered])).yaml()
}

/// `podcidr-speaker status --addr ADDR`: its exit status.
fn status_command(endpoint: SocketAddr) -> i32 {
    let out = run(
        Command::new(BINARY).args(["status", "--addr", &endpoint.to_string()]),
        Duration::from_secs(10),
    )
    .expect("run podcidr-speaker status");
    out.status.code().unwrap_or(-1)
}

#[test]
fn the_endpoint_follows_a_session_through_its_life() {
    let n1 = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), n1], Duration::from_secs(120)) else {
        return;
    };
    let mut bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(2), 65000).neighbor(Neighbor::new(n1, 65001)),
    )
    .expect("start BIRD");
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&config(true));
    let mut node = NodeSpec::new("n1", n1).node_cidrs(&["10.244.1.0/24", "10.244.101.0/24"]);
    inputs.write_node(&node);
    let speaker = Speaker::start(ns.dir(), "n1", &Speaker::standalone_args(&inputs, "n1", n1));
    let endpoint = SocketAddr::new(n1, 9477);
    let peer = format!("{}:179", v4(2));
    let p = peer.as_str();
    let gauge = |m: &str, name: &str, extra: &[(&str, &str)]| {
        let mut labels = vec![("peer", p)];
        labels.extend_from_slice(extra);
        value(m, name, &labels)
    };

    bird.wait_established(n1, WAIT)
        .unwrap_or_else(|e| panic!("{e}\n{}", speaker.log_tail(30)));
    let m = wait_metrics(endpoint, "established with 2 prefixes", |m| {
        gauge(m, "podcidr_speaker_session_up", &[]) == Some(1.0)
            && gauge(m, "podcidr_speaker_announced_prefixes", &[("afi", "ipv4")]) == Some(2.0)
    });
    for state in [
        "idle",
        "connect",
        "active",
        "opensent",
        "openconfirm",
        "established",
    ] {
        let want = if state == "established" { 1.0 } else { 0.0 };
        assert_eq!(
            gauge(&m, "podcidr_speaker_session_state", &[("state", state)]),
            Some(want),
            "state {state}"
        );
    }
    assert!(
        gauge(
            &m,
            "podcidr_speaker_session_established_timestamp_seconds",
            &[]
        )
        .is_some_and(|t| t > 1.0e9),
        "{m}"
    );
    assert_eq!(
        gauge(&m, "podcidr_speaker_session_flaps_total", &[]),
        Some(0.0)
    );
    for t in ["open", "update", "keepalive"] {
        assert!(
            gauge(&m, "podcidr_speaker_messages_sent_total", &[("type", t)])
                .is_some_and(|n| n >= 1.0),
            "{t} sent:\n{m}"
        );
    }
    assert!(
        !mentions_peer(&m, &format!("{}:179", v4(9))),
        "an unselected peer has no series"
    );
    assert_eq!(
        status_command(endpoint),
        0,
        "every configured peer is Established"
    );

    // BIRD shuts the session down: a NOTIFICATION received, a flap, nothing announced;
    // the status command now fails.
    bird.shutdown_neighbor(n1)
        .expect("disable the BIRD protocol");
    let m = wait_metrics(endpoint, "the session down", |m| {
        gauge(m, "podcidr_speaker_session_up", &[]) == Some(0.0)
    });
    assert_eq!(
        gauge(&m, "podcidr_speaker_session_flaps_total", &[]),
        Some(1.0)
    );
    assert_eq!(
        gauge(
            &m,
            "podcidr_speaker_notifications_total",
            &[("direction", "received"), ("code", "6"), ("subcode", "2")]
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        gauge(&m, "podcidr_speaker_announced_prefixes", &[("afi", "ipv4")]),
        Some(0.0)
    );
    assert_eq!(status_command(endpoint), 1, "a configured peer is down");
    let (code, status) = get(endpoint, "/status");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&status).expect("/status is JSON");
    assert!(status.to_string().contains(p), "{status}");

    // Back: up again, the routes announced again.
    bird.enable_neighbor(n1).expect("enable the BIRD protocol");
    wait_metrics(endpoint, "the session back", |m| {
        gauge(m, "podcidr_speaker_session_up", &[]) == Some(1.0)
            && gauge(m, "podcidr_speaker_announced_prefixes", &[("afi", "ipv4")]) == Some(2.0)
    });
    assert_eq!(status_command(endpoint), 0);

    // The node is labelled for the unanswered peer: a configured peer that is not up.
    node = node.label("unanswered", "yes");
    inputs.write_node(&node);
    let unanswered = format!("{}:179", v4(9));
    wait_metrics(endpoint, "the second peer's series", |m| {
        value(m, "podcidr_speaker_session_up", &[("peer", &unanswered)]) == Some(0.0)
    });
    assert_eq!(
        status_command(endpoint),
        1,
        "one configured peer never comes up"
    );

    // BIRD leaves the config: every series of it goes.
    inputs.write_config(&config(false));
    wait_metrics(endpoint, "BIRD's series removed", |m| !mentions_peer(m, p));
}
