//! Session scripts with a virtual clock: the state machine driven input by input, alone
//! against a scripted peer or against another of our sessions, asserting what it asks the
//! driver to do and when. No sockets and no runtime; time moves only when a test moves it.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod harness;

mod backoff;
mod bfd;
mod collision;
mod delay_open;
mod drain;
mod extended_next_hop;
mod fsm_errors;
mod graceful_restart;
mod hold;
mod hold_timer;
mod keepalive;
mod lifecycle;
mod max_prefix;
mod open_errors;
mod route_refresh;
mod second_speaker;
mod shutdown;
