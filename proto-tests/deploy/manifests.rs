//! The deployment manifests under deploy/ (issue #8): every install renders with
//! `kubectl kustomize`, its image is pinned to the crate's version and pulled
//! IfNotPresent, its RBAC grants exactly the minimum, its DaemonSet is least-privileged and
//! safe to roll, and its container args parse with the binary's own CLI.
//!
//! Each check is a plain function over `serde_yaml::Value`s, proven on an inline bad
//! manifest as well as run on the real ones. Rendering needs `kubectl`; the tests that
//! render skip with a printed reason when it is absent, the others always run.
//! Schema validation of every object is scripts/validate-manifests, not this file.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use podcidr_speaker::cli::{Cli, Command as CliCommand};
use serde::Deserialize;
use serde_yaml::Value;

/// Every install a platform team can apply, and what distinguishes it.
struct Install {
    /// Kustomization directory, relative to the crate root.
    dir: &'static str,
    /// Namespace and name of the bgp-config ConfigMap the speaker may read.
    config_map: (&'static str, &'static str),
    /// Whether the speaker listens on port 179 (the only case that adds a capability).
    listens: bool,
    /// Whether the install carries the Prometheus Operator PodMonitor.
    monitored: bool,
    /// Whether the install runs the LoadBalancer IP allocator (issue 30).
    allocator: bool,
}

const CILIUM_CONFIG: (&str, &str) = ("kube-system", "bgp-config");
/// The Secret the manifests let the speaker read TCP MD5 keys from (`password-secret`).
const MD5_SECRET: &str = "bgp-peer-passwords";
const METALLB_CONFIG: (&str, &str) = ("metallb-system", "config");

const INSTALLS: &[Install] = &[
    Install {
        dir: "deploy",
        config_map: CILIUM_CONFIG,
        listens: false,
        monitored: false,
        allocator: false,
    },
    Install {
        dir: "deploy/overlays/cilium",
        config_map: CILIUM_CONFIG,
        listens: false,
        monitored: false,
        allocator: false,
    },
    Install {
        dir: "deploy/overlays/metallb",
        config_map: METALLB_CONFIG,
        listens: false,
        monitored: false,
        allocator: false,
    },
    Install {
        dir: "deploy/overlays/prometheus-operator",
        config_map: CILIUM_CONFIG,
        listens: false,
        monitored: true,
        allocator: false,
    },
    Install {
        dir: "deploy/overlays/listen-179",
        config_map: CILIUM_CONFIG,
        listens: true,
        monitored: false,
        allocator: false,
    },
    Install {
        dir: "deploy/overlays/allocator",
        config_map: CILIUM_CONFIG,
        listens: false,
        monitored: false,
        allocator: true,
    },
    Install {
        dir: "deploy/overlays/metallb-allocator",
        config_map: METALLB_CONFIG,
        listens: false,
        monitored: false,
        allocator: true,
    },
];

const SPEAKER_NAMESPACE: &str = "kube-system";
const SPEAKER_ACCOUNT: &str = "podcidr-speaker";
/// The allocator's own ServiceAccount, beside the speaker's: it shares no permission.
const ALLOCATOR_ACCOUNT: &str = "podcidr-speaker-allocator";
/// The Lease the allocator's replicas elect a leader on (`--lease`), in their namespace.
const ALLOCATOR_LEASE: &str = "podcidr-speaker-allocator";
const RENDER_TIMEOUT: Duration = Duration::from_secs(60);
const DRY_RUN_TIMEOUT: Duration = Duration::from_secs(20);

/// Values the kubelet would give the downward-API env vars in the args test. 192.0.2.0/24
/// is TEST-NET-1 (RFC 5737): `--dry-run` never dials, and nothing could answer there.
const FAKE_NODE_NAME: &str = "node-a.test";
const FAKE_HOST_IP: &str = "192.0.2.10";
/// The pod name the downward API would give an allocator replica (`metadata.name`).
const FAKE_POD_NAME: &str = "podcidr-speaker-allocator-7c9d5b8f6-x2x7k";

#[test]
fn every_overlay_is_checked() {
    let overlays = crate_root().join("deploy/overlays");
    let on_disk: BTreeSet<String> = std::fs::read_dir(&overlays)
        .unwrap_or_else(|e| panic!("reading {}: {e}", overlays.display()))
        .map(|entry| {
            let entry = entry.expect("directory entry");
            format!("deploy/overlays/{}", entry.file_name().to_string_lossy())
        })
        .collect();
    let checked: BTreeSet<String> = INSTALLS
        .iter()
        .filter(|install| install.dir.starts_with("deploy/overlays/"))
        .map(|install| install.dir.to_string())
        .collect();
    assert_eq!(
        on_disk, checked,
        "every overlay must have an entry in INSTALLS (and every entry an overlay)"
    );
}

#[test]
fn every_install_renders_the_expected_objects() {
    let Some(renders) = render_all() else { return };
    for (install, objects) in renders {
        let count = |kind: &str| objects.iter().filter(|o| kind_of(o) == kind).count();
        assert_eq!(count("DaemonSet"), 1, "{}: one DaemonSet", install.dir);
        let allocator = usize::from(install.allocator);
        assert_eq!(
            count("ServiceAccount"),
            1 + allocator,
            "{}: the speaker's ServiceAccount, and the allocator's where it runs",
            install.dir
        );
        for kind in ["Deployment", "PodDisruptionBudget"] {
            assert_eq!(
                count(kind),
                allocator,
                "{}: a {kind} only with the allocator",
                install.dir
            );
        }
        let monitors = count("PodMonitor");
        assert_eq!(
            monitors,
            usize::from(install.monitored),
            "{}: PodMonitor only in the Prometheus Operator install",
            install.dir
        );
        let unscraped = unscraped_workloads(&objects);
        assert!(unscraped.is_empty(), "{}: {unscraped:#?}", install.dir);
        let ds = the_daemonset(&objects);
        let args = container_args(ds);
        let config_flag = format!(
            "--bgp-config-map={}/{}",
            install.config_map.0, install.config_map.1
        );
        assert_eq!(
            args.iter()
                .filter(|a| a.starts_with("--bgp-config-map="))
                .count(),
            1,
            "{}: exactly one --bgp-config-map in {args:?}",
            install.dir
        );
        assert!(
            args.iter()
                .any(|a| a == &config_flag || a.starts_with(&format!("{config_flag}:"))),
            "{}: the DaemonSet must read {config_flag}, args are {args:?}",
            install.dir
        );
    }
}

#[test]
fn images_are_pinned_to_the_crate_version_in_every_install() {
    let Some(renders) = render_all() else { return };
    let version = env!("CARGO_PKG_VERSION");
    for (install, objects) in renders {
        let problems = image_problems(&objects);
        assert!(problems.is_empty(), "{}: {problems:#?}", install.dir);
        let expected_tag = if install.listens {
            format!("{version}-listen")
        } else {
            version.to_string()
        };
        let containers = containers_of(the_daemonset(&objects));
        assert!(!containers.is_empty(), "{}: no containers", install.dir);
        for container in containers {
            let image = str_at(container, &["image"]).unwrap_or_default();
            assert_eq!(
                image_tag(image).as_deref(),
                Some(expected_tag.as_str()),
                "{}: image {image} must carry the crate version (Cargo.toml) as its tag",
                install.dir
            );
        }
    }
}

#[test]
fn images_are_pinned_in_every_manifest_file() {
    let mut files = Vec::new();
    yaml_files(&crate_root().join("deploy"), &mut files);
    assert!(
        files.len() >= 10,
        "found only {} YAML files under deploy/",
        files.len()
    );
    let mut containers_seen = 0;
    for file in files {
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let docs = parse_docs(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        containers_seen += docs.iter().map(count_containers).sum::<usize>();
        let mut problems = image_problems(&docs);
        for doc in &docs {
            problems.extend(kustomize_image_problems(doc));
        }
        assert!(problems.is_empty(), "{}: {problems:#?}", file.display());
    }
    assert!(containers_seen >= 1, "no container found under deploy/");
}

#[test]
fn image_check_rejects_unpinned_images() {
    let good = container_doc(
        "ghcr.io/podcidr/podcidr-speaker:0.1.0",
        Some("IfNotPresent"),
    );
    assert_eq!(image_problems(&[good]), Vec::<String>::new());
    let with_digest = container_doc(
        "ghcr.io/podcidr/podcidr-speaker:0.1.0@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        Some("IfNotPresent"),
    );
    assert_eq!(image_problems(&[with_digest]), Vec::<String>::new());

    let bad = [
        ("ghcr.io/podcidr/podcidr-speaker", Some("IfNotPresent"), "no tag"),
        ("registry.local:5000/podcidr-speaker", Some("IfNotPresent"), "no tag"),
        ("ghcr.io/podcidr/podcidr-speaker:latest", Some("IfNotPresent"), "latest"),
        ("ghcr.io/podcidr/podcidr-speaker:LATEST", Some("IfNotPresent"), "latest"),
        ("ghcr.io/podcidr/podcidr-speaker:main", Some("IfNotPresent"), "version"),
        ("ghcr.io/podcidr/podcidr-speaker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Some("IfNotPresent"), "no tag"),
        ("ghcr.io/podcidr/podcidr-speaker:0.1.0@sha256:<fill-in>", Some("IfNotPresent"), "digest"),
        ("ghcr.io/podcidr/podcidr-speaker:0.1.0", None, "imagePullPolicy"),
        ("ghcr.io/podcidr/podcidr-speaker:0.1.0", Some("Always"), "imagePullPolicy"),
    ];
    for (image, policy, why) in bad {
        let problems = image_problems(&[container_doc(image, policy)]);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "{image} with pull policy {policy:?} must be rejected for {why:?}, got {problems:?}"
        );
    }

    // An init container and a CronJob's nested pod template are found too.
    let nested = parse_docs(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: x}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          initContainers:\n            - {name: i, image: busybox, imagePullPolicy: IfNotPresent}\n          containers: []\n",
    )
    .expect("inline manifest parses");
    assert!(
        image_problems(&nested).iter().any(|p| p.contains("no tag")),
        "a nested untagged init container must be found"
    );

    let kustomization =
        parse_docs("images:\n  - name: ghcr.io/podcidr/podcidr-speaker\n    newTag: latest\n")
            .expect("inline kustomization parses");
    assert!(
        !kustomize_image_problems(&kustomization[0]).is_empty(),
        "a kustomize images: entry with newTag latest must be rejected"
    );
}

#[test]
fn dockerfile_images_are_pinned_and_runtime_is_non_root() {
    let path = crate_root().join("Dockerfile");
    let text = std::fs::read_to_string(&path).expect("Dockerfile at the crate root");
    assert_eq!(dockerfile_problems(&text), Vec::<String>::new());
    let stages = dockerfile_stages(&text);
    assert_eq!(
        stages.last().map(|s| s.name.as_str()),
        Some("runtime"),
        "a plain `docker build` must produce the runtime stage"
    );
    assert!(
        stages.iter().any(|s| s.name == "runtime-listen"),
        "the listen-179 overlay needs the runtime-listen target"
    );

    let bad = [
        ("FROM rust AS build\nFROM gcr.io/distroless/cc-debian12:nonroot AS runtime\nUSER 65532\n", "no tag"),
        ("FROM rust:latest AS build\nFROM gcr.io/distroless/cc-debian12:nonroot AS runtime\nUSER 65532\n", "latest"),
        ("FROM rust:1.95-bookworm AS build\nFROM gcr.io/distroless/cc-debian12:nonroot AS runtime\n", "USER"),
        ("FROM rust:1.95-bookworm AS build\nFROM gcr.io/distroless/cc-debian12:nonroot AS runtime\nUSER nonroot\n", "USER"),
        ("FROM rust:1.95-bookworm AS build\nFROM gcr.io/distroless/cc-debian12:nonroot AS runtime\nUSER 0:0\n", "USER"),
        ("FROM rust:1.95-bookworm AS build\nFROM debian:12 AS base\nUSER 65532\nFROM base AS runtime\nUSER root\n", "USER"),
    ];
    for (dockerfile, why) in bad {
        let problems = dockerfile_problems(dockerfile);
        assert!(
            problems.iter().any(|p| p.contains(why)),
            "{dockerfile:?} must be rejected for {why:?}, got {problems:?}"
        );
    }
    // USER is inherited from an earlier stage of the same Dockerfile.
    let inherited = "FROM debian:12 AS base\nUSER 65532:65532\nFROM base AS runtime\nCOPY x /x\n";
    assert_eq!(dockerfile_problems(inherited), Vec::<String>::new());
}

#[test]
fn rbac_is_exactly_the_minimum_in_every_install() {
    let Some(renders) = render_all() else { return };
    for (install, objects) in renders {
        let granted = speaker_grants(&objects)
            .unwrap_or_else(|problems| panic!("{}: {problems:#?}", install.dir));
        let expected = expected_grants(install.config_map);
        assert_eq!(
            granted,
            expected,
            "{}: RBAC must grant exactly the minimum; extra: {:#?} missing: {:#?}",
            install.dir,
            granted.difference(&expected).collect::<Vec<_>>(),
            expected.difference(&granted).collect::<Vec<_>>()
        );
        assert_allocator_grants(install.dir, &objects, install.allocator, install.config_map);
        let ds = the_daemonset(&objects);
        assert_eq!(
            str_at(ds, &["spec", "template", "spec", "serviceAccountName"]),
            Some(SPEAKER_ACCOUNT),
            "{}: the DaemonSet must run as the speaker's ServiceAccount",
            install.dir
        );
        assert_eq!(
            str_at(ds, &["metadata", "namespace"]),
            Some(SPEAKER_NAMESPACE),
            "{}: the DaemonSet must live beside its ServiceAccount",
            install.dir
        );
    }
}

/// Secrets are granted by name only, get and watch only: no rule of any install lets
/// the speaker list Secrets or read one it was not given.
#[test]
fn rbac_grants_secrets_by_name_only() {
    let Some(renders) = render_all() else { return };
    for (install, objects) in renders {
        let granted = speaker_grants(&objects)
            .unwrap_or_else(|problems| panic!("{}: {problems:#?}", install.dir));
        let secrets: Vec<&Grant> = granted.iter().filter(|g| g.resource == "secrets").collect();
        assert!(!secrets.is_empty(), "{}: no Secret granted", install.dir);
        for g in secrets {
            assert_eq!(g.name, MD5_SECRET, "{}: {g:?}", install.dir);
            assert!(
                ["get", "watch"].contains(&g.verb.as_str()),
                "{}: {g:?}",
                install.dir
            );
            assert_eq!(g.scope, install.config_map.0, "{}: {g:?}", install.dir);
        }
    }
}

#[test]
fn rbac_check_rejects_extra_missing_and_widened_rules() {
    let good = parse_docs(GOOD_RBAC).expect("inline RBAC parses");
    let expected = expected_grants(CILIUM_CONFIG);
    assert_eq!(speaker_grants(&good), Ok(expected.clone()));

    type Mutation = fn(&mut Vec<Value>);
    let mutations: [(&str, Mutation); 13] = [
        ("secrets without resourceNames", |docs| {
            remove_key(at_mut(&mut docs[2], &["rules", "1"]), "resourceNames");
        }),
        ("list on the named secret", |docs| {
            push_str(at_mut(&mut docs[2], &["rules", "1", "verbs"]), "list");
        }),
        ("another secret", |docs| {
            push_str(
                at_mut(&mut docs[2], &["rules", "1", "resourceNames"]),
                "kube-system-admin-token",
            );
        }),
        ("an extra verb on nodes", |docs| {
            push_str(at_mut(&mut docs[0], &["rules", "0", "verbs"]), "update");
        }),
        ("a new resource", |docs| {
            push_str(
                at_mut(&mut docs[0], &["rules", "0", "resources"]),
                "secrets",
            );
        }),
        ("configmaps without resourceNames", |docs| {
            remove_key(at_mut(&mut docs[2], &["rules", "0"]), "resourceNames");
        }),
        ("a wildcard verb", |docs| {
            *at_mut(&mut docs[0], &["rules", "1", "verbs"]) = yaml("[\"*\"]");
        }),
        ("a missing rule (events)", |docs| {
            let rules = at_mut(&mut docs[5], &["rules"]);
            rules.as_sequence_mut().expect("rules list").remove(0);
        }),
        ("events granted cluster-wide", |docs| {
            let rule =
                yaml("{apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}");
            at_mut(&mut docs[0], &["rules"])
                .as_sequence_mut()
                .expect("rules list")
                .push(rule);
            docs.truncate(5);
        }),
        ("a binding to another subject", |docs| {
            let subject = yaml(
                "{kind: Group, name: system:authenticated, apiGroup: rbac.authorization.k8s.io}",
            );
            at_mut(&mut docs[1], &["subjects"])
                .as_sequence_mut()
                .expect("subjects list")
                .push(subject);
        }),
        ("a binding to a role outside the manifests", |docs| {
            *at_mut(&mut docs[1], &["roleRef", "name"]) = yaml("view");
        }),
        ("the ConfigMap rule granted cluster-wide", |docs| {
            *at_mut(&mut docs[3], &["kind"]) = yaml("ClusterRoleBinding");
            remove_key(at_mut(&mut docs[3], &["metadata"]), "namespace");
            *at_mut(&mut docs[3], &["roleRef", "kind"]) = yaml("ClusterRole");
            *at_mut(&mut docs[2], &["kind"]) = yaml("ClusterRole");
            remove_key(at_mut(&mut docs[2], &["metadata"]), "namespace");
        }),
        ("non-resource URLs", |docs| {
            let rule = yaml("{nonResourceURLs: [/metrics], verbs: [get]}");
            at_mut(&mut docs[0], &["rules"])
                .as_sequence_mut()
                .expect("rules list")
                .push(rule);
        }),
    ];
    for (what, mutate) in mutations {
        let mut docs = good.clone();
        mutate(&mut docs);
        let verdict = speaker_grants(&docs);
        assert!(
            verdict.as_ref() != Ok(&expected),
            "the RBAC check accepted {what}: {verdict:#?}"
        );
    }
}

#[test]
fn daemonset_is_least_privileged_and_safe_in_every_install() {
    let Some(renders) = render_all() else { return };
    for (install, objects) in renders {
        let problems = daemonset_problems(the_daemonset(&objects), install.listens);
        assert!(problems.is_empty(), "{}: {problems:#?}", install.dir);
    }
}

#[test]
fn daemonset_check_rejects_unsafe_pod_specs() {
    let path = crate_root().join("deploy/base/daemonset.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/base/daemonset.yaml");
    let good = parse_docs(&text).expect("base DaemonSet parses").remove(0);
    assert_eq!(daemonset_problems(&good, false), Vec::<String>::new());
    // The listen install must add NET_BIND_SERVICE, so the base alone does not pass as it.
    assert!(!daemonset_problems(&good, true).is_empty());

    const POD: &[&str] = &["spec", "template", "spec"];
    const CONTAINER: &[&str] = &["spec", "template", "spec", "containers", "0"];
    let pod = |tail: &[&'static str]| [POD, tail].concat();
    let container = |tail: &[&'static str]| [CONTAINER, tail].concat();
    let cases: Vec<(&str, Vec<&str>, Option<&str>)> = vec![
        ("no host network", pod(&["hostNetwork"]), Some("false")),
        ("no downward-API node name", container(&["env"]), Some("[]")),
        ("no tolerations", pod(&["tolerations"]), None),
        ("only a control-plane toleration", pod(&["tolerations"]), Some("[{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]")),
        ("no priority class", pod(&["priorityClassName"]), None),
        ("two nodes at a time", vec!["spec", "updateStrategy", "rollingUpdate", "maxUnavailable"], Some("2")),
        ("surge", vec!["spec", "updateStrategy", "rollingUpdate", "maxSurge"], Some("1")),
        ("OnDelete updates", vec!["spec", "updateStrategy"], Some("{type: OnDelete}")),
        ("liveness on the wrong path", container(&["livenessProbe", "httpGet", "path"]), Some("/metrics")),
        ("no readiness probe", container(&["readinessProbe"]), None),
        ("probe on another port", container(&["readinessProbe", "httpGet", "port"]), Some("8080")),
        ("no limits", container(&["resources", "limits"]), None),
        ("request above limit", container(&["resources", "requests", "memory"]), Some("256Mi")),
        ("no grace period", pod(&["terminationGracePeriodSeconds"]), Some("5")),
        ("root user", pod(&["securityContext", "runAsUser"]), Some("0")),
        ("runAsNonRoot off", pod(&["securityContext", "runAsNonRoot"]), Some("false")),
        ("no seccomp", pod(&["securityContext", "seccompProfile"]), None),
        ("unconfined seccomp", pod(&["securityContext", "seccompProfile", "type"]), Some("Unconfined")),
        ("writable root filesystem", container(&["securityContext", "readOnlyRootFilesystem"]), Some("false")),
        ("privilege escalation", container(&["securityContext", "allowPrivilegeEscalation"]), Some("true")),
        ("privileged", container(&["securityContext", "privileged"]), Some("true")),
        ("capabilities kept", container(&["securityContext", "capabilities", "drop"]), Some("[NET_RAW]")),
        ("NET_ADMIN added", container(&["securityContext", "capabilities", "add"]), Some("[NET_ADMIN]")),
        ("NET_BIND_SERVICE without listening", container(&["securityContext", "capabilities", "add"]), Some("[NET_BIND_SERVICE]")),
        ("host PID namespace", pod(&["hostPID"]), Some("true")),
        ("a hostPath volume", pod(&["volumes"]), Some("[{name: root, hostPath: {path: /}}]")),
        ("metrics address off the probed port", container(&["args", "5"]), Some("--metrics-addr=0.0.0.0:9999")),
        ("a graceful shutdown longer than the grace period", container(&["args", "6"]), Some("--graceful-shutdown-time=25s")),
    ];
    for (what, path, value) in cases {
        let mut ds = good.clone();
        match value {
            Some(v) => *at_mut(&mut ds, &path) = yaml(v),
            None => {
                let (key, parent) = path.split_last().expect("non-empty path");
                remove_key(at_mut(&mut ds, parent), key);
            }
        }
        assert!(
            !daemonset_problems(&ds, false).is_empty(),
            "the DaemonSet check accepted {what}"
        );
    }

    let mut listening = good.clone();
    *at_mut(
        &mut listening,
        &container(&["securityContext", "capabilities", "add"]),
    ) = yaml("[NET_BIND_SERVICE]");
    assert_eq!(daemonset_problems(&listening, true), Vec::<String>::new());
}

#[test]
fn allocator_is_least_privileged_and_highly_available_where_it_runs() {
    let Some(renders) = render_all() else { return };
    for (install, objects) in renders.iter().filter(|(i, _)| i.allocator) {
        let problems = allocator_problems(objects, install.config_map);
        assert!(problems.is_empty(), "{}: {problems:#?}", install.dir);
        assert_allocator_args_parse(install.dir, objects);
    }
    assert!(
        INSTALLS.iter().any(|i| i.allocator),
        "no install runs the allocator: the check above checked nothing"
    );
}

/// The allocator's args, with the env expanded as the kubelet would (POD_NAME from the
/// downward API), parse with the binary's own clap definition of `allocate`; the same
/// args plus an unknown flag do not. In process: `allocate` has no --dry-run, and run
/// for real it would wait for an API server.
fn assert_allocator_args_parse(label: &str, objects: &[Value]) {
    let deploy = objects
        .iter()
        .find(|o| kind_of(o) == "Deployment")
        .unwrap_or_else(|| panic!("{label}: no allocator Deployment"));
    for container in containers_of(deploy) {
        let env = container_env(container).unwrap_or_else(|e| panic!("{label}: {e}"));
        let mut argv = vec!["podcidr-speaker".to_string()];
        argv.extend(
            str_list(container.get("args"))
                .iter()
                .map(|a| expand_env(a, &env).unwrap_or_else(|e| panic!("{label}: {e}"))),
        );
        let cli = Cli::try_parse_from(&argv)
            .unwrap_or_else(|e| panic!("{label}: `{}` does not parse:\n{e}", argv.join(" ")));
        let CliCommand::Allocate(allocate) = cli.command else {
            panic!("{label}: `{}` is not the allocate command", argv.join(" "));
        };
        // What the command checks before it starts: timings that let two replicas lead
        // at once are refused.
        let settings = allocate
            .settings()
            .unwrap_or_else(|e| panic!("{label}: `{}`: {e}", argv.join(" ")));
        assert_eq!(settings.identity, FAKE_POD_NAME, "{label}");
        let mut bogus = argv.clone();
        bogus.insert(2, "--no-such-flag-in-any-manifest".into());
        assert!(
            Cli::try_parse_from(&bogus).is_err(),
            "{label}: the CLI accepted an unknown flag"
        );
    }
}

/// The allocator's Deployment and PodDisruptionBudget as deploy/components/allocator
/// writes them, for the negative cases.
fn allocator_component() -> Vec<Value> {
    let dir = crate_root().join("deploy/components/allocator");
    ["deployment.yaml", "poddisruptionbudget.yaml"]
        .iter()
        .flat_map(|file| {
            let text =
                std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            parse_docs(&text).unwrap_or_else(|e| panic!("{file}: {e}"))
        })
        .collect()
}

#[test]
fn allocator_check_rejects_unsafe_or_fragile_specs() {
    let good = allocator_component();
    assert_eq!(
        allocator_problems(&good, CILIUM_CONFIG),
        Vec::<String>::new()
    );
    // The component reads the Cilium convention's bgp-config, not MetalLB's.
    assert!(!allocator_problems(&good, METALLB_CONFIG).is_empty());

    const POD: &[&str] = &["0", "spec", "template", "spec"];
    const CONTAINER: &[&str] = &["0", "spec", "template", "spec", "containers", "0"];
    let pod = |tail: &[&'static str]| [POD, tail].concat();
    let container = |tail: &[&'static str]| [CONTAINER, tail].concat();
    let cases: Vec<(&str, Vec<&str>, Option<&str>)> = vec![
        ("one replica", vec!["0", "spec", "replicas"], Some("1")),
        (
            "an update that stops a replica first",
            vec!["0", "spec", "strategy", "rollingUpdate", "maxUnavailable"],
            Some("1"),
        ),
        ("host network", pod(&["hostNetwork"]), Some("true")),
        ("host PID namespace", pod(&["hostPID"]), Some("true")),
        (
            "a hostPath volume",
            pod(&["volumes"]),
            Some("[{name: root, hostPath: {path: /}}]"),
        ),
        (
            "the speaker's ServiceAccount",
            pod(&["serviceAccountName"]),
            Some("podcidr-speaker"),
        ),
        (
            "replicas not spread",
            pod(&["topologySpreadConstraints"]),
            None,
        ),
        (
            "spread over zones only",
            pod(&["topologySpreadConstraints", "0", "topologyKey"]),
            Some("topology.kubernetes.io/zone"),
        ),
        (
            "spread counting other pods",
            pod(&[
                "topologySpreadConstraints",
                "0",
                "labelSelector",
                "matchLabels",
                "app.kubernetes.io/component",
            ]),
            Some("speaker"),
        ),
        (
            "root user",
            pod(&["securityContext", "runAsUser"]),
            Some("0"),
        ),
        (
            "runAsNonRoot off",
            pod(&["securityContext", "runAsNonRoot"]),
            Some("false"),
        ),
        (
            "unconfined seccomp",
            pod(&["securityContext", "seccompProfile", "type"]),
            Some("Unconfined"),
        ),
        (
            "the -listen image",
            container(&["image"]),
            Some("ghcr.io/podcidr/podcidr-speaker:0.1.0-listen"),
        ),
        (
            "another version",
            container(&["image"]),
            Some("ghcr.io/podcidr/podcidr-speaker:0.0.9"),
        ),
        (
            "not the allocate role",
            container(&["args", "0"]),
            Some("run"),
        ),
        (
            "a fixed identity",
            container(&["args", "1"]),
            Some("--identity=allocator"),
        ),
        (
            "the identity from the node name",
            container(&["env", "0", "valueFrom", "fieldRef", "fieldPath"]),
            Some("spec.nodeName"),
        ),
        (
            "the Lease in another namespace",
            container(&["args", "2"]),
            Some("--lease=default/podcidr-speaker-allocator"),
        ),
        (
            "another Lease",
            container(&["args", "2"]),
            Some("--lease=kube-system/other"),
        ),
        (
            "metrics address off the probed port",
            container(&["args", "3"]),
            Some("--metrics-addr=0.0.0.0:9999"),
        ),
        (
            "another bgp-config",
            container(&["args", "5"]),
            Some("--bgp-config-map=default/bgp-config"),
        ),
        (
            "liveness on the wrong path",
            container(&["livenessProbe", "httpGet", "path"]),
            Some("/readyz"),
        ),
        ("no readiness probe", container(&["readinessProbe"]), None),
        (
            "probe on another port",
            container(&["readinessProbe", "httpGet", "port"]),
            Some("8080"),
        ),
        ("no limits", container(&["resources", "limits"]), None),
        (
            "request above limit",
            container(&["resources", "requests", "memory"]),
            Some("1Gi"),
        ),
        (
            "writable root filesystem",
            container(&["securityContext", "readOnlyRootFilesystem"]),
            Some("false"),
        ),
        (
            "privilege escalation",
            container(&["securityContext", "allowPrivilegeEscalation"]),
            Some("true"),
        ),
        (
            "privileged",
            container(&["securityContext", "privileged"]),
            Some("true"),
        ),
        (
            "capabilities kept",
            container(&["securityContext", "capabilities", "drop"]),
            Some("[NET_RAW]"),
        ),
        (
            "a capability added",
            container(&["securityContext", "capabilities", "add"]),
            Some("[NET_BIND_SERVICE]"),
        ),
        (
            "root in the container",
            container(&["securityContext", "runAsUser"]),
            Some("0"),
        ),
        (
            "a budget of two",
            vec!["1", "spec", "maxUnavailable"],
            Some("2"),
        ),
        (
            "a budget for the speakers",
            vec![
                "1",
                "spec",
                "selector",
                "matchLabels",
                "app.kubernetes.io/component",
            ],
            Some("speaker"),
        ),
    ];
    for (what, path, value) in cases {
        let mut root = Value::Sequence(good.clone());
        match value {
            Some(v) => *at_mut(&mut root, &path) = yaml(v),
            None => {
                let (key, parent) = path.split_last().expect("non-empty path");
                remove_key(at_mut(&mut root, parent), key);
            }
        }
        let docs = root.as_sequence().expect("a list").clone();
        assert!(
            !allocator_problems(&docs, CILIUM_CONFIG).is_empty(),
            "the allocator check accepted {what}"
        );
    }
    let without_budget: Vec<Value> = good[..1].to_vec();
    assert!(
        !allocator_problems(&without_budget, CILIUM_CONFIG).is_empty(),
        "the allocator check accepted a Deployment without a PodDisruptionBudget"
    );
}

/// The listen component gives the "-listen" image to the speakers only: the allocator
/// beside it keeps the plain image (its file capability would make the exec fail with
/// every capability dropped), whichever of the two components comes first.
#[test]
fn the_allocator_keeps_the_plain_image_beside_the_listen_component() {
    if render_all().is_none() {
        return;
    }
    let version = env!("CARGO_PKG_VERSION");
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("allocator-listen");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    std::os::unix::fs::symlink(crate_root(), tmp.join("repo")).unwrap();
    let orders = [["listen-179", "allocator"], ["allocator", "listen-179"]];
    for order in orders {
        let dir = tmp.join(order.join("-then-"));
        std::fs::create_dir_all(&dir).unwrap();
        let components: Vec<String> = ["cilium-bgp-config", order[0], order[1]]
            .iter()
            .map(|c| format!("  - ../repo/deploy/components/{c}\n"))
            .collect();
        std::fs::write(
            dir.join("kustomization.yaml"),
            format!(
                "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../repo/deploy/base\ncomponents:\n{}",
                components.concat()
            ),
        )
        .unwrap();
        let output = run_bounded(
            Command::new("kubectl").arg("kustomize").arg(&dir),
            RENDER_TIMEOUT,
        )
        .unwrap();
        assert!(output.success, "{order:?}: {}", output.stderr);
        let objects = parse_docs(&output.stdout).unwrap();
        let image_of = |kind: &str| {
            let workload = objects
                .iter()
                .find(|o| kind_of(o) == kind)
                .unwrap_or_else(|| panic!("{order:?}: no {kind}"));
            str_at(containers_of(workload)[0], &["image"])
                .and_then(image_tag)
                .unwrap_or_default()
        };
        assert_eq!(
            image_of("DaemonSet"),
            format!("{version}-listen"),
            "{order:?}"
        );
        assert_eq!(image_of("Deployment"), version, "{order:?}");
        let problems = allocator_problems(&objects, CILIUM_CONFIG);
        assert!(problems.is_empty(), "{order:?}: {problems:#?}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Where a render has a PodMonitor, the workloads (the speakers' DaemonSet, the
/// allocator's Deployment) whose pods it does not select, or whose pods have no port of
/// the name it scrapes.
fn unscraped_workloads(objects: &[Value]) -> Vec<String> {
    let monitors: Vec<&Value> = objects
        .iter()
        .filter(|o| kind_of(o) == "PodMonitor")
        .collect();
    let mut problems = Vec::new();
    for monitor in monitors {
        let wanted = at(monitor, &["spec", "selector", "matchLabels"])
            .and_then(Value::as_mapping)
            .cloned()
            .unwrap_or_default();
        let ports: Vec<&str> = at(monitor, &["spec", "podMetricsEndpoints"])
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .filter_map(|e| str_at(e, &["port"]))
            .collect();
        for workload in objects
            .iter()
            .filter(|o| matches!(kind_of(o), "DaemonSet" | "Deployment"))
        {
            let name = str_at(workload, &["metadata", "name"]).unwrap_or("<unnamed>");
            let labels = at(workload, &["spec", "template", "metadata", "labels"])
                .and_then(Value::as_mapping)
                .cloned()
                .unwrap_or_default();
            let selected =
                !wanted.is_empty() && wanted.iter().all(|(k, v)| labels.get(k) == Some(v));
            let named: Vec<&str> = containers_of(workload)
                .into_iter()
                .flat_map(|c| {
                    c.get("ports")
                        .and_then(Value::as_sequence)
                        .into_iter()
                        .flatten()
                })
                .filter_map(|p| str_at(p, &["name"]))
                .collect();
            if !selected || ports.is_empty() || !ports.iter().all(|p| named.contains(p)) {
                problems.push(format!(
                    "{} {name}: not scraped by the PodMonitor (selector {wanted:?}, ports {ports:?})",
                    kind_of(workload)
                ));
            }
        }
    }
    problems
}

#[test]
fn the_podmonitor_check_finds_unscraped_workloads() {
    let mut docs = allocator_component();
    docs.truncate(1);
    let text = std::fs::read_to_string(crate_root().join("deploy/base/daemonset.yaml")).unwrap();
    docs.extend(parse_docs(&text).unwrap());
    let text =
        std::fs::read_to_string(crate_root().join("deploy/monitoring/podmonitor.yaml")).unwrap();
    docs.extend(parse_docs(&text).unwrap());
    assert_eq!(unscraped_workloads(&docs), Vec::<String>::new());
    let monitor = docs.len() - 1;

    // A selector of the speakers' component misses the allocator.
    let mut speakers_only = docs.clone();
    *at_mut(
        &mut speakers_only[monitor],
        &[
            "spec",
            "selector",
            "matchLabels",
            "app.kubernetes.io/component",
        ],
    ) = yaml("speaker");
    let missed = unscraped_workloads(&speakers_only);
    assert!(
        missed.len() == 1 && missed[0].contains("podcidr-speaker-allocator"),
        "{missed:?}"
    );
    // The allocator's port under another name is not scraped either.
    let mut renamed = docs.clone();
    *at_mut(
        &mut renamed[0],
        &[
            "spec",
            "template",
            "spec",
            "containers",
            "0",
            "ports",
            "0",
            "name",
        ],
    ) = yaml("http");
    assert_eq!(unscraped_workloads(&renamed).len(), 1);
}

/// The allocator's permissions: exactly [`expected_allocator_grants`] where it runs,
/// nothing bound to its account where it does not.
fn assert_allocator_grants(label: &str, objects: &[Value], runs: bool, config_map: (&str, &str)) {
    let granted =
        allocator_grants(objects).unwrap_or_else(|problems| panic!("{label}: {problems:#?}"));
    if !runs {
        assert_eq!(granted, None, "{label}: no allocator, so no grant to it");
        return;
    }
    let granted = granted.unwrap_or_else(|| panic!("{label}: nothing granted to the allocator"));
    let expected = expected_allocator_grants(config_map, SPEAKER_NAMESPACE);
    assert_eq!(
        granted,
        expected,
        "{label}: the allocator's RBAC must be exactly the minimum; extra: {:#?} missing: {:#?}",
        granted.difference(&expected).collect::<Vec<_>>(),
        expected.difference(&granted).collect::<Vec<_>>()
    );
}

#[test]
fn allocator_rbac_check_rejects_extra_missing_and_shared_rules() {
    let dir = crate_root().join("deploy/components/allocator");
    let mut good = parse_docs(&std::fs::read_to_string(dir.join("rbac.yaml")).unwrap()).unwrap();
    good.extend(
        parse_docs(&std::fs::read_to_string(dir.join("serviceaccount.yaml")).unwrap()).unwrap(),
    );
    good.extend(parse_docs(GOOD_RBAC).unwrap());
    let expected = expected_allocator_grants(CILIUM_CONFIG, SPEAKER_NAMESPACE);
    assert_eq!(allocator_grants(&good), Ok(Some(expected.clone())));
    // The allocator's objects change nothing of the speaker's.
    assert_eq!(speaker_grants(&good), Ok(expected_grants(CILIUM_CONFIG)));

    // [0] ClusterRole, [1] its binding, [2] the Lease Role, [3] its binding, [4] the
    // bgp-config Role, [5] its binding, [6] the ServiceAccount, then GOOD_RBAC.
    type Mutation = fn(&mut Vec<Value>);
    let mutations: [(&str, Mutation); 10] = [
        ("update on Services themselves", |docs| {
            push_str(at_mut(&mut docs[0], &["rules", "0", "verbs"]), "update");
        }),
        ("delete on services/status", |docs| {
            push_str(at_mut(&mut docs[0], &["rules", "1", "verbs"]), "delete");
        }),
        ("no status patch", |docs| {
            at_mut(&mut docs[0], &["rules"])
                .as_sequence_mut()
                .unwrap()
                .remove(1);
        }),
        ("reading Events", |docs| {
            push_str(at_mut(&mut docs[0], &["rules", "2", "verbs"]), "list");
        }),
        ("every Lease of the namespace", |docs| {
            remove_key(at_mut(&mut docs[2], &["rules", "0"]), "resourceNames");
        }),
        ("deleting the Lease", |docs| {
            push_str(at_mut(&mut docs[2], &["rules", "0", "verbs"]), "delete");
        }),
        ("every ConfigMap of kube-system", |docs| {
            remove_key(at_mut(&mut docs[4], &["rules", "0"]), "resourceNames");
        }),
        ("the speaker's Secrets", |docs| {
            let rule = yaml("{apiGroups: [\"\"], resources: [secrets], resourceNames: [bgp-peer-passwords], verbs: [get]}");
            at_mut(&mut docs[4], &["rules"])
                .as_sequence_mut()
                .unwrap()
                .push(rule);
        }),
        ("the speaker's role bound to the allocator", |docs| {
            *at_mut(&mut docs[1], &["roleRef", "name"]) = yaml("podcidr-speaker");
        }),
        ("a binding for both accounts", |docs| {
            let subject =
                yaml("{kind: ServiceAccount, name: podcidr-speaker, namespace: kube-system}");
            at_mut(&mut docs[1], &["subjects"])
                .as_sequence_mut()
                .unwrap()
                .push(subject);
        }),
    ];
    for (what, mutate) in mutations {
        let mut docs = good.clone();
        mutate(&mut docs);
        let verdict = allocator_grants(&docs);
        assert!(
            verdict.as_ref() != Ok(&Some(expected.clone())),
            "the allocator RBAC check accepted {what}: {verdict:#?}"
        );
    }
    // An account bound but not created.
    let mut docs = good.clone();
    docs.remove(6);
    assert!(allocator_grants(&docs).is_err());
}

/// The image's runtime (distroless cc) needs to give the binary only glibc:
/// scripts/link/build.rs links GCC's unwinder in, and no dependency may bring in another
/// shared library (libm came back once through a dependency calling `pow`).
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
#[test]
fn the_binary_loads_only_glibc() {
    let binary = env!("CARGO_BIN_EXE_podcidr-speaker");
    let out = Command::new("readelf")
        .args(["-d", binary])
        .output()
        .expect("readelf (binutils) to read the binary's dynamic section");
    assert!(out.status.success(), "readelf -d {binary} failed");
    let needed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.trim_end_matches(']').to_owned()))
        .collect();
    assert!(!needed.is_empty(), "no NEEDED entry read from {binary}");
    let extra: Vec<&String> = needed
        .iter()
        .filter(|n| !matches!(n.as_str(), "libc.so.6" | "ld-linux-x86-64.so.2"))
        .collect();
    assert!(extra.is_empty(), "{binary} loads {extra:?} besides glibc");
}

/// The DaemonSet's args, with the env expanded as the kubelet would, parse with the
/// binary's own CLI: a renamed or removed flag fails here.
#[test]
fn daemonset_args_parse_with_the_binary() {
    let Some(renders) = render_all() else { return };
    for (install, objects) in renders {
        assert_args_parse_with_the_binary(install.dir, the_daemonset(&objects));
    }
}

/// Feeds each container's args, with the env expanded as the kubelet would, to
/// `podcidr-speaker run --dry-run`; the same args plus an unknown flag must fail.
fn assert_args_parse_with_the_binary(label: &str, ds: &Value) {
    let binary = env!("CARGO_BIN_EXE_podcidr-speaker");
    for container in containers_of(ds) {
        let env = container_env(container).unwrap_or_else(|e| panic!("{label}: {e}"));
        let args: Vec<String> = str_list(container.get("args"))
            .iter()
            .map(|a| expand_env(a, &env).unwrap_or_else(|e| panic!("{label}: {e}")))
            .collect();
        assert_eq!(
            args.first().map(String::as_str),
            Some("run"),
            "{label}: args must start with the run subcommand"
        );

        let mut dry_run = args.clone();
        dry_run.push("--dry-run".into());
        let output = run_bounded(
            Command::new(binary).args(&dry_run).env_clear().envs(&env),
            DRY_RUN_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(
            output.success,
            "{label}: `podcidr-speaker {}` failed:\n{}",
            dry_run.join(" "),
            output.stderr
        );
        assert!(
            output.stdout.contains(FAKE_NODE_NAME),
            "{label}: the effective settings must show the node name from the downward API:\n{}",
            output.stdout
        );

        // The same args plus an unknown flag must fail, or the run above proved nothing.
        let mut bogus = dry_run.clone();
        bogus.insert(1, "--no-such-flag-in-any-manifest".into());
        let output = run_bounded(
            Command::new(binary).args(&bogus).env_clear().envs(&env),
            DRY_RUN_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert!(
            !output.success,
            "{label}: the binary accepted an unknown flag"
        );
    }
}

/// The Helm chart's installs: each value file of deploy/helm/podcidr-speaker/ci/, as
/// scripts/validate-helm renders it with Helm's own code.
struct HelmInstall {
    values: &'static str,
    config_map: (&'static str, &'static str),
    /// Secrets beyond MD5_SECRET the values let the speaker read (bgpConfig.passwordSecrets).
    extra_secrets: &'static [&'static str],
    listens: bool,
    monitored: bool,
    allocator: bool,
}

const HELM_INSTALLS: &[HelmInstall] = &[
    HelmInstall {
        values: "default-values.yaml",
        config_map: CILIUM_CONFIG,
        extra_secrets: &[],
        listens: false,
        monitored: false,
        allocator: false,
    },
    HelmInstall {
        values: "metallb-values.yaml",
        config_map: METALLB_CONFIG,
        extra_secrets: &[],
        listens: false,
        monitored: false,
        allocator: false,
    },
    HelmInstall {
        values: "monitoring-values.yaml",
        config_map: CILIUM_CONFIG,
        extra_secrets: &[],
        listens: false,
        monitored: true,
        allocator: false,
    },
    HelmInstall {
        values: "listen-values.yaml",
        config_map: CILIUM_CONFIG,
        extra_secrets: &[],
        listens: true,
        monitored: false,
        allocator: false,
    },
    HelmInstall {
        values: "config-values.yaml",
        config_map: ("kube-system", "podcidr-speaker-bgp-config"),
        extra_secrets: &["rack-7-bgp-keys"],
        listens: false,
        monitored: true,
        allocator: true,
    },
    HelmInstall {
        values: "allocator-values.yaml",
        config_map: CILIUM_CONFIG,
        extra_secrets: &[],
        listens: false,
        monitored: false,
        allocator: true,
    },
    HelmInstall {
        values: "metallb-allocator-values.yaml",
        config_map: METALLB_CONFIG,
        extra_secrets: &[],
        listens: false,
        monitored: false,
        allocator: true,
    },
];

/// First run installs helm-python-sdk and kubernetes-validate from PyPI.
const HELM_SCRIPT_TIMEOUT: Duration = Duration::from_secs(600);

/// Every Helm install passes the checks every kustomize install passes: pinned image,
/// exactly the minimum RBAC, a least-privileged DaemonSet, args the binary parses. The
/// script itself lints, validates against the schemas, compares with kustomize and
/// checks that bad values are refused; it must succeed too.
#[test]
fn helm_chart_renders_pass_every_install_check() {
    if render_all().is_none() {
        return;
    }
    let probe = Command::new("python3")
        .arg("--version")
        .stdout(Stdio::null())
        .status();
    if !matches!(probe, Ok(status) if status.success()) {
        eprintln!("skipping: python3 not found, cannot run scripts/validate-helm");
        return;
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("helm-renders");
    let _ = std::fs::remove_dir_all(&out);
    let output = run_bounded(
        Command::new(crate_root().join("scripts/validate-helm"))
            .arg("--speaker")
            .arg(env!("CARGO_BIN_EXE_podcidr-speaker"))
            .arg("--render-dir")
            .arg(&out),
        HELM_SCRIPT_TIMEOUT,
    )
    .unwrap();
    assert!(
        output.success,
        "scripts/validate-helm failed:\n{}\n{}",
        output.stdout, output.stderr
    );

    let on_disk: BTreeSet<String> =
        std::fs::read_dir(crate_root().join("deploy/helm/podcidr-speaker/ci"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
    let checked: BTreeSet<String> = HELM_INSTALLS.iter().map(|i| i.values.into()).collect();
    assert_eq!(
        on_disk, checked,
        "every ci/ value file needs a HELM_INSTALLS entry"
    );

    let version = env!("CARGO_PKG_VERSION");
    for install in HELM_INSTALLS {
        let label = format!("helm ci/{}", install.values);
        let text = std::fs::read_to_string(out.join(install.values))
            .unwrap_or_else(|e| panic!("{label}: the script wrote no render: {e}"));
        let objects = parse_docs(&text).unwrap_or_else(|e| panic!("{label}: {e}"));
        let count = |kind: &str| objects.iter().filter(|o| kind_of(o) == kind).count();
        assert_eq!(count("DaemonSet"), 1, "{label}: one DaemonSet");
        assert_eq!(
            count("PodMonitor"),
            usize::from(install.monitored),
            "{label}: PodMonitor only when enabled"
        );
        let unscraped = unscraped_workloads(&objects);
        assert!(unscraped.is_empty(), "{label}: {unscraped:#?}");

        let problems = image_problems(&objects);
        assert!(problems.is_empty(), "{label}: {problems:#?}");
        let ds = the_daemonset(&objects);
        let tag = if install.listens {
            format!("{version}-listen")
        } else {
            version.to_string()
        };
        for container in containers_of(ds) {
            let image = str_at(container, &["image"]).unwrap_or_default();
            assert_eq!(
                image_tag(image).as_deref(),
                Some(tag.as_str()),
                "{label}: image {image} must carry the crate version"
            );
        }

        let granted =
            speaker_grants(&objects).unwrap_or_else(|problems| panic!("{label}: {problems:#?}"));
        let mut expected = expected_grants(install.config_map);
        for secret in install.extra_secrets {
            for verb in ["get", "watch"] {
                expected.insert(grant(install.config_map.0, "", "secrets", secret, verb));
            }
        }
        assert_eq!(
            granted,
            expected,
            "{label}: RBAC must grant exactly the minimum; extra: {:#?} missing: {:#?}",
            granted.difference(&expected).collect::<Vec<_>>(),
            expected.difference(&granted).collect::<Vec<_>>()
        );

        let problems = daemonset_problems(ds, install.listens);
        assert!(problems.is_empty(), "{label}: {problems:#?}");
        assert_args_parse_with_the_binary(&label, ds);

        assert_allocator_grants(&label, &objects, install.allocator, install.config_map);
        assert_eq!(
            count("Deployment"),
            usize::from(install.allocator),
            "{label}: the allocator's Deployment only when enabled"
        );
        if install.allocator {
            let problems = allocator_problems(&objects, install.config_map);
            assert!(problems.is_empty(), "{label}: {problems:#?}");
            assert_allocator_args_parse(&label, &objects);
        }
    }
}

#[test]
fn args_env_expansion_follows_the_kubelet() {
    let env: BTreeMap<String, String> = [("NODE_NAME", "n1"), ("HOST_IP", "192.0.2.1")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let expand = |arg: &str| expand_env(arg, &env);
    assert_eq!(expand("--node=$(NODE_NAME)").as_deref(), Ok("--node=n1"));
    assert_eq!(
        expand("$(HOST_IP):$(NODE_NAME)").as_deref(),
        Ok("192.0.2.1:n1")
    );
    assert_eq!(
        expand("--x=$$(NODE_NAME)").as_deref(),
        Ok("--x=$(NODE_NAME)")
    );
    assert_eq!(expand("--price=$5").as_deref(), Ok("--price=$5"));
    assert!(expand("--node=$(NODE)").is_err(), "undefined variable");
    assert!(
        expand("--node=$(NODE_NAME").is_err(),
        "unterminated reference"
    );

    let container = yaml(
        "env:\n  - {name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}\n  - {name: ADDR, value: \"$(NODE_NAME):179\"}\n",
    );
    let resolved = container_env(&container).expect("resolvable env");
    assert_eq!(resolved["NODE_NAME"], FAKE_NODE_NAME);
    assert_eq!(resolved["ADDR"], format!("{FAKE_NODE_NAME}:179"));
    let unknown = yaml("env: [{name: X, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}]");
    assert!(container_env(&unknown).is_err());
}

// ---------------------------------------------------------------------------------------
// The checks.

/// Problems with the images of every container found anywhere in `docs` (pod templates of
/// any depth, init and ephemeral containers included).
fn image_problems(docs: &[Value]) -> Vec<String> {
    let mut problems = Vec::new();
    for doc in docs {
        for_each_container(doc, &mut |container| {
            let name = str_at(container, &["name"]).unwrap_or("<unnamed>");
            let Some(image) = str_at(container, &["image"]) else {
                problems.push(format!("container {name}: no image"));
                return;
            };
            if let Err(why) = check_image_ref(image) {
                problems.push(format!("container {name}: image {image}: {why}"));
            }
            let policy = str_at(container, &["imagePullPolicy"]);
            if policy != Some("IfNotPresent") {
                problems.push(format!(
                    "container {name}: imagePullPolicy is {policy:?}, must be IfNotPresent"
                ));
            }
        });
    }
    problems
}

/// An image reference must carry an explicit version tag (never `latest`), and a digest,
/// if present, must be a real sha256 digest.
fn check_image_ref(image: &str) -> Result<(), String> {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    if let Some(digest) = digest {
        let hex = digest.strip_prefix("sha256:").unwrap_or("");
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("digest {digest:?} is not sha256:<64 hex digits>"));
        }
    }
    let Some(tag) = image_tag(name) else {
        return Err("no tag: pin an explicit version tag".into());
    };
    if tag.eq_ignore_ascii_case("latest") {
        return Err("tag latest: pin an explicit version tag".into());
    }
    if !is_version_tag(&tag) {
        return Err(format!(
            "tag {tag:?} is not a version (MAJOR.MINOR.PATCH[-suffix])"
        ));
    }
    Ok(())
}

/// The tag of an image reference: after the last ':' of the last path component (a ':'
/// before a '/' is a registry port).
fn image_tag(image: &str) -> Option<String> {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    last.split_once(':').map(|(_, tag)| tag.to_string())
}

fn is_version_tag(tag: &str) -> bool {
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    let core = tag.split(['-', '+']).next().unwrap_or("");
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// A kustomization's `images:` overrides must not unpin the image either.
fn kustomize_image_problems(doc: &Value) -> Vec<String> {
    let Some(images) = doc.get("images").and_then(Value::as_sequence) else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    for entry in images {
        let name = str_at(entry, &["name"]).unwrap_or("<unnamed>");
        match (str_at(entry, &["newTag"]), str_at(entry, &["digest"])) {
            (Some(tag), _) if tag.eq_ignore_ascii_case("latest") || !is_version_tag(tag) => {
                problems.push(format!(
                    "images[{name}]: newTag {tag:?} is not a pinned version"
                ));
            }
            (None, None) => problems.push(format!("images[{name}]: neither newTag nor digest")),
            _ => {}
        }
    }
    problems
}

struct Stage {
    name: String,
    /// The image this stage starts from, or None when it starts from an earlier stage.
    image: Option<String>,
    /// The effective USER at the end of the stage (inherited from an earlier stage).
    user: Option<String>,
}

/// The stages of a Dockerfile, in order, with continuation lines joined.
fn dockerfile_stages(text: &str) -> Vec<Stage> {
    let joined = text.replace("\\\n", " ");
    let mut stages: Vec<Stage> = Vec::new();
    for line in joined.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        let Some(instruction) = words.next() else {
            continue;
        };
        match instruction.to_ascii_uppercase().as_str() {
            "FROM" => {
                let words: Vec<&str> = words.filter(|w| !w.starts_with("--")).collect();
                let from = words.first().copied().unwrap_or("").to_string();
                let name = match words.as_slice() {
                    [_, as_kw, name, ..] if as_kw.eq_ignore_ascii_case("as") => name.to_string(),
                    _ => stages.len().to_string(),
                };
                let parent = stages.iter().find(|s| s.name == from);
                stages.push(Stage {
                    name,
                    user: parent.and_then(|p| p.user.clone()),
                    image: parent.is_none().then_some(from),
                });
            }
            "USER" => {
                if let Some(stage) = stages.last_mut() {
                    stage.user = words.next().map(str::to_string);
                }
            }
            _ => {}
        }
    }
    stages
}

/// Every base image tagged (not latest); the final stage and every `runtime*` stage run
/// as a numeric non-root USER (numeric so the kubelet can check runAsNonRoot).
fn dockerfile_problems(text: &str) -> Vec<String> {
    let stages = dockerfile_stages(text);
    let mut problems = Vec::new();
    if stages.is_empty() {
        problems.push("no FROM".to_string());
    }
    for (i, stage) in stages.iter().enumerate() {
        if let Some(image) = &stage.image {
            match image_tag(image) {
                None => problems.push(format!("stage {}: FROM {image}: no tag", stage.name)),
                Some(tag) if tag.eq_ignore_ascii_case("latest") => {
                    problems.push(format!("stage {}: FROM {image}: latest", stage.name));
                }
                Some(_) => {}
            }
        }
        let runs_the_speaker = i + 1 == stages.len() || stage.name.starts_with("runtime");
        if runs_the_speaker {
            let uid = stage
                .user
                .as_deref()
                .and_then(|u| u.split(':').next())
                .and_then(|uid| uid.parse::<u32>().ok());
            if uid.is_none_or(|uid| uid == 0) {
                problems.push(format!(
                    "stage {}: USER must be a numeric non-root uid, is {:?}",
                    stage.name, stage.user
                ));
            }
        }
    }
    problems
}

/// One permission: in `scope` ("cluster" or a namespace), `verb` on `resource` of API
/// group `group`, restricted to the object `name` ("*": any object).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    scope: String,
    group: String,
    resource: String,
    name: String,
    verb: String,
}

fn grant(scope: &str, group: &str, resource: &str, name: &str, verb: &str) -> Grant {
    Grant {
        scope: scope.into(),
        group: group.into(),
        resource: resource.into(),
        name: name.into(),
        verb: verb.into(),
    }
}

/// The minimum of issue #8 (and #21: CiliumPodIPPools; #17: Services and EndpointSlices,
/// list and watch only): read nodes and CiliumNodes, read exactly cilium-config and the
/// bgp-config ConfigMap, create and patch events about Nodes. Nothing else.
fn expected_grants(config_map: (&str, &str)) -> BTreeSet<Grant> {
    let mut expected = BTreeSet::new();
    for verb in ["get", "list", "watch"] {
        expected.insert(grant("cluster", "", "nodes", "*", verb));
        expected.insert(grant("cluster", "cilium.io", "ciliumnodes", "*", verb));
        expected.insert(grant("cluster", "cilium.io", "ciliumpodippools", "*", verb));
        expected.insert(grant(
            "kube-system",
            "",
            "configmaps",
            "cilium-config",
            verb,
        ));
        expected.insert(grant(config_map.0, "", "configmaps", config_map.1, verb));
    }
    // LoadBalancer IPs: every Service and EndpointSlice, watched, never read by name.
    for verb in ["list", "watch"] {
        expected.insert(grant("cluster", "", "services", "*", verb));
        expected.insert(grant(
            "cluster",
            "discovery.k8s.io",
            "endpointslices",
            "*",
            verb,
        ));
    }
    // TCP MD5 keys: the named Secrets of the bgp-config's namespace, get and watch only
    // (the speaker never lists Secrets).
    for verb in ["get", "watch"] {
        expected.insert(grant(config_map.0, "", "secrets", MD5_SECRET, verb));
    }
    // Events about Nodes: kube-rs's Recorder stores those of cluster-scoped objects in
    // "default".
    for verb in ["create", "patch"] {
        expected.insert(grant("default", "events.k8s.io", "events", "*", verb));
    }
    expected
}

/// Every permission the manifests give the speaker's ServiceAccount, or the problems that
/// make the set meaningless (see [`grants_by_account`]).
fn speaker_grants(docs: &[Value]) -> Result<BTreeSet<Grant>, Vec<String>> {
    grants_by_account(docs).map(|mut by| by.remove(SPEAKER_ACCOUNT).unwrap_or_default())
}

/// Every permission the manifests give the allocator's ServiceAccount, None when nothing
/// binds it (an install without the allocator).
fn allocator_grants(docs: &[Value]) -> Result<Option<BTreeSet<Grant>>, Vec<String>> {
    grants_by_account(docs).map(|mut by| by.remove(ALLOCATOR_ACCOUNT))
}

/// Every permission the manifests give each ServiceAccount they bind (the speaker's, and
/// the allocator's where it runs), or the problems that make the sets meaningless: a
/// binding that also grants someone else (or any other account), a binding to a role the
/// manifests do not define (its rules are unknown), a bound account the manifests do not
/// create, an unbound or aggregated role, or a non-resource rule.
fn grants_by_account(
    docs: &[Value],
) -> Result<BTreeMap<&'static str, BTreeSet<Grant>>, Vec<String>> {
    let mut problems = Vec::new();
    let mut roles: BTreeMap<(String, String, String), &Value> = BTreeMap::new();
    for doc in docs {
        let kind = kind_of(doc);
        if kind == "Role" || kind == "ClusterRole" {
            let namespace = if kind == "Role" {
                str_at(doc, &["metadata", "namespace"]).unwrap_or("")
            } else {
                ""
            };
            let name = str_at(doc, &["metadata", "name"]).unwrap_or("");
            if doc.get("aggregationRule").is_some() {
                problems.push(format!(
                    "{kind} {name}: aggregated roles grant unknown rules"
                ));
            }
            roles.insert((kind.into(), namespace.into(), name.into()), doc);
        }
    }
    let has_account = |account: &str| {
        docs.iter().any(|d| {
            kind_of(d) == "ServiceAccount"
                && str_at(d, &["metadata", "name"]) == Some(account)
                && str_at(d, &["metadata", "namespace"]) == Some(SPEAKER_NAMESPACE)
        })
    };
    if !has_account(SPEAKER_ACCOUNT) {
        problems.push(format!(
            "no ServiceAccount {SPEAKER_NAMESPACE}/{SPEAKER_ACCOUNT}"
        ));
    }

    let mut grants: BTreeMap<&'static str, BTreeSet<Grant>> = BTreeMap::new();
    grants.insert(SPEAKER_ACCOUNT, BTreeSet::new());
    let mut bound = BTreeSet::new();
    for doc in docs {
        let kind = kind_of(doc);
        let scope = match kind {
            "ClusterRoleBinding" => "cluster".to_string(),
            "RoleBinding" => match str_at(doc, &["metadata", "namespace"]) {
                Some(ns) => ns.to_string(),
                None => {
                    problems.push("RoleBinding without namespace".into());
                    continue;
                }
            },
            _ => continue,
        };
        let binding = str_at(doc, &["metadata", "name"]).unwrap_or("<unnamed>");
        let subjects = doc.get("subjects").and_then(Value::as_sequence);
        let account = subjects.and_then(|s| {
            let only = s.len() == 1
                && str_at(&s[0], &["kind"]) == Some("ServiceAccount")
                && str_at(&s[0], &["namespace"]) == Some(SPEAKER_NAMESPACE);
            let name = str_at(&s[0], &["name"]);
            [SPEAKER_ACCOUNT, ALLOCATOR_ACCOUNT]
                .into_iter()
                .find(|a| only && name == Some(*a))
        });
        let Some(account) = account else {
            problems.push(format!(
                "{kind} {binding}: must bind one ServiceAccount of these manifests (the \
                 speaker's or the allocator's) and nothing else"
            ));
            continue;
        };
        if !has_account(account) {
            problems.push(format!(
                "{kind} {binding}: binds {SPEAKER_NAMESPACE}/{account}, which these manifests do not create"
            ));
        }
        let ref_kind = str_at(doc, &["roleRef", "kind"]).unwrap_or("");
        let ref_name = str_at(doc, &["roleRef", "name"]).unwrap_or("");
        let ref_namespace = if ref_kind == "Role" {
            scope.as_str()
        } else {
            ""
        };
        if kind == "ClusterRoleBinding" && ref_kind != "ClusterRole" {
            problems.push(format!("{kind} {binding}: roleRef must be a ClusterRole"));
            continue;
        }
        let key = (
            ref_kind.to_string(),
            ref_namespace.to_string(),
            ref_name.to_string(),
        );
        let Some(role) = roles.get(&key) else {
            problems.push(format!(
                "{kind} {binding}: binds {ref_kind} {ref_name}, which these manifests do not define"
            ));
            continue;
        };
        bound.insert(key);
        let rules = role.get("rules").and_then(Value::as_sequence);
        for rule in rules.into_iter().flatten() {
            if rule.get("nonResourceURLs").is_some() {
                problems.push(format!(
                    "{ref_kind} {ref_name}: nonResourceURLs are not needed"
                ));
            }
            let names = str_list(rule.get("resourceNames"));
            let names = if names.is_empty() {
                vec!["*".to_string()]
            } else {
                names
            };
            for group in str_list(rule.get("apiGroups")) {
                for resource in str_list(rule.get("resources")) {
                    for name in &names {
                        for verb in str_list(rule.get("verbs")) {
                            grants
                                .entry(account)
                                .or_default()
                                .insert(grant(&scope, &group, &resource, name, &verb));
                        }
                    }
                }
            }
        }
    }
    for key in roles.keys() {
        if !bound.contains(key) {
            problems.push(format!("{} {}: defined but not bound", key.0, key.2));
        }
    }
    if problems.is_empty() {
        Ok(grants)
    } else {
        Err(problems)
    }
}

/// What issue #8 asks of the DaemonSet: host network with the node name and host IP from
/// the downward API, every node, critical priority, one node at a time, probes on
/// /healthz and /readyz of the metrics port, bounded resources, time to shut down
/// gracefully, non-root, read-only root, no capabilities (NET_BIND_SERVICE only when it
/// listens on 179), seccomp RuntimeDefault, nothing of the host beyond its network.
fn daemonset_problems(ds: &Value, listens: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let mut require = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_string());
        }
    };
    let pod = ds
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("spec"))
        .unwrap_or(&Value::Null);

    require(
        pod.get("hostNetwork") == Some(&Value::Bool(true)),
        "hostNetwork must be true",
    );
    for key in ["hostPID", "hostIPC"] {
        require(
            pod.get(key) != Some(&Value::Bool(true)),
            &format!("{key} must not be set"),
        );
    }
    let volumes = pod.get("volumes").and_then(Value::as_sequence);
    require(
        !volumes
            .into_iter()
            .flatten()
            .any(|v| v.get("hostPath").is_some()),
        "no hostPath volumes",
    );
    let tolerations = pod.get("tolerations").and_then(Value::as_sequence);
    require(
        tolerations.into_iter().flatten().any(|t| {
            str_at(t, &["operator"]) == Some("Exists")
                && t.get("key").is_none()
                && t.get("effect").is_none()
        }),
        "a toleration {operator: Exists} so it runs on every node, control plane included",
    );
    require(
        str_at(pod, &["priorityClassName"]) == Some("system-node-critical"),
        "priorityClassName must be system-node-critical",
    );
    let strategy = ds.get("spec").and_then(|s| s.get("updateStrategy"));
    let strategy = strategy.unwrap_or(&Value::Null);
    require(
        str_at(strategy, &["type"]) == Some("RollingUpdate"),
        "updateStrategy must be RollingUpdate",
    );
    require(
        at(strategy, &["rollingUpdate", "maxUnavailable"]) == Some(&Value::from(1)),
        "rollingUpdate.maxUnavailable must be 1 (one node at a time)",
    );
    let surge = at(strategy, &["rollingUpdate", "maxSurge"]);
    require(
        surge.is_none() || surge == Some(&Value::from(0)),
        "rollingUpdate.maxSurge must be 0 (never two speakers on a node)",
    );
    let grace = pod
        .get("terminationGracePeriodSeconds")
        .and_then(Value::as_u64);
    require(
        grace.is_some_and(|g| (30..=120).contains(&g)),
        "terminationGracePeriodSeconds between 30 and 120: time for graceful shutdown, not for a stuck drain",
    );

    let pod_security = pod.get("securityContext").unwrap_or(&Value::Null);
    require(
        pod_security.get("runAsNonRoot") == Some(&Value::Bool(true)),
        "pod securityContext.runAsNonRoot must be true",
    );
    require(
        pod_security
            .get("runAsUser")
            .and_then(Value::as_u64)
            .is_some_and(|uid| uid != 0),
        "pod securityContext.runAsUser must be a non-zero uid",
    );
    let pod_seccomp = str_at(pod_security, &["seccompProfile", "type"]);

    let containers = containers_of(ds);
    require(!containers.is_empty(), "at least one container");
    for container in containers {
        let name = str_at(container, &["name"]).unwrap_or("<unnamed>");
        let mut require = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("container {name}: {what}"));
            }
        };
        let env = container
            .get("env")
            .and_then(Value::as_sequence)
            .map(Vec::as_slice)
            .unwrap_or_default();
        let field_ref = |var: &str| {
            env.iter()
                .find(|e| str_at(e, &["name"]) == Some(var))
                .and_then(|e| str_at(e, &["valueFrom", "fieldRef", "fieldPath"]))
        };
        require(
            field_ref("NODE_NAME") == Some("spec.nodeName"),
            "env NODE_NAME from the downward API (spec.nodeName)",
        );
        require(
            field_ref("HOST_IP") == Some("status.hostIP"),
            "env HOST_IP from the downward API (status.hostIP)",
        );
        let args = str_list(container.get("args"));
        require(
            args.iter().any(|a| a == "--node=$(NODE_NAME)"),
            "--node=$(NODE_NAME) in args",
        );
        require(
            args.iter().any(|a| a == "--source-address=$(HOST_IP)"),
            "--source-address=$(HOST_IP) in args",
        );
        // SIGTERM without graceful restart: the graceful shutdown time (RFC 8326), then
        // the speaker's own bound on the goodbye; the kubelet must not SIGKILL first.
        let drain = args
            .iter()
            .find_map(|a| a.strip_prefix("--graceful-shutdown-time="))
            .map(|d| {
                podcidr_speaker::config::duration::parse(d)
                    .ok()
                    .and_then(|d| d.to_std())
            })
            .unwrap_or(Some(
                podcidr_speaker::daemon::settings::DEFAULT_GRACEFUL_SHUTDOWN,
            ));
        let needed = drain.map(|d| (d + podcidr_speaker::daemon::SHUTDOWN_TIMEOUT).as_secs());
        require(
            matches!((grace, needed), (Some(g), Some(n)) if g > n),
            &format!(
                "terminationGracePeriodSeconds ({grace:?}) above --graceful-shutdown-time plus \
                 the {}s goodbye ({needed:?})",
                podcidr_speaker::daemon::SHUTDOWN_TIMEOUT.as_secs()
            ),
        );

        let metrics_port = container
            .get("ports")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .find(|p| str_at(p, &["name"]) == Some("metrics"))
            .and_then(|p| p.get("containerPort"))
            .and_then(Value::as_u64);
        let listen_port = args
            .iter()
            .find_map(|a| a.strip_prefix("--metrics-addr="))
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|port| port.parse::<u64>().ok());
        require(
            metrics_port.is_some() && metrics_port == listen_port,
            "a container port named metrics equal to the --metrics-addr port",
        );
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = at(container, &[probe, "httpGet"]).unwrap_or(&Value::Null);
            let port = get.get("port");
            let on_metrics = port == Some(&Value::from("metrics"))
                || (metrics_port.is_some() && port.and_then(Value::as_u64) == metrics_port);
            require(
                str_at(get, &["path"]) == Some(path) && on_metrics,
                &format!("{probe}: httpGet {path} on the metrics port"),
            );
        }

        let resources = container.get("resources").unwrap_or(&Value::Null);
        for (resource, parse) in [
            ("cpu", parse_cpu_millis as fn(&str) -> Option<u64>),
            ("memory", parse_memory_bytes),
        ] {
            let quantity = |kind: &str| {
                at(resources, &[kind, resource])
                    .and_then(quantity_str)
                    .and_then(|q| parse(&q))
            };
            let (request, limit) = (quantity("requests"), quantity("limits"));
            require(
                matches!((request, limit), (Some(r), Some(l)) if r > 0 && r <= l),
                &format!("resources: a {resource} request and limit, request <= limit"),
            );
        }

        let security = container.get("securityContext").unwrap_or(&Value::Null);
        require(
            security.get("allowPrivilegeEscalation") == Some(&Value::Bool(false)),
            "securityContext.allowPrivilegeEscalation must be false",
        );
        require(
            security.get("readOnlyRootFilesystem") == Some(&Value::Bool(true)),
            "securityContext.readOnlyRootFilesystem must be true",
        );
        require(
            security.get("privileged") != Some(&Value::Bool(true)),
            "securityContext.privileged must not be true",
        );
        require(
            security.get("runAsNonRoot") != Some(&Value::Bool(false))
                && security.get("runAsUser").and_then(Value::as_u64) != Some(0),
            "the container must not override the pod's non-root user",
        );
        let seccomp = str_at(security, &["seccompProfile", "type"]).or(pod_seccomp);
        require(
            seccomp == Some("RuntimeDefault"),
            "seccompProfile RuntimeDefault (pod or container)",
        );
        let dropped = str_list(at(security, &["capabilities", "drop"]));
        require(
            dropped.iter().any(|c| c == "ALL"),
            "capabilities.drop must be [ALL]",
        );
        let added = str_list(at(security, &["capabilities", "add"]));
        let allowed: &[&str] = if listens { &["NET_BIND_SERVICE"] } else { &[] };
        require(
            added == allowed,
            &format!("capabilities.add must be {allowed:?} (is {added:?})"),
        );
    }
    problems
}

/// Issue 30's allocator (`podcidr-speaker allocate`): what `deploy/components/allocator`
/// grants and nothing more. Services read cluster-wide and their status written (the only
/// write); Events on Services, in their namespaces; the Lease by name (create cannot be
/// limited by name); the bgp-config ConfigMap the speaker reads, by name. No Secret, no
/// Node, nothing of Cilium's.
fn expected_allocator_grants(config_map: (&str, &str), lease_namespace: &str) -> BTreeSet<Grant> {
    let mut expected = BTreeSet::new();
    for verb in ["get", "list", "watch"] {
        expected.insert(grant("cluster", "", "services", "*", verb));
        expected.insert(grant(config_map.0, "", "configmaps", config_map.1, verb));
    }
    for verb in ["update", "patch"] {
        expected.insert(grant("cluster", "", "services/status", "*", verb));
    }
    for verb in ["create", "patch"] {
        expected.insert(grant("cluster", "events.k8s.io", "events", "*", verb));
    }
    for verb in ["get", "update"] {
        expected.insert(grant(
            lease_namespace,
            "coordination.k8s.io",
            "leases",
            ALLOCATOR_LEASE,
            verb,
        ));
    }
    expected.insert(grant(
        lease_namespace,
        "coordination.k8s.io",
        "leases",
        "*",
        "create",
    ));
    expected
}

/// What issue 30 asks of the allocator's Deployment: `allocate` in the speaker's image
/// (never the -listen variant), at least two replicas spread over nodes and replaced one
/// at a time with a standby, a PodDisruptionBudget of one, its own ServiceAccount, the pod
/// name as the Lease identity, the Lease in its own namespace, the speaker's bgp-config,
/// probes on /healthz and /readyz of the --metrics-addr port, bounded resources, and a
/// security context at least as strict as the speaker's without the host network.
fn allocator_problems(objects: &[Value], config_map: (&str, &str)) -> Vec<String> {
    let mut problems = Vec::new();
    let mut require = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_string());
        }
    };
    let deployments: Vec<&Value> = objects
        .iter()
        .filter(|o| kind_of(o) == "Deployment")
        .collect();
    let [deploy] = deployments.as_slice() else {
        return vec![format!("one Deployment, found {}", deployments.len())];
    };
    let namespace = str_at(deploy, &["metadata", "namespace"]).unwrap_or("");
    require(
        str_at(deploy, &["metadata", "name"]) == Some("podcidr-speaker-allocator")
            && namespace == SPEAKER_NAMESPACE,
        "the Deployment is kube-system/podcidr-speaker-allocator",
    );
    require(
        deploy
            .get("spec")
            .and_then(|s| s.get("replicas"))
            .and_then(Value::as_u64)
            .is_some_and(|r| r >= 2),
        "at least 2 replicas: a standby takes the Lease when the leader goes",
    );
    require(
        str_at(deploy, &["spec", "strategy", "type"]) == Some("RollingUpdate")
            && at(
                deploy,
                &["spec", "strategy", "rollingUpdate", "maxUnavailable"],
            ) == Some(&Value::from(0)),
        "a rolling update with maxUnavailable 0: a new replica is ready before an old one stops",
    );
    let selector = at(deploy, &["spec", "selector", "matchLabels"])
        .and_then(Value::as_mapping)
        .cloned()
        .unwrap_or_default();
    require(
        selector.get("app.kubernetes.io/component") == Some(&Value::from("allocator")),
        "the selector names the allocator component (never the speakers' pods)",
    );
    let pod_labels = at(deploy, &["spec", "template", "metadata", "labels"])
        .and_then(Value::as_mapping)
        .cloned()
        .unwrap_or_default();
    let selects_pods = |labels: Option<&Value>| {
        labels
            .and_then(Value::as_mapping)
            .is_some_and(|m| !m.is_empty() && m.iter().all(|(k, v)| pod_labels.get(k) == Some(v)))
    };
    require(
        selects_pods(Some(&Value::Mapping(selector.clone()))),
        "the selector matches the pod template's labels",
    );

    let budgets: Vec<&Value> = objects
        .iter()
        .filter(|o| kind_of(o) == "PodDisruptionBudget")
        .collect();
    require(
        budgets.len() == 1
            && budgets.iter().all(|b| {
                str_at(b, &["metadata", "namespace"]) == Some(namespace)
                    && at(b, &["spec", "maxUnavailable"]) == Some(&Value::from(1))
                    && at(b, &["spec", "selector", "matchLabels"])
                        == Some(&Value::Mapping(selector.clone()))
            }),
        "one PodDisruptionBudget, maxUnavailable 1, with the Deployment's selector",
    );

    let pod = at(deploy, &["spec", "template", "spec"]).unwrap_or(&Value::Null);
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        require(
            pod.get(key) != Some(&Value::Bool(true)),
            &format!("{key} must not be set: the allocator only talks to the API server"),
        );
    }
    let volumes = pod.get("volumes").and_then(Value::as_sequence);
    require(
        !volumes
            .into_iter()
            .flatten()
            .any(|v| v.get("hostPath").is_some()),
        "no hostPath volumes",
    );
    require(
        str_at(pod, &["serviceAccountName"]) == Some(ALLOCATOR_ACCOUNT),
        "the allocator's own ServiceAccount",
    );
    let spread = pod
        .get("topologySpreadConstraints")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .any(|c| {
            str_at(c, &["topologyKey"]) == Some("kubernetes.io/hostname")
                && selects_pods(at(c, &["labelSelector", "matchLabels"]))
        });
    let anti_affinity = at(pod, &["affinity", "podAntiAffinity"])
        .map(|a| {
            let preferred = a
                .get("preferredDuringSchedulingIgnoredDuringExecution")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
                .filter_map(|t| t.get("podAffinityTerm"));
            let required = a
                .get("requiredDuringSchedulingIgnoredDuringExecution")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten();
            preferred.chain(required).any(|t| {
                str_at(t, &["topologyKey"]) == Some("kubernetes.io/hostname")
                    && selects_pods(at(t, &["labelSelector", "matchLabels"]))
            })
        })
        .unwrap_or(false);
    require(
        spread || anti_affinity,
        "replicas spread over nodes (topologySpreadConstraints or podAntiAffinity on kubernetes.io/hostname, selecting its own pods)",
    );
    let pod_security = pod.get("securityContext").unwrap_or(&Value::Null);
    require(
        pod_security.get("runAsNonRoot") == Some(&Value::Bool(true))
            && pod_security
                .get("runAsUser")
                .and_then(Value::as_u64)
                .is_some_and(|uid| uid != 0),
        "pod securityContext: runAsNonRoot and a non-zero runAsUser",
    );
    let pod_seccomp = str_at(pod_security, &["seccompProfile", "type"]);

    let containers = containers_of(deploy);
    require(containers.len() == 1, "one container");
    let version = env!("CARGO_PKG_VERSION");
    for container in containers {
        let name = str_at(container, &["name"]).unwrap_or("<unnamed>");
        let mut require = |ok: bool, what: &str| {
            if !ok {
                problems.push(format!("container {name}: {what}"));
            }
        };
        let image = str_at(container, &["image"]).unwrap_or("");
        require(
            image.starts_with("ghcr.io/podcidr/podcidr-speaker:")
                && image_tag(image).as_deref() == Some(version),
            &format!(
                "the speaker's image at the crate version {version} (never -listen), is {image}"
            ),
        );
        let args = str_list(container.get("args"));
        require(
            args.first().map(String::as_str) == Some("allocate"),
            "args start with the allocate role",
        );
        require(
            args.iter().any(|a| a == "--identity=$(POD_NAME)"),
            "--identity=$(POD_NAME) in args",
        );
        let env = container
            .get("env")
            .and_then(Value::as_sequence)
            .map(Vec::as_slice)
            .unwrap_or_default();
        require(
            env.iter().any(|e| {
                str_at(e, &["name"]) == Some("POD_NAME")
                    && str_at(e, &["valueFrom", "fieldRef", "fieldPath"]) == Some("metadata.name")
            }),
            "env POD_NAME from the downward API (metadata.name): one identity per replica",
        );
        let lease = format!("--lease={namespace}/{ALLOCATOR_LEASE}");
        require(
            args.contains(&lease),
            &format!("{lease} in args (the Lease its Role grants)"),
        );
        let config_flag = format!("--bgp-config-map={}/{}", config_map.0, config_map.1);
        let config_args: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("--bgp-config-map="))
            .collect();
        require(
            config_args.len() == 1
                && config_args
                    .iter()
                    .all(|a| **a == config_flag || a.starts_with(&format!("{config_flag}:"))),
            &format!("exactly one {config_flag}, the speaker's bgp-config"),
        );

        let metrics_port = container
            .get("ports")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
            .find(|p| str_at(p, &["name"]) == Some("metrics"))
            .and_then(|p| p.get("containerPort"))
            .and_then(Value::as_u64);
        let listen_port = args
            .iter()
            .find_map(|a| a.strip_prefix("--metrics-addr="))
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|port| port.parse::<u64>().ok());
        require(
            metrics_port.is_some() && metrics_port == listen_port,
            "a container port named metrics equal to the --metrics-addr port",
        );
        for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
            let get = at(container, &[probe, "httpGet"]).unwrap_or(&Value::Null);
            let port = get.get("port");
            let on_metrics = port == Some(&Value::from("metrics"))
                || (metrics_port.is_some() && port.and_then(Value::as_u64) == metrics_port);
            require(
                str_at(get, &["path"]) == Some(path) && on_metrics,
                &format!("{probe}: httpGet {path} on the metrics port"),
            );
        }

        let resources = container.get("resources").unwrap_or(&Value::Null);
        for (resource, parse) in [
            ("cpu", parse_cpu_millis as fn(&str) -> Option<u64>),
            ("memory", parse_memory_bytes),
        ] {
            let quantity = |kind: &str| {
                at(resources, &[kind, resource])
                    .and_then(quantity_str)
                    .and_then(|q| parse(&q))
            };
            let (request, limit) = (quantity("requests"), quantity("limits"));
            require(
                matches!((request, limit), (Some(r), Some(l)) if r > 0 && r <= l),
                &format!("resources: a {resource} request and limit, request <= limit"),
            );
        }

        let security = container.get("securityContext").unwrap_or(&Value::Null);
        require(
            security.get("allowPrivilegeEscalation") == Some(&Value::Bool(false)),
            "securityContext.allowPrivilegeEscalation must be false",
        );
        require(
            security.get("readOnlyRootFilesystem") == Some(&Value::Bool(true)),
            "securityContext.readOnlyRootFilesystem must be true",
        );
        require(
            security.get("privileged") != Some(&Value::Bool(true)),
            "securityContext.privileged must not be true",
        );
        require(
            security.get("runAsNonRoot") != Some(&Value::Bool(false))
                && security.get("runAsUser").and_then(Value::as_u64) != Some(0),
            "the container must not override the pod's non-root user",
        );
        require(
            str_at(security, &["seccompProfile", "type"]).or(pod_seccomp) == Some("RuntimeDefault"),
            "seccompProfile RuntimeDefault (pod or container)",
        );
        require(
            str_list(at(security, &["capabilities", "drop"]))
                .iter()
                .any(|c| c == "ALL"),
            "capabilities.drop must be [ALL]",
        );
        require(
            str_list(at(security, &["capabilities", "add"])).is_empty(),
            "no capability added",
        );
    }
    problems
}

/// Kubernetes CPU quantity in millicores ("20m", "0.5", "1").
fn parse_cpu_millis(q: &str) -> Option<u64> {
    if let Some(m) = q.strip_suffix('m') {
        return m.parse().ok();
    }
    let cores: f64 = q.parse().ok()?;
    (cores >= 0.0).then(|| (cores * 1000.0).round() as u64)
}

/// Kubernetes memory quantity in bytes, binary and decimal suffixes.
fn parse_memory_bytes(q: &str) -> Option<u64> {
    const SUFFIXES: [(&str, u64); 8] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
    ];
    for (suffix, factor) in SUFFIXES {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u64>().ok()?.checked_mul(factor);
        }
    }
    q.parse().ok()
}

fn quantity_str(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// Rendering, env expansion, bounded processes.

fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every install rendered, or None (with the reason printed) when kubectl is absent.
fn render_all() -> Option<Vec<(&'static Install, Vec<Value>)>> {
    let probe = Command::new("kubectl")
        .args(["version", "--client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(probe, Ok(status) if status.success()) {
        eprintln!("skipping: kubectl not found, cannot render deploy/ (kubectl kustomize)");
        return None;
    }
    let renders = INSTALLS
        .iter()
        .map(|install| {
            let dir = crate_root().join(install.dir);
            let output = run_bounded(
                Command::new("kubectl").arg("kustomize").arg(&dir),
                RENDER_TIMEOUT,
            )
            .unwrap_or_else(|e| panic!("{}: {e}", install.dir));
            assert!(
                output.success,
                "kubectl kustomize {} failed:\n{}",
                install.dir, output.stderr
            );
            let objects = parse_docs(&output.stdout)
                .unwrap_or_else(|e| panic!("{}: rendered YAML: {e}", install.dir));
            (install, objects)
        })
        .collect();
    Some(renders)
}

fn parse_docs(text: &str) -> Result<Vec<Value>, serde_yaml::Error> {
    let mut docs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(text) {
        let value = Value::deserialize(doc)?;
        if !value.is_null() {
            docs.push(value);
        }
    }
    Ok(docs)
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            // A Helm chart's templates are Go templates, YAML only once rendered: their
            // renders get these checks in helm_chart_renders_pass_every_install_check.
            if path.ends_with("templates") && path.join("../Chart.yaml").exists() {
                continue;
            }
            yaml_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
        {
            out.push(path);
        }
    }
}

/// The container env as the kubelet would resolve it for the args test: literal values,
/// and the downward-API fields the manifests use, with test values.
fn container_env(container: &Value) -> Result<BTreeMap<String, String>, String> {
    let mut env = BTreeMap::new();
    let vars = container.get("env").and_then(Value::as_sequence);
    for var in vars.into_iter().flatten() {
        let name = str_at(var, &["name"]).ok_or("env entry without name")?;
        let value = if let Some(value) = str_at(var, &["value"]) {
            expand_env(value, &env)?
        } else {
            match str_at(var, &["valueFrom", "fieldRef", "fieldPath"]) {
                Some("spec.nodeName") => FAKE_NODE_NAME.to_string(),
                Some("status.hostIP") | Some("status.podIP") => FAKE_HOST_IP.to_string(),
                Some("metadata.name") => FAKE_POD_NAME.to_string(),
                other => return Err(format!("env {name}: no test value for {other:?}")),
            }
        };
        env.insert(name.to_string(), value);
    }
    Ok(env)
}

/// Kubernetes `$(VAR)` expansion in args: `$$` is a literal `$`. A reference to an
/// undefined variable is an error here (the kubelet would pass it through verbatim, which
/// is never what a manifest means).
fn expand_env(arg: &str, env: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = arg;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(') {
            let end = inner
                .find(')')
                .ok_or_else(|| format!("{arg}: unterminated $("))?;
            let name = &inner[..end];
            let value = env
                .get(name)
                .ok_or_else(|| format!("{arg}: $({name}) is not in the container env"))?;
            out.push_str(value);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

struct Finished {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs a command to completion or kills it after `timeout`; always reaps it.
fn run_bounded(command: &mut Command, timeout: Duration) -> Result<Finished, String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawning {command:?}: {e}"))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = reader(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = reader(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{command:?} did not finish within {timeout:?}"));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("waiting for {command:?}: {e}"));
            }
        }
    };
    Ok(Finished {
        success: status.success(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

// ---------------------------------------------------------------------------------------
// YAML helpers.

fn kind_of(doc: &Value) -> &str {
    str_at(doc, &["kind"]).unwrap_or("")
}

fn the_daemonset(objects: &[Value]) -> &Value {
    let mut daemonsets = objects.iter().filter(|o| kind_of(o) == "DaemonSet");
    let ds = daemonsets.next().expect("a DaemonSet in the render");
    assert!(daemonsets.next().is_none(), "more than one DaemonSet");
    ds
}

fn containers_of(workload: &Value) -> Vec<&Value> {
    at(workload, &["spec", "template", "spec", "containers"])
        .and_then(Value::as_sequence)
        .map(|c| c.iter().collect())
        .unwrap_or_default()
}

fn container_args(workload: &Value) -> Vec<String> {
    containers_of(workload)
        .first()
        .map(|c| str_list(c.get("args")))
        .unwrap_or_default()
}

/// Calls `f` on every container of every container list anywhere under `value`.
fn for_each_container(value: &Value, f: &mut dyn FnMut(&Value)) {
    match value {
        Value::Mapping(map) => {
            for (key, child) in map {
                let is_list = matches!(
                    key.as_str(),
                    Some("containers" | "initContainers" | "ephemeralContainers")
                );
                match child.as_sequence() {
                    Some(list) if is_list => list.iter().for_each(&mut *f),
                    _ => for_each_container(child, f),
                }
            }
        }
        Value::Sequence(list) => list.iter().for_each(|v| for_each_container(v, f)),
        _ => {}
    }
}

fn count_containers(doc: &Value) -> usize {
    let mut n = 0;
    for_each_container(doc, &mut |_| n += 1);
    n
}

fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter()
        .try_fold(value, |v, key| match key.parse::<usize>() {
            Ok(i) => v.get(i),
            Err(_) => v.get(*key),
        })
}

fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(value, path).and_then(Value::as_str)
}

fn str_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_sequence)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The value at `path`, creating mappings on the way (tests only mutate known shapes).
fn at_mut<'a>(value: &'a mut Value, path: &[&str]) -> &'a mut Value {
    path.iter()
        .fold(value, |v, key| match key.parse::<usize>() {
            Ok(i) => v
                .get_mut(i)
                .unwrap_or_else(|| panic!("no index {i} in {path:?}")),
            Err(_) => {
                if v.get(*key).is_none() {
                    v.as_mapping_mut()
                        .unwrap_or_else(|| panic!("{key} of {path:?}: not a mapping"))
                        .insert(Value::from(*key), Value::Null);
                }
                v.get_mut(*key).expect("just inserted")
            }
        })
}

fn remove_key(value: &mut Value, key: &str) {
    value
        .as_mapping_mut()
        .expect("a mapping")
        .remove(key)
        .unwrap_or_else(|| panic!("no key {key} to remove"));
}

fn push_str(list: &mut Value, item: &str) {
    list.as_sequence_mut()
        .expect("a list")
        .push(Value::from(item));
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("inline YAML {text:?}: {e}"))
}

fn container_doc(image: &str, policy: Option<&str>) -> Value {
    let policy = policy
        .map(|p| format!(", imagePullPolicy: {p}"))
        .unwrap_or_default();
    yaml(&format!(
        "kind: DaemonSet\nspec:\n  template:\n    spec:\n      containers:\n        - {{name: speaker, image: \"{image}\"{policy}}}\n"
    ))
}

/// The base RBAC in the shape of the manifests (Cilium convention), for the negative tests:
/// [0] ClusterRole, [1] ClusterRoleBinding, [2] Role, [3] RoleBinding, [4] ServiceAccount,
/// [5] Role for events, [6] its RoleBinding.
const GOOD_RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: podcidr-speaker}
rules:
  - {apiGroups: [""], resources: [nodes], verbs: [get, list, watch]}
  - {apiGroups: [cilium.io], resources: [ciliumnodes], verbs: [get, list, watch]}
  - {apiGroups: [cilium.io], resources: [ciliumpodippools], verbs: [get, list, watch]}
  - {apiGroups: [""], resources: [services], verbs: [list, watch]}
  - {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: podcidr-speaker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: podcidr-speaker}
subjects: [{kind: ServiceAccount, name: podcidr-speaker, namespace: kube-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: podcidr-speaker-config, namespace: kube-system}
rules:
  - {apiGroups: [""], resources: [configmaps], resourceNames: [cilium-config, bgp-config], verbs: [get, list, watch]}
  - {apiGroups: [""], resources: [secrets], resourceNames: [bgp-peer-passwords], verbs: [get, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: podcidr-speaker-config, namespace: kube-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: podcidr-speaker-config}
subjects: [{kind: ServiceAccount, name: podcidr-speaker, namespace: kube-system}]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: podcidr-speaker, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: podcidr-speaker-events, namespace: default}
rules:
  - {apiGroups: [events.k8s.io], resources: [events], verbs: [create, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: podcidr-speaker-events, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: podcidr-speaker-events}
subjects: [{kind: ServiceAccount, name: podcidr-speaker, namespace: kube-system}]
"#;
