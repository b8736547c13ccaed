//! The config in force, and what happens when the source changes: a new valid config
//! replaces it; a new invalid one is rejected and the last good one stays in force (a
//! bad edit never takes routes down); a deleted source keeps the last good config.
//!
//! A rejected config is logged once per distinct content (the watcher may deliver the
//! same object many times), and its errors stay visible through [`ConfigState::status`]
//! for metrics and `status`.
//!
//! Owns: that policy and its bookkeeping. Must not: watch anything (the source module
//! feeds it) or act on sessions (the daemon plans from an [`ConfigUpdate::Applied`] and
//! `peer::session_changes` decides what that does to each session).

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use super::error::ConfigErrors;
use super::model::Config;

/// How many distinct rejected configs are remembered as already logged.
const LOGGED_MEMORY: usize = 32;

/// A content hash of a config source (FNV-1a 64): stable across processes, so the
/// same text shows the same fingerprint in logs of every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub u64);

impl Fingerprint {
    pub fn of(parts: &[&[u8]]) -> Fingerprint {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for part in parts {
            // A separator, so that ("ab", "c") and ("a", "bc") differ.
            for &b in part.iter().chain(&[0xff]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        Fingerprint(h)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A config that was refused, with every reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub fingerprint: Fingerprint,
    pub errors: ConfigErrors,
}

/// The result of feeding the state one source event.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigUpdate {
    /// The new config is in force; plan the sessions from `previous` (None at start).
    Applied {
        previous: Option<Arc<Config>>,
        current: Arc<Config>,
        fingerprint: Fingerprint,
    },
    /// The source changed but means the same config (or is the same text again).
    Unchanged { fingerprint: Fingerprint },
    /// The new config is invalid; `kept` is the config still in force, if any.
    /// `first_seen` is false when this exact content was already rejected and logged.
    Rejected {
        rejection: Rejection,
        first_seen: bool,
        kept: Option<Fingerprint>,
    },
    /// The source is gone; `kept` is the config still in force, if any.
    Deleted { kept: Option<Fingerprint> },
}

/// What metrics and `status` show about the config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConfigStatus {
    /// The config in force, if any was ever valid.
    pub in_force: Option<Fingerprint>,
    /// The source's current content, when it is invalid (and so not in force).
    pub rejected: Option<Rejection>,
    /// The source was deleted; `in_force` is the last good config.
    pub source_deleted: bool,
}

#[derive(Debug, Default)]
pub struct ConfigState {
    in_force: Option<(Arc<Config>, Fingerprint)>,
    rejected: Option<Rejection>,
    source_deleted: bool,
    logged: VecDeque<Fingerprint>,
}

impl ConfigState {
    pub fn new() -> ConfigState {
        ConfigState::default()
    }

    /// The config in force, if any.
    pub fn config(&self) -> Option<&Arc<Config>> {
        self.in_force.as_ref().map(|(c, _)| c)
    }

    pub fn status(&self) -> ConfigStatus {
        ConfigStatus {
            in_force: self.in_force.as_ref().map(|(_, f)| *f),
            rejected: self.rejected.clone(),
            source_deleted: self.source_deleted,
        }
    }

    /// A config file's new content (raw YAML or a ConfigMap manifest).
    pub fn update_text(&mut self, text: &str) -> ConfigUpdate {
        let fingerprint = Fingerprint::of(&[text.as_bytes()]);
        self.update(fingerprint, || super::parse(text))
    }

    /// The source was deleted: keep what is in force.
    pub fn deleted(&mut self) -> ConfigUpdate {
        self.source_deleted = true;
        self.rejected = None;
        ConfigUpdate::Deleted {
            kept: self.in_force.as_ref().map(|(_, f)| *f),
        }
    }

    fn update(
        &mut self,
        fingerprint: Fingerprint,
        parse: impl FnOnce() -> Result<Config, ConfigErrors>,
    ) -> ConfigUpdate {
        self.source_deleted = false;
        if self
            .in_force
            .as_ref()
            .is_some_and(|(_, f)| *f == fingerprint)
        {
            self.rejected = None;
            return ConfigUpdate::Unchanged { fingerprint };
        }
        match parse() {
            Ok(config) => {
                self.rejected = None;
                let previous = self.in_force.take().map(|(c, _)| c);
                if previous.as_deref().is_some_and(|p| p.same_meaning(&config)) {
                    self.in_force = previous.map(|c| (c, fingerprint));
                    return ConfigUpdate::Unchanged { fingerprint };
                }
                let current = Arc::new(config);
                self.in_force = Some((current.clone(), fingerprint));
                ConfigUpdate::Applied {
                    previous,
                    current,
                    fingerprint,
                }
            }
            Err(errors) => {
                let first_seen = !self.logged.contains(&fingerprint);
                if first_seen {
                    if self.logged.len() == LOGGED_MEMORY {
                        self.logged.pop_front();
                    }
                    self.logged.push_back(fingerprint);
                }
                let rejection = Rejection {
                    fingerprint,
                    errors,
                };
                self.rejected = Some(rejection.clone());
                ConfigUpdate::Rejected {
                    rejection,
                    first_seen,
                    kept: self.in_force.as_ref().map(|(_, f)| *f),
                }
            }
        }
    }
}

impl ConfigUpdate {
    /// Logs the update: a rejected config once per distinct content, at warn.
    pub fn log(&self) {
        match self {
            ConfigUpdate::Applied {
                current,
                fingerprint,
                ..
            } => {
                tracing::info!(
                    fingerprint = %fingerprint,
                    peers = current.peers.len(),
                    pools = current.pools.len(),
                    warnings = current.warnings.len(),
                    "bgp config applied"
                );
                for w in &current.warnings {
                    tracing::warn!(fingerprint = %fingerprint, warning = %w, "bgp config taken as Cilium's MetalLB took it");
                }
            }
            ConfigUpdate::Unchanged { fingerprint } => {
                tracing::debug!(fingerprint = %fingerprint, "bgp config unchanged")
            }
            ConfigUpdate::Rejected {
                rejection,
                first_seen: true,
                kept,
            } => tracing::warn!(
                fingerprint = %rejection.fingerprint,
                errors = %rejection.errors,
                kept = %kept.map_or("none".to_string(), |f| f.to_string()),
                "bgp config rejected, the last good config stays in force"
            ),
            ConfigUpdate::Rejected {
                rejection,
                first_seen: false,
                ..
            } => tracing::debug!(
                fingerprint = %rejection.fingerprint,
                "bgp config still rejected"
            ),
            ConfigUpdate::Deleted { kept } => tracing::warn!(
                kept = %kept.map_or("none".to_string(), |f| f.to_string()),
                "bgp config source deleted, the last good config stays in force"
            ),
        }
    }
}
