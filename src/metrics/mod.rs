//! Observability: an explicit Prometheus registry with typed `record_*` methods
//! ([`Metrics`], its series declared in `families.rs`), the readiness rule
//! ([`readiness`]), the HTTP endpoint serving `/metrics`, `/healthz`, `/readyz` and
//! `/status` ([`server`]), and the `/status` document ([`board`]) that the `status`
//! command reads back.
//!
//! The daemon creates one [`Metrics`], feeds it (sessions from the peer drivers, config
//! reloads, source status, the node view, latencies, a heartbeat) and serves it; the
//! peer drivers report through [`PeerMetrics`], the one [`crate::peer::PeerObserver`] on it. Every
//! series name starts with `podcidr_speaker_`; label values are bounded ([`labels`]):
//! peers and resources come from configuration, notification codes from the IANA
//! registries, nodes only while they drift. No prefix and no error text is ever a label.
//!
//! Must not: make decisions (it only records them), or hold anything the daemon needs
//! to run; losing every series changes nothing on the wire.
//!
//! Wiring (the daemon's side):
//!
//! ```no_run
//! # async fn wire(
//! #     config: &podcidr_speaker::config::state::ConfigState,
//! #     update: &podcidr_speaker::config::state::ConfigUpdate,
//! #     snapshot: &podcidr_speaker::sources::ClusterSnapshot,
//! #     sources: &podcidr_speaker::sources::SourceStatus,
//! #     key: podcidr_speaker::config::PeerKey,
//! #     status: &podcidr_speaker::peer::PeerStatus,
//! # ) -> std::io::Result<()> {
//! use std::sync::Arc;
//! use std::time::SystemTime;
//! use podcidr_speaker::metrics::{server, Metrics};
//!
//! let metrics = Metrics::new();
//! metrics.set_node(Some("node-a"));
//! let listener = server::bind("0.0.0.0:9477".parse().unwrap()).await?;
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! tokio::spawn(server::serve(listener, Arc::clone(&metrics), async {
//!     let _ = stopped.await;
//! }));
//! // Every turn of the main loop; an idle loop also waits for `metrics.asked()` (each
//! // probe, scrape or /status asks it to turn), beats and calls `metrics.answered()`:
//! metrics.heartbeat();
//! // Each config source event, after ConfigState::update_*:
//! metrics.record_config_reload(update, &config.status(), SystemTime::now());
//! // Each source status change and snapshot:
//! metrics.record_source_status(sources);
//! metrics.set_view_result(&snapshot.view);
//! // A peer task spawned (pass `PeerMetrics::new(Arc::clone(&metrics))` as its
//! // PeerObserver: states, messages, NOTIFICATIONs, prefixes and latency arrive
//! // through it), its status
//! // snapshots (pending prefixes, the session's last error), and the peer removed:
//! metrics.add_peer(key, 65000, SystemTime::now());
//! metrics.record_peer_status(status, SystemTime::now());
//! metrics.remove_peer(key);
//! let _ = stop.send(());
//! # Ok(())
//! # }
//! ```

pub mod board;
mod families;
pub mod labels;
pub mod liveness;
pub mod observer;
pub mod readiness;
mod registry;
pub mod server;

pub use board::Status;
pub use families::{EVENT_TO_UPDATE_BUCKETS, NAMESPACE};
pub use labels::Direction;
pub use observer::{Latency, PeerMetrics};
pub use readiness::Readiness;
pub use registry::{Metrics, DEFAULT_LIVENESS};
