//! RBAC as the API server decides it, for the requests a test recorded: which
//! (verb, API group, resource, namespace, name) each request asks for, and whether the
//! rules bound to a ServiceAccount in our manifests allow it. A test runs the real
//! binary against the API emulation, then holds every request it made against
//! deploy/'s RBAC, so a permission missing from the manifests fails here, not in a
//! cluster.

use serde_yaml::Value;

/// What one request asks RBAC for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    pub verb: &'static str,
    /// "" for the core group.
    pub group: String,
    /// With its subresource: `services/status`.
    pub resource: String,
    pub namespace: Option<String>,
    /// The object's name; for a list or watch, the `metadata.name` its field selector
    /// names (which is how RBAC's resourceNames apply to them).
    pub name: Option<String>,
}

impl Access {
    /// The access `method path?query` asks for; `None` for a path that is not a
    /// resource's (`/version`, discovery).
    pub fn of(method: &str, path: &str, query: &str) -> Option<Access> {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, rest) = match parts.as_slice() {
            ["api", "v1", rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => return None,
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
            rest => (None, rest),
        };
        let (resource, name) = match rest {
            [r] => (r.to_string(), None),
            [r, n] => (r.to_string(), Some(n.to_string())),
            [r, n, sub] => (format!("{r}/{sub}"), Some(n.to_string())),
            _ => return None,
        };
        let param = |key: &str| {
            query.split('&').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (k == key).then(|| v.replace("%3D", "=").replace("%2C", ","))
            })
        };
        let verb = match (method, &name) {
            ("GET", Some(_)) => "get",
            ("GET", None) if matches!(param("watch").as_deref(), Some("true" | "1")) => "watch",
            ("GET", None) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", Some(_)) => "delete",
            ("DELETE", None) => "deletecollection",
            _ => return None,
        };
        let name = name.or_else(|| {
            param("fieldSelector")?
                .split(',')
                .find_map(|term| term.strip_prefix("metadata.name=").map(str::to_owned))
        });
        Some(Access {
            verb,
            group: group.to_owned(),
            resource,
            namespace,
            name,
        })
    }
}

/// One rule, with where it holds: a ClusterRole's (bound cluster-wide) everywhere, a
/// Role's in its namespace.
#[derive(Debug, Clone)]
struct Rule {
    namespace: Option<String>,
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    verbs: Vec<String>,
}

/// The rules bound to one ServiceAccount by the manifests given.
#[derive(Debug, Clone)]
pub struct Grants {
    rules: Vec<Rule>,
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn text<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(*k))?.as_str()
}

impl Grants {
    /// The rules the YAML documents (Roles, ClusterRoles and their bindings) bind to
    /// the ServiceAccount `namespace/name`.
    pub fn of(documents: &str, (sa_namespace, sa_name): (&str, &str)) -> Grants {
        use serde::Deserialize;
        let docs: Vec<Value> = serde_yaml::Deserializer::from_str(documents)
            .map(|d| Value::deserialize(d).expect("RBAC YAML"))
            .filter(|d| !d.is_null())
            .collect();
        let bound = |d: &Value| {
            d.get("subjects")
                .and_then(Value::as_sequence)
                .is_some_and(|subjects| {
                    subjects.iter().any(|s| {
                        text(s, &["kind"]) == Some("ServiceAccount")
                            && text(s, &["name"]) == Some(sa_name)
                            && text(s, &["namespace"]) == Some(sa_namespace)
                    })
                })
        };
        let role = |kind: &str, name: &str, namespace: Option<&str>| {
            docs.iter().find(|d| {
                text(d, &["kind"]) == Some(kind)
                    && text(d, &["metadata", "name"]) == Some(name)
                    && (kind == "ClusterRole" || text(d, &["metadata", "namespace"]) == namespace)
            })
        };
        let mut rules = Vec::new();
        for binding in docs.iter().filter(|d| bound(d)) {
            let (kind, namespace) = match text(binding, &["kind"]) {
                Some("ClusterRoleBinding") => ("ClusterRole", None),
                Some("RoleBinding") => (
                    text(binding, &["roleRef", "kind"]).unwrap_or("Role"),
                    text(binding, &["metadata", "namespace"]),
                ),
                _ => continue,
            };
            let name = text(binding, &["roleRef", "name"]).expect("roleRef.name");
            let role = role(kind, name, namespace)
                .unwrap_or_else(|| panic!("{kind} {name} bound but not in the manifests"));
            for r in role["rules"].as_sequence().into_iter().flatten() {
                rules.push(Rule {
                    // A ClusterRole bound by a RoleBinding holds in that namespace only.
                    namespace: namespace.map(str::to_owned),
                    groups: strings(&r["apiGroups"]),
                    resources: strings(&r["resources"]),
                    names: strings(&r["resourceNames"]),
                    verbs: strings(&r["verbs"]),
                });
            }
        }
        Grants { rules }
    }

    pub fn allows(&self, a: &Access) -> bool {
        let any = |list: &[String], want: &str| list.iter().any(|x| x == "*" || x == want);
        self.rules.iter().any(|r| {
            (r.namespace.is_none() || r.namespace == a.namespace)
                && any(&r.groups, &a.group)
                && any(&r.resources, &a.resource)
                && any(&r.verbs, a.verb)
                && (r.names.is_empty() || a.name.as_ref().is_some_and(|n| r.names.contains(n)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RBAC: &str = "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: reader}
rules:
  - {apiGroups: [''], resources: [services], verbs: [get, list, watch]}
  - {apiGroups: [''], resources: [services/status], verbs: [patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: reader}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lease, namespace: ns}
rules:
  - {apiGroups: [coordination.k8s.io], resources: [leases], resourceNames: [mine], verbs: [get, update]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lease, namespace: ns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lease}
subjects: [{kind: ServiceAccount, name: sa, namespace: ns}]
";

    fn allowed(sa: (&str, &str), method: &str, path: &str, query: &str) -> bool {
        Grants::of(RBAC, sa).allows(&Access::of(method, path, query).expect("a resource path"))
    }

    #[test]
    fn requests_map_to_verbs_and_only_granted_ones_pass() {
        let sa = ("ns", "sa");
        assert!(allowed(sa, "GET", "/api/v1/services", ""));
        assert!(allowed(
            sa,
            "GET",
            "/api/v1/services",
            "watch=true&resourceVersion=5"
        ));
        assert!(allowed(sa, "GET", "/api/v1/namespaces/a/services/web", ""));
        assert!(allowed(
            sa,
            "PATCH",
            "/api/v1/namespaces/a/services/web/status",
            ""
        ));
        // The subresource is its own resource: the Service itself may not be patched.
        assert!(!allowed(
            sa,
            "PATCH",
            "/api/v1/namespaces/a/services/web",
            ""
        ));
        assert!(!allowed(
            sa,
            "PUT",
            "/api/v1/namespaces/a/services/web/status",
            ""
        ));
        assert!(!allowed(
            sa,
            "DELETE",
            "/api/v1/namespaces/a/services/web",
            ""
        ));
        // A Role's rule holds in its namespace, for its names only.
        let lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/mine";
        assert!(allowed(sa, "GET", lease, ""));
        assert!(allowed(sa, "PUT", lease, ""));
        assert!(!allowed(
            sa,
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases/other",
            ""
        ));
        assert!(!allowed(
            sa,
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/x/leases/mine",
            ""
        ));
        assert!(!allowed(
            sa,
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
            ""
        ));
        // A list by name is allowed by resourceNames; a list of all is not.
        assert!(!allowed(
            sa,
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/ns/leases",
            ""
        ));
        // Another ServiceAccount has nothing.
        assert!(!allowed(("ns", "other"), "GET", "/api/v1/services", ""));
    }

    #[test]
    fn a_field_selector_by_name_is_the_name_resource_names_check() {
        let a = Access::of(
            "GET",
            "/api/v1/namespaces/kube-system/configmaps",
            "fieldSelector=metadata.name%3Dbgp-config&watch=true",
        )
        .unwrap();
        assert_eq!(a.verb, "watch");
        assert_eq!(a.name.as_deref(), Some("bgp-config"));
        assert_eq!(Access::of("GET", "/version", ""), None);
    }
}
