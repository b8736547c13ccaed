//! The startup gate's probe (`run --cilium-health-addr`): asks the Cilium agent on this
//! node whether it is healthy, so that the daemon announces nothing before the node's
//! datapath is programmed. Cilium's agent serves `GET /healthz` on 127.0.0.1:9879 (and
//! ::1) by default, answering 200 when its status is Ok and 503 otherwise; the kubelet
//! probes it the same way.
//!
//! Owns: one HTTP/1.1 GET at a time over a tokio `TcpStream` to the address given,
//! bounded by [`PROBE_TIMEOUT`] and [`MAX_ANSWER`] (the answer is parsed by
//! [`crate::http::parse_response`], which the `status` command's client shares),
//! repeated every [`POLL`] by [`spawn`]. Must not:
//! talk to any other address, or decide anything about routes (the daemon holds the
//! first announcement until the gate opens, and only reports later flaps).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How often the agent is asked.
pub const POLL: Duration = Duration::from_secs(1);
/// Connecting, asking and reading the answer together get this long.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The largest answer read (Cilium's is empty).
pub const MAX_ANSWER: usize = 64 * 1024;
/// The path Cilium's agent serves its health on.
pub const PATH: &str = "/healthz";

/// What the last probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// No answer yet.
    Unknown,
    /// 200.
    Healthy,
    /// Another status, no answer in time, or no connection: why.
    Unhealthy(String),
}

impl Health {
    pub fn is_healthy(&self) -> bool {
        matches!(self, Health::Healthy)
    }
}

/// Asks the agent at `addr` once: `Healthy` on 200, else `Unhealthy` with the reason.
pub async fn probe(addr: SocketAddr, timeout: Duration) -> Health {
    match tokio::time::timeout(timeout, get(addr)).await {
        Ok(Ok(200)) => Health::Healthy,
        Ok(Ok(code)) => Health::Unhealthy(format!("GET {PATH} answered {code}")),
        Ok(Err(e)) => Health::Unhealthy(e),
        Err(_) => Health::Unhealthy(format!("no answer within {}s", timeout.as_secs())),
    }
}

/// Probes `addr` every [`POLL`] until the receiver is dropped; the receiver sees each
/// change (and the reason of each new failure).
pub fn spawn(addr: SocketAddr) -> (watch::Receiver<Health>, JoinHandle<()>) {
    let (tx, rx) = watch::channel(Health::Unknown);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let health = probe(addr, PROBE_TIMEOUT).await;
            tx.send_if_modified(|h| {
                let changed = *h != health;
                *h = health;
                changed
            });
            if tx.is_closed() {
                return;
            }
        }
    });
    (rx, task)
}

/// One GET with `Connection: close`; the status code.
async fn get(addr: SocketAddr) -> Result<u16, String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    // Cilium's probes send `brief: true`: the short check, as the kubelet does it.
    let request = format!(
        "GET {PATH} HTTP/1.1\r\nHost: {addr}\r\nbrief: true\r\n\
         User-Agent: podcidr-speaker/{}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|e| format!("cannot read the answer: {e}"))?;
        if n == 0 {
            break;
        }
        answer.extend_from_slice(&chunk[..n]);
        if answer.len() > MAX_ANSWER {
            return Err(format!("answer longer than {MAX_ANSWER} octets"));
        }
    }
    crate::http::parse_response(&answer)
        .map(|(code, _)| code)
        .map_err(|e| format!("not an HTTP/1.x answer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Answers each connection with the next status line of `codes`.
    async fn server(codes: Vec<&'static str>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for code in codes {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let answer = format!("HTTP/1.1 {code}\r\nContent-Length: 0\r\n\r\n");
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        addr
    }

    #[tokio::test]
    async fn only_200_is_healthy() {
        let addr = server(vec!["503 Service Unavailable", "200 OK", "500 Oops"]).await;
        assert_eq!(
            probe(addr, PROBE_TIMEOUT).await,
            Health::Unhealthy("GET /healthz answered 503".into())
        );
        assert_eq!(probe(addr, PROBE_TIMEOUT).await, Health::Healthy);
        assert_eq!(
            probe(addr, PROBE_TIMEOUT).await,
            Health::Unhealthy("GET /healthz answered 500".into())
        );
    }

    #[tokio::test]
    async fn nobody_listening_is_unhealthy() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        match probe(addr, PROBE_TIMEOUT).await {
            Health::Unhealthy(why) => assert!(why.starts_with("cannot connect"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
