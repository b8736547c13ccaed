//! JSON rendering of decoded messages and of what the readers report, for the `decode`
//! command: one object per line, stable field names, keys in a fixed order (`type`
//! first), prefixes as strings ("10.0.0.0/8"), octets as lowercase hex.
//!
//! The wire types carry no serde derives on purpose; the mapping lives here, by hand,
//! so that the output format is decided in one place. No I/O here.

use crate::bgp::wire::{
    AddPathMode, AsPath, Capability, Message, MpNextHop, Nlri, Notification, Open, Origin,
    PathAttribute, RouteRefresh, RouteRefreshSubtype, SegmentType, Update, UpdateError,
};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use std::fmt::Write as _;

/// A JSON value whose objects keep their keys in insertion order.
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Number(u64),
    String(String),
    Array(Vec<Json>),
    Object(Object),
}

/// A JSON object with keys in insertion order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Object(Vec<(&'static str, Json)>);

impl Object {
    pub fn new() -> Self {
        Object(Vec::new())
    }

    pub fn with(mut self, key: &'static str, value: impl Into<Json>) -> Self {
        self.0.push((key, value.into()));
        self
    }

    pub fn push(&mut self, key: &'static str, value: impl Into<Json>) {
        self.0.push((key, value.into()));
    }

    /// Appends every field of `other`.
    pub fn extend(&mut self, other: Object) {
        self.0.extend(other.0);
    }

    pub fn into_fields(self) -> Vec<(&'static str, Json)> {
        self.0
    }

    pub fn get(&self, key: &str) -> Option<&Json> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// One line of output: the object serialized compactly.
    pub fn to_line(&self) -> String {
        // Serializing this type into a String cannot fail: every key is a string and
        // every value a plain JSON value.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl From<bool> for Json {
    fn from(v: bool) -> Self {
        Json::Bool(v)
    }
}
impl From<u8> for Json {
    fn from(v: u8) -> Self {
        Json::Number(v.into())
    }
}
impl From<u16> for Json {
    fn from(v: u16) -> Self {
        Json::Number(v.into())
    }
}
impl From<u32> for Json {
    fn from(v: u32) -> Self {
        Json::Number(v.into())
    }
}
impl From<u64> for Json {
    fn from(v: u64) -> Self {
        Json::Number(v)
    }
}
impl From<usize> for Json {
    fn from(v: usize) -> Self {
        Json::Number(v as u64)
    }
}
impl From<String> for Json {
    fn from(v: String) -> Self {
        Json::String(v)
    }
}
impl From<&str> for Json {
    fn from(v: &str) -> Self {
        Json::String(v.to_owned())
    }
}
impl From<Object> for Json {
    fn from(v: Object) -> Self {
        Json::Object(v)
    }
}
impl<T: Into<Json>> From<Vec<T>> for Json {
    fn from(v: Vec<T>) -> Self {
        Json::Array(v.into_iter().map(Into::into).collect())
    }
}
impl<T: Into<Json>> From<Option<T>> for Json {
    fn from(v: Option<T>) -> Self {
        v.map_or(Json::Null, Into::into)
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => s.serialize_u64(*n),
            Json::String(v) => s.serialize_str(v),
            Json::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Json::Object(o) => o.serialize(s),
        }
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// Lowercase hex of `bytes`, no separators.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing into a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The message type names used in the `type` field (RFC 4271 section 4.1, RFC 2918).
pub fn message_type_name(code: u8) -> Option<&'static str> {
    match code {
        1 => Some("OPEN"),
        2 => Some("UPDATE"),
        3 => Some("NOTIFICATION"),
        4 => Some("KEEPALIVE"),
        5 => Some("ROUTE_REFRESH"),
        _ => None,
    }
}

/// A decoded message: `type`, `length`, then the fields of its type.
pub fn message(msg: &Message, length: usize) -> Object {
    match msg {
        Message::Open(open) => open_fields(
            open,
            Object::new().with("type", "OPEN").with("length", length),
        ),
        Message::Update(update) => update_fields(
            update,
            Object::new().with("type", "UPDATE").with("length", length),
        ),
        Message::Notification(n) => notification_fields(
            n,
            Object::new()
                .with("type", "NOTIFICATION")
                .with("length", length),
        ),
        Message::Keepalive => Object::new()
            .with("type", "KEEPALIVE")
            .with("length", length),
        Message::RouteRefresh(rr) => route_refresh_fields(
            rr,
            Object::new()
                .with("type", "ROUTE_REFRESH")
                .with("length", length),
        ),
    }
}

fn open_fields(open: &Open, mut o: Object) -> Object {
    o.push("version", open.version);
    o.push("my_as", open.my_as);
    o.push("asn", open.asn());
    o.push("hold_time", open.hold_time);
    o.push("bgp_id", open.bgp_id.to_string());
    o.push(
        "capabilities",
        open.capabilities.iter().map(capability).collect::<Vec<_>>(),
    );
    let others: Vec<Json> = open
        .other_params
        .iter()
        .map(|(t, v)| {
            Object::new()
                .with("param_type", *t)
                .with("value", hex(v))
                .into()
        })
        .collect();
    o.push("other_params", others);
    o
}

fn afi_safi_fields(o: Object, afi_safi: crate::bgp::wire::AfiSafi) -> Object {
    o.with("afi", afi_safi.afi.0).with("safi", afi_safi.safi.0)
}

/// A capability (IANA "Capability Codes"): `code`, `name`, then its value.
pub fn capability(cap: &Capability) -> Json {
    let o = Object::new();
    match cap {
        Capability::Multiprotocol(af) => {
            afi_safi_fields(o.with("code", 1u8).with("name", "multiprotocol"), *af)
        }
        Capability::RouteRefresh => o.with("code", 2u8).with("name", "route_refresh"),
        Capability::ExtendedMessage => o.with("code", 6u8).with("name", "extended_message"),
        Capability::GracefulRestart(gr) => o
            .with("code", 64u8)
            .with("name", "graceful_restart")
            .with("restart_state", gr.restart_state)
            .with("notification", gr.notification)
            .with("restart_time", gr.restart_time)
            .with(
                "families",
                gr.families
                    .iter()
                    .map(|f| {
                        afi_safi_fields(Object::new(), f.afi_safi)
                            .with("forwarding_preserved", f.forwarding_preserved)
                    })
                    .collect::<Vec<_>>(),
            ),
        Capability::ExtendedNextHop(families) => {
            o.with("code", 5u8).with("name", "extended_next_hop").with(
                "families",
                families
                    .iter()
                    .map(|f| {
                        afi_safi_fields(Object::new(), f.afi_safi)
                            .with("next_hop_afi", f.next_hop_afi.0)
                    })
                    .collect::<Vec<_>>(),
            )
        }
        Capability::FourOctetAs(asn) => o
            .with("code", 65u8)
            .with("name", "four_octet_as")
            .with("asn", *asn),
        Capability::AddPath(families) => o.with("code", 69u8).with("name", "add_path").with(
            "families",
            families
                .iter()
                .map(|f| {
                    let mode = match f.send_receive {
                        AddPathMode::Receive => "receive",
                        AddPathMode::Send => "send",
                        AddPathMode::Both => "both",
                    };
                    afi_safi_fields(Object::new(), f.afi_safi).with("send_receive", mode)
                })
                .collect::<Vec<_>>(),
        ),
        Capability::EnhancedRouteRefresh => {
            o.with("code", 70u8).with("name", "enhanced_route_refresh")
        }
        Capability::Fqdn { hostname, domain } => o
            .with("code", 73u8)
            .with("name", "fqdn")
            .with("hostname", hostname.as_str())
            .with("domain", domain.as_str()),
        Capability::Unknown { code, value } => o
            .with("code", *code)
            .with("name", "unknown")
            .with("value", hex(value)),
    }
    .into()
}

fn update_fields(update: &Update, mut o: Object) -> Object {
    o.push(
        "withdrawn",
        update.withdrawn.iter().map(nlri).collect::<Vec<_>>(),
    );
    o.push(
        "attributes",
        update.attributes.iter().map(attribute).collect::<Vec<_>>(),
    );
    o.push("nlri", update.nlri.iter().map(nlri).collect::<Vec<_>>());
    o.push(
        "errors",
        update.errors.iter().map(update_error).collect::<Vec<_>>(),
    );
    o
}

/// A prefix as a string; with ADD-PATH in force, an object with its path identifier.
pub fn nlri(n: &Nlri) -> Json {
    match n.path_id {
        None => Json::String(n.prefix.to_string()),
        Some(id) => Object::new()
            .with("prefix", n.prefix.to_string())
            .with("path_id", id)
            .into(),
    }
}

/// An RFC 7606 error the UPDATE was decoded with.
pub fn update_error(e: &UpdateError) -> Json {
    let reaction = match e.reaction_kind {
        crate::bgp::wire::NonFatal::TreatAsWithdraw => "treat-as-withdraw",
        crate::bgp::wire::NonFatal::AttributeDiscard => "attribute-discard",
    };
    Object::new()
        .with("attr_type", e.attr_type)
        .with("reaction", reaction)
        .with("detail", e.detail.as_str())
        .into()
}

fn as_path(path: &AsPath) -> Json {
    path.segments
        .iter()
        .map(|s| {
            let kind = match s.kind {
                SegmentType::AsSet => "AS_SET",
                SegmentType::AsSequence => "AS_SEQUENCE",
                SegmentType::ConfedSequence => "AS_CONFED_SEQUENCE",
                SegmentType::ConfedSet => "AS_CONFED_SET",
            };
            Object::new()
                .with("type", kind)
                .with("asns", s.asns.clone())
        })
        .collect::<Vec<_>>()
        .into()
}

fn attr(name: &'static str, code: u8, value: impl Into<Json>) -> Json {
    Object::new()
        .with("type", name)
        .with("code", code)
        .with("value", value)
        .into()
}

/// A path attribute (IANA "BGP Path Attributes"): `type` name, `code`, `value`.
pub fn attribute(a: &PathAttribute) -> Json {
    match a {
        PathAttribute::Origin(origin) => attr(
            "ORIGIN",
            1,
            match origin {
                Origin::Igp => "IGP",
                Origin::Egp => "EGP",
                Origin::Incomplete => "INCOMPLETE",
            },
        ),
        PathAttribute::AsPath(path) => attr("AS_PATH", 2, as_path(path)),
        PathAttribute::NextHop(ip) => attr("NEXT_HOP", 3, ip.to_string()),
        PathAttribute::MultiExitDisc(v) => attr("MULTI_EXIT_DISC", 4, *v),
        PathAttribute::LocalPref(v) => attr("LOCAL_PREF", 5, *v),
        PathAttribute::AtomicAggregate => attr("ATOMIC_AGGREGATE", 6, Json::Null),
        PathAttribute::Aggregator(ag) => attr(
            "AGGREGATOR",
            7,
            Object::new()
                .with("asn", ag.asn)
                .with("address", ag.address.to_string()),
        ),
        PathAttribute::Communities(cs) => attr(
            "COMMUNITIES",
            8,
            cs.iter()
                .map(|c| format!("{}:{}", c >> 16, c & 0xffff))
                .collect::<Vec<_>>(),
        ),
        PathAttribute::OriginatorId(ip) => attr("ORIGINATOR_ID", 9, ip.to_string()),
        PathAttribute::ClusterList(ids) => attr(
            "CLUSTER_LIST",
            10,
            ids.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
        ),
        PathAttribute::MpReach(mp) => {
            let mut o = afi_safi_fields(Object::new(), mp.afi_safi);
            match &mp.next_hop {
                MpNextHop::V4(ip) => o.push("next_hop", ip.to_string()),
                MpNextHop::V6 { global, link_local } => {
                    o.push("next_hop", global.to_string());
                    if let Some(ll) = link_local {
                        o.push("next_hop_link_local", ll.to_string());
                    }
                }
                MpNextHop::Other(raw) => o.push("next_hop_hex", hex(raw)),
            }
            o.push("nlri", mp.nlri.iter().map(nlri).collect::<Vec<_>>());
            if let Some(raw) = &mp.raw_nlri {
                o.push("nlri_hex", hex(raw));
            }
            attr("MP_REACH_NLRI", 14, o)
        }
        PathAttribute::MpUnreach(mp) => {
            let mut o = afi_safi_fields(Object::new(), mp.afi_safi);
            o.push(
                "withdrawn",
                mp.withdrawn.iter().map(nlri).collect::<Vec<_>>(),
            );
            if let Some(raw) = &mp.raw_withdrawn {
                o.push("withdrawn_hex", hex(raw));
            }
            attr("MP_UNREACH_NLRI", 15, o)
        }
        PathAttribute::ExtendedCommunities(cs) => attr(
            "EXTENDED_COMMUNITIES",
            16,
            cs.iter().map(|c| hex(c)).collect::<Vec<_>>(),
        ),
        PathAttribute::As4Path(path) => attr("AS4_PATH", 17, as_path(path)),
        PathAttribute::As4Aggregator(ag) => attr(
            "AS4_AGGREGATOR",
            18,
            Object::new()
                .with("asn", ag.asn)
                .with("address", ag.address.to_string()),
        ),
        PathAttribute::LargeCommunities(cs) => attr(
            "LARGE_COMMUNITIES",
            32,
            cs.iter()
                .map(|c| format!("{}:{}:{}", c.global_admin, c.local_data1, c.local_data2))
                .collect::<Vec<_>>(),
        ),
        PathAttribute::Unknown(u) => Object::new()
            .with("type", "UNKNOWN")
            .with("code", u.type_code)
            .with("flags", u.flags)
            .with("value", hex(&u.value))
            .into(),
    }
}

/// The NOTIFICATION fields shared by a received NOTIFICATION and the one a malformed
/// message would cause: `code`, `subcode`, `name` (the IANA registry's meaning of the
/// pair, e.g. "cease AdministrativeShutdown (6/2)"), `data` (hex).
pub fn notification(n: &Notification) -> Object {
    Object::new()
        .with("code", n.code)
        .with("subcode", n.subcode)
        .with("name", n.kind().to_string())
        .with("data", hex(&n.data))
}

/// A received NOTIFICATION, plus the RFC 8203 / RFC 9003 shutdown communication when
/// it carries one.
fn notification_fields(n: &Notification, mut o: Object) -> Object {
    o.extend(notification(n));
    if let Some(text) = n.shutdown_message() {
        o.push("shutdown_message", text);
    }
    o
}

fn route_refresh_fields(rr: &RouteRefresh, o: Object) -> Object {
    let subtype: Json = match rr.subtype {
        RouteRefreshSubtype::Request => "request".into(),
        RouteRefreshSubtype::Borr => "borr".into(),
        RouteRefreshSubtype::Eorr => "eorr".into(),
        RouteRefreshSubtype::Reserved(v) => v.into(),
    };
    afi_safi_fields(o, rr.afi_safi).with("subtype", subtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bgp::wire::*;
    use bytes::Bytes;
    use serde_json::{json, Value};

    fn parse(o: &Object) -> Value {
        serde_json::from_str(&o.to_line()).unwrap()
    }

    #[test]
    fn keys_keep_insertion_order_and_escape() {
        let o = Object::new()
            .with("type", "X")
            .with("b", 1u8)
            .with("a", "q\"uote\n");
        assert_eq!(o.to_line(), r#"{"type":"X","b":1,"a":"q\"uote\n"}"#);
    }

    #[test]
    fn update_with_every_kind_of_field() {
        let update = Update {
            withdrawn: vec!["10.0.0.0/8".parse::<ipnet::IpNet>().unwrap().into()],
            attributes: vec![
                PathAttribute::Origin(Origin::Igp),
                PathAttribute::AsPath(AsPath {
                    segments: vec![
                        AsSegment {
                            kind: SegmentType::AsSequence,
                            asns: vec![65000, 4200000000],
                        },
                        AsSegment {
                            kind: SegmentType::AsSet,
                            asns: vec![1, 2],
                        },
                    ],
                }),
                PathAttribute::NextHop("192.0.2.1".parse().unwrap()),
                PathAttribute::Communities(vec![0xfde8_0064]),
                PathAttribute::LargeCommunities(vec![LargeCommunity {
                    global_admin: 4200000000,
                    local_data1: 1,
                    local_data2: 2,
                }]),
                PathAttribute::MpReach(Box::new(MpReach {
                    afi_safi: AfiSafi::IPV6_UNICAST,
                    next_hop: MpNextHop::V6 {
                        global: "2001:db8::1".parse().unwrap(),
                        link_local: Some("fe80::1".parse().unwrap()),
                    },
                    nlri: vec![Nlri {
                        path_id: Some(7),
                        prefix: "2001:db8:1::/48".parse().unwrap(),
                    }],
                    raw_nlri: None,
                })),
                PathAttribute::Unknown(Box::new(UnknownAttribute {
                    flags: 0xc0,
                    type_code: 99,
                    value: Bytes::from_static(&[0xde, 0xad]),
                })),
            ],
            nlri: vec!["192.0.2.0/24".parse::<ipnet::IpNet>().unwrap().into()],
            errors: vec![UpdateError::from_fault(UpdateFault::Malformed {
                type_code: 4,
                problem: AttrProblem::Length,
                attribute: Bytes::from_static(&[0x80, 0x04, 0x03, 0x00, 0x00, 0x00]),
            })
            .unwrap()],
        };
        let v = parse(&message(&Message::Update(update), 123));
        assert_eq!(
            v,
            json!({
                "type": "UPDATE", "length": 123,
                "withdrawn": ["10.0.0.0/8"],
                "attributes": [
                    {"type": "ORIGIN", "code": 1, "value": "IGP"},
                    {"type": "AS_PATH", "code": 2, "value": [
                        {"type": "AS_SEQUENCE", "asns": [65000, 4200000000u32]},
                        {"type": "AS_SET", "asns": [1, 2]}]},
                    {"type": "NEXT_HOP", "code": 3, "value": "192.0.2.1"},
                    {"type": "COMMUNITIES", "code": 8, "value": ["65000:100"]},
                    {"type": "LARGE_COMMUNITIES", "code": 32, "value": ["4200000000:1:2"]},
                    {"type": "MP_REACH_NLRI", "code": 14, "value": {
                        "afi": 2, "safi": 1, "next_hop": "2001:db8::1", "next_hop_link_local": "fe80::1",
                        "nlri": [{"prefix": "2001:db8:1::/48", "path_id": 7}]}},
                    {"type": "UNKNOWN", "code": 99, "flags": 192, "value": "dead"}
                ],
                "nlri": ["192.0.2.0/24"],
                "errors": [{"attr_type": 4, "reaction": "treat-as-withdraw", "detail": "malformed attribute 4 (Length)"}]
            })
        );
    }

    #[test]
    fn open_with_capabilities() {
        let open = Open {
            version: 4,
            my_as: AS_TRANS,
            hold_time: 90,
            bgp_id: "192.0.2.9".parse().unwrap(),
            capabilities: vec![
                Capability::Multiprotocol(AfiSafi::IPV4_UNICAST),
                Capability::FourOctetAs(4200000001),
                Capability::AddPath(vec![AddPathFamily {
                    afi_safi: AfiSafi::IPV6_UNICAST,
                    send_receive: AddPathMode::Both,
                }]),
                Capability::Unknown {
                    code: 128,
                    value: Bytes::new(),
                },
            ],
            other_params: vec![],
        };
        let v = parse(&message(&Message::Open(open), 61));
        assert_eq!(v["type"], "OPEN");
        assert_eq!(v["my_as"], 23456);
        assert_eq!(v["asn"], 4200000001u32);
        assert_eq!(v["bgp_id"], "192.0.2.9");
        assert_eq!(
            v["capabilities"][0],
            json!({"code": 1, "name": "multiprotocol", "afi": 1, "safi": 1})
        );
        assert_eq!(
            v["capabilities"][1],
            json!({"code": 65, "name": "four_octet_as", "asn": 4200000001u32})
        );
        assert_eq!(
            v["capabilities"][2]["families"][0],
            json!({"afi": 2, "safi": 1, "send_receive": "both"})
        );
        assert_eq!(
            v["capabilities"][3],
            json!({"code": 128, "name": "unknown", "value": ""})
        );
    }

    #[test]
    fn notification_keepalive_and_route_refresh() {
        let n = Notification {
            code: 6,
            subcode: 2,
            data: Bytes::from_static(&[0x03, b'b', b'y', b'e']),
        };
        // Cease / Administrative Shutdown with a 3-octet shutdown communication.
        assert_eq!(
            parse(&message(&Message::Notification(n), 25)),
            json!({
                "type": "NOTIFICATION", "length": 25, "code": 6, "subcode": 2,
                "name": "cease AdministrativeShutdown (6/2)", "data": "03627965", "shutdown_message": "bye"
            })
        );
        let n = Notification {
            code: 3,
            subcode: 11,
            data: Bytes::new(),
        };
        assert_eq!(
            parse(&message(&Message::Notification(n), 21))["name"],
            "update message error MalformedAsPath (3/11)"
        );
        assert_eq!(
            parse(&message(&Message::Keepalive, 19)),
            json!({"type": "KEEPALIVE", "length": 19})
        );
        let rr = RouteRefresh {
            afi_safi: AfiSafi::IPV6_UNICAST,
            subtype: RouteRefreshSubtype::Borr,
        };
        assert_eq!(
            parse(&message(&Message::RouteRefresh(rr), 23)),
            json!({"type": "ROUTE_REFRESH", "length": 23, "afi": 2, "safi": 1, "subtype": "borr"})
        );
    }

    #[test]
    fn hex_is_lowercase_without_separators() {
        assert_eq!(hex(&[0x00, 0xab, 0xff]), "00abff");
        assert_eq!(hex(&[]), "");
    }
}
