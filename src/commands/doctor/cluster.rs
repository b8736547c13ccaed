//! `doctor`'s one-shot in-cluster read: Nodes, CiliumNodes, CiliumPodIPPools,
//! cilium-config and Services listed once from the API server, in pages, into a
//! [`ClusterState`] and LoadBalancer facts (and the Services themselves, for the
//! allocator); the allocator's Lease read once. Must not: diagnose (that is
//! `diagnose.rs`) or watch (the daemon's sources do).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::api::{ListParams, ObjectList};
use kube::{Api, Client};
use serde::de::DeserializeOwned;

use super::diagnose::LeaseCheck;
use crate::allocate::lease::LeaseRef;
use crate::sources::kube::{BgpConfigMapRef, ConfigMapRef};
use crate::sources::model::ClusterState;
use crate::sources::objects::{self, CiliumNode, CiliumPodIpPool};
use crate::sources::service_objects;
use crate::sources::services::LbFacts;
use crate::sources::SourceError;

/// Objects per page when listing from the API server: large clusters are read in
/// pages, as kubectl does.
const PAGE_SIZE: u32 = 500;

/// The longest `doctor` waits for a byte of one page: an operator is waiting.
pub(super) const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// `NAMESPACE/NAME`, both non-empty.
pub(super) fn parse_config_map_ref(text: &str) -> Option<ConfigMapRef> {
    let (namespace, name) = text.split_once('/')?;
    let valid = |s: &str| !s.is_empty() && !s.contains('/');
    (valid(namespace) && valid(name)).then(|| ConfigMapRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error("listing {what}: {source}")]
    Api {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
}

/// Reads Nodes, CiliumNodes and cilium-config once from the API server, in pages.
///
/// An object whose facts cannot be read is listed in [`Diagnosis::unreadable`] by the
/// caller (returned here as the second value), not fatal: the rest of the cluster is
/// still worth a diagnosis. CiliumNodes whose CRD is not installed (404) count as none.
pub async fn load_in_cluster(
    client: Client,
    cilium_config: &ConfigMapRef,
) -> Result<(ClusterState, Vec<SourceError>, Vec<String>), DoctorError> {
    let mut state = ClusterState::default();
    let mut unreadable = Vec::new();
    let mut notes = Vec::new();

    for node in list_all(&Api::<Node>::all(client.clone()), "nodes", None).await? {
        match objects::node_facts(&node) {
            Ok((name, facts)) => {
                state.nodes.insert(name, facts);
            }
            Err(e) => unreadable.push(e),
        }
    }
    match list_all(&Api::<CiliumNode>::all(client.clone()), "ciliumnodes", None).await {
        Ok(list) => {
            for node in list {
                match objects::cilium_node_facts(&node) {
                    Ok((name, facts)) => state.insert_cilium_node(name, facts),
                    Err(e) => unreadable.push(e),
                }
            }
        }
        Err(DoctorError::Api {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 404 => {
            notes.push("the CiliumNode CRD (cilium.io/v2) is not installed".to_owned());
        }
        Err(e) => return Err(e),
    }
    // Multi-pool's ranges; without them the allocations cannot be checked, which the
    // view says. Not fatal: clusters without multi-pool need not serve or grant them.
    let pools = Api::<CiliumPodIpPool>::all(client.clone());
    match list_all(&pools, "ciliumpodippools", None).await {
        Ok(list) => {
            let mut ranges = BTreeMap::new();
            for pool in list {
                match objects::pod_ip_pool_ranges(&pool) {
                    Ok((name, r)) => {
                        ranges.insert(name, r);
                    }
                    Err(e) => unreadable.push(e),
                }
            }
            state.pod_ip_pools = Some(ranges);
        }
        Err(DoctorError::Api {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 404 || status.code == 403 => {
            notes.push(format!(
                "CiliumPodIPPools (cilium.io/v2alpha1) cannot be listed ({}): multi-pool \
                 CIDRs are not checked against their pools",
                status.message
            ));
        }
        Err(e) => return Err(e),
    }
    // By name with a field selector: the speaker's own RBAC allows exactly that.
    let selector = format!("metadata.name={}", cilium_config.name);
    let config_maps = list_all(
        &Api::<ConfigMap>::namespaced(client, &cilium_config.namespace),
        "configmaps",
        Some(&selector),
    )
    .await?;
    if let Some(cm) = config_maps.first() {
        match objects::cilium_config(cm) {
            Ok(c) => state.cilium_config = Some(c),
            Err(e) => unreadable.push(e),
        }
    }
    Ok((state, unreadable, notes))
}

/// The bgp-config's text from its ConfigMap, read as `run` reads it (by name with a
/// field selector, which the speaker's RBAC allows); `None` when the ConfigMap or its
/// key does not exist.
pub(super) async fn load_bgp_config(
    client: Client,
    map: &BgpConfigMapRef,
) -> Result<Option<String>, DoctorError> {
    let selector = format!("metadata.name={}", map.name);
    let found = list_all(
        &Api::<ConfigMap>::namespaced(client, &map.namespace),
        "configmaps",
        Some(&selector),
    )
    .await?;
    Ok(found
        .first()
        .and_then(|cm| objects::config_map_text(cm, &map.key)))
}

/// Every Service of the cluster as LoadBalancer facts (EndpointSlices are not needed
/// for the findings), and the Service objects themselves (the allocator reads more of
/// them than those facts keep; `None` when they cannot be listed, so that no answer is
/// made from an empty list). Not fatal when Services cannot be listed (a user without
/// the grant): a note says the LoadBalancer findings are missing.
pub(super) async fn load_services(
    client: Client,
    unreadable: &mut Vec<SourceError>,
    notes: &mut Vec<String>,
) -> Result<(LbFacts, Option<Vec<Service>>), DoctorError> {
    let mut lb = LbFacts::default();
    let mut objects = Vec::new();
    match list_all(&Api::<Service>::all(client), "services", None).await {
        Ok(list) => {
            for service in list {
                match service_objects::service_facts(&service) {
                    Ok((key, facts)) => {
                        lb.services.insert(key, facts);
                        objects.push(service);
                    }
                    Err(e) => unreadable.push(e),
                }
            }
        }
        Err(DoctorError::Api {
            source: kube::Error::Api(status),
            ..
        }) if status.code == 403 => {
            notes.push(format!(
                "Services cannot be listed ({}): LoadBalancer IPs are not checked",
                status.message
            ));
            return Ok((lb, None));
        }
        Err(e) => return Err(e),
    }
    Ok((lb, Some(objects)))
}

/// The allocator's Lease (`--allocator-lease`, as `allocate --lease` names it), read
/// once and judged at this moment. Never fatal: a Lease that cannot be read is said so,
/// as doctor's user may lack the grant.
pub(super) async fn load_allocator_lease(client: Client, at: &LeaseRef) -> LeaseCheck {
    let name = at.to_string();
    match Api::<Lease>::namespaced(client, &at.namespace)
        .get_opt(&at.name)
        .await
    {
        Ok(lease) => LeaseCheck::of(&name, lease.as_ref(), k8s_openapi::jiff::Timestamp::now()),
        Err(e) => LeaseCheck::Unreadable {
            lease: name,
            reason: e.to_string(),
        },
    }
}

async fn list_all<K>(
    api: &Api<K>,
    what: &'static str,
    fields: Option<&str>,
) -> Result<Vec<K>, DoctorError>
where
    K: Clone + DeserializeOwned + fmt::Debug,
{
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(fields) = fields {
            params = params.fields(fields);
        }
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page: ObjectList<K> = api
            .list(&params)
            .await
            .map_err(|source| DoctorError::Api { what, source })?;
        out.extend(page.items);
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(out);
        }
    }
}
