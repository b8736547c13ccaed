//! The Adj-RIB-Out of one peer (RFC 4271 section 3.2), sans-IO: what the peer has been
//! sent (`held`), the routes it must hold (the planner's [`DesiredRoutes`]), and the
//! UPDATEs that move it from one to the other, produced a bounded batch at a time.
//!
//! The diff is computed once per desired version ([`layers::diff`]) and then drained
//! incrementally: [`AdjRibOut::next_batch`] packs the next few messages (withdrawals
//! first, then announcements grouped by attribute set, IPv4 in the NLRI field and IPv6
//! in MP_REACH_NLRI) and moves `held` forward by exactly what they carry. The driver
//! asks for a batch only while its write buffer has room, so a peer that stops reading
//! stops the encoding: memory stays bounded by the driver's threshold, never by the
//! table size.
//!
//! Two layers make up what the peer must hold: the pod CIDR routes, a whole
//! [`DesiredRoutes`] set replaced on each plan ([`AdjRibOut::set_desired`], a full diff
//! as before), and the LoadBalancer routes ([`AdjRibOut::apply_lb`]), changed by
//! per-prefix deltas: each one marks only the prefixes it touches pending, so its cost
//! does not grow with the number of routes held. Which layer a prefix goes out from is
//! `routes::layers`' rule (a pod CIDR wins over an equal LoadBalancer prefix), called
//! here per prefix ([`layers::lb_sent`]) or as one walk ([`layers::diff`]), so no
//! LoadBalancer event ever re-announces or withdraws a pod CIDR, and no pod CIDR change
//! touches a LoadBalancer route of another prefix.
//!
//! Pending work is kept as `queued` (prefix -> what it must become), the one truth; the
//! withdrawal queues and the announcement groups only order the sending. An entry there
//! that disagrees with `queued` (a later delta changed the prefix again) is stale and
//! skipped when its turn comes; the queues are compacted when stale entries pile up.
//!
//! Owns no socket, no clock and no task; it does not decide which routes a peer gets
//! (the planner does) nor when messages leave (the session does: batches go through
//! `Input::Updates`). A route this session cannot carry (its family is not negotiated,
//! or its next hop cannot be resolved for the family) is not sent, and is withdrawn if
//! the peer held an earlier version of it; [`AdjRibOut::take_refusals`] reports it.

use crate::bgp::wire::{
    AfiSafi, AsPath, AsSegment, Context, EncodeError, MpNextHop, PathAttribute, SegmentType,
    Update, UpdateBuilder,
};
use crate::routes::lb::LbRoutes;
use crate::routes::next_hop::{self, SessionNextHops, Unsendable, WireNextHop};
use crate::routes::{attrs, layers};
use crate::routes::{DesiredRoutes, RouteAttrs};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

/// What the session negotiated that shapes the UPDATEs, and what resolves the routes'
/// next hops ([`next_hop::resolve`]: the planner wrote them with the same rule).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RibSession {
    /// The negotiated codec context (4-octet AS, extended messages).
    pub ctx: Context,
    /// The negotiated families; routes of any other family are refused.
    pub families: Vec<AfiSafi>,
    /// LOCAL_PREF is sent on iBGP sessions only (RFC 4271 section 5.1.5).
    pub ibgp: bool,
    /// The connection's local address and whether RFC 8950 is in force.
    pub next_hops: SessionNextHops,
}

/// Why a desired route was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteRefusal {
    /// The peer did not negotiate the route's family (RFC 4760).
    FamilyNotNegotiated,
    /// `NextHop::SessionLocal` for an IPv6 prefix on an IPv4 session (the planner never
    /// plans one; kept for a hand-built route set).
    NoNextHop,
    /// An explicit IPv4 next hop for an IPv6 prefix.
    NextHopFamily,
    /// An IPv4 prefix with an IPv6 next hop, and the peer did not offer RFC 8950
    /// extended next hop for IPv4 unicast.
    ExtendedNextHopNotNegotiated,
    /// The attribute set cannot be encoded for this session.
    Unencodable,
}

impl RouteRefusal {
    /// A bounded name, fit for a log field or a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteRefusal::FamilyNotNegotiated => "family_not_negotiated",
            RouteRefusal::NoNextHop => "no_next_hop",
            RouteRefusal::NextHopFamily => "next_hop_family",
            RouteRefusal::ExtendedNextHopNotNegotiated => "extended_next_hop_not_negotiated",
            RouteRefusal::Unencodable => "unencodable",
        }
    }
}

impl RouteRefusal {
    /// What it means, for people (`status`, logs).
    pub fn describe(self) -> &'static str {
        match self {
            RouteRefusal::FamilyNotNegotiated => "the peer did not negotiate the address family",
            RouteRefusal::NoNextHop => "the session has no address of the route's family",
            RouteRefusal::NextHopFamily => "the next hop is not of the route's family",
            RouteRefusal::ExtendedNextHopNotNegotiated => {
                "ipv4 routes need an ipv6 next hop here and the peer did not offer extended \
                 next hop (RFC 8950)"
            }
            RouteRefusal::Unencodable => "the attributes cannot be encoded for this session",
        }
    }
}

impl fmt::Display for RouteRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Routes not sent, per family and reason, since the last [`AdjRibOut::take_refusals`].
pub type RouteRefusals = BTreeMap<(AfiSafi, RouteRefusal), u64>;

/// Fewer inserts than this never rebuild `held` ([`AdjRibOut::compact_held`]): a few
/// half-empty leaves are not worth a pass over the map.
const COMPACT_HELD_MIN: usize = 1024;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct AdjRibOut {
    /// What the peer has been sent in this session (RFC 4271 section 3.2: the
    /// Adj-RIB-Out as advertised).
    held: BTreeMap<IpNet, Held>,
    held_count: [u64; 2],
    /// Inserts into `held` since it was last built from its sorted entries
    /// ([`AdjRibOut::compact_held`]).
    held_inserted: usize,
    desired: Arc<DesiredRoutes>,
    /// The LoadBalancer layer (`routes::layers` says which of its prefixes go out).
    lb: LbRoutes,
    session: Option<RibSession>,
    work: Work,
    /// Families whose table the session asked for (`Action::SendTable`) and that are not
    /// yet fully given.
    tables: BTreeSet<AfiSafi>,
    /// Families being re-advertised after a ROUTE-REFRESH: every desired route is sent,
    /// held or not.
    resend: BTreeSet<AfiSafi>,
    tables_done: VecDeque<AfiSafi>,
    refusals: RouteRefusals,
}

/// One route the peer holds from us: its attributes and when the UPDATE that carried
/// them was handed to the session (for `status --routes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub attrs: Arc<RouteAttrs>,
    pub since: Instant,
}

impl AsRef<RouteAttrs> for Held {
    fn as_ref(&self) -> &RouteAttrs {
        &self.attrs
    }
}

/// The pending part of the current diff.
#[derive(Debug, Default)]
struct Work {
    withdraw: [VecDeque<IpNet>; 2],
    groups: VecDeque<Group>,
    /// What each pending prefix must become (`None`: withdrawn); entries of the queues
    /// above that disagree are stale.
    queued: HashMap<IpNet, Option<Arc<RouteAttrs>>>,
    /// Prefixes still to send, per family (`queued` counted per family).
    pending: [usize; 2],
    /// Entries in the queues, stale ones included (for the compaction).
    entries: usize,
}

/// Announcements that share one attribute set and family: packed into the same UPDATEs.
#[derive(Debug)]
struct Group {
    family: Unicast,
    attrs: Arc<RouteAttrs>,
    prefixes: VecDeque<IpNet>,
    /// Built when the group reaches the front: encodes the attributes once. Boxed:
    /// only the front group has one, and in cluster mode every node's routes are a
    /// group of their own (their next hop), so an inline builder made each of the
    /// 50,000 queued groups four times larger.
    builder: Option<Box<UpdateBuilder>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Unicast {
    V4 = 0,
    V6 = 1,
}

impl Unicast {
    fn of(p: &IpNet) -> Unicast {
        match p {
            IpNet::V4(_) => Unicast::V4,
            IpNet::V6(_) => Unicast::V6,
        }
    }

    fn afi_safi(self) -> AfiSafi {
        match self {
            Unicast::V4 => AfiSafi::IPV4_UNICAST,
            Unicast::V6 => AfiSafi::IPV6_UNICAST,
        }
    }

    fn from_afi_safi(f: AfiSafi) -> Option<Unicast> {
        match f {
            AfiSafi::IPV4_UNICAST => Some(Unicast::V4),
            AfiSafi::IPV6_UNICAST => Some(Unicast::V6),
            _ => None,
        }
    }
}

impl Work {
    fn is_empty(&self) -> bool {
        self.pending == [0, 0]
    }

    fn clear(&mut self) {
        *self = Work::default();
    }

    fn set(&mut self, p: IpNet, to: Option<Arc<RouteAttrs>>) {
        if self.queued.insert(p, to).is_none() {
            self.pending[Unicast::of(&p) as usize] += 1;
        }
    }

    /// Nothing is to be sent for `p` any more.
    fn cancel(&mut self, p: &IpNet) {
        if self.queued.remove(p).is_some() {
            self.pending[Unicast::of(p) as usize] -= 1;
        }
    }

    fn withdraw(&mut self, p: IpNet) {
        self.set(p, None);
        self.withdraw[Unicast::of(&p) as usize].push_back(p);
        self.entries += 1;
    }

    /// Queues an announcement, in the last group when it has the same attributes.
    fn announce(&mut self, p: IpNet, attrs: Arc<RouteAttrs>) {
        let fam = Unicast::of(&p);
        self.set(p, Some(Arc::clone(&attrs)));
        self.entries += 1;
        match self.groups.back_mut() {
            Some(g) if g.family == fam && Arc::ptr_eq(&g.attrs, &attrs) => g.prefixes.push_back(p),
            _ => self.groups.push_back(Group {
                family: fam,
                attrs,
                prefixes: VecDeque::from([p]),
                builder: None,
            }),
        }
    }

    /// Whether a queued withdrawal of `p` is current.
    fn withdraw_current(&self, p: &IpNet) -> bool {
        matches!(self.queued.get(p), Some(None))
    }

    /// Whether a queued announcement of `p` with `attrs` is current.
    fn announce_current(&self, p: &IpNet, attrs: &Arc<RouteAttrs>) -> bool {
        matches!(self.queued.get(p), Some(Some(a)) if Arc::ptr_eq(a, attrs))
    }

    /// `p` left in a batch: no longer pending.
    fn sent(&mut self, p: &IpNet) {
        self.cancel(p);
        self.entries = self.entries.saturating_sub(1);
    }

    /// Rebuilds the queues from `queued` when stale entries outnumber the live ones
    /// (deltas that keep changing prefixes while the peer does not read): memory stays
    /// bounded by the prefixes pending, not by the events seen.
    fn compact(&mut self) {
        let live = self.queued.len();
        if self.entries <= 2 * live + 1024 {
            return;
        }
        for q in &mut self.withdraw {
            q.clear();
        }
        self.groups.clear();
        self.entries = 0;
        let mut queued: Vec<(IpNet, Option<Arc<RouteAttrs>>)> = self.queued.drain().collect();
        queued.sort_by_key(|q| q.0);
        self.pending = [0, 0];
        let mut index: HashMap<(Unicast, *const RouteAttrs), usize> = HashMap::new();
        for (p, to) in queued {
            match to {
                None => self.withdraw(p),
                Some(attrs) => {
                    let fam = Unicast::of(&p);
                    self.set(p, Some(Arc::clone(&attrs)));
                    self.entries += 1;
                    let i = *index.entry((fam, Arc::as_ptr(&attrs))).or_insert_with(|| {
                        self.groups.push_back(Group {
                            family: fam,
                            attrs,
                            prefixes: VecDeque::with_capacity(1),
                            builder: None,
                        });
                        self.groups.len() - 1
                    });
                    self.groups[i].prefixes.push_back(p);
                }
            }
        }
    }
}

impl AdjRibOut {
    pub fn new() -> AdjRibOut {
        AdjRibOut::default()
    }

    /// What the peer has been sent.
    pub fn held(&self) -> &BTreeMap<IpNet, Held> {
        &self.held
    }

    /// How many prefixes of `afi_safi` the peer has been sent.
    pub fn held_count(&self, afi_safi: AfiSafi) -> u64 {
        Unicast::from_afi_safi(afi_safi).map_or(0, |f| self.held_count[f as usize])
    }

    /// Prefixes still to announce or withdraw.
    pub fn pending(&self) -> usize {
        self.work.pending[0] + self.work.pending[1]
    }

    /// Whether a batch is waiting.
    pub fn has_work(&self) -> bool {
        !self.work.is_empty()
    }

    /// The pod CIDR layer of what the peer must hold.
    pub fn desired(&self) -> &Arc<DesiredRoutes> {
        &self.desired
    }

    /// The LoadBalancer layer of what the peer must hold.
    pub fn lb(&self) -> &LbRoutes {
        &self.lb
    }

    /// A new pod CIDR set. While a session is up the diff against `held` replaces the
    /// work still pending (it already accounts for what was sent of the old one).
    pub fn set_desired(&mut self, desired: Arc<DesiredRoutes>) {
        self.desired = desired;
        self.replan();
    }

    /// Both layers at once (a graceful shutdown marks or withdraws both), one diff.
    pub fn set_layers(&mut self, desired: Arc<DesiredRoutes>, lb: LbRoutes) {
        self.desired = desired;
        self.lb = lb;
        self.replan();
    }

    /// A LoadBalancer delta: each prefix's new attributes (`None`: no longer desired).
    /// Only these prefixes are looked at: O(changes x log held), whatever the table size.
    /// A prefix whose LoadBalancer route does not go out ([`layers::lb_sent`]) is only
    /// recorded.
    pub fn apply_lb(
        &mut self,
        changes: impl IntoIterator<Item = (IpNet, Option<Arc<RouteAttrs>>)>,
    ) {
        for (p, to) in changes {
            match &to {
                Some(a) => self.lb.insert(p, Arc::clone(a)),
                None => self.lb.remove(&p),
            };
            if layers::lb_sent(&self.desired, &p) {
                self.target_changed(p, to);
            }
        }
        self.work.compact();
        self.check_tables();
    }

    /// Marks `p` pending (or not) for its new target.
    fn target_changed(&mut self, p: IpNet, to: Option<Arc<RouteAttrs>>) {
        let Some(session) = &self.session else {
            return;
        };
        let fam = Unicast::of(&p);
        let held = self.held.get(&p).map(|h| &h.attrs);
        match to {
            Some(attrs) => {
                if let Err(why) = carriable(session, fam, &attrs) {
                    *self.refusals.entry((fam.afi_safi(), why)).or_default() += 1;
                    if held.is_some() {
                        self.work.withdraw(p);
                    } else {
                        self.work.cancel(&p);
                    }
                } else if held.is_some_and(|h| **h == *attrs)
                    && !self.resend.contains(&fam.afi_safi())
                {
                    self.work.cancel(&p);
                } else {
                    self.work.announce(p, attrs);
                }
            }
            None if held.is_some() => self.work.withdraw(p),
            None => self.work.cancel(&p),
        }
    }

    /// The session reached Established: the peer holds nothing from us yet.
    pub fn established(&mut self, session: RibSession) {
        self.reset();
        self.session = Some(session);
        self.replan();
    }

    /// The session left Established: the peer dropped our routes (or keeps them as stale
    /// until the next session, which sends everything again).
    pub fn down(&mut self) {
        self.reset();
    }

    /// The session asks for the table of `afi_safi` (`Action::SendTable`): once every
    /// pending change of that family has gone out in batches, [`AdjRibOut::poll_table_sent`]
    /// returns it. With `refresh` (a ROUTE-REFRESH from the peer, RFC 2918) every desired
    /// route of the family is sent again, not only the changes.
    pub fn send_table(&mut self, afi_safi: AfiSafi, refresh: bool) {
        if self.session.is_none() {
            return;
        }
        self.tables.insert(afi_safi);
        if refresh {
            self.resend.insert(afi_safi);
            self.replan();
        }
        self.check_tables();
    }

    /// A family whose table has been given completely: the driver answers
    /// `Input::TableSent`. Only ever returned after the batches that carried it.
    pub fn poll_table_sent(&mut self) -> Option<AfiSafi> {
        self.tables_done.pop_front()
    }

    /// What the peer holds and what is still to send, the first `limit` of each (by
    /// prefix; the pending ones in the order they will leave, withdrawals first) and
    /// the count of all: `show bgp neighbor X advertised-routes`. Attributes are as
    /// sent: the next hop resolved for this session, LOCAL_PREF on iBGP only. O(limit)
    /// plus the withdrawal queues it skips: nothing is copied beyond what is shown.
    pub fn snapshot(&self, limit: usize, now: Instant) -> RibSnapshot {
        let Some(session) = &self.session else {
            return RibSnapshot {
                taken: Some(now),
                ..RibSnapshot::default()
            };
        };
        let routes = self
            .held
            .iter()
            .take(limit)
            .map(|(p, h)| SentRoute {
                prefix: *p,
                attrs: as_sent(session, Unicast::of(p), &h.attrs),
                since: Some(h.since),
                pending: None,
            })
            .collect();
        let withdrawals = self
            .work
            .withdraw
            .iter()
            .flatten()
            .filter(|p| self.work.withdraw_current(p))
            .map(|p| SentRoute {
                prefix: *p,
                attrs: None,
                since: None,
                pending: Some(PendingChange::Withdraw),
            });
        let announcements = self.work.groups.iter().flat_map(|g| {
            g.prefixes
                .iter()
                .filter(|p| self.work.announce_current(p, &g.attrs))
                .map(|p| SentRoute {
                    prefix: *p,
                    attrs: as_sent(session, g.family, &g.attrs),
                    since: None,
                    pending: Some(PendingChange::Announce),
                })
        });
        RibSnapshot {
            established: true,
            taken: Some(now),
            held: self.held.len() as u64,
            routes,
            pending: self.pending() as u64,
            pending_routes: withdrawals.chain(announcements).take(limit).collect(),
        }
    }

    /// Routes not sent since the last call, per family and reason.
    pub fn take_refusals(&mut self) -> RouteRefusals {
        std::mem::take(&mut self.refusals)
    }

    /// The next UPDATEs, at most `max_bytes` once encoded (and at least one message when
    /// there is work, whatever `max_bytes`): whole messages of at most the negotiated
    /// maximum size each. `held` already includes what they carry. `None` when nothing is
    /// pending.
    /// `now` stamps the routes they carry (what [`AdjRibOut::snapshot`] reports as
    /// `since`).
    pub fn next_batch(&mut self, max_bytes: usize, now: Instant) -> Option<Vec<Update>> {
        let session = self.session.as_ref()?;
        if self.work.is_empty() {
            return None;
        }
        let ctx = session.ctx;
        let max_len = ctx.max_message_len();
        let max_messages = (max_bytes / max_len).max(1);
        let mut updates = Vec::new();
        while updates.len() < max_messages {
            let room = max_messages - updates.len();
            if let Some(fam) = [Unicast::V4, Unicast::V6]
                .into_iter()
                .find(|f| !self.work.withdraw[*f as usize].is_empty())
            {
                self.withdraw_batch(fam, &ctx, room, &mut updates);
                continue;
            }
            if self.work.groups.is_empty() {
                break;
            }
            self.announce_batch(room, now, &mut updates);
        }
        if self.work.is_empty() {
            // Only stale entries can be left.
            self.work.clear();
            self.compact_held();
        }
        self.check_tables();
        if updates.is_empty() {
            // Everything left was refused while building (see announce_batch).
            return None;
        }
        Some(updates)
    }

    /// Rebuilds `held` from its sorted entries once the inserts since the last rebuild
    /// reach half its size (a table, a large change). Routes go out in prefix order, and
    /// a B-tree filled at its right end keeps its leaves about half empty: at 50,000
    /// routes about 2 MB per peer, for as long as the session lasts. Taken once the
    /// work is done, when the queues' memory has been freed; small changes (an event)
    /// never pay for it.
    fn compact_held(&mut self) {
        if self.held_inserted < COMPACT_HELD_MIN || self.held_inserted * 2 < self.held.len() {
            return;
        }
        self.held = std::mem::take(&mut self.held).into_iter().collect();
        self.held_inserted = 0;
    }

    fn reset(&mut self) {
        self.held.clear();
        self.held_count = [0, 0];
        self.held_inserted = 0;
        self.session = None;
        self.work.clear();
        self.tables.clear();
        self.resend.clear();
        self.tables_done.clear();
    }

    /// Recomputes the pending work from `held` and `desired`.
    fn replan(&mut self) {
        self.work.clear();
        let Some(session) = &self.session else {
            return;
        };
        let diff = layers::diff(&self.held, &self.desired, &self.lb);
        let mut announce = diff.announce;
        if !self.resend.is_empty() {
            // The diff skips routes the peer already holds unchanged; a refresh sends them
            // too.
            for (p, attrs) in layers::walk(&self.desired, &self.lb) {
                let fam = Unicast::of(p).afi_safi();
                if self.resend.contains(&fam)
                    && self.held.get(p).is_some_and(|h| *h.attrs == **attrs)
                {
                    announce.push((*p, attrs.clone()));
                }
            }
        }
        let mut withdraw = diff.withdraw;
        let mut index: HashMap<(Unicast, Arc<RouteAttrs>), usize> = HashMap::new();
        for (p, attrs) in announce {
            let fam = Unicast::of(&p);
            if let Err(why) = carriable(session, fam, &attrs) {
                *self.refusals.entry((fam.afi_safi(), why)).or_default() += 1;
                if self.held.contains_key(&p) {
                    // The peer must not keep an earlier version of a route we cannot
                    // send any more.
                    withdraw.push(p);
                }
                continue;
            }
            let i = *index.entry((fam, attrs.clone())).or_insert_with(|| {
                self.work.groups.push_back(Group {
                    family: fam,
                    attrs,
                    // Room for one: in cluster mode most groups are one node's one
                    // prefix (an empty VecDeque's first push takes room for four).
                    prefixes: VecDeque::with_capacity(1),
                    builder: None,
                });
                self.work.groups.len() - 1
            });
            // The group's own `Arc` (equal attributes may come in several): a queued
            // announcement is current only with the very `Arc` of its group.
            let group_attrs = Arc::clone(&self.work.groups[i].attrs);
            self.work.set(p, Some(group_attrs));
            self.work.entries += 1;
            self.work.groups[i].prefixes.push_back(p);
        }
        for p in withdraw {
            self.work.withdraw(p);
        }
    }

    fn withdraw_batch(
        &mut self,
        fam: Unicast,
        ctx: &Context,
        room: usize,
        updates: &mut Vec<Update>,
    ) {
        let work = &mut self.work;
        let mut chunk = take_chunk(
            &mut work.withdraw[fam as usize],
            room * ctx.max_message_len(),
        );
        let before = chunk.len();
        chunk.retain(|p| work.withdraw_current(p));
        work.entries = work.entries.saturating_sub(before - chunk.len());
        if chunk.is_empty() {
            return;
        }
        let built = UpdateBuilder::new(ctx, &[], None).and_then(|b| b.withdraw_updates(&chunk));
        let msgs = match built {
            Ok(m) => m,
            Err(_) => {
                // Withdrawals without ADD-PATH of one family always encode; should that
                // change, drop them rather than loop (the peer keeps them until the next
                // session).
                for p in &chunk {
                    self.work.sent(p);
                }
                return;
            }
        };
        let (kept, used) = keep_messages(msgs, room, |u| {
            u.withdrawn.len() + u.mp_unreach().map_or(0, |m| m.withdrawn.len())
        });
        put_back(&mut self.work.withdraw[fam as usize], &chunk[used..]);
        for p in &chunk[..used] {
            self.work.sent(p);
            if self.held.remove(p).is_some() {
                self.held_count[fam as usize] -= 1;
            }
        }
        updates.extend(kept);
    }

    fn announce_batch(&mut self, room: usize, now: Instant, updates: &mut Vec<Update>) {
        let Some(session) = &self.session else {
            return;
        };
        let ctx = session.ctx;
        let work = &mut self.work;
        let Some(group) = work.groups.front_mut() else {
            return;
        };
        let fam = group.family;
        // Stale entries at the front are dropped first, so the group's builder is only
        // made for a group that still has something to send.
        while let Some(p) = group.prefixes.front() {
            if matches!(work.queued.get(p), Some(Some(a)) if Arc::ptr_eq(a, &group.attrs)) {
                break;
            }
            group.prefixes.pop_front();
            work.entries = work.entries.saturating_sub(1);
        }
        if group.prefixes.is_empty() {
            work.groups.pop_front();
            return;
        }
        if group.builder.is_none() {
            match builder_for(session, fam, &group.attrs) {
                Ok(b) => group.builder = Some(Box::new(b)),
                Err(_) => return self.refuse_front_group(RouteRefusal::Unencodable),
            }
        }
        let Some(builder) = &group.builder else {
            return;
        };
        let mut chunk = take_chunk(&mut group.prefixes, room * ctx.max_message_len());
        let before = chunk.len();
        chunk.retain(
            |p| matches!(work.queued.get(p), Some(Some(a)) if Arc::ptr_eq(a, &group.attrs)),
        );
        work.entries = work.entries.saturating_sub(before - chunk.len());
        let msgs = match builder.announce_updates(&chunk) {
            Ok(m) => m,
            Err(_) => {
                put_back(&mut group.prefixes, &chunk);
                return self.refuse_front_group(RouteRefusal::Unencodable);
            }
        };
        let (kept, used) = keep_messages(msgs, room, |u| {
            u.nlri.len() + u.mp_reach().map_or(0, |m| m.nlri.len())
        });
        put_back(&mut group.prefixes, &chunk[used..]);
        let attrs = group.attrs.clone();
        if group.prefixes.is_empty() {
            work.groups.pop_front();
        }
        for p in &chunk[..used] {
            work.sent(p);
            let held = Held {
                attrs: attrs.clone(),
                since: now,
            };
            if self.held.insert(*p, held).is_none() {
                self.held_count[fam as usize] += 1;
            }
            self.held_inserted += 1;
        }
        updates.extend(kept);
    }

    /// Drops the front group as refused, withdrawing what the peer held of it.
    fn refuse_front_group(&mut self, why: RouteRefusal) {
        let Some(group) = self.work.groups.pop_front() else {
            return;
        };
        let fam = group.family;
        for p in group.prefixes {
            self.work.entries = self.work.entries.saturating_sub(1);
            if !self.work.announce_current(&p, &group.attrs) {
                continue;
            }
            self.work.cancel(&p);
            *self.refusals.entry((fam.afi_safi(), why)).or_default() += 1;
            if self.held.contains_key(&p) {
                self.work.withdraw(p);
            }
        }
    }

    fn check_tables(&mut self) {
        let pending = self.work.pending;
        let done: Vec<AfiSafi> = self
            .tables
            .iter()
            .copied()
            .filter(|f| Unicast::from_afi_safi(*f).is_none_or(|fam| pending[fam as usize] == 0))
            .collect();
        for f in done {
            self.tables.remove(&f);
            self.resend.remove(&f);
            self.tables_done.push_back(f);
        }
    }
}

/// A bounded view of an Adj-RIB-Out ([`AdjRibOut::snapshot`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RibSnapshot {
    /// A session is up; without one the peer holds nothing from us.
    pub established: bool,
    /// When the snapshot was taken (the `since` of each route is before it).
    pub taken: Option<Instant>,
    /// Routes the peer holds, all counted.
    pub held: u64,
    /// The first held routes, by prefix.
    pub routes: Vec<SentRoute>,
    /// Prefixes still to announce or withdraw, all counted.
    pub pending: u64,
    /// The first pending ones, in the order they will leave.
    pub pending_routes: Vec<SentRoute>,
}

/// One route of a [`RibSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRoute {
    pub prefix: IpNet,
    /// The attributes as sent (or to be sent); `None` for a withdrawal, or for a route
    /// this session cannot carry (it is refused when its turn comes).
    pub attrs: Option<AttrsAsSent>,
    /// When the UPDATE that carried it was handed to the session (held routes only).
    pub since: Option<Instant>,
    /// Not yet sent: what will be.
    pub pending: Option<PendingChange>,
}

/// A route's attributes as they go on the wire for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrsAsSent {
    pub next_hop: IpAddr,
    pub origin: crate::bgp::wire::Origin,
    pub as_path: Vec<u32>,
    pub med: Option<u32>,
    /// Only on iBGP (RFC 4271 section 5.1.5).
    pub local_pref: Option<u32>,
    pub communities: Vec<u32>,
    pub large_communities: Vec<crate::bgp::wire::LargeCommunity>,
}

/// A change of the Adj-RIB-Out not yet sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingChange {
    Announce,
    Withdraw,
}

impl PendingChange {
    pub fn as_str(self) -> &'static str {
        match self {
            PendingChange::Announce => "announce",
            PendingChange::Withdraw => "withdraw",
        }
    }
}

fn as_sent(session: &RibSession, fam: Unicast, attrs: &RouteAttrs) -> Option<AttrsAsSent> {
    let next_hop = match next_hop(session, fam, attrs).ok()? {
        WireNextHop::V4(a) => IpAddr::V4(a),
        WireNextHop::V6(a) | WireNextHop::ExtendedV6(a) => IpAddr::V6(a),
    };
    Some(AttrsAsSent {
        next_hop,
        origin: attrs.origin,
        as_path: attrs.as_path.clone(),
        med: attrs.med,
        local_pref: attrs::local_pref_sent(session.ibgp, attrs),
        communities: attrs.communities.clone(),
        large_communities: attrs.large_communities.clone(),
    })
}

/// Whether the session can carry a route of this family and attribute set.
fn carriable(session: &RibSession, fam: Unicast, attrs: &RouteAttrs) -> Result<(), RouteRefusal> {
    if !session.families.contains(&fam.afi_safi()) {
        return Err(RouteRefusal::FamilyNotNegotiated);
    }
    next_hop(session, fam, attrs).map(|_| ())
}

/// The route's next hop on this session: [`next_hop::resolve`], the rule's other half.
fn next_hop(
    session: &RibSession,
    fam: Unicast,
    attrs: &RouteAttrs,
) -> Result<WireNextHop, RouteRefusal> {
    let family = match fam {
        Unicast::V4 => crate::routes::Family::Ipv4,
        Unicast::V6 => crate::routes::Family::Ipv6,
    };
    next_hop::resolve(family, &attrs.next_hop, &session.next_hops).map_err(|e| match e {
        Unsendable::NoNextHop => RouteRefusal::NoNextHop,
        Unsendable::NextHopFamily => RouteRefusal::NextHopFamily,
        Unsendable::ExtendedNextHopNotNegotiated => RouteRefusal::ExtendedNextHopNotNegotiated,
    })
}

/// The UPDATE builder for one group: its attributes in type-code order (RFC 4271
/// section 5 leaves the order free; ascending is what every implementation sends).
fn builder_for(
    session: &RibSession,
    fam: Unicast,
    attrs: &RouteAttrs,
) -> Result<UpdateBuilder, EncodeError> {
    let nh = next_hop(session, fam, attrs)
        .map_err(|_| EncodeError::Builder("the next hop cannot be resolved"))?;
    let mut list = vec![
        PathAttribute::Origin(attrs.origin),
        PathAttribute::AsPath(as_path(&attrs.as_path)),
    ];
    let mut v6_next_hop = None;
    let mut extended = None;
    match nh {
        WireNextHop::V4(a) => list.push(PathAttribute::NextHop(a)),
        WireNextHop::V6(a) => {
            v6_next_hop = Some(MpNextHop::V6 {
                global: a,
                link_local: None,
            })
        }
        WireNextHop::ExtendedV6(a) => {
            extended = Some(MpNextHop::V6 {
                global: a,
                link_local: None,
            })
        }
    }
    if let Some(med) = attrs.med {
        list.push(PathAttribute::MultiExitDisc(med));
    }
    if let Some(lp) = attrs::local_pref_sent(session.ibgp, attrs) {
        list.push(PathAttribute::LocalPref(lp));
    }
    if !attrs.communities.is_empty() {
        list.push(PathAttribute::Communities(attrs.communities.clone()));
    }
    if !attrs.large_communities.is_empty() {
        list.push(PathAttribute::LargeCommunities(
            attrs.large_communities.clone(),
        ));
    }
    let builder = UpdateBuilder::new(&session.ctx, &list, v6_next_hop)?;
    match extended {
        Some(nh) => builder.with_ipv4_extended_next_hop(nh),
        None => Ok(builder),
    }
}

/// One AS_SEQUENCE, split into segments of at most 255 AS numbers (RFC 4271 section
/// 4.3); an empty path (iBGP) has no segment.
fn as_path(asns: &[u32]) -> AsPath {
    AsPath {
        segments: asns
            .chunks(255)
            .map(|c| AsSegment {
                kind: SegmentType::AsSequence,
                asns: c.to_vec(),
            })
            .collect(),
    }
}

/// Octets of one prefix in an NLRI field without ADD-PATH (RFC 4271 section 4.3).
fn nlri_len(p: &IpNet) -> usize {
    1 + usize::from(p.prefix_len()).div_ceil(8)
}

/// Takes prefixes from the front of `queue` whose NLRI add up to at most `octets` (at
/// least one): enough to fill the messages asked for, since every message carries less
/// than its maximum size of NLRI.
fn take_chunk(queue: &mut VecDeque<IpNet>, octets: usize) -> Vec<IpNet> {
    let mut chunk = Vec::new();
    let mut total = 0;
    while let Some(p) = queue.front() {
        let l = nlri_len(p);
        if !chunk.is_empty() && total + l > octets {
            break;
        }
        total += l;
        chunk.push(*p);
        queue.pop_front();
    }
    chunk
}

/// Returns prefixes not used to the front of `queue`, in their order.
fn put_back(queue: &mut VecDeque<IpNet>, rest: &[IpNet]) {
    for p in rest.iter().rev() {
        queue.push_front(*p);
    }
}

/// The first `room` messages and how many prefixes of the chunk they carry (the builder
/// packs a one-family chunk in order, so they are the chunk's first ones).
fn keep_messages(
    mut msgs: Vec<Update>,
    room: usize,
    carried: impl Fn(&Update) -> usize,
) -> (Vec<Update>, usize) {
    msgs.truncate(room);
    let used = msgs.iter().map(carried).sum();
    (msgs, used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::{decode_message, encode_message, Message, Nlri, Origin};
    use crate::routes::{NextHop, PlannedRoute};
    use bytes::BytesMut;
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

    /// Every prefix an UPDATE announces, and every one it withdraws.
    fn update_prefixes(u: &Update) -> (Vec<Nlri>, Vec<Nlri>) {
        let mut announced: Vec<Nlri> = u.nlri.clone();
        let mut withdrawn: Vec<Nlri> = u.withdrawn.clone();
        if let Some(r) = u.mp_reach() {
            announced.extend(r.nlri.iter().copied());
        }
        if let Some(w) = u.mp_unreach() {
            withdrawn.extend(w.withdrawn.iter().copied());
        }
        (announced, withdrawn)
    }

    fn session(ctx: Context) -> RibSession {
        RibSession {
            ctx,
            families: vec![AfiSafi::IPV4_UNICAST, AfiSafi::IPV6_UNICAST],
            ibgp: false,
            next_hops: SessionNextHops {
                local: IpAddr::V4(Ipv4Addr::new(0x64, 0x40, 0x00, 0x01)),
                extended_next_hop_ipv4: false,
            },
        }
    }

    /// When a batch is taken; only [`AdjRibOut::snapshot`] reads it.
    fn t0() -> Instant {
        Instant::now()
    }

    fn four_octet() -> Context {
        Context {
            four_octet_as: true,
            ..Context::default()
        }
    }

    fn attrs(med: u32) -> Arc<RouteAttrs> {
        Arc::new(RouteAttrs {
            origin: Origin::Incomplete,
            as_path: vec![65001],
            next_hop: NextHop::SessionLocal,
            med: Some(med),
            local_pref: Some(200),
            communities: vec![0xfde9_0064],
            large_communities: vec![],
        })
    }

    /// `attrs(med)` for IPv6 routes on the IPv4 session of `session()`: an explicit
    /// IPv6 next hop, as the planner writes it from the node's address.
    fn attrs6(med: u32) -> Arc<RouteAttrs> {
        Arc::new(RouteAttrs {
            next_hop: NextHop::Address("fd00::1".parse().unwrap()),
            ..(*attrs(med)).clone()
        })
    }

    fn v4(i: u32) -> IpNet {
        IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::from(0x0a00_0000 + (i << 8)), 24).unwrap())
    }

    fn v6(i: u32) -> IpNet {
        IpNet::V6(
            ipnet::Ipv6Net::new(
                Ipv6Addr::from((0xfd00_0000u128 << 96) | (u128::from(i) << 64)),
                64,
            )
            .unwrap(),
        )
    }

    fn desired(routes: impl IntoIterator<Item = (IpNet, Arc<RouteAttrs>)>) -> Arc<DesiredRoutes> {
        Arc::new(
            routes
                .into_iter()
                .map(|(p, attrs)| {
                    (
                        p,
                        PlannedRoute {
                            attrs,
                            node: Arc::from("n1"),
                        },
                    )
                })
                .collect(),
        )
    }

    /// What a peer receiving every batch would hold, by replaying the encoded bytes
    /// through the decoder; checks every message's size on the way.
    #[derive(Default)]
    struct Peer {
        rib: BTreeMap<IpNet, Vec<PathAttribute>>,
        messages: usize,
    }

    impl Peer {
        fn apply(&mut self, updates: &[Update], ctx: &Context) -> usize {
            let mut bytes = 0;
            for u in updates {
                let mut out = BytesMut::new();
                encode_message(&Message::Update(u.clone()), ctx, &mut out).unwrap();
                assert!(out.len() <= ctx.max_message_len());
                bytes += out.len();
                let Message::Update(d) = decode_message(&out, ctx).unwrap() else {
                    panic!("not an update")
                };
                assert!(d.errors.is_empty(), "{:?}", d.errors);
                let (ann, wd) = update_prefixes(&d);
                for n in wd {
                    self.rib.remove(&n.prefix);
                }
                let attrs: Vec<PathAttribute> = d
                    .attributes
                    .iter()
                    .filter(|a| !matches!(a, PathAttribute::MpReach(_)))
                    .cloned()
                    .collect();
                for n in ann {
                    self.rib.insert(n.prefix, attrs.clone());
                }
                self.messages += 1;
            }
            bytes
        }
    }

    fn drain(rib: &mut AdjRibOut, peer: &mut Peer, max_bytes: usize, ctx: &Context) -> usize {
        let mut batches = 0;
        while let Some(b) = rib.next_batch(max_bytes, t0()) {
            let bytes = peer.apply(&b, ctx);
            assert!(bytes <= max_bytes.max(ctx.max_message_len()), "{bytes}");
            batches += 1;
        }
        batches
    }

    /// `held` is rebuilt once a table has gone out (the inserts reach half its size),
    /// not after a small change; what it holds is the same either way.
    #[test]
    fn held_is_rebuilt_after_a_table_not_after_a_small_change() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        let routes: Vec<(IpNet, Arc<RouteAttrs>)> =
            (0..5_000).map(|i| (v4(i), attrs(i % 3))).collect();
        rib.set_desired(desired(routes.clone()));
        rib.established(session(ctx));
        let mut peer = Peer::default();
        drain(&mut rib, &mut peer, 64 * 1024, &ctx);
        assert_eq!(rib.held_inserted, 0, "the table's inserts were compacted");
        let held: Vec<(IpNet, Arc<RouteAttrs>)> = rib
            .held()
            .iter()
            .map(|(p, h)| (*p, h.attrs.clone()))
            .collect();
        assert_eq!(held, routes);

        // One route changes: sent, not worth a rebuild.
        let mut changed = routes.clone();
        changed[7].1 = attrs(99);
        rib.set_desired(desired(changed.clone()));
        drain(&mut rib, &mut peer, 64 * 1024, &ctx);
        assert_eq!(rib.held_inserted, 1);
        assert_eq!(rib.held()[&v4(7)].attrs, attrs(99));
        assert_eq!(peer.rib.len(), 5_000);

        // Half the table again: rebuilt.
        for r in changed.iter_mut().take(2_600) {
            r.1 = attrs(100);
        }
        rib.set_desired(desired(changed.clone()));
        drain(&mut rib, &mut peer, 64 * 1024, &ctx);
        assert_eq!(rib.held_inserted, 0);
        assert_eq!(rib.held().len(), 5_000);
        assert!(rib
            .held()
            .values()
            .take(2_600)
            .all(|h| *h.attrs == *attrs(100)));
    }

    #[test]
    fn a_large_table_drains_in_bounded_batches_to_exactly_the_desired_set() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        let a = attrs(1);
        let b = attrs(2);
        let mut routes: Vec<(IpNet, Arc<RouteAttrs>)> = (0..60_000)
            .map(|i| (v4(i), if i % 2 == 0 { a.clone() } else { b.clone() }))
            .collect();
        routes.extend((0..20_000).map(|i| (v6(i), attrs6(1))));
        rib.set_desired(desired(routes.clone()));
        assert!(
            rib.next_batch(1 << 20, t0()).is_none(),
            "no session, no work"
        );
        rib.established(session(ctx));
        assert_eq!(rib.pending(), 80_000);

        let mut peer = Peer::default();
        let max = 64 * 1024;
        let batches = drain(&mut rib, &mut peer, max, &ctx);
        assert_eq!(peer.rib.len(), 80_000);
        assert!(!rib.has_work());
        assert_eq!(rib.held().len(), 80_000);
        assert_eq!(rib.held_count(AfiSafi::IPV4_UNICAST), 60_000);
        assert_eq!(rib.held_count(AfiSafi::IPV6_UNICAST), 20_000);
        // At most 16 messages of 4096 octets per batch of 64 KiB, and no more messages
        // than packing each group alone needs: the attributes take 34 octets (ORIGIN 4,
        // AS_PATH 9, NEXT_HOP 7, MED 7, COMMUNITIES 7), so an IPv4 message holds
        // (4096 - 23 - 34) / 4 = 1009 /24s; an IPv6 one (4096 - 23 - 25 - 27) / 9 = 446
        // /64s (MP_REACH_NLRI header and next hop 25, no NEXT_HOP).
        assert!(batches >= peer.messages.div_ceil(16));
        let exact = 2 * 30_000usize.div_ceil(1009) + 20_000usize.div_ceil(446);
        assert_eq!(peer.messages, exact);
        // Attributes as sent, in type order; LOCAL_PREF dropped on eBGP.
        let sent = &peer.rib[&v4(1)];
        assert!(matches!(sent[0], PathAttribute::Origin(Origin::Incomplete)));
        assert!(
            matches!(sent[2], PathAttribute::NextHop(nh) if nh == Ipv4Addr::new(100, 64, 0, 1))
        );
        assert!(matches!(sent[3], PathAttribute::MultiExitDisc(2)));
        assert!(!sent
            .iter()
            .any(|a| matches!(a, PathAttribute::LocalPref(_))));
    }

    #[test]
    fn a_stalled_peer_gets_no_more_than_one_batch_per_request() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired((0..100_000).map(|i| (v4(i), attrs(1)))));
        rib.established(session(ctx));
        let b = rib.next_batch(256 * 1024, t0()).unwrap();
        assert_eq!(b.len(), 64);
        // What was not asked for stays unencoded.
        assert_eq!(rib.held().len() + rib.pending(), 100_000);
        let carried: usize = b.iter().map(|u| u.nlri.len()).sum();
        assert_eq!(rib.held().len(), carried);
        // A tiny budget still makes progress, one message at a time.
        assert_eq!(rib.next_batch(10, t0()).unwrap().len(), 1);
        // Extended messages: fewer, larger messages for the same budget.
        let mut ext = AdjRibOut::new();
        ext.set_desired(desired((0..100_000).map(|i| (v4(i), attrs(1)))));
        ext.established(session(Context {
            extended_message: true,
            ..ctx
        }));
        let b = ext.next_batch(256 * 1024, t0()).unwrap();
        assert_eq!(b.len(), 4);
        assert_eq!(b[0].nlri.len(), (65535 - 23 - 34) / 4);
    }

    #[test]
    fn a_change_mid_drain_converges_on_the_newest_set() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        let first: Vec<_> = (0..10_000).map(|i| (v4(i), attrs(1))).collect();
        rib.set_desired(desired(first));
        rib.established(session(ctx));
        let mut peer = Peer::default();
        let b = rib.next_batch(8 * 1024, t0()).unwrap();
        peer.apply(&b, &ctx);
        assert!(rib.has_work());
        // Half gone, the other half with new attributes, and some new IPv6.
        let mut second: Vec<_> = (5_000..10_000).map(|i| (v4(i), attrs(7))).collect();
        second.extend((0..100).map(|i| (v6(i), attrs6(7))));
        rib.set_desired(desired(second.clone()));
        drain(&mut rib, &mut peer, 8 * 1024, &ctx);
        let want: Vec<IpNet> = second.iter().map(|(p, _)| *p).collect();
        assert_eq!(peer.rib.keys().copied().collect::<Vec<_>>(), want);
        assert!(peer
            .rib
            .values()
            .all(|a| a.contains(&PathAttribute::MultiExitDisc(7))));
        assert_eq!(rib.held().keys().copied().collect::<Vec<_>>(), want);
    }

    #[test]
    fn only_the_difference_is_sent_and_withdrawals_come_first() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired([
            (v4(1), attrs(1)),
            (v4(2), attrs(1)),
            (v6(1), attrs6(1)),
        ]));
        rib.established(session(ctx));
        while rib.next_batch(1 << 20, t0()).is_some() {}
        rib.set_desired(desired([(v4(2), attrs(1)), (v4(3), attrs(1))]));
        let b = rib.next_batch(1 << 20, t0()).unwrap();
        let summary: Vec<(Vec<Nlri>, Vec<Nlri>)> = b.iter().map(update_prefixes).collect();
        assert_eq!(
            summary,
            vec![
                (vec![], vec![v4(1).into()]),
                (vec![], vec![v6(1).into()]),
                (vec![v4(3).into()], vec![]),
            ]
        );
        assert!(rib.next_batch(1 << 20, t0()).is_none());
        // Unchanged: nothing at all.
        rib.set_desired(desired([(v4(2), attrs(1)), (v4(3), attrs(1))]));
        assert!(rib.next_batch(1 << 20, t0()).is_none());
    }

    fn lb_host(i: u32) -> IpNet {
        IpNet::V4(ipnet::Ipv4Net::new(Ipv4Addr::from(0xc000_0200 + i), 32).unwrap())
    }

    /// Every UPDATE of the batches until the work is done, as (announced, withdrawn).
    fn all_prefixes(rib: &mut AdjRibOut) -> (BTreeSet<IpNet>, BTreeSet<IpNet>) {
        let mut out = (BTreeSet::new(), BTreeSet::new());
        while let Some(b) = rib.next_batch(1 << 20, t0()) {
            for u in &b {
                let (a, w) = update_prefixes(u);
                out.0.extend(a.iter().map(|n| n.prefix));
                out.1.extend(w.iter().map(|n| n.prefix));
            }
        }
        out
    }

    #[test]
    fn an_lb_delta_sends_only_its_prefixes_and_never_a_pod_cidr() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired((0..1_000).map(|i| (v4(i), attrs(1)))));
        rib.apply_lb((0..500).map(|i| (lb_host(i), Some(attrs(2)))));
        rib.established(session(ctx));
        let (announced, withdrawn) = all_prefixes(&mut rib);
        assert_eq!(announced.len(), 1_500);
        assert!(withdrawn.is_empty());
        rib.apply_lb([(lb_host(7), None), (lb_host(900), Some(attrs(3)))]);
        assert_eq!(rib.pending(), 2);
        let (announced, withdrawn) = all_prefixes(&mut rib);
        assert_eq!(announced, BTreeSet::from([lb_host(900)]));
        assert_eq!(withdrawn, BTreeSet::from([lb_host(7)]));
        // A delta equal to what the peer holds sends nothing.
        rib.apply_lb([(lb_host(8), Some(attrs(2)))]);
        assert!(!rib.has_work());
        // A pod CIDR change leaves every LB route alone, and vice versa.
        rib.set_desired(desired((1..1_000).map(|i| (v4(i), attrs(1)))));
        let (announced, withdrawn) = all_prefixes(&mut rib);
        assert!(announced.is_empty());
        assert_eq!(withdrawn, BTreeSet::from([v4(0)]));
        assert_eq!(rib.held().len(), 999 + 500);
    }

    #[test]
    fn a_pod_cidr_wins_over_an_equal_lb_prefix() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired([(v4(1), attrs(1))]));
        rib.established(session(ctx));
        all_prefixes(&mut rib);
        rib.apply_lb([(v4(1), Some(attrs(9)))]);
        assert!(!rib.has_work(), "the pod cidr is not touched");
        rib.apply_lb([(v4(1), None)]);
        assert!(!rib.has_work());
        rib.apply_lb([(v4(1), Some(attrs(9)))]);
        // The pod CIDR goes: the LB route of that prefix takes its place.
        rib.set_desired(desired([]));
        let (announced, withdrawn) = all_prefixes(&mut rib);
        assert_eq!(
            (announced, withdrawn),
            (BTreeSet::from([v4(1)]), BTreeSet::new())
        );
        assert_eq!(rib.held()[&v4(1)].attrs, attrs(9));
    }

    #[test]
    fn lb_changes_before_the_drain_send_only_the_last_state() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.established(session(ctx));
        let a = attrs(1);
        let b = attrs(2);
        rib.apply_lb([(lb_host(1), Some(a.clone())), (lb_host(2), Some(a.clone()))]);
        rib.apply_lb([(lb_host(1), Some(b.clone()))]);
        rib.apply_lb([(lb_host(2), None)]);
        assert_eq!(rib.pending(), 1);
        let (announced, withdrawn) = all_prefixes(&mut rib);
        assert_eq!(
            (announced, withdrawn),
            (BTreeSet::from([lb_host(1)]), BTreeSet::new())
        );
        assert_eq!(rib.held()[&lb_host(1)].attrs, b);
        // Withdrawn, then announced again with what the peer holds: nothing at all.
        rib.apply_lb([(lb_host(1), None)]);
        rib.apply_lb([(lb_host(1), Some(b.clone()))]);
        assert!(!rib.has_work());
        assert!(rib.next_batch(1 << 20, t0()).is_none());
    }

    #[test]
    fn a_flapping_lb_route_keeps_the_queues_bounded_while_the_peer_is_stalled() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.established(session(ctx));
        let a = attrs(1);
        for round in 0..20_000u32 {
            let to = (round % 2 == 0).then(|| a.clone());
            rib.apply_lb([(lb_host(round % 3), to)]);
        }
        let queued: usize = rib.work.withdraw.iter().map(VecDeque::len).sum::<usize>()
            + rib
                .work
                .groups
                .iter()
                .map(|g| g.prefixes.len())
                .sum::<usize>();
        assert!(queued <= 2 * 3 + 1024 + 1, "{queued} entries");
        let (announced, _) = all_prefixes(&mut rib);
        let want: BTreeSet<IpNet> = rib.lb().keys().copied().collect();
        assert_eq!(announced, want);
        assert_eq!(rib.held().keys().copied().collect::<BTreeSet<_>>(), want);
    }

    #[test]
    fn a_refresh_and_a_new_session_send_the_lb_routes_too() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired([(v4(1), attrs(1))]));
        rib.apply_lb([(lb_host(1), Some(attrs(2)))]);
        rib.established(session(ctx));
        assert_eq!(
            all_prefixes(&mut rib).0,
            BTreeSet::from([v4(1), lb_host(1)])
        );
        rib.send_table(AfiSafi::IPV4_UNICAST, true);
        assert_eq!(
            all_prefixes(&mut rib).0,
            BTreeSet::from([v4(1), lb_host(1)])
        );
        assert_eq!(rib.poll_table_sent(), Some(AfiSafi::IPV4_UNICAST));
        rib.down();
        rib.established(session(ctx));
        assert_eq!(
            all_prefixes(&mut rib).0,
            BTreeSet::from([v4(1), lb_host(1)])
        );
    }

    /// Random pod CIDR sets, LoadBalancer deltas (some on a pod CIDR's prefix), partial
    /// and whole drains and refreshes: once drained the peer holds exactly both layers
    /// (pod CIDR first), and no UPDATE ever touches a pod CIDR prefix unless a pod CIDR
    /// change (or a refresh) asked for it.
    #[test]
    fn random_layers_converge_and_lb_deltas_never_touch_a_pod_cidr() {
        let ctx = four_octet();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let pods: Vec<IpNet> = (0..12).map(v4).collect();
        let lbs: Vec<IpNet> = (0..24)
            .map(lb_host)
            .chain(pods[..4].iter().copied())
            .collect();
        let med = [attrs(1), attrs(2), attrs(3), attrs(4)];
        let mut rib = AdjRibOut::new();
        rib.established(session(ctx));
        let mut peer = Peer::default();
        let mut pod: BTreeMap<IpNet, Arc<RouteAttrs>> = BTreeMap::new();
        let mut lb: BTreeMap<IpNet, Arc<RouteAttrs>> = BTreeMap::new();
        // Pod CIDR prefixes a pod change or a refresh may still send.
        let mut allowed: BTreeSet<IpNet> = BTreeSet::new();
        for _ in 0..4_000 {
            match next(10) {
                0 => {
                    let mut new: BTreeMap<IpNet, Arc<RouteAttrs>> = BTreeMap::new();
                    for p in &pods {
                        if next(2) == 0 {
                            new.insert(*p, med[next(2) as usize].clone());
                        }
                    }
                    allowed.extend(pod.keys().chain(new.keys()).copied());
                    pod = new;
                    rib.set_desired(desired(pod.clone()));
                }
                1..=5 => {
                    let p = lbs[next(lbs.len() as u64) as usize];
                    let to = (next(3) != 0).then(|| med[2 + next(2) as usize].clone());
                    match &to {
                        Some(a) => lb.insert(p, a.clone()),
                        None => lb.remove(&p),
                    };
                    rib.apply_lb([(p, to)]);
                }
                6 => {
                    allowed.extend(pod.keys().copied());
                    rib.send_table(AfiSafi::IPV4_UNICAST, true);
                }
                _ => {
                    let max = if next(2) == 0 { 64 } else { 1 << 20 };
                    if let Some(b) = rib.next_batch(max, t0()) {
                        for u in &b {
                            let (a, w) = update_prefixes(u);
                            for n in a.iter().chain(&w) {
                                if pod.contains_key(&n.prefix) {
                                    assert!(allowed.contains(&n.prefix), "{} sent", n.prefix);
                                }
                            }
                        }
                        peer.apply(&b, &ctx);
                    }
                }
            }
            if !rib.has_work() {
                let mut want = lb.clone();
                want.extend(pod.clone());
                let got: BTreeMap<IpNet, Arc<RouteAttrs>> = rib
                    .held()
                    .iter()
                    .map(|(p, h)| (*p, h.attrs.clone()))
                    .collect();
                assert_eq!(got, want);
                assert_eq!(
                    peer.rib.keys().collect::<Vec<_>>(),
                    want.keys().collect::<Vec<_>>()
                );
                allowed.clear();
                while rib.poll_table_sent().is_some() {}
            }
        }
    }

    #[test]
    fn tables_complete_only_after_their_batches() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired((0..3000).map(|i| (v4(i), attrs(1)))));
        rib.established(session(ctx));
        rib.send_table(AfiSafi::IPV4_UNICAST, false);
        rib.send_table(AfiSafi::IPV6_UNICAST, false);
        // No IPv6 route: that table is complete at once; IPv4 is not.
        assert_eq!(rib.poll_table_sent(), Some(AfiSafi::IPV6_UNICAST));
        assert_eq!(rib.poll_table_sent(), None);
        let _ = rib.next_batch(4096, t0()).unwrap();
        assert_eq!(rib.poll_table_sent(), None);
        while rib.next_batch(4096, t0()).is_some() {}
        assert_eq!(rib.poll_table_sent(), Some(AfiSafi::IPV4_UNICAST));
        assert_eq!(rib.poll_table_sent(), None);
    }

    #[test]
    fn a_refresh_sends_every_route_of_the_family_again() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired([
            (v4(1), attrs(1)),
            (v4(2), attrs(1)),
            (v6(1), attrs6(1)),
        ]));
        rib.established(session(ctx));
        while rib.next_batch(1 << 20, t0()).is_some() {}
        rib.send_table(AfiSafi::IPV4_UNICAST, true);
        assert_eq!(rib.poll_table_sent(), None);
        let b = rib.next_batch(1 << 20, t0()).unwrap();
        let summary: Vec<(Vec<Nlri>, Vec<Nlri>)> = b.iter().map(update_prefixes).collect();
        assert_eq!(summary, vec![(vec![v4(1).into(), v4(2).into()], vec![])]);
        assert_eq!(rib.poll_table_sent(), Some(AfiSafi::IPV4_UNICAST));
        // The refresh is over: an unchanged set sends nothing again.
        let same = rib.desired().clone();
        rib.set_desired(same);
        assert!(rib.next_batch(1 << 20, t0()).is_none());
    }

    #[test]
    fn routes_the_session_cannot_carry_are_refused_and_withdrawn() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        let explicit_v6_for_v4 = Arc::new(RouteAttrs {
            next_hop: NextHop::Address("fd00::9".parse().unwrap()),
            ..(*attrs(1)).clone()
        });
        rib.set_desired(desired([
            (v4(1), attrs(1)),
            (v4(2), attrs(1)),
            (v6(1), attrs(1)),
        ]));
        // An IPv4 session, IPv6 negotiated, an IPv6 route with the session's address.
        rib.established(session(ctx));
        let mut peer = Peer::default();
        drain(&mut rib, &mut peer, 1 << 20, &ctx);
        assert_eq!(
            peer.rib.keys().copied().collect::<Vec<_>>(),
            vec![v4(1), v4(2)]
        );
        assert_eq!(
            rib.take_refusals(),
            [((AfiSafi::IPV6_UNICAST, RouteRefusal::NoNextHop), 1)].into()
        );
        // v4(2) moves to an IPv6 next hop without RFC 8950: the old version is withdrawn.
        rib.set_desired(desired([(v4(1), attrs(1)), (v4(2), explicit_v6_for_v4)]));
        drain(&mut rib, &mut peer, 1 << 20, &ctx);
        assert_eq!(peer.rib.keys().copied().collect::<Vec<_>>(), vec![v4(1)]);
        assert_eq!(
            rib.take_refusals(),
            [(
                (
                    AfiSafi::IPV4_UNICAST,
                    RouteRefusal::ExtendedNextHopNotNegotiated
                ),
                1
            )]
            .into()
        );
        assert!(rib.take_refusals().is_empty());
        // An IPv4 next hop for an IPv6 route.
        let explicit_v4_for_v6 = Arc::new(RouteAttrs {
            next_hop: NextHop::Address("192.0.2.9".parse().unwrap()),
            ..(*attrs(1)).clone()
        });
        rib.set_desired(desired([(v4(1), attrs(1)), (v6(2), explicit_v4_for_v6)]));
        drain(&mut rib, &mut peer, 1 << 20, &ctx);
        assert_eq!(
            rib.take_refusals(),
            [((AfiSafi::IPV6_UNICAST, RouteRefusal::NextHopFamily), 1)].into()
        );

        // IPv6 not negotiated at all.
        let mut v4_only = AdjRibOut::new();
        v4_only.set_desired(desired([(v4(1), attrs(1)), (v6(1), attrs6(1))]));
        v4_only.established(RibSession {
            families: vec![AfiSafi::IPV4_UNICAST],
            ..session(ctx)
        });
        v4_only.send_table(AfiSafi::IPV4_UNICAST, false);
        let b = v4_only.next_batch(1 << 20, t0()).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(
            v4_only.take_refusals(),
            [(
                (AfiSafi::IPV6_UNICAST, RouteRefusal::FamilyNotNegotiated),
                1
            )]
            .into()
        );
        assert_eq!(v4_only.poll_table_sent(), Some(AfiSafi::IPV4_UNICAST));
    }

    #[test]
    fn ipv4_routes_on_an_ipv6_session_use_rfc8950_only_when_negotiated() {
        let ctx = four_octet();
        let v6_session = |extended| RibSession {
            next_hops: SessionNextHops {
                local: "fd00::7".parse().unwrap(),
                extended_next_hop_ipv4: extended,
            },
            ..session(ctx)
        };
        let want = desired([(v4(1), attrs(1)), (v4(2), attrs(1)), (v6(1), attrs(1))]);
        let mut rib = AdjRibOut::new();
        rib.set_desired(want.clone());
        rib.established(v6_session(false));
        let mut peer = Peer::default();
        drain(&mut rib, &mut peer, 1 << 20, &ctx);
        assert_eq!(peer.rib.keys().copied().collect::<Vec<_>>(), vec![v6(1)]);
        assert_eq!(
            rib.take_refusals(),
            [(
                (
                    AfiSafi::IPV4_UNICAST,
                    RouteRefusal::ExtendedNextHopNotNegotiated
                ),
                2
            )]
            .into()
        );

        let mut rib = AdjRibOut::new();
        rib.set_desired(want);
        rib.established(v6_session(true));
        let b = rib.next_batch(1 << 20, t0()).unwrap();
        assert!(rib.take_refusals().is_empty());
        let v4_update = b
            .iter()
            .find(|u| {
                u.mp_reach()
                    .is_some_and(|r| r.afi_safi == AfiSafi::IPV4_UNICAST)
            })
            .unwrap();
        let reach = v4_update.mp_reach().unwrap();
        assert_eq!(
            reach.next_hop,
            MpNextHop::V6 {
                global: "fd00::7".parse().unwrap(),
                link_local: None
            }
        );
        assert_eq!(reach.nlri, vec![v4(1).into(), v4(2).into()]);
        assert!(v4_update.nlri.is_empty());
        assert!(!v4_update
            .attributes
            .iter()
            .any(|a| matches!(a, PathAttribute::NextHop(_))));
        let mut peer = Peer::default();
        peer.apply(&b, &ctx);
        assert_eq!(
            peer.rib.keys().copied().collect::<Vec<_>>(),
            vec![v4(1), v4(2), v6(1)]
        );
        assert_eq!(rib.held_count(AfiSafi::IPV4_UNICAST), 2);
        // Withdrawals of those IPv4 routes go in the Withdrawn Routes field.
        rib.set_desired(desired([(v6(1), attrs(1))]));
        let b = rib.next_batch(1 << 20, t0()).unwrap();
        assert_eq!(b[0].withdrawn, vec![v4(1).into(), v4(2).into()]);
    }

    #[test]
    fn ibgp_keeps_local_pref_and_two_octet_sessions_get_as4_path() {
        let ctx = Context::default();
        let mut rib = AdjRibOut::new();
        let big_as = Arc::new(RouteAttrs {
            as_path: vec![4_200_000_001],
            ..(*attrs(1)).clone()
        });
        rib.set_desired(desired([(v4(1), big_as)]));
        rib.established(RibSession {
            ibgp: true,
            ..session(ctx)
        });
        let b = rib.next_batch(1 << 20, t0()).unwrap();
        assert!(b[0].attributes.contains(&PathAttribute::LocalPref(200)));
        let mut out = BytesMut::new();
        encode_message(&Message::Update(b[0].clone()), &ctx, &mut out).unwrap();
        let has = |needle: &[u8]| out.windows(needle.len()).any(|w| w == needle);
        // AS_PATH with AS_TRANS, then AS4_PATH with the real AS (RFC 6793 section 4.2.2).
        assert!(has(&[0x40, 0x02, 0x04, 0x02, 0x01, 0x5b, 0xa0]));
        assert!(has(&[0xc0, 0x11, 0x06, 0x02, 0x01, 0xfa, 0x56, 0xea, 0x01]));
        let mut peer = Peer::default();
        peer.apply(&b, &ctx);
        assert!(peer.rib[&v4(1)]
            .iter()
            .any(|a| matches!(a, PathAttribute::AsPath(p)
            if p.segments[0].asns == vec![4_200_000_001])));
    }

    #[test]
    fn long_as_paths_split_into_segments_of_255() {
        let p = as_path(&(1..=600).collect::<Vec<u32>>());
        let lens: Vec<usize> = p.segments.iter().map(|s| s.asns.len()).collect();
        assert_eq!(lens, vec![255, 255, 90]);
        assert!(as_path(&[]).segments.is_empty());
    }

    #[test]
    fn a_snapshot_lists_held_routes_as_sent_and_the_pending_changes_bounded() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        let start = Instant::now();
        assert!(!rib.snapshot(10, start).established);
        rib.set_desired(desired((1..=3).map(|i| (v4(i), attrs(i)))));
        rib.established(session(ctx));
        while rib.next_batch(1 << 20, start).is_some() {}
        // v4(1) goes, v4(4) and v6(1) come: one withdrawal, two announcements pending.
        let mut next: Vec<(IpNet, Arc<RouteAttrs>)> = vec![(v4(2), attrs(2)), (v4(3), attrs(3))];
        next.push((v4(4), attrs(4)));
        next.push((v6(1), attrs6(5)));
        rib.set_desired(desired(next));
        let later = start + std::time::Duration::from_secs(7);
        let snap = rib.snapshot(10, later);
        assert!(snap.established);
        assert_eq!(snap.taken, Some(later));
        assert_eq!((snap.held, snap.pending), (3, 3));
        let held: Vec<IpNet> = snap.routes.iter().map(|r| r.prefix).collect();
        assert_eq!(held, [v4(1), v4(2), v4(3)]);
        let first = &snap.routes[1];
        assert_eq!(first.since, Some(start));
        assert_eq!(first.pending, None);
        let a = first.attrs.as_ref().unwrap();
        assert_eq!(
            a.next_hop,
            IpAddr::V4(Ipv4Addr::new(0x64, 0x40, 0x00, 0x01))
        );
        assert_eq!(a.as_path, [65001]);
        assert_eq!(a.med, Some(2));
        assert_eq!(a.local_pref, None, "eBGP: LOCAL_PREF is not sent");
        assert_eq!(a.communities, [0xfde9_0064]);
        let pending: Vec<(IpNet, Option<PendingChange>)> = snap
            .pending_routes
            .iter()
            .map(|r| (r.prefix, r.pending))
            .collect();
        assert_eq!(
            pending,
            [
                (v4(1), Some(PendingChange::Withdraw)),
                (v4(4), Some(PendingChange::Announce)),
                (v6(1), Some(PendingChange::Announce)),
            ]
        );
        assert!(snap.pending_routes[0].attrs.is_none());
        let v6_hop = snap.pending_routes[2].attrs.as_ref().unwrap().next_hop;
        assert_eq!(v6_hop, "fd00::1".parse::<IpAddr>().unwrap());

        // Bounded: the counts stay whole.
        let small = rib.snapshot(1, later);
        assert_eq!((small.routes.len(), small.pending_routes.len()), (1, 1));
        assert_eq!((small.held, small.pending), (3, 3));

        // Sent: the new routes carry the later time, the old ones keep theirs.
        while rib.next_batch(1 << 20, later).is_some() {}
        let snap = rib.snapshot(10, later);
        assert_eq!((snap.held, snap.pending), (4, 0));
        let since: Vec<(IpNet, Option<Instant>)> =
            snap.routes.iter().map(|r| (r.prefix, r.since)).collect();
        assert_eq!(
            since,
            [
                (v4(2), Some(start)),
                (v4(3), Some(start)),
                (v4(4), Some(later)),
                (v6(1), Some(later)),
            ]
        );

        let mut ibgp = session(ctx);
        ibgp.ibgp = true;
        rib.established(ibgp);
        while rib.next_batch(1 << 20, later).is_some() {}
        let lp = rib.snapshot(1, later).routes[0]
            .attrs
            .clone()
            .unwrap()
            .local_pref;
        assert_eq!(lp, Some(200), "iBGP: LOCAL_PREF is sent");
    }

    #[test]
    fn down_forgets_what_the_peer_held() {
        let ctx = four_octet();
        let mut rib = AdjRibOut::new();
        rib.set_desired(desired([(v4(1), attrs(1))]));
        rib.established(session(ctx));
        while rib.next_batch(1 << 20, t0()).is_some() {}
        assert_eq!(rib.held().len(), 1);
        rib.down();
        assert!(rib.held().is_empty());
        assert!(rib.next_batch(1 << 20, t0()).is_none());
        // The next session sends everything again.
        rib.established(session(ctx));
        assert_eq!(rib.pending(), 1);
    }

    #[test]
    fn nlri_lengths_follow_rfc4271() {
        assert_eq!(nlri_len(&"0.0.0.0/0".parse().unwrap()), 1);
        assert_eq!(nlri_len(&"10.0.0.0/8".parse().unwrap()), 2);
        assert_eq!(nlri_len(&"10.0.0.0/9".parse().unwrap()), 3);
        assert_eq!(nlri_len(&"10.0.0.0/24".parse().unwrap()), 4);
        assert_eq!(nlri_len(&"fd00::/64".parse().unwrap()), 9);
        assert_eq!(nlri_len(&"fd00::1/128".parse().unwrap()), 17);
    }
}
