//! The `/status` document: the facts behind the metrics, as JSON for tools and for the
//! `status` command (which reads it back with the same types).
//!
//! Text is allowed here (last errors, rejection reasons, warnings): a document is read
//! once and thrown away, unlike a label, which is a series kept forever. Times are
//! whole seconds: timestamps since the Unix epoch and durations measured by the speaker
//! itself, so a client on another machine with another clock reads the same ages.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::bgp::wire::{LargeCommunity, Origin};
use crate::config::Community;
use crate::peer::{RoutesAnswer, SentRoute};

/// Everything `/status` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The speaker's version (`CARGO_PKG_VERSION`).
    pub version: String,
    /// When the document was made, seconds since the Unix epoch.
    pub now_unix: u64,
    /// The node this speaker announces for (`--node`), when known.
    pub node: Option<String>,
    /// The main loop beat recently (`/healthz`).
    pub alive: bool,
    /// `/readyz`: a config is in force, every source completed its first sync and, with
    /// `--ready-timeout`, this node's sessions are Established (or waited for long
    /// enough).
    pub ready: bool,
    /// Why not ready, or what readiness no longer waits for.
    #[serde(default)]
    pub ready_reasons: Vec<String>,
    /// The startup gate on the Cilium agent's health (`--cilium-health-addr`).
    #[serde(default)]
    pub gate: Option<GateReport>,
    pub config: ConfigReport,
    /// One entry per followed resource, in a fixed order.
    pub sources: Vec<SourceReport>,
    /// The node view, once the sources produced one.
    pub view: Option<ViewReport>,
    /// One entry per configured peer, by address and port.
    pub peers: Vec<PeerReport>,
    /// The LoadBalancer Services and routes, once planned.
    #[serde(default)]
    pub lb: Option<LbReport>,
    /// The stop decision, once the speaker is stopping (`routes::stop`).
    #[serde(default)]
    pub stopping: Option<StopReport>,
    /// cilium-config turns Cilium's embedded BGP speaker on (`routes::cilium`).
    #[serde(default)]
    pub cilium_bgp: Option<CiliumBgpReport>,
}

/// The conflict with Cilium's embedded speaker as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CiliumBgpReport {
    /// The finding, naming the keys.
    pub conflict: String,
    /// `--cilium-bgp-conflict`: `hold` or `ignore`.
    pub policy: String,
    /// New sessions are held back.
    pub holding: bool,
    /// Planned sessions not running meanwhile.
    pub held_sessions: usize,
}

/// The stop decision as `/status` shows it: restart or leaving and why, and what each
/// route class gets ("keep": graceful restart; "drain": graceful shutdown, withdrawn).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StopReport {
    pub decision: String,
    pub pod_cidrs: String,
    pub load_balancer: String,
}

/// The LoadBalancer planner's counts (`routes::lb`): Services of type LoadBalancer,
/// announced or not and why, and the routes they give (the same for every peer).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LbReport {
    pub announced: u64,
    /// Per reason (`LbReason::as_str`), reasons with no Service left out.
    pub not_announced: BTreeMap<String, u64>,
    pub routes: u64,
}

/// The startup gate: nothing is announced until the Cilium agent on the node reports
/// healthy; afterwards its health is only reported.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GateReport {
    /// Where the agent's `/healthz` is asked (ADDR:PORT).
    pub address: String,
    /// The last answer: healthy (200) or not; `None` before the first.
    pub healthy: Option<bool>,
    /// The first announcement was let through (stays true).
    pub open: bool,
    /// When `healthy` or `open` last changed, seconds since the Unix epoch.
    pub since_unix: Option<u64>,
    /// Times the agent went from healthy to unhealthy or unreachable.
    pub flaps: u64,
    /// The last unhealthy answer or error.
    pub last_error: Option<String>,
}

/// The bgp-config in force and the last reload.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ConfigReport {
    /// A valid config is in force.
    pub loaded: bool,
    /// The fingerprint (FNV-1a 64, hex) of the config in force.
    pub fingerprint: Option<String>,
    /// The outcome of the last reload; `None` before the first one.
    pub last_reload_successful: Option<bool>,
    pub last_reload_unix: Option<u64>,
    /// The config source was deleted; the last good config stays in force.
    pub source_deleted: bool,
    /// Why the source's current content is refused (one line per error).
    pub rejected: Vec<String>,
}

/// One followed resource (Nodes, CiliumNodes, cilium-config, the bgp-config...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceReport {
    pub resource: String,
    pub up: bool,
    pub synced: bool,
    pub last_event_unix: Option<u64>,
    pub events: u64,
    pub errors: u64,
    pub last_error: Option<String>,
}

/// What the node view says: the IPAM mode in force and what an operator must look at.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ViewReport {
    /// `kubernetes` or `cluster-pool`; `None` when the mode cannot be decided.
    pub ipam: Option<String>,
    /// Why the mode cannot be decided (nothing is announced meanwhile).
    pub ipam_error: Option<String>,
    /// The bgp-config's `speaker.announce-pod-cidrs`: false announces none of them.
    pub announce_pod_cidr: bool,
    /// Nodes in the view.
    pub nodes: usize,
    /// Pod CIDRs the view announces, over all nodes.
    pub prefixes: usize,
    pub drift: Vec<DriftReport>,
    pub refused: Vec<RefusedReport>,
    pub overlaps: Vec<OverlapReport>,
    pub warnings: Vec<String>,
}

/// A node whose Node and CiliumNode list different pod CIDRs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriftReport {
    pub node: String,
    pub node_cidrs: Vec<String>,
    pub cilium_node_cidrs: Vec<String>,
    /// The object whose CIDRs are announced under the IPAM mode in force.
    pub announced: String,
}

/// A pod CIDR the view does not announce, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedReport {
    pub node: String,
    pub prefix: String,
    pub reason: String,
}

/// Two nodes whose announced pod CIDRs overlap: traffic for one reaches the other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlapReport {
    pub node: String,
    pub prefix: String,
    pub other_node: String,
    pub other_prefix: String,
}

/// One configured peer, as `show bgp summary` would list it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerReport {
    /// The `peer` label of its series: `ADDRESS:PORT`.
    pub peer: String,
    pub address: IpAddr,
    pub port: u16,
    /// The peer's AS number from the config, when the daemon declared the peer.
    pub asn: Option<u32>,
    /// The RFC 4271 section 8 state, lowercase (`established`, `active`...).
    pub state: String,
    pub up: bool,
    /// Seconds in the current state (since the peer was declared, before any change).
    pub state_seconds: u64,
    /// When the session last reached Established.
    pub established_unix: Option<u64>,
    /// Seconds since the current session reached Established; `None` when not up.
    pub uptime_seconds: Option<u64>,
    /// Times the session left Established.
    pub flaps: u64,
    /// Prefixes announced to the peer and acknowledged by a sent UPDATE, per AFI label.
    pub announced: BTreeMap<String, u64>,
    /// Prefixes desired but not yet sent.
    pub pending: u64,
    /// Prefixes the peer announces to us, per AFI label.
    pub received: BTreeMap<String, u64>,
    pub messages_sent: u64,
    pub messages_received: u64,
    /// Why the session last went down or failed, as text.
    pub last_error: Option<String>,
    /// When the session dials again, while it waits in Idle after a failure (seconds
    /// since the Unix epoch). Absent from the documents of older speakers.
    #[serde(default)]
    pub next_retry_unix: Option<u64>,
    /// The Adj-RIB-Out, when asked for (`/status?routes=N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<RoutesReport>,
    /// Pod CIDRs the plan gives this peer no route for, and why (absent in documents
    /// of older speakers).
    #[serde(default)]
    pub unannounceable: Vec<UnannounceableReport>,
    /// The peer's BFD session (RFC 5880), for a peer with a `bfd-profile` (absent
    /// otherwise, and in documents of older speakers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bfd: Option<BfdReport>,
    /// Ceases refusing a connection while the speaker had no other to the peer (absent
    /// in documents of older speakers).
    #[serde(default)]
    pub collision_ceases: u64,
    /// Another BGP speaker on this node seems to peer with the switch from the same
    /// address (absent while not suspected, and in documents of older speakers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_speaker: Option<SecondSpeakerReport>,
    /// Why the daemon holds this peer's new sessions back (the Cilium conflict), while
    /// it does; an Established session carries on meanwhile (absent otherwise, and in
    /// documents of older speakers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<String>,
}

/// The second-speaker finding (`bgp::session::second_speaker`) as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecondSpeakerReport {
    /// When it was raised, seconds since the Unix epoch.
    pub since_unix: u64,
    /// Collision Ceases within the window.
    pub ceases: u64,
    pub window_seconds: u64,
    /// The Cease subcode of the latest (5, 6 or 7).
    pub last_subcode: u8,
    /// What it probably means and what to check.
    pub message: String,
}

/// A peer's BFD session as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BfdReport {
    /// RFC 5880 state, lowercase: `admin_down`, `down`, `init`, `up`.
    pub state: String,
    pub up: bool,
    /// Our last diagnostic (RFC 5880 section 4.1), lowercase: why it last left Up.
    pub diag: String,
    /// The remote's state as last received.
    pub remote_state: Option<String>,
    /// RFC 5883 (port 4784) rather than RFC 5881 single-hop.
    pub multihop: bool,
    /// Our discriminator and the peer's (0 until its first packet), as in its
    /// `show bfd` (RFC 5880 section 6.8.1).
    pub local_discr: u32,
    pub remote_discr: u32,
    /// The Detection Time in force, in milliseconds.
    pub detection_time_ms: u64,
    /// Times the session failed (Up -> Down, not by the remote's AdminDown).
    pub failures: u64,
    /// At the last failure by detection timeout: milliseconds from the last packet
    /// received to the Down.
    pub last_detection_ms: Option<u64>,
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Packets for this session dropped after demultiplexing (wrong TTL, wrong source,
    /// discarded by the session); drops before it are only in the metric.
    pub packets_dropped: u64,
}

/// What a peer's Adj-RIB-Out holds and what is still to send, like a router's `show bgp
/// neighbor X advertised-routes`: both counted whole, the first `limit` of each listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutesReport {
    /// The peer task answered; `false` when it was busy or gone (counts are then 0).
    pub answered: bool,
    /// A session is up (without one the peer holds nothing from us).
    pub established: bool,
    /// Routes the peer holds from us.
    pub held: u64,
    /// Prefixes queued to announce or withdraw, not yet handed to the session.
    pub pending: u64,
    /// Octets encoded (held routes' UPDATEs among them) and not yet taken by the socket.
    #[serde(default)]
    pub unwritten_octets: u64,
    /// The most routes listed in each of `routes` and `pending_routes`.
    pub limit: usize,
    /// The first held routes, by prefix.
    pub routes: Vec<RouteReport>,
    /// The first pending changes, in the order they will leave (withdrawals first).
    pub pending_routes: Vec<RouteReport>,
}

/// One route as sent, or to be sent, to one peer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteReport {
    pub prefix: String,
    /// `announce` or `withdraw` for a pending change; `None` for a held route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<String>,
    /// The NEXT_HOP (or MP_REACH_NLRI next hop) as resolved for this session; `None`
    /// for a withdrawal or a route the session cannot carry.
    pub next_hop: Option<String>,
    pub origin: Option<String>,
    /// AS_PATH as sent (empty on iBGP).
    pub as_path: Vec<u32>,
    pub med: Option<u32>,
    /// Sent on iBGP only.
    pub local_pref: Option<u32>,
    /// RFC 1997 communities as `ASN:VALUE`, then large ones as `large:A:B:C`.
    pub communities: Vec<String>,
    /// When the UPDATE carrying it was handed to the session (held routes only).
    pub since_unix: Option<u64>,
}

/// A pod CIDR a peer gets no route for (`routes::Unannounceable`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnannounceableReport {
    pub node: String,
    pub prefix: String,
    /// The `reason` label of `routes_unannounceable`.
    pub reason: String,
    /// What it means and what to set, for people.
    pub message: String,
}

impl PeerReport {
    pub fn announced_total(&self) -> u64 {
        self.announced.values().sum()
    }

    pub fn received_total(&self) -> u64 {
        self.received.values().sum()
    }
}

impl RoutesReport {
    /// A peer task's answer as of `now` (wall clock; the snapshot's own times are
    /// monotonic, so each `since` becomes `now` minus its age).
    pub fn from_answer(answer: &RoutesAnswer, limit: usize, now: SystemTime) -> RoutesReport {
        let snap = &answer.rib;
        let now_unix = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let route = |r: &SentRoute| {
            let since_unix = match (r.since, snap.taken) {
                (Some(since), Some(taken)) => {
                    Some(now_unix.saturating_sub(taken.saturating_duration_since(since).as_secs()))
                }
                _ => None,
            };
            let a = r.attrs.as_ref();
            RouteReport {
                prefix: r.prefix.to_string(),
                pending: r.pending.map(|p| p.as_str().to_owned()),
                next_hop: a.map(|a| a.next_hop.to_string()),
                origin: a.map(|a| origin_name(a.origin).to_owned()),
                as_path: a.map(|a| a.as_path.clone()).unwrap_or_default(),
                med: a.and_then(|a| a.med),
                local_pref: a.and_then(|a| a.local_pref),
                communities: a
                    .map(|a| {
                        a.communities
                            .iter()
                            .map(|c| Community(*c).to_string())
                            .chain(a.large_communities.iter().map(large_text))
                            .collect()
                    })
                    .unwrap_or_default(),
                since_unix,
            }
        };
        RoutesReport {
            answered: true,
            established: snap.established,
            held: snap.held,
            pending: snap.pending,
            unwritten_octets: answer.write_buffer as u64,
            limit,
            routes: snap.routes.iter().map(route).collect(),
            pending_routes: snap.pending_routes.iter().map(route).collect(),
        }
    }

    /// A peer task that did not answer in time (or is gone).
    pub fn unanswered(limit: usize) -> RoutesReport {
        RoutesReport {
            answered: false,
            established: false,
            held: 0,
            pending: 0,
            unwritten_octets: 0,
            limit,
            routes: Vec::new(),
            pending_routes: Vec::new(),
        }
    }
}

/// ORIGIN as `plan` and `/status` spell it.
pub fn origin_name(origin: Origin) -> &'static str {
    match origin {
        Origin::Igp => "igp",
        Origin::Egp => "egp",
        Origin::Incomplete => "incomplete",
    }
}

/// A large community as `plan` and `/status` spell it (the bgp-config syntax).
pub fn large_text(l: &LargeCommunity) -> String {
    format!(
        "large:{}:{}:{}",
        l.global_admin, l.local_data1, l.local_data2
    )
}
