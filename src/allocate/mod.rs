//! The `allocate` role (issue 30): a Deployment beside the speakers that hands out
//! LoadBalancer addresses from the bgp-config's `address-pools` and writes them to
//! `status.loadBalancer.ingress`, the decisions being `crate::alloc`'s.
//!
//! - [`objects`]: a Service object -> the facts the allocator decides on.
//! - [`lease`]: the leader election on a Lease (its pure decisions in
//!   `lease::election`, the `Elector` driving them): only the leader writes.
//! - [`run`]: the command and its loop (the bgp-config, the Service watch, the
//!   leadership, the allocator's decisions carried out).
//! - [`writer`]: the status merge patches and the Events.
//! - [`metrics`]: the `podcidr_allocator_*` series, `/status`, `/healthz`, `/readyz`.
//!
//! Must not: decide anything (`crate::alloc` does); know about BGP.

pub mod lease;
pub mod metrics;
pub mod objects;
pub mod run;
pub mod writer;
