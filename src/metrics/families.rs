//! The metric families: every series' name, help text and labels, registered once
//! under [`NAMESPACE`] in a fresh registry, with the label values known in advance
//! (every FSM state, BFD state, IPAM mode, LoadBalancer reason, Event loss, BFD drop
//! reason) created at zero so that a rate exists before the first event.
//!
//! Label arity is fixed per family (the `with_label_values` calls of the registry can
//! only fail on a wrong number of values, which the unit tests exercise for every
//! family). Must not: hold state beyond the families (the registry does).

use prometheus::{
    GaugeVec, Histogram, HistogramOpts, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
};

use crate::bfd::State as BfdState;
use crate::bgp::session::State;
use crate::routes::lb::LbReason;
use crate::sources::kube::events::EventLoss;
use crate::sources::model::IpamMode;

/// The prefix of every metric name.
pub const NAMESPACE: &str = "podcidr_speaker";

/// Buckets of the event-to-update histogram, in seconds: the speaker's own latency from
/// a source change to the UPDATE on the wire, from a millisecond (one node, idle) to
/// half a minute (a full table to a slow peer).
pub const EVENT_TO_UPDATE_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Every FSM state (RFC 4271 section 8.2.2), for the one-hot state series.
pub(super) const STATES: [State; 6] = [
    State::Idle,
    State::Connect,
    State::Active,
    State::OpenSent,
    State::OpenConfirm,
    State::Established,
];

/// Every BFD session state (RFC 5880 section 4.1), for the one-hot BFD state series.
pub(super) const BFD_STATES: [BfdState; 4] = [
    BfdState::AdminDown,
    BfdState::Down,
    BfdState::Init,
    BfdState::Up,
];

/// The IPAM modes, for the one-hot mode series.
pub(super) const IPAM_MODES: [IpamMode; 3] = IpamMode::ALL;

/// The metric families, registered once in [`Metrics::new`].
pub(super) struct Families {
    pub(super) session_up: IntGaugeVec,
    pub(super) session_state: IntGaugeVec,
    pub(super) session_established: GaugeVec,
    pub(super) session_flaps: IntCounterVec,
    pub(super) messages_sent: IntCounterVec,
    pub(super) messages_received: IntCounterVec,
    pub(super) notifications: IntCounterVec,
    pub(super) announced: IntGaugeVec,
    pub(super) pending: IntGaugeVec,
    pub(super) received: IntGaugeVec,
    pub(super) not_announced: IntCounterVec,
    pub(super) unannounceable: IntGaugeVec,
    pub(super) collision_ceases: IntCounterVec,
    pub(super) second_speaker: IntGaugeVec,
    pub(super) config_loaded: IntGauge,
    pub(super) config_reload_ok: IntGauge,
    pub(super) config_reload_time: prometheus::Gauge,
    pub(super) config_reloads: IntCounterVec,
    pub(super) config_info: IntGaugeVec,
    pub(super) source_up: IntGaugeVec,
    pub(super) source_synced: IntGaugeVec,
    pub(super) source_last_event: GaugeVec,
    pub(super) source_events: IntCounterVec,
    pub(super) source_errors: IntCounterVec,
    pub(super) view_nodes: IntGauge,
    pub(super) view_prefixes: IntGauge,
    pub(super) ipam_mode: IntGaugeVec,
    pub(super) ipam_error: IntGauge,
    pub(super) drift: IntGaugeVec,
    pub(super) drift_nodes: IntGauge,
    pub(super) conflicts: IntGauge,
    pub(super) refused: IntGauge,
    pub(super) lb_announced: IntGauge,
    pub(super) lb_not_announced: IntGaugeVec,
    pub(super) lb_routes: IntGauge,
    pub(super) event_to_update: Histogram,
    pub(super) kube_events_lost: IntCounterVec,
    pub(super) cilium_healthy: IntGauge,
    pub(super) cilium_flaps: prometheus::IntCounter,
    pub(super) gate_open: IntGauge,
    pub(super) cilium_bgp_conflict: IntGauge,
    pub(super) sessions_held: IntGauge,
    pub(super) stop_decision: IntGaugeVec,
    pub(super) bfd_up: IntGaugeVec,
    pub(super) bfd_state: IntGaugeVec,
    pub(super) bfd_transitions: IntCounterVec,
    pub(super) bfd_packets_sent: IntCounterVec,
    pub(super) bfd_packets_received: IntCounterVec,
    pub(super) bfd_dropped: IntCounterVec,
    pub(super) bfd_last_detection: GaugeVec,
}

impl Families {
    pub(super) fn register(registry: &Registry) -> Families {
        let r = Registrar(registry);
        let build = r.gauge_vec(
            "build_info",
            "Always 1; the version as a label.",
            &["version"],
        );
        build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
        let families = Families {
            session_up: r.gauge_vec(
                "session_up",
                "1 when the BGP session with the peer is Established, else 0.",
                &["peer"],
            ),
            session_state: r.gauge_vec(
                "session_state",
                "1 for the session's current RFC 4271 FSM state, 0 for the other five.",
                &["peer", "state"],
            ),
            session_established: r.float_gauge_vec(
                "session_established_timestamp_seconds",
                "Unix time the session last reached Established; 0 if it never did.",
                &["peer"],
            ),
            session_flaps: r.counter_vec(
                "session_flaps_total",
                "Times the session left Established.",
                &["peer"],
            ),
            messages_sent: r.counter_vec(
                "messages_sent_total",
                "BGP messages sent to the peer, by message type.",
                &["peer", "type"],
            ),
            messages_received: r.counter_vec(
                "messages_received_total",
                "BGP messages received from the peer, by message type.",
                &["peer", "type"],
            ),
            notifications: r.counter_vec(
                "notifications_total",
                "NOTIFICATION messages by direction, error code and subcode \
                 (unregistered values read \"other\").",
                &["peer", "direction", "code", "subcode"],
            ),
            announced: r.gauge_vec(
                "announced_prefixes",
                "Prefixes announced to the peer and acknowledged by a sent UPDATE.",
                &["peer", "afi"],
            ),
            pending: r.gauge_vec(
                "pending_prefixes",
                "Prefixes desired for the peer but not yet written in an UPDATE.",
                &["peer"],
            ),
            received: r.gauge_vec(
                "received_prefixes",
                "Prefixes the peer currently announces to the speaker.",
                &["peer", "afi"],
            ),
            not_announced: r.counter_vec(
                "routes_not_announced_total",
                "Desired routes the peer driver could not send to the peer, by reason \
                 (family not negotiated, no next hop of the family...).",
                &["peer", "afi", "reason"],
            ),
            unannounceable: r.gauge_vec(
                "routes_unannounceable",
                "Pod CIDRs the plan gives the peer no route for, by reason: no_next_hop (no \
                 address of the prefix's family for the peer's session: set next-hop-v4/v6), \
                 no_internal_ip (cluster mode: the node has no InternalIP of the family).",
                &["peer", "afi", "reason"],
            ),
            collision_ceases: r.counter_vec(
                "collision_ceases_total",
                "Ceases refusing a connection (6/7 collision resolution, 6/5 connection \
                 rejected, 6/6 before Established) received while the speaker had no other \
                 connection to the peer.",
                &["peer"],
            ),
            second_speaker: r.gauge_vec(
                "second_speaker_suspected",
                "1 while the peer's refusals say another BGP speaker on this node peers \
                 with it from the same address (3 collision Ceases within the window; \
                 cleared after a quiet period).",
                &["peer"],
            ),
            config_loaded: r.gauge("config_loaded", "1 when a valid bgp-config is in force."),
            config_reload_ok: r.gauge(
                "config_last_reload_successful",
                "1 when the last bgp-config change was applied (or was the same config).",
            ),
            config_reload_time: r.float_gauge(
                "config_last_reload_timestamp_seconds",
                "Unix time of the last bgp-config change seen.",
            ),
            config_reloads: r.counter_vec(
                "config_reloads_total",
                "bgp-config changes seen, by result.",
                &["result"],
            ),
            config_info: r.gauge_vec(
                "config_info",
                "Always 1; the fingerprint of the bgp-config in force as a label.",
                &["fingerprint"],
            ),
            source_up: r.gauge_vec(
                "source_watch_up",
                "1 when the watch (or the last file load) of the resource works.",
                &["resource"],
            ),
            source_synced: r.gauge_vec(
                "source_synced",
                "1 once the resource completed its first list (or load).",
                &["resource"],
            ),
            source_last_event: r.float_gauge_vec(
                "source_last_event_timestamp_seconds",
                "Unix time of the last event (or successful load) of the resource.",
                &["resource"],
            ),
            source_events: r.counter_vec(
                "source_events_total",
                "Events applied from the resource (watch events, list items, loads).",
                &["resource"],
            ),
            source_errors: r.counter_vec(
                "source_errors_total",
                "Errors following the resource (watch errors, unreadable objects, bad files).",
                &["resource"],
            ),
            view_nodes: r.gauge("view_nodes", "Nodes in the node view."),
            view_prefixes: r.gauge(
                "view_prefixes",
                "Pod CIDRs the node view announces, over all nodes.",
            ),
            ipam_mode: r.gauge_vec(
                "ipam_mode",
                "1 for the IPAM mode in force; all 0 when it cannot be decided.",
                &["mode"],
            ),
            ipam_error: r.gauge(
                "ipam_error",
                "1 when the IPAM mode cannot be decided (nothing is announced).",
            ),
            drift: r.gauge_vec(
                "podcidr_drift",
                "1 when the node's Node and CiliumNode list different pod CIDRs; \
                 no series for nodes without drift.",
                &["node"],
            ),
            drift_nodes: r.gauge(
                "podcidr_drift_nodes",
                "Nodes whose Node and CiliumNode list different pod CIDRs.",
            ),
            conflicts: r.gauge(
                "podcidr_conflicts",
                "Nodes whose announced pod CIDRs overlap another node's.",
            ),
            refused: r.gauge(
                "refused_prefixes",
                "Pod CIDRs not announced by the safety rules (default routes, \
                 outside the cluster pool).",
            ),
            lb_announced: r.gauge(
                "lb_services_announced",
                "LoadBalancer Services whose IPs this node announces.",
            ),
            lb_not_announced: {
                let g = r.gauge_vec(
                    "lb_services_not_announced",
                    "LoadBalancer Services whose IPs this node does not announce, by \
                     reason: class, lb_ips_off, not_synced, node_excluded, no_ip, \
                     outside_pools, layer2_pool, no_endpoints, no_local_endpoints.",
                    &["reason"],
                );
                for reason in LbReason::ALL {
                    if reason != LbReason::NotLoadBalancer {
                        g.with_label_values(&[reason.as_str()]);
                    }
                }
                g
            },
            lb_routes: r.gauge(
                "lb_routes",
                "LoadBalancer routes this node announces to each selected peer (one per \
                 prefix: IPs and Services in one aggregate give one).",
            ),
            event_to_update: r.histogram(
                "event_to_update_seconds",
                "From a source change to the UPDATE it caused being written.",
                &EVENT_TO_UPDATE_BUCKETS,
            ),
            kube_events_lost: {
                let c = r.counter_vec(
                    "kube_events_lost_total",
                    "Kubernetes Events not written, by reason: queue_full (dropped), \
                     refused (the API server answered with an error), failed (no answer).",
                    &["reason"],
                );
                // Every reason from the start, so that increase() sees the first loss.
                for loss in EventLoss::ALL {
                    c.with_label_values(&[loss.as_str()]);
                }
                c
            },
            cilium_healthy: r.gauge(
                "cilium_agent_healthy",
                "The last answer of the Cilium agent's /healthz to the startup gate: 1 \
                 healthy, 0 not (or unreachable), -1 no answer yet or no gate \
                 (--cilium-health-addr unset).",
            ),
            cilium_flaps: r.counter(
                "cilium_agent_unhealthy_total",
                "Times the Cilium agent's /healthz went from healthy to unhealthy or \
                 unreachable (reported only: routes stay announced).",
            ),
            stop_decision: r.gauge_vec(
                "stop_decision",
                "1 for the stop decision once the speaker is stopping: restart (graceful \
                 restart keeps the routes), cordoned (LoadBalancer routes drained), or \
                 why the node is leaving (every route drained).",
                &["decision"],
            ),
            cilium_bgp_conflict: r.gauge(
                "cilium_bgp_conflict",
                "1 while cilium-config turns Cilium's embedded BGP speaker on \
                 (bgp-announce-pod-cidr or bgp-announce-lb-ip true, Cilium 1.10-1.16).",
            ),
            sessions_held: r.gauge(
                "sessions_held",
                "Planned sessions not running because of that conflict \
                 (--cilium-bgp-conflict hold: no new session while it stands).",
            ),
            gate_open: r.gauge(
                "announce_gate_open",
                "1 once the startup gate let the first announcement through (always 1 \
                 without --cilium-health-addr).",
            ),
            bfd_up: r.gauge_vec(
                "bfd_session_up",
                "1 when the peer's BFD session is Up, else 0; only for peers with a bfd-profile.",
                &["peer"],
            ),
            bfd_state: r.gauge_vec(
                "bfd_session_state",
                "1 for the BFD session's current RFC 5880 state, 0 for the other three.",
                &["peer", "state"],
            ),
            bfd_transitions: r.counter_vec(
                "bfd_session_transitions_total",
                "BFD state changes, by the state entered.",
                &["peer", "state"],
            ),
            bfd_packets_sent: r.counter_vec(
                "bfd_packets_sent_total",
                "BFD control packets sent to the peer.",
                &["peer"],
            ),
            bfd_packets_received: r.counter_vec(
                "bfd_packets_received_total",
                "BFD control packets received from the peer and accepted by its session.",
                &["peer"],
            ),
            bfd_dropped: r.counter_vec(
                "bfd_packets_dropped_total",
                "Received BFD packets dropped (malformed, wrong TTL, unknown \
                 discriminator...), by reason.",
                &["reason"],
            ),
            bfd_last_detection: r.float_gauge_vec(
                "bfd_last_detection_seconds",
                "At the BFD session's last failure by detection timeout: seconds from the \
                 last packet received to the session declaring the path down.",
                &["peer"],
            ),
        };
        // Every reason a BFD packet can be dropped for, at zero: a rate exists before
        // the first drop.
        for reason in crate::peer::bfd::DROP_REASONS
            .iter()
            .chain(crate::bfd::PacketError::REASONS)
            .chain(crate::bfd::Discard::REASONS)
        {
            families.bfd_dropped.with_label_values(&[reason]).inc_by(0);
        }
        // Until a gate reports: none configured.
        families.cilium_healthy.set(-1);
        families.gate_open.set(1);
        families
    }
}

/// Registers families under [`NAMESPACE`]. The names and label sets are constants,
/// distinct and valid (the unit tests build a registry), so registration cannot fail
/// at run time.
struct Registrar<'a>(&'a Registry);

// The expects below cannot fail: the names, help texts, label sets and buckets are
// constants, distinct and valid, and every unit test builds this registry.
#[allow(clippy::expect_used)]
impl Registrar<'_> {
    fn opts(name: &str, help: &str) -> Opts {
        Opts::new(name, help).namespace(NAMESPACE)
    }

    fn add<C: prometheus::core::Collector + Clone + 'static>(&self, c: C) -> C {
        self.0
            .register(Box::new(c.clone()))
            .expect("metric families are constant and distinct");
        c
    }

    fn gauge(&self, name: &str, help: &str) -> IntGauge {
        let g = IntGauge::with_opts(Self::opts(name, help)).expect("valid constant opts");
        self.add(g)
    }

    fn float_gauge(&self, name: &str, help: &str) -> prometheus::Gauge {
        let g = prometheus::Gauge::with_opts(Self::opts(name, help)).expect("valid constant opts");
        self.add(g)
    }

    fn gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        let g = IntGaugeVec::new(Self::opts(name, help), labels).expect("valid constant opts");
        self.add(g)
    }

    fn float_gauge_vec(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        let g = GaugeVec::new(Self::opts(name, help), labels).expect("valid constant opts");
        self.add(g)
    }

    fn counter(&self, name: &str, help: &str) -> prometheus::IntCounter {
        let c =
            prometheus::IntCounter::with_opts(Self::opts(name, help)).expect("valid constant opts");
        self.add(c)
    }

    fn counter_vec(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        let c = IntCounterVec::new(Self::opts(name, help), labels).expect("valid constant opts");
        self.add(c)
    }

    fn histogram(&self, name: &str, help: &str, buckets: &[f64]) -> Histogram {
        let opts = HistogramOpts::new(name, help)
            .namespace(NAMESPACE)
            .buckets(buckets.to_vec());
        let h = Histogram::with_opts(opts).expect("valid constant buckets");
        self.add(h)
    }
}
