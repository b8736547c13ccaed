//! The `status` command's one client connection: a minimal HTTP/1.1 GET of the
//! speaker's status document over `std::net::TcpStream` (one request, bounded in time
//! and size; no HTTP client crate for one GET), the answer read by
//! [`crate::http::parse_response`] and decoded. Must not: talk to anything but the
//! address it is given, or present what it read ([`super::render`] does).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::http::parse_response;
use crate::metrics::board::Status;

/// Connecting, sending and reading the answer together get this long.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read; a status of thousands of nodes' drift fits many times.
pub const MAX_RESPONSE: usize = 16 * 1024 * 1024;

/// Why no status could be read.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("--addr {addr:?}: {reason}")]
    Address { addr: String, reason: String },
    #[error(
        "cannot connect to {addr}: {source}; is the speaker running there? On another \
         machine pass --addr NODE_IP:9477 (the speaker's `run --metrics-addr`)"
    )]
    Connect {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("{addr}: {source}")]
    Io {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error(
        "{addr}: no answer within {timeout:?}; is this the speaker's `run --metrics-addr` \
         (default port 9477), and does a firewall drop it?"
    )]
    Timeout { addr: SocketAddr, timeout: Duration },
    #[error(
        "{addr}: not an HTTP/1.x answer ({reason}); is this the speaker's `run --metrics-addr` \
         (default port 9477)?"
    )]
    Http { addr: SocketAddr, reason: String },
    #[error("{addr}: /status answered {code}: {body}")]
    Status {
        addr: SocketAddr,
        code: u16,
        body: String,
    },
    #[error("{addr}: /status is not a podcidr-speaker status document: {source}")]
    Json {
        addr: SocketAddr,
        #[source]
        source: serde_json::Error,
    },
}

/// GETs `/status` from `addr` (HOST:PORT) and decodes it.
pub fn fetch(addr: &str, timeout: Duration) -> Result<Status, StatusError> {
    fetch_path(addr, "/status", timeout)
}

/// GETs a status document at `path` (`/status`, `/status?routes=N`) and decodes it.
pub fn fetch_path(addr: &str, path: &str, timeout: Duration) -> Result<Status, StatusError> {
    let deadline = Instant::now() + timeout;
    let target = resolve(addr)?;
    let (code, body) = get(target, addr, path, deadline, timeout)?;
    if code != 200 {
        return Err(StatusError::Status {
            addr: target,
            code,
            body: String::from_utf8_lossy(&body).trim().to_owned(),
        });
    }
    serde_json::from_slice(&body).map_err(|source| StatusError::Json {
        addr: target,
        source,
    })
}

fn resolve(addr: &str) -> Result<SocketAddr, StatusError> {
    let bad = |reason: String| StatusError::Address {
        addr: addr.to_owned(),
        reason,
    };
    addr.to_socket_addrs()
        .map_err(|e| bad(e.to_string()))?
        .next()
        .ok_or_else(|| bad("resolves to no address".to_owned()))
}

/// One HTTP/1.1 GET with `Connection: close`; the answer's status code and body.
fn get(
    target: SocketAddr,
    host: &str,
    path: &str,
    deadline: Instant,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), StatusError> {
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(StatusError::Timeout {
                addr: target,
                timeout,
            })
    };
    let io_err = |source: io::Error| match source.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => StatusError::Timeout {
            addr: target,
            timeout,
        },
        _ => StatusError::Io {
            addr: target,
            source,
        },
    };
    let mut stream = TcpStream::connect_timeout(&target, left()?).map_err(|source| {
        if source.kind() == io::ErrorKind::TimedOut {
            StatusError::Timeout {
                addr: target,
                timeout,
            }
        } else {
            StatusError::Connect {
                addr: target,
                source,
            }
        }
    })?;
    stream.set_write_timeout(Some(left()?)).map_err(io_err)?;
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: application/json\r\n\
         User-Agent: podcidr-speaker/{}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    stream.write_all(request.as_bytes()).map_err(io_err)?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        stream.set_read_timeout(Some(left()?)).map_err(io_err)?;
        let n = stream.read(&mut chunk).map_err(io_err)?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
        if answer.len() > MAX_RESPONSE {
            return Err(StatusError::Http {
                addr: target,
                reason: format!("answer longer than {MAX_RESPONSE} octets"),
            });
        }
    }
    parse_response(&answer).map_err(|reason| StatusError::Http {
        addr: target,
        reason,
    })
}
