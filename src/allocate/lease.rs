//! Leader election of the `allocate` role on a `coordination.k8s.io/v1` Lease: only the
//! leader writes, a new leader takes over within a bounded time, a deposed one stops
//! writing at once.
//!
//! This file holds what the runner and the elector share: [`Leadership`] (what this
//! replica may do, published on a `tokio::sync::watch`), [`LeaseRef`] (`--lease`) and
//! [`Timings`] (client-go's three durations and their rules); and [`Elector`], the
//! driver that carries out [`election`]'s decisions against the API server and logs
//! each transition.
//!
//! Must not: decide (when to take, renew or give up the Lease is [`election`]'s); write
//! anything but the one Lease.

pub mod election;

use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use election::{Election, Record, Step, Takeover, Written};

/// What this replica may do, as the elector last decided it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Leadership {
    /// Another replica leads, or nobody is known to: write nothing.
    #[default]
    Follower,
    /// This replica holds the Lease. `term` counts this replica's terms (1 for the first),
    /// so a runner can tell a new term from the same one seen twice.
    Leader { term: u64 },
}

impl Leadership {
    pub fn is_leader(self) -> bool {
        matches!(self, Leadership::Leader { .. })
    }
}

/// The Lease the replicas compete for: `--lease NAMESPACE/NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
}

impl Default for LeaseRef {
    fn default() -> Self {
        Self {
            namespace: "kube-system".into(),
            name: "podcidr-speaker-allocator".into(),
        }
    }
}

/// `--lease` is not `NAMESPACE/NAME`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--lease: {value:?} must be NAMESPACE/NAME")]
pub struct BadLeaseRef {
    pub value: String,
}

impl FromStr for LeaseRef {
    type Err = BadLeaseRef;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadLeaseRef {
            value: s.to_owned(),
        };
        let (namespace, name) = s.split_once('/').ok_or_else(bad)?;
        // Object names: no separator, not empty (the API server checks the rest).
        let valid = |part: &str| !part.is_empty() && !part.contains(['/', ':']);
        if !valid(namespace) || !valid(name) {
            return Err(bad());
        }
        Ok(Self {
            namespace: namespace.into(),
            name: name.into(),
        })
    }
}

impl fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// client-go's leader-election durations (same defaults: 15 s, 10 s, 2 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// How long a Lease, once renewed, keeps others from taking it.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal: past it, it
    /// stops writing, before the Lease can expire for the others.
    pub renew_deadline: Duration,
    /// How often a renewal or an acquisition is tried.
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Timings that would let two replicas lead at once, or a leader lose its Lease between
/// two renewals.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadTimings {
    #[error("--renew-deadline ({renew:?}) must be shorter than --lease-duration ({lease:?}): a leader must stop writing before the others may take over")]
    RenewNotBeforeExpiry { renew: Duration, lease: Duration },
    #[error("--retry-period ({retry:?}) must be shorter than --renew-deadline ({renew:?}): a leader must get more than one try to renew")]
    RetryNotBeforeRenew { retry: Duration, renew: Duration },
    #[error("--retry-period must not be zero")]
    ZeroRetry,
}

impl Timings {
    pub fn validate(&self) -> Result<(), BadTimings> {
        if self.retry_period.is_zero() {
            return Err(BadTimings::ZeroRetry);
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(BadTimings::RenewNotBeforeExpiry {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(BadTimings::RetryNotBeforeRenew {
                retry: self.retry_period,
                renew: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// How long the release's read and write may take together.
const RELEASE_LIMIT: Duration = Duration::from_secs(3);

/// The leader election of this replica: a task that reads the Lease every retry period,
/// takes or renews it as [`election`] decides, and publishes this replica's
/// [`Leadership`].
pub struct Elector {
    publisher: Arc<Publisher>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Elector {
    /// Starts the election (on the current tokio runtime). Follower until the Lease is
    /// ours.
    pub fn spawn(
        client: kube::Client,
        lease: LeaseRef,
        identity: String,
        timings: Timings,
    ) -> Elector {
        let publisher = Arc::new(Publisher {
            released: Mutex::new(false),
            tx: watch::channel(Leadership::Follower).0,
            deadline: Mutex::new(None),
        });
        let (stop, stopped) = oneshot::channel();
        let driver = Driver {
            api: Api::namespaced(client, &lease.namespace),
            election: Election::new(identity, timings),
            timings,
            lease,
            publisher: publisher.clone(),
            holder_seen: None,
        };
        Elector {
            publisher,
            stop: Some(stop),
            task: Some(tokio::spawn(driver.run(stopped))),
        }
    }

    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.publisher.tx.subscribe()
    }

    /// The renew deadline as the elector last knew it, readable at the moment of a
    /// write: [`Leadership`] changes arrive as events, and a process frozen past its
    /// deadline (SIGSTOP, a stalled VM) could handle another event before the elector's
    /// timer publishes `Follower`; the clock closes that gap.
    pub fn clock(&self) -> LeaseClock {
        LeaseClock(Arc::clone(&self.publisher))
    }

    /// Publishes Follower at once, then clears holderIdentity if we still hold the Lease
    /// (a successor takes over without waiting for expiry). Bounded in time.
    pub async fn release(mut self) {
        self.publisher.release();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take() {
            // A little over the task's own bound, so that it can log why it gave up.
            let limit = RELEASE_LIMIT + Duration::from_millis(500);
            if tokio::time::timeout(limit, &mut task).await.is_err() {
                tracing::warn!(limit = ?limit, "lease release did not finish in time");
                task.abort();
            }
        }
    }
}

impl Drop for Elector {
    /// Dropped without [`Elector::release`]: stop leading and electing, write nothing
    /// (the Lease expires for the others).
    fn drop(&mut self) {
        self.publisher.release();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Whether this replica's term is still within its renew deadline now
/// ([`Elector::clock`]).
#[derive(Clone)]
pub struct LeaseClock(Arc<Publisher>);

impl LeaseClock {
    /// True while a term's renew deadline lies ahead; false without a term, or past it
    /// even if `Follower` has not been published yet.
    pub fn within_deadline(&self) -> bool {
        let deadline = *self
            .0
            .deadline
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // The election's clock (tokio's, as the driver reads it).
        deadline.is_some_and(|d| Instant::now().into_std() < d)
    }
}

/// The one place [`Leadership`] is published: once released, never Leader again (a
/// write answered after [`Elector::release`] must not restart the writes).
struct Publisher {
    released: Mutex<bool>,
    tx: watch::Sender<Leadership>,
    /// The term's renew deadline (`election::Election::poll_timeout`), `None` without a
    /// term: set before a Leader is published and after every renewal.
    deadline: Mutex<Option<std::time::Instant>>,
}

impl Publisher {
    fn set_deadline(&self, deadline: Option<std::time::Instant>) {
        let released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) =
            deadline.filter(|_| !*released);
    }

    fn publish(&self, leadership: Leadership) {
        let released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        if !*released || !leadership.is_leader() {
            self.tx.send_replace(leadership);
        }
    }

    fn release(&self) {
        let mut released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        *released = true;
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.tx.send_replace(Leadership::Follower);
    }
}

/// Why leadership changed, for the log.
#[derive(Clone, Copy, Debug)]
enum Cause {
    Written,
    RenewDeadline,
    Conflict,
    OtherHolder,
}

/// How a request raced the renew deadline and the stop.
enum Raced<T> {
    Done(T),
    Deadline,
    Stopped,
    TimedOut,
}

struct Driver {
    api: Api<Lease>,
    election: Election,
    timings: Timings,
    lease: LeaseRef,
    publisher: Arc<Publisher>,
    /// The holder last logged, so each change of holder is logged once.
    holder_seen: Option<String>,
}

impl Driver {
    async fn run(mut self, mut stop: oneshot::Receiver<()>) {
        let mut next = Instant::now();
        loop {
            self.publisher.set_deadline(self.election.poll_timeout());
            let deadline = self.election.poll_timeout().map(Instant::from_std);
            // Biased: at the same instant the deadline comes before a new try.
            tokio::select! {
                biased;
                _ = &mut stop => break,
                () = sleep_until_some(deadline) => {
                    self.timed_out();
                    continue;
                }
                () = tokio::time::sleep_until(next) => {}
            }
            next = Instant::now() + self.timings.retry_period;
            if !self.attempt(&mut stop).await {
                break;
            }
        }
        self.release().await;
    }

    /// One read and, if the election says so, one write. False: stopped.
    async fn attempt(&mut self, stop: &mut oneshot::Receiver<()>) -> bool {
        let deadline = self.election.poll_timeout().map(Instant::from_std);
        let limit = self.timings.renew_deadline;
        let read = match race(self.api.get_opt(&self.lease.name), deadline, limit, stop).await {
            Raced::Done(Ok(Some(lease))) => Some((
                Record::from_spec(lease.spec.as_ref()),
                lease.metadata.resource_version.unwrap_or_default(),
            )),
            Raced::Done(Ok(None)) => None,
            Raced::Done(Err(error)) => {
                tracing::warn!(lease = %self.lease, error = %error, "lease read failed");
                return true;
            }
            Raced::TimedOut => {
                tracing::warn!(lease = %self.lease, limit = ?limit, "lease read got no answer");
                return true;
            }
            Raced::Deadline => {
                self.timed_out();
                return true;
            }
            Raced::Stopped => return false,
        };
        if let Some((record, _)) = &read {
            self.log_holder(record);
        }
        let (step, change) =
            self.election
                .handle_read(Instant::now().into_std(), Timestamp::now(), read);
        self.publish(change, Cause::OtherHolder);
        let deadline = self.election.poll_timeout().map(Instant::from_std);
        let sent_at = Instant::now();
        let answer = match &step {
            Step::Follow { .. } => return true,
            Step::Create(record) => {
                let lease = self.object(record, None);
                let params = PostParams::default();
                race(self.api.create(&params, &lease), deadline, limit, stop).await
            }
            Step::Replace {
                record,
                resource_version,
                takeover,
            } => {
                match takeover {
                    Some(Takeover::Expired { holder }) => {
                        tracing::info!(lease = %self.lease, holder = %holder, "lease expired, taking it over")
                    }
                    Some(Takeover::Free) => {
                        tracing::info!(lease = %self.lease, "lease free, taking it")
                    }
                    None => tracing::debug!(lease = %self.lease, "renewing lease"),
                }
                let lease = self.object(record, Some(resource_version.clone()));
                let params = PostParams::default();
                let write = self.api.replace(&self.lease.name, &params, &lease);
                race(write, deadline, limit, stop).await
            }
        };
        let outcome = match answer {
            Raced::Done(Ok(lease)) => Written::Ok {
                resource_version: lease.metadata.resource_version.unwrap_or_default(),
            },
            Raced::Done(Err(kube::Error::Api(status))) if status.code == 409 => {
                tracing::info!(lease = %self.lease, "lease changed under us: another replica wrote first");
                Written::Conflict
            }
            Raced::Done(Err(error)) => {
                tracing::warn!(lease = %self.lease, error = %error, "lease write failed");
                Written::Failed
            }
            Raced::TimedOut => {
                tracing::warn!(lease = %self.lease, limit = ?limit, "lease write got no answer");
                Written::Failed
            }
            // The write may still land: the election keeps it recognisable as ours.
            Raced::Deadline => {
                self.timed_out();
                return true;
            }
            Raced::Stopped => return false,
        };
        let cause = match outcome {
            Written::Conflict => Cause::Conflict,
            _ => Cause::Written,
        };
        let change =
            self.election
                .handle_written(sent_at.into_std(), Instant::now().into_std(), outcome);
        self.publish(change, cause);
        true
    }

    /// On stop: clear the Lease if it is still ours: read it (a renewal abandoned by the
    /// stop may have landed), then one conditional write, both within `RELEASE_LIMIT`.
    async fn release(&mut self) {
        if !self.election.may_hold() {
            self.election.release(Timestamp::now(), None);
            return;
        }
        let released = tokio::time::timeout(RELEASE_LIMIT, async {
            let current = match self.api.get_opt(&self.lease.name).await {
                Ok(Some(lease)) => Some((
                    Record::from_spec(lease.spec.as_ref()),
                    lease.metadata.resource_version.unwrap_or_default(),
                )),
                // Gone, or unreadable: the record last seen decides.
                Ok(None) | Err(_) => None,
            };
            let Some((record, resource_version)) = self.election.release(Timestamp::now(), current)
            else {
                return Ok(false);
            };
            let lease = self.object(&record, Some(resource_version));
            let params = PostParams::default();
            self.api
                .replace(&self.lease.name, &params, &lease)
                .await
                .map(|_| true)
        })
        .await;
        match released {
            Ok(Ok(true)) => {
                tracing::info!(lease = %self.lease, identity = %self.election.identity(), "lease released")
            }
            Ok(Ok(false)) => {}
            Ok(Err(error)) => {
                tracing::warn!(lease = %self.lease, error = %error, "lease not released: the others wait for it to expire")
            }
            Err(_) => {
                tracing::warn!(lease = %self.lease, "lease release got no answer: the others wait for it to expire")
            }
        }
    }

    fn timed_out(&mut self) {
        let change = self.election.handle_timeout(Instant::now().into_std());
        self.publish(change, Cause::RenewDeadline);
    }

    /// Publishes and logs a change of leadership: the one place transitions are logged.
    fn publish(&mut self, change: Option<Leadership>, cause: Cause) {
        let Some(leadership) = change else {
            return;
        };
        let identity = self.election.identity();
        match leadership {
            Leadership::Leader { term } => {
                tracing::info!(lease = %self.lease, identity = %identity, term, "leading");
                self.holder_seen = Some(identity.to_owned());
            }
            Leadership::Follower => match cause {
                Cause::RenewDeadline => tracing::warn!(
                    lease = %self.lease, identity = %identity,
                    renew_deadline = ?self.timings.renew_deadline,
                    "stopped leading: no renewal within the renew deadline"
                ),
                Cause::Conflict => tracing::warn!(
                    lease = %self.lease, identity = %identity,
                    "stopped leading: the lease was written by someone else"
                ),
                Cause::OtherHolder => tracing::warn!(
                    lease = %self.lease, identity = %identity,
                    "stopped leading: another replica holds the lease"
                ),
                Cause::Written => tracing::warn!(
                    lease = %self.lease, identity = %identity,
                    "stopped leading: the renewal was answered after the renew deadline"
                ),
            },
        }
        self.publisher.set_deadline(self.election.poll_timeout());
        self.publisher.publish(leadership);
    }

    /// Logs who leads, and since when, each time the holder read changes.
    fn log_holder(&mut self, record: &Record) {
        if self.holder_seen.as_deref() == Some(record.holder.as_str()) {
            return;
        }
        self.holder_seen = Some(record.holder.clone());
        if record.holder.is_empty() {
            tracing::info!(lease = %self.lease, "lease held by nobody");
        } else if record.holder != self.election.identity() {
            let since = record
                .acquire_time
                .map(|t| t.to_string())
                .unwrap_or_default();
            tracing::info!(lease = %self.lease, holder = %record.holder, since = %since, transitions = record.transitions, "lease held by another replica");
        }
    }

    fn object(&self, record: &Record, resource_version: Option<String>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.lease.name.clone()),
                namespace: Some(self.lease.namespace.clone()),
                resource_version,
                ..ObjectMeta::default()
            },
            spec: Some(record.to_spec()),
        }
    }
}

/// Runs `request` until it answers, the renew deadline passes (`Deadline`: leadership
/// must be given up now, whatever the request), `limit` passes, or the elector stops.
async fn race<T>(
    request: impl Future<Output = T>,
    deadline: Option<Instant>,
    limit: Duration,
    stop: &mut oneshot::Receiver<()>,
) -> Raced<T> {
    // Biased: an answer that comes at the deadline is too late to lead on.
    tokio::select! {
        biased;
        _ = stop => Raced::Stopped,
        () = sleep_until_some(deadline) => Raced::Deadline,
        answer = tokio::time::timeout(limit, request) => match answer {
            Ok(answer) => Raced::Done(answer),
            Err(_) => Raced::TimedOut,
        },
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frozen leader that thaws past its renew deadline may handle an event before
    /// the elector's timer publishes Follower: the clock says no on its own.
    #[tokio::test(start_paused = true)]
    async fn the_clock_refuses_past_the_deadline_before_follower_is_published() {
        let publisher = Arc::new(Publisher {
            released: Mutex::new(false),
            tx: watch::channel(Leadership::Follower).0,
            deadline: Mutex::new(None),
        });
        let clock = LeaseClock(Arc::clone(&publisher));
        let leadership = publisher.tx.subscribe();
        assert!(!clock.within_deadline(), "no term, no deadline");
        let deadline = Instant::now() + Duration::from_secs(10);
        publisher.set_deadline(Some(deadline.into_std()));
        publisher.publish(Leadership::Leader { term: 1 });
        assert!(clock.within_deadline());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(leadership.borrow().is_leader(), "nobody published Follower");
        assert!(!clock.within_deadline(), "at the deadline the term is over");
        // Released: no deadline, whatever the election still holds.
        publisher.set_deadline(Some((Instant::now() + Duration::from_secs(60)).into_std()));
        assert!(clock.within_deadline());
        publisher.release();
        assert!(!clock.within_deadline());
        publisher.set_deadline(Some((Instant::now() + Duration::from_secs(60)).into_std()));
        assert!(!clock.within_deadline(), "never again after the release");
    }

    #[test]
    fn lease_ref_parses_namespace_and_name_only() {
        assert_eq!(
            "ns/lock".parse::<LeaseRef>().unwrap(),
            LeaseRef {
                namespace: "ns".into(),
                name: "lock".into()
            }
        );
        for bad in ["lock", "/lock", "ns/", "ns/a/b", "ns/a:b", ""] {
            assert!(bad.parse::<LeaseRef>().is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            LeaseRef::default().to_string(),
            "kube-system/podcidr-speaker-allocator"
        );
    }

    #[test]
    fn timings_must_stop_the_leader_before_the_lease_expires() {
        assert_eq!(Timings::default().validate(), Ok(()));
        let s = Duration::from_secs;
        let t = |l, r, p| Timings {
            lease_duration: s(l),
            renew_deadline: s(r),
            retry_period: s(p),
        };
        assert!(matches!(
            t(10, 10, 2).validate(),
            Err(BadTimings::RenewNotBeforeExpiry { .. })
        ));
        assert!(matches!(
            t(15, 10, 10).validate(),
            Err(BadTimings::RetryNotBeforeRenew { .. })
        ));
        assert_eq!(t(15, 10, 0).validate(), Err(BadTimings::ZeroRetry));
    }
}
