//! TCP MD5 keys from a Secret (`password-secret`, standalone: `--secrets-dir`) against
//! real peers that check them: FRR (tor-a) and BIRD (tor-b), both keys in one Secret.
//!
//! In turn: both sessions come up with the keys read from the Secret; FRR's password is
//! changed and the Secret's tor-a rotated: the FRR session comes back with the new key
//! and the BIRD session does not move (BIRD's and the speaker's established times
//! unchanged, no flap); tor-a removed from the Secret: the FRR session is closed and
//! stays down with the error in `/status`, BIRD untouched; tor-a back: FRR up again. No
//! key ever appears in the speaker's log, `/metrics` or `/status`.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixture::{BgpConfig, Peer, NODE_AS};
use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::process::write_file;
use crate::harness::{v4, wait_for, BgpDaemon, Neighbor, PeerOpts};
use crate::isolated;
use crate::scrape::get;
use crate::speaker::{node_ip, Inputs, NodeSpec, Speaker};
use crate::{settle, WAIT};

const TOR_AS: u32 = 65000;
const KEYS: [&str; 4] = ["frr-key-one", "frr-key-two", "bird-key", "frr-key-three"];

/// FRR (tor-a) first, BIRD (tor-b) second, both eBGP.
fn bgp_config() -> String {
    BgpConfig::new([
        Peer::new(v4(2), TOR_AS, NODE_AS).key("password-secret", "{name: tor-md5, key: tor-a}"),
        Peer::new(v4(3), TOR_AS, NODE_AS).key("password-secret", "{name: tor-md5, key: tor-b}"),
    ])
    .yaml()
}

/// Writes the Secret's keys as a Secret volume shows them (`DIR/tor-md5/KEY`), each
/// file replaced by a rename, and removes the keys not given.
fn write_secret(dir: &Path, keys: &[(&str, &str)]) {
    let secret = dir.join("tor-md5");
    std::fs::create_dir_all(&secret).expect("create the secret dir");
    for entry in std::fs::read_dir(&secret).expect("read the secret dir") {
        let path = entry.expect("dir entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !keys.iter().any(|(k, _)| *k == name) {
            std::fs::remove_file(&path).expect("remove a key");
        }
    }
    for (key, value) in keys {
        let tmp = dir.join(format!(".{key}.tmp"));
        write_file(&tmp, &format!("{value}\n")).expect("write a key");
        std::fs::rename(&tmp, secret.join(key)).expect("rename a key");
    }
}

/// The speaker's `/status` entry of `peer` (`ADDRESS:179`).
fn peer_status(endpoint: SocketAddr, peer: IpAddr) -> Value {
    let (code, body) = get(endpoint, "/status");
    assert_eq!(code, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).expect("/status is JSON");
    let want = format!("{peer}:179");
    doc["peers"]
        .as_array()
        .expect("peers")
        .iter()
        .find(|p| p["peer"] == want.as_str())
        .unwrap_or_else(|| panic!("{want} not in /status: {body}"))
        .clone()
}

/// When BIRD's session with the speaker was established, to the second.
fn bird_established_at(bird: &Bird, n1: IpAddr) -> u64 {
    let state = bird.session_state(n1).expect("BIRD state");
    let uptime = state.uptime.expect("BIRD session up");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    (now - uptime).as_secs()
}

#[test]
fn a_rotated_secret_resets_only_its_own_session() {
    let n1 = node_ip(1);
    let Some(ns) = isolated!(&[v4(2), v4(3), n1], Duration::from_secs(150)) else {
        return;
    };
    let secrets = ns.dir().join("secrets");
    write_secret(&secrets, &[("tor-a", KEYS[0]), ("tor-b", KEYS[2])]);
    let frr = Frr::start(
        ns.dir(),
        PeerOpts::new(v4(2), TOR_AS).neighbor(Neighbor::new(n1, NODE_AS).password(KEYS[0])),
    )
    .expect("start FRR");
    let bird = Bird::start(
        ns.dir(),
        PeerOpts::new(v4(3), TOR_AS).neighbor(Neighbor::new(n1, NODE_AS).password(KEYS[2])),
    )
    .expect("start BIRD");
    let inputs = Inputs::new(ns.dir(), "kubernetes", "10.244.0.0/16");
    inputs.write_config(&bgp_config());
    inputs.write_node(&NodeSpec::new("n1", n1).node_cidrs(&["10.244.1.0/24"]));
    let mut args = Speaker::standalone_args(&inputs, "n1", n1);
    args.push(format!("--secrets-dir={}", secrets.display()));
    let mut speaker = Speaker::start(ns.dir(), "n1", &args);
    let endpoint = SocketAddr::new(n1, 9477);
    let log = || speaker.log_tail(40);

    frr.wait_established(n1, WAIT)
        .unwrap_or_else(|e| panic!("FRR: {e}\n{}", log()));
    bird.wait_established(n1, WAIT)
        .unwrap_or_else(|e| panic!("BIRD: {e}\n{}", log()));
    let bird_since = bird_established_at(&bird, n1);
    let bird_status = peer_status(endpoint, v4(3));
    assert_eq!(bird_status["flaps"], 0);
    let bird_established_unix = bird_status["established_unix"].clone();
    assert!(bird_established_unix.is_u64(), "{bird_status}");

    // Rotation, the router first: FRR takes the new password and drops the session;
    // the speaker cannot come back with the old key. Then the Secret follows.
    let rotated = Instant::now();
    frr.vtysh(&[
        "configure terminal",
        &format!("router bgp {TOR_AS}"),
        &format!("neighbor {n1} password {}", KEYS[1]),
    ])
    .expect("change FRR's password");
    wait_for("FRR to drop the session", WAIT, || {
        match frr.session_state(n1) {
            Ok(s) if !s.established() => Ok(()),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    settle();
    assert!(
        !frr.session_state(n1).unwrap().established(),
        "the old key must not open a session with the new password"
    );
    write_secret(&secrets, &[("tor-a", KEYS[1]), ("tor-b", KEYS[2])]);
    wait_for("FRR on a session with the new key", WAIT, || {
        match frr.session_state(n1) {
            Ok(s) if s.established() && s.uptime.is_some_and(|u| u < rotated.elapsed()) => Ok(()),
            Ok(s) => Err(format!("{s:?}")),
            Err(e) => Err(e.to_string()),
        }
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));

    assert!(
        log().contains("tcp md5 key changed (password-secret), opening the session again"),
        "the reset says why:\n{}",
        log()
    );

    // The BIRD session never moved.
    settle();
    let bird_state = bird.session_state(n1).unwrap();
    assert!(bird_state.established(), "{bird_state:?}");
    let since = bird_established_at(&bird, n1);
    assert!(
        since.abs_diff(bird_since) <= 1,
        "BIRD session restarted: established at {bird_since}, now at {since}"
    );
    let bird_status = peer_status(endpoint, v4(3));
    assert_eq!(bird_status["flaps"], 0, "{bird_status}");
    assert_eq!(bird_status["established_unix"], bird_established_unix);
    assert_eq!(bird_status["up"], true);

    // tor-a removed from the Secret: the FRR session closes and stays down (no fallback
    // to no key); the error is that peer's, BIRD is untouched.
    write_secret(&secrets, &[("tor-b", KEYS[2])]);
    let want_error = format!(
        "password-secret: secret tor-md5 in --secrets-dir {} has no key tor-a",
        secrets.display()
    );
    wait_for("the FRR peer blocked in /status", WAIT, || {
        let s = peer_status(endpoint, v4(2));
        if s["up"] == false && s["last_error"] == want_error.as_str() {
            Ok(())
        } else {
            Err(s.to_string())
        }
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    settle();
    settle();
    assert!(
        !frr.session_state(n1).unwrap().established(),
        "a session without its key"
    );
    let frr_status = peer_status(endpoint, v4(2));
    assert_eq!(frr_status["up"], false, "{frr_status}");
    assert!(bird.session_state(n1).unwrap().established());
    assert_eq!(peer_status(endpoint, v4(3))["flaps"], 0);
    assert!(
        log().contains("has no key tor-a"),
        "the error is logged:\n{}",
        log()
    );

    // A new key in the Secret (and on FRR): the session comes back.
    frr.vtysh(&[
        "configure terminal",
        &format!("router bgp {TOR_AS}"),
        &format!("neighbor {n1} password {}", KEYS[3]),
    ])
    .expect("change FRR's password");
    write_secret(&secrets, &[("tor-a", KEYS[3]), ("tor-b", KEYS[2])]);
    frr.wait_established(n1, WAIT)
        .unwrap_or_else(|e| panic!("FRR back: {e}\n{}", log()));
    let bird_status = peer_status(endpoint, v4(3));
    assert_eq!(bird_status["flaps"], 0, "{bird_status}");
    assert_eq!(bird_status["established_unix"], bird_established_unix);

    // No key anywhere the speaker writes.
    let (_, metrics) = get(endpoint, "/metrics");
    let (_, status) = get(endpoint, "/status");
    let exit = speaker.terminate();
    assert!(exit.success(), "{exit:?}");
    let whole_log = std::fs::read_to_string(ns.dir().join("speaker-n1.log")).expect("log");
    for key in KEYS {
        for (what, text) in [
            ("log", &whole_log),
            ("/metrics", &metrics),
            ("/status", &status),
        ] {
            assert!(!text.contains(key), "{key} in the speaker's {what}");
        }
    }
}
