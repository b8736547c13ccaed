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
//! Large allocations are kept out of the arenas altogether ([`keep_large_apart`]): glibc
//! maps each one of at least 128 KiB on its own, but raises that threshold every time it
//! frees such a mapping, up to 32 MiB. After a 50,000-node cluster state was read and
//! freed, every later allocation below its size (a table's UPDATE buffer, a vector of
//! 50,000 routes growing) came from an arena, between allocations that last, and the
//! pages it left when freed could not be returned: 57 MiB after the load, 39 MiB with
//! the threshold fixed at [`MMAP_THRESHOLD`] (BENCHMARKS.md, "Large allocations kept out
//! of the arenas").
//!
//! Other C libraries and platforms: nothing to do (musl gives memory back itself).
//!
//! Must not: run on the event path (it runs on a task of its own, after [`QUIET`]).
//!
//! With `peer/socket.rs` and `main.rs`'s `pow`, the only code allowed `unsafe`: calls into
//! glibc's malloc, which the libc crate declares and nothing safe wraps.
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

/// Allocations of this size or more get a mapping of their own, returned to the system
/// when freed. 1 MiB: receiving 100,000 routes peaks as low as before, where 2 and 4 MiB
/// peaked 1.6 MiB higher (its 1-4 MiB maps then grew inside an arena). The price: a
/// 5,000-node event's two buffers of 1-1.5 MiB are mapped afresh each time, about
/// 0.6 ms more at the median (BENCHMARKS.md, "Large allocations kept out of the arenas").
pub const MMAP_THRESHOLD: usize = 1 << 20;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD`], which also stops glibc from
/// raising it (see the module's comment). Called once, before the runtime starts its
/// threads. Leaves glibc's own choice when the operator set one
/// (`GLIBC_TUNABLES=glibc.malloc.mmap_threshold=...` or `MALLOC_MMAP_THRESHOLD_`):
/// whether it set it.
pub fn keep_large_apart() -> bool {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if operator_set(
        &tunables,
        std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some(),
    ) {
        return false;
    }
    set_mmap_threshold(MMAP_THRESHOLD)
}

/// Whether the environment already says what the mmap threshold is.
fn operator_set(glibc_tunables: &str, malloc_env: bool) -> bool {
    malloc_env
        || glibc_tunables
            .split(':')
            .any(|t| t.trim().starts_with("glibc.malloc.mmap_threshold="))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_mmap_threshold(bytes: usize) -> bool {
    let Ok(bytes) = libc::c_int::try_from(bytes) else {
        return false;
    };
    // SAFETY: mallopt takes malloc's locks itself; M_MMAP_THRESHOLD only sets a number.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_mmap_threshold(_bytes: usize) -> bool {
    false
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
    fn an_operators_threshold_is_left_alone() {
        assert!(!operator_set("", false));
        assert!(!operator_set("glibc.malloc.arena_max=1", false));
        assert!(operator_set(
            "glibc.malloc.arena_max=1:glibc.malloc.mmap_threshold=65536",
            false
        ));
        assert!(operator_set("", true));
    }

    /// glibc's own rule raises the threshold to the size of a freed mapping; fixed, a
    /// large allocation after a larger one is freed still gets its own mapping.
    #[test]
    fn large_allocations_keep_their_own_mapping() {
        // glibc's chunk header: the word before the pointer malloc returns is the
        // chunk's size, whose bit 1 (IS_MMAPPED) says it has a mapping of its own.
        // Read from the chunk itself, so other tests' allocations cannot disturb it.
        let own_mapping = |v: &Vec<u8>| {
            // SAFETY: a Vec<u8> of this size is one malloc'd chunk (the system
            // allocator calls malloc for alignments up to 16); its header precedes it.
            let size = unsafe { (v.as_ptr() as *const usize).sub(1).read() };
            size & 2 != 0
        };
        assert!(set_mmap_threshold(MMAP_THRESHOLD));
        let big = vec![1u8; 32 * MMAP_THRESHOLD];
        assert!(own_mapping(&big));
        drop(std::hint::black_box(big));
        let large = vec![1u8; 2 * MMAP_THRESHOLD];
        assert!(
            own_mapping(&large),
            "after a 32 MiB mapping was freed, a 2 MiB allocation came from an arena"
        );
        let small = vec![1u8; MMAP_THRESHOLD / 4];
        assert!(!own_mapping(&small), "256 KiB is below the threshold");
    }

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
