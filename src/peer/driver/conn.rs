//! The peer task's connections: a session and its TCP connection (`Link`, `Conn`), the
//! buffered, bounded writes and the graceful close, and the futures the task's one
//! `select!` waits on. No protocol decision: the session and the task own those.

use super::super::bfd::BfdStatus;
use super::super::listener::Inbound;
use super::super::{PeerError, RoutesQuery};
use super::Dial;
use crate::bgp::session::{Action, NotificationInfo, Session};
use bytes::{Buf, BytesMut};
use std::future::pending;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

/// LinkRole of a peer's two possible sessions a link carries: the main one, or the
/// candidate of a connection collision (RFC 4271 section 6.8) while it is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LinkRole {
    Main,
    Candidate,
}

impl LinkRole {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            LinkRole::Main => "main",
            LinkRole::Candidate => "collision-candidate",
        }
    }
}

/// One session and its connection.
pub(super) struct Link {
    pub(super) session: Session,
    pub(super) conn: Option<Conn>,
    /// Actions about the Adj-RIB-Out (Established, SendTable, Down) of a collision
    /// candidate: the Adj-RIB-Out follows the long-lived session only, so they wait
    /// until the candidate wins (and are dropped if it loses).
    pub(super) deferred: Vec<Action>,
}

pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) local: SocketAddr,
    pub(super) remote: SocketAddr,
    pub(super) rbuf: BytesMut,
    pub(super) wbuf: BytesMut,
    /// Reading stopped: EOF, or a decode error whose NOTIFICATION is on its way.
    pub(super) read_done: bool,
}

impl Conn {
    pub(super) fn new(stream: TcpStream) -> io::Result<Conn> {
        Ok(Conn {
            local: stream.local_addr()?,
            remote: stream.peer_addr()?,
            stream,
            rbuf: BytesMut::new(),
            wbuf: BytesMut::new(),
            read_done: false,
        })
    }

    /// Writes what the socket takes now; `Err` when the connection is broken.
    pub(super) fn try_flush(&mut self) -> io::Result<()> {
        while !self.wbuf.is_empty() {
            match self.stream.try_write(&self.wbuf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.wbuf.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Flushes, half-closes and waits for the peer to close, all within `deadline`: a
    /// NOTIFICATION must not be lost to a reset caused by unread data.
    pub(super) async fn close_gracefully(mut self, deadline: tokio::time::Instant) {
        let flushed = tokio::time::timeout_at(deadline, async {
            while !self.wbuf.is_empty() {
                if self.stream.writable().await.is_err() || self.try_flush().is_err() {
                    return false;
                }
            }
            true
        })
        .await
        .unwrap_or(false);
        if !flushed {
            return;
        }
        let _ = socket2::SockRef::from(&self.stream).shutdown(std::net::Shutdown::Write);
        let _ = tokio::time::timeout_at(deadline, async {
            let mut sink = [0u8; 4096];
            loop {
                if self.stream.readable().await.is_err() {
                    return;
                }
                match self.stream.try_read(&mut sink) {
                    Ok(0) => return,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(_) => return,
                }
            }
        })
        .await;
    }
}

/// The registry's name for the codes, and the shutdown communication if any.
pub(super) fn notification_text(info: &NotificationInfo) -> String {
    match &info.message {
        Some(m) => format!("{}: {m:?}", info.description()),
        None => info.description().to_string(),
    }
}

pub(super) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(tokio::time::Instant::from_std(d)).await,
        None => pending().await,
    }
}

pub(super) async fn readable(conn: Option<&Conn>) {
    match conn {
        Some(c) if !c.read_done => {
            // An error is reported by the read itself.
            let _ = c.stream.readable().await;
        }
        _ => pending().await,
    }
}

pub(super) async fn writable(conn: Option<&Conn>) {
    match conn {
        Some(c) if !c.wbuf.is_empty() => {
            let _ = c.stream.writable().await;
        }
        _ => pending().await,
    }
}

pub(super) async fn dialing(dial: Option<&mut Dial>) -> Result<TcpStream, PeerError> {
    match dial {
        Some(d) => d.await,
        None => pending().await,
    }
}

pub(super) async fn accept(inbound: Option<&mut Inbound>) -> Option<TcpStream> {
    match inbound {
        Some(i) => i.recv().await,
        None => pending().await,
    }
}

pub(super) async fn bfd_changed(
    bfd: Option<&mut watch::Receiver<Option<BfdStatus>>>,
) -> Result<(), watch::error::RecvError> {
    match bfd {
        Some(b) => b.changed().await,
        None => pending().await,
    }
}

/// The hold on new sessions changed; pending without one.
pub(super) async fn hold_changed(
    hold: Option<&mut watch::Receiver<Option<Arc<str>>>>,
) -> Result<(), watch::error::RecvError> {
    match hold {
        Some(h) => h.changed().await,
        None => pending().await,
    }
}

pub(super) async fn query(
    queries: Option<&mut mpsc::Receiver<RoutesQuery>>,
) -> Option<RoutesQuery> {
    match queries {
        Some(q) => q.recv().await,
        None => pending().await,
    }
}
