//! Giving freed heap memory back to the system after large work.
//!
//! glibc's malloc keeps what the program frees, in each thread's arena, for the next
//! allocation: after loading 50,000 nodes and sending them, the heap's live bytes were
//! about 44 MiB and the RSS about 114 (BENCHMARKS.md, "RSS at 50,000 nodes"). Tuning
//! glibc to give memory back as it is freed (`trim_threshold`, one arena) made every
//! event re-fault its working set: events 1.4-2.7x slower. So this gives it back once,
//! after the work: the daemon and the peer tasks call [`after_work`] when a change has
//! been planned and written; [`run`] waits until no more work has come for [`QUIET`],
//! then, if the arenas hold at least [`HELD_AT_LEAST`] free bytes, asks glibc to
//! release them (`malloc_trim(0)`, which also returns the whole free pages inside each
//! arena, not only its top). A daemon that only ever handles small changes (a few
//! thousand nodes) holds less than that and never trims: its events keep their pages.
//! An idle daemon is never woken: [`run`] sleeps on a notification.
//!
//! Other C libraries and platforms: nothing to do (musl gives memory back itself).
//!
//! Must not: run on the event path (it runs on a task of its own, after [`QUIET`]).
//!
//! With `peer/socket.rs` and `main.rs`'s `pow`, the only code allowed `unsafe`: two calls into glibc's
//! malloc, which the libc crate declares and nothing safe wraps.
#![allow(unsafe_code)]

use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::Notify;
use tracing::debug;

/// How long no work must have come before the memory is given back: an event burst
/// (a rollout, a node pool scaling) reuses what it freed instead of re-faulting it.
pub const QUIET: Duration = Duration::from_secs(2);

/// The free bytes the arenas must hold for a trim: below this, keeping them costs
/// less than faulting them in again on the next large change.
pub const HELD_AT_LEAST: usize = 16 << 20;

fn work() -> &'static Notify {
    static WORK: OnceLock<Notify> = OnceLock::new();
    WORK.get_or_init(Notify::new)
}

/// Work that may have freed much memory has ended (a re-plan handed over, a peer's
/// Adj-RIB-Out written out). Cheap: stores a notification.
pub fn after_work() {
    work().notify_one();
}

/// Waits for work, then for [`QUIET`] without more, then trims; for ever. Spawned
/// once by the daemon.
pub async fn run() {
    loop {
        work().notified().await;
        // Each new piece of work restarts the quiet period.
        while tokio::time::timeout(QUIET, work().notified()).await.is_ok() {}
        let start = std::time::Instant::now();
        if let Some((held, released)) = trim(HELD_AT_LEAST) {
            debug!(
                held_mib = held >> 20,
                released,
                took_ms = start.elapsed().as_millis(),
                "freed heap memory given back to the system"
            );
        }
    }
}

/// Trims when the arenas hold at least `at_least` free bytes: `Some((free bytes
/// held before, whether glibc released any))`, `None` when below or not glibc.
pub fn trim(at_least: usize) -> Option<(usize, bool)> {
    let held = free_held()?;
    if held < at_least {
        return None;
    }
    Some((held, release()))
}

/// The free bytes all of malloc's arenas hold (glibc's `mallinfo2`: `fordblks`, the
/// free chunks, includes the top of each heap).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn free_held() -> Option<usize> {
    // SAFETY: mallinfo2 only reads malloc's own bookkeeping, under its locks.
    let info = unsafe { libc::mallinfo2() };
    Some(info.fordblks)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn free_held() -> Option<usize> {
    None
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release() -> bool {
    // SAFETY: malloc_trim takes malloc's locks itself; 0 keeps no pad at the top.
    unsafe { libc::malloc_trim(0) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release() -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    #[test]
    fn freed_memory_is_counted_then_given_back() {
        // 64 MiB in 64 KiB blocks (below the mmap threshold: they come from an arena,
        // as the daemon's many small allocations do), then freed but one in 64, which
        // keeps the arena's top from shrinking on its own.
        let blocks: Vec<Vec<u8>> = (0..1024).map(|i| vec![i as u8; 64 << 10]).collect();
        let before = free_held().unwrap();
        let kept: Vec<Vec<u8>> = blocks.into_iter().step_by(64).collect();
        let held = free_held().unwrap();
        assert!(held >= before + (48 << 20), "freed: {before} -> {held}");
        assert_eq!(trim(usize::MAX), None, "below the threshold: no trim");
        let (counted, released) = trim(held / 2).unwrap();
        assert!(counted >= held / 2);
        assert!(released, "glibc released the free pages");
        // The free chunks stay free (and counted): only their pages went back.
        assert!(free_held().unwrap() >= 48 << 20);
        drop(kept);
    }
}
