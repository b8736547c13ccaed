//! `podcidr-speaker doctor`: the table the outage needed. Per node: the Node's pod
//! CIDRs, the CiliumNode's, which object is in force for the IPAM mode, drift between
//! the two, overlaps with other nodes and CIDRs outside the cluster pool; exit status 1
//! when anything is wrong. Also, from the cluster-state files or the cluster, the
//! LoadBalancer Services pending an IP and LoadBalancer IPs inside a node's pod CIDR,
//! and with `--bgp-config` the IPs outside every bgp address-pool ([`lb_findings`], as
//! warnings). In a cluster, with a bgp-config that has address pools, the allocator's
//! answer ([`AllocationCheck`]): why each pending Service is pending, status addresses
//! the config leaves outside every pool (a problem: the allocator refuses such a
//! config) and whether an allocator of ours holds its Lease.
//!
//! Owns the command: its request, the reading of its inputs and the exit status. The
//! diagnosis is `diagnose.rs` ([`diagnose`]), its rendering `render.rs`, the one-shot
//! in-cluster list `cluster.rs` ([`load_in_cluster`]). Must not: decide which object is in
//! force, which CIDRs are refused or which overlap; that is [`node_view`]'s alone, and
//! this module only reads its answer.

mod cluster;
mod diagnose;
mod render;

use cluster::{
    load_allocator_lease, load_bgp_config, load_services, parse_config_map_ref, READ_TIMEOUT,
};
pub use cluster::{load_in_cluster, DoctorError};
pub use diagnose::{
    allocator, diagnose, lb_findings, AllocationCheck, BgpConfigCheck, Diagnosis, LeaseCheck,
    ModeOrigin, NodeDiagnosis, OverlapWith,
};

use std::io::Write;
use std::path::Path;

use kube::Client;

use super::allocation::AllocationView;
use crate::allocate::lease::LeaseRef;
use crate::config::Config;
use crate::sources::file::load_files;
use crate::sources::kube::{self as kube_source, BgpConfigMapRef, ConfigMapRef};
use crate::sources::model::IpamOverride;

/// Exit status when the cluster (or the cluster-state path) cannot be read.
pub const EXIT_UNREADABLE: u8 = 2;

/// What to diagnose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoctorRequest {
    /// `--cluster-state PATH`: files; `None` reads the cluster through KUBECONFIG or the
    /// in-cluster service account.
    pub cluster_state: Option<std::path::PathBuf>,
    /// `--cilium-config NAMESPACE/NAME`, for the in-cluster read.
    pub cilium_config: String,
    pub ipam: IpamOverride,
    /// `--bgp-config FILE`: with it, LoadBalancer IPs outside every bgp address-pool are
    /// listed too.
    pub bgp_config: Option<std::path::PathBuf>,
    /// `--bgp-config-map`: in-cluster without `--bgp-config`, the bgp-config read from
    /// this ConfigMap (and checked to be there and valid).
    pub bgp_config_map: BgpConfigMapRef,
    /// `--lb-class`: the classes the allocator serves (empty: Services without one).
    pub lb_classes: Vec<String>,
    /// `--allocator-lease`: the Lease read to say whether an allocator of ours runs.
    pub allocator_lease: LeaseRef,
}

/// Diagnoses, writes the table to `out` and trouble to `err`; the exit status.
pub fn run(
    request: &DoctorRequest,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> u8 {
    let config = match &request.bgp_config {
        None => None,
        Some(path) => match read_bgp_config(path) {
            Ok(config) => Some(config),
            Err(e) => {
                let _ = writeln!(err, "podcidr-speaker doctor: {e}");
                return EXIT_UNREADABLE;
            }
        },
    };
    let config = config.as_ref();
    match &request.cluster_state {
        Some(path) => command_file(path, request.ipam, &request.lb_classes, config, out, err),
        None => match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime.block_on(command_in_cluster(
                &request.cilium_config,
                request.ipam,
                Allocator {
                    lb_classes: &request.lb_classes,
                    lease: &request.allocator_lease,
                },
                match config {
                    Some(c) => BgpInput::Given(c),
                    None => BgpInput::ConfigMap(&request.bgp_config_map),
                },
                out,
                err,
            )),
            Err(e) => {
                let _ = writeln!(err, "podcidr-speaker doctor: starting the runtime: {e}");
                EXIT_UNREADABLE
            }
        },
    }
}

/// `--bgp-config FILE`: the config `plan` and the speaker read (raw YAML or a ConfigMap
/// manifest), or why it cannot be used.
fn read_bgp_config(path: &Path) -> Result<Config, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--bgp-config {}: {e}", path.display()))?;
    crate::config::parse(&text).map_err(|e| {
        format!(
            "--bgp-config {}: not a valid bgp-config (`podcidr-speaker check` says why): {e}",
            path.display()
        )
    })
}

/// `doctor --cluster-state PATH`: prints the diagnosis; the exit status. With a
/// bgp-config that has address-pools, the allocator runs from scratch over the files'
/// Services (for `lb_classes`, as `allocate --lb-class`), as in a cluster.
pub fn command_file(
    path: &Path,
    ipam: IpamOverride,
    lb_classes: &[String],
    config: Option<&Config>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    match load_files(path) {
        Ok(files) => {
            let mut d = diagnose(&files.state, ipam);
            let lb = lb_findings(&d, &files.lb, config);
            d.warnings.extend(lb);
            if let Some(c) = config {
                d.bgp_config = BgpConfigCheck::valid("--bgp-config", c);
                d.allocator = allocator(&d, &files.lb, c);
                if !c.pools.is_empty() && !files.lb.services.is_empty() {
                    // The files loaded once already; a second read failing now is
                    // said, and the guess above stands.
                    match crate::sources::file::load_services(path) {
                        Ok(services) => {
                            let view =
                                AllocationView::from_scratch(&c.pools, lb_classes, &services);
                            d.allocation = Some(AllocationCheck::new(view, LeaseCheck::Files));
                        }
                        Err(e) => d.warnings.push(format!(
                            "the Services could not be read again for the allocator's answer: {e}"
                        )),
                    }
                }
            }
            report(&d, out, err)
        }
        Err(e) => {
            let _ = writeln!(err, "podcidr-speaker doctor: {e}");
            EXIT_UNREADABLE
        }
    }
}

/// `doctor` without a path: reads the cluster once through KUBECONFIG or the in-cluster
/// service account; the exit status.
pub async fn command_in_cluster(
    cilium_config: &str,
    ipam: IpamOverride,
    allocator: Allocator<'_>,
    bgp: BgpInput<'_>,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> u8 {
    let Some(cilium_config) = parse_config_map_ref(cilium_config) else {
        let _ = writeln!(
            err,
            "podcidr-speaker doctor: --cilium-config {cilium_config:?} must be NAMESPACE/NAME"
        );
        return EXIT_UNREADABLE;
    };
    let client = match kube_source::client(READ_TIMEOUT).await {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(
                err,
                "podcidr-speaker doctor: no cluster to read (KUBECONFIG or in-cluster): {e}; \
                 pass --cluster-state PATH to diagnose files"
            );
            return EXIT_UNREADABLE;
        }
    };
    match bgp {
        BgpInput::Given(config) => {
            diagnose_in_cluster(
                client,
                &cilium_config,
                ipam,
                allocator,
                Some(config),
                out,
                err,
            )
            .await
        }
        BgpInput::ConfigMap(map) => {
            diagnose_cluster_setup(client, &cilium_config, map, ipam, allocator, out, err).await
        }
    }
}

/// What the in-cluster allocation check runs as: the Services of `lb_classes` (empty:
/// those without a class), as `allocate --lb-class`, and the Lease that says whether an
/// allocator of ours runs, as `allocate --lease`.
#[derive(Debug, Clone, Copy)]
pub struct Allocator<'a> {
    pub lb_classes: &'a [String],
    pub lease: &'a LeaseRef,
}

/// Where `doctor` in a cluster gets the bgp-config from.
#[derive(Debug, Clone, Copy)]
pub enum BgpInput<'a> {
    /// `--bgp-config FILE`, already read.
    Given(&'a Config),
    /// The ConfigMap `run` reads (`--bgp-config-map`).
    ConfigMap(&'a BgpConfigMapRef),
}

/// `doctor` in a cluster as it is set up for the speaker: the bgp-config ConfigMap (is it
/// there, is it valid) read first, then the cluster as [`diagnose_in_cluster`] reads it
/// with that config; the exit status.
pub async fn diagnose_cluster_setup(
    client: Client,
    cilium_config: &ConfigMapRef,
    bgp_config_map: &BgpConfigMapRef,
    ipam: IpamOverride,
    allocator: Allocator<'_>,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> u8 {
    let source = bgp_config_map.to_string();
    let (config, check) = match load_bgp_config(client.clone(), bgp_config_map).await {
        Ok(None) => (None, BgpConfigCheck::Missing { source }),
        Ok(Some(text)) => match crate::config::parse(&text) {
            Ok(c) => {
                let check = BgpConfigCheck::valid(&source, &c);
                (Some(c), check)
            }
            Err(e) => (
                None,
                BgpConfigCheck::Invalid {
                    source,
                    errors: e.to_string(),
                },
            ),
        },
        Err(e) => (
            None,
            BgpConfigCheck::Unreadable {
                source,
                reason: e.to_string(),
            },
        ),
    };
    read_and_report(
        client,
        cilium_config,
        ipam,
        allocator,
        config.as_ref(),
        check,
        out,
        err,
    )
    .await
}

/// Reads the cluster with `client`, prints the diagnosis; the exit status. The
/// allocation check runs as `allocator` says.
pub async fn diagnose_in_cluster(
    client: Client,
    cilium_config: &ConfigMapRef,
    ipam: IpamOverride,
    allocator: Allocator<'_>,
    config: Option<&Config>,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> u8 {
    let check = match config {
        Some(c) => BgpConfigCheck::valid("--bgp-config", c),
        None => BgpConfigCheck::NotChecked,
    };
    read_and_report(
        client,
        cilium_config,
        ipam,
        allocator,
        config,
        check,
        out,
        err,
    )
    .await
}

#[allow(clippy::too_many_arguments)] // the inputs of one diagnosis, passed through
async fn read_and_report(
    client: Client,
    cilium_config: &ConfigMapRef,
    ipam: IpamOverride,
    run_as: Allocator<'_>,
    config: Option<&Config>,
    check: BgpConfigCheck,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> u8 {
    match load_in_cluster(client.clone(), cilium_config).await {
        Ok((state, mut unreadable, mut notes)) => {
            let (lb, services) =
                match load_services(client.clone(), &mut unreadable, &mut notes).await {
                    Ok(found) => found,
                    Err(e) => {
                        let _ = writeln!(err, "podcidr-speaker doctor: {e}");
                        return EXIT_UNREADABLE;
                    }
                };
            let mut d = diagnose(&state, ipam);
            d.unreadable = unreadable.iter().map(ToString::to_string).collect();
            d.warnings.extend(notes);
            d.warnings.extend(lb_findings(&d, &lb, config));
            d.bgp_config = check;
            d.allocator = config.and_then(|c| allocator(&d, &lb, c));
            // The allocator's answer replaces the guess wherever it can be had: a
            // config with address pools (of any protocol: MetalLB allocates from
            // layer2 pools too) and the Services listed.
            if let (Some(c), Some(services)) =
                (config.filter(|c| !c.pools.is_empty()), services.as_ref())
            {
                let view = AllocationView::from_scratch(&c.pools, run_as.lb_classes, services);
                let lease = load_allocator_lease(client, run_as.lease).await;
                d.allocation = Some(AllocationCheck::new(view, lease));
            }
            report(&d, out, err)
        }
        Err(e) => {
            let _ = writeln!(err, "podcidr-speaker doctor: {e}");
            EXIT_UNREADABLE
        }
    }
}

fn report(d: &Diagnosis, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    if let Err(e) = write!(out, "{d}") {
        let _ = writeln!(err, "podcidr-speaker doctor: writing the output: {e}");
        return EXIT_UNREADABLE;
    }
    d.exit_code()
}
