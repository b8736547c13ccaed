//! The standalone sources: `--cluster-state PATH` (a YAML/JSON file, or a directory of
//! them, holding Nodes, CiliumNodes and optionally cilium-config, Services and
//! EndpointSlices) and `--bgp-config FILE`, each followed for changes.
//!
//! - Change detection compares metadata (size, mtime and ctime to the nanosecond,
//!   inode): editors and `kubectl ... > file` replace or rewrite files, and a ConfigMap
//!   volume swaps a symlink, all of which this sees. It looks when the kernel reports a
//!   change in the files' directories ([`watch`]: inotify), else every `poll` (250 ms
//!   by default) where that is not available. A change is loaded once it has been
//!   stable for one poll, so a half-written file is not read; an edit is applied
//!   within about one poll (two without inotify).
//! - A directory is read non-recursively: `*.yaml`, `*.yml`, `*.json`, skipping names
//!   that start with `.` (a ConfigMap volume's `..data`), in name order.
//! - Loading is all or nothing ([`parse::cluster_state`]): a file that fails to read or
//!   parse keeps the last good state, and the error is logged once per distinct error.
//!   A missing path is such an error, not an empty cluster.
//! - A reload reads only the files whose metadata changed ([`reload`]): a Service edit
//!   in a directory of many files costs that file, and the node state is rebuilt only
//!   when a file holding node-side objects changed.
//! - Removing a Node from the files is that node's deletion.
//! - The daemon's source keeps only its own node's labels
//!   ([`FileSourceConfig::own_node`]): no other node's are read, and they are most of
//!   the state's memory at 50,000 nodes; a change to another node's labels alone is
//!   then no change. Its snapshots keep only that node's facts beside the view
//!   ([`ClusterSnapshot::new`]).
//! - Nothing is sent before the first good load; afterwards only changed snapshots (a
//!   change to another node's facts that alters no view is none).
//! - LoadBalancer facts (when [`FileSourceConfig::load_balancers`]): after the first
//!   good load one [`SourceUpdate::Lb`] per Service and EndpointSlice, then
//!   [`LbUpdate::Synced`]; after each later load exactly the objects whose facts differ
//!   (removing an object from the files is its deletion). A load that fails sends
//!   nothing, so no Service is withdrawn for a half-edited file.

pub mod parse;
pub mod reload;
pub mod secrets;
pub mod watch;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use super::error::SourceError;
use super::model::{
    CiliumConfigMemory, ClusterState, IpamOverride, KeptChange, CILIUM_CONFIG_KEPT,
};
use super::services::LbUpdate;
use super::{
    snapshot_and_report, Closed, ClusterSnapshot, NoEvents, RefusedIngress, ReportTracker,
    Resource, SourceSender, SourceUpdate,
};
use parse::ClusterFiles;

/// How often the files are checked for changes where inotify does not say, and how
/// long a change must stay the same to be loaded.
pub const DEFAULT_POLL: Duration = Duration::from_millis(250);

/// What the file source reads and how it decides the view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSourceConfig {
    /// `--cluster-state PATH`: a file or a directory.
    pub path: PathBuf,
    pub ipam: IpamOverride,
    pub poll: Duration,
    /// Also send the Services' and EndpointSlices' facts ([`SourceUpdate::Lb`]).
    pub load_balancers: bool,
    /// The daemon's own node: only its labels are read (the other nodes' are never
    /// read, and at 50,000 nodes they are 27 MB), and only its facts are kept in the
    /// snapshots sent ([`ClusterSnapshot::new`]). `None` keeps every node's.
    pub own_node: Option<Arc<str>>,
}

/// Reads a cluster-state path once: its node facts (the `plan` and `doctor` commands).
pub fn load(path: &Path) -> Result<ClusterState, SourceError> {
    load_files(path).map(|f| f.state)
}

/// Reads a cluster-state path once: its node facts and its Services' and
/// EndpointSlices' facts (the one-shot commands; [`run`] re-reads through [`reload`]).
///
/// One file at a time: each text is dropped once its objects are facts, so the memory a
/// reload takes is that of the largest file, not of all of them.
pub fn load_files(path: &Path) -> Result<ClusterFiles, SourceError> {
    let mut builder = parse::FilesBuilder::default();
    for file in list_files(path)? {
        let text = std::fs::read_to_string(&file).map_err(|e| SourceError::Io {
            path: file.clone(),
            reason: e.to_string(),
        })?;
        builder.add(&file, &text)?;
    }
    Ok(builder.finish())
}

/// Every Service object of a cluster-state path, file by file in order: for `plan`,
/// which hands them to the allocator (it reads annotations, ports and families that the
/// speaker's facts do not keep). Only the Services are kept, not the files' text.
pub fn load_services(path: &Path) -> Result<Vec<k8s_openapi::api::core::v1::Service>, SourceError> {
    let mut out = Vec::new();
    for file in list_files(path)? {
        let text = std::fs::read_to_string(&file).map_err(|e| SourceError::Io {
            path: file.clone(),
            reason: e.to_string(),
        })?;
        parse::for_each_object(&file, &text, &mut |object| {
            if let parse::Object::Service(service) = object {
                out.push(*service);
            }
            Ok(())
        })?;
    }
    Ok(out)
}

/// Follows `config.path` until the receiver is dropped.
#[tracing::instrument(name = "file_source", skip_all, fields(path = %config.path.display(), ipam = %config.ipam))]
pub async fn run(config: FileSourceConfig, out: SourceSender) -> Result<(), Closed> {
    let resource = Resource::ClusterStateFile;
    out.register(resource);
    let mut tracker = ReportTracker::new();
    // The last snapshot sent (each load's snapshot is compared with it): kept by
    // reference, not as a copy of a state that may hold 50,000 nodes.
    let mut last_sent: Option<Arc<ClusterSnapshot>> = None;
    let mut errors = ErrorLog::default();
    let mut memory = CiliumConfigMemory::default();
    // The files and LoadBalancer facts read so far: a reload reads only what changed.
    // The poller and the loader live on a blocking thread's side: every poll stats
    // each file, which is no work for a runtime worker that also runs the peer tasks.
    // A reload changes the loader only after every file is read and checked, so a
    // panic while reading (none is known) leaves it as a failed reload does.
    let files = Arc::new(std::sync::Mutex::new((
        Poller::new(config.path.clone()),
        reload::Loader::new(config.load_balancers).keep_labels_of(config.own_node.clone()),
    )));
    let mut lb_synced = false;
    let mut refused = RefusedIngress::default();
    let mut trigger = watch::Trigger::new(config.poll);
    let mut pending = false;
    loop {
        tokio::select! {
            () = trigger.wait(pending) => {}
            () = out.closed() => return Err(Closed),
        }
        let shared = Arc::clone(&files);
        let looked = tokio::task::spawn_blocking(move || {
            let mut files = shared
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let (poller, loader) = &mut *files;
            let loaded = poller.changed().map(|files| loader.reload_listed(files));
            (loaded, poller.pending(), poller.files())
        })
        .await;
        let loaded = match looked {
            Ok((loaded, now_pending, listed)) => {
                pending = now_pending;
                trigger.watch(&config.path, &listed);
                loaded
            }
            Err(e) => Some(Err(SourceError::Io {
                path: config.path.clone(),
                reason: format!("loader task failed: {e}"),
            })),
        };
        let Some(loaded) = loaded else { continue };
        match loaded {
            Ok(reload::Reload { state, lb, .. }) => {
                errors.clear(&config.path);
                if let Some(mut state) = state {
                    let (cilium_config, change) = memory.in_force(state.cilium_config.take());
                    state.cilium_config = cilium_config;
                    match change {
                        KeptChange::NowKept => warn!(path = %config.path.display(),
                            "cilium-config removed from the cluster state: keeping the last one seen, nothing changes until it is back"),
                        KeptChange::Back => {
                            info!(path = %config.path.display(), "cilium-config is back")
                        }
                        KeptChange::Unchanged => {}
                    }
                    if let Some(snapshot) = snapshot_and_report(
                        state,
                        config.ipam,
                        config.own_node.as_deref(),
                        last_sent.as_deref(),
                        &mut tracker,
                        &NoEvents,
                    ) {
                        last_sent = Some(Arc::clone(&snapshot));
                        out.send(SourceUpdate::Cluster(snapshot)).await?;
                    }
                }
                if config.load_balancers {
                    for update in lb {
                        refused.observe(&update);
                        out.send(SourceUpdate::Lb(update)).await?;
                    }
                    if !lb_synced {
                        lb_synced = true;
                        out.send(SourceUpdate::Lb(LbUpdate::Synced)).await?;
                    }
                }

                out.status(resource, |s| {
                    s.up = true;
                    s.synced = true;
                    s.events += 1;
                    s.relists += 1;
                    s.last_event = Some(SystemTime::now());
                    s.last_error = memory.kept().then(|| CILIUM_CONFIG_KEPT.to_string());
                });
            }
            Err(e) => {
                errors.report(&e, "cluster state not loaded, keeping the last good state");
                out.status(resource, |s| {
                    s.up = false;
                    s.errors += 1;
                    s.last_error = Some(e.to_string());
                });
            }
        }
    }
}

/// Follows a text file (`--bgp-config FILE`) and sends its contents on change.
///
/// A file that cannot be read keeps the last text (an editor's delete-and-recreate must
/// not look like a deleted configuration); `BgpConfigText(None)` is never sent.
#[tracing::instrument(name = "bgp_config_file", skip_all, fields(path = %path.display()))]
pub async fn watch_text_file(
    path: PathBuf,
    poll: Duration,
    out: SourceSender,
) -> Result<(), Closed> {
    let resource = Resource::BgpConfigFile;
    out.register(resource);
    let mut last_sent: Option<String> = None;
    let mut errors = ErrorLog::default();
    let mut poller = Poller::new(path.clone());
    let mut trigger = watch::Trigger::new(poll);
    loop {
        tokio::select! {
            () = trigger.wait(poller.pending()) => {}
            () = out.closed() => return Err(Closed),
        }
        let changed = poller.changed().is_some();
        trigger.watch(&path, &poller.files());
        if !changed {
            continue;
        }
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                errors.clear(&path);
                if last_sent.as_ref() != Some(&text) {
                    last_sent = Some(text.clone());
                    out.send(SourceUpdate::BgpConfigText(Some(text))).await?;
                }
                out.status(resource, |s| {
                    s.up = true;
                    s.synced = true;
                    s.events += 1;
                    s.relists += 1;
                    s.last_event = Some(SystemTime::now());
                    s.last_error = None;
                });
            }
            Err(e) => {
                let e = SourceError::Io {
                    path: path.clone(),
                    reason: e.to_string(),
                };
                errors.report(&e, "bgp config file not read, keeping the last text");
                out.status(resource, |s| {
                    s.up = false;
                    s.errors += 1;
                    s.last_error = Some(e.to_string());
                });
            }
        }
    }
}

/// Logs an error once until it changes or clears.
#[derive(Default)]
struct ErrorLog {
    last: Option<SourceError>,
}

impl ErrorLog {
    fn report(&mut self, error: &SourceError, message: &'static str) {
        if self.last.as_ref() != Some(error) {
            warn!(error = %error, "{message}");
            self.last = Some(error.clone());
        }
    }

    fn clear(&mut self, path: &Path) {
        if self.last.take().is_some() {
            info!(path = %path.display(), "loaded again");
        }
    }
}

/// Decides when to (re)load: at once the first time, then when the path's fingerprint
/// changed and stayed the same for one poll.
struct Poller {
    path: PathBuf,
    applied: Option<Fingerprint>,
    pending: Option<Fingerprint>,
}

impl Poller {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            applied: None,
            pending: None,
        }
    }

    /// The files (or the error) to load now, when it is time to.
    fn changed(&mut self) -> Option<&Fingerprint> {
        let now = fingerprint(&self.path);
        let load = match &self.applied {
            None => true,
            Some(applied) if *applied == now => false,
            // Changed: loaded once it is the same for one poll.
            Some(_) => self.pending.as_ref() == Some(&now),
        };
        if !load {
            let unchanged = self.applied.as_ref() == Some(&now);
            self.pending = (!unchanged).then_some(now);
            return None;
        }
        self.pending = None;
        Some(self.applied.insert(now))
    }

    /// A change was seen and waits to be the same at the next look.
    fn pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The files as last seen.
    fn files(&self) -> Vec<PathBuf> {
        match self.pending.as_ref().or(self.applied.as_ref()) {
            Some(Fingerprint::Files(stamps)) => stamps.iter().map(|s| s.path.clone()).collect(),
            _ => Vec::new(),
        }
    }
}

/// What the files look like from their metadata; an error is a fingerprint too, so
/// going from broken to fixed (or back) is a change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Fingerprint {
    Files(Vec<FileStamp>),
    Error(SourceError),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FileStamp {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    changed: (i64, i64),
    inode: (u64, u64),
}

fn fingerprint(path: &Path) -> Fingerprint {
    let stamps = list_files(path).and_then(|files| files.into_iter().map(FileStamp::of).collect());
    match stamps {
        Ok(stamps) => Fingerprint::Files(stamps),
        Err(e) => Fingerprint::Error(e),
    }
}

impl FileStamp {
    /// `file`'s metadata now (following symlinks).
    fn of(file: PathBuf) -> Result<FileStamp, SourceError> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::metadata(&file) {
            Ok(m) => Ok(FileStamp {
                path: file,
                len: m.len(),
                modified: m.modified().ok(),
                changed: (m.ctime(), m.ctime_nsec()),
                inode: (m.dev(), m.ino()),
            }),
            Err(e) => Err(SourceError::Io {
                reason: e.to_string(),
                path: file,
            }),
        }
    }
}

/// The files a cluster-state path stands for, in name order.
fn list_files(path: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let io = |p: &Path, e: std::io::Error| SourceError::Io {
        path: p.to_owned(),
        reason: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(|e| io(path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut files = Vec::new();
    for entry in std::fs::read_dir(path).map_err(|e| io(path, e))? {
        let entry = entry.map_err(|e| io(path, e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let wanted = !name.starts_with('.')
            && [".yaml", ".yml", ".json"]
                .iter()
                .any(|ext| name.ends_with(ext));
        let file = entry.path();
        // Follows symlinks: a ConfigMap volume's files are links into `..data`.
        if wanted && std::fs::metadata(&file).is_ok_and(|m| m.is_file()) {
            files.push(file);
        }
    }
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "podcidr-speaker-file-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn directory_lists_yaml_yml_json_in_order_skipping_dot_files() {
        let dir = scratch("list");
        for name in ["b.yaml", "a.yml", "c.json", ".hidden.yaml", "notes.txt"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        std::fs::create_dir(dir.join("sub.yaml")).unwrap();
        let names: Vec<String> = list_files(&dir)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.yml", "b.yaml", "c.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn poller_loads_first_then_only_stable_changes() {
        let dir = scratch("poller");
        let file = dir.join("state.yaml");
        std::fs::write(&file, "a").unwrap();
        let mut poller = Poller::new(file.clone());
        assert!(poller.changed().is_some(), "first poll loads");
        assert!(poller.changed().is_none(), "unchanged");
        std::fs::write(&file, "bb").unwrap();
        assert!(poller.changed().is_none(), "a change waits one poll");
        assert!(poller.changed().is_some(), "stable change loads");
        assert!(poller.changed().is_none());
        std::fs::remove_file(&file).unwrap();
        assert!(poller.changed().is_none());
        assert!(
            poller.changed().is_some(),
            "a missing file is a change (to an error)"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_path_is_an_error_not_an_empty_cluster() {
        let err = load(Path::new("/nonexistent/podcidr-speaker/state.yaml")).unwrap_err();
        assert!(matches!(err, SourceError::Io { .. }), "{err:?}");
    }
}
