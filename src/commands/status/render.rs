//! The `status` command's wording: a status document rendered the way a router
//! prints `show bgp summary` ([`Summary`]) and `show bgp neighbor X advertised-routes`
//! ([`Advertised`]), in the text [`Table`] `doctor` shares. Must not: fetch anything,
//! or work out again what the document already says (it only formats).

use std::fmt;

use crate::commands::table::Table;
use crate::metrics::board::{PeerReport, RouteReport, RoutesReport, Status};

/// The human rendering of a status document.
pub struct Summary<'a>(pub &'a Status);

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let ago = |t: Option<u64>| match t {
            Some(t) => format!("{} ago", duration(s.now_unix.saturating_sub(t))),
            None => "never".to_owned(),
        };
        writeln!(
            f,
            "podcidr-speaker {} on node {}: {}, {}",
            s.version,
            s.node.as_deref().unwrap_or("(unknown)"),
            if s.ready { "ready" } else { "NOT READY" },
            if s.alive {
                "alive"
            } else {
                "MAIN LOOP STALLED"
            },
        )?;
        for r in &s.ready_reasons {
            writeln!(f, "  readiness: {r}")?;
        }
        if let Some(st) = &s.stopping {
            writeln!(
                f,
                "STOPPING: {} (pod CIDRs: {}, LoadBalancer routes: {})",
                st.decision, st.pod_cidrs, st.load_balancer
            )?;
        }
        if let Some(c) = &s.cilium_bgp {
            let what = if c.holding {
                format!("{} session(s) HELD BACK, no new session", c.held_sessions)
            } else {
                format!("sessions run anyway (--cilium-bgp-conflict {})", c.policy)
            };
            writeln!(f, "CILIUM BGP CONFLICT: {}: {what}", c.conflict)?;
        }
        if let Some(g) = &s.gate {
            let agent = match g.healthy {
                Some(true) => "healthy",
                Some(false) => "NOT HEALTHY",
                None => "not answered yet",
            };
            write!(
                f,
                "startup gate: {}, cilium agent at {} {agent}",
                if g.open {
                    "open"
                } else {
                    "CLOSED (nothing announced)"
                },
                g.address
            )?;
            if g.flaps > 0 {
                write!(f, ", {} flaps since (reported only)", g.flaps)?;
            }
            if let Some(e) = g.last_error.as_ref().filter(|_| g.healthy != Some(true)) {
                write!(f, " ({e})")?;
            }
            writeln!(f)?;
        }
        let c = &s.config;
        let in_force = match &c.fingerprint {
            Some(fp) => format!("config {fp} in force"),
            None => "no config in force".to_owned(),
        };
        let reload = match c.last_reload_successful {
            Some(true) => format!("last reload ok {}", ago(c.last_reload_unix)),
            Some(false) => format!("last reload FAILED {}", ago(c.last_reload_unix)),
            None => "no reload yet".to_owned(),
        };
        write!(f, "{in_force}, {reload}")?;
        if c.source_deleted {
            write!(f, ", config source deleted")?;
        }
        writeln!(f)?;
        for e in &c.rejected {
            writeln!(f, "  rejected: {e}")?;
        }
        match &s.view {
            None => writeln!(f, "ipam: no node view yet")?,
            Some(v) => {
                match (&v.ipam, &v.ipam_error) {
                    (Some(mode), _) => write!(f, "ipam {mode}")?,
                    (None, Some(e)) => write!(f, "ipam UNDECIDED ({e})")?,
                    (None, None) => write!(f, "ipam unknown")?,
                }
                write!(
                    f,
                    ", {} nodes in view, {} pod CIDRs announced",
                    v.nodes, v.prefixes
                )?;
                if !v.announce_pod_cidr {
                    write!(
                        f,
                        " (none: the bgp-config's speaker.announce-pod-cidrs is false)"
                    )?;
                }
                writeln!(f)?;
            }
        }
        if let Some(lb) = &s.lb {
            write!(
                f,
                "loadbalancer: {} services announced, {} routes",
                lb.announced, lb.routes
            )?;
            if !lb.not_announced.is_empty() {
                let why: Vec<String> = lb
                    .not_announced
                    .iter()
                    .map(|(reason, n)| format!("{reason} {n}"))
                    .collect();
                write!(f, "; not announced: {}", why.join(", "))?;
            }
            writeln!(f)?;
        }

        writeln!(f)?;
        if s.peers.is_empty() {
            writeln!(f, "no peers configured")?;
        } else {
            let header = [
                "Neighbor",
                "AS",
                "State",
                "Up/Down",
                "Sent",
                "Pending",
                "Rcvd",
                "Flaps",
                "Last error",
            ];
            // The BFD column only when a peer has a BFD session (a bfd-profile).
            if s.peers.iter().any(|p| p.bfd.is_some()) {
                let [n, asn, state, rest @ ..] = header;
                let [up_down, sent, pending, rcvd, flaps, error] = rest;
                let mut t = Table::new([
                    n, asn, state, "BFD", up_down, sent, pending, rcvd, flaps, error,
                ]);
                for p in &s.peers {
                    let [n, asn, state, rest @ ..] = peer_row(p, s.now_unix);
                    let [up_down, sent, pending, rcvd, flaps, error] = rest;
                    t.row([
                        n,
                        asn,
                        state,
                        bfd_cell(p),
                        up_down,
                        sent,
                        pending,
                        rcvd,
                        flaps,
                        error,
                    ]);
                }
                write!(f, "{t}")?;
            } else {
                let mut t = Table::new(header);
                for p in &s.peers {
                    t.row(peer_row(p, s.now_unix));
                }
                write!(f, "{t}")?;
            }
        }
        if s.peers.iter().any(|p| p.second_speaker.is_some()) {
            writeln!(f, "\nSecond BGP speaker suspected")?;
            for p in &s.peers {
                if let Some(x) = &p.second_speaker {
                    writeln!(
                        f,
                        "  {} (since {}, {} collision Ceases in all): {}; check: ss -tnp dst {}",
                        p.peer,
                        ago(Some(x.since_unix)),
                        p.collision_ceases,
                        x.message,
                        p.peer
                    )?;
                }
            }
        }
        if s.peers.iter().any(|p| !p.unannounceable.is_empty()) {
            writeln!(f, "\nNot announced to peers (no route planned)")?;
            for u in s.peers.iter().flat_map(|p| &p.unannounceable) {
                writeln!(f, "  {}", u.message)?;
            }
        }

        for p in &s.peers {
            if let Some(r) = &p.routes {
                writeln!(f)?;
                write!(f, "{}", Advertised(p, r, s.now_unix))?;
            }
        }

        if !s.sources.is_empty() {
            writeln!(f)?;
            let mut t = Table::new([
                "Source",
                "Up",
                "Synced",
                "Last event",
                "Events",
                "Errors",
                "Last error",
            ]);
            for r in &s.sources {
                t.row([
                    r.resource.clone(),
                    yes_no(r.up),
                    yes_no(r.synced),
                    ago(r.last_event_unix),
                    r.events.to_string(),
                    r.errors.to_string(),
                    r.last_error.clone().unwrap_or_else(|| "-".to_owned()),
                ]);
            }
            write!(f, "{t}")?;
        }

        if let Some(v) = &s.view {
            if !v.drift.is_empty() {
                writeln!(f, "\nDrift: Node and CiliumNode disagree")?;
                for d in &v.drift {
                    writeln!(
                        f,
                        "  {}: Node [{}] vs CiliumNode [{}]; the {}'s are announced",
                        d.node,
                        d.node_cidrs.join(", "),
                        d.cilium_node_cidrs.join(", "),
                        d.announced
                    )?;
                }
            }
            if !v.overlaps.is_empty() {
                writeln!(f, "\nOverlaps between nodes")?;
                for o in &v.overlaps {
                    writeln!(
                        f,
                        "  {} {} overlaps {} {}",
                        o.node, o.prefix, o.other_node, o.other_prefix
                    )?;
                }
            }
            if !v.refused.is_empty() {
                writeln!(f, "\nNot announced")?;
                for r in &v.refused {
                    writeln!(f, "  {} {}: {}", r.node, r.prefix, r.reason)?;
                }
            }
            if !v.warnings.is_empty() {
                writeln!(f, "\nWarnings")?;
                for w in &v.warnings {
                    writeln!(f, "  {w}")?;
                }
            }
        }
        Ok(())
    }
}

/// One peer's Adj-RIB-Out, the way a router prints `show bgp neighbor X
/// advertised-routes`: the counts always, the routes the document lists, and what waits.
pub struct Advertised<'a>(pub &'a PeerReport, pub &'a RoutesReport, pub u64);

impl fmt::Display for Advertised<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Advertised(p, r, now) = *self;
        if !r.answered {
            return writeln!(
                f,
                "Routes advertised to {}: the peer task did not answer (busy or stopping)",
                p.peer
            );
        }
        if !r.established {
            return writeln!(
                f,
                "Routes advertised to {}: none, the session is not established",
                p.peer
            );
        }
        let shown = |n: usize, total: u64| {
            if n as u64 == total {
                String::new()
            } else {
                format!(", first {n} shown")
            }
        };
        write!(
            f,
            "Routes advertised to {}: {} held{}, {} pending{}",
            p.peer,
            r.held,
            shown(r.routes.len(), r.held),
            r.pending,
            shown(r.pending_routes.len(), r.pending),
        )?;
        if r.unwritten_octets > 0 {
            write!(f, ", {} octets not yet written", r.unwritten_octets)?;
        }
        writeln!(f)?;
        let header = [
            "Network",
            "Next Hop",
            "Path",
            "MED",
            "LocPrf",
            "Communities",
            "Since",
        ];
        if !r.routes.is_empty() {
            let mut t = Table::new(header);
            for route in &r.routes {
                let since = match route.since_unix {
                    Some(t) => format!("{} ago", duration(now.saturating_sub(t))),
                    None => "-".to_owned(),
                };
                t.row(route_row(route, since));
            }
            write!(f, "{t}")?;
        }
        if !r.pending_routes.is_empty() {
            let mut header = header;
            header[6] = "Pending";
            let mut t = Table::new(header);
            for route in &r.pending_routes {
                let what = route.pending.clone().unwrap_or_else(|| "-".to_owned());
                t.row(route_row(route, what));
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

fn route_row(r: &RouteReport, last: String) -> [String; 7] {
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let mut path: Vec<String> = r.as_path.iter().map(u32::to_string).collect();
    if let Some(origin) = &r.origin {
        // The origin code ends the path, as routers print it (i, e, ?).
        path.push(
            match origin.as_str() {
                "igp" => "i",
                "egp" => "e",
                _ => "?",
            }
            .to_owned(),
        );
    }
    [
        r.prefix.clone(),
        or_dash(r.next_hop.clone()),
        if path.is_empty() {
            "-".to_owned()
        } else {
            path.join(" ")
        },
        or_dash(r.med.map(|m| m.to_string())),
        or_dash(r.local_pref.map(|l| l.to_string())),
        if r.communities.is_empty() {
            "-".to_owned()
        } else {
            r.communities.join(" ")
        },
        last,
    ]
}

fn peer_row(p: &PeerReport, now_unix: u64) -> [String; 9] {
    let state = match p.state.as_str() {
        "idle" => "Idle",
        "connect" => "Connect",
        "active" => "Active",
        "opensent" => "OpenSent",
        "openconfirm" => "OpenConfirm",
        "established" => "Established",
        other => other,
    };
    // Held back: no new session starts until the hold is lifted (an Established one
    // carries on, so its row needs no mark). Else, waiting after a failure: when the
    // next attempt is due.
    let state = match (&p.held_back, p.next_retry_unix) {
        (Some(_), _) if !p.up => format!("{state}, held back"),
        (_, Some(at)) => format!("{state}, retry in {}s", at.saturating_sub(now_unix)),
        _ => state.to_owned(),
    };
    [
        p.peer.clone(),
        p.asn.map_or_else(|| "?".to_owned(), |a| a.to_string()),
        state,
        duration(p.uptime_seconds.unwrap_or(p.state_seconds)),
        p.announced_total().to_string(),
        p.pending.to_string(),
        p.received_total().to_string(),
        p.flaps.to_string(),
        p.last_error.clone().unwrap_or_else(|| "-".to_owned()),
    ]
}

/// A peer's BFD session in one cell: its state, and after a failure the diagnostic and
/// how long detection took (`down, control_detection_time_expired after 912ms`).
fn bfd_cell(p: &PeerReport) -> String {
    let Some(b) = &p.bfd else {
        return "-".to_owned();
    };
    let hop = if b.multihop { " multihop" } else { "" };
    let mut cell = format!("{}{hop}", b.state);
    if !b.up && b.diag != "none" {
        cell.push_str(&format!(", {}", b.diag));
        if let Some(ms) = b.last_detection_ms {
            cell.push_str(&format!(" after {ms}ms"));
        }
    }
    cell
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_owned()
}

/// An age the way routers print one: `hh:mm:ss` under a day, `1d02h03m` under a week,
/// `2w3d04h` beyond.
pub fn duration(secs: u64) -> String {
    const DAY: u64 = 86_400;
    const WEEK: u64 = 7 * DAY;
    if secs < DAY {
        format!(
            "{:02}:{:02}:{:02}",
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        )
    } else if secs < WEEK {
        format!(
            "{}d{:02}h{:02}m",
            secs / DAY,
            secs % DAY / 3600,
            secs % 3600 / 60
        )
    } else {
        format!(
            "{}w{}d{:02}h",
            secs / WEEK,
            secs % WEEK / DAY,
            secs % DAY / 3600
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::board::BfdReport;
    use std::collections::BTreeMap;

    #[test]
    fn durations_read_like_a_router() {
        assert_eq!(duration(0), "00:00:00");
        assert_eq!(duration(3_723), "01:02:03");
        assert_eq!(duration(86_399), "23:59:59");
        assert_eq!(duration(86_400 + 7_380), "1d02h03m");
        assert_eq!(duration(17 * 86_400 + 4 * 3600), "2w3d04h");
    }

    fn peer_report(routes: RoutesReport) -> PeerReport {
        PeerReport {
            peer: "100.64.0.2:179".to_owned(),
            address: "100.64.0.2".parse().unwrap(),
            port: 179,
            asn: Some(65000),
            state: "established".to_owned(),
            up: true,
            state_seconds: 10,
            established_unix: Some(990),
            uptime_seconds: Some(10),
            flaps: 0,
            announced: BTreeMap::new(),
            pending: 0,
            received: BTreeMap::new(),
            messages_sent: 3,
            messages_received: 3,
            last_error: None,
            next_retry_unix: None,
            routes: Some(routes),
            unannounceable: Vec::new(),
            bfd: None,
            collision_ceases: 0,
            second_speaker: None,
            held_back: None,
        }
    }

    fn route(prefix: &str, pending: Option<&str>) -> RouteReport {
        RouteReport {
            prefix: prefix.to_owned(),
            pending: pending.map(str::to_owned),
            next_hop: (pending != Some("withdraw")).then(|| "100.64.0.1".to_owned()),
            origin: (pending != Some("withdraw")).then(|| "incomplete".to_owned()),
            as_path: if pending == Some("withdraw") {
                vec![]
            } else {
                vec![65001]
            },
            med: None,
            local_pref: None,
            communities: if pending.is_none() {
                vec!["65001:100".to_owned(), "large:65001:1:2".to_owned()]
            } else {
                vec![]
            },
            since_unix: pending.is_none().then_some(940),
        }
    }

    /// The BFD cell: `-` without a session, the state, and after a failure why and how
    /// long detection took.
    #[test]
    fn the_bfd_cell_shows_state_and_the_last_failure() {
        let mut p = peer_report(RoutesReport {
            answered: true,
            established: true,
            held: 0,
            pending: 0,
            unwritten_octets: 0,
            limit: 0,
            routes: vec![],
            pending_routes: vec![],
        });
        assert_eq!(bfd_cell(&p), "-");
        let up = BfdReport {
            state: "up".into(),
            up: true,
            diag: "none".into(),
            remote_state: Some("up".into()),
            multihop: false,
            local_discr: 1,
            remote_discr: 2,
            detection_time_ms: 300,
            failures: 0,
            last_detection_ms: None,
            packets_sent: 10,
            packets_received: 10,
            packets_dropped: 0,
        };
        p.bfd = Some(up.clone());
        assert_eq!(bfd_cell(&p), "up");
        p.bfd = Some(BfdReport {
            state: "down".into(),
            up: false,
            diag: "control_detection_time_expired".into(),
            multihop: true,
            failures: 1,
            last_detection_ms: Some(297),
            ..up
        });
        assert_eq!(
            bfd_cell(&p),
            "down multihop, control_detection_time_expired after 297ms"
        );
    }

    #[test]
    fn advertised_routes_render_like_a_router_with_counts_and_pending() {
        let r = RoutesReport {
            answered: true,
            established: true,
            held: 250,
            pending: 2,
            unwritten_octets: 0,
            limit: 1,
            routes: vec![route("10.244.1.0/24", None)],
            pending_routes: vec![route("10.244.9.0/24", Some("withdraw"))],
        };
        let p = peer_report(r.clone());
        let text = Advertised(&p, &r, 1000).to_string();
        assert_eq!(
            text,
            "Routes advertised to 100.64.0.2:179: 250 held, first 1 shown, 2 pending, first 1 shown\n\
             Network        Next Hop    Path     MED  LocPrf  Communities                Since\n\
             10.244.1.0/24  100.64.0.1  65001 ?  -    -       65001:100 large:65001:1:2  00:01:00 ago\n\
             Network        Next Hop  Path  MED  LocPrf  Communities  Pending\n\
             10.244.9.0/24  -         -     -    -       -            withdraw\n"
        );

        let all = RoutesReport {
            held: 1,
            pending: 0,
            pending_routes: vec![],
            ..r.clone()
        };
        let text = Advertised(&p, &all, 1000).to_string();
        assert!(
            text.starts_with("Routes advertised to 100.64.0.2:179: 1 held, 0 pending\n"),
            "{text}"
        );
        let writing = RoutesReport {
            unwritten_octets: 4096,
            ..all.clone()
        };
        let text = Advertised(&p, &writing, 1000).to_string();
        assert!(
            text.starts_with(
                "Routes advertised to 100.64.0.2:179: 1 held, 0 pending, 4096 octets not yet written\n"
            ),
            "{text}"
        );

        let down = RoutesReport {
            established: false,
            ..RoutesReport::unanswered(5)
        };
        let down = RoutesReport {
            answered: true,
            ..down
        };
        assert!(Advertised(&p, &down, 1000)
            .to_string()
            .contains("none, the session is not established"));
        let silent = RoutesReport::unanswered(5);
        assert!(Advertised(&p, &silent, 1000)
            .to_string()
            .contains("did not answer"));

        // In the summary, after the peers table; a document without routes has none.
        let status = |peers: Vec<PeerReport>| Status {
            version: "0".to_owned(),
            now_unix: 1000,
            node: Some("n1".to_owned()),
            alive: true,
            ready: true,
            ready_reasons: vec![],
            gate: None,
            config: Default::default(),
            sources: vec![],
            view: None,
            peers,
            stopping: None,
            cilium_bgp: None,
            lb: Some(crate::metrics::board::LbReport {
                announced: 3,
                not_announced: [("no_endpoints".to_owned(), 2)].into(),
                routes: 4,
            }),
        };
        let with = Summary(&status(vec![p.clone()])).to_string();
        assert!(
            with.contains(
                "loadbalancer: 3 services announced, 4 routes; not announced: no_endpoints 2"
            ),
            "{with}"
        );
        assert!(
            with.contains("Routes advertised to 100.64.0.2:179: 250 held"),
            "{with}"
        );
        let without = Summary(&status(vec![PeerReport { routes: None, ..p }])).to_string();
        assert!(!without.contains("Routes advertised"), "{without}");
        assert!(!without.contains("STOPPING"), "{without}");

        // A speaker stopping says so, with the decision and what each class gets.
        let stopping = Status {
            stopping: Some(crate::metrics::board::StopReport {
                decision: "cordoned".to_owned(),
                pod_cidrs: "keep".to_owned(),
                load_balancer: "drain".to_owned(),
            }),
            ..status(vec![])
        };
        let text = Summary(&stopping).to_string();
        assert!(
            text.contains("STOPPING: cordoned (pod CIDRs: keep, LoadBalancer routes: drain)"),
            "{text}"
        );
        assert!(!text.contains("CILIUM BGP CONFLICT"), "{text}");

        // Cilium's embedded speaker on: said, with what the speaker does about it.
        let conflict = Status {
            cilium_bgp: Some(crate::metrics::board::CiliumBgpReport {
                conflict: "cilium-config has bgp-announce-lb-ip: true".to_owned(),
                policy: "hold".to_owned(),
                holding: true,
                held_sessions: 2,
            }),
            ..status(vec![])
        };
        let text = Summary(&conflict).to_string();
        assert!(
            text.contains(
                "CILIUM BGP CONFLICT: cilium-config has bgp-announce-lb-ip: true: 2 session(s) HELD BACK, no new session"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_suspected_second_speaker_is_listed_with_what_to_check() {
        let p = PeerReport {
            collision_ceases: 5,
            second_speaker: Some(crate::metrics::board::SecondSpeakerReport {
                since_unix: 880,
                ceases: 3,
                window_seconds: 300,
                last_subcode: 7,
                message: "another BGP speaker probably peers".to_owned(),
            }),
            ..peer_report(RoutesReport::unanswered(0))
        };
        let status = |peers: Vec<PeerReport>| Status {
            version: "0".to_owned(),
            now_unix: 1000,
            node: None,
            alive: true,
            ready: true,
            ready_reasons: vec![],
            gate: None,
            config: Default::default(),
            sources: vec![],
            view: None,
            peers,
            stopping: None,
            lb: None,
            cilium_bgp: None,
        };
        let text = Summary(&status(vec![p.clone()])).to_string();
        assert!(
            text.contains(
                "Second BGP speaker suspected\n  100.64.0.2:179 (since 00:02:00 ago, 5 collision \
                 Ceases in all): another BGP speaker probably peers; check: ss -tnp dst \
                 100.64.0.2:179\n"
            ),
            "{text}"
        );
        let quiet = PeerReport {
            second_speaker: None,
            ..p
        };
        let text = Summary(&status(vec![quiet])).to_string();
        assert!(!text.contains("Second BGP speaker"), "{text}");
    }

    #[test]
    fn a_held_peer_says_so_in_its_row_until_it_is_up() {
        let idle = PeerReport {
            state: "idle".to_owned(),
            up: false,
            uptime_seconds: None,
            next_retry_unix: Some(1030),
            held_back: Some("cilium-config has bgp-announce-pod-cidr: true".to_owned()),
            ..peer_report(RoutesReport::unanswered(0))
        };
        assert_eq!(peer_row(&idle, 1000)[2], "Idle, held back");
        let released = PeerReport {
            held_back: None,
            ..idle.clone()
        };
        assert_eq!(peer_row(&released, 1000)[2], "Idle, retry in 30s");
        // An Established session carries on under the hold: nothing to mark.
        let up = PeerReport {
            state: "established".to_owned(),
            up: true,
            next_retry_unix: None,
            ..idle
        };
        assert_eq!(peer_row(&up, 1000)[2], "Established");
    }
}
