//! The peer layer's one error type: a spec that cannot run, and what can go wrong with
//! sockets. None of it is fatal to the process: a peer task reports socket errors to its
//! observer and lets the session retry.

use crate::bgp::session::SessionError;
use crate::bgp::wire::EncodeError;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// A field of the peer's configuration the driver cannot run with.
    #[error("{field}: {reason}")]
    InvalidSpec { field: &'static str, reason: String },
    /// The session configuration built from the spec was refused.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A socket call failed; `op` names it ("connect", "setsockopt TCP_MD5SIG"...).
    #[error("{op} ({addr}): {source}")]
    Socket {
        op: &'static str,
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// The TCP handshake did not complete in time.
    #[error("connect to {addr} timed out after {after:?}")]
    ConnectTimeout { addr: SocketAddr, after: Duration },
    /// A message from the session could not be encoded (a bug: the session and the
    /// Adj-RIB-Out only produce encodable messages).
    #[error("encode: {0}")]
    Encode(#[from] EncodeError),
}

impl PeerError {
    pub(crate) fn socket(op: &'static str, addr: SocketAddr, source: io::Error) -> PeerError {
        PeerError::Socket { op, addr, source }
    }
}
