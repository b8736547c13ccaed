//! Cluster-state text -> objects -> [`ClusterState`], without I/O.
//!
//! Accepts what `kubectl get nodes,ciliumnodes -o yaml` (or `-o json`) prints and what a
//! person writes by hand, in any mix: single documents, multi-document YAML, `kind: List`
//! and typed lists (`NodeList`, whose items may omit `kind`). Of ConfigMaps only
//! `cilium-config` is read; other kinds are ignored, so a directory can also hold the
//! bgp-config ConfigMap or anything else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use serde::Deserialize;

use crate::sources::error::SourceError;
use crate::sources::model::ClusterState;
use crate::sources::objects::{self, CiliumNode};

/// The ConfigMap read as Cilium's configuration.
pub const CILIUM_CONFIG_NAME: &str = "cilium-config";

/// An object of a cluster-state file that the source reads.
#[derive(Clone, Debug)]
pub enum Object {
    Node(Box<Node>),
    CiliumNode(Box<CiliumNode>),
    /// The `cilium-config` ConfigMap.
    CiliumConfig(Box<ConfigMap>),
}

/// The objects of one file, in order.
pub fn parse_objects(path: &Path, text: &str) -> Result<Vec<Object>, SourceError> {
    let mut out = Vec::new();
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let document_no = i + 1;
        let err = |reason: String| SourceError::Parse {
            path: path.to_owned(),
            document: document_no,
            reason,
        };
        let value = serde_json::Value::deserialize(document).map_err(|e| err(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        collect(value, None, &mut out).map_err(err)?;
    }
    Ok(out)
}

/// Adds the objects of one document (recursing into lists) to `out`.
fn collect(
    value: serde_json::Value,
    implied_kind: Option<&str>,
    out: &mut Vec<Object>,
) -> Result<(), String> {
    let kind = match value.get("kind").and_then(|k| k.as_str()) {
        Some(kind) => kind.to_owned(),
        None => implied_kind
            .map(str::to_owned)
            .ok_or_else(|| "object without kind".to_owned())?,
    };
    let typed = |e: serde_json::Error| format!("{kind}: {e}");
    match kind.as_str() {
        "Node" => out.push(Object::Node(Box::new(
            serde_json::from_value(value).map_err(typed)?,
        ))),
        "CiliumNode" => out.push(Object::CiliumNode(Box::new(
            serde_json::from_value(value).map_err(typed)?,
        ))),
        "ConfigMap" => {
            let config_map: ConfigMap = serde_json::from_value(value).map_err(typed)?;
            if config_map.metadata.name.as_deref() == Some(CILIUM_CONFIG_NAME) {
                out.push(Object::CiliumConfig(Box::new(config_map)));
            }
        }
        list if list.ends_with("List") => {
            let item_kind = list.strip_suffix("List").filter(|k| !k.is_empty());
            let items = match value.get("items") {
                None | Some(serde_json::Value::Null) => return Ok(()),
                Some(serde_json::Value::Array(items)) => items.clone(),
                Some(_) => return Err(format!("{list}: items is not a list")),
            };
            for item in items {
                collect(item, item_kind, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The cluster state of a set of files (path, contents), in the order given.
///
/// All or nothing: one file that does not parse, one object that does not map, or an
/// object defined twice fails the whole state, so the caller keeps its last good one.
pub fn cluster_state(files: &[(PathBuf, String)]) -> Result<ClusterState, SourceError> {
    let mut state = ClusterState::default();
    let mut origin: BTreeMap<(&'static str, String), &Path> = BTreeMap::new();
    for (path, text) in files {
        let in_file = |error: SourceError| SourceError::InFile {
            path: path.clone(),
            error: Box::new(error),
        };
        for object in parse_objects(path, text)? {
            let (kind, name) = match object {
                Object::Node(node) => {
                    let (name, facts) = objects::node_facts(&node).map_err(in_file)?;
                    state.nodes.insert(name.clone(), facts);
                    ("Node", name)
                }
                Object::CiliumNode(node) => {
                    let (name, cidrs) = objects::cilium_node_cidrs(&node).map_err(in_file)?;
                    state.cilium_nodes.insert(name.clone(), cidrs);
                    ("CiliumNode", name)
                }
                Object::CiliumConfig(config_map) => {
                    state.cilium_config =
                        Some(objects::cilium_config(&config_map).map_err(in_file)?);
                    ("ConfigMap", CILIUM_CONFIG_NAME.to_owned())
                }
            };
            if let Some(first) = origin.insert((kind, name.clone()), path) {
                return Err(SourceError::Duplicate {
                    kind,
                    name,
                    first: first.to_owned(),
                    second: path.clone(),
                });
            }
        }
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipnet::IpNet;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn state(files: &[(&str, &str)]) -> Result<ClusterState, SourceError> {
        let files: Vec<(PathBuf, String)> = files
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_owned()))
            .collect();
        cluster_state(&files)
    }

    const KUBECTL_LIST: &str = r#"apiVersion: v1
items:
- apiVersion: v1
  kind: Node
  metadata:
    labels:
      kubernetes.io/hostname: master1
    name: master1
    uid: 0b6c5d1e-1111-4a8e-9d6e-000000000001
  spec:
    podCIDR: 10.5.112.0/24
    podCIDRs:
    - 10.5.112.0/24
  status:
    addresses:
    - address: 192.168.10.11
      type: InternalIP
    - address: master1
      type: Hostname
- apiVersion: cilium.io/v2
  kind: CiliumNode
  metadata:
    name: master1
  spec:
    ipam:
      podCIDRs:
      - 10.5.113.0/24
kind: List
metadata:
  resourceVersion: ""
"#;

    #[test]
    fn kubectl_list_output_is_read() {
        let state = state(&[("list.yaml", KUBECTL_LIST)]).unwrap();
        assert_eq!(
            state.nodes["master1"].node_cidrs,
            vec![net("10.5.112.0/24")]
        );
        assert_eq!(
            state.nodes["master1"].internal_ipv4,
            Some("192.168.10.11".parse().unwrap())
        );
        assert_eq!(state.cilium_nodes["master1"], vec![net("10.5.113.0/24")]);
        assert_eq!(state.cilium_config, None);
    }

    #[test]
    fn multi_document_file_with_config_and_ignored_kinds() {
        let text = "---\n\
            apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cilium-config, namespace: kube-system}\n\
            data: {ipam: kubernetes}\n\
            ---\n\
            apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bgp-config}\ndata: {config.yaml: 'x'}\n\
            ---\n\
            apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: other}\n\
            ---\n\
            # an empty document\n\
            ---\n\
            apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nspec: {podCIDRs: [10.1.0.0/24]}\n";
        let state = state(&[("all.yaml", text)]).unwrap();
        assert_eq!(
            state.cilium_config.as_ref().and_then(|c| c.ipam.as_deref()),
            Some("kubernetes")
        );
        assert_eq!(state.nodes.keys().collect::<Vec<_>>(), ["n1"]);
    }

    #[test]
    fn typed_json_list_items_without_kind() {
        let text = r#"{"kind": "NodeList", "apiVersion": "v1", "metadata": {},
            "items": [{"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.1.0.0/24"}}]}"#;
        let state = state(&[("nodes.json", text)]).unwrap();
        assert_eq!(state.nodes["n1"].node_cidrs, vec![net("10.1.0.0/24")]);
    }

    #[test]
    fn yaml_error_names_file_and_document() {
        let text = "kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: [b\n";
        let err = state(&[("bad.yaml", text)]).unwrap_err();
        assert!(
            matches!(&err, SourceError::Parse { path, document: 2, .. } if path == Path::new("bad.yaml")),
            "{err:?}"
        );
    }

    #[test]
    fn object_of_the_wrong_shape_is_a_parse_error() {
        let err = state(&[(
            "n.yaml",
            "kind: Node\nmetadata: {name: a}\nspec: {podCIDRs: 7}\n",
        )])
        .unwrap_err();
        assert!(
            matches!(&err, SourceError::Parse { reason, .. } if reason.starts_with("Node: ")),
            "{err:?}"
        );
        let err = state(&[("n.yaml", "metadata: {name: a}\n")]).unwrap_err();
        assert!(
            matches!(&err, SourceError::Parse { reason, .. } if reason == "object without kind"),
            "{err:?}"
        );
    }

    #[test]
    fn mapping_error_names_file_object_and_field() {
        let err = state(&[(
            "n.yaml",
            "kind: Node\nmetadata: {name: a}\nspec: {podCIDRs: [10.1.0.0/33]}\n",
        )])
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("n.yaml: Node a: spec.podCIDRs[0]: \"10.1.0.0/33\" is not a CIDR"),
            "{err}"
        );
    }

    #[test]
    fn an_object_defined_twice_is_an_error() {
        let node = "kind: Node\nmetadata: {name: a}\n";
        let err = state(&[("one.yaml", node), ("two.yaml", node)]).unwrap_err();
        assert_eq!(
            err,
            SourceError::Duplicate {
                kind: "Node",
                name: "a".into(),
                first: "one.yaml".into(),
                second: "two.yaml".into(),
            }
        );
        // A Node and a CiliumNode of the same name are not duplicates.
        let cilium = "kind: CiliumNode\nmetadata: {name: a}\n";
        assert!(state(&[("one.yaml", node), ("two.yaml", cilium)]).is_ok());
    }
}
