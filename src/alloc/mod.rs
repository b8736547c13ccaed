//! The LoadBalancer IP allocator's decisions: which Service holds which addresses of the
//! bgp-config's `address-pools`, and why a Service has none. MetalLB v0.12.1's rules
//! (its `controller/service.go` and `internal/allocator/`), with the fixes later MetalLB
//! made and two choices of ours, said where they are made:
//!
//! - pools are tried in config order (MetalLB 0.12 walked a Go map: a random order);
//! - every change that frees or shares an address retries the pending Services at once
//!   (MetalLB 0.12 did not retry after a type change away from LoadBalancer);
//! - a requested IP and a pool annotation together must agree (MetalLB 0.12 took the IP
//!   and then cleared it again at the next pass, for ever).
//!
//! A state machine fed facts, like `routes::drain`: [`Allocator::apply`] per Service
//! change, [`Allocator::synced`] once every Service has been listed,
//! [`Allocator::reload`] per config; each returns [`Decision`]s (what a Service holds or
//! why it is pending, the status to write, the Event). Existing status addresses are
//! claimed as Services arrive and nothing new is handed out before `synced`, so a
//! restart or a leader change never moves an address.
//!
//! Pure: no tokio, no kube, no clock, no logging. Must not: write anything (the
//! `allocate` role writes `status.loadBalancer.ingress` and the Events), or read a
//! Kubernetes object (the facts arrive as [`AllocFacts`]).

pub mod pools;
pub mod service;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use crate::config::AddressPool;
use crate::sources::services::{class_served, ObjectKey};
use pools::{Place, Pools};
pub use service::{
    AllocFacts, Backend, Conflict, Family, FamilyPolicy, Port, Protocol, RequestError, Sharing,
};

/// Where a Service stands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum State {
    /// Not a LoadBalancer, of a class served elsewhere, or deleted: holds nothing.
    #[default]
    NotOurs,
    /// Seen before every Service was listed, without status addresses it could keep:
    /// decided at [`Allocator::synced`], after every other Service has claimed its own.
    Waiting,
    Holds(Holding),
    Pending(Reason),
}

/// The addresses a Service holds, all from one pool, in the order of its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holding {
    pub ips: Vec<IpAddr>,
    pub pool: Arc<str>,
}

/// Why a Service has no address, in MetalLB's cases and a user's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// `spec.ipFamilies` is empty (no ClusterIP to take the family from).
    NoFamily,
    /// The requested addresses cannot be read.
    Request(RequestError),
    /// The requested addresses are not of the Service's `ipFamilies`.
    RequestedFamilies {
        ips: Vec<IpAddr>,
        families: Vec<Family>,
    },
    NotInPool {
        ip: IpAddr,
    },
    /// In a pool with `avoid-buggy-ips`, and ending in .0 or .255.
    Skipped {
        ip: IpAddr,
        pool: Arc<str>,
    },
    /// Two requested addresses in two pools.
    SplitPools {
        ips: Vec<IpAddr>,
    },
    /// A requested address outside the pool the annotation names.
    OutsideNamedPool {
        ip: IpAddr,
        pool: Arc<str>,
    },
    InUse {
        ip: IpAddr,
        by: ObjectKey,
        conflict: Conflict,
    },
    UnknownPool {
        pool: Arc<str>,
    },
    /// The named pool has no address left for these families.
    PoolFull {
        pool: Arc<str>,
        families: Vec<Family>,
    },
    /// No pool with `auto-assign` has an address of these families at all.
    NoAutoPool {
        families: Vec<Family>,
    },
    /// Every `auto-assign` pool of these families is full.
    AutoPoolsFull {
        families: Vec<Family>,
    },
}

impl Reason {
    /// A bounded name, for a metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Reason::NoFamily => "no_family",
            Reason::Request(_) => "bad_request",
            Reason::RequestedFamilies { .. } => "requested_family",
            Reason::NotInPool { .. } => "not_in_pool",
            Reason::Skipped { .. } => "avoid_buggy_ips",
            Reason::SplitPools { .. } => "split_pools",
            Reason::OutsideNamedPool { .. } => "outside_named_pool",
            Reason::InUse { .. } => "in_use",
            Reason::UnknownPool { .. } => "unknown_pool",
            Reason::PoolFull { .. } => "pool_full",
            Reason::NoAutoPool { .. } => "no_auto_pool",
            Reason::AutoPoolsFull { .. } => "pools_full",
        }
    }

    pub const LABELS: [&'static str; 12] = [
        "no_family",
        "bad_request",
        "requested_family",
        "not_in_pool",
        "avoid_buggy_ips",
        "split_pools",
        "outside_named_pool",
        "in_use",
        "unknown_pool",
        "pool_full",
        "no_auto_pool",
        "pools_full",
    ];
}

fn families(f: &[Family]) -> String {
    f.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use service::list;
        match self {
            Reason::NoFamily => f.write_str("the Service has no spec.ipFamilies (no ClusterIP)"),
            Reason::Request(e) => write!(f, "{e}"),
            Reason::RequestedFamilies { ips, families: fam } => write!(
                f,
                "the requested {} do not match the Service's ipFamilies ({})",
                list(ips),
                families(fam)
            ),
            Reason::NotInPool { ip } => write!(f, "the requested {ip} is in no address pool"),
            Reason::Skipped { ip, pool } => write!(
                f,
                "the requested {ip} ends in .0 or .255 and pool {pool} has avoid-buggy-ips"
            ),
            Reason::SplitPools { ips } => write!(
                f,
                "the requested {} are in different pools (both must come from one)",
                list(ips)
            ),
            Reason::OutsideNamedPool { ip, pool } => write!(
                f,
                "the requested {ip} is not in pool {pool}, which {} names",
                service::ANNOTATION_POOL
            ),
            Reason::InUse { ip, by, conflict } => {
                write!(f, "{ip} is in use by {by} and cannot be shared: {conflict}")
            }
            Reason::UnknownPool { pool } => write!(
                f,
                "{} names pool {pool}, which the config does not have",
                service::ANNOTATION_POOL
            ),
            Reason::PoolFull {
                pool,
                families: fam,
            } => {
                write!(f, "pool {pool} has no {} address left", families(fam))
            }
            Reason::NoAutoPool { families: fam } => write!(
                f,
                "no pool with auto-assign has {} addresses (name one with {})",
                families(fam),
                service::ANNOTATION_POOL
            ),
            Reason::AutoPoolsFull { families: fam } => write!(
                f,
                "every pool with auto-assign is out of {} addresses",
                families(fam)
            ),
        }
    }
}

/// What became of one Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub service: ObjectKey,
    pub state: State,
    pub before: State,
    /// `status.loadBalancer.ingress` to write, when the Service's differs.
    pub write: Option<Vec<IpAddr>>,
    /// A request that cannot be read while the Service keeps what it holds (a bad edit
    /// never takes an address away).
    pub warning: Option<Reason>,
}

/// The Event a decision calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllocEvent {
    /// `IPAllocated`.
    Allocated(Holding),
    /// `AllocationFailed`.
    Failed(Reason),
}

impl Decision {
    pub fn changed(&self) -> bool {
        self.state != self.before
    }

    /// `IPAllocated` when the Service's status gets new addresses, `AllocationFailed`
    /// when it is newly pending or pending for another reason (not at every retry).
    pub fn event(&self) -> Option<AllocEvent> {
        match &self.state {
            State::Holds(h) if self.write.is_some() => Some(AllocEvent::Allocated(h.clone())),
            State::Pending(r) if self.changed() => Some(AllocEvent::Failed(r.clone())),
            _ => None,
        }
    }
}

/// A reload refused: addresses in use that the new config puts outside every pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Each orphaned address and the Services holding it.
    pub orphans: BTreeMap<IpAddr, Vec<ObjectKey>>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self
            .orphans
            .iter()
            .map(|(ip, by)| {
                let names: Vec<String> = by.iter().map(ToString::to_string).collect();
                format!("{ip} (held by {})", names.join(", "))
            })
            .collect();
        write!(
            f,
            "the new address-pools leave addresses in use outside every pool (or on an address avoid-buggy-ips skips): {}; keeping the previous config until those Services change",
            items.join("; ")
        )
    }
}

/// One pool's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolUsage {
    pub name: Arc<str>,
    /// Addresses it may hand out (saturating).
    pub total: u128,
    /// Distinct addresses held.
    pub in_use: u128,
}

/// An address in use.
#[derive(Debug, Clone)]
struct Address {
    place: Place,
    /// The holders' sharing key and backend (equal for all of them).
    key: Option<Arc<str>>,
    backend: Backend,
    /// Its holders, sorted, each with the ports it uses: a short list (a Vec, not a map
    /// per address, halves the allocator's memory; the bench's item 8).
    holders: Vec<(ObjectKey, Vec<Port>)>,
}

#[derive(Debug, Clone)]
struct Entry {
    facts: AllocFacts,
    state: State,
}

/// The allocator's state. See the module doc.
#[derive(Debug, Clone, Default)]
pub struct Allocator {
    pools: Pools,
    classes: BTreeSet<Arc<str>>,
    synced: bool,
    services: BTreeMap<ObjectKey, Entry>,
    addresses: HashMap<IpAddr, Address>,
    /// Sharing key -> the addresses held under it, ascending.
    shared: HashMap<Arc<str>, BTreeSet<IpAddr>>,
    /// Pending Services, and `PreferDualStack` ones holding fewer families than they
    /// prefer: retried, in key order, whenever an address frees or gains a sharer.
    retry: BTreeSet<ObjectKey>,
}

impl Allocator {
    /// An allocator over these pools for the Services of these `loadBalancerClass`es
    /// (empty: Services without a class, `--lb-class`'s convention).
    pub fn new(pools: &[AddressPool], classes: BTreeSet<Arc<str>>) -> Allocator {
        Allocator {
            pools: Pools::new(pools),
            classes,
            ..Allocator::default()
        }
    }

    /// A Service's facts changed (`None`: deleted).
    pub fn apply(&mut self, key: &ObjectKey, facts: Option<AllocFacts>) -> Vec<Decision> {
        let mut out = Vec::new();
        let touched_holding = match facts {
            None => {
                let Some(entry) = self.services.remove(key) else {
                    return out;
                };
                self.retry.remove(key);
                let held = matches!(entry.state, State::Holds(_));
                if let State::Holds(h) = &entry.state {
                    self.unhold(key, &h.ips);
                }
                out.push(Decision {
                    service: key.clone(),
                    state: State::NotOurs,
                    before: entry.state,
                    write: None,
                    warning: None,
                });
                held
            }
            Some(facts) => {
                self.services
                    .entry(key.clone())
                    .and_modify(|e| e.facts = facts.clone())
                    .or_insert(Entry {
                        facts,
                        state: State::NotOurs,
                    });
                match self.decide(key) {
                    Some(d) => {
                        let held = matches!(d.state, State::Holds(_))
                            || matches!(d.before, State::Holds(_));
                        out.push(d);
                        held
                    }
                    None => false,
                }
            }
        };
        if touched_holding && self.synced {
            self.retry_all(&mut out);
        }
        out
    }

    /// Every Service has been listed: the ones waiting are decided, in key order, after
    /// all the others have claimed their addresses.
    pub fn synced(&mut self) -> Vec<Decision> {
        let mut out = Vec::new();
        if self.synced {
            return out;
        }
        self.synced = true;
        let waiting: Vec<ObjectKey> = self
            .services
            .iter()
            .filter(|(_, e)| e.state == State::Waiting)
            .map(|(k, _)| k.clone())
            .collect();
        for key in waiting {
            out.extend(self.decide(&key));
        }
        self.retry_all(&mut out);
        out
    }

    /// Whether every Service has been listed.
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// What a new config would orphan: addresses in use outside every new pool, or on
    /// an address its new pool's `avoid-buggy-ips` skips. Empty: the config may be
    /// taken. What `reload` refuses on; also what a check of a config file against the
    /// live state needs (no command makes that check yet).
    pub fn orphans(&self, pools: &[AddressPool]) -> BTreeMap<IpAddr, Vec<ObjectKey>> {
        let new = Pools::new(pools);
        self.addresses
            .iter()
            .filter(|(ip, _)| !keeps_address(&new, **ip))
            .map(|(ip, a)| (*ip, a.holders.iter().map(|(k, _)| k.clone()).collect()))
            .collect()
    }

    /// The status addresses of the Services it serves that its own pools leave outside
    /// (outside every pool, or skipped by `avoid-buggy-ips`), with those Services: the
    /// refusal's rule applied to the status as the cluster has it. An allocator that
    /// handed them out under an earlier config refuses this one ([`Allocator::reload`]);
    /// one starting on it gives them up. What `doctor` checks against the live state.
    pub fn status_outside(&self) -> BTreeMap<IpAddr, Vec<ObjectKey>> {
        let mut out: BTreeMap<IpAddr, Vec<ObjectKey>> = BTreeMap::new();
        for (key, e) in &self.services {
            if e.state == State::NotOurs {
                continue;
            }
            for ip in e
                .facts
                .status_ips
                .iter()
                .filter(|ip| !keeps_address(&self.pools, **ip))
            {
                let holders = out.entry(*ip).or_default();
                // Keys arrive sorted; a status listing an address twice names it once.
                if holders.last() != Some(key) {
                    holders.push(key.clone());
                }
            }
        }
        out
    }

    /// A new config: refused whole when it orphans an address in use; else taken, and
    /// every Service decided again (a pending one may get an address, one whose
    /// annotation names a pool that is gone loses its own).
    pub fn reload(&mut self, pools: &[AddressPool]) -> Result<Vec<Decision>, Refusal> {
        let orphans = self.orphans(pools);
        if !orphans.is_empty() {
            return Err(Refusal { orphans });
        }
        self.pools = Pools::new(pools);
        let Allocator {
            pools, addresses, ..
        } = self;
        for (ip, a) in addresses.iter_mut() {
            // `orphans` found every address in a pool of this config.
            if let Some(place) = pools.locate(*ip) {
                a.place = place;
                if let Some(r) = pools.range_mut(place) {
                    r.take(*ip);
                }
            }
        }
        let mut out = Vec::new();
        let keys: Vec<ObjectKey> = self.services.keys().cloned().collect();
        for key in keys {
            if let Some(d) = self.decide(&key) {
                if d.changed() || d.write.is_some() {
                    out.push(d);
                }
            }
        }
        if self.synced {
            self.retry_all(&mut out);
        }
        Ok(out)
    }

    /// Where a Service stands.
    pub fn state(&self, key: &ObjectKey) -> Option<&State> {
        self.services.get(key).map(|e| &e.state)
    }

    /// Every Service known, in key order, with its facts and state.
    pub fn services(&self) -> impl Iterator<Item = (&ObjectKey, &AllocFacts, &State)> {
        self.services.iter().map(|(k, e)| (k, &e.facts, &e.state))
    }

    /// The Services holding `ip`.
    pub fn holders(&self, ip: IpAddr) -> Vec<ObjectKey> {
        self.addresses
            .get(&ip)
            .map(|a| a.holders.iter().map(|(k, _)| k.clone()).collect())
            .unwrap_or_default()
    }

    /// Per pool, in config order: its size and the addresses in use.
    pub fn usage(&self) -> Vec<PoolUsage> {
        self.pools
            .iter()
            .map(|(_, p)| PoolUsage {
                name: Arc::clone(&p.name),
                total: p.total(),
                in_use: p.in_use(),
            })
            .collect()
    }

    /// Decides one Service again; `None` when it is unknown.
    fn decide(&mut self, key: &ObjectKey) -> Option<Decision> {
        let entry = self.services.get(key)?;
        let facts = entry.facts.clone();
        let before = entry.state.clone();
        // Its own addresses must not stand in its way.
        if let State::Holds(h) = &before {
            self.unhold(key, &h.ips);
        }
        let (state, warning) = self.choose(&facts, &before);
        match &state {
            State::Holds(h) => {
                self.hold(key, &facts.sharing, h);
                // Claimed before the first list ended, it is completed at `synced`.
                if facts.wants_more(&h.ips) {
                    self.retry.insert(key.clone());
                } else {
                    self.retry.remove(key);
                }
            }
            State::Pending(_) => {
                self.retry.insert(key.clone());
            }
            State::NotOurs | State::Waiting => {
                self.retry.remove(key);
            }
        }
        let write = match &state {
            State::Holds(h) => Some(h.ips.clone()),
            State::Pending(_) => Some(Vec::new()),
            // What we wrote is taken back; a Service that is no LoadBalancer any more
            // loses a status it kept (MetalLB clears it too).
            State::NotOurs
                if matches!(before, State::Holds(_))
                    || (!facts.load_balancer
                        && class_served(&self.classes, facts.class.as_ref())) =>
            {
                Some(Vec::new())
            }
            State::NotOurs | State::Waiting => None,
        }
        // The status as last seen may lag behind a write of ours still in flight: a
        // change from what this Service held is written whatever the status shows.
        .filter(|ips| {
            *ips != facts.status_ips || matches!(&before, State::Holds(h) if h.ips != *ips)
        });
        if let Some(e) = self.services.get_mut(key) {
            e.state = state.clone();
        }
        Some(Decision {
            service: key.clone(),
            state,
            before,
            write,
            warning,
        })
    }

    fn choose(&self, facts: &AllocFacts, before: &State) -> (State, Option<Reason>) {
        if !facts.load_balancer || !class_served(&self.classes, facts.class.as_ref()) {
            return (State::NotOurs, None);
        }
        if facts.families.is_empty() {
            return (State::Pending(Reason::NoFamily), None);
        }
        let requested = facts.requested();
        let candidate = match before {
            State::Holds(h) => Some(h.ips.clone()),
            _ => Some(facts.status_ips.clone()).filter(|ips| !ips.is_empty()),
        };
        if let Some(ips) = candidate {
            if let Some(pool) = self.keeps(facts, &ips, requested.as_ref().ok()) {
                let mut holding = Holding { ips, pool };
                if self.synced && facts.wants_more(&holding.ips) {
                    self.extend(facts, &mut holding);
                }
                return (State::Holds(holding), requested.err().map(Reason::Request));
            }
        }
        if !self.synced {
            return (State::Waiting, None);
        }
        let requested = match requested {
            Ok(r) => r,
            Err(e) => return (State::Pending(Reason::Request(e)), None),
        };
        match self.allocate(facts, requested) {
            Ok(h) => (State::Holds(h), None),
            Err(r) => (State::Pending(r), None),
        }
    }

    /// The pool of addresses a Service holds (or its status shows) when it may keep
    /// them: of its families, all in one pool and allocatable there, the pool its
    /// annotation names if any, the addresses it requests if any, and shareable.
    fn keeps(
        &self,
        facts: &AllocFacts,
        ips: &[IpAddr],
        requested: Option<&Option<Vec<IpAddr>>>,
    ) -> Option<Arc<str>> {
        if !facts.fits(ips) {
            return None;
        }
        if let Some(Some(req)) = requested {
            let a: BTreeSet<&IpAddr> = ips.iter().collect();
            let b: BTreeSet<&IpAddr> = req.iter().collect();
            if a != b {
                return None;
            }
        }
        let pool = self.one_pool(ips).ok()??;
        if facts.pool.as_ref().is_some_and(|named| *named != pool) {
            return None;
        }
        ips.iter()
            .all(|ip| self.conflict_at(*ip, &facts.sharing).is_none())
            .then_some(pool)
    }

    /// The pool all of `ips` lie in, each allocatable there; `None` for no address.
    fn one_pool(&self, ips: &[IpAddr]) -> Result<Option<Arc<str>>, Reason> {
        let mut pool: Option<usize> = None;
        for ip in ips {
            let place = self
                .pools
                .locate(*ip)
                .ok_or(Reason::NotInPool { ip: *ip })?;
            let name = self.pool_name(place.pool);
            if !self.pools.allocatable(place, *ip) {
                return Err(Reason::Skipped {
                    ip: *ip,
                    pool: name,
                });
            }
            if pool.is_some_and(|p| p != place.pool) {
                return Err(Reason::SplitPools { ips: ips.to_vec() });
            }
            pool = Some(place.pool);
        }
        Ok(pool.map(|p| self.pool_name(p)))
    }

    fn pool_name(&self, index: usize) -> Arc<str> {
        self.pools
            .pool(index)
            .map(|p| Arc::clone(&p.name))
            .unwrap_or_else(|| Arc::from(""))
    }

    /// New addresses: the requested ones, else from the named pool, else from the first
    /// `auto-assign` pool in config order that has them. No fallback from the first two.
    fn allocate(
        &self,
        facts: &AllocFacts,
        requested: Option<Vec<IpAddr>>,
    ) -> Result<Holding, Reason> {
        if let Some(ips) = requested {
            if !facts.fits(&ips) {
                return Err(Reason::RequestedFamilies {
                    ips,
                    families: facts.families.clone(),
                });
            }
            // `fits` refused an empty list already.
            let pool = self
                .one_pool(&ips)?
                .ok_or_else(|| Reason::RequestedFamilies {
                    ips: ips.clone(),
                    families: facts.families.clone(),
                })?;
            // All of them lie in `pool`: the first one stands for them.
            if let (Some(named), Some(first)) =
                (facts.pool.as_ref().filter(|n| **n != pool), ips.first())
            {
                return Err(Reason::OutsideNamedPool {
                    ip: *first,
                    pool: Arc::clone(named),
                });
            }
            for ip in &ips {
                if let Some((by, conflict)) = self.conflict_at(*ip, &facts.sharing) {
                    return Err(Reason::InUse {
                        ip: *ip,
                        by,
                        conflict,
                    });
                }
            }
            return Ok(Holding { ips, pool });
        }
        if let Some(named) = &facts.pool {
            let index = self
                .pools
                .by_name(named)
                .ok_or_else(|| Reason::UnknownPool {
                    pool: Arc::clone(named),
                })?;
            return self
                .pick_in(index, facts)
                .map_err(|families| Reason::PoolFull {
                    pool: Arc::clone(named),
                    families,
                });
        }
        let mut any = false;
        for (index, pool) in self.pools.iter().filter(|(_, p)| p.auto_assign) {
            if !pool.families().any(|f| facts.families.contains(&f)) {
                continue;
            }
            any = true;
            if let Ok(h) = self.pick_in(index, facts) {
                return Ok(h);
            }
        }
        let families = facts.families.clone();
        Err(if any {
            Reason::AutoPoolsFull { families }
        } else {
            Reason::NoAutoPool { families }
        })
    }

    /// One address per family of the Service from this pool (under `PreferDualStack`,
    /// at least one), or the families it has none of.
    fn pick_in(&self, index: usize, facts: &AllocFacts) -> Result<Holding, Vec<Family>> {
        let mut ips = Vec::new();
        let mut missing = Vec::new();
        for family in facts.wanted() {
            match self.candidate(index, family, &facts.sharing) {
                Some(ip) => ips.push(ip),
                None => missing.push(family),
            }
        }
        let enough = missing.is_empty()
            || (facts.family_policy == FamilyPolicy::PreferDualStack && !ips.is_empty());
        if !enough {
            return Err(missing);
        }
        Ok(Holding {
            ips,
            pool: self.pool_name(index),
        })
    }

    /// A `PreferDualStack` Service's missing families, from the pool it holds from.
    fn extend(&self, facts: &AllocFacts, holding: &mut Holding) {
        let Some(index) = self.pools.by_name(&holding.pool) else {
            return;
        };
        for family in facts.wanted() {
            if holding.ips.iter().any(|ip| service::family(*ip) == family) {
                continue;
            }
            if let Some(ip) = self.candidate(index, family, &facts.sharing) {
                holding.ips.push(ip);
            }
        }
    }

    /// The first address of `family` in the pool, CIDR by CIDR in config order, that is
    /// free or that this Service may share (MetalLB packs sharers onto the first
    /// compatible address).
    fn candidate(&self, index: usize, family: Family, sharing: &Sharing) -> Option<IpAddr> {
        let pool = self.pools.pool(index)?;
        let shared = sharing.shared_key().and_then(|k| self.shared.get(k));
        pool.ranges_of(family).find_map(|(_, range)| {
            let free = range.first_free();
            let share = shared.and_then(|set| {
                set.iter()
                    .copied()
                    .filter(|ip| range.contains(*ip))
                    .find(|ip| self.conflict_at(*ip, sharing).is_none())
            });
            match (free, share) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        })
    }

    /// Why a Service with `sharing` may not hold `ip` beside its holders, and with whom.
    fn conflict_at(&self, ip: IpAddr, sharing: &Sharing) -> Option<(ObjectKey, Conflict)> {
        let a = self.addresses.get(&ip)?;
        let (first, _) = a.holders.first()?;
        let theirs = Sharing {
            key: a.key.clone(),
            backend: a.backend.clone(),
            ports: BTreeSet::new(),
        };
        let mine = Sharing {
            ports: BTreeSet::new(),
            ..sharing.clone()
        };
        if let Some(c) = mine.conflict(&theirs) {
            return Some((first.clone(), c));
        }
        sharing.ports.iter().find_map(|p| {
            a.holders
                .iter()
                .find(|(_, ports)| ports.contains(p))
                .map(|(by, _)| (by.clone(), Conflict::Port(*p)))
        })
    }

    fn hold(&mut self, key: &ObjectKey, sharing: &Sharing, holding: &Holding) {
        for ip in &holding.ips {
            let Some(place) = self.pools.locate(*ip) else {
                continue;
            };
            let a = self.addresses.entry(*ip).or_insert_with(|| Address {
                place,
                key: sharing.shared_key().cloned(),
                backend: sharing.backend.clone(),
                holders: Vec::new(),
            });
            if a.holders.is_empty() {
                if let Some(r) = self.pools.range_mut(place) {
                    r.take(*ip);
                }
                if let Some(k) = sharing.shared_key() {
                    self.shared.entry(Arc::clone(k)).or_default().insert(*ip);
                }
            }
            let ports: Vec<Port> = sharing.ports.iter().copied().collect();
            match a.holders.binary_search_by(|(k, _)| k.cmp(key)) {
                Ok(i) => a.holders[i].1 = ports,
                Err(i) => a.holders.insert(i, (key.clone(), ports)),
            }
        }
    }

    fn unhold(&mut self, key: &ObjectKey, ips: &[IpAddr]) {
        for ip in ips {
            let Some(a) = self.addresses.get_mut(ip) else {
                continue;
            };
            a.holders.retain(|(k, _)| k != key);
            if !a.holders.is_empty() {
                continue;
            }
            let place = a.place;
            let shared_key = a.key.clone();
            self.addresses.remove(ip);
            if let Some(r) = self.pools.range_mut(place) {
                r.free(*ip);
            }
            if let Some(k) = shared_key {
                if let Some(set) = self.shared.get_mut(&k) {
                    set.remove(ip);
                    if set.is_empty() {
                        self.shared.remove(&k);
                    }
                }
            }
        }
    }

    /// Retries the pending Services until nothing changes (each pass only hands out, so
    /// it ends).
    fn retry_all(&mut self, out: &mut Vec<Decision>) {
        loop {
            let keys: Vec<ObjectKey> = self.retry.iter().cloned().collect();
            let mut any = false;
            for key in keys {
                if let Some(d) = self.decide(&key) {
                    if d.changed() || d.write.is_some() {
                        any |= d.changed();
                        out.push(d);
                    }
                }
            }
            if !any {
                return;
            }
        }
    }
}

/// Whether `pools` may hold `ip`: inside a pool and not skipped there. The one rule of
/// a reload's refusal and of [`Allocator::status_outside`].
fn keeps_address(pools: &Pools, ip: IpAddr) -> bool {
    pools
        .locate(ip)
        .is_some_and(|place| pools.allocatable(place, ip))
}

#[cfg(test)]
mod tests;
