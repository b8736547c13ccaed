//! The receiving end of a source under test, shared by the kube_sources and
//! file_sources suites: a spawned source task and its `SourceReceiver`, each update
//! awaited within [`WAIT`], the status watched until it reaches a state. Both suites
//! check the same contract (what a source sends and when), so they read it one way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use podcidr_speaker::config::SecretKeyRef;
use podcidr_speaker::sources::model::NodeView;
use podcidr_speaker::sources::secrets::{SecretError, SecretsView};
use podcidr_speaker::sources::{
    ClusterSnapshot, Resource, ResourceStatus, SourceReceiver, SourceUpdate,
};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::task::JoinHandle;

/// How long one update or status change may take: the file source polls every 250 ms,
/// the mocked API answers at once.
pub const WAIT: Duration = Duration::from_secs(5);

/// Every test is bounded: a hung source fails the test instead of the suite. The
/// source's debug logs go to the test's output, shown when it fails.
pub async fn bounded<F: Future<Output = ()>>(test: F) {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("podcidr_speaker=debug")
        .try_init();
    tokio::time::timeout(Duration::from_secs(30), test)
        .await
        .expect("test timed out");
}

pub fn nets(list: &[&str]) -> Vec<IpNet> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

/// The value `view` resolves for `key` of Secret `name`, shown (the tests compare it).
pub fn secret_key(view: &SecretsView, name: &str, key: &str) -> Result<String, SecretError> {
    view.resolve(&SecretKeyRef {
        name: name.into(),
        key: key.into(),
    })
    .map(|k| k.expose().to_owned())
}

/// A running source task and what it sends. Dropping it aborts the task, so that a
/// failed test leaves no watcher behind.
pub struct Source<T = ()> {
    pub rx: SourceReceiver,
    task: Option<JoinHandle<T>>,
}

impl<T> Source<T> {
    pub fn new(rx: SourceReceiver, task: JoinHandle<T>) -> Self {
        Self {
            rx,
            task: Some(task),
        }
    }

    /// The next update, whatever it is.
    pub async fn update(&mut self) -> SourceUpdate {
        tokio::time::timeout(WAIT, self.rx.updates.recv())
            .await
            .expect("no update in time")
            .expect("source ended")
    }

    pub async fn cluster(&mut self) -> Arc<ClusterSnapshot> {
        match self.update().await {
            SourceUpdate::Cluster(snapshot) => snapshot,
            other => panic!("expected a cluster update, got {other:?}"),
        }
    }

    pub async fn view(&mut self) -> NodeView {
        self.cluster().await.view.clone().expect("view")
    }

    pub async fn secrets(&mut self) -> Arc<SecretsView> {
        match self.update().await {
            SourceUpdate::Secrets(view) => view,
            other => panic!("expected a secrets update, got {other:?}"),
        }
    }

    /// Nothing is queued now.
    pub fn no_update(&mut self) {
        match self.rx.updates.try_recv() {
            Err(TryRecvError::Empty) => {}
            other => panic!("expected no update, got {other:?}"),
        }
    }

    /// Waits until `resource`'s status satisfies `done`; a source updates the status
    /// after queueing any update, so afterwards `no_update` is meaningful.
    pub async fn status(
        &mut self,
        resource: Resource,
        done: impl Fn(&ResourceStatus) -> bool,
    ) -> ResourceStatus {
        let mut status = self.rx.status.clone();
        let reached = tokio::time::timeout(
            WAIT,
            status.wait_for(|s| s.resources.get(&resource).is_some_and(&done)),
        )
        .await;
        match reached {
            Ok(Ok(status)) => status.resources[&resource].clone(),
            _ => panic!(
                "{resource} status not reached: {:?}",
                self.rx.status.borrow().resources.get(&resource)
            ),
        }
    }

    pub fn status_now(&self, resource: Resource) -> ResourceStatus {
        self.rx.status.borrow().resources[&resource].clone()
    }

    /// Drops the receiver, as the daemon does when it stops, and returns what the task
    /// ended with; it must end within [`WAIT`] and not panic.
    pub async fn close(mut self) -> T {
        let task = self.task.take().expect("the task is still ours");
        drop(self);
        tokio::time::timeout(WAIT, task)
            .await
            .expect("task ended")
            .expect("no panic")
    }
}

impl<T> Drop for Source<T> {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
