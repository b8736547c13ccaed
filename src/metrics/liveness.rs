//! [`Liveness`]: the heartbeat behind a role's `/healthz`, given when asked.
//!
//! A role's main loop has no periodic tick for its endpoint (an idle process should not
//! wake up for nothing): each probe asks the loop to turn ([`Liveness::refresh`]), the
//! loop beats and answers ([`Liveness::asked`], [`Liveness::beat_at`],
//! [`Liveness::answered`]), and `/healthz` judges the last beat against a window
//! ([`Liveness::alive_at`]). A loop that cannot turn within the window is wedged, not
//! busy. Shared by the speaker's [`super::Metrics`] and the allocator's metrics.
//!
//! Must not: decide what the loop does when asked; it only carries the ask and the beat.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::peer::Beat;

/// The last beat of a main loop and the endpoint's asks to it.
pub struct Liveness {
    window: Duration,
    beat: Beat,
    /// Woken each time the loop answers an ask.
    answered: Notify,
    /// Whether a loop waits for asks at all ([`Liveness::asked`]); without one (tools,
    /// tests) [`Liveness::refresh`] does not wait.
    listened: AtomicBool,
}

impl Liveness {
    /// `/healthz` fails after `window` without a beat. A fresh one counts as having
    /// beaten at creation.
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            beat: Beat::new(Instant::now()),
            answered: Notify::new(),
            listened: AtomicBool::new(false),
        }
    }

    /// Asks the loop to turn and waits for its answer at most `wait`. `false`: no
    /// answer in time (a busy or wedged loop, or none listening); `/healthz` then
    /// judges the last beat, as ever.
    pub async fn refresh(&self, wait: Duration) -> bool {
        if !self.listened.load(Ordering::Relaxed) {
            return false;
        }
        let answered = self.answered.notified();
        tokio::pin!(answered);
        // Registered before the ask: an answer in between still counts.
        answered.as_mut().enable();
        self.beat.ask(Instant::now());
        tokio::time::timeout(wait, answered).await.is_ok()
    }

    /// Completes when the endpoint asks: the loop's wait.
    pub async fn asked(&self) {
        self.listened.store(true, Ordering::Relaxed);
        self.beat.asked().await;
    }

    /// The loop answered an ask (after its beat, when it gave one).
    pub fn answered(&self) {
        self.answered.notify_waiters();
    }

    /// A turn of the loop at `now`.
    pub fn beat_at(&self, now: Instant) {
        self.beat.beat(now);
    }

    /// The loop beat within the window before `now`.
    pub fn alive_at(&self, now: Instant) -> bool {
        self.beat.silent_for(now) <= self.window
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn alive_within_the_window_of_the_last_beat() {
        let l = Liveness::new(Duration::from_secs(30));
        let now = Instant::now();
        assert!(l.alive_at(now), "a fresh one counts as having beaten");
        assert!(!l.alive_at(now + Duration::from_secs(31)));
        l.beat_at(now + Duration::from_secs(20));
        assert!(l.alive_at(now + Duration::from_secs(49)));
        assert!(!l.alive_at(now + Duration::from_secs(51)));
    }

    #[tokio::test]
    async fn a_refresh_is_answered_by_a_listening_loop_and_not_waited_for_without_one() {
        let l = Arc::new(Liveness::new(Duration::from_secs(30)));
        // Nobody listens yet: no wait at all, even with a long bound.
        assert!(!l.refresh(Duration::from_secs(3600)).await);

        let looped = Arc::clone(&l);
        let main_loop = tokio::spawn(async move {
            loop {
                looped.asked().await;
                looped.beat_at(Instant::now());
                looped.answered();
            }
        });
        // Listening starts with the loop's first wait.
        while !l.listened.load(Ordering::Relaxed) {
            tokio::task::yield_now().await;
        }
        for _ in 0..3 {
            assert!(l.refresh(Duration::from_secs(10)).await);
        }
        main_loop.abort();
        let _ = main_loop.await;
        // A loop that no longer turns leaves the ask unanswered.
        assert!(!l.refresh(Duration::from_millis(50)).await);
    }
}
