//! Leader hand-over of `podcidr-speaker allocate` without a double or a lost
//! allocation (issue 30): two replicas (short timings) against the API emulation
//! (`proto-tests/common/apiserver.rs`), each with its own kubeconfig token, so that
//! every write is recorded under the replica that made it.
//!
//! Services are created before, during and after the leader is killed (SIGKILL: it
//! releases nothing, the other waits out the Lease) and stopped (SIGTERM: it releases
//! the Lease, the other takes over at once). After every step: every Service has one
//! address, no address is held by two Services, no Service that had an address lost or
//! changed it; and over the whole run the status writes come from one replica at a
//! time: a replica's first status write follows its acquisition of the Lease, which
//! follows the previous writer's last status write.
//!
//! [`a_leader_frozen_past_its_lease_writes_nothing_when_it_thaws`]: the leader frozen
//! (SIGSTOP) past its Lease while the other takes over; thawed, it writes nothing.
//!
//! Loopback only (the emulation and the replicas' metrics on 127.0.0.1, ports chosen
//! by the kernel): no namespace needed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../common/apiserver.rs"]
mod apiserver;
#[path = "../common/rbac.rs"]
mod rbac;

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use apiserver::{load_balancer, ApiServer, Key, ServedApi, WriteRecord};
use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_podcidr-speaker");
/// Longer than any convergence here (the Lease expires in 3 s).
const WAIT: Duration = Duration::from_secs(20);
const LEASE: (&str, &str) = ("kube-system", "podcidr-speaker-allocator");
const LEASE_DURATION: Duration = Duration::from_secs(3);

/// One `podcidr-speaker allocate` process; killed if still running when dropped.
struct Replica {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Replica {
    fn start(dir: &Path, api: &ApiServer, config: &Path, name: &str) -> Replica {
        let log = dir.join(format!("allocator-{name}.log"));
        let out = File::create(&log).unwrap();
        let child = Command::new(BINARY)
            .arg("allocate")
            .arg(format!("--bgp-config={}", config.display()))
            .arg(format!("--lease={}/{}", LEASE.0, LEASE.1))
            .arg(format!("--identity={name}"))
            .args([
                "--lease-duration=3s",
                "--renew-deadline=2s",
                "--retry-period=500ms",
            ])
            .arg("--metrics-addr=127.0.0.1:0")
            .env("KUBECONFIG", api.kubeconfig(dir, name))
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or("info".into()),
            )
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start podcidr-speaker allocate");
        Replica {
            name: name.into(),
            child,
            log,
        }
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    fn signal(&mut self, signal: &str) {
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {}", self.name);
    }

    /// Waits for the exit; fails the test after `limit`.
    fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "{} still running after {limit:?}\n{}",
                self.name,
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn holder(api: &ApiServer) -> Option<String> {
    let lease = api.get(&Key::new("leases", LEASE.0, LEASE.1))?;
    lease["spec"]["holderIdentity"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
}

fn wait_holder(
    api: &ApiServer,
    want: impl Fn(&str) -> bool,
    what: &str,
    logs: &[&Replica],
) -> (String, Instant) {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(h) = holder(api).filter(|h| want(h)) {
            return (h, Instant::now());
        }
        if Instant::now() > deadline {
            let logs: String = logs
                .iter()
                .map(|r| format!("--- {}\n{}\n", r.name, r.log_tail()))
                .collect();
            panic!("{what}: holder {:?}\n{logs}", holder(api));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every LoadBalancer Service's addresses, by name.
fn addresses(api: &ApiServer) -> BTreeMap<String, Vec<String>> {
    api.list("services")
        .iter()
        .map(|s| {
            let ips = s
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| i["ip"].as_str().map(str::to_owned))
                .collect();
            (s["metadata"]["name"].as_str().unwrap().to_owned(), ips)
        })
        .collect()
}

/// Waits until every Service has an address, then checks that no two share one and
/// that every address seen before is still where it was; returns the new state.
fn converged(
    api: &ApiServer,
    before: &BTreeMap<String, String>,
    what: &str,
    logs: &[&Replica],
) -> BTreeMap<String, String> {
    let deadline = Instant::now() + WAIT;
    let now = loop {
        let now = addresses(api);
        if now.values().all(|ips| !ips.is_empty()) {
            break now;
        }
        if Instant::now() > deadline {
            let logs: String = logs
                .iter()
                .map(|r| format!("--- {}\n{}\n", r.name, r.log_tail()))
                .collect();
            panic!("{what}: not every Service has an address: {now:?}\n{logs}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut by_ip: BTreeMap<&str, &str> = BTreeMap::new();
    for (name, ips) in &now {
        assert_eq!(ips.len(), 1, "{what}: {name} has {ips:?}");
        if let Some(other) = by_ip.insert(&ips[0], name) {
            panic!("{what}: {} held by {other} and {name}", ips[0]);
        }
        assert!(
            ips[0].starts_with("198.51.100."),
            "{what}: {name} got {ips:?}"
        );
    }
    for (name, ip) in before {
        assert_eq!(
            now.get(name).map(|ips| ips[0].as_str()),
            Some(ip.as_str()),
            "{what}: {name} lost or changed its address"
        );
    }
    now.into_iter()
        .map(|(n, ips)| (n, ips[0].clone()))
        .collect()
}

fn create(api: &ApiServer, names: &[&str]) {
    for (i, name) in names.iter().enumerate() {
        api.create(
            "services",
            "default",
            load_balancer("default", name, 80 + i as u16),
        )
        .unwrap();
    }
}

/// The status writes come in runs of one writer each, no writer twice; each run starts
/// after its writer's first accepted Lease write and after the previous run's end.
fn one_writer_at_a_time(writes: &[WriteRecord]) -> Vec<String> {
    let status: Vec<&WriteRecord> = writes
        .iter()
        .filter(|w| w.method == "PATCH" && w.path.ends_with("/status"))
        .collect();
    let mut runs: Vec<(String, Instant, Instant)> = Vec::new();
    for w in &status {
        match runs.last_mut() {
            Some((who, _, last)) if *who == w.who => *last = w.at,
            _ => runs.push((w.who.clone(), w.at, w.at)),
        }
    }
    let order: Vec<String> = runs.iter().map(|r| r.0.clone()).collect();
    for (i, (who, first, _)) in runs.iter().enumerate() {
        assert_eq!(
            order.iter().filter(|o| *o == who).count(),
            1,
            "{who} wrote in two separate intervals: {order:?}"
        );
        let acquired = writes
            .iter()
            .find(|w| w.who == *who && w.path.contains("/leases") && w.code < 300)
            .unwrap_or_else(|| panic!("{who} wrote statuses without ever writing the Lease"))
            .at;
        assert!(
            acquired <= *first,
            "{who} wrote a status before holding the Lease"
        );
        if i > 0 {
            let previous_end = runs[i - 1].2;
            assert!(
                previous_end <= acquired,
                "{} still wrote after {who} acquired the Lease",
                runs[i - 1].0
            );
        }
    }
    order
}

/// One test's API emulation (on a runtime of its own) and its directory, with the
/// bgp-config every replica reads: a /27 pool named `web`. Dropped after the test's
/// replicas (declared first): the server stops, then the directory goes.
struct Lab {
    api: ServedApi,
    dir: PathBuf,
    config: PathBuf,
}

impl Lab {
    fn new(name: &str) -> Lab {
        let dir = std::env::temp_dir().join(format!("podcidr-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("bgp-config.yaml");
        std::fs::write(
            &config,
            "peers: []\naddress-pools:\n  - name: web\n    protocol: bgp\n    addresses: [198.51.100.0/27]\n",
        )
        .unwrap();
        Lab {
            api: ServedApi::start(),
            dir,
            config,
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn hand_over_by_kill_and_by_stop_never_moves_loses_or_doubles_an_address() {
    let lab = Lab::new("handover");
    let (api, dir, config) = (&lab.api, &lab.dir, &lab.config);

    // Before: Services waiting for an allocator, then the two replicas.
    create(api, &["before-1", "before-2", "before-3"]);
    let mut a = Replica::start(dir, api, config, "a");
    wait_holder(api, |h| h == "a", "a acquires", &[&a]);
    let mut b = Replica::start(dir, api, config, "b");
    let state = converged(api, &BTreeMap::new(), "before", &[&a, &b]);
    create(api, &["before-4", "before-5"]);
    let state = converged(api, &state, "before, more", &[&a, &b]);
    assert_eq!(
        holder(api).as_deref(),
        Some("a"),
        "b never took a valid Lease"
    );

    // The leader is killed: Services created meanwhile wait for b, which takes over
    // only once the Lease has expired.
    a.signal("KILL");
    let killed = Instant::now();
    a.wait_exit(Duration::from_secs(5));
    create(api, &["during-kill-1", "during-kill-2"]);
    let (_, took) = wait_holder(api, |h| h == "b", "b takes over", &[&b]);
    assert!(
        took - killed >= LEASE_DURATION - Duration::from_millis(600),
        "b took a Lease a renewed {:?} before",
        took - killed
    );
    let state = converged(api, &state, "after the kill", &[&b]);

    // A new replica c; then b is stopped: it releases, c takes over at once.
    let mut c = Replica::start(dir, api, config, "c");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(holder(api).as_deref(), Some("b"));
    b.signal("TERM");
    let stopped = Instant::now();
    create(api, &["during-stop-1", "during-stop-2"]);
    let status = b.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "b's exit: {status}\n{}", b.log_tail());
    let (_, took) = wait_holder(api, |h| h == "c", "c takes over", &[&c]);
    assert!(
        took - stopped < LEASE_DURATION,
        "c waited {:?}: the Lease was not released",
        took - stopped
    );
    let state = converged(api, &state, "after the stop", &[&c]);

    // After: c allocates on its own.
    create(api, &["after-1", "after-2"]);
    let state = converged(api, &state, "after", &[&c]);
    assert_eq!(state.len(), 11);

    let order = one_writer_at_a_time(&api.writes());
    // a the first five, b the two created while it was dead, c the rest.
    assert_eq!(order, ["a", "b", "c"]);
    c.signal("TERM");
    assert!(c.wait_exit(Duration::from_secs(10)).success());
    within_rbac(api);
}

/// Every request the replicas made (reads, watches, writes) is one the allocator's RBAC
/// in deploy/ allows: a permission missing there would fail in a cluster with a 403.
fn within_rbac(api: &ApiServer) {
    let manifests = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/components/allocator/rbac.yaml"
    );
    let grants = rbac::Grants::of(
        &std::fs::read_to_string(manifests).expect("the allocator's RBAC"),
        ("kube-system", "podcidr-speaker-allocator"),
    );
    let requests = api.requests();
    assert!(!requests.is_empty());
    for r in &requests {
        let Some(access) = rbac::Access::of(&r.method, &r.path, &r.query) else {
            // Discovery, which every authenticated client may read.
            assert!(
                matches!(r.path.as_str(), "/version" | "/api" | "/apis"),
                "{} asked for {} {}?{}",
                r.who,
                r.method,
                r.path,
                r.query
            );
            continue;
        };
        assert!(
            grants.allows(&access),
            "{} {} {}?{}: {access:?} is not granted by {manifests}",
            r.who,
            r.method,
            r.path,
            r.query
        );
    }
}

/// The leader is frozen (SIGSTOP: its timers do not run, as in a long GC pause or a
/// node under memory pressure) until its Lease has expired and the other has taken it
/// over and allocated meanwhile; thawed, it must write nothing: not one request, even
/// one the API server would refuse.
#[test]
fn a_leader_frozen_past_its_lease_writes_nothing_when_it_thaws() {
    let lab = Lab::new("frozen");
    let (api, dir, config) = (&lab.api, &lab.dir, &lab.config);
    create(api, &["before-1"]);
    let mut a = Replica::start(dir, api, config, "a");
    wait_holder(api, |h| h == "a", "a acquires", &[&a]);
    let b = Replica::start(dir, api, config, "b");
    let state = converged(api, &BTreeMap::new(), "before", &[&a, &b]);

    a.signal("STOP");
    let (_, took) = wait_holder(api, |h| h == "b", "b takes over", &[&b]);
    create(api, &["frozen-1", "frozen-2"]);
    let state = converged(api, &state, "while a is frozen", &[&b]);
    a.signal("CONT");
    std::thread::sleep(Duration::from_secs(2));
    create(api, &["thawed-1"]);
    let state = converged(api, &state, "after a thawed", &[&a, &b]);
    assert_eq!(state.len(), 4);
    let late: Vec<WriteRecord> = api
        .writes()
        .into_iter()
        .filter(|w| w.who == "a" && w.at > took && !w.path.contains("/leases"))
        .collect();
    assert!(
        late.is_empty(),
        "a wrote after b took over: {late:?}\n{}",
        a.log_tail()
    );
    one_writer_at_a_time(&api.writes());
}

/// A Service changed from LoadBalancer to ClusterIP leaves the `spec.type` watch as the
/// API server sends it: DELETED with the content it last had there (still a
/// LoadBalancer). MetalLB clears the status of a Service that is no longer a
/// LoadBalancer (`clearServiceState`); so does the runner, which looks the Service up
/// when such a DELETED names one with addresses (deleted: nothing to do).
#[test]
fn a_service_no_longer_a_load_balancer_has_its_ingress_cleared() {
    let lab = Lab::new("retype");
    let (api, dir, config) = (&lab.api, &lab.dir, &lab.config);
    create(api, &["x"]);
    let a = Replica::start(dir, api, config, "a");
    let state = converged(api, &BTreeMap::new(), "x allocated", &[&a]);
    let key = Key::new("services", "default", "x");
    api.patch(&key, &serde_json::json!({"spec": {"type": "ClusterIP"}}))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let ingress = api.get(&key).unwrap()["status"]["loadBalancer"]["ingress"].clone();
        if ingress.as_array().is_none_or(Vec::is_empty) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "x, now a ClusterIP Service, still shows {ingress} (was {state:?})\n{}",
            a.log_tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The look-up (a GET by name) and the clearing write are granted too.
    within_rbac(api);
}
