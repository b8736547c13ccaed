//! Decode and encode errors, the typed NOTIFICATION codes of RFC 4271 section 4.5 and
//! the IANA "BGP Error (Notification) Codes" registry, and the one exhaustive mapping
//! from a malformation to the protocol reaction (RFC 4271 section 6, RFC 7606).
//!
//! Owns: [`DecodeError`] (always fatal: the session sends [`DecodeError::notification`]
//! and closes), [`UpdateFault`] (every way an UPDATE can be malformed, each with its
//! RFC 7606 [`Reaction`]), [`UpdateError`] (a non-fatal fault kept on the decoded
//! `Update`), [`EncodeError`], and the subcode enums. Must not decide policy that needs
//! configuration (peer AS, hold time floor, our own BGP identifier): the session does
//! that and uses the error values defined here.

use bytes::Bytes;
use std::fmt;
use std::net::Ipv4Addr;

use super::types::Notification;

/// What the receiver of a malformed UPDATE must do (RFC 7606 section 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reaction {
    /// Reset the session with this NOTIFICATION.
    SessionReset(Notification),
    /// Keep the session; treat every NLRI of the UPDATE as withdrawn.
    TreatAsWithdraw,
    /// Keep the session; drop the attribute and process the rest.
    AttributeDiscard,
}

/// A non-fatal UPDATE error kept on the decoded message (see `Update::errors`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateError {
    /// The attribute type code the error concerns, if any.
    pub attr_type: Option<u8>,
    pub reaction_kind: NonFatal,
    /// A human-readable description for logs and `decode` output.
    pub detail: String,
    /// The malformation itself; `fault.reaction()` is what produced `reaction_kind`.
    pub fault: UpdateFault,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonFatal {
    TreatAsWithdraw,
    AttributeDiscard,
}

impl UpdateError {
    /// Wraps a fault whose reaction is not a session reset; `None` when it is.
    pub fn from_fault(fault: UpdateFault) -> Option<UpdateError> {
        let reaction_kind = match fault.reaction() {
            Reaction::SessionReset(_) => return None,
            Reaction::TreatAsWithdraw => NonFatal::TreatAsWithdraw,
            Reaction::AttributeDiscard => NonFatal::AttributeDiscard,
        };
        Some(UpdateError {
            attr_type: fault.attr_type(),
            reaction_kind,
            detail: fault.to_string(),
            fault,
        })
    }
}

/// Attribute type codes the error mapping needs (IANA "BGP Path Attributes").
pub mod attr_type {
    pub const ORIGIN: u8 = 1;
    pub const AS_PATH: u8 = 2;
    pub const NEXT_HOP: u8 = 3;
    pub const MULTI_EXIT_DISC: u8 = 4;
    pub const LOCAL_PREF: u8 = 5;
    pub const ATOMIC_AGGREGATE: u8 = 6;
    pub const AGGREGATOR: u8 = 7;
    pub const COMMUNITIES: u8 = 8;
    pub const ORIGINATOR_ID: u8 = 9;
    pub const CLUSTER_LIST: u8 = 10;
    pub const MP_REACH_NLRI: u8 = 14;
    pub const MP_UNREACH_NLRI: u8 = 15;
    pub const EXTENDED_COMMUNITIES: u8 = 16;
    pub const AS4_PATH: u8 = 17;
    pub const AS4_AGGREGATOR: u8 = 18;
    pub const LARGE_COMMUNITIES: u8 = 32;
}

/// Which property of a recognized attribute is wrong (RFC 4271 section 6.3 names one
/// subcode per property; RFC 7606 section 7 gives one reaction per attribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttrProblem {
    /// The Optional or Transitive bit conflicts with the type code (RFC 7606 section 3
    /// item c: only those two bits are compared).
    Flags,
    /// The length is not one the type allows.
    Length,
    /// The value is malformed (an undefined ORIGIN, a broken AS_PATH segment, an
    /// MP_REACH_NLRI next hop or NLRI that cannot be parsed...).
    Value,
}

/// Every way an UPDATE can be malformed. [`UpdateFault::reaction`] is the one place
/// that says what each one costs; [`UpdateFault::notification`] is the NOTIFICATION
/// RFC 4271 section 6.3 would send for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpdateFault {
    /// Withdrawn Routes Length + Total Attribute Length + 23 exceeds the message length
    /// (RFC 4271 section 6.3): the NLRI field cannot be located.
    #[error("withdrawn routes length or total attribute length exceeds the message")]
    FieldLengths,
    /// An attribute runs past the path attributes field, or fewer octets remain than an
    /// attribute header needs (RFC 7606 section 4).
    #[error("path attribute overruns the path attributes field")]
    AttributeOverrun,
    /// MP_REACH_NLRI or MP_UNREACH_NLRI appears more than once (RFC 7606 section 3 g).
    #[error("attribute {type_code} (mp) appears more than once")]
    DuplicateMpAttribute { type_code: u8 },
    /// Any other attribute appears more than once: the first is kept (RFC 7606
    /// section 3 g).
    #[error("attribute {type_code} appears more than once; later copies discarded")]
    DuplicateAttribute { type_code: u8 },
    /// The Optional bit is clear but the type code is not one we know (RFC 4271
    /// section 6.3). `attribute` is the whole attribute (flags, type, length, value).
    #[error("unrecognized well-known attribute {type_code}")]
    UnrecognizedWellKnown { type_code: u8, attribute: Bytes },
    /// ORIGIN, AS_PATH or (with IPv4 NLRI) NEXT_HOP is absent from an UPDATE that
    /// carries NLRI (RFC 4271 section 6.3, RFC 4760 section 3, RFC 7606 section 3 d).
    #[error("missing well-known attribute {type_code}")]
    MissingWellKnown { type_code: u8 },
    /// A recognized attribute is malformed; `attribute` is the whole attribute.
    #[error("malformed attribute {type_code} ({problem:?})")]
    Malformed {
        type_code: u8,
        problem: AttrProblem,
        attribute: Bytes,
    },
    /// AS4_PATH or AS4_AGGREGATOR received although both sides speak 4-octet AS
    /// numbers (RFC 6793 section 3): discarded.
    #[error("attribute {type_code} received on a 4-octet AS session")]
    UnexpectedAs4 { type_code: u8 },
    /// AS4_PATH carried confederation segments, which were dropped (RFC 6793 section 6).
    #[error("confederation segments in AS4_PATH dropped")]
    As4PathConfed,
    /// The Withdrawn Routes or NLRI field does not parse (RFC 4271 section 6.3, RFC 7606
    /// section 5.3).
    #[error("withdrawn routes or nlri field is syntactically incorrect")]
    InvalidNetworkField,
}

impl UpdateFault {
    /// The attribute the fault is about, if any.
    pub fn attr_type(&self) -> Option<u8> {
        match self {
            UpdateFault::FieldLengths
            | UpdateFault::AttributeOverrun
            | UpdateFault::InvalidNetworkField => None,
            UpdateFault::DuplicateMpAttribute { type_code }
            | UpdateFault::DuplicateAttribute { type_code }
            | UpdateFault::UnrecognizedWellKnown { type_code, .. }
            | UpdateFault::MissingWellKnown { type_code }
            | UpdateFault::Malformed { type_code, .. }
            | UpdateFault::UnexpectedAs4 { type_code } => Some(*type_code),
            UpdateFault::As4PathConfed => Some(attr_type::AS4_PATH),
        }
    }

    /// The reaction RFC 7606 requires. This is the single table of the codec's error
    /// policy; the decoder only detects faults and asks here what they cost.
    pub fn reaction(&self) -> Reaction {
        use attr_type::*;
        match self {
            // RFC 4271 section 6.3 unchanged by RFC 7606: the message cannot be delimited.
            UpdateFault::FieldLengths => Reaction::SessionReset(self.notification()),
            // RFC 7606 section 4: the Total Attribute Length still locates the NLRI.
            UpdateFault::AttributeOverrun => Reaction::TreatAsWithdraw,
            // RFC 7606 section 3 g.
            UpdateFault::DuplicateMpAttribute { .. } => Reaction::SessionReset(self.notification()),
            UpdateFault::DuplicateAttribute { .. } => Reaction::AttributeDiscard,
            // RFC 4271 section 6.3; RFC 7606 does not relax it.
            UpdateFault::UnrecognizedWellKnown { .. } => {
                Reaction::SessionReset(self.notification())
            }
            // RFC 7606 section 3 d.
            UpdateFault::MissingWellKnown { .. } => Reaction::TreatAsWithdraw,
            // RFC 6793 sections 3 and 6.
            UpdateFault::UnexpectedAs4 { .. } | UpdateFault::As4PathConfed => {
                Reaction::AttributeDiscard
            }
            // RFC 7606 section 5.3: the NLRI cannot be trusted, so nothing can be
            // withdrawn precisely; AFI/SAFI disable is not supported.
            UpdateFault::InvalidNetworkField => Reaction::SessionReset(self.notification()),
            UpdateFault::Malformed { type_code, .. } => match *type_code {
                // RFC 7606 sections 7.1-7.5, 7.8-7.10, 7.14; RFC 8092 section 6.
                ORIGIN | AS_PATH | NEXT_HOP | MULTI_EXIT_DISC | LOCAL_PREF | COMMUNITIES
                | ORIGINATOR_ID | CLUSTER_LIST | EXTENDED_COMMUNITIES | LARGE_COMMUNITIES => {
                    Reaction::TreatAsWithdraw
                }
                // RFC 7606 sections 7.6, 7.7; RFC 6793 section 6.
                ATOMIC_AGGREGATE | AGGREGATOR | AS4_PATH | AS4_AGGREGATOR => {
                    Reaction::AttributeDiscard
                }
                // RFC 7606 sections 7.11, 7.12 with RFC 4760 section 7: the NLRI inside
                // cannot be located reliably.
                MP_REACH_NLRI | MP_UNREACH_NLRI => Reaction::SessionReset(self.notification()),
                // Attributes this codec does not interpret are never checked; should one
                // be added without a row above, RFC 7606 section 6 makes
                // treat-as-withdraw the default.
                _ => Reaction::TreatAsWithdraw,
            },
        }
    }

    /// The UPDATE Message Error subcode RFC 4271 section 6.3 assigns.
    pub fn subcode(&self) -> UpdateErrorCode {
        use attr_type::*;
        match self {
            UpdateFault::FieldLengths
            | UpdateFault::AttributeOverrun
            | UpdateFault::DuplicateMpAttribute { .. }
            | UpdateFault::DuplicateAttribute { .. } => UpdateErrorCode::MalformedAttributeList,
            UpdateFault::UnrecognizedWellKnown { .. } => UpdateErrorCode::UnrecognizedWellKnown,
            UpdateFault::MissingWellKnown { .. } => UpdateErrorCode::MissingWellKnown,
            UpdateFault::UnexpectedAs4 { .. } | UpdateFault::As4PathConfed => {
                UpdateErrorCode::OptionalAttribute
            }
            UpdateFault::InvalidNetworkField => UpdateErrorCode::InvalidNetworkField,
            UpdateFault::Malformed {
                type_code, problem, ..
            } => match (problem, *type_code) {
                (AttrProblem::Flags, _) => UpdateErrorCode::AttributeFlags,
                // RFC 4760 section 7: any error in MP_REACH/MP_UNREACH is an "Optional
                // Attribute Error".
                (_, MP_REACH_NLRI | MP_UNREACH_NLRI) => UpdateErrorCode::OptionalAttribute,
                (AttrProblem::Length, _) => UpdateErrorCode::AttributeLength,
                (AttrProblem::Value, ORIGIN) => UpdateErrorCode::InvalidOrigin,
                (AttrProblem::Value, AS_PATH) => UpdateErrorCode::MalformedAsPath,
                (AttrProblem::Value, NEXT_HOP) => UpdateErrorCode::InvalidNextHop,
                (AttrProblem::Value, _) => UpdateErrorCode::OptionalAttribute,
            },
        }
    }

    /// The NOTIFICATION RFC 4271 section 6.3 specifies for this fault, with its data
    /// field: the attribute for 3/2, 3/4, 3/5, 3/6, 3/8, 3/9; the type code for 3/3;
    /// nothing otherwise.
    pub fn notification(&self) -> Notification {
        let data = match self {
            UpdateFault::UnrecognizedWellKnown { attribute, .. } => attribute.clone(),
            UpdateFault::MissingWellKnown { type_code } => Bytes::copy_from_slice(&[*type_code]),
            UpdateFault::Malformed { attribute, .. } => attribute.clone(),
            UpdateFault::FieldLengths
            | UpdateFault::AttributeOverrun
            | UpdateFault::DuplicateMpAttribute { .. }
            | UpdateFault::DuplicateAttribute { .. }
            | UpdateFault::UnexpectedAs4 { .. }
            | UpdateFault::As4PathConfed
            | UpdateFault::InvalidNetworkField => Bytes::new(),
        };
        Notification::new(ErrorCode::UpdateMessage.code(), self.subcode().code(), data)
    }
}

/// A message that cannot be accepted: the session must send
/// [`DecodeError::notification`] and close (RFC 4271 section 6).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// 1/1: the marker is not all ones.
    #[error("message header: connection not synchronized (bad marker)")]
    ConnectionNotSynchronized,
    /// 1/2: the header length is out of range for the message type, or inconsistent with
    /// the message handed in. Data: the length field.
    #[error("message header: bad message length {length}")]
    BadMessageLength { length: u16 },
    /// 1/3: unknown message type. Data: the type octet.
    #[error("message header: bad message type {msg_type}")]
    BadMessageType { msg_type: u8 },
    /// 2/0: an OPEN whose optional parameters or a recognized capability are malformed
    /// (RFC 4271 section 6.2: "recognized, but is malformed").
    #[error("open: malformed ({reason})")]
    MalformedOpen { reason: &'static str },
    /// 2/1: data = the version we support, 2 octets.
    #[error("open: unsupported version number {version}")]
    UnsupportedVersion { version: u8 },
    /// 2/2 (raised by the session, or for AS 0 per RFC 7607).
    #[error("open: bad peer as {asn}")]
    BadPeerAs { asn: u32 },
    /// 2/3 (RFC 6286 section 2.2: zero, or equal to ours on an iBGP session).
    #[error("open: bad bgp identifier {id}")]
    BadBgpId { id: Ipv4Addr },
    /// 2/4: an optional parameter other than capabilities (RFC 5492 section 4).
    #[error("open: unsupported optional parameter {param_type}")]
    UnsupportedOptionalParameter { param_type: u8 },
    /// 2/6: hold time 1 or 2 (RFC 4271 section 6.2), or below local policy.
    #[error("open: unacceptable hold time {hold_time}")]
    UnacceptableHoldTime { hold_time: u16 },
    /// 2/7 (RFC 5492 section 3): data = the capabilities (code, length, value) refused.
    #[error("open: unsupported capability")]
    UnsupportedCapability { capabilities: Bytes },
    /// 3/x: a fatal UPDATE fault (its [`UpdateFault::reaction`] is a session reset).
    #[error("update: {0}")]
    Update(UpdateFault),
    /// 7/1 (RFC 7313 section 5): data = the complete ROUTE-REFRESH message.
    #[error("route-refresh: invalid message length {}", message.len())]
    RouteRefreshLength { message: Bytes },
}

/// The only version of BGP this codec speaks (RFC 4271 section 4.2).
pub const BGP_VERSION: u8 = 4;

impl DecodeError {
    /// The NOTIFICATION to send for this error: one exhaustive mapping to (code,
    /// subcode, data) per RFC 4271 sections 4.5 and 6, RFC 5492 and RFC 7313.
    pub fn notification(&self) -> Notification {
        let header = ErrorCode::MessageHeader.code();
        let open = ErrorCode::OpenMessage.code();
        match self {
            DecodeError::ConnectionNotSynchronized => Notification::new(
                header,
                HeaderError::ConnectionNotSynchronized.code(),
                Bytes::new(),
            ),
            DecodeError::BadMessageLength { length } => Notification::new(
                header,
                HeaderError::BadMessageLength.code(),
                Bytes::copy_from_slice(&length.to_be_bytes()),
            ),
            DecodeError::BadMessageType { msg_type } => Notification::new(
                header,
                HeaderError::BadMessageType.code(),
                Bytes::copy_from_slice(&[*msg_type]),
            ),
            DecodeError::MalformedOpen { .. } => {
                Notification::new(open, OpenError::Unspecific.code(), Bytes::new())
            }
            // RFC 4271 section 6.2: the largest locally supported version below the
            // peer's bid, else the smallest we support; we support only 4.
            DecodeError::UnsupportedVersion { .. } => Notification::new(
                open,
                OpenError::UnsupportedVersionNumber.code(),
                Bytes::copy_from_slice(&u16::from(BGP_VERSION).to_be_bytes()),
            ),
            DecodeError::BadPeerAs { .. } => {
                Notification::new(open, OpenError::BadPeerAs.code(), Bytes::new())
            }
            DecodeError::BadBgpId { .. } => {
                Notification::new(open, OpenError::BadBgpIdentifier.code(), Bytes::new())
            }
            DecodeError::UnsupportedOptionalParameter { .. } => Notification::new(
                open,
                OpenError::UnsupportedOptionalParameter.code(),
                Bytes::new(),
            ),
            DecodeError::UnacceptableHoldTime { .. } => {
                Notification::new(open, OpenError::UnacceptableHoldTime.code(), Bytes::new())
            }
            DecodeError::UnsupportedCapability { capabilities } => Notification::new(
                open,
                OpenError::UnsupportedCapability.code(),
                capabilities.clone(),
            ),
            DecodeError::Update(fault) => fault.notification(),
            DecodeError::RouteRefreshLength { message } => Notification::new(
                ErrorCode::RouteRefreshMessage.code(),
                RouteRefreshError::InvalidMessageLength.code(),
                message.clone(),
            ),
        }
    }

    /// The interpreted (code, subcode) of [`DecodeError::notification`].
    pub fn kind(&self) -> ErrorKind {
        self.notification().kind()
    }
}

/// A message that cannot be put on the wire as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The message would exceed the negotiated maximum (RFC 4271 section 4.1, RFC 8654).
    #[error("message of {len} octets exceeds the maximum of {max}")]
    MessageTooLong { len: usize, max: usize },
    /// A length field cannot hold the value (attribute > 65535, capability > 255...).
    #[error("{field} of {len} octets does not fit its length field")]
    FieldTooLong { field: &'static str, len: usize },
    /// An AS_PATH segment must hold 1 to 255 AS numbers (RFC 4271 section 4.3; an empty
    /// segment is malformed per RFC 7606 section 7.2).
    #[error("as_path segment with {len} as numbers (must be 1..=255)")]
    AsPathSegment { len: usize },
    /// ADD-PATH is in force for the family but the prefix has no path identifier, or
    /// the reverse (RFC 7911 section 3).
    #[error("prefix {prefix}: path identifier {}", if *missing { "missing with add-path" } else { "present without add-path" })]
    PathId { prefix: ipnet::IpNet, missing: bool },
    /// A prefix of the wrong family for the field it is placed in.
    #[error("prefix {prefix} does not belong to {afi_safi}")]
    WrongFamily {
        prefix: ipnet::IpNet,
        afi_safi: super::types::AfiSafi,
    },
    /// A value outside what its field can carry.
    #[error("{field}: value {value} out of range")]
    OutOfRange { field: &'static str, value: u64 },
    /// The value has no encoding under this context (e.g. an AS_PATH with 4-octet AS
    /// numbers and confederation segments after the first plain segment, for a 2-octet
    /// AS session: AS4_PATH cannot say where those segments were, RFC 6793 section 3).
    #[error("cannot be encoded for this session: {0}")]
    Unrepresentable(&'static str),
    /// The UPDATE builder's input is inconsistent (e.g. MP_REACH in the attribute set,
    /// or IPv4 prefixes with no NEXT_HOP).
    #[error("update builder: {0}")]
    Builder(&'static str),
    /// The encoder wrote a different number of octets than it computed and made room
    /// for: a bug in this codec, reported instead of sending a corrupt message.
    #[error("encoder computed {computed} octets but wrote {written:?}")]
    Sizing {
        computed: usize,
        written: Option<usize>,
    },
}

/// NOTIFICATION error codes (RFC 4271 section 4.5, RFC 7313; IANA "BGP Error
/// (Notification) Codes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    MessageHeader,
    OpenMessage,
    UpdateMessage,
    HoldTimerExpired,
    FiniteStateMachine,
    Cease,
    RouteRefreshMessage,
    /// Any other code.
    Unassigned(u8),
}

impl ErrorCode {
    pub fn code(self) -> u8 {
        match self {
            ErrorCode::MessageHeader => 1,
            ErrorCode::OpenMessage => 2,
            ErrorCode::UpdateMessage => 3,
            ErrorCode::HoldTimerExpired => 4,
            ErrorCode::FiniteStateMachine => 5,
            ErrorCode::Cease => 6,
            ErrorCode::RouteRefreshMessage => 7,
            ErrorCode::Unassigned(c) => c,
        }
    }

    pub fn from_code(code: u8) -> ErrorCode {
        match code {
            1 => ErrorCode::MessageHeader,
            2 => ErrorCode::OpenMessage,
            3 => ErrorCode::UpdateMessage,
            4 => ErrorCode::HoldTimerExpired,
            5 => ErrorCode::FiniteStateMachine,
            6 => ErrorCode::Cease,
            7 => ErrorCode::RouteRefreshMessage,
            c => ErrorCode::Unassigned(c),
        }
    }
}

/// Declares a subcode enum with its numbers and a catch-all, so that every received
/// subcode has a value and `from_code(x).code() == x`.
macro_rules! subcodes {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $num:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A subcode this codec does not know.
            Unassigned(u8),
        }

        impl $name {
            pub fn code(self) -> u8 {
                match self {
                    $($name::$variant => $num,)*
                    $name::Unassigned(c) => c,
                }
            }

            pub fn from_code(code: u8) -> $name {
                match code {
                    $($num => $name::$variant,)*
                    c => $name::Unassigned(c),
                }
            }
        }
    };
}

subcodes! {
    /// Message Header Error subcodes (RFC 4271 section 6.1).
    HeaderError {
        Unspecific = 0,
        ConnectionNotSynchronized = 1,
        BadMessageLength = 2,
        BadMessageType = 3,
    }
}

subcodes! {
    /// OPEN Message Error subcodes (RFC 4271 section 6.2, RFC 5492, RFC 9234; 5 and 8-10
    /// are deprecated).
    OpenError {
        Unspecific = 0,
        UnsupportedVersionNumber = 1,
        BadPeerAs = 2,
        BadBgpIdentifier = 3,
        UnsupportedOptionalParameter = 4,
        UnacceptableHoldTime = 6,
        UnsupportedCapability = 7,
        RoleMismatch = 11,
    }
}

subcodes! {
    /// UPDATE Message Error subcodes (RFC 4271 section 6.3; 7 is deprecated).
    UpdateErrorCode {
        Unspecific = 0,
        MalformedAttributeList = 1,
        UnrecognizedWellKnown = 2,
        MissingWellKnown = 3,
        AttributeFlags = 4,
        AttributeLength = 5,
        InvalidOrigin = 6,
        InvalidNextHop = 8,
        OptionalAttribute = 9,
        InvalidNetworkField = 10,
        MalformedAsPath = 11,
    }
}

subcodes! {
    /// Finite State Machine Error subcodes (RFC 6608).
    FsmError {
        Unspecified = 0,
        UnexpectedInOpenSent = 1,
        UnexpectedInOpenConfirm = 2,
        UnexpectedInEstablished = 3,
    }
}

subcodes! {
    /// Cease subcodes (RFC 4486, RFC 8538 hard reset, RFC 9384 BFD down).
    CeaseSubcode {
        Unspecific = 0,
        MaximumPrefixesReached = 1,
        AdministrativeShutdown = 2,
        PeerDeconfigured = 3,
        AdministrativeReset = 4,
        ConnectionRejected = 5,
        OtherConfigurationChange = 6,
        ConnectionCollisionResolution = 7,
        OutOfResources = 8,
        HardReset = 9,
        BfdDown = 10,
    }
}

subcodes! {
    /// ROUTE-REFRESH Message Error subcodes (RFC 7313 section 5).
    RouteRefreshError {
        Reserved = 0,
        InvalidMessageLength = 1,
    }
}

/// A NOTIFICATION's (code, subcode) with meaning attached (see `Notification::kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    MessageHeader(HeaderError),
    Open(OpenError),
    Update(UpdateErrorCode),
    /// Code 4; the subcode is unused (normally 0) and kept.
    HoldTimerExpired(u8),
    Fsm(FsmError),
    Cease(CeaseSubcode),
    RouteRefresh(RouteRefreshError),
    /// An error code outside the registry.
    Unknown {
        code: u8,
        subcode: u8,
    },
}

impl ErrorKind {
    pub fn from_codes(code: u8, subcode: u8) -> ErrorKind {
        match ErrorCode::from_code(code) {
            ErrorCode::MessageHeader => ErrorKind::MessageHeader(HeaderError::from_code(subcode)),
            ErrorCode::OpenMessage => ErrorKind::Open(OpenError::from_code(subcode)),
            ErrorCode::UpdateMessage => ErrorKind::Update(UpdateErrorCode::from_code(subcode)),
            ErrorCode::HoldTimerExpired => ErrorKind::HoldTimerExpired(subcode),
            ErrorCode::FiniteStateMachine => ErrorKind::Fsm(FsmError::from_code(subcode)),
            ErrorCode::Cease => ErrorKind::Cease(CeaseSubcode::from_code(subcode)),
            ErrorCode::RouteRefreshMessage => {
                ErrorKind::RouteRefresh(RouteRefreshError::from_code(subcode))
            }
            ErrorCode::Unassigned(code) => ErrorKind::Unknown { code, subcode },
        }
    }

    /// The (code, subcode) pair on the wire.
    pub fn codes(self) -> (u8, u8) {
        match self {
            ErrorKind::MessageHeader(s) => (1, s.code()),
            ErrorKind::Open(s) => (2, s.code()),
            ErrorKind::Update(s) => (3, s.code()),
            ErrorKind::HoldTimerExpired(s) => (4, s),
            ErrorKind::Fsm(s) => (5, s.code()),
            ErrorKind::Cease(s) => (6, s.code()),
            ErrorKind::RouteRefresh(s) => (7, s.code()),
            ErrorKind::Unknown { code, subcode } => (code, subcode),
        }
    }
}

impl ErrorKind {
    /// A lowercase human name for logs and `status` output, from the registry's
    /// descriptions; a subcode the registry does not name gives the code's name alone.
    pub fn description(self) -> &'static str {
        match self {
            ErrorKind::MessageHeader(s) => match s {
                HeaderError::ConnectionNotSynchronized => {
                    "message header error: connection not synchronized"
                }
                HeaderError::BadMessageLength => "message header error: bad message length",
                HeaderError::BadMessageType => "message header error: bad message type",
                HeaderError::Unspecific | HeaderError::Unassigned(_) => "message header error",
            },
            ErrorKind::Open(s) => match s {
                OpenError::UnsupportedVersionNumber => {
                    "open message error: unsupported version number"
                }
                OpenError::BadPeerAs => "open message error: bad peer as",
                OpenError::BadBgpIdentifier => "open message error: bad bgp identifier",
                OpenError::UnsupportedOptionalParameter => {
                    "open message error: unsupported optional parameter"
                }
                OpenError::UnacceptableHoldTime => "open message error: unacceptable hold time",
                OpenError::UnsupportedCapability => "open message error: unsupported capability",
                OpenError::RoleMismatch => "open message error: role mismatch",
                OpenError::Unspecific | OpenError::Unassigned(_) => "open message error",
            },
            ErrorKind::Update(s) => match s {
                UpdateErrorCode::MalformedAttributeList => {
                    "update message error: malformed attribute list"
                }
                UpdateErrorCode::UnrecognizedWellKnown => {
                    "update message error: unrecognized well-known attribute"
                }
                UpdateErrorCode::MissingWellKnown => {
                    "update message error: missing well-known attribute"
                }
                UpdateErrorCode::AttributeFlags => "update message error: attribute flags error",
                UpdateErrorCode::AttributeLength => "update message error: attribute length error",
                UpdateErrorCode::InvalidOrigin => "update message error: invalid origin attribute",
                UpdateErrorCode::InvalidNextHop => {
                    "update message error: invalid next_hop attribute"
                }
                UpdateErrorCode::OptionalAttribute => {
                    "update message error: optional attribute error"
                }
                UpdateErrorCode::InvalidNetworkField => {
                    "update message error: invalid network field"
                }
                UpdateErrorCode::MalformedAsPath => "update message error: malformed as_path",
                UpdateErrorCode::Unspecific | UpdateErrorCode::Unassigned(_) => {
                    "update message error"
                }
            },
            ErrorKind::HoldTimerExpired(_) => "hold timer expired",
            ErrorKind::Fsm(s) => match s {
                FsmError::UnexpectedInOpenSent => "fsm error: unexpected message in opensent",
                FsmError::UnexpectedInOpenConfirm => "fsm error: unexpected message in openconfirm",
                FsmError::UnexpectedInEstablished => "fsm error: unexpected message in established",
                FsmError::Unspecified | FsmError::Unassigned(_) => "fsm error",
            },
            ErrorKind::Cease(s) => match s {
                CeaseSubcode::MaximumPrefixesReached => "cease: maximum number of prefixes reached",
                CeaseSubcode::AdministrativeShutdown => "cease: administrative shutdown",
                CeaseSubcode::PeerDeconfigured => "cease: peer de-configured",
                CeaseSubcode::AdministrativeReset => "cease: administrative reset",
                CeaseSubcode::ConnectionRejected => "cease: connection rejected",
                CeaseSubcode::OtherConfigurationChange => "cease: other configuration change",
                CeaseSubcode::ConnectionCollisionResolution => {
                    "cease: connection collision resolution"
                }
                CeaseSubcode::OutOfResources => "cease: out of resources",
                CeaseSubcode::HardReset => "cease: hard reset",
                CeaseSubcode::BfdDown => "cease: bfd down",
                CeaseSubcode::Unspecific | CeaseSubcode::Unassigned(_) => "cease",
            },
            ErrorKind::RouteRefresh(s) => match s {
                RouteRefreshError::InvalidMessageLength => {
                    "route-refresh message error: invalid message length"
                }
                RouteRefreshError::Reserved | RouteRefreshError::Unassigned(_) => {
                    "route-refresh message error"
                }
            },
            ErrorKind::Unknown { code: 8, .. } => "send hold timer expired",
            ErrorKind::Unknown { .. } => "unknown error code",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (code, subcode) = self.codes();
        match self {
            ErrorKind::MessageHeader(s) => write!(f, "message header error {s:?}")?,
            ErrorKind::Open(s) => write!(f, "open message error {s:?}")?,
            ErrorKind::Update(s) => write!(f, "update message error {s:?}")?,
            ErrorKind::HoldTimerExpired(_) => f.write_str("hold timer expired")?,
            ErrorKind::Fsm(s) => write!(f, "finite state machine error {s:?}")?,
            ErrorKind::Cease(s) => write!(f, "cease {s:?}")?,
            ErrorKind::RouteRefresh(s) => write!(f, "route-refresh message error {s:?}")?,
            ErrorKind::Unknown { .. } => f.write_str("unknown error")?,
        }
        write!(f, " ({code}/{subcode})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr() -> Bytes {
        Bytes::from_static(&[0x40, 0x01, 0x01, 0x07])
    }

    #[test]
    fn header_errors_carry_rfc4271_data() {
        let n = DecodeError::BadMessageLength { length: 0x1234 }.notification();
        assert_eq!((n.code, n.subcode, &n.data[..]), (1, 2, &[0x12, 0x34][..]));
        let n = DecodeError::BadMessageType { msg_type: 0x09 }.notification();
        assert_eq!((n.code, n.subcode, &n.data[..]), (1, 3, &[0x09][..]));
        let n = DecodeError::ConnectionNotSynchronized.notification();
        assert_eq!((n.code, n.subcode, n.data.len()), (1, 1, 0));
    }

    #[test]
    fn unsupported_version_reports_version_four() {
        let n = DecodeError::UnsupportedVersion { version: 3 }.notification();
        assert_eq!((n.code, n.subcode, &n.data[..]), (2, 1, &[0x00, 0x04][..]));
    }

    #[test]
    fn open_errors_map_to_their_subcodes() {
        let cases = [
            (DecodeError::MalformedOpen { reason: "x" }, 0),
            (DecodeError::BadPeerAs { asn: 0 }, 2),
            (
                DecodeError::BadBgpId {
                    id: Ipv4Addr::UNSPECIFIED,
                },
                3,
            ),
            (
                DecodeError::UnsupportedOptionalParameter { param_type: 1 },
                4,
            ),
            (DecodeError::UnacceptableHoldTime { hold_time: 1 }, 6),
        ];
        for (e, sub) in cases {
            let n = e.notification();
            assert_eq!((n.code, n.subcode), (2, sub), "{e}");
        }
        let caps = Bytes::from_static(&[0x41, 0x04, 0x00, 0x00, 0xfd, 0xe8]);
        let n = DecodeError::UnsupportedCapability {
            capabilities: caps.clone(),
        }
        .notification();
        assert_eq!((n.code, n.subcode, n.data), (2, 7, caps));
    }

    #[test]
    fn route_refresh_length_carries_the_whole_message() {
        let msg = Bytes::from_static(&[0xff; 24]);
        let n = DecodeError::RouteRefreshLength {
            message: msg.clone(),
        }
        .notification();
        assert_eq!((n.code, n.subcode, n.data), (7, 1, msg));
    }

    #[test]
    fn rfc7606_reactions_per_attribute() {
        let m = |type_code, problem| UpdateFault::Malformed {
            type_code,
            problem,
            attribute: attr(),
        };
        for t in [1, 2, 3, 4, 5, 8, 9, 10, 16, 32] {
            assert_eq!(
                m(t, AttrProblem::Length).reaction(),
                Reaction::TreatAsWithdraw,
                "type {t}"
            );
        }
        for t in [6, 7, 17, 18] {
            assert_eq!(
                m(t, AttrProblem::Value).reaction(),
                Reaction::AttributeDiscard,
                "type {t}"
            );
        }
        for t in [14, 15] {
            match m(t, AttrProblem::Value).reaction() {
                Reaction::SessionReset(n) => {
                    assert_eq!((n.code, n.subcode, n.data), (3, 9, attr()))
                }
                r => panic!("type {t}: {r:?}"),
            }
        }
        assert_eq!(
            UpdateFault::AttributeOverrun.reaction(),
            Reaction::TreatAsWithdraw
        );
        assert_eq!(
            UpdateFault::MissingWellKnown { type_code: 1 }.reaction(),
            Reaction::TreatAsWithdraw
        );
        assert_eq!(
            UpdateFault::DuplicateAttribute { type_code: 8 }.reaction(),
            Reaction::AttributeDiscard
        );
        assert_eq!(
            UpdateFault::DuplicateMpAttribute { type_code: 14 }.reaction(),
            Reaction::SessionReset(Notification::new(3, 1, Bytes::new()))
        );
        assert_eq!(
            UpdateFault::InvalidNetworkField.reaction(),
            Reaction::SessionReset(Notification::new(3, 10, Bytes::new()))
        );
    }

    #[test]
    fn update_subcodes_follow_rfc4271_section_6_3() {
        let m = |type_code, problem| {
            UpdateFault::Malformed {
                type_code,
                problem,
                attribute: attr(),
            }
            .notification()
        };
        assert_eq!(m(1, AttrProblem::Value).subcode, 6);
        assert_eq!(m(2, AttrProblem::Value).subcode, 11);
        assert_eq!(m(3, AttrProblem::Value).subcode, 8);
        assert_eq!(m(3, AttrProblem::Length).subcode, 5);
        assert_eq!(m(5, AttrProblem::Flags).subcode, 4);
        assert_eq!(m(8, AttrProblem::Value).subcode, 9);
        assert_eq!(m(14, AttrProblem::Length).subcode, 9);
        assert_eq!(m(14, AttrProblem::Flags).subcode, 4);
        let n = UpdateFault::MissingWellKnown { type_code: 3 }.notification();
        assert_eq!((n.code, n.subcode, &n.data[..]), (3, 3, &[0x03][..]));
        let n = UpdateFault::UnrecognizedWellKnown {
            type_code: 99,
            attribute: attr(),
        }
        .notification();
        assert_eq!((n.code, n.subcode, n.data), (3, 2, attr()));
    }

    #[test]
    fn non_fatal_faults_become_update_errors() {
        let e = UpdateError::from_fault(UpdateFault::MissingWellKnown { type_code: 2 }).unwrap();
        assert_eq!(e.reaction_kind, NonFatal::TreatAsWithdraw);
        assert_eq!(e.attr_type, Some(2));
        assert!(UpdateError::from_fault(UpdateFault::FieldLengths).is_none());
    }

    #[test]
    fn subcodes_round_trip_every_value() {
        for v in 0..=255u8 {
            assert_eq!(HeaderError::from_code(v).code(), v);
            assert_eq!(OpenError::from_code(v).code(), v);
            assert_eq!(UpdateErrorCode::from_code(v).code(), v);
            assert_eq!(FsmError::from_code(v).code(), v);
            assert_eq!(CeaseSubcode::from_code(v).code(), v);
            assert_eq!(RouteRefreshError::from_code(v).code(), v);
            assert_eq!(ErrorCode::from_code(v).code(), v);
            assert_eq!(ErrorKind::from_codes(v, v).codes(), (v, v));
        }
        assert_eq!(CeaseSubcode::from_code(9), CeaseSubcode::HardReset);
        assert_eq!(CeaseSubcode::from_code(10), CeaseSubcode::BfdDown);
    }

    #[test]
    fn descriptions_name_code_and_subcode() {
        assert_eq!(
            ErrorKind::from_codes(6, 2).description(),
            "cease: administrative shutdown"
        );
        assert_eq!(
            ErrorKind::from_codes(5, 2).description(),
            "fsm error: unexpected message in openconfirm"
        );
        assert_eq!(
            ErrorKind::from_codes(3, 11).description(),
            "update message error: malformed as_path"
        );
        // A subcode outside the registry falls back to the code's name.
        assert_eq!(ErrorKind::from_codes(6, 99).description(), "cease");
        assert_eq!(
            ErrorKind::from_codes(42, 1).description(),
            "unknown error code"
        );
        assert_eq!(
            ErrorKind::from_codes(8, 0).description(),
            "send hold timer expired"
        );
    }
}
