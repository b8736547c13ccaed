//! The one-shot commands: `check`, `plan`, `doctor`, `status` and `decode`'s entry
//! point. Each takes a request of its own (built from the command line by `cli`),
//! writes its output to the writers it is given and returns the process exit status.
//! `run` is the daemon's (`crate::daemon`).
//!
//! Owns: what each command reads, its wording and its exit status; [`table`], the text
//! table `status` and `doctor` share; [`allocation`], the allocator's answer from
//! scratch that `plan` and `doctor` show. Must not: decide anything the library decides
//! (what is in force, what is announced, what a session does): the commands read those
//! answers and present them.

pub mod allocation;
pub mod check;
pub mod decode;
pub mod doctor;
pub mod plan;
pub mod status;
pub mod table;
