//! The allocator's metrics (names fixed by issue 30: alerts and dashboards use them),
//! its `/status` document and its `/healthz` and `/readyz` rules.
//!
//! Every label value known in advance (each `Reason`, reload result, write result,
//! Event loss) is created at zero, so a rate exists before the first event. Pool
//! labels are the configured pool names (bounded by the config). Must not: decide
//! anything (the runner reports what `alloc` decided).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};
use serde::Serialize;

use crate::alloc::{PoolUsage, Reason};
use crate::metrics::liveness::Liveness;
use crate::metrics::server::{Answer, Response, REFRESH_WAIT};
use crate::sources::kube::events::{EventLoss, EventObserver};

/// The prefix of every series.
pub const NAMESPACE: &str = "podcidr_allocator";

/// `/healthz` fails when the loop has not beaten for this long. It beats when a probe
/// asks it ([`Liveness`]: no tick of its own at idle) and during a long batch of writes.
pub const ALIVE_WITHIN: Duration = Duration::from_secs(30);

/// How a config reload ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReloadResult {
    Applied,
    /// Valid, but it would orphan addresses in use.
    Refused,
    /// Does not parse or validate.
    Invalid,
}

impl ReloadResult {
    pub const ALL: [ReloadResult; 3] = [Self::Applied, Self::Refused, Self::Invalid];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Refused => "refused",
            Self::Invalid => "invalid",
        }
    }
}

/// How a status write ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteResult {
    Ok,
    /// 409: the Service changed under us; its next watch event decides it again.
    Conflict,
    /// Another error status from the API server.
    Refused,
    /// No answer.
    Failed,
}

impl WriteResult {
    pub const ALL: [WriteResult; 4] = [Self::Ok, Self::Conflict, Self::Refused, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Conflict => "conflict",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }
}

/// One Service in `/status`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ServiceLine {
    pub service: String,
    /// `holds`, `pending` or `waiting` (for the end of the first list).
    pub state: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The `/status` document.
#[derive(Clone, Debug, Serialize, Default, PartialEq, Eq)]
pub struct Board {
    pub identity: String,
    pub leader: bool,
    pub term: Option<u64>,
    /// The pools of the config in force, in config order; `None`: no config yet.
    pub pools: Option<Vec<String>>,
    /// Why the latest config seen is not in force (refused or invalid).
    pub config_refused: Option<String>,
    pub services_listed: bool,
    /// The leader's decisions (a follower decides nothing: empty).
    pub services: Vec<ServiceLine>,
}

impl Board {
    /// `/readyz`: a config is in force and the Services are listed (both replicas
    /// are ready, the follower too, so a rolling update proceeds).
    pub fn not_ready(&self) -> Vec<&'static str> {
        let mut reasons = Vec::new();
        if self.pools.is_none() {
            reasons.push("no bgp-config in force");
        }
        if !self.services_listed {
            reasons.push("services not listed yet");
        }
        reasons
    }
}

/// The series and the status document.
pub struct AllocMetrics {
    registry: Registry,
    pub leader: IntGauge,
    pub leader_transitions: IntCounter,
    pool_addresses: IntGaugeVec,
    pool_in_use: IntGaugeVec,
    pub allocations: IntCounterVec,
    pub failures: IntCounterVec,
    pub pending: IntGauge,
    pub config_refused: IntGauge,
    reloads: IntCounterVec,
    writes: IntCounterVec,
    events_lost: IntCounterVec,
    board: Mutex<Board>,
    liveness: Liveness,
}

impl std::fmt::Debug for AllocMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AllocMetrics").finish_non_exhaustive()
    }
}

fn opts(name: &str, help: &str) -> Opts {
    Opts::new(name, help).namespace(NAMESPACE)
}

impl AllocMetrics {
    /// Fresh series; fails only on a family defined twice (a bug the tests catch).
    pub fn new(identity: &str) -> Result<Arc<AllocMetrics>, prometheus::Error> {
        let registry = Registry::new();
        let gauge = |name, help| -> Result<IntGauge, prometheus::Error> {
            let g = IntGauge::with_opts(opts(name, help))?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let gauges = |name, help, label| -> Result<IntGaugeVec, prometheus::Error> {
            let g = IntGaugeVec::new(opts(name, help), &[label])?;
            registry.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let counters = |name, help, label, values: &[&str]| {
            let c = IntCounterVec::new(opts(name, help), &[label])?;
            for v in values {
                c.with_label_values(&[*v]);
            }
            registry.register(Box::new(c.clone()))?;
            Ok::<_, prometheus::Error>(c)
        };
        let leader_transitions = IntCounter::with_opts(opts(
            "leader_transitions_total",
            "Times this replica became or stopped being the leader.",
        ))?;
        registry.register(Box::new(leader_transitions.clone()))?;
        let loss: Vec<&str> = EventLoss::ALL.iter().map(|l| l.as_str()).collect();
        let reloads: Vec<&str> = ReloadResult::ALL.iter().map(|r| r.as_str()).collect();
        let writes: Vec<&str> = WriteResult::ALL.iter().map(|r| r.as_str()).collect();
        let metrics = AllocMetrics {
            leader: gauge("leader", "1 while this replica holds the Lease and writes.")?,
            leader_transitions,
            pool_addresses: gauges(
                "pool_addresses",
                "Addresses a pool may hand out (saturating).",
                "pool",
            )?,
            pool_in_use: gauges(
                "pool_addresses_in_use",
                "Distinct addresses of a pool held by Services.",
                "pool",
            )?,
            allocations: counters(
                "allocations_total",
                "Addresses written to a Service's status, by pool.",
                "pool",
                &[],
            )?,
            failures: counters(
                "failures_total",
                "Services newly pending, by reason.",
                "reason",
                &Reason::LABELS,
            )?,
            pending: gauge("services_pending", "LoadBalancer Services without an address.")?,
            config_refused: gauge(
                "config_refused",
                "1 when the latest bgp-config seen is refused or invalid (the last good one is in force).",
            )?,
            reloads: counters(
                "config_reloads_total",
                "bgp-config changes seen, by result.",
                "result",
                &reloads,
            )?,
            writes: counters(
                "status_writes_total",
                "status.loadBalancer.ingress writes, by result.",
                "result",
                &writes,
            )?,
            events_lost: counters(
                "events_not_written_total",
                "Kubernetes Events not written, by reason.",
                "reason",
                &loss,
            )?,
            registry,
            board: Mutex::new(Board {
                identity: identity.to_owned(),
                ..Board::default()
            }),
            liveness: Liveness::new(ALIVE_WITHIN),
        };
        Ok(Arc::new(metrics))
    }

    pub fn reload(&self, result: ReloadResult) {
        self.reloads.with_label_values(&[result.as_str()]).inc();
    }

    pub fn write(&self, result: WriteResult) {
        self.writes.with_label_values(&[result.as_str()]).inc();
    }

    /// The pools of the config in force: the series of pools no longer configured go.
    pub fn pools(&self, usage: &[PoolUsage]) {
        self.pool_addresses.reset();
        self.pool_in_use.reset();
        let clamp = |n: u128| i64::try_from(n).unwrap_or(i64::MAX);
        for p in usage {
            self.pool_addresses
                .with_label_values(&[&*p.name])
                .set(clamp(p.total));
            self.pool_in_use
                .with_label_values(&[&*p.name])
                .set(clamp(p.in_use));
        }
    }

    /// Changes the `/status` document.
    pub fn board(&self, change: impl FnOnce(&mut Board)) {
        if let Ok(mut b) = self.board.lock() {
            change(&mut b);
        }
    }

    pub fn snapshot(&self) -> Board {
        self.board.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// The loop is alive.
    pub fn beat(&self) {
        self.liveness.beat_at(Instant::now());
    }

    /// Completes when a probe asks the loop to turn; the loop then beats and calls
    /// [`AllocMetrics::answered`].
    pub async fn asked(&self) {
        self.liveness.asked().await;
    }

    /// The loop answered a probe's ask.
    pub fn answered(&self) {
        self.liveness.answered();
    }

    pub fn encode(&self) -> String {
        let mut out = Vec::new();
        // Encoding into a Vec fails only on a family with a bad name, caught by tests.
        let _ = prometheus::TextEncoder::new().encode(&self.registry.gather(), &mut out);
        String::from_utf8(out).unwrap_or_default()
    }

    /// The answers of `--metrics-addr`. `/healthz` first asks the loop to turn (at most
    /// [`REFRESH_WAIT`]), as the speaker's endpoint does.
    pub fn answer(self: &Arc<Self>) -> Answer {
        let metrics = Arc::clone(self);
        Arc::new(move |path: String| {
            let metrics = Arc::clone(&metrics);
            Box::pin(async move {
                if path == "/healthz" {
                    metrics.liveness.refresh(REFRESH_WAIT).await;
                }
                metrics.respond(&path, Instant::now())
            })
        })
    }

    fn respond(&self, path: &str, now: Instant) -> Response {
        match path {
            "/metrics" => Response {
                status: 200,
                content_type: prometheus::TEXT_FORMAT.to_owned(),
                body: self.encode().into_bytes(),
                headers: Vec::new(),
            },
            "/healthz" => {
                if self.liveness.alive_at(now) {
                    Response::text(200, "ok\n")
                } else {
                    Response::text(503, "the allocator loop has not beaten for too long\n")
                }
            }
            "/readyz" => {
                let reasons = self.snapshot().not_ready();
                if reasons.is_empty() {
                    Response::text(200, "ready\n")
                } else {
                    Response::text(503, format!("not ready: {}\n", reasons.join("; ")))
                }
            }
            "/status" => match serde_json::to_vec_pretty(&self.snapshot()) {
                Ok(mut body) => {
                    body.push(b'\n');
                    Response {
                        status: 200,
                        content_type: "application/json".to_owned(),
                        body,
                        headers: Vec::new(),
                    }
                }
                Err(e) => Response::text(500, format!("cannot serialize the status: {e}\n")),
            },
            _ => Response::text(
                404,
                "not found: try /metrics, /healthz, /readyz or /status\n",
            ),
        }
    }
}

impl EventObserver for AllocMetrics {
    fn not_written(&self, loss: EventLoss) {
        self.events_lost.with_label_values(&[loss.as_str()]).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_is_named_as_the_issue_fixes_them() {
        let m = AllocMetrics::new("a").unwrap();
        m.pools(&[PoolUsage {
            name: Arc::from("default"),
            total: 256,
            in_use: 3,
        }]);
        m.allocations.with_label_values(&["default"]).inc();
        let text = m.encode();
        for name in [
            "podcidr_allocator_leader ",
            "podcidr_allocator_leader_transitions_total ",
            "podcidr_allocator_pool_addresses{pool=\"default\"} 256",
            "podcidr_allocator_pool_addresses_in_use{pool=\"default\"} 3",
            "podcidr_allocator_allocations_total{pool=\"default\"} 1",
            "podcidr_allocator_failures_total{reason=\"pools_full\"} 0",
            "podcidr_allocator_services_pending ",
            "podcidr_allocator_config_refused ",
            "podcidr_allocator_config_reloads_total{result=\"invalid\"} 0",
            "podcidr_allocator_status_writes_total{result=\"conflict\"} 0",
            "podcidr_allocator_events_not_written_total{reason=\"queue_full\"} 0",
        ] {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
    }

    #[test]
    fn ready_needs_a_config_and_the_services_listed() {
        let m = AllocMetrics::new("a").unwrap();
        assert_eq!(m.respond("/readyz", Instant::now()).status, 503);
        m.board(|b| b.pools = Some(vec!["default".into()]));
        assert_eq!(m.respond("/readyz", Instant::now()).status, 503);
        m.board(|b| b.services_listed = true);
        assert_eq!(m.respond("/readyz", Instant::now()).status, 200);
        let later = Instant::now() + ALIVE_WITHIN + Duration::from_secs(1);
        assert_eq!(m.respond("/healthz", later).status, 503);
    }

    #[tokio::test]
    async fn healthz_asks_the_loop_to_turn_instead_of_a_tick() {
        let m = AllocMetrics::new("a").unwrap();
        let created = Instant::now();
        let looped = Arc::clone(&m);
        let main_loop = tokio::spawn(async move {
            loop {
                looped.asked().await;
                looped.beat();
                looped.answered();
            }
        });
        // The loop waits for asks (this test's runtime runs it during the sleep).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let answer = m.answer();
        assert_eq!(answer("/healthz".to_owned()).await.status, 200);
        // Its beat is the ask's, not the creation's: alive past the creation's window.
        let past_creation = created + ALIVE_WITHIN + Duration::from_millis(25);
        assert!(m.liveness.alive_at(past_creation));
        main_loop.abort();
        let _ = main_loop.await;
        // Other paths do not wait for the loop.
        assert_eq!(answer("/readyz".to_owned()).await.status, 503);
    }
}
