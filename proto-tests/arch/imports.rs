//! The import rules of ARCHITECTURE.md, checked: every `use` line of src/ (group
//! braces expanded, `self`/`super` resolved to the crate path) and every `crate::`,
//! `tokio::` or clock path written inline in code, outside `#[cfg(test)]` modules.
//!
//! The rules (a module may not import):
//! - `bgp`, `bfd` and `routes` (the pure core): tokio, sockets, the clock
//!   (`SystemTime`, `Instant::now`), `peer`, `metrics`, `daemon`, `commands`, `cli`,
//!   `sources` other than its pure `sources::model` and `sources::services`; `bgp` and
//!   `bfd` not `routes` or `config` either, and `bfd` not `bgp` (the coupling of the two
//!   is `peer`'s);
//! - `alloc` (the allocator's pure core): as the pure core, and `routes`, `bgp`,
//!   `bfd`, `k8s_openapi`, `kube`; of `sources` only the pure `sources::services`;
//! - `allocate` (the allocator's role): `routes`, `bgp`, `bfd`, `peer`, `daemon`,
//!   `commands`, `cli`;
//! - `config`: `bgp::session`, `peer`, `daemon`, `commands`;
//! - `metrics`: a command (`commands`, `cli`) or `daemon`;
//! - `sources`: `bgp`, `routes`, `peer`, `daemon`, `commands` (it knows nothing of BGP);
//! - `peer`: `sources`, `daemon`, `commands`, `metrics` (it reports through its
//!   observer trait);
//! - `decode`: `cli`, `commands`, `daemon`, `peer`, `metrics`;
//! - `commands`, `daemon` and `metrics` (they render or count findings, never re-derive
//!   a routing decision): the rules' own helpers in `routes` ([`DECISION_HELPERS`]: the
//!   layering of pod CIDRs and LoadBalancer prefixes, the `pod-cidr-pools` selection,
//!   the attribute template, a Service's decision, the pools as the planner holds them,
//!   the next hop rule), except the findings those files return ([`FINDINGS`]); nor may
//!   they call the rules by name ([`DECISION_CALLS`]: an IP placed in the pools, a layer
//!   compared with the other, a range tested against a pod CIDR);
//! - `peer`: the layering is `routes::layers`' (the Adj-RIB-Out calls it): no diff of
//!   its own over the two layers ([`PEER_LAYERING`]).
//!
//! And, in functions of their own below the per-module rules:
//! - the sources files `routes` may import (`sources::model`, `sources::services`) are
//!   pure: no `k8s_openapi`, `kube*` or `tokio`, and no other sources file;
//! - no module but `commands`, `cli.rs` and `main.rs` imports `commands`;
//! - no import cycle: at every level of the module tree, the sibling modules (files or
//!   folders) import each other without a cycle, `pub use` re-exports followed to the
//!   file that defines the item (a module's own `mod.rs` is its parent's facade and is
//!   not counted as a sibling).
//!
//! The `checker_*` tests below feed the checker a forbidden line for each rule: the test
//! of the test.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// One rule: files under `module` may not use a path starting with any of `forbidden`,
/// unless it starts with one of `allowed`, and may not call a function or method named
/// in `calls` (`name(` in code, outside tests, comments and strings).
struct Rule {
    module: &'static str,
    forbidden: Vec<&'static str>,
    allowed: &'static [&'static str],
    calls: &'static [&'static str],
}

/// The helpers of the routing rules in `routes`: whoever imports one is about to work
/// a decision out again. `commands`, `daemon` and `metrics` read what the planners
/// return instead.
const DECISION_HELPERS: &[&str] = &[
    // "A pod CIDR wins over an equal LoadBalancer prefix" and its walk.
    "crate::routes::layers",
    // Which pools a peer gets (`pod-cidr-pools`).
    "crate::routes::pools",
    // ORIGIN, AS_PATH, LOCAL_PREF on iBGP only.
    "crate::routes::attrs",
    // A Service's decision, and the pools and advertisements it is made from.
    "crate::routes::lb::decide",
    "crate::routes::lb::LbPool",
    "crate::routes::lb::LbAdvertisement",
    "crate::routes::lb::EXCLUDE_LABEL",
    // The next hop of a (peer, family), and the address a session binds.
    "crate::routes::next_hop::rule",
    "crate::routes::plan::source_address",
    "crate::routes::source_address",
];

/// What the rules return, which `commands`, `daemon` and `metrics` render or count.
const FINDINGS: &[&str] = &[
    "crate::routes::layers::LbOverPod",
    "crate::routes::pools::PoolFinding",
];

/// The rules by name: `LbContext::place` (an IP against the pools), `layers::lb_sent`
/// (which layer a prefix goes out from), `layers::pod_cidrs_holding` and
/// `layers::ranges_overlap` (an address or a pool against the pod CIDRs), `pools`'
/// `Selection::takes`.
const DECISION_CALLS: &[&str] = &[
    "place",
    "lb_sent",
    "pod_cidrs_holding",
    "ranges_overlap",
    "takes",
];

/// What `peer` would need to layer the pod CIDRs and LoadBalancer routes itself: the
/// plain diff over a sorted walk it made (the Adj-RIB-Out diffs through
/// `routes::layers::diff`).
const PEER_LAYERING: &[&str] = &["crate::routes::diff_sorted", "crate::routes::diff"];

/// What the pure core (`bgp`, `bfd`, `routes`) may not touch: the runtime, sockets, the clock
/// and every module that does I/O or presents.
const IMPURE: &[&str] = &[
    "tokio",
    "std::time::SystemTime",
    "Instant::now",
    "SystemTime::now",
    "std::net::TcpStream",
    "std::net::TcpListener",
    "std::net::UdpSocket",
    "socket2",
    "crate::peer",
    "crate::metrics",
    "crate::daemon",
    "crate::commands",
    "crate::cli",
    "crate::sources",
];

fn rules() -> Vec<Rule> {
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        IMPURE.iter().chain(extra).copied().collect()
    };
    vec![
        Rule {
            module: "bgp",
            forbidden: with(&["crate::routes", "crate::config"]),
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "bfd",
            forbidden: with(&["crate::routes", "crate::config", "crate::bgp"]),
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "routes",
            forbidden: with(&[]),
            allowed: &["crate::sources::model", "crate::sources::services"],
            calls: &[],
        },
        Rule {
            module: "alloc",
            forbidden: with(&[
                "crate::routes",
                "crate::bgp",
                "crate::bfd",
                "k8s_openapi",
                "kube",
            ]),
            allowed: &["crate::sources::services"],
            calls: &[],
        },
        Rule {
            module: "allocate",
            forbidden: vec![
                "crate::routes",
                "crate::bgp",
                "crate::bfd",
                "crate::peer",
                "crate::daemon",
                "crate::commands",
                "crate::cli",
            ],
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "config",
            forbidden: vec![
                "crate::bgp::session",
                "crate::peer",
                "crate::daemon",
                "crate::commands",
                "crate::cli",
            ],
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "metrics",
            forbidden: vec!["crate::commands", "crate::cli", "crate::daemon"],
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "sources",
            forbidden: vec![
                "crate::bgp",
                "crate::routes",
                "crate::peer",
                "crate::daemon",
                "crate::commands",
                "crate::cli",
            ],
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "peer",
            forbidden: vec![
                "crate::sources",
                "crate::daemon",
                "crate::commands",
                "crate::cli",
                "crate::metrics",
            ],
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "decode",
            forbidden: vec![
                "crate::cli",
                "crate::commands",
                "crate::daemon",
                "crate::peer",
                "crate::metrics",
            ],
            allowed: &[],
            calls: &[],
        },
        Rule {
            module: "peer",
            forbidden: PEER_LAYERING.to_vec(),
            allowed: &[],
            calls: &["diff_sorted"],
        },
        Rule {
            module: "commands",
            forbidden: DECISION_HELPERS.to_vec(),
            allowed: FINDINGS,
            calls: DECISION_CALLS,
        },
        Rule {
            module: "daemon",
            forbidden: DECISION_HELPERS.to_vec(),
            allowed: FINDINGS,
            calls: DECISION_CALLS,
        },
        Rule {
            module: "metrics",
            forbidden: DECISION_HELPERS.to_vec(),
            allowed: FINDINGS,
            calls: DECISION_CALLS,
        },
    ]
}

/// A forbidden path found in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Violation {
    file: String,
    line: usize,
    path: String,
    rule: &'static str,
}

/// The module path of a file under src/: `src/routes/plan.rs` -> [routes, plan],
/// `src/peer/mod.rs` -> [peer].
fn module_path(relative: &Path) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.pop() {
        let stem = last.trim_end_matches(".rs");
        if stem != "mod" && stem != "lib" && stem != "main" {
            parts.push(stem.to_owned());
        }
    }
    parts
}

/// The code of a file without its `#[cfg(test)]` modules, comments and string
/// contents, line numbers kept.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth: i64 = 0;
    let mut pending_cfg_test = false;
    for (i, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        let trimmed = line.trim();
        if skip_depth.is_none() && trimmed.starts_with("#[cfg(test)]") {
            pending_cfg_test = true;
            continue;
        }
        let opens = line.matches('{').count() as i64;
        let closes = line.matches('}').count() as i64;
        if pending_cfg_test && skip_depth.is_none() {
            if trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ") {
                if opens > closes {
                    skip_depth = Some(depth);
                }
                depth += opens - closes;
                pending_cfg_test = false;
                continue;
            }
            // `#[cfg(test)]` on an item other than a module: skip that item's line.
            pending_cfg_test = trimmed.starts_with("#[");
            depth += opens - closes;
            continue;
        }
        depth += opens - closes;
        if let Some(d) = skip_depth {
            if depth <= d {
                skip_depth = None;
            }
            continue;
        }
        out.push((i + 1, line));
    }
    out
}

/// A line without its `//` comment and without the contents of its string literals.
fn strip_comment(line: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            if c == '\\' {
                chars.next();
            } else if c == '"' {
                in_str = false;
                out.push(c);
            }
            continue;
        }
        if c == '"' {
            in_str = true;
            out.push(c);
            continue;
        }
        if c == '\'' {
            // A char literal such as '{' must not count as a brace; a lifetime passes.
            let rest: String = chars.clone().take(3).collect();
            if rest.len() >= 2 && rest.chars().nth(1) == Some('\'') {
                chars.next();
                chars.next();
                out.push_str("' '");
                continue;
            }
        }
        if c == '/' && chars.peek() == Some(&'/') {
            break;
        }
        out.push(c);
    }
    out
}

/// Expands a use tree (`a::{b, c::{d as e}}`) into full paths, aliases dropped.
fn expand(tree: &str) -> Vec<String> {
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut plain = String::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "as" {
            // Drop the alias name but keep what follows it (`,` or `}`).
            let alias = words.get(i + 1).copied().unwrap_or("");
            plain.extend(
                alias
                    .chars()
                    .skip_while(|c| c.is_alphanumeric() || *c == '_'),
            );
            i += 2;
            continue;
        }
        plain.push_str(words[i]);
        i += 1;
    }
    let tree = plain;
    let mut out = Vec::new();
    expand_into("", &tree, &mut out);
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_owned()
        } else if b.is_empty() || b == "self" {
            a.to_owned()
        } else {
            format!("{a}::{b}")
        }
    };
    match tree.find('{') {
        None => out.push(join(prefix, tree.trim_end_matches("::"))),
        Some(open) => {
            let head = tree[..open].trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let base = join(prefix, head);
            for part in split_top(inner) {
                if !part.is_empty() {
                    expand_into(&base, part, out);
                }
            }
        }
    }
}

/// Splits at the commas outside braces.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// `self::` / `super::` resolved against the file's module path; `crate::` kept.
fn resolve(path: &str, module: &[String]) -> String {
    let mut segments: Vec<&str> = path.split("::").collect();
    let mut base: Vec<String> = module.to_vec();
    let mut relative = false;
    while let Some(first) = segments.first() {
        match *first {
            "self" => relative = true,
            "super" => {
                relative = true;
                base.pop();
            }
            _ => break,
        }
        segments.remove(0);
    }
    if relative {
        let mut full = vec!["crate".to_owned()];
        full.extend(base);
        full.extend(segments.iter().map(|s| (*s).to_owned()));
        full.join("::")
    } else {
        segments.join("::")
    }
}

/// Every path a file uses: its `use` declarations (expanded and resolved) and the
/// `crate::`, `tokio::` and `::now` paths written inline.
fn used_paths(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let lines = code_lines(text);
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in &lines {
        let t = line.trim();
        if let Some((start, acc)) = pending.as_mut() {
            acc.push_str(t);
            if t.contains(';') {
                let (start, acc) = (*start, acc.clone());
                pending = None;
                push_use(&acc, start, module, &mut out);
            }
            continue;
        }
        let after_vis = t
            .strip_prefix("pub(crate) ")
            .or_else(|| t.strip_prefix("pub(super) "))
            .or_else(|| t.strip_prefix("pub "))
            .unwrap_or(t);
        if let Some(rest) = after_vis.strip_prefix("use ") {
            if rest.contains(';') {
                push_use(rest, *n, module, &mut out);
            } else {
                pending = Some((*n, rest.to_owned()));
            }
            continue;
        }
        for needle in [
            "crate::",
            "tokio::",
            "socket2::",
            "Instant::now",
            "SystemTime::now",
        ] {
            let mut from = 0;
            while let Some(i) = t[from..].find(needle) {
                let start = from + i;
                let preceded = t[..start]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_');
                from = start + needle.len();
                if preceded && !needle.starts_with("Instant") && !needle.starts_with("System") {
                    continue;
                }
                let path: String = t[start..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                    .collect();
                out.push((*n, path));
            }
        }
    }
    out
}

fn push_use(tree: &str, line: usize, module: &[String], out: &mut Vec<(usize, String)>) {
    let tree = tree.split(';').next().unwrap_or(tree);
    for path in expand(tree) {
        out.push((line, resolve(&path, module)));
    }
}

/// `path` is `prefix` or inside it; a clock read (`...::now`) anywhere in the path.
fn matches(path: &str, prefix: &str) -> bool {
    if prefix.ends_with("::now") {
        return path.contains(prefix);
    }
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
}

/// Every call of a function or method named `name` in code: `name(` (also `name::<`)
/// not preceded by an identifier character. Line numbers of the file.
fn calls_of(text: &str, name: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for (n, line) in code_lines(text) {
        let mut from = 0;
        while let Some(i) = line[from..].find(name) {
            let start = from + i;
            from = start + name.len();
            let preceded = line[..start]
                .chars()
                .last()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            let rest = &line[from..];
            if !preceded && (rest.starts_with('(') || rest.starts_with("::<")) {
                out.push(n);
            }
        }
    }
    out
}

/// The rule violations in one file's text.
fn check(file: &str, relative: &Path, text: &str) -> Vec<Violation> {
    let module = module_path(relative);
    let Some(top) = module.first() else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for rule in rules().iter().filter(|r| r.module == top) {
        for name in rule.calls {
            for line in calls_of(text, name) {
                found.push(Violation {
                    file: file.to_owned(),
                    line,
                    path: format!("{name}()"),
                    rule: rule.module,
                });
            }
        }
        for (line, path) in used_paths(text, &module) {
            let bad = rule.forbidden.iter().any(|f| matches(&path, f))
                && !rule.allowed.iter().any(|a| matches(&path, a));
            if bad {
                found.push(Violation {
                    file: file.to_owned(),
                    line,
                    path: path.clone(),
                    rule: rule.module,
                });
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn src_follows_the_import_rules_of_architecture_md() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "src/ has only {} files", files.len());
    let mut violations = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let relative = file.strip_prefix(&src).unwrap();
        violations.extend(check(&relative.display().to_string(), relative, &text));
    }
    let report: Vec<String> = violations
        .iter()
        .map(|v| {
            format!(
                "src/{}:{}: {} may not use {}",
                v.file, v.line, v.rule, v.path
            )
        })
        .collect();
    assert!(report.is_empty(), "\n{}", report.join("\n"));
}

/// Lines that break each rule, in a file of that module: the checker must flag each.
#[test]
fn checker_flags_a_forbidden_import_of_every_rule() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "alloc/mod.rs",
            "use tokio::sync::mpsc;",
            "tokio::sync::mpsc",
        ),
        (
            "alloc/pools.rs",
            "use crate::sources::service_objects::service_facts;",
            "crate::sources::service_objects::service_facts",
        ),
        (
            "alloc/mod.rs",
            "use k8s_openapi::api::core::v1::Service;",
            "k8s_openapi::api::core::v1::Service",
        ),
        (
            "alloc/service.rs",
            "use crate::routes::lb::LbContext;",
            "crate::routes::lb::LbContext",
        ),
        (
            "allocate/objects.rs",
            "use crate::routes::lb::LbContext;",
            "crate::routes::lb::LbContext",
        ),
        (
            "bgp/session/fsm.rs",
            "use tokio::time::sleep;",
            "tokio::time::sleep",
        ),
        (
            "bgp/wire/open.rs",
            "use std::time::{Duration, SystemTime};",
            "std::time::SystemTime",
        ),
        (
            "bgp/session/timers.rs",
            "    let t = std::time::Instant::now();",
            "Instant::now",
        ),
        (
            "bgp/session/fsm.rs",
            "use crate::{bgp::wire, metrics::Metrics};",
            "crate::metrics::Metrics",
        ),
        (
            "bfd/session.rs",
            "    let t = Instant::now();",
            "Instant::now",
        ),
        (
            "bfd/mod.rs",
            "use std::net::UdpSocket;",
            "std::net::UdpSocket",
        ),
        (
            "bfd/session.rs",
            "use tokio::time::Instant;",
            "tokio::time::Instant",
        ),
        (
            "bfd/packet.rs",
            "use crate::config::BfdProfile;",
            "crate::config::BfdProfile",
        ),
        (
            "bfd/session.rs",
            "use crate::bgp::wire::Notification;",
            "crate::bgp::wire::Notification",
        ),
        (
            "bfd/session.rs",
            "use super::super::peer::PeerSpec;",
            "crate::peer::PeerSpec",
        ),
        (
            "routes/plan.rs",
            "use crate::sources::kube::client;",
            "crate::sources::kube::client",
        ),
        (
            "routes/plan.rs",
            "use super::super::peer::PeerSpec;",
            "crate::peer::PeerSpec",
        ),
        ("routes/mod.rs", "use crate::daemon;", "crate::daemon"),
        (
            "routes/plan.rs",
            "use std::net::{IpAddr, TcpStream};",
            "std::net::TcpStream",
        ),
        (
            "config/reload.rs",
            "use crate::bgp::session::SessionConfig;",
            "crate::bgp::session::SessionConfig",
        ),
        (
            "config/model.rs",
            "use crate::peer::{\n    PeerSpec,\n};",
            "crate::peer::PeerSpec",
        ),
        (
            "metrics/registry.rs",
            "use crate::commands::doctor::overlaps;",
            "crate::commands::doctor::overlaps",
        ),
        (
            "metrics/registry.rs",
            "    let d = crate::commands::doctor::diagnose(s);",
            "crate::commands::doctor::diagnose",
        ),
        (
            "sources/model.rs",
            "use crate::routes::Plan;",
            "crate::routes::Plan",
        ),
        (
            "peer/driver.rs",
            "use crate::metrics::Metrics;",
            "crate::metrics::Metrics",
        ),
        (
            "decode/command.rs",
            "use crate::cli::DecodeArgs;",
            "crate::cli::DecodeArgs",
        ),
        // commands, daemon and metrics: no routing rule's helper, no rule called.
        (
            "commands/plan/report.rs",
            "use crate::routes::layers::walk;",
            "crate::routes::layers::walk",
        ),
        (
            "commands/plan/report.rs",
            "use crate::routes::{layers::{self, LbOverPod}, Plan};",
            "crate::routes::layers",
        ),
        (
            "daemon/mod.rs",
            "use crate::routes::pools::Selection;",
            "crate::routes::pools::Selection",
        ),
        (
            "metrics/registry.rs",
            "use crate::routes::attrs::DEFAULT_LOCAL_PREF;",
            "crate::routes::attrs::DEFAULT_LOCAL_PREF",
        ),
        (
            "commands/plan/report.rs",
            "    let d = crate::routes::lb::decide(&c, true, &s, e);",
            "crate::routes::lb::decide",
        ),
        (
            "daemon/peers.rs",
            "use crate::routes::plan::source_address;",
            "crate::routes::plan::source_address",
        ),
        (
            "commands/doctor/diagnose.rs",
            "    let p = context.place(ip);",
            "place()",
        ),
        (
            "daemon/mod.rs",
            "        if layers::lb_sent(&pod, &p) {",
            "lb_sent()",
        ),
        (
            "metrics/registry.rs",
            "    let n = cidrs.iter().filter(|c| ranges_overlap(c, pod)).count();",
            "ranges_overlap()",
        ),
        (
            "commands/doctor/mod.rs",
            "    for pod in pod_cidrs_holding(ip, &cidrs) {",
            "pod_cidrs_holding()",
        ),
        (
            "commands/plan/report.rs",
            "    if selection.takes(Some(&held.pool)) {",
            "takes()",
        ),
        // peer: the layering is routes::layers'.
        (
            "peer/adj_rib_out.rs",
            "use crate::routes::diff_sorted;",
            "crate::routes::diff_sorted",
        ),
        (
            "peer/adj_rib_out.rs",
            "        let d = routes::diff_sorted(&self.held, both(&pod, &lb));",
            "diff_sorted()",
        ),
    ];
    for (file, line, path) in cases {
        let text = format!("//! a module\n\n{line}\n\nfn f() {{}}\n");
        let found = check(file, Path::new(file), &text);
        assert!(
            found.iter().any(|v| v.path == *path),
            "{file}: {line:?} not flagged as {path}: {found:?}"
        );
    }
}

#[test]
fn checker_allows_what_the_rules_allow() {
    let cases: &[(&str, &str)] = &[
        (
            "routes/plan.rs",
            "use crate::sources::model::{Family, NodeView};",
        ),
        (
            "alloc/mod.rs",
            "use crate::sources::services::{class_served, ObjectKey};",
        ),
        ("alloc/pools.rs", "use crate::config::AddressPool;"),
        ("routes/plan.rs", "use std::time::Duration;"),
        ("bgp/session/fsm.rs", "use std::time::Instant;"),
        ("bfd/session.rs", "use std::time::{Duration, Instant};"),
        ("bfd/session.rs", "use super::packet::{Diag, Packet};"),
        ("config/model.rs", "use crate::bfd::SessionConfig;"),
        ("bgp/session/fsm.rs", "use super::super::wire::Message;"),
        ("config/model.rs", "use crate::bgp::wire::Origin;"),
        (
            "metrics/registry.rs",
            "use crate::sources::model::NodeView;",
        ),
        (
            "peer/driver.rs",
            "use crate::bgp::session::Session; // crate::metrics is not used",
        ),
        ("commands/doctor.rs", "use crate::sources::kube;"),
        (
            "routes/plan.rs",
            "#[cfg(test)]\nmod tests {\n    use tokio::time::sleep;\n}\nfn g() {}",
        ),
        (
            "routes/plan.rs",
            "    let s = \"crate::peer is not a path here\";",
        ),
        // The findings are what commands, daemon and metrics render.
        (
            "commands/plan/report.rs",
            "use crate::routes::layers::LbOverPod;",
        ),
        ("daemon/mod.rs", "use crate::routes::pools::PoolFinding;"),
        ("peer/adj_rib_out.rs", "use crate::routes::{attrs, layers};"),
        (
            "peer/adj_rib_out.rs",
            "        let diff = layers::diff(&self.held, &self.desired, &self.lb);",
        ),
        // A name inside another, in a comment or a string is no call.
        (
            "commands/doctor/diagnose.rs",
            "    let s = t.replace(a, b);",
        ),
        ("daemon/mod.rs", "    // layers::lb_sent(&pod, &p) decides"),
        ("metrics/registry.rs", "    let s = \"place(\";"),
        ("routes/lb.rs", "    let p = context.place(ip);"),
    ];
    for (file, line) in cases {
        let text = format!("//! a module\n\n{line}\n");
        let found = check(file, Path::new(file), &text);
        assert!(found.is_empty(), "{file}: {line:?} flagged: {found:?}");
    }
}

// --- Layering beyond the per-module rules: the pure sources files, `commands` imported by
// --- no runtime module, no import cycle. Kept apart from the rules above so that each
// --- can change without the other.

/// What a pure sources file (one `routes` may import) may not use: the Kubernetes
/// types and clients, the runtime, and the sources' drivers or object mappings (which
/// would bring those in through the back door).
const NOT_PURE: &[&str] = &[
    "k8s_openapi",
    "kube",
    "kube_runtime",
    "kube_client",
    "tokio",
    "crate::sources",
];

/// The sources files `routes` plans from: the `crate::sources::*` paths its rule
/// allows, as module paths (`[sources, model]`). One list: allowing `routes` another
/// sources file makes that file pure by the same stroke.
fn pure_sources() -> Vec<Vec<String>> {
    rules()
        .iter()
        .filter(|r| r.module == "routes")
        .flat_map(|r| r.allowed.iter())
        .filter_map(|a| a.strip_prefix("crate::"))
        .filter(|a| a.starts_with("sources::"))
        .map(|a| a.split("::").map(str::to_owned).collect())
        .collect()
}

/// Every path a file uses (as [`used_paths`]) plus the external crate paths written
/// inline that `used_paths` does not look for (`k8s_openapi::...`, `kube::...`); a path
/// after `::` (`crate::sources::kube::x`) is not a crate's.
fn used_paths_with_crates(text: &str, module: &[String]) -> Vec<(usize, String)> {
    let mut out = used_paths(text, module);
    for (n, line) in code_lines(text) {
        // A `use` line is in `used_paths` already, expanded.
        let t = line.trim_start();
        if t.starts_with("use ") || t.starts_with("pub use ") || t.starts_with("pub(crate) use ") {
            continue;
        }
        for needle in ["k8s_openapi::", "kube::", "kube_runtime::", "kube_client::"] {
            let mut from = 0;
            while let Some(i) = line[from..].find(needle) {
                let start = from + i;
                from = start + needle.len();
                let preceded = line[..start]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
                if !preceded {
                    let path: String = line[start..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    out.push((n, path));
                }
            }
        }
    }
    out
}

/// A pure sources file that uses what [`NOT_PURE`] names, other than another pure
/// sources file.
fn impure_sources(file: &str, relative: &Path, text: &str) -> Vec<Violation> {
    let module = module_path(relative);
    let pure = pure_sources();
    if !pure.contains(&module) {
        return Vec::new();
    }
    let allowed: Vec<String> = pure
        .iter()
        .map(|m| format!("crate::{}", m.join("::")))
        .collect();
    used_paths_with_crates(text, &module)
        .into_iter()
        .filter(|(_, path)| {
            NOT_PURE.iter().any(|f| matches(path, f)) && !allowed.iter().any(|a| matches(path, a))
        })
        .map(|(line, path)| Violation {
            file: file.to_owned(),
            line,
            path,
            rule: "pure sources",
        })
        .collect()
}

/// A runtime module that imports a command: only `commands` itself, `cli.rs` (which
/// builds each command's request) and `main.rs` (which calls them) may.
fn command_importers(file: &str, relative: &Path, text: &str) -> Vec<Violation> {
    let module = module_path(relative);
    match module.first().map(String::as_str) {
        None | Some("commands") | Some("cli") => return Vec::new(),
        Some(_) => {}
    }
    used_paths(text, &module)
        .into_iter()
        .filter(|(_, path)| matches(path, "crate::commands"))
        .map(|(line, path)| Violation {
            file: file.to_owned(),
            line,
            path,
            rule: "only commands, cli.rs and main.rs import commands:",
        })
        .collect()
}

fn report(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(|v| {
            format!(
                "src/{}:{}: {} may not use {}",
                v.file, v.line, v.rule, v.path
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every file of src/, with its path relative to src/ and its text.
fn src_files() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 50, "src/ has only {} files", files.len());
    files
        .into_iter()
        .map(|f| {
            let text = fs::read_to_string(&f).unwrap();
            (f.strip_prefix(&src).unwrap().to_owned(), text)
        })
        .collect()
}

#[test]
fn the_pure_sources_files_import_no_kubernetes_types_and_no_runtime() {
    let files = src_files();
    let pure = pure_sources();
    assert!(
        pure.contains(&vec!["sources".to_owned(), "services".to_owned()]),
        "routes no longer plans from sources::services: {pure:?}"
    );
    let mut violations = Vec::new();
    for (relative, text) in &files {
        violations.extend(impure_sources(
            &relative.display().to_string(),
            relative,
            text,
        ));
    }
    assert!(violations.is_empty(), "\n{}", report(&violations));
}

#[test]
fn no_runtime_module_imports_a_command() {
    let mut violations = Vec::new();
    for (relative, text) in &src_files() {
        violations.extend(command_importers(
            &relative.display().to_string(),
            relative,
            text,
        ));
    }
    assert!(violations.is_empty(), "\n{}", report(&violations));
}

/// Each (file, line, path): `checker` flags `path` in a file of that name holding that
/// line.
fn flags(cases: &[(&str, &str, &str)], checker: impl Fn(&str, &Path, &str) -> Vec<Violation>) {
    for (file, line, path) in cases {
        let text = format!("//! a module\n\n{line}\n\nfn f() {{}}\n");
        let found = checker(file, Path::new(file), &text);
        assert!(
            found.iter().any(|v| v.path == *path),
            "{file}: {line:?} not flagged as {path}: {found:?}"
        );
    }
}

#[test]
fn checker_flags_impure_sources_and_runtime_modules_importing_commands() {
    let impure: &[(&str, &str, &str)] = &[
        (
            "sources/services.rs",
            "use k8s_openapi::api::core::v1::Service;",
            "k8s_openapi::api::core::v1::Service",
        ),
        (
            "sources/services.rs",
            "    let s: k8s_openapi::api::core::v1::Service = todo();",
            "k8s_openapi::api::core::v1::Service",
        ),
        ("sources/model.rs", "use kube::Api;", "kube::Api"),
        (
            "sources/model.rs",
            "use tokio::sync::watch;",
            "tokio::sync::watch",
        ),
        (
            "sources/services.rs",
            "use super::service_objects::service_facts;",
            "crate::sources::service_objects::service_facts",
        ),
        (
            "routes/lb.rs",
            "use crate::sources::service_objects::Names;",
            "crate::sources::service_objects::Names",
        ),
    ];
    // The routes case is the per-module rule's: `routes` may import the pure file only.
    flags(impure, |f, r, t| {
        let mut found = impure_sources(f, r, t);
        found.extend(check(f, r, t));
        found
    });
    let importers: &[(&str, &str, &str)] = &[
        (
            "gate.rs",
            "    crate::commands::status::parse_response(&answer)",
            "crate::commands::status::parse_response",
        ),
        (
            "daemon/mod.rs",
            "use crate::commands::plan::report;",
            "crate::commands::plan::report",
        ),
        (
            "peer/driver.rs",
            "use super::super::commands::status;",
            "crate::commands::status",
        ),
    ];
    flags(importers, command_importers);
    // What stays allowed: the pure files among themselves and std; commands, cli.rs and
    // main.rs importing commands; a sources driver importing the Kubernetes types.
    let allowed: &[(&str, &str)] = &[
        ("sources/services.rs", "use std::collections::BTreeMap;"),
        ("sources/services.rs", "use super::model::Family;"),
        (
            "sources/service_objects.rs",
            "use k8s_openapi::api::core::v1::Service;",
        ),
        ("commands/doctor.rs", "use super::status::duration;"),
        ("cli.rs", "use crate::commands::status::StatusRequest;"),
        ("main.rs", "use crate::commands::status;"),
    ];
    for (file, line) in allowed {
        let text = format!("//! a module\n\n{line}\n");
        let mut found = impure_sources(file, Path::new(file), &text);
        found.extend(command_importers(file, Path::new(file), &text));
        assert!(found.is_empty(), "{file}: {line:?} flagged: {found:?}");
    }
    // `kube::` after `::` is a path inside the crate (flagged as such), not the kube
    // crate.
    let text = "//! a module\n\n    let s = crate::sources::kube::x();\n";
    let found: Vec<String> =
        impure_sources("sources/model.rs", Path::new("sources/model.rs"), text)
            .into_iter()
            .map(|v| v.path)
            .collect();
    assert_eq!(found, ["crate::sources::kube::x"]);
}

/// The module tree of a crate: each module's path (`[peer, spec]`) and text. `lib.rs` is
/// the root (`[]`); `main.rs` is another crate and is left out.
struct Tree {
    modules: BTreeMap<Vec<String>, (String, String)>,
}

impl Tree {
    /// From (path relative to src/, text) pairs.
    fn new(files: &[(PathBuf, String)]) -> Tree {
        let modules = files
            .iter()
            .filter(|(relative, _)| relative != Path::new("main.rs"))
            .map(|(relative, text)| {
                (
                    module_path(relative),
                    (relative.display().to_string(), text.clone()),
                )
            })
            .collect();
        Tree { modules }
    }

    /// The module whose file defines what `path` (`crate::...`) names: down the tree
    /// while a segment is a module, then through the `pub use` re-exports of the module
    /// reached (`crate::peer::PeerSpec` is `peer/spec.rs`'s). A name re-exported under
    /// an alias, or not found, stays with the module reached (its facade).
    fn defining_module(&self, path: &str, depth: usize) -> Option<Vec<String>> {
        let segments: Vec<&str> = path.split("::").collect();
        if segments.first() != Some(&"crate") {
            return None;
        }
        let mut module: Vec<String> = Vec::new();
        for (i, segment) in segments.iter().enumerate().skip(1) {
            let mut child = module.clone();
            child.push((*segment).to_owned());
            if self.modules.contains_key(&child) {
                module = child;
                continue;
            }
            if depth < 8 {
                if let Some(via) = self.reexport(&module, segment) {
                    let mut full = via;
                    for rest in &segments[i + 1..] {
                        full.push_str("::");
                        full.push_str(rest);
                    }
                    return self.defining_module(&full, depth + 1);
                }
            }
            break;
        }
        Some(module)
    }

    /// Where `module` re-exports `name` from (`pub use x::{Name}` or a glob `x::*` whose
    /// module defines `pub ... Name`), as a `crate::` path.
    fn reexport(&self, module: &[String], name: &str) -> Option<String> {
        let (_, text) = self.modules.get(module)?;
        let mut paths = Vec::new();
        let mut pending: Option<String> = None;
        for (_, line) in code_lines(text) {
            let t = line.trim();
            if let Some(acc) = pending.as_mut() {
                acc.push_str(t);
                if t.contains(';') {
                    paths.extend(expand(acc.split(';').next().unwrap_or_default()));
                    pending = None;
                }
                continue;
            }
            let Some(rest) = t
                .strip_prefix("pub use ")
                .or_else(|| t.strip_prefix("pub(crate) use "))
            else {
                continue;
            };
            if rest.contains(';') {
                paths.extend(expand(rest.split(';').next().unwrap_or_default()));
            } else {
                pending = Some(rest.to_owned());
            }
        }
        let resolved: Vec<String> = paths
            .iter()
            .map(|p| {
                // `pub use spec::X` inside a module means `self::spec::X`.
                let first = p.split("::").next().unwrap_or_default();
                let mut child = module.to_vec();
                child.push(first.to_owned());
                if self.modules.contains_key(&child) {
                    resolve(&format!("self::{p}"), module)
                } else {
                    resolve(p, module)
                }
            })
            .collect();
        if let Some(p) = resolved
            .iter()
            .find(|p| p.rsplit("::").next() == Some(name))
        {
            return Some(p.clone());
        }
        resolved.iter().find_map(|p| {
            let base = p.strip_suffix("::*")?;
            let target = self.defining_module(base, 8)?;
            let (_, text) = self.modules.get(&target)?;
            defines(text, name).then(|| format!("{base}::{name}"))
        })
    }
}

/// `text` defines a public item called `name`.
fn defines(text: &str, name: &str) -> bool {
    [
        "struct", "enum", "fn", "const", "static", "type", "trait", "mod",
    ]
    .iter()
    .any(|kind| {
        let needle = format!("pub {kind} {name}");
        text.match_indices(&needle).any(|(i, _)| {
            text[i + needle.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'))
        })
    })
}

/// One import between two sibling modules: at `level` (a module), the child `from`
/// uses something of the child `to`, first at `file:line`.
type SiblingEdges = BTreeMap<Vec<String>, BTreeMap<(String, String), String>>;

/// Every import between siblings of the module tree, by level. An import of a module's
/// own ancestor or descendant (a child using its parent's `mod.rs`, a `mod.rs` calling
/// its children) is structure, not a dependency between siblings, and is not counted.
fn sibling_edges(files: &[(PathBuf, String)]) -> SiblingEdges {
    let tree = Tree::new(files);
    let mut edges: SiblingEdges = BTreeMap::new();
    for (from, (file, text)) in &tree.modules {
        for (line, path) in used_paths(text, from) {
            let Some(to) = tree.defining_module(&path, 0) else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue;
            }
            edges
                .entry(from[..common].to_vec())
                .or_default()
                .entry((from[common].clone(), to[common].clone()))
                .or_insert_with(|| format!("src/{file}:{line} uses {path}"));
        }
    }
    edges
}

/// The import cycles among siblings, at every level of the module tree: each a level,
/// its members, and the imports between them. Any cycle among files shows here, at the
/// module where its files' paths part.
fn cycles(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (level, edges) in sibling_edges(files) {
        let reach = |start: &str| {
            let mut seen: BTreeSet<&str> = BTreeSet::new();
            let mut todo = vec![start];
            while let Some(n) = todo.pop() {
                for (a, b) in edges.keys() {
                    if a == n && seen.insert(b.as_str()) {
                        todo.push(b.as_str());
                    }
                }
            }
            seen
        };
        let nodes: BTreeSet<&str> = edges.keys().map(|(a, _)| a.as_str()).collect();
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for n in nodes {
            if done.contains(n) || !reach(n).contains(n) {
                continue;
            }
            let members: BTreeSet<&str> = reach(n)
                .into_iter()
                .filter(|m| reach(m).contains(n))
                .collect();
            done.extend(&members);
            let witnesses: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| members.contains(a.as_str()) && members.contains(b.as_str()))
                .map(|((a, b), w)| format!("  {a} -> {b}: {w}"))
                .collect();
            found.push(format!(
                "cycle in crate::{} among {{{}}}:\n{}",
                level.join("::"),
                members.into_iter().collect::<Vec<_>>().join(", "),
                witnesses.join("\n")
            ));
        }
    }
    found
}

#[test]
fn src_has_no_import_cycle_among_files_or_modules() {
    let files = src_files();
    let edges = sibling_edges(&files);
    // The edges the check needs to see at all: the crate's modules, and files in one.
    let top = edges.get(&Vec::new()).map_or(0, BTreeMap::len);
    assert!(top > 20, "only {top} imports between top-level modules");
    assert!(
        edges
            .get(&vec!["peer".to_owned()])
            .is_some_and(|e| e.contains_key(&("spec".to_owned(), "transport".to_owned()))),
        "peer/spec.rs -> peer/transport.rs not seen: {:?}",
        edges.get(&vec!["peer".to_owned()])
    );
    let found = cycles(&files);
    assert!(found.is_empty(), "\n{}", found.join("\n"));
}

#[test]
fn checker_finds_a_cycle_among_files_and_among_modules() {
    let files = |list: &[(&str, &str)]| -> Vec<(PathBuf, String)> {
        list.iter()
            .map(|(p, t)| (PathBuf::from(p), format!("//! a module\n\n{t}\n")))
            .collect()
    };
    // Two files of one module, one of them through its parent's re-export.
    let found = cycles(&files(&[
        ("lib.rs", "pub mod a;"),
        ("a/mod.rs", "mod x;\nmod y;\npub use x::{X, Xs};"),
        ("a/x.rs", "use super::y::Y;\npub struct X;"),
        ("a/y.rs", "use crate::a::X;\npub struct Y;"),
    ]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("cycle in crate::a among {x, y}"),
        "{found:?}"
    );
    // Two top-level modules, through files deeper down and a glob re-export.
    let found = cycles(&files(&[
        ("lib.rs", "pub mod p;\npub mod q;"),
        ("p/mod.rs", "pub mod inner;\npub use inner::*;"),
        (
            "p/inner.rs",
            "pub struct P;\nfn f() { let _ = crate::q::deep::Q; }",
        ),
        ("q/mod.rs", "pub mod deep;"),
        ("q/deep.rs", "use crate::p::P;\npub struct Q;"),
    ]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("cycle in crate:: among {p, q}"),
        "{found:?}"
    );
    // Three files in a ring, as peer/{bfd,socket,spec} were.
    let found = cycles(&files(&[
        ("peer/mod.rs", "mod bfd;\nmod socket;\nmod spec;"),
        ("peer/bfd.rs", "use super::socket::{self, Datagram};"),
        ("peer/socket.rs", "use super::spec::{Transport, TtlPolicy};"),
        ("peer/spec.rs", "use super::bfd::{BfdSpec, SINGLE_HOP_TTL};"),
    ]));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("cycle in crate::peer among {bfd, socket, spec}"),
        "{found:?}"
    );
    // No cycle: a parent and its children use each other; a chain; a test module.
    let found = cycles(&files(&[
        ("lib.rs", "pub mod a;\npub mod b;"),
        (
            "a/mod.rs",
            "mod x;\nmod y;\npub struct Shared;\nfn f() { x::run(); }",
        ),
        (
            "a/x.rs",
            "use super::Shared;\nuse super::y::Y;\nuse crate::b::B;",
        ),
        (
            "a/y.rs",
            "pub struct Y;\n#[cfg(test)]\nmod tests {\n    use super::super::x;\n}",
        ),
        ("b.rs", "pub struct B;"),
    ]));
    assert!(found.is_empty(), "{found:?}");
}
