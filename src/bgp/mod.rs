//! The BGP protocol core. Pure: no tokio, no sockets, no clock, no environment, no
//! metrics. `wire` turns bytes into messages and back; `session` is the RFC 4271
//! section 8 state machine that consumes and produces messages.

pub mod session;
pub mod wire;
