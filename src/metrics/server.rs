//! The HTTP endpoint (`--metrics-addr`): `/metrics`, `/healthz`, `/readyz`, `/status`.
//!
//! A small HTTP/1.1 responder on tokio's `TcpListener` rather than hyper: four GET
//! paths, no bodies to read, one response per connection (`Connection: close`), which is
//! all Prometheus, the kubelet's probes and the `status` command need. It keeps the
//! dependency tree as it is (hyper is only a dev-dependency here) and keeps every limit
//! in sight: a request head is at most [`MAX_HEAD`] octets and must arrive within
//! [`IO_TIMEOUT`], at most [`MAX_CONNECTIONS`] are served at once (more are closed
//! unanswered), and every path answers from memory after asking the daemon's main loop
//! to bring it up to date, waiting at most [`REFRESH_WAIT`] ([`Metrics::refresh`]: an
//! idle daemon has no tick of its own that would).
//!
//! Owns: the listener socket and the HTTP framing. Must not: compute anything the
//! [`Metrics`] does not already hold.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::Metrics;

/// The largest request head read (request line and headers).
pub const MAX_HEAD: usize = 8 * 1024;
/// Reading the request and writing the response each get this long.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 32;
/// Routes listed per peer (held, and pending) by `/status?routes` without a number.
pub const DEFAULT_ROUTES_LIMIT: usize = 100;
/// The most routes listed per peer and list, whatever is asked: bounds the document
/// (the counts are always whole).
pub const MAX_ROUTES_LIMIT: usize = 10_000;
/// How long the main loop gets to answer before a request is answered from what the
/// metrics hold: well inside the liveness probe's 2 s timeout; a live loop answers
/// within milliseconds, a busy one (a large re-plan) within this.
pub const REFRESH_WAIT: Duration = Duration::from_secs(1);
/// How long a peer task gets to answer a routes query (it answers between two events).
pub const ROUTES_TIMEOUT: Duration = Duration::from_secs(2);

/// Binds the endpoint's listener (`--metrics-addr`; port 0 picks a free port, see
/// `local_addr`).
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves the endpoint until `shutdown` completes. Connections in flight finish on
/// their own (each is bounded by [`IO_TIMEOUT`]).
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()>,
) {
    accept(listener, shutdown, move |stream| {
        let metrics = Arc::clone(&metrics);
        async move { connection(stream, &metrics).await }
    })
    .await
}

/// What another role (`allocate`) answers on its endpoint: the response to a GET or
/// HEAD of a path (the query left off), from memory once its loop has been asked to
/// turn where the path needs it (bounded by [`REFRESH_WAIT`]).
pub type Answer = Arc<dyn Fn(String) -> BoxFuture<'static, Response> + Send + Sync>;

/// Serves `answer` with the same framing and limits as [`serve`] until `shutdown`
/// completes.
pub async fn serve_answers(
    listener: TcpListener,
    answer: Answer,
    shutdown: impl Future<Output = ()>,
) {
    accept(listener, shutdown, move |mut stream| {
        let answer = Arc::clone(&answer);
        async move {
            let head = match tokio::time::timeout(IO_TIMEOUT, read_head(&mut stream)).await {
                Ok(Ok(Some(head))) => head,
                Ok(Ok(None)) => {
                    let r = Response::text(431, "request head too large\n");
                    return write(&mut stream, &r.to_bytes(false)).await;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "request head")),
            };
            let (response, head_only) = match request_line(&head) {
                None => (Response::text(400, "bad request\n"), false),
                Some((method, target)) if matches!(method, "GET" | "HEAD") => {
                    let path = target.split_once('?').map_or(target, |(p, _)| p);
                    (answer(path.to_owned()).await, method == "HEAD")
                }
                Some(_) => {
                    let mut r = Response::text(405, "only GET and HEAD\n");
                    r.headers.push(("Allow", "GET, HEAD".to_owned()));
                    (r, false)
                }
            };
            write(&mut stream, &response.to_bytes(head_only)).await
        }
    })
    .await
}

/// The accept loop both endpoints share: at most [`MAX_CONNECTIONS`] served at once,
/// each on its own task.
async fn accept<F, Fut>(listener: TcpListener, shutdown: impl Future<Output = ()>, serve: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = io::Result<()>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => return,
        };
        let (stream, remote) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                warn!(error = %e, "metrics endpoint cannot accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            debug!(remote = %remote, "metrics endpoint busy, connection closed");
            continue;
        };
        let served = serve(stream);
        tokio::spawn(async move {
            if let Err(e) = served.await {
                debug!(remote = %remote, error = %e, "metrics endpoint connection failed");
            }
            drop(slot);
        });
    }
}

/// One response, ready to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
    /// Extra headers (name, value).
    pub headers: Vec<(&'static str, String)>,
}

impl Response {
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8".to_owned(),
            body: body.into().into_bytes(),
            headers: Vec::new(),
        }
    }

    /// The status line, headers and (unless `head_only`) the body.
    pub fn to_bytes(&self, head_only: bool) -> Vec<u8> {
        let mut out = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Cache-Control: no-store\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        let mut bytes = out.into_bytes();
        if !head_only {
            bytes.extend_from_slice(&self.body);
        }
        bytes
    }
}

/// The response to a request head (everything up to the blank line), and whether only
/// the head is to be sent (HEAD). Pure apart from reading `metrics`.
pub fn respond(
    head: &[u8],
    metrics: &Metrics,
    now: SystemTime,
    instant: Instant,
) -> (Response, bool) {
    let Some((method, target)) = request_line(head) else {
        return (Response::text(400, "bad request\n"), false);
    };
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        let mut r = Response::text(405, "only GET and HEAD\n");
        r.headers.push(("Allow", "GET, HEAD".to_owned()));
        return (r, false);
    }
    let path = target.split_once('?').map_or(target, |(p, _)| p);
    let response = match path {
        "/metrics" => Response {
            status: 200,
            content_type: metrics.content_type(),
            body: metrics.encode().into_bytes(),
            headers: Vec::new(),
        },
        "/healthz" => {
            if metrics.alive_at(instant) {
                Response::text(200, "ok\n")
            } else {
                Response::text(503, "the main loop has not reported for too long\n")
            }
        }
        "/readyz" => {
            let r = metrics.readiness_at(instant);
            match (r.ready, r.reasons.is_empty()) {
                (true, true) => Response::text(200, "ready\n"),
                (true, false) => Response::text(200, format!("ready; {}\n", r.reasons.join("; "))),
                (false, _) => Response::text(503, format!("not ready: {}\n", r.reasons.join("; "))),
            }
        }
        "/status" => json(&metrics.status(now, instant)),
        _ => Response::text(
            404,
            "not found: try /metrics, /healthz, /readyz or /status\n",
        ),
    };
    (response, head_only)
}

fn json(status: &super::Status) -> Response {
    match serde_json::to_vec_pretty(status) {
        Ok(mut body) => {
            body.push(b'\n');
            Response {
                status: 200,
                content_type: "application/json".to_owned(),
                body,
                headers: Vec::new(),
            }
        }
        Err(e) => Response::text(500, format!("cannot serialize the status: {e}\n")),
    }
}

/// The `routes` parameter of a request target: `None` without one; the number of routes
/// to list per peer (at most [`MAX_ROUTES_LIMIT`]; [`DEFAULT_ROUTES_LIMIT`] for a bare
/// `routes`), or why the value is refused.
pub fn routes_limit(target: &str) -> Option<Result<usize, String>> {
    let (_, query) = target.split_once('?')?;
    let value = query
        .split('&')
        .find_map(|pair| match pair.split_once('=') {
            Some(("routes", v)) => Some(Some(v)),
            None if pair == "routes" => Some(None),
            _ => None,
        })?;
    Some(match value {
        None | Some("") => Ok(DEFAULT_ROUTES_LIMIT),
        Some(v) => v
            .parse::<usize>()
            .map(|n| n.min(MAX_ROUTES_LIMIT))
            .map_err(|_| format!("routes={v:?}: expected a number of routes per peer")),
    })
}

/// [`respond`] once the main loop has brought the figures up to date ([`Metrics::refresh`],
/// bounded by [`REFRESH_WAIT`]), plus `/status?routes=N`: the status document with each peer's
/// Adj-RIB-Out, asked of every peer task at once (each bounded by [`ROUTES_TIMEOUT`]; a
/// task that does not answer is reported as such).
pub async fn respond_async(head: &[u8], metrics: &Metrics) -> (Response, bool) {
    if request_line(head).is_some() {
        metrics.refresh(REFRESH_WAIT).await;
    }
    let asked = request_line(head)
        .filter(|(method, target)| {
            matches!(*method, "GET" | "HEAD")
                && target.split_once('?').map_or(*target, |(p, _)| p) == "/status"
        })
        .and_then(|(method, target)| Some((method == "HEAD", routes_limit(target)?)));
    let Some((head_only, limit)) = asked else {
        return respond(head, metrics, SystemTime::now(), Instant::now());
    };
    let limit = match limit {
        Ok(n) => n,
        Err(e) => return (Response::text(400, format!("{e}\n")), head_only),
    };
    let queries = metrics.routes_queries();
    let answers = futures::future::join_all(
        queries
            .iter()
            .map(|(_, q)| crate::peer::query_routes(q, limit, ROUTES_TIMEOUT)),
    )
    .await;
    let now = SystemTime::now();
    let mut status = metrics.status(now, Instant::now());
    for ((key, _), answer) in queries.iter().zip(answers) {
        if let Some(p) = status
            .peers
            .iter_mut()
            .find(|p| p.address == key.address && p.port == key.port)
        {
            p.routes = Some(match answer {
                Some(answer) => super::board::RoutesReport::from_answer(&answer, limit, now),
                None => super::board::RoutesReport::unanswered(limit),
            });
        }
    }
    (json(&status), head_only)
}

async fn connection(mut stream: TcpStream, metrics: &Metrics) -> io::Result<()> {
    let head = match tokio::time::timeout(IO_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(Some(head))) => head,
        Ok(Ok(None)) => {
            let r = Response::text(431, "request head too large\n");
            return write(&mut stream, &r.to_bytes(false)).await;
        }
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "request head")),
    };
    let (response, head_only) = respond_async(&head, metrics).await;
    write(&mut stream, &response.to_bytes(head_only)).await
}

async fn write(stream: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
    tokio::time::timeout(IO_TIMEOUT, async {
        stream.write_all(bytes).await?;
        stream.shutdown().await
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "response"))?
}

/// Reads until the blank line that ends the request head. `None` when the head is
/// longer than [`MAX_HEAD`]; an error when the client closes first.
async fn read_head(stream: &mut TcpStream) -> io::Result<Option<Vec<u8>>> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the end of the request head",
            ));
        }
        // Only the new octets (and the three before them) can complete the terminator.
        let from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find(&buf[from..], b"\r\n\r\n") {
            let len = from + end + 4;
            if len > MAX_HEAD {
                return Ok(None);
            }
            buf.truncate(len);
            return Ok(Some(buf));
        }
        if buf.len() > MAX_HEAD {
            return Ok(None);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The method and target of an HTTP/1.x request line.
fn request_line(head: &[u8]) -> Option<(&str, &str)> {
    let end = find(head, b"\r\n")?;
    let line = std::str::from_utf8(&head[..end]).ok()?;
    let mut parts = line.split(' ');
    let method = parts.next()?;
    let target = parts.next()?;
    let version = parts.next()?;
    if parts.next().is_some() || !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return None;
    }
    Some((method, target))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> Vec<u8> {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
    }

    #[test]
    fn the_routes_parameter_is_bounded_and_checked() {
        assert_eq!(routes_limit("/status"), None);
        assert_eq!(routes_limit("/status?x=1"), None);
        assert_eq!(
            routes_limit("/status?routes"),
            Some(Ok(DEFAULT_ROUTES_LIMIT))
        );
        assert_eq!(
            routes_limit("/status?routes="),
            Some(Ok(DEFAULT_ROUTES_LIMIT))
        );
        assert_eq!(routes_limit("/status?x=1&routes=5"), Some(Ok(5)));
        assert_eq!(routes_limit("/status?routes=0"), Some(Ok(0)));
        assert_eq!(
            routes_limit("/status?routes=99999999"),
            Some(Ok(MAX_ROUTES_LIMIT))
        );
        let err = routes_limit("/status?routes=all").unwrap().unwrap_err();
        assert!(err.contains("\"all\""), "{err}");
    }

    #[test]
    fn request_lines_parse_strictly() {
        assert_eq!(
            request_line(b"GET /metrics HTTP/1.1\r\n\r\n"),
            Some(("GET", "/metrics"))
        );
        assert_eq!(
            request_line(b"HEAD /a?b HTTP/1.0\r\n\r\n"),
            Some(("HEAD", "/a?b"))
        );
        assert_eq!(request_line(b"GET /metrics\r\n\r\n"), None);
        assert_eq!(request_line(b"GET metrics HTTP/1.1\r\n\r\n"), None);
        assert_eq!(request_line(b"GET / HTTP/2\r\n\r\n"), None);
        assert_eq!(request_line(b"GET / HTTP/1.1 x\r\n\r\n"), None);
        assert_eq!(request_line(b"\xff\xfe / HTTP/1.1\r\n\r\n"), None);
        assert_eq!(request_line(b"GET / HTTP/1.1"), None);
    }

    #[test]
    fn paths_methods_and_errors_map_to_status_codes() {
        let m = Metrics::new();
        let now = SystemTime::now();
        let at = Instant::now();
        let code = |head: &[u8]| respond(head, &m, now, at).0.status;
        assert_eq!(code(&get("/metrics")), 200);
        assert_eq!(code(&get("/metrics?x=1")), 200);
        assert_eq!(code(&get("/healthz")), 200);
        assert_eq!(code(&get("/readyz")), 503);
        assert_eq!(code(&get("/status")), 200);
        assert_eq!(code(&get("/")), 404);
        assert_eq!(code(b"POST /metrics HTTP/1.1\r\n\r\n"), 405);
        assert_eq!(code(b"garbage\r\n\r\n"), 400);
        let (r, head_only) = respond(b"HEAD /healthz HTTP/1.1\r\n\r\n", &m, now, at);
        assert!(head_only);
        let bytes = r.to_bytes(true);
        assert!(bytes.ends_with(
            b"Content-Length: 3\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        ));
    }

    #[test]
    fn healthz_fails_when_the_heartbeat_is_stale() {
        let m = Metrics::with_liveness(Duration::from_secs(10));
        let start = Instant::now();
        m.beat_at(start);
        let now = SystemTime::now();
        assert_eq!(
            respond(&get("/healthz"), &m, now, start + Duration::from_secs(9))
                .0
                .status,
            200
        );
        let (r, _) = respond(&get("/healthz"), &m, now, start + Duration::from_secs(11));
        assert_eq!(r.status, 503);
        m.beat_at(start + Duration::from_secs(11));
        assert_eq!(
            respond(&get("/healthz"), &m, now, start + Duration::from_secs(12))
                .0
                .status,
            200
        );
    }

    #[test]
    fn response_bytes_carry_length_and_close() {
        let r = Response::text(404, "nope\n");
        let text = String::from_utf8(r.to_bytes(false)).unwrap();
        assert_eq!(
            text,
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Length: 5\r\nCache-Control: no-store\r\nConnection: close\r\n\r\nnope\n"
        );
    }
}
