//! The config file as written: every key MetalLB 0.12 defined (and the speaker's
//! extensions), each value with its path and position, nothing interpreted yet.
//!
//! The walk over the YAML tree replaces serde's `deny_unknown_fields`: it keeps going
//! after a problem so that every unknown key (with a did-you-mean hint), duplicate key
//! and wrongly typed value of a file is reported at once.
//!
//! Scalars are read with yaml.v2's rules, as MetalLB read them: a string field takes
//! any scalar as written (`password: 0123` is `"0123"`), an integer field takes a plain
//! YAML 1.1 integer, a boolean field a plain YAML 1.1 boolean, and null means absent.
//! One rule for every optional string field (MetalLB's and the extensions'): `""`
//! means absent too. Required strings keep `""` so that validation says what is wrong.
//!
//! Owns: key names, shapes and scalar types. Must not: check ranges, references or
//! meaning (that is `validate`).

use std::collections::{BTreeMap, BTreeSet};

use super::error::{quote, suggest, ConfigError, ConfigErrorKind, Location};
use super::yaml::{Node, NodeKind};

pub(crate) const TOP_KEYS: &[&str] = &[
    "peers",
    "bgp-communities",
    "address-pools",
    "bfd-profiles",
    "speaker",
];

/// MetalLB 0.12's peer keys.
const METALLB_PEER_KEYS: &[&str] = &[
    "peer-address",
    "peer-asn",
    "my-asn",
    "peer-port",
    "hold-time",
    "keepalive-time",
    "router-id",
    "source-address",
    "password",
    "ebgp-multihop",
    "bfd-profile",
    "node-selectors",
];

/// The speaker's extensions, allowed per peer and in the top-level `speaker` block.
pub(crate) const EXTENSION_KEYS: &[&str] = &[
    "graceful-restart",
    "graceful-restart-time",
    "connect-retry-time",
    "origin",
    "pod-cidr-communities",
    "pod-cidr-local-pref",
    "max-prefix",
    "passive",
    "ttl-security",
    "pod-cidr-pools",
];

/// The keys of the top-level `speaker` block: every extension as a default, and the
/// switches of the route classes, which are the speaker's and not a session's.
pub(crate) const SPEAKER_KEYS: &[&str] = &[
    "graceful-restart",
    "graceful-restart-time",
    "connect-retry-time",
    "origin",
    "pod-cidr-communities",
    "pod-cidr-local-pref",
    "max-prefix",
    "passive",
    "ttl-security",
    "pod-cidr-pools",
    "announce-pod-cidrs",
    "announce-lb-ips",
];

/// Speaker extensions of a peer only (no speaker-wide default): a fixed next hop is right
/// for one node or one router, never as a default for every peer.
const PEER_ONLY_KEYS: &[&str] = &["password-secret", "next-hop-v4", "next-hop-v6"];

const SECRET_REF_KEYS: &[&str] = &["name", "key"];

/// The keys of one `pod-cidr-pools` entry.
const POD_CIDR_POOL_KEYS: &[&str] = &["communities"];

const SELECTOR_KEYS: &[&str] = &["match-labels", "match-expressions"];
const EXPRESSION_KEYS: &[&str] = &["key", "operator", "values"];
const POOL_KEYS: &[&str] = &[
    "name",
    "protocol",
    "addresses",
    "avoid-buggy-ips",
    "auto-assign",
    "bgp-advertisements",
];
const ADVERTISEMENT_KEYS: &[&str] = &[
    "aggregation-length",
    "aggregation-length-v6",
    "localpref",
    "communities",
];
const BFD_KEYS: &[&str] = &[
    "name",
    "receive-interval",
    "transmit-interval",
    "detect-multiplier",
    "echo-interval",
    "echo-mode",
    "passive-mode",
    "minimum-ttl",
];
const MAX_PREFIX_KEYS: &[&str] = &["limit", "action"];

/// A value with where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spanned<T> {
    pub value: T,
    pub path: String,
    pub at: Location,
}

pub(crate) type Text = Spanned<String>;
pub(crate) type Int = Spanned<i128>;
pub(crate) type Bool = Spanned<bool>;
pub(crate) type TextList = Spanned<Vec<Text>>;

#[derive(Debug, Default)]
pub(crate) struct RawConfig {
    pub peers: Vec<RawPeer>,
    pub communities: Vec<(Text, Text)>,
    pub pools: Vec<RawPool>,
    pub bfd_profiles: Vec<RawBfdProfile>,
    pub speaker: RawExtensions,
    /// `speaker.announce-pod-cidrs`.
    pub announce_pod_cidrs: Option<Bool>,
    /// `speaker.announce-lb-ips`.
    pub announce_lb_ips: Option<Bool>,
}

#[derive(Debug)]
pub(crate) struct RawPeer {
    /// Position in the file's `peers` list (entries that are not mappings count too).
    pub index: usize,
    pub path: String,
    pub at: Location,
    pub peer_address: Option<Text>,
    pub peer_asn: Option<Int>,
    pub my_asn: Option<Int>,
    pub peer_port: Option<Int>,
    pub hold_time: Option<Text>,
    pub keepalive_time: Option<Text>,
    pub router_id: Option<Text>,
    pub source_address: Option<Text>,
    pub password: Option<Text>,
    pub password_secret: Option<RawSecretRef>,
    pub ebgp_multihop: Option<Bool>,
    pub bfd_profile: Option<Text>,
    pub node_selectors: Vec<RawSelector>,
    pub next_hop_v4: Option<Text>,
    pub next_hop_v6: Option<Text>,
    pub ext: RawExtensions,
}

/// `password-secret`: `{name, key}`.
#[derive(Debug)]
pub(crate) struct RawSecretRef {
    pub path: String,
    pub at: Location,
    pub name: Option<Text>,
    pub key: Option<Text>,
}

/// The speaker's own settings; see `config/README.md`.
#[derive(Debug, Default)]
pub(crate) struct RawExtensions {
    pub graceful_restart: Option<Bool>,
    pub graceful_restart_time: Option<Text>,
    pub connect_retry_time: Option<Text>,
    pub origin: Option<Text>,
    pub pod_cidr_communities: Option<TextList>,
    pub pod_cidr_local_pref: Option<Int>,
    pub max_prefix: Option<RawMaxPrefix>,
    pub passive: Option<Bool>,
    pub ttl_security: Option<Bool>,
    /// `pod-cidr-pools`: present (even empty) when the key was written.
    pub pod_cidr_pools: Option<Spanned<Vec<RawPodCidrPool>>>,
}

/// One `pod-cidr-pools` entry: a CiliumPodIPPool name and what its routes carry.
#[derive(Debug)]
pub(crate) struct RawPodCidrPool {
    pub name: Text,
    pub communities: Option<TextList>,
}

#[derive(Debug)]
pub(crate) struct RawMaxPrefix {
    pub path: String,
    pub at: Location,
    pub limit: Option<Int>,
    pub action: Option<Text>,
}

#[derive(Debug)]
pub(crate) struct RawSelector {
    pub path: String,
    pub match_labels: Vec<(Text, Text)>,
    pub match_expressions: Vec<RawExpression>,
}

#[derive(Debug)]
pub(crate) struct RawExpression {
    pub path: String,
    pub at: Location,
    pub key: Option<Text>,
    pub operator: Option<Text>,
    pub values: Option<TextList>,
}

#[derive(Debug)]
pub(crate) struct RawPool {
    pub path: String,
    pub at: Location,
    pub name: Option<Text>,
    pub protocol: Option<Text>,
    pub addresses: Option<TextList>,
    pub avoid_buggy_ips: Option<Bool>,
    pub auto_assign: Option<Bool>,
    /// Present (even empty) when the key was written: a layer2 pool must not have it.
    pub bgp_advertisements: Option<Spanned<Vec<RawAdvertisement>>>,
}

#[derive(Debug)]
pub(crate) struct RawAdvertisement {
    pub path: String,
    pub at: Location,
    pub aggregation_length: Option<Int>,
    pub aggregation_length_v6: Option<Int>,
    pub localpref: Option<Int>,
    pub communities: Option<TextList>,
}

#[derive(Debug)]
pub(crate) struct RawBfdProfile {
    pub path: String,
    pub at: Location,
    pub name: Option<Text>,
    pub receive_interval: Option<Int>,
    pub transmit_interval: Option<Int>,
    pub detect_multiplier: Option<Int>,
    pub echo_interval: Option<Int>,
    pub echo_mode: Option<Bool>,
    pub passive_mode: Option<Bool>,
    pub minimum_ttl: Option<Int>,
}

/// Walks a config document into a [`RawConfig`], collecting every shape problem.
/// `failed` receives the path of every field that had an error, so that validation
/// does not also call it missing.
pub(crate) fn read(
    root: &Node,
    errors: &mut Vec<ConfigError>,
    failed: &mut BTreeSet<String>,
) -> RawConfig {
    let mut w = Walker { errors, failed };
    w.config(root)
}

struct Walker<'e> {
    errors: &'e mut Vec<ConfigError>,
    failed: &'e mut BTreeSet<String>,
}

/// The entries of one mapping, by key (first occurrence), with the mapping's path.
struct Fields<'n> {
    path: String,
    at: Location,
    map: BTreeMap<&'n str, &'n Node>,
}

impl<'n> Fields<'n> {
    fn get(&self, key: &str) -> (Option<&'n Node>, String) {
        (self.map.get(key).copied(), child(&self.path, key))
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

impl Walker<'_> {
    fn error(&mut self, path: String, at: Location, kind: ConfigErrorKind) {
        self.failed.insert(path.clone());
        self.errors.push(ConfigError::new(path, Some(at), kind));
    }

    fn wrong_type(&mut self, node: &Node, path: String, expected: &'static str) {
        let found = node.describe();
        self.error(
            path,
            node.at,
            ConfigErrorKind::WrongType { expected, found },
        );
    }

    /// A mapping with only `known` keys. Null is an empty mapping.
    fn mapping<'n>(
        &mut self,
        node: &'n Node,
        path: &str,
        known: &'static [&'static str],
    ) -> Option<Fields<'n>> {
        let entries = match &node.kind {
            NodeKind::Map(entries) => entries.as_slice(),
            NodeKind::Scalar(s) if s.is_null() => &[],
            _ => {
                self.wrong_type(node, path.to_string(), "a mapping");
                return None;
            }
        };
        let mut fields = Fields {
            path: path.to_string(),
            at: node.at,
            map: BTreeMap::new(),
        };
        let mut first_at: BTreeMap<&str, Location> = BTreeMap::new();
        for (k, v) in entries {
            let NodeKind::Scalar(key) = &k.kind else {
                self.wrong_type(k, path.to_string(), "a plain key");
                continue;
            };
            let key = key.text.as_str();
            if !known.contains(&key) {
                let suggestion = suggest(key, known);
                let expected = if suggestion.is_none() {
                    known.to_vec()
                } else {
                    Vec::new()
                };
                self.error(
                    path.to_string(),
                    k.at,
                    ConfigErrorKind::UnknownKey {
                        key: key.to_string(),
                        suggestion,
                        expected,
                    },
                );
                continue;
            }
            if let Some(first) = first_at.get(key) {
                self.error(
                    child(path, key),
                    k.at,
                    ConfigErrorKind::DuplicateKey {
                        key: key.to_string(),
                        first: *first,
                    },
                );
                continue;
            }
            first_at.insert(key, k.at);
            fields.map.insert(key, v);
        }
        Some(fields)
    }

    /// A sequence; null or absent is None.
    fn sequence<'n>(&mut self, node: Option<&'n Node>, path: &str) -> Option<&'n [Node]> {
        let node = node?;
        match &node.kind {
            NodeKind::Seq(items) => Some(items),
            NodeKind::Scalar(s) if s.is_null() => None,
            _ => {
                self.wrong_type(node, path.to_string(), "a list");
                None
            }
        }
    }

    /// Any scalar, as written (yaml.v2 reads `123` into a string field as "123").
    fn text(&mut self, (node, path): (Option<&Node>, String)) -> Option<Text> {
        let node = node?;
        match &node.kind {
            NodeKind::Scalar(s) if s.is_null() => None,
            NodeKind::Scalar(s) => Some(Spanned {
                value: s.text.clone(),
                path,
                at: node.at,
            }),
            _ => {
                self.wrong_type(node, path, "a single value");
                None
            }
        }
    }

    /// An optional string field: `""` means "not set", as for MetalLB, whose Go structs
    /// could not tell an empty string from an absent key (generated ConfigMaps, such as
    /// Equinix Metal's cloud controller's, write every optional field as `""`).
    fn optional_text(&mut self, field: (Option<&Node>, String)) -> Option<Text> {
        self.text(field).filter(|t| !t.value.is_empty())
    }

    fn int(&mut self, (node, path): (Option<&Node>, String)) -> Option<Int> {
        let node = node?;
        match &node.kind {
            NodeKind::Scalar(s) if s.is_null() => None,
            NodeKind::Scalar(s) => match s.as_int() {
                Some(v) => Some(Spanned {
                    value: v,
                    path,
                    at: node.at,
                }),
                None if !s.plain && Node::plain_would_be_int(&s.text) => {
                    self.wrong_type(node, path, "an integer (remove the quotes)");
                    None
                }
                None => {
                    self.wrong_type(node, path, "an integer");
                    None
                }
            },
            _ => {
                self.wrong_type(node, path, "an integer");
                None
            }
        }
    }

    fn boolean(&mut self, (node, path): (Option<&Node>, String)) -> Option<Bool> {
        let node = node?;
        match &node.kind {
            NodeKind::Scalar(s) if s.is_null() => None,
            NodeKind::Scalar(s) => match s.as_bool() {
                Some(v) => Some(Spanned {
                    value: v,
                    path,
                    at: node.at,
                }),
                None => {
                    self.wrong_type(node, path, "true or false");
                    None
                }
            },
            _ => {
                self.wrong_type(node, path, "true or false");
                None
            }
        }
    }

    /// A list of scalars; a single scalar is refused (MetalLB's []string would be too).
    fn text_list(&mut self, (node, path): (Option<&Node>, String)) -> Option<TextList> {
        let at = node?.at;
        let items = self.sequence(node, &path)?;
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if let Some(t) = self.text((Some(item), index(&path, i))) {
                out.push(t);
            } else if item.is_null() {
                // yaml.v2 reads a null list item into a string as "": keep it so that
                // validation rejects it with the field's own message.
                out.push(Spanned {
                    value: String::new(),
                    path: index(&path, i),
                    at: item.at,
                });
            }
        }
        Some(Spanned {
            value: out,
            path,
            at,
        })
    }

    /// A map of scalar to scalar (`bgp-communities`, `match-labels`). Null values are "".
    /// `value` says what each value must be, for the message about a value that is a
    /// list or a mapping (an unrendered template such as `{{ .Values.rack }}` is one).
    fn text_map(
        &mut self,
        (node, path): (Option<&Node>, String),
        value: &'static str,
    ) -> Vec<(Text, Text)> {
        let Some(node) = node else { return Vec::new() };
        let entries = match &node.kind {
            NodeKind::Map(entries) => entries,
            NodeKind::Scalar(s) if s.is_null() => return Vec::new(),
            _ => {
                self.wrong_type(node, path, "a mapping");
                return Vec::new();
            }
        };
        let mut out: Vec<(Text, Text)> = Vec::new();
        for (k, v) in entries {
            let NodeKind::Scalar(key) = &k.kind else {
                self.wrong_type(k, path.clone(), "a plain key");
                continue;
            };
            let value_path = child(&path, &key.text);
            if let Some((first, _)) = out.iter().find(|(seen, _)| seen.value == key.text) {
                let first = first.at;
                self.error(
                    value_path,
                    k.at,
                    ConfigErrorKind::DuplicateKey {
                        key: key.text.clone(),
                        first,
                    },
                );
                continue;
            }
            let value = match &v.kind {
                NodeKind::Scalar(s) if s.is_null() => String::new(),
                NodeKind::Scalar(s) => s.text.clone(),
                _ => {
                    let found = format!("{} {}", v.describe(), v.flow());
                    self.error(
                        value_path,
                        v.at,
                        ConfigErrorKind::WrongType {
                            expected: value,
                            found,
                        },
                    );
                    continue;
                }
            };
            out.push((
                Spanned {
                    value: key.text.clone(),
                    path: path.clone(),
                    at: k.at,
                },
                Spanned {
                    value,
                    path: value_path,
                    at: v.at,
                },
            ));
        }
        out
    }

    fn config(&mut self, root: &Node) -> RawConfig {
        let mut raw = RawConfig::default();
        let Some(f) = self.mapping(root, "", TOP_KEYS) else {
            return raw;
        };
        let (peers, path) = f.get("peers");
        for (i, node) in self
            .sequence(peers, &path)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            if let Some(p) = self.peer(node, i, index(&path, i)) {
                raw.peers.push(p);
            }
        }
        raw.communities = self.text_map(
            f.get("bgp-communities"),
            "a community (a single value such as \"65000:100\")",
        );
        let (pools, path) = f.get("address-pools");
        for (i, node) in self
            .sequence(pools, &path)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            if let Some(p) = self.pool(node, index(&path, i)) {
                raw.pools.push(p);
            }
        }
        let (profiles, path) = f.get("bfd-profiles");
        for (i, node) in self
            .sequence(profiles, &path)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            if let Some(p) = self.bfd_profile(node, index(&path, i)) {
                raw.bfd_profiles.push(p);
            }
        }
        if let (Some(node), path) = f.get("speaker") {
            if let Some(sf) = self.mapping(node, &path, SPEAKER_KEYS) {
                raw.speaker = self.extensions(&sf);
                raw.announce_pod_cidrs = self.boolean(sf.get("announce-pod-cidrs"));
                raw.announce_lb_ips = self.boolean(sf.get("announce-lb-ips"));
            }
        }
        raw
    }

    fn peer(&mut self, node: &Node, position: usize, path: String) -> Option<RawPeer> {
        const KEYS: &[&str] = &[
            "peer-address",
            "peer-asn",
            "my-asn",
            "peer-port",
            "hold-time",
            "keepalive-time",
            "router-id",
            "source-address",
            "password",
            "password-secret",
            "ebgp-multihop",
            "bfd-profile",
            "node-selectors",
            "graceful-restart",
            "graceful-restart-time",
            "connect-retry-time",
            "origin",
            "pod-cidr-communities",
            "pod-cidr-local-pref",
            "max-prefix",
            "passive",
            "ttl-security",
            "pod-cidr-pools",
            "next-hop-v4",
            "next-hop-v6",
        ];
        debug_assert_eq!(
            KEYS.len(),
            METALLB_PEER_KEYS.len() + EXTENSION_KEYS.len() + PEER_ONLY_KEYS.len()
        );
        let f = self.mapping(node, &path, KEYS)?;
        let (selectors, sel_path) = f.get("node-selectors");
        let mut node_selectors = Vec::new();
        for (i, s) in self
            .sequence(selectors, &sel_path)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            if let Some(sel) = self.selector(s, index(&sel_path, i)) {
                node_selectors.push(sel);
            }
        }
        Some(RawPeer {
            index: position,
            at: f.at,
            peer_address: self.text(f.get("peer-address")),
            peer_asn: self.int(f.get("peer-asn")),
            my_asn: self.int(f.get("my-asn")),
            peer_port: self.int(f.get("peer-port")),
            hold_time: self.optional_text(f.get("hold-time")),
            keepalive_time: self.optional_text(f.get("keepalive-time")),
            router_id: self.optional_text(f.get("router-id")),
            source_address: self.optional_text(f.get("source-address")),
            password: self.optional_text(f.get("password")),
            password_secret: self.secret_ref(f.get("password-secret")),
            ebgp_multihop: self.boolean(f.get("ebgp-multihop")),
            bfd_profile: self.optional_text(f.get("bfd-profile")),
            node_selectors,
            next_hop_v4: self.optional_text(f.get("next-hop-v4")),
            next_hop_v6: self.optional_text(f.get("next-hop-v6")),
            ext: self.extensions(&f),
            path,
        })
    }

    /// A `{name, key}` mapping; null or "" is absent (an empty string means "not set").
    fn secret_ref(&mut self, (node, path): (Option<&Node>, String)) -> Option<RawSecretRef> {
        let node = node?;
        if let NodeKind::Scalar(s) = &node.kind {
            if s.is_null() || s.text.is_empty() {
                return None;
            }
        }
        let f = self.mapping(node, &path, SECRET_REF_KEYS)?;
        Some(RawSecretRef {
            at: f.at,
            name: self.text(f.get("name")),
            key: self.text(f.get("key")),
            path,
        })
    }

    fn extensions(&mut self, f: &Fields<'_>) -> RawExtensions {
        let max_prefix = match f.get("max-prefix") {
            (Some(node), path) if !node.is_null() => self
                .mapping(node, &path, MAX_PREFIX_KEYS)
                .map(|mf| RawMaxPrefix {
                    at: mf.at,
                    limit: self.int(mf.get("limit")),
                    action: self.optional_text(mf.get("action")),
                    path,
                }),
            _ => None,
        };
        RawExtensions {
            graceful_restart: self.boolean(f.get("graceful-restart")),
            graceful_restart_time: self.optional_text(f.get("graceful-restart-time")),
            connect_retry_time: self.optional_text(f.get("connect-retry-time")),
            origin: self.optional_text(f.get("origin")),
            pod_cidr_communities: self.text_list(f.get("pod-cidr-communities")),
            pod_cidr_local_pref: self.int(f.get("pod-cidr-local-pref")),
            max_prefix,
            passive: self.boolean(f.get("passive")),
            ttl_security: self.boolean(f.get("ttl-security")),
            pod_cidr_pools: self.pod_cidr_pools(f.get("pod-cidr-pools")),
        }
    }

    /// `pod-cidr-pools`: a mapping from pool name to its settings (null: none).
    fn pod_cidr_pools(
        &mut self,
        (node, path): (Option<&Node>, String),
    ) -> Option<Spanned<Vec<RawPodCidrPool>>> {
        let node = node.filter(|n| !n.is_null())?;
        let NodeKind::Map(entries) = &node.kind else {
            self.wrong_type(node, path, "a mapping of pool names");
            return None;
        };
        let mut pools: Vec<RawPodCidrPool> = Vec::new();
        for (k, v) in entries {
            let NodeKind::Scalar(key) = &k.kind else {
                self.wrong_type(k, path.clone(), "a plain key");
                continue;
            };
            let entry_path = child(&path, &key.text);
            if let Some(first) = pools.iter().find(|p| p.name.value == key.text) {
                let first = first.name.at;
                self.error(
                    entry_path,
                    k.at,
                    ConfigErrorKind::DuplicateKey {
                        key: key.text.clone(),
                        first,
                    },
                );
                continue;
            }
            let Some(pf) = self.mapping(v, &entry_path, POD_CIDR_POOL_KEYS) else {
                continue;
            };
            pools.push(RawPodCidrPool {
                name: Spanned {
                    value: key.text.clone(),
                    path: entry_path,
                    at: k.at,
                },
                communities: self.text_list(pf.get("communities")),
            });
        }
        Some(Spanned {
            value: pools,
            path,
            at: node.at,
        })
    }

    fn selector(&mut self, node: &Node, path: String) -> Option<RawSelector> {
        let f = self.mapping(node, &path, SELECTOR_KEYS)?;
        let match_labels = self.text_map(
            f.get("match-labels"),
            "a label value (a single string such as \"rack-1\")",
        );
        let (exprs, exprs_path) = f.get("match-expressions");
        let mut match_expressions = Vec::new();
        for (i, e) in self
            .sequence(exprs, &exprs_path)
            .unwrap_or(&[])
            .iter()
            .enumerate()
        {
            let epath = index(&exprs_path, i);
            if let Some(ef) = self.mapping(e, &epath, EXPRESSION_KEYS) {
                match_expressions.push(RawExpression {
                    at: ef.at,
                    key: self.text(ef.get("key")),
                    operator: self.text(ef.get("operator")),
                    values: self.text_list(ef.get("values")),
                    path: epath,
                });
            }
        }
        Some(RawSelector {
            path,
            match_labels,
            match_expressions,
        })
    }

    fn pool(&mut self, node: &Node, path: String) -> Option<RawPool> {
        let f = self.mapping(node, &path, POOL_KEYS)?;
        let bgp_advertisements = match f.get("bgp-advertisements") {
            (Some(node), apath) if !node.is_null() => {
                let items = self.sequence(Some(node), &apath).unwrap_or(&[]);
                let mut ads = Vec::new();
                for (i, a) in items.iter().enumerate() {
                    let p = index(&apath, i);
                    if let Some(af) = self.mapping(a, &p, ADVERTISEMENT_KEYS) {
                        ads.push(RawAdvertisement {
                            path: p.clone(),
                            at: af.at,
                            aggregation_length: self.int(af.get("aggregation-length")),
                            aggregation_length_v6: self.int(af.get("aggregation-length-v6")),
                            localpref: self.int(af.get("localpref")),
                            communities: self.text_list(af.get("communities")),
                        });
                    }
                }
                Some(Spanned {
                    value: ads,
                    path: apath,
                    at: node.at,
                })
            }
            _ => None,
        };
        Some(RawPool {
            at: f.at,
            name: self.text(f.get("name")),
            protocol: self.text(f.get("protocol")),
            addresses: self.text_list(f.get("addresses")),
            avoid_buggy_ips: self.boolean(f.get("avoid-buggy-ips")),
            auto_assign: self.boolean(f.get("auto-assign")),
            bgp_advertisements,
            path,
        })
    }

    fn bfd_profile(&mut self, node: &Node, path: String) -> Option<RawBfdProfile> {
        let f = self.mapping(node, &path, BFD_KEYS)?;
        Some(RawBfdProfile {
            at: f.at,
            name: self.text(f.get("name")),
            receive_interval: self.int(f.get("receive-interval")),
            transmit_interval: self.int(f.get("transmit-interval")),
            detect_multiplier: self.int(f.get("detect-multiplier")),
            echo_interval: self.int(f.get("echo-interval")),
            echo_mode: self.boolean(f.get("echo-mode")),
            passive_mode: self.boolean(f.get("passive-mode")),
            minimum_ttl: self.int(f.get("minimum-ttl")),
            path,
        })
    }
}

impl Node {
    /// Whether `text`, unquoted, would have been an integer: for the "remove the
    /// quotes" hint.
    fn plain_would_be_int(text: &str) -> bool {
        super::yaml::Scalar {
            text: text.to_string(),
            plain: true,
            literal: false,
        }
        .as_int()
        .is_some()
    }
}

/// Shows a scalar value in a message: quoted, as the errors show strings.
pub(crate) fn shown(t: &Text) -> String {
    quote(&t.value)
}
