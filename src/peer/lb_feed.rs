//! How the daemon hands a peer task its LoadBalancer routes: a full set when the task
//! starts (or the peer's attributes change), then per-prefix changes. Unlike the pod
//! CIDR routes (a `watch` of the whole set, of which only the newest matters), every
//! change must arrive; they are folded into an inbox keyed by prefix (each value is
//! the prefix's new state, so the newest one per prefix is the sum of all before it),
//! which the task empties when woken. Memory stays bounded by the number of prefixes,
//! whatever the rate of events, and the daemon never waits on a task.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use ipnet::IpNet;
use tokio::sync::Notify;

use crate::routes::lb::LbRoutes;
use crate::routes::RouteAttrs;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct LbFeed {
    inbox: Mutex<Inbox>,
    notify: Notify,
}

#[derive(Debug, Default)]
struct Inbox {
    /// A whole new set, with the changes that came after it already applied.
    full: Option<LbRoutes>,
    changes: BTreeMap<IpNet, Option<Arc<RouteAttrs>>>,
}

/// What the task takes out of the feed.
#[derive(Debug, PartialEq, Eq)]
pub enum LbTake {
    /// Replace the whole LoadBalancer layer.
    Full(LbRoutes),
    /// Change these prefixes only (`None`: withdrawn).
    Changes(Vec<(IpNet, Option<Arc<RouteAttrs>>)>),
}

impl LbFeed {
    /// A feed holding `routes` as the first set.
    pub fn new(routes: LbRoutes) -> Arc<LbFeed> {
        let feed = Arc::new(LbFeed::default());
        feed.replace(routes);
        feed
    }

    fn inbox(&self) -> MutexGuard<'_, Inbox> {
        // A panic while holding the lock leaves a consistent inbox (every update is a
        // single insert or swap), so a poisoned lock is still usable.
        self.inbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A whole new set: what came before and is not taken yet is replaced.
    pub fn replace(&self, routes: LbRoutes) {
        {
            let mut inbox = self.inbox();
            inbox.changes.clear();
            inbox.full = Some(routes);
        }
        self.notify.notify_one();
    }

    /// Changes to the set (each the prefix's new state).
    pub fn push(&self, changes: impl IntoIterator<Item = (IpNet, Option<Arc<RouteAttrs>>)>) {
        let mut any = false;
        {
            let mut inbox = self.inbox();
            let inbox = &mut *inbox;
            for (p, to) in changes {
                any = true;
                match (&mut inbox.full, to) {
                    (Some(full), Some(a)) => {
                        full.insert(p, a);
                    }
                    (Some(full), None) => {
                        full.remove(&p);
                    }
                    (None, to) => {
                        inbox.changes.insert(p, to);
                    }
                }
            }
        }
        if any {
            self.notify.notify_one();
        }
    }

    /// What arrived since the last take; `None` when nothing did.
    pub fn take(&self) -> Option<LbTake> {
        let mut inbox = self.inbox();
        if let Some(full) = inbox.full.take() {
            return Some(LbTake::Full(full));
        }
        if inbox.changes.is_empty() {
            return None;
        }
        Some(LbTake::Changes(
            std::mem::take(&mut inbox.changes).into_iter().collect(),
        ))
    }

    /// Resolves when something was given since the last wake (at once if it already was).
    pub async fn ready(&self) {
        self.notify.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routes::NextHop;

    fn attrs(med: u32) -> Arc<RouteAttrs> {
        Arc::new(RouteAttrs {
            origin: crate::bgp::wire::Origin::Incomplete,
            as_path: vec![],
            next_hop: NextHop::SessionLocal,
            med: Some(med),
            local_pref: None,
            communities: vec![],
            large_communities: vec![],
        })
    }

    fn p(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn changes_fold_per_prefix_and_a_full_set_absorbs_later_changes() {
        let feed = LbFeed::new(LbRoutes::from([(p("192.0.2.1/32"), attrs(1))]));
        feed.push([
            (p("192.0.2.2/32"), Some(attrs(2))),
            (p("192.0.2.1/32"), None),
        ]);
        assert_eq!(
            feed.take(),
            Some(LbTake::Full(LbRoutes::from([(
                p("192.0.2.2/32"),
                attrs(2)
            )])))
        );
        assert_eq!(feed.take(), None);
        feed.push([(p("192.0.2.3/32"), Some(attrs(3)))]);
        feed.push([
            (p("192.0.2.3/32"), None),
            (p("192.0.2.4/32"), Some(attrs(4))),
        ]);
        assert_eq!(
            feed.take(),
            Some(LbTake::Changes(vec![
                (p("192.0.2.3/32"), None),
                (p("192.0.2.4/32"), Some(attrs(4)))
            ]))
        );
    }

    #[tokio::test]
    async fn a_push_before_the_wait_still_wakes() {
        let feed = LbFeed::new(LbRoutes::new());
        feed.take();
        feed.push([(p("192.0.2.1/32"), Some(attrs(1)))]);
        tokio::time::timeout(std::time::Duration::from_secs(1), feed.ready())
            .await
            .expect("woken");
        assert!(feed.take().is_some());
    }
}
