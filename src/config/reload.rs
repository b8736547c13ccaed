//! What a new config, or new labels on this node, change for this node's BGP sessions:
//! a pure diff from (old config, old labels) to (new config, new labels).
//!
//! Sessions are keyed by [`PeerKey`] (peer-address and peer-port: a node holds one
//! session per remote endpoint). For a key selected before and after:
//! - a change of a session parameter ([`Peer::session_params`]: ASNs, timers,
//!   router-id, source address, password, multihop/GTSM, passive, graceful restart)
//!   resets the session, since each goes into the TCP connection or the OPEN message;
//! - otherwise a change of what is announced ([`Peer::advertisement_params`] or the
//!   address pools) re-sends the routes on the running session;
//! - otherwise a change of a live setting ([`Peer::live_params`]) is applied in place;
//! - otherwise the session is kept untouched.
//!
//! Keys selected only before are closed, only after are opened. Selector and label
//! edits therefore touch exactly the sessions whose selection changed.
//!
//! Must not: act. The peer driver executes the plan.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::model::{Config, Peer, PeerConflict, PeerKey};

/// What to do with each session of one node. Every key appears in exactly one list;
/// each list is sorted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReloadPlan {
    /// Nothing that matters changed.
    pub keep: Vec<PeerKey>,
    /// Keep the session; apply the new live settings (max-prefix, connect-retry-time,
    /// bfd-profile).
    pub retune: Vec<PeerKey>,
    /// Keep the session; re-send the routes with the new attributes.
    pub readvertise: Vec<PeerKey>,
    /// Close the session and open it again with the new parameters.
    pub reset: Vec<PeerKey>,
    /// A new session.
    pub open: Vec<PeerKey>,
    /// A session no longer wanted on this node.
    pub close: Vec<PeerKey>,
    /// Clashes in the new config for this node (first entry used), to report.
    pub conflicts: Vec<PeerConflict>,
}

/// The action for one session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SessionAction {
    Keep,
    Retune,
    Readvertise,
    Reset,
    Open,
    Close,
}

impl ReloadPlan {
    /// The first config on a node: every selected peer is opened.
    pub fn initial(config: &Config, labels: &BTreeMap<String, String>) -> ReloadPlan {
        ReloadPlan::between(&Config::default(), labels, config, labels)
    }

    /// From the sessions of `old` on a node labelled `old_labels` to those of `new` on
    /// the node labelled `new_labels`. Pass the same config twice for a label change,
    /// the same labels twice for a config change.
    pub fn between(
        old: &Config,
        old_labels: &BTreeMap<String, String>,
        new: &Config,
        new_labels: &BTreeMap<String, String>,
    ) -> ReloadPlan {
        let before = old.peers_for_node(old_labels).peers;
        let after_sel = new.peers_for_node(new_labels);
        let after = after_sel.peers;
        let pools_changed = old.pools != new.pools;
        let mut plan = ReloadPlan {
            conflicts: after_sel.conflicts,
            ..ReloadPlan::default()
        };
        let keys: BTreeSet<PeerKey> = before.keys().chain(after.keys()).copied().collect();
        for key in keys {
            let action = match (before.get(&key), after.get(&key)) {
                (Some(o), Some(n)) => compare(o, n, pools_changed),
                (None, Some(_)) => SessionAction::Open,
                (Some(_), None) => SessionAction::Close,
                (None, None) => continue,
            };
            plan.list_mut(action).push(key);
        }
        plan
    }

    fn list_mut(&mut self, action: SessionAction) -> &mut Vec<PeerKey> {
        match action {
            SessionAction::Keep => &mut self.keep,
            SessionAction::Retune => &mut self.retune,
            SessionAction::Readvertise => &mut self.readvertise,
            SessionAction::Reset => &mut self.reset,
            SessionAction::Open => &mut self.open,
            SessionAction::Close => &mut self.close,
        }
    }

    /// The action for one session, if the node had or has it.
    pub fn action(&self, key: &PeerKey) -> Option<SessionAction> {
        [
            (&self.keep, SessionAction::Keep),
            (&self.retune, SessionAction::Retune),
            (&self.readvertise, SessionAction::Readvertise),
            (&self.reset, SessionAction::Reset),
            (&self.open, SessionAction::Open),
            (&self.close, SessionAction::Close),
        ]
        .into_iter()
        .find(|(list, _)| list.contains(key))
        .map(|(_, a)| a)
    }

    /// True when no session needs anything done.
    pub fn is_noop(&self) -> bool {
        self.retune.is_empty()
            && self.readvertise.is_empty()
            && self.reset.is_empty()
            && self.open.is_empty()
            && self.close.is_empty()
    }
}

fn compare(old: &Peer, new: &Peer, pools_changed: bool) -> SessionAction {
    if old.session_params() != new.session_params() {
        SessionAction::Reset
    } else if pools_changed || old.advertisement_params() != new.advertisement_params() {
        SessionAction::Readvertise
    } else if old.live_params() != new.live_params() {
        SessionAction::Retune
    } else {
        SessionAction::Keep
    }
}

/// `open 10.0.0.1:179; reset 10.0.0.2:179`: the non-empty lists, for logs.
impl fmt::Display for ReloadPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lists = [
            ("keep", &self.keep),
            ("retune", &self.retune),
            ("readvertise", &self.readvertise),
            ("reset", &self.reset),
            ("open", &self.open),
            ("close", &self.close),
        ];
        let mut first = true;
        for (name, list) in lists.iter().filter(|(_, l)| !l.is_empty()) {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            let keys: Vec<String> = list.iter().map(PeerKey::to_string).collect();
            write!(f, "{name} {}", keys.join(", "))?;
        }
        if first {
            f.write_str("no sessions")?;
        }
        Ok(())
    }
}
