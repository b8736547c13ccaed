//! The `allocate` role's `Elector` against kube-rs's mocked API service (tower-test), on
//! tokio's paused clock: each Lease request it makes is checked (method, path, the
//! record and resourceVersion it carries) and answered as an API server would, and the
//! leadership it publishes is checked against the virtual time it was published at.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use podcidr_speaker::allocate::lease::{Elector, Leadership, LeaseRef, Timings};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::time::Instant;
use tower_test::mock;

/// Longer than any step of a test (virtual time: costs nothing).
const WAIT: Duration = Duration::from_secs(60);
const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lock";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases";

fn timings() -> Timings {
    Timings {
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    }
}

type Handle = mock::Handle<Request<Body>, Response<Body>>;

struct Api {
    handle: Handle,
}

/// One request of the elector.
struct Call {
    method: Method,
    path: String,
    body: Value,
    at: Instant,
    responder: mock::SendResponse<Response<Body>>,
}

impl Call {
    fn answer(self, status: u16, body: &Value) {
        let response = Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .header("content-type", "application/json")
            .body(Body::from(Bytes::from(body.to_string())))
            .unwrap();
        self.responder.send_response(response);
    }

    fn error(self, status: u16, reason: &str) {
        let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": format!("mock {reason}"),
                          "reason": reason, "code": status});
        self.answer(status, &body);
    }

    /// Answers a create or replace as the API server does: the object, a new version.
    fn accept(self, resource_version: &str) -> Value {
        let mut lease = self.body.clone();
        lease["metadata"]["resourceVersion"] = json!(resource_version);
        let status = if self.method == Method::POST {
            201
        } else {
            200
        };
        self.answer(status, &lease);
        lease
    }

    fn spec(&self) -> &Value {
        &self.body["spec"]
    }

    fn assert_get(&self) {
        assert_eq!((&self.method, self.path.as_str()), (&Method::GET, LEASE));
    }

    fn assert_replace(&self, resource_version: &str) {
        assert_eq!((&self.method, self.path.as_str()), (&Method::PUT, LEASE));
        assert_eq!(
            self.body["metadata"]["resourceVersion"], resource_version,
            "the write is conditional on the version read"
        );
    }
}

impl Api {
    fn start() -> (kube::Client, Api) {
        let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
        (kube::Client::new(service, "default"), Api { handle })
    }

    async fn next(&mut self) -> Call {
        let (request, responder) = tokio::time::timeout(WAIT, self.handle.next_request())
            .await
            .expect("a request in time")
            .expect("client alive");
        let at = Instant::now();
        let method = request.method().clone();
        let path = request.uri().path().to_owned();
        let bytes = request.into_body().collect_bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap()
        };
        Call {
            method,
            path,
            body,
            at,
            responder,
        }
    }

    /// No request comes for `quiet`.
    async fn quiet(&mut self, quiet: Duration) {
        if let Ok(Some((request, _))) =
            tokio::time::timeout(quiet, self.handle.next_request()).await
        {
            panic!("unexpected {} {}", request.method(), request.uri());
        }
    }
}

fn lease(holder: &str, resource_version: &str, transitions: i32) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "lock", "namespace": "ns", "resourceVersion": resource_version},
        "spec": {
            "holderIdentity": holder, "leaseDurationSeconds": 15,
            "acquireTime": "2026-01-01T00:00:00.000000Z",
            "renewTime": "2026-01-01T00:00:00.000000Z",
            "leaseTransitions": transitions
        }
    })
}

fn spawn(client: kube::Client) -> (Elector, watch::Receiver<Leadership>) {
    let elector = Elector::spawn(
        client,
        "ns/lock".parse::<LeaseRef>().unwrap(),
        "a".into(),
        timings(),
    );
    let rx = elector.leadership();
    (elector, rx)
}

async fn becomes(rx: &mut watch::Receiver<Leadership>, want: Leadership) -> Instant {
    let seen = tokio::time::timeout(WAIT, rx.wait_for(|l| *l == want))
        .await
        .map(|r| r.map(|l| *l));
    match seen {
        Ok(Ok(_)) => {}
        _ => panic!("never {want:?}, still {:?}", *rx.borrow()),
    }
    Instant::now()
}

/// Reads the Lease, answers with `current`, and accepts the renewal that must follow.
async fn renew(api: &mut Api, current: &Value, next_version: &str) -> (Value, Instant) {
    let call = api.next().await;
    call.assert_get();
    call.answer(200, current);
    let call = api.next().await;
    let rv = current["metadata"]["resourceVersion"].as_str().unwrap();
    call.assert_replace(rv);
    assert_eq!(call.spec()["holderIdentity"], "a");
    assert_eq!(
        call.spec()["acquireTime"],
        current["spec"]["acquireTime"],
        "a renewal keeps acquireTime"
    );
    assert_eq!(
        call.spec()["leaseTransitions"],
        current["spec"]["leaseTransitions"]
    );
    let at = call.at;
    (call.accept(next_version), at)
}

/// 404 on the read: the Lease is created holding it, with no transition; once created
/// we lead, and renew every retry period with the version the create returned.
#[tokio::test(start_paused = true)]
async fn a_missing_lease_is_created_and_renewed() {
    let (client, mut api) = Api::start();
    let (elector, mut rx) = spawn(client);
    let call = api.next().await;
    call.assert_get();
    call.error(404, "NotFound");
    let call = api.next().await;
    assert_eq!((&call.method, call.path.as_str()), (&Method::POST, LEASES));
    assert_eq!(call.body["metadata"]["name"], "lock");
    assert_eq!(call.spec()["holderIdentity"], "a");
    assert_eq!(call.spec()["leaseTransitions"], 0);
    assert_eq!(call.spec()["leaseDurationSeconds"], 15);
    assert!(call.spec()["renewTime"].is_string() && call.spec()["acquireTime"].is_string());
    assert_eq!(*rx.borrow(), Leadership::Follower, "not before the answer");
    let created = call.accept("1");
    becomes(&mut rx, Leadership::Leader { term: 1 }).await;

    let first = api.next().await;
    let (renewed, _) = {
        first.assert_get();
        let t = first.at;
        first.answer(200, &created);
        let call = api.next().await;
        call.assert_replace("1");
        assert_ne!(call.spec()["renewTime"], Value::Null);
        assert_eq!(call.spec()["acquireTime"], created["spec"]["acquireTime"]);
        (call.accept("2"), t)
    };
    renew(&mut api, &renewed, "3").await;
    assert_eq!(*rx.borrow(), Leadership::Leader { term: 1 }, "one term");
    drop(elector);
}

/// A Lease nobody holds (released) is taken at once, one more transition.
#[tokio::test(start_paused = true)]
async fn a_free_lease_is_taken_with_one_more_transition() {
    let (client, mut api) = Api::start();
    let (elector, mut rx) = spawn(client);
    let call = api.next().await;
    call.assert_get();
    call.answer(200, &lease("", "40", 6));
    let call = api.next().await;
    call.assert_replace("40");
    assert_eq!(call.spec()["holderIdentity"], "a");
    assert_eq!(call.spec()["leaseTransitions"], 7);
    assert_ne!(
        call.spec()["acquireTime"],
        "2026-01-01T00:00:00.000000Z",
        "a new holding starts now"
    );
    call.accept("41");
    becomes(&mut rx, Leadership::Leader { term: 1 }).await;
    drop(elector);
}

/// Another holder's valid Lease is followed (reads only) for its whole duration, counted
/// from when we first saw the record, not from its renewTime (months old here); then it
/// is taken over with the version read, one more transition.
#[tokio::test(start_paused = true)]
async fn a_valid_lease_is_followed_and_an_expired_one_taken_over() {
    let (client, mut api) = Api::start();
    let (elector, mut rx) = spawn(client);
    let held = lease("b", "7", 2);
    let call = api.next().await;
    call.assert_get();
    let first_seen = call.at;
    call.answer(200, &held);
    let call = loop {
        let call = api.next().await;
        if call.method != Method::GET {
            break call;
        }
        assert_eq!(*rx.borrow(), Leadership::Follower);
        call.answer(200, &held);
    };
    call.assert_replace("7");
    let waited = call.at - first_seen;
    assert!(
        waited >= timings().lease_duration
            && waited <= timings().lease_duration + timings().retry_period,
        "took over after {waited:?}"
    );
    assert_eq!(call.spec()["holderIdentity"], "a");
    assert_eq!(call.spec()["leaseTransitions"], 3);
    call.accept("8");
    becomes(&mut rx, Leadership::Leader { term: 1 }).await;
    drop(elector);
}

/// A renewal seen in time keeps the holder valid: no takeover while b renews.
#[tokio::test(start_paused = true)]
async fn a_holder_that_renews_is_never_taken_over() {
    let (client, mut api) = Api::start();
    let (elector, rx) = spawn(client);
    let start = Instant::now();
    let mut version = 10;
    while Instant::now() - start < Duration::from_secs(40) {
        let call = api.next().await;
        call.assert_get();
        // b renews every 10 s: a new record each time.
        let seconds = (Instant::now() - start).as_secs() / 10;
        let mut record = lease("b", &version.to_string(), 1);
        record["spec"]["renewTime"] = json!(format!("2026-01-01T00:00:{seconds:02}.000000Z"));
        call.answer(200, &record);
        version += 1;
    }
    assert_eq!(*rx.borrow(), Leadership::Follower);
    drop(elector);
}

/// Two replicas race for a free Lease: the write with the stale version gets 409 and
/// that replica stays a follower of the winner.
#[tokio::test(start_paused = true)]
async fn a_conflict_loses_the_race() {
    let (client, mut api) = Api::start();
    let (elector, rx) = spawn(client);
    let call = api.next().await;
    call.answer(200, &lease("", "5", 1));
    let call = api.next().await;
    call.assert_replace("5");
    call.error(409, "Conflict");
    let call = api.next().await;
    call.assert_get();
    call.answer(200, &lease("b", "6", 2));
    let call = api.next().await;
    call.assert_get();
    call.answer(200, &lease("b", "6", 2));
    assert_eq!(*rx.borrow(), Leadership::Follower);
    assert!(!rx.has_changed().unwrap(), "never published Leader");
    // A create that finds the Lease created by someone else: the same.
    drop(elector);
    let (client, mut api) = Api::start();
    let (elector, rx) = spawn(client);
    api.next().await.error(404, "NotFound");
    let call = api.next().await;
    assert_eq!(call.method, Method::POST);
    call.error(409, "AlreadyExists");
    api.next().await.answer(200, &lease("b", "1", 0));
    assert_eq!(*rx.borrow(), Leadership::Follower);
    drop(elector);
}

/// The leader's renewals stop being answered (the API server hangs): Follower is
/// published by the local timer at the renew deadline, counted from the sending of the
/// last accepted renewal, so before anyone could see the Lease expire.
#[tokio::test(start_paused = true)]
async fn a_leader_stops_at_the_renew_deadline_when_renewals_hang() {
    let (client, mut api) = Api::start();
    let (elector, mut rx) = spawn(client);
    api.next().await.answer(200, &lease("", "1", 0));
    let call = api.next().await;
    let first = call.accept("2");
    becomes(&mut rx, Leadership::Leader { term: 1 }).await;
    let (current, last_sent) = renew(&mut api, &first, "3").await;
    let _ = current;
    // From here the API server never answers: the calls are held, not dropped.
    let mut held = Vec::new();
    let call = api.next().await;
    call.assert_get();
    held.push(call);
    let deposed = becomes(&mut rx, Leadership::Follower).await;
    let after = deposed - last_sent;
    assert_eq!(
        after,
        timings().renew_deadline,
        "exactly at the renew deadline"
    );
    assert!(after < timings().lease_duration);
    drop(held);
    drop(elector);
}

/// Renewals answered with errors: the same deadline, and the elector keeps trying in
/// between (one read per retry period).
#[tokio::test(start_paused = true)]
async fn a_leader_stops_at_the_renew_deadline_when_renewals_fail() {
    let (client, mut api) = Api::start();
    let (elector, mut rx) = spawn(client);
    api.next().await.answer(200, &lease("", "1", 0));
    let call = api.next().await;
    let last_sent = call.at;
    call.accept("2");
    becomes(&mut rx, Leadership::Leader { term: 1 }).await;
    let mut tries = 0;
    while rx.borrow().is_leader() {
        // Biased: at the deadline, the Follower published comes before the next read.
        let call = tokio::select! {
            biased;
            _ = rx.changed() => break,
            call = api.next() => call,
        };
        call.assert_get();
        assert!(call.at - last_sent < timings().renew_deadline);
        call.error(500, "InternalError");
        tries += 1;
    }
    let deposed = becomes(&mut rx, Leadership::Follower).await;
    assert_eq!(deposed - last_sent, timings().renew_deadline);
    assert!(tries >= 4, "kept trying: {tries}");
    drop(elector);
}

/// release(): Follower at once, then holderIdentity cleared with the version we last
/// wrote; a follower's release writes nothing.
#[tokio::test(start_paused = true)]
async fn release_publishes_follower_then_clears_the_holder() {
    let (client, mut api) = Api::start();
    let (elector, mut rx) = spawn(client);
    api.next().await.answer(200, &lease("", "1", 0));
    api.next().await.accept("2");
    becomes(&mut rx, Leadership::Leader { term: 1 }).await;
    let releasing = tokio::spawn(elector.release());
    let call = api.next().await;
    assert_eq!(*rx.borrow(), Leadership::Follower, "before the write");
    call.assert_replace("2");
    assert_eq!(call.spec()["holderIdentity"], "");
    assert_eq!(call.spec()["leaseTransitions"], 1);
    call.accept("3");
    tokio::time::timeout(WAIT, releasing)
        .await
        .unwrap()
        .unwrap();

    let (client, mut api) = Api::start();
    let (elector, rx) = spawn(client);
    api.next().await.answer(200, &lease("b", "9", 0));
    let started = Instant::now();
    elector.release().await;
    assert!(Instant::now() - started < Duration::from_secs(1));
    assert_eq!(*rx.borrow(), Leadership::Follower);
    api.quiet(Duration::from_secs(5)).await;
}

/// release() while the API server does not answer: still bounded.
#[tokio::test(start_paused = true)]
async fn release_is_bounded_when_the_api_server_hangs() {
    let (client, mut api) = Api::start();
    let (elector, mut rx) = spawn(client);
    api.next().await.answer(200, &lease("", "1", 0));
    api.next().await.accept("2");
    becomes(&mut rx, Leadership::Leader { term: 1 }).await;
    let started = Instant::now();
    let releasing = tokio::spawn(elector.release());
    let held = api.next().await;
    held.assert_replace("2");
    tokio::time::timeout(WAIT, releasing)
        .await
        .unwrap()
        .unwrap();
    assert!(Instant::now() - started <= Duration::from_secs(3));
    drop(held);
}
