//! Message values: what a BGP message means, independent of how it is encoded.
//!
//! These types are the contract between the codec (decode/encode in the sibling
//! modules), the session state machine and the route planner. They hold no bytes of
//! framing and no negotiated state; widths that depend on the session (2- or 4-octet AS
//! numbers, ADD-PATH identifiers) are resolved by the [`super::Context`] at the edges.

use bytes::Bytes;
use ipnet::IpNet;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Address Family Identifier (IANA "Address Family Numbers").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Afi(pub u16);

impl Afi {
    pub const IPV4: Afi = Afi(1);
    pub const IPV6: Afi = Afi(2);
}

/// Subsequent Address Family Identifier (IANA "SAFI Values").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Safi(pub u8);

impl Safi {
    pub const UNICAST: Safi = Safi(1);
    pub const MULTICAST: Safi = Safi(2);
}

/// An AFI/SAFI pair, as carried in capabilities, MP_REACH/MP_UNREACH and ROUTE-REFRESH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AfiSafi {
    pub afi: Afi,
    pub safi: Safi,
}

impl AfiSafi {
    pub const IPV4_UNICAST: AfiSafi = AfiSafi {
        afi: Afi::IPV4,
        safi: Safi::UNICAST,
    };
    pub const IPV6_UNICAST: AfiSafi = AfiSafi {
        afi: Afi::IPV6,
        safi: Safi::UNICAST,
    };
}

/// A decoded BGP message (RFC 4271 section 4.1 message types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Open(Open),
    Update(Update),
    Notification(Notification),
    Keepalive,
    RouteRefresh(RouteRefresh),
}

/// The message type octet (RFC 4271 section 4.1, RFC 2918).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MessageType {
    Open = 1,
    Update = 2,
    Notification = 3,
    Keepalive = 4,
    RouteRefresh = 5,
}

/// OPEN message (RFC 4271 section 4.2; optional parameters per RFC 5492 and the extended
/// optional parameters length of RFC 9072).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    pub version: u8,
    /// The 2-octet "My Autonomous System" field: AS_TRANS (23456) when the real AS needs
    /// four octets (RFC 6793); the real AS travels in [`Capability::FourOctetAs`].
    pub my_as: u16,
    pub hold_time: u16,
    pub bgp_id: Ipv4Addr,
    /// Capabilities, in the order they appeared (all capability optional parameters
    /// flattened).
    pub capabilities: Vec<Capability>,
    /// Optional parameters other than capabilities (type != 2), kept as bytes. RFC 5492
    /// deprecates them; a receiver answers with OPEN error subcode 4.
    pub other_params: Vec<(u8, Bytes)>,
}

/// The 2-octet AS number that stands for a 4-octet one (RFC 6793).
pub const AS_TRANS: u16 = 23456;

impl Open {
    /// The speaker's AS: from the 4-octet AS capability when present, else `my_as`.
    pub fn asn(&self) -> u32 {
        self.capabilities
            .iter()
            .find_map(|c| match c {
                Capability::FourOctetAs(asn) => Some(*asn),
                _ => None,
            })
            .unwrap_or(self.my_as as u32)
    }
}

/// BGP capabilities (RFC 5492; IANA "Capability Codes").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Capability {
    /// Code 1, RFC 4760.
    Multiprotocol(AfiSafi),
    /// Code 2, RFC 2918.
    RouteRefresh,
    /// Code 5, RFC 8950: NLRI families the sender accepts with a next hop of another
    /// address family.
    ExtendedNextHop(Vec<ExtendedNextHopFamily>),
    /// Code 64, RFC 4724.
    GracefulRestart(GracefulRestart),
    /// Code 65, RFC 6793.
    FourOctetAs(u32),
    /// Code 69, RFC 7911.
    AddPath(Vec<AddPathFamily>),
    /// Code 70, RFC 7313.
    EnhancedRouteRefresh,
    /// Code 6, RFC 8654.
    ExtendedMessage,
    /// Code 73, draft-walton-bgp-hostname-capability.
    Fqdn { hostname: String, domain: String },
    /// Any other code, value kept as received.
    Unknown { code: u8, value: Bytes },
}

/// The graceful restart capability value (RFC 4724 section 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GracefulRestart {
    /// R bit: the sender has restarted.
    pub restart_state: bool,
    /// N bit (RFC 8538): graceful notification supported.
    pub notification: bool,
    /// Restart time in seconds (12 bits).
    pub restart_time: u16,
    pub families: Vec<GracefulRestartFamily>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GracefulRestartFamily {
    pub afi_safi: AfiSafi,
    /// F bit: forwarding state was preserved for this family.
    pub forwarding_preserved: bool,
}

/// One entry of the Extended Next Hop Encoding capability (RFC 8950 section 4): NLRI
/// of `afi_safi` may carry a next hop of `next_hop_afi` (IPv4 unicast with an IPv6 next
/// hop is AFI 1, SAFI 1, next hop AFI 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtendedNextHopFamily {
    pub afi_safi: AfiSafi,
    pub next_hop_afi: Afi,
}

impl ExtendedNextHopFamily {
    /// IPv4 unicast NLRI with an IPv6 next hop, the case RFC 8950 is for.
    pub const IPV4_UNICAST_OVER_IPV6: ExtendedNextHopFamily = ExtendedNextHopFamily {
        afi_safi: AfiSafi::IPV4_UNICAST,
        next_hop_afi: Afi::IPV6,
    };
}

/// One AFI/SAFI entry of the ADD-PATH capability (RFC 7911 section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddPathFamily {
    pub afi_safi: AfiSafi,
    pub send_receive: AddPathMode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddPathMode {
    Receive = 1,
    Send = 2,
    Both = 3,
}

/// One NLRI entry: a prefix and, when ADD-PATH is in force for its family, its path
/// identifier (RFC 7911 section 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nlri {
    pub path_id: Option<u32>,
    pub prefix: IpNet,
}

impl From<IpNet> for Nlri {
    fn from(prefix: IpNet) -> Self {
        Nlri {
            path_id: None,
            prefix,
        }
    }
}

/// UPDATE message (RFC 4271 section 4.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Update {
    /// IPv4 unicast prefixes in the Withdrawn Routes field.
    pub withdrawn: Vec<Nlri>,
    /// Path attributes in the order received (encode writes them in this order).
    pub attributes: Vec<PathAttribute>,
    /// IPv4 unicast prefixes in the NLRI field.
    pub nlri: Vec<Nlri>,
    /// Non-fatal errors found while decoding (RFC 7606): attributes discarded, or the
    /// reason every NLRI of this UPDATE must be treated as withdrawn. Empty for a clean
    /// message; never encoded.
    pub errors: Vec<super::UpdateError>,
}

/// ORIGIN values (RFC 4271 section 5.1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    Igp = 0,
    Egp = 1,
    Incomplete = 2,
}

/// AS_PATH segment types (RFC 4271 section 4.3, RFC 5065 for confederations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentType {
    AsSet = 1,
    AsSequence = 2,
    ConfedSequence = 3,
    ConfedSet = 4,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AsSegment {
    pub kind: SegmentType,
    pub asns: Vec<u32>,
}

/// An AS_PATH or AS4_PATH value. AS numbers are always held as u32; the encoding width
/// comes from the context (AS_PATH) or is always four octets (AS4_PATH).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct AsPath {
    pub segments: Vec<AsSegment>,
}

/// AGGREGATOR / AS4_AGGREGATOR value (RFC 4271 section 5.1.7, RFC 6793).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Aggregator {
    pub asn: u32,
    pub address: Ipv4Addr,
}

/// A large community (RFC 8092).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LargeCommunity {
    pub global_admin: u32,
    pub local_data1: u32,
    pub local_data2: u32,
}

/// Next hop of an MP_REACH_NLRI (RFC 4760 section 3; RFC 2545 section 3 for IPv6 with an
/// optional link-local address).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MpNextHop {
    V4(Ipv4Addr),
    V6 {
        global: Ipv6Addr,
        link_local: Option<Ipv6Addr>,
    },
    /// Any other length or family: kept as bytes.
    Other(Bytes),
}

/// MP_REACH_NLRI (RFC 4760 section 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpReach {
    pub afi_safi: AfiSafi,
    pub next_hop: MpNextHop,
    /// Prefixes, for the families this codec understands (IPv4/IPv6 unicast and
    /// multicast); empty and `raw_nlri` set otherwise.
    pub nlri: Vec<Nlri>,
    /// NLRI of a family the codec does not parse (VPN, EVPN, FlowSpec...), kept as bytes.
    pub raw_nlri: Option<Bytes>,
}

/// MP_UNREACH_NLRI (RFC 4760 section 4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpUnreach {
    pub afi_safi: AfiSafi,
    pub withdrawn: Vec<Nlri>,
    pub raw_withdrawn: Option<Bytes>,
}

/// Path attributes (RFC 4271 section 5 and IANA "BGP Path Attributes").
///
/// The large, rare payloads (MP_REACH/MP_UNREACH with their next hop and raw NLRI, and
/// attributes kept as bytes) are boxed so that the enum stays at 32 octets: every
/// UPDATE decoded fills a `Vec` of these, and moving 104-octet values dominated the
/// decoder's profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathAttribute {
    /// Type 1.
    Origin(Origin),
    /// Type 2.
    AsPath(AsPath),
    /// Type 3.
    NextHop(Ipv4Addr),
    /// Type 4.
    MultiExitDisc(u32),
    /// Type 5.
    LocalPref(u32),
    /// Type 6.
    AtomicAggregate,
    /// Type 7.
    Aggregator(Aggregator),
    /// Type 8 (RFC 1997): each community as its 32-bit value.
    Communities(Vec<u32>),
    /// Type 9 (RFC 4456).
    OriginatorId(Ipv4Addr),
    /// Type 10 (RFC 4456).
    ClusterList(Vec<Ipv4Addr>),
    /// Type 14 (RFC 4760).
    MpReach(Box<MpReach>),
    /// Type 15 (RFC 4760).
    MpUnreach(Box<MpUnreach>),
    /// Type 16 (RFC 4360): each extended community as its 8 octets.
    ExtendedCommunities(Vec<[u8; 8]>),
    /// Type 17 (RFC 6793).
    As4Path(AsPath),
    /// Type 18 (RFC 6793).
    As4Aggregator(Aggregator),
    /// Type 32 (RFC 8092).
    LargeCommunities(Vec<LargeCommunity>),
    /// Any other type, kept with its flags as received.
    Unknown(Box<UnknownAttribute>),
}

/// An attribute this codec does not interpret. For an optional transitive attribute
/// passed on to another peer, the partial bit must be set (RFC 4271 section 5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownAttribute {
    pub flags: u8,
    pub type_code: u8,
    pub value: Bytes,
}

/// Attribute flag bits (RFC 4271 section 4.3).
pub mod attr_flags {
    pub const OPTIONAL: u8 = 0x80;
    pub const TRANSITIVE: u8 = 0x40;
    pub const PARTIAL: u8 = 0x20;
    pub const EXTENDED_LENGTH: u8 = 0x10;
}

/// NOTIFICATION message (RFC 4271 section 4.5). `code`/`subcode` are kept as numbers so
/// that any received value round-trips; [`super::ErrorKind`] gives them meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub code: u8,
    pub subcode: u8,
    pub data: Bytes,
}

/// ROUTE-REFRESH message (RFC 2918; the message subtype of RFC 7313).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteRefresh {
    pub afi_safi: AfiSafi,
    pub subtype: RouteRefreshSubtype,
}

/// RFC 7313 section 3.2: the octet that RFC 2918 called Reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteRefreshSubtype {
    /// 0: a normal route refresh request.
    Request,
    /// 1: Beginning of Route Refresh.
    Borr,
    /// 2: End of Route Refresh.
    Eorr,
    /// 3-254 reserved, 255 reserved: the message is ignored by the receiver (RFC 7313
    /// section 5), but decodes.
    Reserved(u8),
}
