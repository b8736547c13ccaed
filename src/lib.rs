//! podcidr-speaker: a BGP speaker that announces each Kubernetes node's pod CIDRs, taken
//! from the object that is really in force for the cluster's IPAM mode, to the
//! top-of-rack switches selected for that node.
//!
//! The crate is layered; ARCHITECTURE.md at the repository root describes each module,
//! what it owns and what it may not import.

pub mod alloc;
pub mod allocate;
pub mod bfd;
pub mod bgp;
pub mod cli;
pub mod commands;
pub mod config;
pub mod daemon;
pub mod decode;
pub mod gate;
pub mod http;
pub mod memory;
pub mod metrics;
pub mod peer;
pub mod routes;
pub mod sources;
