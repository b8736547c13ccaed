//! Bidirectional Forwarding Detection (RFC 5880), asynchronous mode, sans-IO and pure
//! like `bgp`: no tokio, no sockets, no clock, no environment, no metrics. `packet` turns
//! the 24 octets of a control packet into a [`Packet`] and back, with every reception
//! check of RFC 5880 section 6.8.6 that needs no session; `session` is the state machine
//! of section 6 (Down/Init/Up/AdminDown, timers, Poll/Final). Time arrives as `now`,
//! randomness (the jitter of section 6.8.7) as a seed.
//!
//! `coupling` is the rule of RFC 5882 that takes the protected session down on a BFD
//! failure; the peer task carries its verdict out. The encapsulation (RFC 5881 single
//! hop, RFC 5883 multihop: ports, TTL, source address) and the demultiplexing of a packet
//! to its session belong to the module that owns sockets (`peer`).
//!
//! Not implemented, and said so where a user meets it: authentication (section 6.7; a
//! packet with the A bit is discarded, [`Discard::AuthNotSupported`]), the Echo function
//! (we advertise a Required Min Echo RX Interval of zero, section 6.8.9) and Demand mode
//! on our side (we never set D; a remote's Demand mode is honoured, section 6.8.6).

pub mod coupling;
pub mod packet;
pub mod session;

pub use packet::{Diag, Packet, PacketError, State};
pub use session::{allocate_discriminator, Discard, Event, Session, SessionConfig};
