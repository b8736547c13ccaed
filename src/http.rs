//! The one piece of HTTP/1.1 both of the speaker's clients share: reading an answer.
//! The startup gate (`gate.rs`, async, to the Cilium agent) and the `status` command
//! (`commands::status`, blocking, to a speaker) each send one GET with
//! `Connection: close` and read the answer to EOF; this module turns those bytes into
//! a status code and a body.
//!
//! Owns: [`parse_response`]. Pure: no socket, no clock, no crate module. Must not:
//! grow into an HTTP client (no crate for one GET; chunked encoding is refused because
//! neither server the speaker asks uses it).

/// Splits an HTTP/1.x answer read to EOF into its status code and body (honouring
/// Content-Length when present; chunked encoding is refused, the speaker never uses it).
pub fn parse_response(answer: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = answer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&answer[..end]).map_err(|_| "headers are not UTF-8")?;
    let body = &answer[end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(format!("status line {status_line:?}"));
    }
    let code: u16 = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("status line {status_line:?}"))?;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("header line {line:?}"));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| format!("Content-Length {value:?}"))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(format!("unexpected Transfer-Encoding {value:?}"));
        }
    }
    match length {
        Some(n) if n > body.len() => Err(format!(
            "body of {} octets, Content-Length says {n}",
            body.len()
        )),
        Some(n) => Ok((code, body[..n].to_vec())),
        None => Ok((code, body.to_vec())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_parse_with_and_without_content_length() {
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}trailing"),
            Ok((200, b"{}".to_vec()))
        );
        assert_eq!(
            parse_response(b"HTTP/1.0 503 Service Unavailable\r\n\r\nnot ready\n"),
            Ok((503, b"not ready\n".to_vec()))
        );
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{}").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 200 OK\r\n").is_err());
        assert!(parse_response(b"HTTP/1.1 abc OK\r\n\r\n").is_err());
    }
}
