//! Observability: an explicit Prometheus registry with typed `record_*` methods
//! ([`Metrics`]), the HTTP endpoint serving `/metrics`, `/healthz`, `/readyz` and
//! `/status` ([`server`]), and the `/status` document ([`board`]) that the `status`
//! command reads back.
//!
//! The daemon creates one [`Metrics`], feeds it (sessions from the peer drivers, config
//! reloads, source status, the node view, latencies, a heartbeat) and serves it. Every
//! series name starts with `podcidr_speaker_`; label values are bounded ([`labels`]):
//! peers and resources come from configuration, notification codes from the IANA
//! registries, nodes only while they drift. No prefix and no error text is ever a label.
//!
//! Must not: make decisions (it only records them), or hold anything the daemon needs
//! to run; losing every series changes nothing on the wire.

pub mod board;
pub mod labels;
mod registry;
pub mod server;

pub use board::Status;
pub use labels::Direction;
pub use registry::{Metrics, DEFAULT_LIVENESS, EVENT_TO_UPDATE_BUCKETS, NAMESPACE};
