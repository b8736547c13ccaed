//! The `allocate` role (issue 30): a Deployment beside the speakers that hands out
//! LoadBalancer addresses from the bgp-config's `address-pools` and writes them to
//! `status.loadBalancer.ingress`, the decisions being `crate::alloc`'s.
//!
//! What exists: [`objects`], the mapping of a Service object to the facts the allocator
//! decides on; [`lease`], the leader election on a Lease (its pure decisions in
//! `lease::election`, the `Elector` driving them). What does not yet: the command, the
//! Service watch, the status writes, the Events and the metrics (ARCHITECTURE.md says
//! the same).
//!
//! Must not: decide anything (`crate::alloc` does); know about BGP.

pub mod lease;
pub mod objects;
