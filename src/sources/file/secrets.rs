//! `--secrets-dir DIR`: the Secrets of `password-secret` read from files, laid out as a
//! Secret volume of each Secret mounted at `DIR/NAME` lays them out: `DIR/NAME/KEY`
//! holds the value of KEY (raw bytes, not base64).
//!
//! - Only the directories of the names the config refers to are read; in each, every
//!   regular file (symlinks followed, as a volume's `KEY -> ..data/KEY`) whose name does
//!   not start with `.` is a key. No directory: the Secret is missing.
//! - Read again when inotify reports a change under `DIR` or a named Secret's directory
//!   ([`super::watch`]), else every `poll` where that is not available; a changed
//!   content is taken once two reads in a row (one `poll` apart) agree, so a file caught
//!   half-written is not used. An unreadable directory keeps the last
//!   content and is reported (by path and error, never by content).

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

use crate::sources::secrets::{secret_data, SecretNames, SecretOrigin, SecretState, SecretsView};
use crate::sources::{Closed, Resource, SourceSender, SourceUpdate};

/// A Secret is at most 1 MiB (the API's limit): a bigger file is not a Secret's key.
const MAX_VALUE: u64 = 1 << 20;

/// Follows the named Secrets under `dir` until the receiver is dropped.
#[tracing::instrument(name = "secrets_dir", skip_all, fields(dir = %dir.display()))]
pub async fn run(
    dir: PathBuf,
    mut names: SecretNames,
    poll: Duration,
    out: SourceSender,
) -> Result<(), Closed> {
    let resource = Resource::SecretsDir;
    out.register(resource);
    let origin = SecretOrigin::Directory(dir.clone());
    let mut last_sent: Option<SecretsView> = None;
    let mut candidate: Option<SecretsView> = None;
    let mut last_error: Option<String> = None;
    let mut trigger = super::watch::Trigger::new(poll).looked_once();
    loop {
        let wanted = names.borrow_and_update().clone();
        let mut view = SecretsView::new(origin.clone());
        let mut error = None;
        for name in &wanted {
            let state = match read_secret(&dir.join(name)) {
                Ok(state) => state,
                Err(e) => {
                    error = Some(format!("{}: {e}", dir.join(name).display()));
                    // The last content read stays in force.
                    last_sent
                        .as_ref()
                        .and_then(|v| v.secrets.get(name).cloned())
                        .unwrap_or_else(|| SecretState::Unreadable(e.to_string()))
                }
            };
            view.secrets.insert(name.clone(), state);
        }
        if error != last_error {
            match &error {
                Some(e) => warn!(error = %e, "secret directory not read, keeping the last content"),
                None => info!("secret directories read again"),
            }
            last_error.clone_from(&error);
        }
        // A change counts once it reads the same twice (a name change needs no wait).
        let names_changed = last_sent
            .as_ref()
            .is_none_or(|v| !v.secrets.keys().eq(view.secrets.keys()));
        let mut sent = false;
        if last_sent.as_ref() != Some(&view) {
            if names_changed || candidate.as_ref() == Some(&view) {
                candidate = None;
                last_sent = Some(view.clone());
                out.send(SourceUpdate::Secrets(Arc::new(view))).await?;
                sent = true;
            } else {
                candidate = Some(view);
            }
        } else {
            candidate = None;
        }
        out.status(resource, |s| {
            s.up = error.is_none();
            s.synced |= last_sent.is_some();
            if sent {
                s.events += 1;
                s.relists += 1;
                s.last_event = Some(SystemTime::now());
            }
            match &error {
                Some(e) => {
                    // Counted once per distinct error, not on every poll.
                    s.errors += u64::from(s.last_error.as_ref() != Some(e));
                    s.last_error = Some(e.clone());
                }
                None => s.last_error = None,
            }
        });
        trigger.watch_dirs(watched_dirs(&dir, &wanted));
        tokio::select! {
            changed = names.changed() => {
                if changed.is_err() {
                    return Err(Closed);
                }
            }
            () = trigger.wait(candidate.is_some()) => {}
            () = out.closed() => return Err(Closed),
        }
    }
}

/// What to watch for the `names` under `dir`: `dir` (a Secret's directory appearing or
/// going), each named directory there (a volume's `..data` swap) and where its keys
/// live behind their symlinks (an edit in place).
fn watched_dirs(dir: &Path, names: &BTreeSet<String>) -> Vec<PathBuf> {
    let mut dirs = vec![dir.to_path_buf()];
    let mut keys = Vec::new();
    for name in names {
        let secret = dir.join(name);
        if let Ok(entries) = std::fs::read_dir(&secret) {
            keys.extend(entries.flatten().map(|e| e.path()));
            dirs.push(secret);
        }
    }
    super::watch::resolved(dirs, &keys)
}

/// One Secret's directory: missing, or its keys.
pub fn read_secret(dir: &Path) -> io::Result<SecretState> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(SecretState::Missing),
        Err(e) => return Err(e),
    };
    let mut raw: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for entry in entries {
        let entry = entry?;
        let Ok(key) = entry.file_name().into_string() else {
            continue;
        };
        if key.starts_with('.') {
            continue;
        }
        // Follows symlinks: a mounted volume's keys are links into `..data`.
        let meta = match std::fs::metadata(entry.path()) {
            Ok(meta) => meta,
            // A dangling link (a volume mid-swap): not a key.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if !meta.is_file() {
            continue;
        }
        if meta.len() > MAX_VALUE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{key} is larger than a Secret can be (1 MiB)"),
            ));
        }
        raw.insert(key, std::fs::read(entry.path())?);
    }
    Ok(SecretState::Present(secret_data(
        raw.iter().map(|(k, v)| (k.clone(), v.as_slice())),
    )))
}
