//! `podcidr-speaker run`: the wiring between the sources, the config state, the route
//! planner, the peer tasks and the metrics. Bounded channels, spawns and shutdown; no
//! protocol or planning logic (that is in `bgp`, `routes` and `peer`).
//!
//! - [`settings`]: the flags as the library sees them, their cross-checks and
//!   `--dry-run`.

pub mod settings;

use std::path::PathBuf;
use std::sync::Arc;

use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinSet;
use tracing::{info, warn};

pub use settings::{dry_run, ClusterSource, ConfigSource, DryRun, Settings};

use crate::config::state::ConfigState;
use crate::config::ConfigErrors;
use crate::routes::AnnounceMode;
use crate::sources::kube::{self as kube_source, KubeSourceConfig, Retry, WatchScope};
use crate::sources::{self, ClusterSnapshot, IpamError, SourceError, SourceSender, SourceUpdate};

/// Why `run` could not start (once running, nothing a peer, the API server or a file
/// sends ends it: those are logged and the last good state stays in force).
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{flag}: {reason}")]
    Settings { flag: &'static str, reason: String },
    #[error("{}: cannot read: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("{}: invalid bgp-config:\n{errors}", path.display())]
    Config { path: PathBuf, errors: ConfigErrors },
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Ipam(#[from] IpamError),
    #[error("no kubernetes API (neither in-cluster nor KUBECONFIG): {0}")]
    Kube(String),
    #[error("cannot install the signal handlers: {0}")]
    Signal(std::io::Error),
}

/// Room for source updates between the watchers and the main loop. Updates are
/// snapshots: the loop drains everything queued before planning once.
const SOURCE_QUEUE: usize = 16;

/// Follows the sources until SIGTERM or SIGINT; then stops every task and returns.
pub async fn run(settings: Settings) -> Result<(), DaemonError> {
    settings.validate()?;
    let (tx, mut rx) = sources::channel(SOURCE_QUEUE);
    let mut tasks = JoinSet::new();
    start_sources(&settings, tx, &mut tasks).await?;
    let mut terminate = signal(SignalKind::terminate()).map_err(DaemonError::Signal)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(DaemonError::Signal)?;
    let mut state = State::new(settings);
    info!(node = %state.settings.node_name(), announce = %state.settings.announce, "podcidr-speaker started");
    loop {
        tokio::select! {
            update = rx.updates.recv() => {
                let Some(update) = update else { break };
                state.apply(update);
                while let Ok(more) = rx.updates.try_recv() {
                    state.apply(more);
                }
            }
            _ = terminate.recv() => { info!(signal = "SIGTERM", "shutting down"); break }
            _ = interrupt.recv() => { info!(signal = "SIGINT", "shutting down"); break }
        }
    }
    tasks.shutdown().await;
    Ok(())
}

/// Starts the source tasks the settings ask for, all feeding one channel.
async fn start_sources(
    settings: &Settings,
    tx: SourceSender,
    tasks: &mut JoinSet<()>,
) -> Result<(), DaemonError> {
    let poll = sources::file::DEFAULT_POLL;
    let bgp_config_map = match &settings.config {
        ConfigSource::File(path) => {
            let (path, tx) = (path.clone(), tx.clone());
            tasks.spawn(async move {
                let _ = sources::file::watch_text_file(path, poll, tx).await;
            });
            None
        }
        ConfigSource::ConfigMap(r) => Some(r.clone()),
    };
    match &settings.cluster {
        ClusterSource::File(path) => {
            let config = sources::file::FileSourceConfig {
                path: path.clone(),
                ipam: settings.ipam,
                poll,
            };
            tasks.spawn(async move {
                let _ = sources::file::run(config, tx).await;
            });
        }
        ClusterSource::Kubernetes => {
            let client = ::kube::Client::try_default()
                .await
                .map_err(|e| DaemonError::Kube(e.to_string()))?;
            let scope = match (settings.announce, &settings.node) {
                (AnnounceMode::Local, Some(node)) => WatchScope::Local { node: node.clone() },
                _ => WatchScope::Cluster,
            };
            let (events, publisher) =
                kube_source::events::KubeEvents::spawn(client.clone(), settings.node.clone());
            let config = KubeSourceConfig {
                scope,
                cilium_config: kube_source::ConfigMapRef::cilium_config(),
                bgp_config: bgp_config_map,
                ipam: settings.ipam,
                retry: Retry::KubeDefault,
            };
            tasks.spawn(async move {
                let _ = kube_source::run(client, config, tx, Arc::new(events)).await;
            });
            tasks.spawn(async move {
                let _ = publisher.await;
            });
        }
    }
    Ok(())
}

/// What the main loop knows: the latest cluster snapshot and the config in force.
struct State {
    settings: Settings,
    cluster: Option<Arc<ClusterSnapshot>>,
    config: ConfigState,
}

impl State {
    fn new(settings: Settings) -> Self {
        Self {
            settings,
            cluster: None,
            config: ConfigState::new(),
        }
    }

    fn apply(&mut self, update: SourceUpdate) {
        match update {
            SourceUpdate::Cluster(snapshot) => {
                if let Err(e) = &snapshot.view {
                    warn!(error = %e, "no node view: nothing can be planned until the ipam mode is decided");
                }
                self.cluster = Some(snapshot);
            }
            SourceUpdate::BgpConfigText(Some(text)) => self.config.update_text(&text).log(),
            SourceUpdate::BgpConfigText(None) => self.config.deleted().log(),
        }
    }
}
