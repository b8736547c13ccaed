//! The MetalLB-style bgp-config: the file users already have (Cilium 1.10-1.16's
//! ConfigMap `kube-system/bgp-config` key `config.yaml`, MetalLB <= 0.12's
//! `metallb-system/config` key `config`), plus the speaker's documented extensions.
//!
//! Pipeline: text -> [`yaml`] nodes (positions, YAML 1.1 scalars as yaml.v2 read
//! them) -> [`raw`] fields (unknown keys, shapes, types) -> [`validate`] -> [`Config`].
//! Every problem of a file is collected into one [`ConfigErrors`]; what is taken but
//! worth saying is in [`Config::warnings`]. [`state`] keeps the last good config in
//! force when a new one is bad or deleted. The `check` command that reports on files is
//! `commands::check`.
//!
//! Must not: do I/O beyond reading a file named by the caller, talk to the API server,
//! or touch sockets. `config/README.md` is the reference of every key.

pub mod duration;
mod error;
mod model;
mod raw;
pub mod selector;
pub mod state;
mod validate;
mod yaml;

use std::collections::{BTreeMap, BTreeSet};

pub use error::{ConfigError, ConfigErrorKind, ConfigErrors, Location};
pub use model::*;
pub use selector::LabelSelector;

use yaml::{Node, NodeKind};

/// The ConfigMap data key Cilium 1.10-1.16 read.
pub const CILIUM_KEY: &str = "config.yaml";
/// The ConfigMap data key MetalLB <= 0.12 read.
pub const METALLB_KEY: &str = "config";

/// Parses and validates a config file: either the raw config YAML or a whole ConfigMap
/// manifest (`kind: ConfigMap`, data key `config.yaml` or `config`; in a multi-document
/// manifest the one ConfigMap is used).
pub fn parse(text: &str) -> Result<Config, ConfigErrors> {
    let docs = yaml::parse_documents(text).map_err(ConfigErrors::single)?;
    let manifests: Vec<&Node> = docs.iter().filter(|d| is_manifest(d)).collect();
    if manifests.is_empty() {
        return match docs.as_slice() {
            [] => Ok(Config::default()),
            [doc] => from_node(doc),
            [_, second, ..] => Err(ConfigErrors::single(ConfigError::new(
                "",
                Some(second.at),
                ConfigErrorKind::Other(
                    "more than one YAML document: a raw config is a single document".into(),
                ),
            ))),
        };
    }
    let configmaps: Vec<&Node> = manifests
        .iter()
        .copied()
        .filter(|d| scalar_field(d, "kind") == Some("ConfigMap"))
        .collect();
    match configmaps.as_slice() {
        [cm] => from_configmap_node(cm),
        [] => {
            let kinds: Vec<String> = manifests
                .iter()
                .map(|d| format!("{:?}", scalar_field(d, "kind").unwrap_or("")))
                .collect();
            Err(ConfigErrors::single(ConfigError::new(
                "kind",
                Some(manifests[0].at),
                ConfigErrorKind::Other(format!(
                    "{} is not a ConfigMap: expected the raw config or a ConfigMap manifest",
                    kinds.join(", ")
                )),
            )))
        }
        [_, second, ..] => Err(ConfigErrors::single(ConfigError::new(
            "",
            Some(second.at),
            ConfigErrorKind::Other(
                "more than one ConfigMap in the file: check them one file each".into(),
            ),
        ))),
    }
}

/// Parses and validates the `data` of a watched ConfigMap: key `config.yaml` (Cilium)
/// or `config` (MetalLB), holding the raw config.
pub fn parse_configmap_data(data: &BTreeMap<String, String>) -> Result<Config, ConfigErrors> {
    let key = configmap_key(data.keys().map(String::as_str)).map_err(|m| {
        ConfigErrors::single(ConfigError::new("data", None, ConfigErrorKind::Other(m)))
    })?;
    parse_raw(data.get(key).map_or("", String::as_str))
}

/// Which data key holds the config, or why none does.
fn configmap_key<'a>(mut keys: impl Iterator<Item = &'a str> + Clone) -> Result<&'a str, String> {
    let cilium = keys.clone().find(|k| *k == CILIUM_KEY);
    let metallb = keys.clone().find(|k| *k == METALLB_KEY);
    match (cilium, metallb) {
        (Some(k), None) | (None, Some(k)) => Ok(k),
        (Some(_), Some(_)) => Err(format!(
            "has both {CILIUM_KEY:?} (Cilium) and {METALLB_KEY:?} (MetalLB) keys: keep only one"
        )),
        (None, None) => {
            let present: Vec<String> = keys.by_ref().map(|k| format!("{k:?}")).collect();
            let present = if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            };
            Err(format!(
                "has neither {CILIUM_KEY:?} (Cilium) nor {METALLB_KEY:?} (MetalLB) key (keys: {present})"
            ))
        }
    }
}

/// The raw config text, one document (or none: an empty config).
fn parse_raw(text: &str) -> Result<Config, ConfigErrors> {
    let docs = yaml::parse_documents(text).map_err(ConfigErrors::single)?;
    match docs.as_slice() {
        [] => Ok(Config::default()),
        [doc] => from_node(doc),
        [_, second, ..] => Err(ConfigErrors::single(ConfigError::new(
            "",
            Some(second.at),
            ConfigErrorKind::Other(
                "more than one YAML document: the config is a single document".into(),
            ),
        ))),
    }
}

fn from_node(doc: &Node) -> Result<Config, ConfigErrors> {
    let mut errors = Vec::new();
    let mut failed = BTreeSet::new();
    let raw = raw::read(doc, &mut errors, &mut failed);
    validate::validate(raw, errors, failed)
}

fn from_configmap_node(cm: &Node) -> Result<Config, ConfigErrors> {
    let fail = |path: &str, at, msg: String| {
        Err(ConfigErrors::single(ConfigError::new(
            path,
            Some(at),
            ConfigErrorKind::Other(msg),
        )))
    };
    let Some(data) = field(cm, "data") else {
        return fail(
            "data",
            cm.at,
            "is missing: the ConfigMap holds no config".into(),
        );
    };
    let NodeKind::Map(entries) = &data.kind else {
        return fail(
            "data",
            data.at,
            "must be a mapping of keys to strings".into(),
        );
    };
    let keys = entries.iter().filter_map(|(k, _)| match &k.kind {
        NodeKind::Scalar(s) => Some(s.text.as_str()),
        _ => None,
    });
    let key = match configmap_key(keys) {
        Ok(k) => k,
        Err(m) => return fail("data", data.at, m),
    };
    let Some(value) = field(data, key) else {
        return fail("data", data.at, format!("{key:?} is missing"));
    };
    let NodeKind::Scalar(text) = &value.kind else {
        return fail(
            &format!("data.{key}"),
            value.at,
            "must be a string (use `|` and indent the config)".into(),
        );
    };
    let mut result = parse_raw(&text.text);
    let (lines, indent) = (value.at.line - 1, value.at.column - 1);
    match &mut result {
        // A literal block's lines are the file's lines, indented by the block's
        // indentation: report positions in the file the user edits.
        Err(errors) if text.literal => errors.shift_lines(lines, indent),
        Err(errors) => errors.strip_locations(),
        Ok(config) => {
            for w in &mut config.warnings {
                if text.literal {
                    w.shift(lines, indent);
                } else {
                    w.location = None;
                }
            }
        }
    }
    result
}

fn is_manifest(doc: &Node) -> bool {
    field(doc, "kind").is_some() && field(doc, "apiVersion").is_some()
}

fn field<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    match &node.kind {
        NodeKind::Map(entries) => entries
            .iter()
            .find(|(k, _)| matches!(&k.kind, NodeKind::Scalar(s) if s.text == key))
            .map(|(_, v)| v),
        _ => None,
    }
}

fn scalar_field<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    match &field(node, key)?.kind {
        NodeKind::Scalar(s) => Some(s.text.as_str()),
        _ => None,
    }
}
