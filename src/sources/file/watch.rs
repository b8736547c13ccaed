//! When the file sources look at their files again: when the kernel says something in
//! their directories changed (inotify), else on a poll.
//!
//! - Watched: the directory a path names (or, for a file, the directory holding it) and
//!   the directory each file resolves to through its symlinks. A ConfigMap volume's
//!   swap (a new `..data` renamed over the old one) and an editor's write-and-rename are
//!   events of the path's directory; an edit in place is an event of the resolved one.
//! - An event only says "look now": what changed is still decided by the caller's
//!   metadata fingerprint, and a change is still taken once it reads the same twice one
//!   `poll` apart. While a change waits for that, the caller asks with `pending`.
//! - Poll fallback: without inotify (not Linux, or out of instances) or while a
//!   directory cannot be watched (a path not there yet), every `poll` as before. With
//!   every watch in place, still a look every [`SAFETY_POLL`]: a filesystem that does
//!   not notify (a network filesystem written from another host) is seen, late.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use inotify::{EventMask, EventOwned, EventStream, Inotify, WatchDescriptor, WatchMask};
use tracing::{debug, warn};

/// With every directory watched, the longest the files go unlooked at.
pub const SAFETY_POLL: Duration = Duration::from_secs(30);

/// What of a directory's changes can mean a changed file: contents, a rename over, a
/// new or removed entry (a symlink swap is a rename), a changed mode or link count.
fn mask() -> WatchMask {
    WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
}

/// Decides when the next look is due.
pub struct Trigger {
    poll: Duration,
    events: Option<EventStream<[u8; 4096]>>,
    watched: HashMap<PathBuf, WatchDescriptor>,
    /// Every directory asked for is watched.
    complete: bool,
    /// The first look is due at once.
    started: bool,
}

impl Trigger {
    /// A trigger for one source; without inotify it polls every `poll`. Needs a runtime.
    pub fn new(poll: Duration) -> Self {
        let events = match Inotify::init().and_then(|i| i.into_event_stream([0u8; 4096])) {
            Ok(events) => Some(events),
            Err(e) => {
                warn!(error = %e, poll_ms = poll.as_millis() as u64,
                    "file changes not notified (inotify), polling instead");
                None
            }
        };
        Self {
            poll,
            events,
            watched: HashMap::new(),
            complete: false,
            started: false,
        }
    }

    /// A trigger whose first look is done already (by its caller, before it waits).
    pub fn looked_once(mut self) -> Self {
        self.started = true;
        self
    }

    /// Whether changes now arrive as events (no poll but the safety one).
    pub fn notified(&self) -> bool {
        self.events.is_some() && self.complete
    }

    /// Aims the watches at what `path` and its `files` are now (after each look): new
    /// directories are added, those no longer needed removed.
    pub fn watch(&mut self, path: &Path, files: &[PathBuf]) {
        self.watch_dirs(directories(path, files));
    }

    /// Aims the watches at exactly `wanted` (absolute, resolved, sorted, no repeats).
    pub fn watch_dirs(&mut self, wanted: Vec<PathBuf>) {
        let Some(events) = &self.events else {
            return;
        };
        let mut watches = events.watches();
        let (kept, gone): (HashMap<_, _>, HashMap<_, _>) = std::mem::take(&mut self.watched)
            .into_iter()
            .partition(|(dir, _)| wanted.contains(dir));
        for wd in gone.into_values() {
            // Two names of one directory share a watch: it stays while one is kept. A
            // removed directory's watch is gone already: nothing to undo.
            if !kept.values().any(|k| *k == wd) {
                let _ = watches.remove(wd);
            }
        }
        self.watched = kept;
        let mut complete = true;
        for dir in wanted {
            if self.watched.contains_key(&dir) {
                continue;
            }
            match watches.add(&dir, mask()) {
                Ok(wd) => {
                    self.watched.insert(dir, wd);
                }
                Err(e) => {
                    debug!(dir = %dir.display(), error = %e, "not watched, polling meanwhile");
                    complete = false;
                }
            }
        }
        self.complete = complete;
    }

    /// Waits until the next look is due: at once the first time; every `poll` while a
    /// change is `pending` or a directory is not watched; else at the next event.
    pub async fn wait(&mut self, pending: bool) {
        if !std::mem::replace(&mut self.started, true) {
            return;
        }
        let watching = self.notified() && !pending;
        match self.events.as_mut() {
            Some(events) if watching => {
                tokio::select! {
                    event = events.next() => match event {
                        Some(Ok(event)) => forget_if_gone(&mut self.watched, &event),
                        Some(Err(e)) => {
                            warn!(error = %e, poll_ms = self.poll.as_millis() as u64,
                                "file change events failed, polling instead");
                            self.events = None;
                        }
                        // The inotify descriptor closed (it does not): poll.
                        None => self.events = None,
                    },
                    () = tokio::time::sleep(SAFETY_POLL) => {}
                }
            }
            _ => tokio::time::sleep(self.poll).await,
        }
        self.drain();
    }

    /// Takes every event queued: the look about to happen covers them.
    fn drain(&mut self) {
        let Some(events) = self.events.as_mut() else {
            return;
        };
        while let Some(Some(Ok(event))) = events.next().now_or_never() {
            forget_if_gone(&mut self.watched, &event);
        }
    }
}

/// A watch the kernel ended (its directory removed or unmounted) is forgotten, so the
/// next [`Trigger::watch`] adds it again, or polls while the directory is not there.
fn forget_if_gone(watched: &mut HashMap<PathBuf, WatchDescriptor>, event: &EventOwned) {
    if event.mask.contains(EventMask::IGNORED) {
        watched.retain(|_, wd| *wd != event.wd);
    }
}

/// The directories to watch for `path` and the `files` it stands for.
fn directories(path: &Path, files: &[PathBuf]) -> Vec<PathBuf> {
    let top = if path.is_dir() {
        path.to_path_buf()
    } else {
        parent(path)
    };
    resolved([top], files)
}

/// `dirs` and the directories `files` live in behind their symlinks (where an edit in
/// place happens), absolute and resolved so that one directory has one name, sorted.
pub fn resolved(dirs: impl IntoIterator<Item = PathBuf>, files: &[PathBuf]) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = dirs
        .into_iter()
        .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
        .collect();
    all.extend(
        files
            .iter()
            .filter_map(|f| std::fs::canonicalize(f).ok())
            .map(|real| parent(&real)),
    );
    all.sort();
    all.dedup();
    all
}

fn parent(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "podcidr-speaker-watch-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// With the directory watched, no look is due while nothing changes (not even after
    /// many polls), and one is due at once on a rename over the file.
    #[tokio::test]
    async fn a_watched_directory_wakes_on_a_change_and_only_then() {
        let dir = scratch("wakes");
        let file = dir.join("a.yaml");
        std::fs::write(&file, "a").unwrap();
        let poll = Duration::from_millis(20);
        let mut trigger = Trigger::new(poll);
        trigger.wait(false).await;
        trigger.watch(&dir, std::slice::from_ref(&file));
        assert!(trigger.notified());
        let quiet = tokio::time::timeout(poll * 25, trigger.wait(false)).await;
        assert!(quiet.is_err(), "woken with nothing changed");

        std::fs::write(dir.join(".a.tmp"), "b").unwrap();
        std::fs::rename(dir.join(".a.tmp"), &file).unwrap();
        let woken = tokio::time::timeout(Duration::from_secs(5), trigger.wait(false)).await;
        assert!(woken.is_ok(), "a rename over the file did not wake it");
        // A pending change is looked at again after one poll, events or not.
        let again = tokio::time::timeout(poll * 10, trigger.wait(true)).await;
        assert!(again.is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A watched directory removed and made again at once: the kernel ended the old
    /// watch, so it is watched again and a change in the new one wakes.
    #[tokio::test]
    async fn a_directory_removed_and_made_again_is_watched_again() {
        let dir = scratch("removed").join("state");
        std::fs::create_dir_all(&dir).unwrap();
        let poll = Duration::from_millis(20);
        let within = Duration::from_secs(5);
        let mut trigger = Trigger::new(poll);
        trigger.wait(false).await;
        trigger.watch(&dir, &[]);
        assert!(trigger.notified());
        // Made again before the look: the same path, a new directory.
        std::fs::remove_dir(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let woken = tokio::time::timeout(within, trigger.wait(false)).await;
        assert!(woken.is_ok(), "the removal did not wake it");
        trigger.watch(&dir, &[]);
        std::fs::write(dir.join("a.yaml"), "a").unwrap();
        let woken = tokio::time::timeout(within, trigger.wait(false)).await;
        assert!(woken.is_ok(), "a file in the new directory did not wake it");
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    /// A file's directory that is not there cannot be watched: looked at every poll.
    #[tokio::test]
    async fn an_unwatchable_path_is_polled() {
        let dir = scratch("missing").join("not-there");
        let file = dir.join("a.yaml");
        let poll = Duration::from_millis(20);
        let mut trigger = Trigger::new(poll);
        trigger.wait(false).await;
        trigger.watch(&file, &[]);
        assert!(!trigger.notified());
        for _ in 0..3 {
            let looked = tokio::time::timeout(poll * 10, trigger.wait(false)).await;
            assert!(looked.is_ok(), "not polled");
        }
        std::fs::remove_dir_all(dir.parent().unwrap()).unwrap();
    }

    /// A file's own directory and, through its symlinks, the one it lives in: one name
    /// each, absolute.
    #[test]
    fn directories_follow_symlinks_to_where_the_file_lives() {
        let dir = scratch("dirs");
        std::fs::create_dir_all(dir.join("..v1")).unwrap();
        std::fs::write(dir.join("..v1/a.yaml"), "a").unwrap();
        std::os::unix::fs::symlink("..v1", dir.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/a.yaml", dir.join("a.yaml")).unwrap();
        let real = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(
            directories(&dir, &[dir.join("a.yaml")]),
            [real.clone(), real.join("..v1")]
        );
        assert_eq!(
            directories(&dir.join("a.yaml"), &[dir.join("a.yaml")]),
            [real.clone(), real.join("..v1")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
