//! The migration guides (docs/migrate-from-*.md) cannot rot: every command line of their
//! ```sh blocks is one this test knows, and what it names exists.
//!
//! - `podcidr-speaker ...`: parsed by the binary's own clap definition.
//! - `helm install|upgrade` of this repository's chart: the chart directory exists, and
//!   the values file the guide gives (its ```yaml block with `nodeSelector`) is checked
//!   against the chart's values.schema.json (the parts of JSON Schema the schema uses:
//!   type, enum, properties, additionalProperties).
//! - `helm install` of MetalLB v0.12.1's chart: the value keys it sets are the chart's
//!   (charts/metallb/values.yaml at v0.12.1: `speaker.enabled`, `existingConfigMap`).
//! - `kubectl ...`: every flag it passes is in `kubectl <verb> [<kind>] --help`, and
//!   every `-p` patch is JSON (a JSON patch: a list of operations with `op` and `path`).
//! - A bgp-config fragment in a guide parses with the speaker's own parser.
//! - A kustomization in a guide builds (`kubectl kustomize`, against this checkout) into
//!   a DaemonSet with the nodeSelector and the LoadBalancer switch of the guide's Helm
//!   values: both ways to install say the same.
//!
//! A command this test does not know fails it: adding one to a guide means saying here
//! how to check it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use clap::Parser;
use podcidr_speaker::cli::Cli;
use serde::Deserialize;
use serde_json::Value;

const GUIDES: [&str; 2] = [
    "docs/migrate-from-metallb.md",
    "docs/migrate-from-cilium-bgp.md",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The contents of each fenced block of `lang` in `text`.
fn blocks(text: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Inside a block: its language, the fence's indent and its text so far.
    let mut open: Option<(String, usize, String)> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(fence_lang) = t.strip_prefix("```") {
            match open.take() {
                Some((l, _, body)) if l == lang => out.push(body),
                Some(_) => {}
                None => {
                    let indent = line.len() - line.trim_start().len();
                    open = Some((fence_lang.to_string(), indent, String::new()));
                }
            }
            continue;
        }
        if let Some((_, indent, body)) = open.as_mut() {
            // A block in a list item is indented as its fence; the text keeps the rest.
            body.push_str(line.get(*indent..).unwrap_or(""));
            body.push('\n');
        }
    }
    out
}

/// Splits a shell command line into words: whitespace outside quotes, single and
/// double quotes removed (the guides use no escapes inside them).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            (None, c) => cur.push(c),
        }
    }
    assert!(quote.is_none(), "unbalanced quote in {line:?}");
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The guide's placeholders as a user fills them in.
fn fill(word: &str) -> String {
    word.replace("NODE_IP", "192.0.2.10")
        .replace("NODE", "node-1")
}

fn kubectl_help(args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .args(args)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("kubectl {args:?} --help: {e} (kubectl is needed)"));
    assert!(out.status.success(), "kubectl {args:?} --help failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// kubectl's global flags (`kubectl options`), valid with every verb.
fn kubectl_globals() -> String {
    let out = Command::new("kubectl").arg("options").output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn check_kubectl(w: &[String], guide: &str) {
    // The verb and, for `create` and `rollout`, the next word (`create configmap`,
    // `rollout restart` have their own flags).
    let mut rest: Vec<&str> = Vec::new();
    let mut flags: Vec<(String, Option<String>)> = Vec::new();
    let mut i = 1;
    while i < w.len() {
        let a = w[i].as_str();
        if let Some(f) = a.strip_prefix("--") {
            let (name, value) = match f.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => {
                    let takes = !matches!(name_only(f), "wait" | "overwrite");
                    let v = takes.then(|| w.get(i + 1).cloned()).flatten();
                    if v.is_some() {
                        i += 1;
                    }
                    (f.to_string(), v)
                }
            };
            flags.push((name, value));
        } else if a.starts_with('-') && a.len() == 2 {
            flags.push((a.to_string(), w.get(i + 1).cloned()));
            i += 1;
        } else {
            rest.push(a);
        }
        i += 1;
    }
    let verb = rest
        .first()
        .copied()
        .unwrap_or_else(|| panic!("{guide}: {w:?}"));
    let scope: Vec<&str> = match verb {
        "create" | "rollout" => rest[..2].to_vec(),
        "patch" | "label" | "delete" | "get" => vec![verb],
        other => panic!("{guide}: kubectl {other} is not a verb this test knows: {w:?}"),
    };
    let help = format!("{}{}", kubectl_help(&scope), kubectl_globals());
    for (name, value) in &flags {
        let shown = if name.starts_with('-') {
            format!("{name},")
        } else {
            format!("--{name}=")
        };
        assert!(
            help.contains(&shown) || help.contains(&format!("{shown}'")),
            "{guide}: kubectl {scope:?} has no flag {name}: {w:?}"
        );
        if name == "p" || name == "-p" || name == "patch" {
            let patch = value.as_deref().expect("-p takes a patch");
            let v: Value = serde_json::from_str(patch)
                .unwrap_or_else(|e| panic!("{guide}: patch is not JSON ({e}): {patch}"));
            let json_patch = flags
                .iter()
                .any(|(n, v)| n == "type" && v.as_deref() == Some("json"));
            if json_patch {
                for op in v.as_array().expect("a JSON patch is a list") {
                    assert!(op.get("op").is_some() && op.get("path").is_some(), "{op}");
                }
            } else {
                assert!(
                    v.is_object(),
                    "{guide}: a merge patch is an object: {patch}"
                );
            }
        }
    }
}

fn name_only(flag: &str) -> &str {
    flag.split('=').next().unwrap_or(flag)
}

/// The part of JSON Schema values.schema.json uses: type, enum, properties,
/// additionalProperties.
fn check_schema(value: &Value, schema: &Value, at: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(value) {
            errors.push(format!("{at}: {value} is not one of {options:?}"));
        }
    }
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => value.is_object(),
            "string" => value.is_string(),
            "array" => value.is_array(),
            "boolean" => value.is_boolean(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            _ => true,
        };
        if !ok {
            errors.push(format!("{at}: {value} is not of type {t}"));
        }
    }
    if let Some(map) = value.as_object() {
        for (k, v) in map {
            let sub = schema.pointer(&format!("/properties/{}", k.replace('/', "~1")));
            match (sub, schema.get("additionalProperties")) {
                (Some(s), _) => errors.extend(check_schema(v, s, &format!("{at}.{k}"))),
                (None, Some(Value::Bool(false))) => {
                    errors.push(format!("{at}: unknown key {k:?}"));
                }
                (None, Some(s)) if s.is_object() => {
                    errors.extend(check_schema(v, s, &format!("{at}.{k}")));
                }
                _ => {}
            }
        }
    }
    errors
}

fn chart_schema() -> Value {
    let text =
        std::fs::read_to_string(repo().join("deploy/helm/podcidr-speaker/values.schema.json"))
            .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The guide's values file for our chart: the ```yaml block with a `nodeSelector`.
fn values_file(text: &str, guide: &str) -> Value {
    let block = blocks(text, "yaml")
        .into_iter()
        .find(|b| b.contains("nodeSelector:"))
        .unwrap_or_else(|| panic!("{guide}: no values file (```yaml with nodeSelector)"));
    let v: serde_yaml::Value = serde_yaml::from_str(&block).unwrap();
    serde_json::to_value(v).unwrap()
}

/// A `--set` value typed as Helm types it (its strvals parser): `true` and `false` are
/// booleans, `null` is null, a decimal integer without a leading zero is a number,
/// anything else a string (`--set-string` forces a string; the guides do not use it).
fn helm_set_value(value: &str) -> Value {
    match value {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        v if !(v.len() > 1 && v.starts_with('0')) && v.parse::<i64>().is_ok() => {
            Value::from(v.parse::<i64>().unwrap())
        }
        v => Value::String(v.into()),
    }
}

fn check_helm(w: &[String], text: &str, guide: &str) {
    let chart = w.get(3).unwrap_or_else(|| panic!("{guide}: {w:?}"));
    if chart == "deploy/helm/podcidr-speaker" {
        assert!(repo().join(chart).join("Chart.yaml").is_file(), "{chart}");
        assert!(matches!(w[1].as_str(), "install" | "upgrade"), "{w:?}");
        if w.iter().any(|a| a == "-f") {
            let errors = check_schema(&values_file(text, guide), &chart_schema(), "values");
            assert!(errors.is_empty(), "{guide}: {errors:#?}");
        }
        for set in w.windows(2).filter(|p| p[0] == "--set").map(|p| &p[1]) {
            let (path, value) = set.split_once('=').expect("--set key=value");
            let mut v = helm_set_value(value);
            for key in path.rsplit('.') {
                v = serde_json::json!({ key: v });
            }
            let errors = check_schema(&v, &chart_schema(), "values");
            assert!(errors.is_empty(), "{guide}: --set {set}: {errors:#?}");
        }
    } else if chart == "metallb/metallb" {
        // MetalLB's chart at the version the guide pins: its values.yaml (v0.12.1) has
        // `existingConfigMap` (top level) and `speaker.enabled`.
        assert!(
            w.windows(2)
                .any(|p| p[0] == "--version" && p[1] == "0.12.1"),
            "{w:?}"
        );
        for set in w.windows(2).filter(|p| p[0] == "--set").map(|p| &p[1]) {
            let key = set.split('=').next().unwrap();
            assert!(
                ["speaker.enabled", "existingConfigMap"].contains(&key),
                "{guide}: MetalLB 0.12.1's chart has no value {key}"
            );
        }
    } else {
        panic!("{guide}: a chart this test does not know: {w:?}");
    }
}

#[test]
fn every_guide_command_exists_as_written() {
    let mut checked = 0;
    for guide in GUIDES {
        let text = std::fs::read_to_string(repo().join(guide)).expect(guide);
        for block in blocks(&text, "sh") {
            for line in block.lines().map(str::trim).filter(|l| !l.is_empty()) {
                let w: Vec<String> = words(line).iter().map(|s| fill(s)).collect();
                match w[0].as_str() {
                    "podcidr-speaker" => {
                        if let Err(e) = Cli::try_parse_from(&w) {
                            panic!("{guide}: {line}: {e}");
                        }
                    }
                    "kubectl" => check_kubectl(&w, guide),
                    "helm" => check_helm(&w, &text, guide),
                    other => panic!("{guide}: a command this test does not know: {other}"),
                }
                checked += 1;
            }
        }
    }
    assert!(checked >= 10, "only {checked} commands found");
}

/// A bgp-config fragment in a guide (```yaml with `address-pools:`) is valid for the
/// speaker once a peer is added.
#[test]
fn every_guide_bgp_config_fragment_parses() {
    let mut parsed = 0;
    for guide in GUIDES {
        let text = std::fs::read_to_string(repo().join(guide)).expect(guide);
        for block in blocks(&text, "yaml")
            .into_iter()
            .filter(|b| b.contains("address-pools:"))
        {
            let config = format!(
                "peers:\n- peer-address: 192.0.2.1\n  peer-asn: 65000\n  my-asn: 65001\n{block}"
            );
            podcidr_speaker::config::parse(&config)
                .unwrap_or_else(|e| panic!("{guide}: {e}\n{config}"));
            parsed += 1;
        }
    }
    assert!(parsed >= 1);
}

/// The checker refuses what the schema refuses, so a passing guide means something.
#[test]
fn the_checker_fails_on_a_bad_value_and_a_bad_flag() {
    let bad = serde_json::json!({"announceLbIps": "yes", "nodeSelectr": {}});
    let errors = check_schema(&bad, &chart_schema(), "values");
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(std::panic::catch_unwind(|| {
        check_kubectl(&words("kubectl label node node-1 --no-such-flag x"), "t")
    })
    .is_err());
    assert!(Cli::try_parse_from(["podcidr-speaker", "status", "--adr", "x"]).is_err());

    // --set values are typed as Helm types them, and checked as such.
    assert_eq!(helm_set_value("true"), Value::Bool(true));
    assert_eq!(helm_set_value("9478"), serde_json::json!(9478));
    assert_eq!(helm_set_value("0755"), Value::String("0755".into()));
    assert_eq!(helm_set_value("on"), Value::String("on".into()));
    for bad in [
        serde_json::json!({"allocator": {"enabled": helm_set_value("yes")}}),
        serde_json::json!({"allocator": {"replicas": helm_set_value("two")}}),
        serde_json::json!({"allocator": {"enable": helm_set_value("true")}}),
    ] {
        assert!(
            !check_schema(&bad, &chart_schema(), "values").is_empty(),
            "{bad}"
        );
    }
}

/// The DaemonSet `kubectl kustomize DIR` renders.
fn kustomized_daemonset(dir: &std::path::Path) -> Value {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl kustomize (kubectl is needed)");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let objects: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde_json::to_value(serde_yaml::Value::deserialize(d).unwrap()).unwrap())
        .collect();
    objects
        .into_iter()
        .find(|o| o["kind"] == "DaemonSet")
        .expect("a DaemonSet")
}

#[test]
fn every_guide_kustomization_renders_what_its_helm_values_do() {
    let tmp = std::env::temp_dir().join(format!("docs-migrate-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(tmp.join("mine")).unwrap();
    // The guides' kustomizations sit next to a checkout called podcidr-speaker.
    std::os::unix::fs::symlink(repo(), tmp.join("podcidr-speaker")).unwrap();
    let mut rendered = 0;
    for guide in GUIDES {
        let text = std::fs::read_to_string(repo().join(guide)).expect(guide);
        let values = values_file(&text, guide);
        for block in blocks(&text, "yaml")
            .into_iter()
            .filter(|b| b.contains("kind: Kustomization"))
        {
            std::fs::write(tmp.join("mine/kustomization.yaml"), &block).unwrap();
            let ds = kustomized_daemonset(&tmp.join("mine"));
            let spec = &ds["spec"]["template"]["spec"];
            assert_eq!(
                spec["nodeSelector"], values["nodeSelector"],
                "{guide}: the kustomization's nodeSelector is the Helm values'"
            );
            let args: Vec<&str> = spec["containers"][0]["args"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let lb_on = values["announceLbIps"] == "on";
            assert_eq!(
                args.contains(&"--announce-lb-ips=on"),
                lb_on,
                "{guide}: {args:?}"
            );
            rendered += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert_eq!(rendered, GUIDES.len(), "one kustomization per guide");
}
