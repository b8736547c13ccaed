//! The optional inbound side: one listening socket (e.g. `0.0.0.0:179`) shared by the
//! peer tasks. A connection from a registered peer address is handed to that peer's
//! task; any other is closed before a byte is read. A peer with a TCP MD5 password has
//! its key set on the listening socket (per peer address, RFC 2385), so the kernel
//! drops unsigned or wrongly signed SYNs before they ever reach `accept`.
//!
//! Must not speak BGP: the peer task does, on the stream it is handed.

use super::socket;
use super::spec::PeerSpec;
use super::PeerError;
use socket2::{Domain, Protocol, Socket, Type};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// Connections waiting for a peer task to take them; a peer that dials faster than its
/// task accepts loses the extra ones (its own retry brings them back).
const PENDING_PER_PEER: usize = 2;

/// See the module documentation. Dropping it stops accepting.
#[derive(Debug)]
pub struct Listener {
    local: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

#[derive(Debug)]
struct Shared {
    listener: Arc<TcpListener>,
    v6: bool,
    peers: Mutex<HashMap<IpAddr, mpsc::Sender<TcpStream>>>,
}

/// One peer's registration: its connections arrive here. Dropping it unregisters the
/// peer and removes its MD5 key from the listening socket.
#[derive(Debug)]
pub struct Inbound {
    peer: IpAddr,
    rx: mpsc::Receiver<TcpStream>,
    shared: Arc<Shared>,
}

impl Listener {
    /// Listens on `addr`. Must be called within a Tokio runtime.
    pub fn bind(addr: SocketAddr) -> Result<Listener, PeerError> {
        let err = |op| move |e| PeerError::socket(op, addr, e);
        let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
            .map_err(err("socket"))?;
        sock.set_reuse_address(true)
            .map_err(err("setsockopt SO_REUSEADDR"))?;
        sock.set_nonblocking(true).map_err(err("set nonblocking"))?;
        sock.bind(&addr.into()).map_err(err("bind"))?;
        sock.listen(128).map_err(err("listen"))?;
        let listener = TcpListener::from_std(sock.into()).map_err(err("register listener"))?;
        let local = listener.local_addr().map_err(err("getsockname"))?;
        let shared = Arc::new(Shared {
            listener: Arc::new(listener),
            v6: addr.is_ipv6(),
            peers: Mutex::new(HashMap::new()),
        });
        let task = tokio::spawn(accept_loop(shared.clone()));
        Ok(Listener {
            local,
            shared,
            task,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Accepts `spec`'s peer from now on (and sets its MD5 key). One registration per
    /// peer address.
    pub fn register(&self, spec: &PeerSpec) -> Result<Inbound, PeerError> {
        let peer = spec.transport.remote.ip().to_canonical();
        let mut peers = self.shared.peers.lock().map_err(|_| poisoned(self.local))?;
        if peers.contains_key(&peer) {
            return Err(PeerError::InvalidSpec {
                field: "peer-address",
                reason: format!(
                    "{peer} is already registered on the listener {}",
                    self.local
                ),
            });
        }
        if let Some(key) = &spec.transport.md5_key {
            socket::set_md5(&*self.shared.listener, self.shared.v6, peer, Some(key))
                .map_err(|e| PeerError::socket("setsockopt TCP_MD5SIG", self.local, e))?;
        }
        let (tx, rx) = mpsc::channel(PENDING_PER_PEER);
        peers.insert(peer, tx);
        Ok(Inbound {
            peer,
            rx,
            shared: self.shared.clone(),
        })
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Inbound {
    /// The next connection from the peer.
    pub async fn recv(&mut self) -> Option<TcpStream> {
        self.rx.recv().await
    }
}

impl Drop for Inbound {
    fn drop(&mut self) {
        if let Ok(mut peers) = self.shared.peers.lock() {
            peers.remove(&self.peer);
        }
        // Removing a key that was never set fails with ENOENT: nothing to undo.
        let _ = socket::set_md5(&*self.shared.listener, self.shared.v6, self.peer, None);
    }
}

fn poisoned(addr: SocketAddr) -> PeerError {
    PeerError::socket(
        "lock the peer registry",
        addr,
        std::io::Error::other("a peer task panicked while registering"),
    )
}

async fn accept_loop(shared: Arc<Shared>) {
    loop {
        let (stream, from) = match shared.listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off a little instead of spinning.
                warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let peer = from.ip().to_canonical();
        let tx = shared.peers.lock().ok().and_then(|p| p.get(&peer).cloned());
        match tx {
            Some(tx) => {
                if tx.try_send(stream).is_err() {
                    debug!(%from, "peer task busy; closing the extra connection");
                }
            }
            None => debug!(%from, "closing a connection from an address that is not a peer"),
        }
    }
}
