//! `podcidr-speaker decode`: runs [`crate::decode::run`] on a request and turns its
//! outcome into the exit status: 0 clean, 1 something malformed, 2 usage or I/O error
//! (clap exits 2 on usage errors itself).

use std::io::Write;

use crate::decode::{self, Request};

/// Exit status of a usage or I/O problem.
pub const EXIT_ERROR: u8 = 2;

/// Decodes, writing JSON lines to `out` and the summary or error to `err`; the exit
/// status.
pub fn run(request: &Request, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    match decode::run(request, out) {
        Ok(outcome) => {
            if outcome.malformed > 0 {
                let _ = writeln!(
                    err,
                    "podcidr-speaker decode: {} of {} objects report a malformed message or damaged input",
                    outcome.malformed, outcome.events
                );
            }
            outcome.exit_code()
        }
        Err(e) => {
            let _ = writeln!(err, "podcidr-speaker decode: {e}");
            EXIT_ERROR
        }
    }
}
