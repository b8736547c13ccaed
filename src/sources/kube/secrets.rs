//! The Secrets of `password-secret` through the API: for each name the config refers
//! to, a GET of that Secret, then a watch of it alone (field selector
//! `metadata.name=NAME`) from the GET's resource version. Never a list, never a watch
//! of every Secret: RBAC grants `get` and `watch` on the named Secrets only (a watch
//! is allowed by `resourceNames` because it carries that field selector).
//!
//! - A change of the names (the daemon sends them on each config change) stops the
//!   followers of the names gone and starts one per new name.
//! - 404 on the GET, or a DELETED event: the Secret is missing. A watch that ends
//!   (server timeout) resumes from the last resource version; 410 Gone, an error or a
//!   broken stream: GET again after the backoff. The last content read stays in force
//!   meanwhile; a name never read reports why.
//! - Error texts are the API's status or a category ("undecodable response"), never a
//!   decoder's message, which may quote the content.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::SystemTime;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::api::{WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::{Retry, RetryBackoff, WATCH_TIMEOUT};
use crate::sources::secrets::{secret_data, SecretNames, SecretOrigin, SecretState, SecretsView};
use crate::sources::{Closed, Resource, SourceSender, SourceUpdate};

/// A watch that ends sooner than this without an error is resumed after the backoff.
const MIN_WATCH: std::time::Duration = std::time::Duration::from_secs(1);

/// What one name's follower reports.
enum Report {
    State(SecretState),
    Error(String),
}

/// Follows the named Secrets of `namespace` until the receiver is dropped.
#[tracing::instrument(name = "kube_secrets", skip_all, fields(namespace = %namespace))]
pub async fn run(
    client: Client,
    namespace: String,
    mut names: SecretNames,
    retry: Retry,
    out: SourceSender,
) -> Result<(), Closed> {
    let resource = Resource::Secrets;
    out.register(resource);
    let api: Api<KubeSecret> = Api::namespaced(client, &namespace);
    let origin = SecretOrigin::Namespace(namespace.clone());
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, Report)>();
    let mut followers: BTreeMap<String, JoinHandle<()>> = BTreeMap::new();
    let mut states: BTreeMap<String, SecretState> = BTreeMap::new();
    let mut answered: BTreeSet<String> = BTreeSet::new();
    let mut errors: BTreeMap<String, String> = BTreeMap::new();
    let mut last_sent: Option<SecretsView> = None;
    let mut events = 0u64;
    let mut last_event: Option<SystemTime> = None;
    let mut error_count = 0u64;
    let mut names_open = true;
    let stop_all = |followers: &mut BTreeMap<String, JoinHandle<()>>| {
        for (_, task) in std::mem::take(followers) {
            task.abort();
        }
    };
    loop {
        if names_open {
            let wanted = names.borrow_and_update().clone();
            followers.retain(|name, task| {
                let keep = wanted.contains(name);
                if !keep {
                    task.abort();
                }
                keep
            });
            states.retain(|name, _| wanted.contains(name));
            answered.retain(|name| wanted.contains(name));
            errors.retain(|name, _| wanted.contains(name));
            for name in wanted {
                if let std::collections::btree_map::Entry::Vacant(slot) =
                    followers.entry(name.clone())
                {
                    debug!(secret = %name, "following secret");
                    states.insert(name.clone(), SecretState::Pending);
                    slot.insert(tokio::spawn(follow(api.clone(), name, retry, tx.clone())));
                }
            }
        }
        let view = SecretsView {
            origin: origin.clone(),
            secrets: states.clone(),
        };
        if last_sent.as_ref() != Some(&view) {
            last_sent = Some(view.clone());
            if let Err(closed) = out.send(SourceUpdate::Secrets(Arc::new(view))).await {
                stop_all(&mut followers);
                return Err(closed);
            }
        }
        out.status(resource, |s| {
            s.synced = answered.len() == states.len();
            s.up = errors.is_empty();
            s.events = events;
            s.last_event = last_event;
            s.errors = error_count;
            s.last_error = errors.values().next_back().cloned();
        });
        tokio::select! {
            changed = names.changed(), if names_open => {
                // The daemon keeps the sender as long as it runs; if it is gone, the
                // names in force stay followed until the receiver goes too.
                names_open = changed.is_ok();
            }
            report = rx.recv() => {
                // The loop holds a sender: the channel never closes.
                let Some((name, report)) = report else { continue };
                if !followers.contains_key(&name) {
                    continue;
                }
                answered.insert(name.clone());
                match report {
                    Report::State(state) => {
                        events += 1;
                        last_event = Some(SystemTime::now());
                        if errors.remove(&name).is_some() {
                            info!(secret = %name, "secret readable again");
                        }
                        states.insert(name, state);
                    }
                    Report::Error(e) => {
                        error_count += 1;
                        warn!(secret = %name, error = %e, "secret not read, keeping its last content");
                        if matches!(states.get(&name), Some(SecretState::Pending | SecretState::Unreadable(_))) {
                            states.insert(name.clone(), SecretState::Unreadable(e.clone()));
                        }
                        errors.insert(name, e);
                    }
                }
            }
            () = out.closed() => {
                stop_all(&mut followers);
                return Err(Closed);
            }
        }
    }
}

/// GET then watch one Secret, for ever (until aborted).
async fn follow(
    api: Api<KubeSecret>,
    name: String,
    retry: Retry,
    tx: mpsc::UnboundedSender<(String, Report)>,
) {
    let mut backoff = RetryBackoff::new(retry);
    let send = |report| {
        // Err: the source ended; the task is aborted right after.
        let _ = tx.send((name.clone(), report));
    };
    // The timeout is the API server's default, explicit because API_READ_TIMEOUT is
    // derived from it (as the other watchers). The u32 conversion cannot fail for 290.
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(WATCH_TIMEOUT.as_secs() as u32);
    loop {
        let mut version = match api.get_opt(&name).await {
            Ok(Some(secret)) => {
                let version = secret.metadata.resource_version.clone();
                send(Report::State(state_of(&secret)));
                version.unwrap_or_else(|| "0".into())
            }
            Ok(None) => {
                send(Report::State(SecretState::Missing));
                // Any state the server has: a Secret created since the GET arrives
                // as ADDED.
                "0".into()
            }
            Err(e) => {
                send(Report::Error(describe(&e)));
                pause(&mut backoff).await;
                continue;
            }
        };
        // Watch until it fails; resume after a normal end.
        let failed = loop {
            let started = tokio::time::Instant::now();
            let mut stream = match api.watch(&params, &version).await {
                Ok(stream) => stream.boxed(),
                Err(e) => break Some(describe(&e)),
            };
            let mut outcome = None;
            while let Some(item) = stream.next().await {
                match item {
                    Ok(WatchEvent::Added(s) | WatchEvent::Modified(s)) => {
                        version = s.metadata.resource_version.clone().unwrap_or(version);
                        send(Report::State(state_of(&s)));
                        backoff_reset(&mut backoff);
                    }
                    Ok(WatchEvent::Deleted(s)) => {
                        version = s.metadata.resource_version.clone().unwrap_or(version);
                        send(Report::State(SecretState::Missing));
                    }
                    Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                    Ok(WatchEvent::Error(status)) if status.code == 410 => {
                        debug!(secret = %name, "secret watch expired (410 gone), reading it again");
                        outcome = Some(None);
                        break;
                    }
                    Ok(WatchEvent::Error(status)) => {
                        outcome = Some(Some(format!(
                            "watch error {} {}: {}",
                            status.code, status.reason, status.message
                        )));
                        break;
                    }
                    Err(e) => {
                        outcome = Some(Some(describe(&e)));
                        break;
                    }
                }
            }
            match outcome {
                // The server ended the watch (its timeout): resume where it stopped; a
                // server that ends every watch at once is not asked again in a loop.
                None => {
                    if started.elapsed() < MIN_WATCH {
                        pause(&mut backoff).await;
                    }
                }
                Some(failure) => break failure,
            }
        };
        if let Some(e) = failed {
            send(Report::Error(e));
            pause(&mut backoff).await;
        }
    }
}

fn backoff_reset(backoff: &mut RetryBackoff) {
    kube::runtime::utils::Backoff::reset(backoff);
}

async fn pause(backoff: &mut RetryBackoff) {
    // RetryBackoff never runs out; the fallback is kube's first step.
    let delay = backoff
        .next()
        .unwrap_or(std::time::Duration::from_millis(800));
    tokio::time::sleep(delay).await;
}

/// A Secret's `data` (base64 on the wire, bytes here) and `stringData` (write-only in
/// the API, but present in a manifest a test or tool may serve).
fn state_of(secret: &KubeSecret) -> SecretState {
    let mut bytes: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (key, value) in secret.data.iter().flatten() {
        bytes.insert(key.clone(), value.0.clone());
    }
    for (key, value) in secret.string_data.iter().flatten() {
        bytes.insert(key.clone(), value.clone().into_bytes());
    }
    SecretState::Present(secret_data(
        bytes.iter().map(|(k, v)| (k.clone(), v.as_slice())),
    ))
}

/// An error as text that cannot quote a Secret's content.
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!(
            "api error {} {}: {}",
            status.code, status.reason, status.message
        ),
        kube::Error::SerdeError(_) => "undecodable response from the api server".into(),
        other => other.to_string(),
    }
}
