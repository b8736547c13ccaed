//! What the allocator needs to know of one Service ([`AllocFacts`]), and the rules that
//! read a Service alone: which addresses it asks for (`spec.loadBalancerIP` or the
//! `metallb.universe.tf/loadBalancerIPs` annotation, [`AllocFacts::requested`]), which
//! address families it wants ([`AllocFacts::fits`]), and whether it may share an
//! address with another Service ([`Sharing::conflict`]).
//!
//! Pure and free of Kubernetes types: the mapping of a Service object to these facts
//! belongs beside `sources::service_objects`. Must not: look at other Services or at the
//! pools (that is `super::Allocator`'s).

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

/// An entry of `spec.ipFamilies`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        })
    }
}

/// The annotation that names the pool to allocate from (MetalLB).
pub const ANNOTATION_POOL: &str = "metallb.universe.tf/address-pool";
/// The annotation that asks for given addresses, comma-separated (MetalLB >= 0.12).
pub const ANNOTATION_IPS: &str = "metallb.universe.tf/loadBalancerIPs";
/// The annotation whose value lets Services share an address (MetalLB).
pub const ANNOTATION_SHARING: &str = "metallb.universe.tf/allow-shared-ip";

/// `spec.ipFamilyPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum FamilyPolicy {
    /// `SingleStack` (also an absent field).
    #[default]
    SingleStack,
    /// `PreferDualStack`: an address of each family the pool can give, at least one.
    PreferDualStack,
    /// `RequireDualStack`: one address of each family, or none at all.
    RequireDualStack,
}

/// `spec.ports[].protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Sctp,
}

/// One `spec.ports` entry as sharing sees it: two Services on one address may not both
/// use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Port {
    pub protocol: Protocol,
    pub port: u16,
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = match self.protocol {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
            Protocol::Sctp => "SCTP",
        };
        write!(f, "{p}/{}", self.port)
    }
}

/// Which backends a Service sends its traffic to, as sharing compares them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// `externalTrafficPolicy: Cluster`: any node forwards, so the backends do not
    /// matter for sharing.
    #[default]
    Cluster,
    /// `externalTrafficPolicy: Local`: only nodes with an endpoint answer, so Services
    /// sharing an address must select the same Pods: `spec.selector` written in one
    /// canonical form (`key=value` sorted, comma-separated).
    Local(Arc<str>),
}

/// What one Service says that the allocator needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllocFacts {
    /// `spec.type == LoadBalancer`.
    pub load_balancer: bool,
    /// `spec.loadBalancerClass`, `None` when unset.
    pub class: Option<Arc<str>>,
    /// `spec.ipFamilies`, in order (the API server fills it from the ClusterIPs).
    pub families: Vec<Family>,
    pub family_policy: FamilyPolicy,
    /// `spec.loadBalancerIP` as written (empty counts as unset).
    pub load_balancer_ip: Option<String>,
    /// The `metallb.universe.tf/loadBalancerIPs` annotation as written.
    pub ips_annotation: Option<String>,
    /// The `metallb.universe.tf/address-pool` annotation.
    pub pool: Option<Arc<str>>,
    /// What sharing compares.
    pub sharing: Sharing,
    /// `status.loadBalancer.ingress[].ip` that parse, in order.
    pub status_ips: Vec<IpAddr>,
}

/// What decides whether two Services may hold one address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sharing {
    /// `metallb.universe.tf/allow-shared-ip`; `None` (or empty) never shares.
    pub key: Option<Arc<str>>,
    pub backend: Backend,
    pub ports: BTreeSet<Port>,
}

/// Why two Services may not hold one address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    /// One of the two has no `allow-shared-ip`.
    NotShared,
    /// Both have one, with different values.
    KeyDiffers,
    /// `Local` and `Cluster`, or two `Local` Services selecting different Pods.
    BackendDiffers,
    /// Both use this protocol and port.
    Port(Port),
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::NotShared => write!(f, "one of the two has no {ANNOTATION_SHARING}"),
            Conflict::KeyDiffers => write!(f, "their {ANNOTATION_SHARING} values differ"),
            Conflict::BackendDiffers => f.write_str(
                "their backends differ (externalTrafficPolicy Local needs the same selector on both)",
            ),
            Conflict::Port(p) => write!(f, "both use {p}"),
        }
    }
}

impl Sharing {
    /// Why `self` may not share an address with `other`, or `None` when it may.
    pub fn conflict(&self, other: &Sharing) -> Option<Conflict> {
        let (Some(a), Some(b)) = (self.key.as_ref(), other.key.as_ref()) else {
            return Some(Conflict::NotShared);
        };
        if a.is_empty() || b.is_empty() {
            return Some(Conflict::NotShared);
        }
        if a != b {
            return Some(Conflict::KeyDiffers);
        }
        if self.backend != other.backend {
            return Some(Conflict::BackendDiffers);
        }
        self.ports
            .intersection(&other.ports)
            .next()
            .map(|p| Conflict::Port(*p))
    }

    /// The sharing key, when it allows sharing at all.
    pub fn shared_key(&self) -> Option<&Arc<str>> {
        self.key.as_ref().filter(|k| !k.is_empty())
    }
}

/// Why the addresses a Service asks for cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Both `spec.loadBalancerIP` and the annotation are set.
    Both,
    /// A value that is not an IP address.
    NotAnAddress { field: &'static str, value: String },
    /// More than two addresses, or two of one family.
    Families { ips: Vec<IpAddr> },
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Both => write!(
                f,
                "spec.loadBalancerIP and the {ANNOTATION_IPS} annotation are both set: use one"
            ),
            RequestError::NotAnAddress { field, value } => {
                write!(f, "{field}: {value:?} is not an IP address")
            }
            RequestError::Families { ips } => write!(
                f,
                "{ANNOTATION_IPS}: {} must be one address, or one IPv4 and one IPv6 address",
                list(ips)
            ),
        }
    }
}

impl AllocFacts {
    /// The addresses the Service asks for: `None` when it asks for none.
    pub fn requested(&self) -> Result<Option<Vec<IpAddr>>, RequestError> {
        let spec = self
            .load_balancer_ip
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        let annotation = self
            .ips_annotation
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        match (spec, annotation) {
            (None, None) => Ok(None),
            (Some(_), Some(_)) => Err(RequestError::Both),
            (Some(text), None) => parse(text, "spec.loadBalancerIP").map(|ip| Some(vec![ip])),
            (None, Some(text)) => {
                let ips = text
                    .split(',')
                    .map(|t| parse(t.trim(), ANNOTATION_IPS))
                    .collect::<Result<Vec<_>, _>>()?;
                let families: BTreeSet<Family> = ips.iter().map(|ip| family(*ip)).collect();
                if ips.len() > 2 || families.len() != ips.len() {
                    return Err(RequestError::Families { ips });
                }
                Ok(Some(ips))
            }
        }
    }

    /// Whether these addresses are what the Service's families ask for: one per family
    /// of `spec.ipFamilies`; under `PreferDualStack` at least one of them.
    pub fn fits(&self, ips: &[IpAddr]) -> bool {
        let got: BTreeSet<Family> = ips.iter().map(|ip| family(*ip)).collect();
        let want: BTreeSet<Family> = self.families.iter().copied().collect();
        if got.len() != ips.len() || got.is_empty() {
            return false;
        }
        match self.family_policy {
            FamilyPolicy::PreferDualStack => got.is_subset(&want),
            _ => got == want,
        }
    }

    /// `spec.ipFamilies` without repeats, in order: one address per family, whatever a
    /// malformed object lists twice.
    pub fn wanted(&self) -> impl Iterator<Item = Family> + '_ {
        self.families
            .iter()
            .enumerate()
            .filter(|(i, f)| !self.families[..*i].contains(f))
            .map(|(_, f)| *f)
    }

    /// Whether a family missing from `ips` is only preferred (`PreferDualStack`), so
    /// that the Service holds what it has and takes the other when one is free. Not
    /// when it asks for given addresses: it gets exactly those.
    pub fn wants_more(&self, ips: &[IpAddr]) -> bool {
        self.family_policy == FamilyPolicy::PreferDualStack
            && self.requested() == Ok(None)
            && self
                .families
                .iter()
                .any(|f| !ips.iter().any(|ip| family(*ip) == *f))
    }
}

fn parse(text: &str, field: &'static str) -> Result<IpAddr, RequestError> {
    text.parse::<IpAddr>()
        .map(|ip| ip.to_canonical())
        .map_err(|_| RequestError::NotAnAddress {
            field,
            value: text.to_owned(),
        })
}

/// The family of an address.
pub fn family(ip: IpAddr) -> Family {
    match ip {
        IpAddr::V4(_) => Family::Ipv4,
        IpAddr::V6(_) => Family::Ipv6,
    }
}

/// Addresses as `a, b`.
pub(crate) fn list(ips: &[IpAddr]) -> String {
    ips.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn sharing(key: Option<&str>, backend: Backend, ports: &[u16]) -> Sharing {
        Sharing {
            key: key.map(Arc::from),
            backend,
            ports: ports
                .iter()
                .map(|p| Port {
                    protocol: Protocol::Tcp,
                    port: *p,
                })
                .collect(),
        }
    }

    // Rule: the requested IP comes from spec.loadBalancerIP or the annotation; both set
    // is an error (MetalLB: "service can not have both").
    #[test]
    fn requested_from_either_field_but_not_both() {
        let spec = AllocFacts {
            load_balancer_ip: Some("10.0.0.5".into()),
            ..AllocFacts::default()
        };
        assert_eq!(spec.requested(), Ok(Some(vec![ip("10.0.0.5")])));
        let annotation = AllocFacts {
            ips_annotation: Some("10.0.0.5, fd00::5".into()),
            ..AllocFacts::default()
        };
        assert_eq!(
            annotation.requested(),
            Ok(Some(vec![ip("10.0.0.5"), ip("fd00::5")]))
        );
        let both = AllocFacts {
            load_balancer_ip: Some("10.0.0.5".into()),
            ips_annotation: Some("10.0.0.6".into()),
            ..AllocFacts::default()
        };
        assert_eq!(both.requested(), Err(RequestError::Both));
        // An empty spec.loadBalancerIP is what older clients write for "none".
        let empty = AllocFacts {
            load_balancer_ip: Some(String::new()),
            ..AllocFacts::default()
        };
        assert_eq!(empty.requested(), Ok(None));
    }

    // Rule: requested addresses must parse; at most one per family.
    #[test]
    fn requested_addresses_are_read_strictly() {
        let bad = AllocFacts {
            load_balancer_ip: Some("10.0.0.300".into()),
            ..AllocFacts::default()
        };
        assert!(matches!(
            bad.requested(),
            Err(RequestError::NotAnAddress {
                field: "spec.loadBalancerIP",
                ..
            })
        ));
        let two_v4 = AllocFacts {
            ips_annotation: Some("10.0.0.1,10.0.0.2".into()),
            ..AllocFacts::default()
        };
        assert!(matches!(
            two_v4.requested(),
            Err(RequestError::Families { .. })
        ));
        let three = AllocFacts {
            ips_annotation: Some("10.0.0.1,fd00::1,10.0.0.2".into()),
            ..AllocFacts::default()
        };
        assert!(matches!(
            three.requested(),
            Err(RequestError::Families { .. })
        ));
    }

    // Rule (dual-stack): one address per family of ipFamilies; PreferDualStack accepts
    // any non-empty part of them.
    #[test]
    fn families_fit_by_policy() {
        let mut f = AllocFacts {
            families: vec![Family::Ipv4, Family::Ipv6],
            family_policy: FamilyPolicy::RequireDualStack,
            ..AllocFacts::default()
        };
        assert!(f.fits(&[ip("10.0.0.1"), ip("fd00::1")]));
        assert!(!f.fits(&[ip("10.0.0.1")]));
        f.family_policy = FamilyPolicy::PreferDualStack;
        assert!(f.fits(&[ip("10.0.0.1")]));
        assert!(f.wants_more(&[ip("10.0.0.1")]));
        assert!(!f.wants_more(&[ip("10.0.0.1"), ip("fd00::1")]));
        // Asking for one address is asking for that one only.
        f.load_balancer_ip = Some("10.0.0.1".into());
        assert!(!f.wants_more(&[ip("10.0.0.1")]));
        f.load_balancer_ip = None;
        let single = AllocFacts {
            families: vec![Family::Ipv6],
            ..AllocFacts::default()
        };
        assert!(!single.fits(&[ip("10.0.0.1")]));
        assert!(single.fits(&[ip("fd00::1")]));
        assert!(!single.fits(&[]));
    }

    // Rule (sharing): same non-empty key, same backend (any selector under Cluster, the
    // same under Local), no port in common.
    #[test]
    fn sharing_rules() {
        let a = sharing(Some("k"), Backend::Cluster, &[80]);
        assert_eq!(
            a.conflict(&sharing(Some("k"), Backend::Cluster, &[443])),
            None
        );
        assert_eq!(
            a.conflict(&sharing(None, Backend::Cluster, &[443])),
            Some(Conflict::NotShared)
        );
        assert_eq!(
            a.conflict(&sharing(Some(""), Backend::Cluster, &[443])),
            Some(Conflict::NotShared)
        );
        assert_eq!(
            a.conflict(&sharing(Some("j"), Backend::Cluster, &[443])),
            Some(Conflict::KeyDiffers)
        );
        assert_eq!(
            a.conflict(&sharing(Some("k"), Backend::Cluster, &[80])),
            Some(Conflict::Port(Port {
                protocol: Protocol::Tcp,
                port: 80
            }))
        );
        let local =
            |sel: &str, ports: &[u16]| sharing(Some("k"), Backend::Local(sel.into()), ports);
        assert_eq!(
            local("app=a", &[80]).conflict(&local("app=a", &[443])),
            None
        );
        assert_eq!(
            local("app=a", &[80]).conflict(&local("app=b", &[443])),
            Some(Conflict::BackendDiffers)
        );
        assert_eq!(
            local("app=a", &[80]).conflict(&sharing(Some("k"), Backend::Cluster, &[443])),
            Some(Conflict::BackendDiffers)
        );
        // The same port number over another protocol is another port (MetalLB keys
        // ports by protocol and number: DNS on TCP/53 and UDP/53 share an address).
        let udp = Sharing {
            ports: BTreeSet::from([Port {
                protocol: Protocol::Udp,
                port: 80,
            }]),
            ..a.clone()
        };
        assert_eq!(a.conflict(&udp), None);
    }
}
