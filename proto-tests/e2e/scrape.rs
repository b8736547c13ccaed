//! Reading a running speaker's endpoint (`--metrics-addr`): one HTTP/1.1 GET, and the
//! value of one series from the Prometheus text exposition.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET path`: the status code and the body.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to the speaker's endpoint {addr}: {e}"));
    stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("GET {path}: no header end in {response:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: bad status line in {head:?}"));
    (status, body.to_string())
}

/// The value of the series `name` whose labels include every `labels` pair; `None`
/// when there is no such series.
pub fn value(exposition: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    exposition.lines().find_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, series_labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        if series_name != name {
            return None;
        }
        let all = labels.iter().all(|(k, v)| {
            series_labels
                .split(',')
                .any(|p| p == format!("{k}=\"{v}\""))
        });
        if !all {
            return None;
        }
        value.parse().ok()
    })
}

/// Whether any series mentions `peer` (a removed peer must leave none behind).
pub fn mentions_peer(exposition: &str, peer: &str) -> bool {
    let label = format!("peer=\"{peer}\"");
    exposition
        .lines()
        .any(|l| !l.starts_with('#') && l.contains(&label))
}

/// Polls `/metrics` until `pred` holds; returns that exposition.
pub fn wait_metrics(addr: SocketAddr, what: &str, pred: impl Fn(&str) -> bool) -> String {
    crate::harness::wait_for(what, crate::WAIT, || {
        let (status, body) = get(addr, "/metrics");
        if status == 200 && pred(&body) {
            Ok(body)
        } else {
            Err(format!("HTTP {status}:\n{body}"))
        }
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP podcidr_speaker_session_up 1 when Established.
# TYPE podcidr_speaker_session_up gauge
podcidr_speaker_session_up{peer=\"100.64.0.2:179\"} 1
podcidr_speaker_session_up{peer=\"100.64.0.3:179\"} 0
podcidr_speaker_announced_prefixes{afi=\"ipv4\",peer=\"100.64.0.2:179\"} 4
podcidr_speaker_view_nodes 4
";

    #[test]
    fn values_are_found_by_name_and_labels() {
        let up = |p| value(TEXT, "podcidr_speaker_session_up", &[("peer", p)]);
        assert_eq!(up("100.64.0.2:179"), Some(1.0));
        assert_eq!(up("100.64.0.3:179"), Some(0.0));
        assert_eq!(up("100.64.0.4:179"), None);
        assert_eq!(
            value(
                TEXT,
                "podcidr_speaker_announced_prefixes",
                &[("peer", "100.64.0.2:179"), ("afi", "ipv4")]
            ),
            Some(4.0)
        );
        assert_eq!(value(TEXT, "podcidr_speaker_view_nodes", &[]), Some(4.0));
        assert_eq!(value(TEXT, "podcidr_speaker_view", &[]), None);
        assert!(mentions_peer(TEXT, "100.64.0.3:179"));
        assert!(!mentions_peer(TEXT, "100.64.0.9:179"));
    }
}
