//! Decoding a request: picks the source the [`Request`] names, writes one JSON line per
//! event, and counts what the exit status is made of. Reads stdin only for
//! [`Input::Stdin`]. The command's entry point (messages, exit status) is
//! `commands::decode`.

use super::event::Event;
use super::source::{self, Options, Sink};
use super::{flows, input, Error};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

/// What to decode and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub input: Input,
    /// `Some(true)`: 4-octet AS numbers (RFC 6793); `Some(false)`: 2-octet; `None`:
    /// from the OPENs, else both tried.
    pub four_octet_as: Option<bool>,
    /// Messages up to 65535 octets (RFC 8654) where no OPEN says so.
    pub extended_message: bool,
    /// NLRI carry ADD-PATH path identifiers (RFC 7911) where no OPEN says so.
    pub add_path: bool,
}

/// Where the bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// Whole BGP messages as hex.
    Hex(String),
    /// An MRT file (RFC 6396), plain or compressed.
    Mrt(PathBuf),
    /// A pcap or pcapng capture, plain or compressed.
    Pcap(PathBuf),
    /// Raw BGP messages on standard input.
    Stdin,
}

/// What a run found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Objects written.
    pub events: u64,
    /// BGP messages among them, malformed ones included.
    pub messages: u64,
    /// Malformed messages and damaged-input reports (see [`Event::is_malformed`]).
    pub malformed: u64,
}

impl Outcome {
    /// 0 when everything decoded cleanly, 1 when something was malformed. (2, for
    /// usage and I/O errors, is the caller's.)
    pub fn exit_code(&self) -> u8 {
        u8::from(self.malformed > 0)
    }
}

struct LineSink<W: Write> {
    out: BufWriter<W>,
    outcome: Outcome,
    error: Option<io::Error>,
}

impl<W: Write> Sink for LineSink<W> {
    fn event(&mut self, event: Event) {
        self.outcome.events += 1;
        if matches!(
            event,
            Event::Message { .. } | Event::BadHeader { .. } | Event::Truncated { .. }
        ) {
            self.outcome.messages += 1;
        }
        if event.is_malformed() {
            self.outcome.malformed += 1;
        }
        if self.error.is_none() {
            let line = event.to_json().to_line();
            if let Err(e) = self
                .out
                .write_all(line.as_bytes())
                .and_then(|()| self.out.write_all(b"\n"))
            {
                self.error = Some(e);
            }
        }
    }

    fn full(&self) -> bool {
        self.error.is_some()
    }
}

/// Decodes `request`, writing JSON lines to `out`. An `Err` is a usage or I/O problem
/// (exit status 2); a closed output pipe just ends the run early.
pub fn run(request: &Request, out: impl Write) -> Result<Outcome, Error> {
    let options = Options {
        four_octet_as: request.four_octet_as,
        extended_message: request.extended_message,
        add_path: request.add_path,
    };
    let mut sink = LineSink {
        out: BufWriter::new(out),
        outcome: Outcome::default(),
        error: None,
    };
    match &request.input {
        Input::Hex(hex) => {
            let bytes = source::parse_hex(hex)?;
            source::stream(&bytes[..], &options, &mut sink)?;
        }
        Input::Mrt(path) => source::mrt(input::open(path)?, &mut sink),
        Input::Pcap(path) => flows::pcap(input::open(path)?, &options, &mut sink)?,
        Input::Stdin => source::stream(io::stdin().lock(), &options, &mut sink)?,
    }
    let flushed = match sink.error.take() {
        Some(e) => Err(e),
        None => sink.out.flush(),
    };
    match flushed {
        Ok(()) => Ok(sink.outcome),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(sink.outcome),
        Err(e) => Err(Error::Write(e)),
    }
}
