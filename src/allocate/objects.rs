//! The mapping of a Service object to the allocator's facts ([`alloc_facts`]), beside
//! `sources::service_objects` which maps the same object to the speaker's facts (and
//! whose rules for the type, the class, the traffic policy and the status addresses it
//! reuses, so the two never read a Service differently).
//!
//! Pure (no tokio, no I/O, no logging). Must not: keep the object (only its facts leave
//! here), or decide anything about addresses.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use crate::alloc::service::{ANNOTATION_IPS, ANNOTATION_POOL, ANNOTATION_SHARING};
use crate::alloc::{AllocFacts, Backend, Family, FamilyPolicy, Port, Protocol, Sharing};
use crate::sources::error::SourceError;
use crate::sources::service_objects::service_facts;
use crate::sources::services::{ObjectKey, TrafficPolicy};

const KIND: &str = "Service";

/// A Service's key and what the allocator needs of it.
///
/// - `spec.type`, `spec.loadBalancerClass`, `spec.externalTrafficPolicy` and the status
///   addresses as `sources::service_objects::service_facts` reads them.
/// - The families: `spec.ipFamilies` (the API server fills it); when absent, those of
///   `spec.clusterIPs` (or `spec.clusterIP`), as MetalLB took them; `None` (headless)
///   gives none.
/// - `spec.ipFamilyPolicy`: absent is `SingleStack`.
/// - `spec.ports`: the protocol (absent is TCP) and the port.
/// - Under `Local`, the backend is `spec.selector` as `key=value` pairs sorted by key,
///   comma-separated (what MetalLB compared).
///
/// A value the API server would not accept (a family, a policy or a protocol it does
/// not know, a port outside 1..65535) fails the object with the field named: guessing
/// would allocate for a Service that is not what it says.
pub fn alloc_facts(service: &Service) -> Result<(ObjectKey, AllocFacts), SourceError> {
    let (key, lb) = service_facts(service)?;
    let malformed = |field: &str, reason: String| SourceError::Malformed {
        kind: KIND,
        name: key.to_string(),
        field: field.to_owned(),
        reason,
    };
    let spec = service.spec.clone().unwrap_or_default();
    let mut families = Vec::new();
    for (i, f) in spec.ip_families.iter().flatten().enumerate() {
        families.push(match f.as_str() {
            "IPv4" => Family::Ipv4,
            "IPv6" => Family::Ipv6,
            other => {
                return Err(malformed(
                    &format!("spec.ipFamilies[{i}]"),
                    format!("{other:?} is not IPv4 or IPv6"),
                ))
            }
        });
    }
    if families.is_empty() {
        let ips = spec
            .cluster_ips
            .clone()
            .filter(|l| !l.is_empty())
            .or_else(|| spec.cluster_ip.clone().map(|ip| vec![ip]))
            .unwrap_or_default();
        families = ips
            .iter()
            .filter_map(|ip| ip.trim().parse::<std::net::IpAddr>().ok())
            .map(|ip| crate::alloc::service::family(ip.to_canonical()))
            .collect();
        families.dedup();
    }
    let family_policy = match spec.ip_family_policy.as_deref() {
        None | Some("") | Some("SingleStack") => FamilyPolicy::SingleStack,
        Some("PreferDualStack") => FamilyPolicy::PreferDualStack,
        Some("RequireDualStack") => FamilyPolicy::RequireDualStack,
        Some(other) => {
            return Err(malformed(
                "spec.ipFamilyPolicy",
                format!("{other:?} is not SingleStack, PreferDualStack or RequireDualStack"),
            ))
        }
    };
    let mut ports = BTreeSet::new();
    for (i, p) in spec.ports.iter().flatten().enumerate() {
        let protocol = match p.protocol.as_deref() {
            None | Some("") | Some("TCP") => Protocol::Tcp,
            Some("UDP") => Protocol::Udp,
            Some("SCTP") => Protocol::Sctp,
            Some(other) => {
                return Err(malformed(
                    &format!("spec.ports[{i}].protocol"),
                    format!("{other:?} is not TCP, UDP or SCTP"),
                ))
            }
        };
        let port = u16::try_from(p.port)
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| {
                malformed(
                    &format!("spec.ports[{i}].port"),
                    format!("{} is not within 1..65535", p.port),
                )
            })?;
        ports.insert(Port { protocol, port });
    }
    let backend = match lb.policy {
        TrafficPolicy::Cluster => Backend::Cluster,
        TrafficPolicy::Local => {
            // A BTreeMap walks its keys sorted: the canonical form.
            let pairs: Vec<String> = spec
                .selector
                .iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            Backend::Local(Arc::from(pairs.join(",")))
        }
    };
    let annotation = |name: &str| {
        service
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(name))
            .map(String::as_str)
    };
    let facts = AllocFacts {
        load_balancer: lb.load_balancer,
        class: lb.class,
        families,
        family_policy,
        load_balancer_ip: spec.load_balancer_ip.clone(),
        ips_annotation: annotation(ANNOTATION_IPS).map(str::to_owned),
        pool: annotation(ANNOTATION_POOL)
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(Arc::from),
        sharing: Sharing {
            key: annotation(ANNOTATION_SHARING).map(Arc::from),
            backend,
            ports,
        },
        status_ips: lb.ingress_ips,
    };
    Ok((key, facts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::net::IpAddr;

    fn service(value: serde_json::Value) -> Service {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_dual_stack_shared_local_service() {
        let svc = service(json!({
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "annotations": {
                    "metallb.universe.tf/allow-shared-ip": "front",
                    "metallb.universe.tf/address-pool": " public ",
                    "metallb.universe.tf/loadBalancerIPs": "10.0.0.1,fd00::1"
                }
            },
            "spec": {
                "type": "LoadBalancer",
                "externalTrafficPolicy": "Local",
                "selector": {"tier": "web", "app": "shop"},
                "ipFamilies": ["IPv6", "IPv4"],
                "ipFamilyPolicy": "RequireDualStack",
                "ports": [{"port": 443}, {"port": 53, "protocol": "UDP"}]
            },
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}, {"hostname": "x"}]}}
        }));
        let (key, f) = alloc_facts(&svc).unwrap();
        assert_eq!(key, ObjectKey::new("shop", "web"));
        assert!(f.load_balancer);
        assert_eq!(f.families, vec![Family::Ipv6, Family::Ipv4]);
        assert_eq!(f.family_policy, FamilyPolicy::RequireDualStack);
        assert_eq!(f.pool.as_deref(), Some("public"));
        assert_eq!(f.sharing.key.as_deref(), Some("front"));
        assert_eq!(
            f.sharing.backend,
            Backend::Local("app=shop,tier=web".into())
        );
        assert_eq!(
            f.sharing.ports,
            BTreeSet::from([
                Port {
                    protocol: Protocol::Tcp,
                    port: 443
                },
                Port {
                    protocol: Protocol::Udp,
                    port: 53
                }
            ])
        );
        assert_eq!(f.status_ips, vec!["10.0.0.1".parse::<IpAddr>().unwrap()]);
        assert_eq!(
            f.requested(),
            Ok(Some(vec![
                "10.0.0.1".parse().unwrap(),
                "fd00::1".parse().unwrap()
            ]))
        );
    }

    // MetalLB took the family from the ClusterIPs; an object without ipFamilies (an old
    // API server, a file) is read the same way.
    #[test]
    fn families_from_cluster_ips_when_ip_families_is_absent() {
        let svc = service(json!({
            "metadata": {"name": "a"},
            "spec": {"type": "LoadBalancer", "clusterIP": "fd00::10"}
        }));
        let (_, f) = alloc_facts(&svc).unwrap();
        assert_eq!(f.families, vec![Family::Ipv6]);
        assert_eq!(f.sharing.backend, Backend::Cluster);
        let headless = service(json!({
            "metadata": {"name": "a"},
            "spec": {"type": "LoadBalancer", "clusterIP": "None"}
        }));
        assert!(alloc_facts(&headless).unwrap().1.families.is_empty());
    }

    #[test]
    fn values_the_api_server_refuses_fail_the_object_with_the_field() {
        let bad = |spec: serde_json::Value| {
            alloc_facts(&service(json!({"metadata": {"name": "a"}, "spec": spec})))
                .unwrap_err()
                .to_string()
        };
        let e = bad(json!({"type": "LoadBalancer", "ipFamilies": ["IPv5"]}));
        assert!(e.contains("spec.ipFamilies[0]"), "{e}");
        let e = bad(json!({"type": "LoadBalancer", "ipFamilyPolicy": "Maybe"}));
        assert!(e.contains("spec.ipFamilyPolicy"), "{e}");
        let e = bad(json!({"type": "LoadBalancer", "ports": [{"port": 70000}]}));
        assert!(e.contains("spec.ports[0].port"), "{e}");
        let e = bad(json!({"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "ICMP"}]}));
        assert!(e.contains("spec.ports[0].protocol"), "{e}");
        let e = bad(json!({"type": "LoadBalancer", "externalTrafficPolicy": "Nearby"}));
        assert!(e.contains("spec.externalTrafficPolicy"), "{e}");
    }
}
