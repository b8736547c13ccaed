//! Cluster-state text -> objects -> [`ClusterState`], without I/O.
//!
//! Accepts what `kubectl get nodes,ciliumnodes -o yaml` (or `-o json`) prints and what a
//! person writes by hand, in any mix: single documents, multi-document YAML, `kind: List`
//! and typed lists (`NodeList`, whose items may omit `kind`). Of ConfigMaps only
//! `cilium-config` is read; CiliumPodIPPools (multi-pool IPAM's ranges) are read when
//! present, and when none is, their ranges are unknown; Services and EndpointSlices
//! (`kubectl get services,endpointslices -A -o yaml`) give the LoadBalancer facts
//! ([`ClusterFiles::lb`]); other kinds are ignored, so a directory can also hold the
//! bgp-config ConfigMap or anything else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde::de::DeserializeSeed;
use serde::Deserialize;

use crate::sources::error::SourceError;
use crate::sources::model::{ClusterState, Labels};
use crate::sources::objects::{self, CiliumNode, CiliumPodIpPool};
use crate::sources::service_objects::{self, Names};
use crate::sources::services::LbFacts;

/// The only EndpointSlice version read: v1beta1 (gone since Kubernetes 1.25) named an
/// endpoint's node in `topology`, which would read as an endpoint on no node.
pub const ENDPOINT_SLICE_API_VERSION: &str = "discovery.k8s.io/v1";

/// The ConfigMap read as Cilium's configuration.
pub const CILIUM_CONFIG_NAME: &str = "cilium-config";

/// An object of a cluster-state file that the source reads.
#[derive(Clone, Debug)]
pub enum Object {
    Node(Box<Node>),
    CiliumNode(Box<CiliumNode>),
    CiliumPodIpPool(Box<CiliumPodIpPool>),
    /// The `cilium-config` ConfigMap.
    CiliumConfig(Box<ConfigMap>),
    Service(Box<Service>),
    /// An EndpointSlice of `discovery.k8s.io/v1` (or naming no `apiVersion`).
    EndpointSlice(Box<EndpointSlice>),
}

/// Everything a cluster-state path says: the node facts and the LoadBalancer facts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterFiles {
    pub state: ClusterState,
    pub lb: LbFacts,
}

/// Hands `each` the objects of one file, in order, as they are read: a file of 50,000
/// Nodes is never held as 50,000 typed objects at once, only one document's tree.
///
/// A `.json` file (`kubectl get -o json`) is read as JSON (one or more values), which
/// streams; anything else as YAML, one document at a time.
pub fn for_each_object(
    path: &Path,
    text: &str,
    each: &mut dyn FnMut(Object) -> Result<(), SourceError>,
) -> Result<(), SourceError> {
    let err = |document: usize, reason: String| SourceError::Parse {
        path: path.to_owned(),
        document,
        reason,
    };
    let mut document = |no: usize, value: serde_json::Value| -> Result<(), SourceError> {
        if value.is_null() {
            return Ok(());
        }
        let mut failed = None;
        collect(value, None, &mut |object| {
            each(object).map_err(|e| failed = Some(e))
        })
        .map_err(|reason| failed.take().unwrap_or_else(|| err(no, reason)))
    };
    if path.extension().is_some_and(|e| e == "json") {
        // One document after another; a list's items one at a time (`JsonDocument`).
        let mut de = serde_json::Deserializer::from_str(text);
        let mut no = 0;
        loop {
            match de.end() {
                Ok(()) => break,
                Err(_) => no += 1,
            }
            let mut failed = None;
            let seed = JsonDocument {
                each: &mut |object| each(object).map_err(|e| failed = Some(e)),
            };
            if let Err(e) = seed.deserialize(&mut de) {
                return Err(failed.unwrap_or_else(|| err(no, e.to_string())));
            }
        }
    } else {
        for (i, yaml) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let value =
                serde_json::Value::deserialize(yaml).map_err(|e| err(i + 1, e.to_string()))?;
            document(i + 1, value)?;
        }
    }
    Ok(())
}

/// One JSON document, read without holding a list's items at once: the items of a
/// `kind: List` are mapped one by one as the parser reaches them (kubectl prints
/// `items` before `kind`, so an item is taken as soon as it names its own kind; one
/// that does not waits for the list's kind). Any other document is read whole.
struct JsonDocument<'a> {
    each: &'a mut dyn FnMut(Object) -> Result<(), ()>,
}

impl<'de> serde::de::DeserializeSeed<'de> for JsonDocument<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for JsonDocument<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Kubernetes object or list")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        use serde::de::Error;
        let mut rest = serde_json::Map::new();
        let mut waiting: Option<Vec<serde_json::Value>> = None;
        while let Some(key) = map.next_key::<String>()? {
            if key == "items" {
                let items = map.next_value_seed(JsonItems {
                    each: &mut *self.each,
                })?;
                waiting = Some(items);
            } else {
                rest.insert(key, map.next_value()?);
            }
        }
        let Some(waiting) = waiting else {
            return collect(serde_json::Value::Object(rest), None, self.each)
                .map_err(A::Error::custom);
        };
        let kind = rest
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default();
        let Some(list) = kind.strip_suffix("List") else {
            return Err(A::Error::custom(format!(
                "{kind:?} has items but is not a List"
            )));
        };
        let item_kind = Some(list).filter(|k| !k.is_empty());
        for item in waiting {
            collect(item, item_kind, self.each).map_err(A::Error::custom)?;
        }
        Ok(())
    }
}

/// A list's `items`: those that name their kind are mapped at once; the others are
/// returned to wait for the list's kind.
struct JsonItems<'a> {
    each: &'a mut dyn FnMut(Object) -> Result<(), ()>,
}

impl<'de> serde::de::DeserializeSeed<'de> for JsonItems<'_> {
    type Value = Vec<serde_json::Value>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for JsonItems<'_> {
    type Value = Vec<serde_json::Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of objects")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        use serde::de::Error;
        let mut waiting = Vec::new();
        while let Some(item) = seq.next_element::<serde_json::Value>()? {
            if item.get("kind").and_then(|k| k.as_str()).is_some() {
                collect(item, None, self.each).map_err(A::Error::custom)?;
            } else {
                waiting.push(item);
            }
        }
        Ok(waiting)
    }
}

/// Hands `each` the objects of one document (recursing into lists). An error from
/// `each` stops the walk; its text here is empty (the caller keeps the error itself).
fn collect(
    value: serde_json::Value,
    implied_kind: Option<&str>,
    each: &mut dyn FnMut(Object) -> Result<(), ()>,
) -> Result<(), String> {
    let kind = match value.get("kind").and_then(|k| k.as_str()) {
        Some(kind) => kind.to_owned(),
        None => implied_kind
            .map(str::to_owned)
            .ok_or_else(|| "object without kind".to_owned())?,
    };
    let typed = |e: serde_json::Error| format!("{kind}: {e}");
    let object = match kind.as_str() {
        "Node" => Object::Node(Box::new(serde_json::from_value(value).map_err(typed)?)),
        "CiliumNode" => Object::CiliumNode(Box::new(serde_json::from_value(value).map_err(typed)?)),
        "CiliumPodIPPool" => {
            Object::CiliumPodIpPool(Box::new(serde_json::from_value(value).map_err(typed)?))
        }
        "Service" => Object::Service(Box::new(serde_json::from_value(value).map_err(typed)?)),
        "EndpointSlice" => {
            let version = value.get("apiVersion").and_then(|v| v.as_str());
            if let Some(version) = version.filter(|v| *v != ENDPOINT_SLICE_API_VERSION) {
                return Err(format!(
                    "EndpointSlice: apiVersion {version:?} is not read, only {ENDPOINT_SLICE_API_VERSION:?}"
                ));
            }
            Object::EndpointSlice(Box::new(serde_json::from_value(value).map_err(typed)?))
        }
        "ConfigMap" => {
            let config_map: ConfigMap = serde_json::from_value(value).map_err(typed)?;
            if config_map.metadata.name.as_deref() != Some(CILIUM_CONFIG_NAME) {
                return Ok(());
            }
            Object::CiliumConfig(Box::new(config_map))
        }
        list if list.ends_with("List") => {
            let item_kind = list.strip_suffix("List").filter(|k| !k.is_empty());
            // Taken, not cloned: the items are the bulk of the document.
            let items = match value {
                serde_json::Value::Object(mut map) => map.remove("items"),
                _ => None,
            };
            let items = match items {
                None | Some(serde_json::Value::Null) => return Ok(()),
                Some(serde_json::Value::Array(items)) => items,
                Some(_) => return Err(format!("{list}: items is not a list")),
            };
            for item in items {
                collect(item, item_kind, each)?;
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    each(object).map_err(|()| String::new())
}

/// The cluster state of a set of files (path, contents), in the order given: the node
/// facts of [`cluster_files`].
pub fn cluster_state(files: &[(PathBuf, String)]) -> Result<ClusterState, SourceError> {
    cluster_files(files).map(|f| f.state)
}

/// The node facts and the LoadBalancer facts of a set of files (path, contents), in
/// the order given.
///
/// All or nothing: one file that does not parse, one object that does not map, or an
/// object defined twice (a Service or EndpointSlice: the same namespace and name) fails
/// the whole result, so the caller keeps its last good one.
pub fn cluster_files(files: &[(PathBuf, String)]) -> Result<ClusterFiles, SourceError> {
    let mut builder = FilesBuilder::default();
    for (path, text) in files {
        builder.add(path, text)?;
    }
    Ok(builder.finish())
}

/// [`cluster_files`] one file at a time, so a caller that reads the files can drop each
/// text once it is parsed: a directory of 100,000 endpoints is never all in memory as
/// text at once, only as facts.
#[derive(Default)]
pub struct FilesBuilder {
    files: ClusterFiles,
    names: Names,
    /// Where each object was defined first, to refuse a second definition.
    origin: BTreeMap<(&'static str, String), Arc<Path>>,
    /// Keep only this node's labels ([`FilesBuilder::labels_of`]); `None`: every node's.
    labels_of: Option<Arc<str>>,
    /// The one empty label map the other nodes share.
    no_labels: Labels,
}

/// Where [`FilesBuilder::add_split`] puts a file's Services and EndpointSlices.
pub enum LbSink<'a> {
    /// Into the builder's own facts, each checked against every file added so far.
    Builder,
    /// Into this file's own facts (checked only against the file itself: the caller,
    /// which keeps each file's facts apart, checks across files), naming endpoints'
    /// nodes through `names`.
    File {
        facts: &'a mut LbFacts,
        names: &'a mut Names,
    },
    /// Not read (their node-side neighbours still are).
    Skip,
}

impl LbSink<'_> {
    /// Where a LoadBalancer object goes: `None` when it is skipped.
    fn target<'s>(
        &'s mut self,
        own: &'s mut LbFacts,
        own_names: &'s mut Names,
    ) -> Option<(&'s mut LbFacts, &'s mut Names)> {
        match self {
            LbSink::Builder => Some((own, own_names)),
            LbSink::File { facts, names } => Some((&mut **facts, &mut **names)),
            LbSink::Skip => None,
        }
    }
}

/// Kinds that are node-side facts: everything but Services and EndpointSlices.
fn is_node_side(object: &Object) -> bool {
    !matches!(object, Object::Service(_) | Object::EndpointSlice(_))
}

impl FilesBuilder {
    /// A builder that keeps the labels of the node `own` only (the other nodes get an
    /// empty map). For the daemon: only its own node's labels are read (they select its
    /// peers and its LoadBalancer exclusion), and a label map is a few hundred octets
    /// per node even with one label (50,000 nodes: 27 MB). `None` keeps every node's,
    /// as the one-shot commands need.
    pub fn labels_of(own: Option<Arc<str>>) -> FilesBuilder {
        FilesBuilder {
            labels_of: own,
            ..FilesBuilder::default()
        }
    }

    /// The objects of one file (`path` names it in errors).
    pub fn add(&mut self, path: &Path, text: &str) -> Result<(), SourceError> {
        self.add_split(path, text, LbSink::Builder).map(|_| ())
    }

    /// The objects of one file: node-side objects (Nodes, CiliumNodes,
    /// CiliumPodIPPools, cilium-config) into this builder, the LoadBalancer objects into
    /// `lb`. True when the file holds any node-side object, so a caller that keeps
    /// files apart knows which files the node state depends on.
    pub fn add_split(
        &mut self,
        path: &Path,
        text: &str,
        mut lb: LbSink,
    ) -> Result<bool, SourceError> {
        let at: Arc<Path> = Arc::from(path);
        let FilesBuilder {
            files: ClusterFiles { state, lb: own_lb },
            names: own_names,
            origin,
            labels_of,
            no_labels,
        } = self;
        let in_file = |error: SourceError| SourceError::InFile {
            path: path.to_owned(),
            error: Box::new(error),
        };
        let mut node_side = false;
        for_each_object(path, text, &mut |object| {
            node_side |= is_node_side(&object);
            let mut again = false;
            let (kind, name) = match object {
                Object::Node(node) => {
                    let (name, mut facts) = objects::node_facts(&node).map_err(in_file)?;
                    if labels_of.as_deref().is_some_and(|own| own != name) {
                        facts.labels = Arc::clone(no_labels);
                    }
                    state.nodes.insert(name.clone(), facts);
                    ("Node", name)
                }
                Object::CiliumNode(node) => {
                    let (name, facts) = objects::cilium_node_facts(&node).map_err(in_file)?;
                    state.insert_cilium_node(name.clone(), facts);
                    ("CiliumNode", name)
                }
                Object::CiliumPodIpPool(pool) => {
                    let (name, ranges) = objects::pod_ip_pool_ranges(&pool).map_err(in_file)?;
                    state
                        .pod_ip_pools
                        .get_or_insert_with(BTreeMap::new)
                        .insert(name.clone(), ranges);
                    ("CiliumPodIPPool", name)
                }
                Object::CiliumConfig(config_map) => {
                    state.cilium_config =
                        Some(objects::cilium_config(&config_map).map_err(in_file)?);
                    ("ConfigMap", CILIUM_CONFIG_NAME.to_owned())
                }
                Object::Service(service) => {
                    let Some((facts, _)) = lb.target(own_lb, own_names) else {
                        return Ok(());
                    };
                    let (key, service) =
                        service_objects::service_facts(&service).map_err(in_file)?;
                    let name = key.to_string();
                    again = facts.services.insert(key, service).is_some();
                    ("Service", name)
                }
                Object::EndpointSlice(slice) => {
                    let Some((facts, names)) = lb.target(own_lb, own_names) else {
                        return Ok(());
                    };
                    let (key, slice) =
                        service_objects::slice_facts(&slice, names).map_err(in_file)?;
                    let name = key.to_string();
                    again = facts.slices.insert(key, slice).is_some();
                    ("EndpointSlice", name)
                }
            };
            // A file's own facts are checked within the file only; the builder's own
            // facts (and node-side objects) by the origin check, which names both files.
            if matches!(lb, LbSink::File { .. }) && matches!(kind, "Service" | "EndpointSlice") {
                return if again {
                    Err(SourceError::Duplicate {
                        kind,
                        name,
                        first: path.to_owned(),
                        second: path.to_owned(),
                    })
                } else {
                    Ok(())
                };
            }
            if let Some(first) = origin.insert((kind, name.clone()), Arc::clone(&at)) {
                return Err(SourceError::Duplicate {
                    kind,
                    name,
                    first: first.to_path_buf(),
                    second: path.to_owned(),
                });
            }
            Ok(())
        })?;
        Ok(node_side)
    }

    pub fn finish(self) -> ClusterFiles {
        let FilesBuilder {
            mut files,
            names,
            origin,
            ..
        } = self;
        drop((names, origin));
        // The per-node maps were filled one insert at a time, which leaves their leaves
        // about half empty; rebuilt from their (sorted) entries they are full: at 50,000
        // nodes several MB less for as long as the state is kept. The origins are
        // dropped first, so the rebuild does not add to the load's peak.
        let state = &mut files.state;
        state.nodes = std::mem::take(&mut state.nodes).into_iter().collect();
        state.cilium_nodes = std::mem::take(&mut state.cilium_nodes)
            .into_iter()
            .collect();
        files
    }
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
    fn labels_of_keeps_only_that_nodes_labels_and_every_other_fact() {
        let text = "kind: Node\nmetadata: {name: a, labels: {role: x}}\nspec: {podCIDRs: [10.1.0.0/24]}\n\
            ---\nkind: Node\nmetadata: {name: b, labels: {role: y}}\nspec: {podCIDRs: [10.2.0.0/24]}\n";
        let path = Path::new("n.yaml");
        let mut all = FilesBuilder::default();
        all.add(path, text).unwrap();
        let all = all.finish().state;
        let mut own = FilesBuilder::labels_of(Some(Arc::from("b")));
        own.add(path, text).unwrap();
        let own = own.finish().state;

        assert_eq!(own.nodes["b"].labels, all.nodes["b"].labels);
        assert_eq!(
            own.nodes["b"].labels.get("role").map(String::as_str),
            Some("y")
        );
        assert!(
            own.nodes["a"].labels.is_empty(),
            "another node's labels kept"
        );
        assert_eq!(
            all.nodes["a"].labels.get("role").map(String::as_str),
            Some("x")
        );
        // Everything else is the same: only the labels of other nodes are left out.
        let mut stripped = all.clone();
        stripped.nodes.get_mut("a").unwrap().labels = Labels::default();
        assert_eq!(own, stripped);
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

    /// `kubectl get nodes,ciliumnodes -o json`: `items` comes before `kind`, and the
    /// JSON reader maps the items as it reaches them; the result is the YAML reader's.
    #[test]
    fn kubectl_json_list_is_read_like_its_yaml() {
        let yaml: serde_json::Value = serde_yaml::from_str(KUBECTL_LIST).unwrap();
        let json = serde_json::to_string_pretty(&yaml).unwrap();
        assert!(json.find("\"items\"") < json.find("\"kind\": \"List\""));
        assert_eq!(
            state(&[("list.json", &json)]).unwrap(),
            state(&[("list.yaml", KUBECTL_LIST)]).unwrap()
        );
        // Several JSON documents in one file, and an empty one.
        let two =
            format!("{json}\n{{\"kind\": \"Node\", \"metadata\": {{\"name\": \"n9\"}}}}\nnull\n");
        let state = state(&[("list.json", &two)]).unwrap();
        assert_eq!(state.nodes.keys().collect::<Vec<_>>(), ["master1", "n9"]);
    }

    #[test]
    fn json_items_without_kind_wait_for_the_list_kind() {
        // `kind` after `items`, items that do not name theirs: a NodeList's.
        let text = r#"{"items": [{"metadata": {"name": "n1"}, "spec": {"podCIDR": "10.1.0.0/24"}},
            {"kind": "CiliumNode", "metadata": {"name": "n1"}, "spec": {"ipam": {"podCIDRs": ["10.2.0.0/24"]}}}],
            "kind": "NodeList", "apiVersion": "v1"}"#;
        let state = state(&[("nodes.json", text)]).unwrap();
        assert_eq!(state.nodes["n1"].node_cidrs, vec![net("10.1.0.0/24")]);
        assert_eq!(state.cilium_nodes["n1"], vec![net("10.2.0.0/24")]);
    }

    #[test]
    fn json_errors_name_the_document_and_stop_the_load() {
        // Malformed JSON in the second document.
        let text = "{\"kind\": \"Node\", \"metadata\": {\"name\": \"a\"}}\n{\"kind\": \"Node\",";
        let err = state(&[("bad.json", text)]).unwrap_err();
        assert!(
            matches!(&err, SourceError::Parse { path, document: 2, .. } if path == Path::new("bad.json")),
            "{err:?}"
        );
        // An item that does not map: the mapping error, as for YAML.
        let text = r#"{"items": [{"kind": "Node", "metadata": {"name": "a"}, "spec": {"podCIDRs": ["10.1.0.0/33"]}}], "kind": "List"}"#;
        let err = state(&[("n.json", text)]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("n.json: Node a: spec.podCIDRs[0]"),
            "{err}"
        );
        // Items in an object that is not a list, and items without any kind.
        for text in [
            r#"{"kind": "Node", "metadata": {"name": "a"}, "items": []}"#,
            r#"{"items": [{"metadata": {"name": "a"}}]}"#,
        ] {
            let err = state(&[("n.json", text)]).unwrap_err();
            assert!(
                matches!(err, SourceError::Parse { document: 1, .. }),
                "{text}: {err:?}"
            );
        }
        // A duplicate across a JSON list and a YAML file.
        let json = r#"{"items": [{"kind": "Node", "metadata": {"name": "a"}}], "kind": "List"}"#;
        let err = state(&[
            ("one.json", json),
            ("two.yaml", "kind: Node\nmetadata: {name: a}\n"),
        ])
        .unwrap_err();
        assert!(matches!(err, SourceError::Duplicate { .. }), "{err:?}");
    }
}
