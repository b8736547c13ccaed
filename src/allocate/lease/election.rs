//! The leader election's decisions, pure and clock-driven (client-go's
//! `tryAcquireOrRenew` and renew deadline, as values): given the Lease record just read,
//! our identity and `now`, what to write; given a write's outcome, what we may do; given
//! `now`, whether the renew deadline has passed.
//!
//! Must not: do I/O, read a clock (`now` and the wall time arrive as arguments), log
//! above debug. The driver (`super::Elector`) carries the steps out and logs them.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

use super::{Leadership, Timings};

/// The fields of a Lease's spec the election reads and writes (client-go's
/// `LeaderElectionRecord`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Empty: nobody holds it (released, or never taken).
    pub holder: String,
    /// `leaseDurationSeconds`; absent or not positive: ours.
    pub lease_duration: Option<Duration>,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

impl Record {
    pub fn from_spec(spec: Option<&LeaseSpec>) -> Self {
        let Some(spec) = spec else {
            return Self::free();
        };
        Self {
            holder: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration: spec
                .lease_duration_seconds
                .filter(|s| *s > 0)
                .map(|s| Duration::from_secs(s.unsigned_abs().into())),
            acquire_time: spec.acquire_time.as_ref().map(|t| t.0),
            renew_time: spec.renew_time.as_ref().map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: self
                .lease_duration
                .map(|d| i32::try_from(d.as_secs()).unwrap_or(i32::MAX)),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }

    fn free() -> Self {
        Self {
            holder: String::new(),
            lease_duration: None,
            acquire_time: None,
            renew_time: None,
            transitions: 0,
        }
    }
}

/// What the driver must do after a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The Lease does not exist: create it holding it.
    Create(Record),
    /// Write this record over the one read, on condition of its resourceVersion (a 409
    /// means somebody else wrote first).
    Replace {
        record: Record,
        resource_version: String,
        /// Why: ours to renew, or a takeover.
        takeover: Option<Takeover>,
    },
    /// Another replica holds a valid Lease: write nothing, try again next period.
    Follow { holder: String },
}

/// Why a Lease that was not ours is taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// Nobody holds it (released, or never taken).
    Free,
    /// `holder` did not renew it within its lease duration, by our clock.
    Expired { holder: String },
}

/// How a write ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// Accepted; the Lease's new resourceVersion.
    Ok { resource_version: String },
    /// 409: the Lease changed since we read it (or was created by someone else).
    Conflict,
    /// Any other error or no answer: nothing is known about the Lease.
    Failed,
}

/// The record we last saw and when it last changed, by our clock: client-go's
/// `observedRecord` and `observedTime`. A holder's lease runs from the moment we saw
/// its record change, never from its `renewTime`, so clocks across nodes do not matter.
#[derive(Clone, Debug)]
struct Observed {
    record: Record,
    resource_version: String,
    changed_at: Instant,
}

/// This replica's term, while it lasts.
#[derive(Clone, Copy, Debug)]
struct Term {
    number: u64,
    /// When the last accepted write was sent plus the renew deadline: past it we stop,
    /// before the others (who count the lease duration from when they saw that write,
    /// so no earlier than its sending) may take over.
    deadline: Instant,
}

/// The election of one replica.
#[derive(Debug)]
pub struct Election {
    identity: String,
    timings: Timings,
    observed: Option<Observed>,
    /// The records this process wrote (the one sent and not yet answered, the last
    /// accepted): a record naming us that is neither was written by another process
    /// under our name (a restart, or a second replica with the same identity) and is
    /// treated as another holder's, so a duplicate identity can never make two leaders.
    pending: Option<Record>,
    written: Option<Record>,
    term: Option<Term>,
    terms: u64,
}

impl Election {
    pub fn new(identity: String, timings: Timings) -> Self {
        Self {
            identity,
            timings,
            observed: None,
            pending: None,
            written: None,
            term: None,
            terms: 0,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub fn leadership(&self) -> Leadership {
        match self.term {
            Some(t) => Leadership::Leader { term: t.number },
            None => Leadership::Follower,
        }
    }

    /// When [`Election::handle_timeout`] must be called: the renew deadline while leading.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.term.map(|t| t.deadline)
    }

    /// The renew deadline passed without an accepted renewal: stop leading at once.
    /// Returns the new leadership when it changed.
    pub fn handle_timeout(&mut self, now: Instant) -> Option<Leadership> {
        match self.term {
            Some(t) if now >= t.deadline => self.depose(),
            _ => None,
        }
    }

    /// The Lease as just read (`None`: it does not exist), at `now` (monotonic) and `wall`
    /// (what goes into `renewTime`/`acquireTime`). Returns what to do, and the new
    /// leadership when the read alone deposes us (another holder in the record).
    pub fn handle_read(
        &mut self,
        now: Instant,
        wall: Timestamp,
        read: Option<(Record, String)>,
    ) -> (Step, Option<Leadership>) {
        let wall = microseconds(wall);
        let Some((record, resource_version)) = read else {
            self.observed = None;
            let record = self.ours(wall, None);
            self.pending = Some(record.clone());
            return (Step::Create(record), None);
        };
        let changed_at = match &self.observed {
            Some(o) if o.record == record => o.changed_at,
            _ => now,
        };
        self.observed = Some(Observed {
            record: record.clone(),
            resource_version: resource_version.clone(),
            changed_at,
        });
        let mine = self.wrote(&record);
        // Somebody else's name, or ours written by another process: we do not lead.
        let deposed = if mine { None } else { self.depose() };
        if !mine && !record.holder.is_empty() {
            let duration = record.lease_duration.unwrap_or(self.timings.lease_duration);
            if changed_at + duration > now {
                return (
                    Step::Follow {
                        holder: record.holder,
                    },
                    deposed,
                );
            }
        }
        let takeover = match (mine, record.holder.is_empty()) {
            (true, _) => None,
            (false, true) => Some(Takeover::Free),
            (false, false) => Some(Takeover::Expired {
                holder: record.holder.clone(),
            }),
        };
        let next = self.ours(wall, Some(&record));
        self.pending = Some(next.clone());
        (
            Step::Replace {
                record: next,
                resource_version,
                takeover,
            },
            deposed,
        )
    }

    /// The outcome of the write [`Election::handle_read`] asked for, sent at `sent_at`,
    /// answered at `now`. Returns the new leadership when it changed.
    pub fn handle_written(
        &mut self,
        sent_at: Instant,
        now: Instant,
        outcome: Written,
    ) -> Option<Leadership> {
        let record = self.pending.take()?;
        match outcome {
            Written::Ok { resource_version } => {
                self.observed = Some(Observed {
                    record: record.clone(),
                    resource_version,
                    changed_at: now,
                });
                self.written = Some(record);
                let deadline = sent_at + self.timings.renew_deadline;
                if now >= deadline {
                    // Answered too late to lead on it: the others may already count
                    // down a lease we can no longer vouch for. The next period renews.
                    return self.depose();
                }
                match &mut self.term {
                    Some(t) => {
                        t.deadline = deadline;
                        None
                    }
                    None => {
                        self.terms += 1;
                        self.term = Some(Term {
                            number: self.terms,
                            deadline,
                        });
                        Some(self.leadership())
                    }
                }
            }
            // Someone wrote the Lease since we read it: whoever it is may lead now, so
            // we stop at once rather than at the deadline; the next read decides.
            Written::Conflict => {
                self.observed = None;
                self.depose()
            }
            // Unknown: the write may have landed. Keep it recognisable as ours, so a
            // later read of it is not mistaken for another process's.
            Written::Failed => {
                self.pending = Some(record);
                None
            }
        }
    }

    /// What [`super::Elector::release`] writes: the last record we wrote with no holder,
    /// on condition of its resourceVersion (so it clears the Lease only if nobody wrote
    /// it since). `None` when the Lease we last saw is not ours.
    pub fn release(&mut self, wall: Timestamp) -> Option<(Record, String)> {
        let wall = microseconds(wall);
        self.depose();
        let observed = self.observed.as_ref()?;
        if !self.wrote(&observed.record) || self.written.as_ref() != Some(&observed.record) {
            return None;
        }
        let mut record = observed.record.clone();
        record.holder.clear();
        // As client-go: the successor need not wait out our duration.
        record.lease_duration = Some(Duration::from_secs(1));
        record.renew_time = Some(wall);
        Some((record, observed.resource_version.clone()))
    }

    fn depose(&mut self) -> Option<Leadership> {
        self.term.take().map(|_| Leadership::Follower)
    }

    /// A record this process wrote (accepted, or sent and not answered).
    fn wrote(&self, record: &Record) -> bool {
        record.holder == self.identity
            && (self.written.as_ref() == Some(record) || self.pending.as_ref() == Some(record))
    }

    /// Our record: a renewal of `previous` if it is ours, else a new holding.
    fn ours(&self, wall: Timestamp, previous: Option<&Record>) -> Record {
        let lease_duration = Some(self.timings.lease_duration);
        match previous {
            Some(p) if self.wrote(p) => Record {
                holder: self.identity.clone(),
                lease_duration,
                acquire_time: p.acquire_time,
                renew_time: Some(wall),
                transitions: p.transitions,
            },
            Some(p) => Record {
                holder: self.identity.clone(),
                lease_duration,
                acquire_time: Some(wall),
                renew_time: Some(wall),
                transitions: p.transitions.saturating_add(1),
            },
            None => Record {
                holder: self.identity.clone(),
                lease_duration,
                acquire_time: Some(wall),
                renew_time: Some(wall),
                transitions: 0,
            },
        }
    }
}

/// A Lease's times are `MicroTime`s: what we write must read back equal, or our own
/// record would look like another process's.
fn microseconds(wall: Timestamp) -> Timestamp {
    Timestamp::from_microsecond(wall.as_microsecond()).unwrap_or(wall)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    fn timings() -> Timings {
        Timings {
            lease_duration: S(15),
            renew_deadline: S(10),
            retry_period: S(2),
        }
    }

    fn wall(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn held_by(holder: &str, renewed: i64, transitions: i32) -> Record {
        Record {
            holder: holder.into(),
            lease_duration: Some(S(15)),
            acquire_time: Some(wall(0)),
            renew_time: Some(wall(renewed)),
            transitions,
        }
    }

    fn read(record: &Record, rv: &str) -> Option<(Record, String)> {
        Some((record.clone(), rv.into()))
    }

    /// Reads then writes successfully at `at`; returns the record written.
    fn acquire(e: &mut Election, t0: Instant, at: u64, seen: Option<(Record, String)>) -> Record {
        let now = t0 + S(at);
        let (step, _) = e.handle_read(now, wall(at as i64), seen);
        let record = match step {
            Step::Create(r) | Step::Replace { record: r, .. } => r,
            other => panic!("expected a write, got {other:?}"),
        };
        e.handle_written(
            now,
            now,
            Written::Ok {
                resource_version: format!("rv-{at}"),
            },
        );
        record
    }

    #[test]
    fn a_missing_lease_is_created_holding_it_and_leads_on_success() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let (step, change) = e.handle_read(t0, wall(0), None);
        let Step::Create(record) = step else {
            panic!("{step:?}")
        };
        assert_eq!(change, None);
        assert_eq!(record.holder, "a");
        assert_eq!(record.transitions, 0);
        assert_eq!(record.lease_duration, Some(S(15)));
        assert_eq!(
            (record.acquire_time, record.renew_time),
            (Some(wall(0)), Some(wall(0)))
        );
        assert_eq!(
            e.leadership(),
            Leadership::Follower,
            "not before the answer"
        );
        let change = e.handle_written(
            t0,
            t0 + S(1),
            Written::Ok {
                resource_version: "1".into(),
            },
        );
        assert_eq!(change, Some(Leadership::Leader { term: 1 }));
        assert_eq!(e.poll_timeout(), Some(t0 + S(10)), "from the sending");
    }

    #[test]
    fn a_valid_lease_of_another_is_followed_until_it_expires_by_our_clock() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        // Its renewTime is far in the past by the wall clock: irrelevant, only when we
        // saw it change counts.
        let b = held_by("b", -3600, 4);
        let (step, _) = e.handle_read(t0, wall(0), read(&b, "7"));
        assert_eq!(step, Step::Follow { holder: "b".into() });
        let (step, _) = e.handle_read(t0 + S(14), wall(14), read(&b, "7"));
        assert_eq!(step, Step::Follow { holder: "b".into() });
        // b renews at 10 s (a new record): its lease runs again from when we see it.
        let b2 = held_by("b", 10, 4);
        let (step, _) = e.handle_read(t0 + S(14), wall(14), read(&b2, "8"));
        assert_eq!(step, Step::Follow { holder: "b".into() });
        let (step, _) = e.handle_read(t0 + S(28), wall(28), read(&b2, "8"));
        assert_eq!(step, Step::Follow { holder: "b".into() });
        // 15 s after we saw b's last change, with no further change: expired.
        let (step, _) = e.handle_read(t0 + S(29), wall(29), read(&b2, "8"));
        let Step::Replace {
            record,
            resource_version,
            takeover,
        } = step
        else {
            panic!("{step:?}")
        };
        assert_eq!(resource_version, "8");
        assert_eq!(takeover, Some(Takeover::Expired { holder: "b".into() }));
        assert_eq!(record.holder, "a");
        assert_eq!(record.transitions, 5, "one more transition");
        assert_eq!(record.acquire_time, Some(wall(29)));
    }

    #[test]
    fn the_holders_own_lease_duration_counts_and_a_missing_one_is_ours() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let mut b = held_by("b", 0, 0);
        b.lease_duration = Some(S(40));
        e.handle_read(t0, wall(0), read(&b, "1"));
        let (step, _) = e.handle_read(t0 + S(39), wall(39), read(&b, "1"));
        assert!(matches!(step, Step::Follow { .. }), "{step:?}");
        let mut c = held_by("c", 0, 0);
        c.lease_duration = None;
        e.handle_read(t0 + S(40), wall(40), read(&c, "2"));
        let (step, _) = e.handle_read(t0 + S(55), wall(55), read(&c, "2"));
        assert!(matches!(step, Step::Replace { .. }), "{step:?}");
    }

    #[test]
    fn a_free_lease_is_taken_at_once_with_one_more_transition() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let mut free = held_by("", 0, 3);
        free.lease_duration = Some(S(1));
        let (step, _) = e.handle_read(t0, wall(0), read(&free, "5"));
        let Step::Replace {
            record, takeover, ..
        } = step
        else {
            panic!("{step:?}")
        };
        assert_eq!(takeover, Some(Takeover::Free));
        assert_eq!((record.holder.as_str(), record.transitions), ("a", 4));
        assert_eq!(record.lease_duration, Some(S(15)));
    }

    #[test]
    fn renewals_keep_acquire_time_and_transitions_and_push_the_deadline() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let first = acquire(&mut e, t0, 0, read(&held_by("", 0, 2), "1"));
        assert_eq!(first.transitions, 3);
        let renewed = acquire(&mut e, t0, 2, read(&first, "rv-0"));
        assert_eq!(renewed.acquire_time, first.acquire_time);
        assert_eq!(renewed.renew_time, Some(wall(2)));
        assert_eq!(renewed.transitions, 3);
        assert_eq!(e.leadership(), Leadership::Leader { term: 1 }, "same term");
        assert_eq!(e.poll_timeout(), Some(t0 + S(12)));
    }

    #[test]
    fn the_renew_deadline_deposes_before_the_lease_can_expire_for_others() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        acquire(&mut e, t0, 0, None);
        // Renewals fail from here on.
        for at in [2, 4, 6, 8] {
            let now = t0 + S(at);
            e.handle_read(
                now,
                wall(at as i64),
                read(&e.written.clone().unwrap(), "rv-0"),
            );
            assert_eq!(e.handle_written(now, now, Written::Failed), None);
            assert_eq!(e.handle_timeout(now), None);
        }
        assert_eq!(
            e.handle_timeout(t0 + S(10) - Duration::from_millis(1)),
            None
        );
        assert_eq!(e.handle_timeout(t0 + S(10)), Some(Leadership::Follower));
        assert_eq!(e.poll_timeout(), None);
        assert!(S(10) < timings().lease_duration);
        // A late success for a write sent before the deadline does not restore the term.
        let now = t0 + S(11);
        e.handle_read(now, wall(11), read(&e.written.clone().unwrap(), "rv-0"));
        assert_eq!(
            e.handle_written(
                t0 + S(1),
                now,
                Written::Ok {
                    resource_version: "9".into()
                }
            ),
            None
        );
        assert_eq!(e.leadership(), Leadership::Follower);
        // The next renewal on time starts a new term.
        let last = e.written.clone().unwrap();
        let renewed = acquire(&mut e, t0, 12, read(&last, "9"));
        assert_eq!(renewed.holder, "a");
        assert_eq!(e.leadership(), Leadership::Leader { term: 2 });
    }

    #[test]
    fn a_conflict_loses_the_race_and_a_leader_steps_down_at_once() {
        let t0 = Instant::now();
        let mut a = Election::new("a".into(), timings());
        a.handle_read(t0, wall(0), None);
        assert_eq!(a.handle_written(t0, t0, Written::Conflict), None);
        assert_eq!(a.leadership(), Leadership::Follower);

        let mut a = Election::new("a".into(), timings());
        let mine = acquire(&mut a, t0, 0, None);
        a.handle_read(t0 + S(2), wall(2), read(&mine, "rv-0"));
        assert_eq!(
            a.handle_written(t0 + S(2), t0 + S(2), Written::Conflict),
            Some(Leadership::Follower)
        );
    }

    #[test]
    fn reading_another_holder_deposes_a_leader() {
        let t0 = Instant::now();
        let mut a = Election::new("a".into(), timings());
        acquire(&mut a, t0, 0, None);
        let (step, change) = a.handle_read(t0 + S(2), wall(2), read(&held_by("b", 1, 1), "3"));
        assert_eq!(step, Step::Follow { holder: "b".into() });
        assert_eq!(change, Some(Leadership::Follower));
    }

    #[test]
    fn our_name_written_by_another_process_is_waited_out_like_any_holder() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let other_a = held_by("a", 0, 1);
        let (step, _) = e.handle_read(t0, wall(0), read(&other_a, "4"));
        assert_eq!(step, Step::Follow { holder: "a".into() });
        let (step, _) = e.handle_read(t0 + S(15), wall(15), read(&other_a, "4"));
        let Step::Replace {
            takeover, record, ..
        } = step
        else {
            panic!("{step:?}")
        };
        assert_eq!(takeover, Some(Takeover::Expired { holder: "a".into() }));
        assert_eq!(record.transitions, 2);
    }

    #[test]
    fn a_write_that_failed_but_landed_is_still_recognised_as_ours() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let (Step::Create(sent), _) = e.handle_read(t0, wall(0), None) else {
            panic!()
        };
        e.handle_written(t0, t0, Written::Failed);
        let (step, _) = e.handle_read(t0 + S(2), wall(2), read(&sent, "1"));
        assert!(
            matches!(step, Step::Replace { takeover: None, .. }),
            "{step:?}"
        );
    }

    #[test]
    fn release_clears_only_a_lease_we_still_hold() {
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let mine = acquire(&mut e, t0, 0, None);
        let (cleared, rv) = e.release(wall(3)).unwrap();
        assert_eq!(e.leadership(), Leadership::Follower);
        assert_eq!(rv, "rv-0");
        assert_eq!(cleared.holder, "");
        assert_eq!(cleared.transitions, mine.transitions);
        assert_eq!(cleared.lease_duration, Some(S(1)));

        let mut e = Election::new("a".into(), timings());
        acquire(&mut e, t0, 0, None);
        e.handle_read(t0 + S(20), wall(20), read(&held_by("b", 20, 1), "9"));
        assert_eq!(e.release(wall(21)), None, "b holds it now");
        let mut never = Election::new("a".into(), timings());
        assert_eq!(never.release(wall(0)), None);
    }

    #[test]
    fn records_round_trip_through_the_lease_spec() {
        let r = held_by("a", 5, 2);
        assert_eq!(Record::from_spec(Some(&r.to_spec())), r);
        // Through JSON, where times have microseconds: a record we write reads back as
        // ours even when the clock has nanoseconds.
        let t0 = Instant::now();
        let mut e = Election::new("a".into(), timings());
        let now = wall(0)
            .checked_add(Duration::from_nanos(123_456_789))
            .unwrap();
        let (Step::Create(sent), _) = e.handle_read(t0, now, None) else {
            panic!()
        };
        let json = serde_json::to_value(sent.to_spec()).unwrap();
        let back = Record::from_spec(Some(&serde_json::from_value(json).unwrap()));
        assert_eq!(back, sent);
        assert_eq!(Record::from_spec(None).holder, "");
        let mut bad = r.to_spec();
        bad.lease_duration_seconds = Some(-3);
        assert_eq!(Record::from_spec(Some(&bad)).lease_duration, None);
    }
}
