//! The follower's reload ([`super::run`]): only the files whose metadata changed are
//! read again.
//!
//! - Each file's last good read is remembered by its [`FileStamp`] and whether it holds
//!   node-side objects (Nodes, CiliumNodes, CiliumPodIPPools, cilium-config).
//! - The LoadBalancer facts are kept once, by object, each with the file that defines
//!   it; each file keeps the keys of its objects. A reload re-reads the changed files and sends exactly the objects whose facts
//!   differ among the objects those files defined before or define now: an object that
//!   moves from one changed file to another is changed (or not at all), never deleted
//!   and added.
//! - The node state is rebuilt only when a file that held or holds node-side objects
//!   changed (always on the first load): from the changed files, read once, and the
//!   other node-side files. A Service-only edit never re-reads the Nodes.
//! - All or nothing, as [`super::load_files`]: a file that does not read or parse, or an
//!   object another file also defines, fails the reload, and nothing of it is kept; the
//!   failed files' stamps are not remembered, so the next change reads them again.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::parse::{FilesBuilder, LbSink};
use super::{fingerprint, FileStamp, Fingerprint};
use crate::sources::error::SourceError;
use crate::sources::model::ClusterState;
use crate::sources::service_objects::Names;
use crate::sources::services::{self, LbFacts, LbUpdate, ObjectKey};

/// What one file gave at its last good read.
#[derive(Debug)]
struct Seen {
    stamp: FileStamp,
    /// The file as its objects' facts name their origin: one allocation per read, so
    /// "defined by this file" is a pointer comparison.
    at: Arc<Path>,
    /// It holds node-side objects.
    node_side: bool,
    /// The Services and EndpointSlices it defines: a reload of the file finds what it
    /// no longer defines without a scan of every object.
    services: Box<[ObjectKey]>,
    slices: Box<[ObjectKey]>,
}

/// The result of one reload.
#[derive(Debug, Default)]
pub struct Reload {
    /// The node-side state of every file, when it may have changed (a file that held or
    /// holds node-side objects changed, or this is the first load); `None` when it
    /// cannot have.
    pub state: Option<ClusterState>,
    /// The LoadBalancer objects whose facts changed: additions, then changes, then
    /// deletions (each: Services, then EndpointSlices), as [`LbFacts::changes_to`].
    pub lb: Vec<LbUpdate>,
    /// The files read (for tests and logs).
    pub read: usize,
}

/// The remembered files and facts of a followed cluster-state path.
#[derive(Debug, Default)]
pub struct Loader {
    /// Also keep and diff the Services' and EndpointSlices' facts.
    load_balancers: bool,
    loaded: bool,
    files: BTreeMap<PathBuf, Seen>,
    services: BTreeMap<ObjectKey, (Arc<Path>, services::ServiceFacts)>,
    slices: BTreeMap<ObjectKey, (Arc<Path>, services::SliceFacts)>,
    names: Names,
    /// Keep only this node's labels (`FilesBuilder::labels_of`).
    labels_of: Option<Arc<str>>,
}

/// One kind's new facts, from the changed files, with their files.
type Fresh<F> = BTreeMap<ObjectKey, (Arc<Path>, F)>;

impl Loader {
    pub fn new(load_balancers: bool) -> Self {
        Self {
            load_balancers,
            ..Self::default()
        }
    }

    /// Keeps the labels of the node `own` only (see `FilesBuilder::labels_of`).
    pub fn keep_labels_of(mut self, own: Option<Arc<str>>) -> Self {
        self.labels_of = own;
        self
    }

    /// Reads what changed under `path` since the last good reload.
    pub fn reload(&mut self, path: &Path) -> Result<Reload, SourceError> {
        self.reload_listed(&fingerprint(path))
    }

    /// [`Loader::reload`] of the files as the poller just listed and stamped them.
    pub(crate) fn reload_listed(&mut self, files: &Fingerprint) -> Result<Reload, SourceError> {
        let stamps = match files {
            Fingerprint::Files(stamps) => stamps,
            Fingerprint::Error(e) => return Err(e.clone()),
        };
        let listed: Vec<&PathBuf> = stamps.iter().map(|s| &s.path).collect();
        let changed: Vec<FileStamp> = stamps
            .iter()
            .filter(|stamp| self.files.get(&stamp.path).map(|s| &s.stamp) != Some(stamp))
            .cloned()
            .collect();
        let listed_set: HashSet<&PathBuf> = listed.iter().copied().collect();
        let removed: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|f| !listed_set.contains(f))
            .cloned()
            .collect();
        if self.loaded && changed.is_empty() && removed.is_empty() {
            return Ok(Reload::default());
        }
        // The node-side state of the changed files first; of the others once it is known
        // to be needed.
        let mut nodes = FilesBuilder::labels_of(self.labels_of.clone());
        let mut services: Fresh<services::ServiceFacts> = BTreeMap::new();
        let mut slices: Fresh<services::SliceFacts> = BTreeMap::new();
        let mut read = Vec::with_capacity(changed.len());
        for stamp in changed {
            let at: Arc<Path> = Arc::from(stamp.path.as_path());
            let text = read_text(&stamp.path)?;
            let mut facts = LbFacts::default();
            let sink = if self.load_balancers {
                LbSink::File {
                    facts: &mut facts,
                    names: &mut self.names,
                }
            } else {
                LbSink::Skip
            };
            let node_side = nodes.add_split(&stamp.path, &text, sink)?;
            drop(text);
            let service_keys = take_fresh(&mut services, facts.services, &at, "Service")?;
            let slice_keys = take_fresh(&mut slices, facts.slices, &at, "EndpointSlice")?;
            read.push(Seen {
                stamp,
                at,
                node_side,
                services: service_keys,
                slices: slice_keys,
            });
        }
        let node_side_changed = read.iter().any(|s| s.node_side)
            || read
                .iter()
                .filter_map(|s| self.files.get(&s.stamp.path))
                .chain(removed.iter().filter_map(|f| self.files.get(f)))
                .any(|s| s.node_side);
        let mut files_read = read.len();
        let state = if !self.loaded || node_side_changed {
            let fresh: HashSet<&Path> = read.iter().map(|s| s.stamp.path.as_path()).collect();
            for file in listed {
                let kept = self.files.get(file).filter(|s| s.node_side);
                if kept.is_some() && !fresh.contains(file.as_path()) {
                    let text = read_text(file)?;
                    nodes.add_split(file, &text, LbSink::Skip)?;
                    files_read += 1;
                }
            }
            Some(nodes.finish().state)
        } else {
            None
        };
        // The files whose objects are replaced (as they were last read): an object
        // defined in any other file is defined twice.
        let before: Vec<&Seen> = read
            .iter()
            .map(|s| &s.stamp.path)
            .chain(&removed)
            .filter_map(|f| self.files.get(f))
            .collect();
        check_elsewhere(&self.services, &services, &before, "Service")?;
        check_elsewhere(&self.slices, &slices, &before, "EndpointSlice")?;

        // Nothing fails from here on.
        let lb = if self.load_balancers {
            let old = |keys: fn(&Seen) -> &[ObjectKey]| -> Vec<ObjectKey> {
                before.iter().flat_map(|s| keys(s)).cloned().collect()
            };
            let (old_services, old_slices) = (old(|s| &s.services), old(|s| &s.slices));
            let services = merge(&mut self.services, services, old_services);
            let slices = merge(&mut self.slices, slices, old_slices);
            order(services, slices)
        } else {
            Vec::new()
        };
        for file in &removed {
            self.files.remove(file);
        }
        for seen in read {
            self.files.insert(seen.stamp.path.clone(), seen);
        }
        self.loaded = true;
        Ok(Reload {
            state,
            lb,
            read: files_read,
        })
    }
}

fn read_text(file: &Path) -> Result<String, SourceError> {
    std::fs::read_to_string(file).map_err(|e| SourceError::Io {
        path: file.to_owned(),
        reason: e.to_string(),
    })
}

/// Moves one changed file's facts of a kind into `fresh`, refusing an object that
/// another changed file also defines; the file's keys.
fn take_fresh<F>(
    fresh: &mut Fresh<F>,
    facts: BTreeMap<ObjectKey, F>,
    at: &Arc<Path>,
    kind: &'static str,
) -> Result<Box<[ObjectKey]>, SourceError> {
    let keys = facts.keys().cloned().collect();
    for (key, facts) in facts {
        if let Some((first, _)) = fresh.get(&key) {
            return Err(SourceError::Duplicate {
                kind,
                name: key.to_string(),
                first: first.to_path_buf(),
                second: at.to_path_buf(),
            });
        }
        fresh.insert(key, (Arc::clone(at), facts));
    }
    Ok(keys)
}

/// Refuses a fresh object that a file not re-read still defines (`replaced`: the
/// files re-read or lost, as last read; an object's origin is the same allocation as
/// its file's [`Seen::at`], so no path is compared).
fn check_elsewhere<F>(
    kept: &BTreeMap<ObjectKey, (Arc<Path>, F)>,
    fresh: &Fresh<F>,
    replaced: &[&Seen],
    kind: &'static str,
) -> Result<(), SourceError> {
    for (key, (at, _)) in fresh {
        if let Some((first, _)) = kept.get(key) {
            if !replaced.iter().any(|s| Arc::ptr_eq(&s.at, first)) {
                return Err(SourceError::Duplicate {
                    kind,
                    name: key.to_string(),
                    first: first.to_path_buf(),
                    second: at.to_path_buf(),
                });
            }
        }
    }
    Ok(())
}

/// One kind's changes, by [`services::Change`], in key order.
type Changes<F> = Vec<(ObjectKey, Option<F>, services::Change)>;

/// Replaces the objects of the re-read or lost files (`old`: what they defined) in
/// `kept` with `fresh`; the changes.
fn merge<F: PartialEq + Clone>(
    kept: &mut BTreeMap<ObjectKey, (Arc<Path>, F)>,
    fresh: Fresh<F>,
    old: Vec<ObjectKey>,
) -> Changes<F> {
    use services::Change;
    let mut out = Vec::new();
    let gone: Vec<ObjectKey> = old
        .into_iter()
        .filter(|key| !fresh.contains_key(key))
        .collect();
    for (key, (at, facts)) in fresh {
        let change = match kept.get(&key) {
            None => Some(Change::Added),
            Some((_, old)) if *old != facts => Some(Change::Changed),
            Some(_) => None,
        };
        if let Some(change) = change {
            out.push((key.clone(), Some(facts.clone()), change));
        }
        kept.insert(key, (at, facts));
    }
    for key in gone {
        kept.remove(&key);
        out.push((key, None, Change::Deleted));
    }
    out
}

/// Additions, then changes, then deletions; each: Services, then EndpointSlices.
fn order(
    services: Changes<services::ServiceFacts>,
    slices: Changes<services::SliceFacts>,
) -> Vec<LbUpdate> {
    use services::Change;
    let mut buckets: [Vec<LbUpdate>; 6] = Default::default();
    let at = |change: Change| match change {
        Change::Added => 0,
        Change::Changed => 2,
        Change::Deleted => 4,
    };
    for (key, facts, change) in services {
        buckets[at(change)].push(LbUpdate::Service { key, facts });
    }
    for (key, facts, change) in slices {
        buckets[at(change) + 1].push(LbUpdate::Slice { key, facts });
    }
    buckets.into_iter().flatten().collect()
}
