//! The `decode` subcommand: picks the source the arguments name, writes one JSON line
//! per event, and counts what the exit status is made of. Reads stdin only for `-`.

use super::event::Event;
use super::source::{self, Options, Sink};
use super::{flows, input, Error};
use crate::cli::{AsWidth, DecodeArgs};
use std::io::{self, BufWriter, Write};

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

/// Runs `decode` with `args`, writing JSON lines to `out`. An `Err` is a usage or I/O
/// problem (exit status 2); a closed output pipe just ends the run early.
pub fn run(args: &DecodeArgs, out: impl Write) -> Result<Outcome, Error> {
    let options = Options {
        four_octet_as: match args.as_width {
            AsWidth::Auto => None,
            AsWidth::Two => Some(false),
            AsWidth::Four => Some(true),
        },
        extended_message: args.extended_message,
        add_path: args.add_path,
    };
    let mut sink = LineSink {
        out: BufWriter::new(out),
        outcome: Outcome::default(),
        error: None,
    };
    if let Some(hex) = &args.hex {
        let bytes = source::parse_hex(hex)?;
        source::stream(&bytes[..], &options, &mut sink)?;
    } else if let Some(path) = &args.mrt {
        source::mrt(input::open(path)?, &mut sink);
    } else if let Some(path) = &args.pcap {
        flows::pcap(input::open(path)?, &options, &mut sink)?;
    } else {
        source::stream(io::stdin().lock(), &options, &mut sink)?;
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
