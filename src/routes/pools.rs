//! `pod-cidr-pools` (multi-pool IPAM, issue #21): which pools' pod CIDRs a peer gets.
//! A peer without the option gets every pool; with it, only the pools it lists. In the
//! other IPAM modes CIDRs belong to no pool and the option does not apply: every CIDR is
//! announced, and the finding says the option is inactive.
//!
//! The planner (`plan.rs`) selects with [`Selection`] and returns the findings
//! ([`PoolFinding`]) in its `Plan`; `plan` and the daemon only render them.
//!
//! Must not: build attributes (the pool's extra communities are `plan.rs`'s), or read
//! anything but the config peer and the node view.

use std::fmt;
use std::sync::Arc;

use ipnet::IpNet;

use crate::config::{Peer, PeerKey, PodCidrPools};
use crate::sources::model::{CidrList, IpamMode, NodeEntry};

/// A peer's pool selection in force: `None` takes every pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Selection<'c>(pub Option<&'c PodCidrPools>);

impl<'c> Selection<'c> {
    /// `peer`'s `pod-cidr-pools` where it applies (multi-pool IPAM), else every pool.
    pub fn of(peer: &'c Peer, ipam: IpamMode) -> Selection<'c> {
        Selection(
            peer.pod_cidr_pools
                .as_ref()
                .filter(|_| ipam == IpamMode::MultiPool),
        )
    }

    /// Whether a CIDR of `pool` (`None`: of no pool) goes to this peer.
    pub fn takes(self, pool: Option<&str>) -> bool {
        match self.0 {
            Some(pools) => pool.is_some_and(|name| pools.contains_key(name)),
            None => true,
        }
    }
}

/// What the pool selection left out or could not do, as the planner found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PoolFinding {
    /// `pod-cidr-pools` is set for these peers but the IPAM mode has no pools: every
    /// pod CIDR is announced to them.
    Inactive { peers: Vec<PeerKey>, ipam: IpamMode },
    /// A node's CIDRs of `pool` are not announced to `peer`: the pool is not in its
    /// `pod-cidr-pools`.
    NotAnnounced {
        peer: PeerKey,
        node: Arc<str>,
        pool: String,
        prefixes: Vec<IpNet>,
    },
}

impl PoolFinding {
    /// A stable name, for tools (`plan -o json`).
    pub fn kind(&self) -> &'static str {
        match self {
            PoolFinding::Inactive { .. } => "pod-cidr-pools-inactive",
            PoolFinding::NotAnnounced { .. } => "pool-not-announced",
        }
    }
}

impl fmt::Display for PoolFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolFinding::Inactive { peers, ipam } => {
                let peers: Vec<String> = peers.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "pod-cidr-pools is set for peers {} but ipam {ipam} has no pools: every pod \
                     CIDR is announced to them",
                    peers.join(", ")
                )
            }
            PoolFinding::NotAnnounced {
                peer,
                node,
                pool,
                prefixes,
            } => write!(
                f,
                "{} of node {node} (pool {pool:?}) not announced to {peer}: the pool is not in \
                 its pod-cidr-pools",
                CidrList(prefixes)
            ),
        }
    }
}

/// The findings of the selection for the selected `peers`, announcing the pod CIDRs
/// of `nodes` under `ipam`: the inactive option first, then per peer each node's pools
/// it does not take.
pub fn findings<'a>(
    peers: impl IntoIterator<Item = (PeerKey, &'a Peer)>,
    nodes: impl IntoIterator<Item = &'a NodeEntry> + Clone,
    ipam: IpamMode,
) -> Vec<PoolFinding> {
    let peers: Vec<(PeerKey, &Peer)> = peers.into_iter().collect();
    let mut out = Vec::new();
    if ipam != IpamMode::MultiPool {
        let set: Vec<PeerKey> = peers
            .iter()
            .filter(|(_, p)| p.pod_cidr_pools.is_some())
            .map(|(key, _)| *key)
            .collect();
        if !set.is_empty() {
            out.push(PoolFinding::Inactive { peers: set, ipam });
        }
        return out;
    }
    for (key, peer) in &peers {
        let selection = Selection::of(peer, ipam);
        if selection.0.is_none() {
            continue;
        }
        for node in nodes.clone() {
            for held in node
                .pools
                .iter()
                .filter(|h| !selection.takes(Some(&h.pool)))
            {
                out.push(PoolFinding::NotAnnounced {
                    peer: *key,
                    node: Arc::clone(&node.name),
                    pool: held.pool.clone(),
                    prefixes: held.cidrs.clone(),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peers() -> Vec<Peer> {
        crate::config::parse(
            "peers:
  - peer-address: 10.5.0.1
    peer-asn: 65000
    my-asn: 65083
  - peer-address: 10.5.0.2
    peer-asn: 65000
    my-asn: 65083
    pod-cidr-pools:
      blue: {}
",
        )
        .unwrap()
        .peers
    }

    #[test]
    fn a_listed_pool_is_taken_and_the_option_applies_in_multi_pool_only() {
        let peers = peers();
        let every = Selection::of(&peers[0], IpamMode::MultiPool);
        assert!(every.takes(Some("default")) && every.takes(None));
        let blue = Selection::of(&peers[1], IpamMode::MultiPool);
        assert!(blue.takes(Some("blue")));
        assert!(!blue.takes(Some("default")));
        assert!(!blue.takes(None), "a CIDR of no pool is not in the list");
        let inactive = Selection::of(&peers[1], IpamMode::ClusterPool);
        assert!(inactive.takes(Some("default")));
        let found = findings(
            peers.iter().map(|p| (p.key(), p)),
            std::iter::empty(),
            IpamMode::ClusterPool,
        );
        assert_eq!(
            found,
            [PoolFinding::Inactive {
                peers: vec![peers[1].key()],
                ipam: IpamMode::ClusterPool
            }]
        );
    }
}
