//! The session's timers as deadlines (RFC 4271 section 8.1.3 and 10) and the retry
//! backoff with its jitter. Time is always an `Instant` handed in by the caller; nothing
//! here reads a clock, and every deadline computation is checked so that no input can
//! overflow an `Instant`.

use std::time::{Duration, Instant};

/// The timers of RFC 4271 section 8, plus the IdleHold timer (section 8.1.1,
/// DampPeerOscillations) that spaces automatic restarts after errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Timer {
    /// Hold timer: the peer has been silent too long.
    Hold,
    /// DelayOpen: time to send our OPEN.
    DelayOpen,
    /// Keepalive: time to send a KEEPALIVE.
    Keepalive,
    /// ConnectRetry: the outgoing connection attempt took too long; try again.
    ConnectRetry,
    /// IdleHold: the wait in Idle after an error before the automatic restart.
    IdleHold,
}

impl Timer {
    /// Every timer, in the order expired timers are handled: the hold timer first, since
    /// its expiry ends the connection and makes the others moot.
    pub const ALL: [Timer; 5] = [
        Timer::Hold,
        Timer::DelayOpen,
        Timer::Keepalive,
        Timer::ConnectRetry,
        Timer::IdleHold,
    ];
}

/// RFC 4271 section 8.2.2: the hold timer while waiting for the peer's OPEN is "a large
/// value"; 4 minutes is the suggested one.
pub const OPEN_HOLD_TIME: Duration = Duration::from_secs(240);

/// The wait before the first retry after a failure: the peer may still be tearing the
/// last session down (FRR clears it for ~10 ms, GoBGP refuses connections for 5 s after
/// a session ends), so a refused dial is retried soon, and then less and less often.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);

/// The longest wait after a refusal by a switch that holds a session from our address
/// with another speaker (a collision Cease not explained by our own connections, see
/// `second_speaker`). Such a refusal says nothing about the switch being down or
/// overloaded: it says another speaker on this node (the one a migration replaces)
/// still holds the session, and the switch lets ours in the moment that one leaves. The
/// node's routes are missing from that moment until our next attempt, so the wait is
/// kept short instead of growing to the ConnectRetryTime: at most 3 s, jittered to
/// 75-100% like every wait. The switch pays a TCP accept, an OPEN and a NOTIFICATION
/// per attempt, one every few seconds per refused node, for as long as both speakers
/// run: cheap, and far below its BGP work for one session's table. The first refusals
/// are retried after the backoff's 1 and 2 s, as quick as any other failure.
pub const REFUSED_RETRY: Duration = Duration::from_secs(3);

/// A session that stayed Established this long resets the failure count when it goes
/// down: the next retry is quick again. A shorter-lived session keeps backing off, which
/// damps a peer that accepts and then immediately drops us (RFC 4271 section 8.1.1,
/// DampPeerOscillations).
pub const STABLE_ESTABLISHED: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Default)]
pub(crate) struct Timers {
    deadlines: [Option<Instant>; 5],
}

impl Timers {
    pub(crate) fn get(&self, t: Timer) -> Option<Instant> {
        self.deadlines[t as usize]
    }

    pub(crate) fn set(&mut self, t: Timer, at: Option<Instant>) {
        self.deadlines[t as usize] = at;
    }

    /// Starts `t` to fire `after` from `now`. A deadline past what `Instant` can hold never
    /// fires.
    pub(crate) fn start(&mut self, t: Timer, now: Instant, after: Duration) {
        self.set(t, now.checked_add(after));
    }

    pub(crate) fn stop(&mut self, t: Timer) {
        self.set(t, None);
    }

    pub(crate) fn stop_all(&mut self) {
        self.deadlines = [None; 5];
    }

    pub(crate) fn next(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// The first timer (in [`Timer::ALL`] order) whose deadline is at or before `now`.
    pub(crate) fn expired(&self, now: Instant) -> Option<Timer> {
        Timer::ALL
            .into_iter()
            .find(|t| self.get(*t).is_some_and(|at| at <= now))
    }
}

/// Consecutive failures and the jittered retry delays they give.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    failures: u32,
    rng: XorShift,
}

impl Backoff {
    pub(crate) fn new(seed: u64) -> Self {
        Backoff {
            failures: 0,
            rng: XorShift::new(seed),
        }
    }

    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    pub(crate) fn fail(&mut self) {
        self.failures = self.failures.saturating_add(1);
    }

    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }

    /// Keeps the failure count at or below the first step whose wait reaches `wait`:
    /// after refusals retried every `wait`, a failure of another kind continues the
    /// doubling from there, as if the refusals had been one long step, instead of from
    /// the count their number alone would give.
    pub(crate) fn hold_at(&mut self, wait: Duration) {
        let mut step = 1u32;
        while step < 32 && FIRST_RETRY.saturating_mul(1 << (step - 1)) < wait {
            step += 1;
        }
        self.failures = self.failures.min(step);
    }

    /// A fresh random draw, for jittering another timer from the same generator.
    pub(crate) fn draw(&mut self) -> u64 {
        self.rng.next()
    }

    /// The wait before the next attempt: [`FIRST_RETRY`] after the first failure,
    /// doubled on each further one, capped at `cap` (the ConnectRetryTime: the longest
    /// wait, never the first), times a jitter factor in [0.75, 1.0] (RFC 4271 section
    /// 10) drawn afresh each time. Without a failure the wait is the first one.
    pub(crate) fn delay(&mut self, cap: Duration) -> Duration {
        let doublings = self.failures.saturating_sub(1).min(31);
        let raw = FIRST_RETRY
            .checked_mul(1u32 << doublings)
            .unwrap_or(cap)
            .min(cap);
        jitter(raw, self.rng.next())
    }
}

/// Scales `d` by a factor in [0.75, 1.0] drawn from `r`: 3/4 + (r / 2^64) / 4, in integer
/// nanoseconds so that it is exact and reproducible.
pub(crate) fn jitter(d: Duration, r: u64) -> Duration {
    let nanos = d.as_nanos();
    // nanos * (3 * 2^64 + r) / 2^66, all in u128: nanos < 2^64 * 1e9 fits comfortably
    // times a 66-bit factor for any duration this module computes (at most 65535s).
    let factor = 3u128 * (1u128 << 64) + r as u128;
    let scaled = nanos.saturating_mul(factor) >> 66;
    Duration::from_nanos(u64::try_from(scaled).unwrap_or(u64::MAX))
}

/// xorshift64* (Vigna 2014): a tiny deterministic generator; the jitter needs spread, not
/// secrecy.
#[derive(Debug, Clone)]
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        // Zero is xorshift's one fixed point; any other constant works.
        XorShift(if seed == 0 {
            0x9e37_79b9_7f4a_7c15
        } else {
            seed
        })
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_between_three_quarters_and_one() {
        let d = Duration::from_secs(8);
        assert_eq!(jitter(d, 0), Duration::from_secs(6));
        assert!(jitter(d, u64::MAX) <= d);
        assert!(jitter(d, u64::MAX) > Duration::from_millis(7999));
        let mut rng = XorShift::new(42);
        for _ in 0..1000 {
            let j = jitter(d, rng.next());
            assert!(j >= Duration::from_secs(6) && j <= d, "{j:?}");
        }
    }

    #[test]
    fn backoff_starts_at_a_second_and_doubles_up_to_the_cap() {
        let cap = Duration::from_secs(30);
        let mut b = Backoff::new(7);
        // failures -> un-jittered delay: 1s (also with none), 1s, 2s, 4s... capped.
        let want = [1u64, 1, 2, 4, 8, 16, 30, 30, 30];
        for (failures, secs) in want.into_iter().enumerate() {
            while b.failures() < failures as u32 {
                b.fail();
            }
            let want = Duration::from_secs(secs);
            let got = b.delay(cap);
            assert!(
                got >= want * 3 / 4 && got <= want,
                "failures {failures}: got {got:?}, want within [0.75, 1] x {want:?}"
            );
        }
        b.reset();
        assert_eq!(b.failures(), 0);
        assert!(b.delay(cap) <= FIRST_RETRY);
    }

    #[test]
    fn backoff_never_exceeds_a_cap_below_the_first_retry_and_never_overflows() {
        let mut b = Backoff::new(1);
        for _ in 0..40 {
            b.fail();
        }
        let cap = Duration::from_secs(65535);
        let d = b.delay(cap);
        assert!(d <= cap && d >= cap * 3 / 4, "{d:?}");
        let short = Duration::from_millis(500);
        assert!(b.delay(short) <= short);
    }

    #[test]
    fn holding_the_backoff_keeps_the_count_at_the_step_of_the_wait() {
        let mut b = Backoff::new(3);
        for _ in 0..20 {
            b.fail();
        }
        // 1, 2, 4 s: a 3 s wait is reached at the third step.
        b.hold_at(REFUSED_RETRY);
        assert_eq!(b.failures(), 3);
        b.fail();
        let next = b.delay(Duration::from_secs(120));
        assert!(next >= Duration::from_secs(6) && next <= Duration::from_secs(8));
        // Never raises a lower count.
        b.reset();
        b.fail();
        b.hold_at(REFUSED_RETRY);
        assert_eq!(b.failures(), 1);
        // A wait below the first step holds at the first.
        for _ in 0..5 {
            b.fail();
        }
        b.hold_at(Duration::ZERO);
        assert_eq!(b.failures(), 1);
        b.hold_at(Duration::MAX);
        assert_eq!(b.failures(), 1);
    }

    #[test]
    fn same_seed_same_delays() {
        let mut a = Backoff::new(99);
        let mut b = Backoff::new(99);
        let mut c = Backoff::new(100);
        let base = Duration::from_secs(10);
        let da: Vec<_> = (0..10).map(|_| a.delay(base)).collect();
        let db: Vec<_> = (0..10).map(|_| b.delay(base)).collect();
        let dc: Vec<_> = (0..10).map(|_| c.delay(base)).collect();
        assert_eq!(da, db);
        assert_ne!(da, dc);
    }

    #[test]
    fn zero_seed_still_moves() {
        let mut r = XorShift::new(0);
        let a = r.next();
        let b = r.next();
        assert_ne!(a, 0);
        assert_ne!(a, b);
    }

    #[test]
    fn timers_report_earliest_and_expired_in_priority_order() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        assert_eq!(t.next(), None);
        t.start(Timer::Keepalive, t0, Duration::from_secs(30));
        t.start(Timer::Hold, t0, Duration::from_secs(90));
        assert_eq!(t.next(), Some(t0 + Duration::from_secs(30)));
        assert_eq!(t.expired(t0 + Duration::from_secs(29)), None);
        assert_eq!(
            t.expired(t0 + Duration::from_secs(30)),
            Some(Timer::Keepalive)
        );
        assert_eq!(t.expired(t0 + Duration::from_secs(90)), Some(Timer::Hold));
        t.stop(Timer::Hold);
        assert_eq!(t.get(Timer::Hold), None);
        t.start(Timer::IdleHold, t0, Duration::MAX);
        assert_eq!(t.get(Timer::IdleHold), None, "overflow never fires");
        t.stop_all();
        assert_eq!(t.next(), None);
    }
}
