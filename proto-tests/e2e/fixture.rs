//! The set-up most end-to-end tests share, written once: the two top-of-rack switches
//! (BIRD over eBGP, FRR over iBGP) peering with the speakers' node addresses, and the
//! bgp-config that names them. A test states only what it changes (an extra peer key, a
//! `speaker:` setting, an address-pools section), so that a difference between two
//! tests' configs is visible as such and not buried in a copied YAML text.

use std::fmt::Display;
use std::net::IpAddr;
use std::path::Path;

use crate::harness::bird::Bird;
use crate::harness::frr::Frr;
use crate::harness::{v4, Neighbor, PeerOpts};

/// BIRD's AS: the speakers' sessions with it are eBGP.
pub const BIRD_AS: u32 = 65000;
/// The nodes' AS, and FRR's: the speakers' sessions with FRR are iBGP.
pub const NODE_AS: u32 = 65001;

/// BIRD (`v4(2)`, AS [`BIRD_AS`]) and FRR (`v4(3)`, AS [`NODE_AS`]), each with a
/// neighbor of AS [`NODE_AS`] at every address of `speakers`.
pub fn start_tors(dir: &Path, speakers: &[IpAddr]) -> (Bird, Frr) {
    let mut bird = PeerOpts::new(v4(2), BIRD_AS);
    let mut frr = PeerOpts::new(v4(3), NODE_AS);
    for speaker in speakers {
        bird = bird.neighbor(Neighbor::new(*speaker, NODE_AS));
        frr = frr.neighbor(Neighbor::new(*speaker, NODE_AS));
    }
    (
        Bird::start(dir, bird).expect("start BIRD"),
        Frr::start(dir, frr).expect("start FRR"),
    )
}

/// FRR installs every equal iBGP path (`maximum-paths ibgp 8`): a LoadBalancer prefix
/// several nodes announce is one ECMP route through all of them.
pub fn frr_maximum_paths(frr: &Frr) {
    frr.vtysh(&[
        "configure terminal",
        &format!("router bgp {NODE_AS}"),
        "address-family ipv4 unicast",
        "maximum-paths ibgp 8",
    ])
    .expect("FRR maximum-paths");
}

/// One entry of the bgp-config's `peers:`: address, AS numbers and a 9 s hold time
/// (short, so that a session the switch drops is seen within a test's wait), plus the
/// keys a test adds.
#[derive(Debug, Clone)]
pub struct Peer {
    keys: Vec<(String, String)>,
}

impl Peer {
    pub fn new(address: IpAddr, peer_asn: u32, my_asn: u32) -> Self {
        Self {
            keys: vec![
                ("peer-address".into(), address.to_string()),
                ("peer-asn".into(), peer_asn.to_string()),
                ("my-asn".into(), my_asn.to_string()),
                ("hold-time".into(), "9s".into()),
            ],
        }
    }

    /// The eBGP session with [`start_tors`]' BIRD.
    pub fn bird() -> Self {
        Self::new(v4(2), BIRD_AS, NODE_AS)
    }

    /// The iBGP session with [`start_tors`]' FRR.
    pub fn frr() -> Self {
        Self::new(v4(3), NODE_AS, NODE_AS)
    }

    /// Sets `key` (replacing a value set before, such as the hold time) to a YAML value.
    pub fn key(mut self, key: &str, value: impl Display) -> Self {
        let value = value.to_string();
        match self.keys.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.keys.push((key.into(), value)),
        }
        self
    }

    /// Selects the nodes labelled `label: value` only.
    pub fn selector(self, label: &str, value: &str) -> Self {
        self.key(
            "node-selectors",
            format!("[{{match-labels: {{{label}: {value:?}}}}}]"),
        )
    }
}

/// A bgp-config: its peers, any other top-level sections, and the `speaker:` settings
/// (`connect-retry-time: 1s` in every test: a session a switch refuses is retried well
/// within a test's wait).
#[derive(Debug, Clone)]
pub struct BgpConfig {
    peers: Vec<Peer>,
    sections: String,
    speaker: Vec<(String, String)>,
}

impl BgpConfig {
    pub fn new(peers: impl IntoIterator<Item = Peer>) -> Self {
        Self {
            peers: peers.into_iter().collect(),
            sections: String::new(),
            speaker: vec![("connect-retry-time".into(), "1s".into())],
        }
    }

    /// Adds top-level YAML (`bgp-communities:`, `address-pools:` ...) as written.
    pub fn section(mut self, yaml: &str) -> Self {
        self.sections.push_str(yaml);
        if !yaml.ends_with('\n') {
            self.sections.push('\n');
        }
        self
    }

    /// Adds a `speaker:` setting, its value as YAML.
    pub fn speaker(mut self, key: &str, value: impl Display) -> Self {
        self.speaker.push((key.into(), value.to_string()));
        self
    }

    /// No graceful restart: a SIGTERM at the end of a test is then a stop for good
    /// (Cease to every peer), not a restart the switches would wait for.
    pub fn stop_for_good(self) -> Self {
        self.speaker("graceful-restart", false)
    }

    /// `pod-cidr-communities`: one community, `"ASN:VALUE"`.
    pub fn pod_cidr_community(self, community: &str) -> Self {
        self.speaker("pod-cidr-communities", format!("[{community:?}]"))
    }

    pub fn yaml(&self) -> String {
        let mut y = String::from("peers:\n");
        for peer in &self.peers {
            for (i, (key, value)) in peer.keys.iter().enumerate() {
                let lead = if i == 0 { "  - " } else { "    " };
                y.push_str(&format!("{lead}{key}: {value}\n"));
            }
        }
        y.push_str(&self.sections);
        y.push_str("speaker:\n");
        for (key, value) in &self.speaker {
            y.push_str(&format!("  {key}: {value}\n"));
        }
        y
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The builder's YAML is the config the tests wrote out by hand before it: the
    /// same peers, keys, selectors, sections and speaker settings once parsed.
    #[test]
    fn a_built_config_parses_as_the_hand_written_one() {
        let built = BgpConfig::new([
            Peer::bird(),
            Peer::frr()
                .key("hold-time", "15s")
                .key("pod-cidr-local-pref", 200)
                .selector("tor2", "yes"),
        ])
        .section("bgp-communities:\n  web: \"65001:80\"")
        .stop_for_good()
        .speaker("origin", "igp")
        .pod_cidr_community("65001:7")
        .yaml();
        let by_hand = format!(
            "peers:
  - peer-address: {bird}
    peer-asn: 65000
    my-asn: 65001
    hold-time: 9s
  - peer-address: {frr}
    peer-asn: 65001
    my-asn: 65001
    hold-time: 15s
    pod-cidr-local-pref: 200
    node-selectors:
      - match-labels:
          tor2: \"yes\"
bgp-communities:
  web: \"65001:80\"
speaker:
  graceful-restart: false
  connect-retry-time: 1s
  origin: igp
  pod-cidr-communities: [\"65001:7\"]
",
            bird = v4(2),
            frr = v4(3),
        );
        let parse = |text: &str| {
            podcidr_speaker::config::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
        };
        assert_eq!(parse(&built), parse(&by_hand), "{built}");
    }
}
