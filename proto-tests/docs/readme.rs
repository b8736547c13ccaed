//! The README's commands, run: every line of every ```sh block in README.md is executed
//! here (or, for `scripts/test`, shown to be exactly what CI runs), so the docs cannot
//! rot. A command this test does not know fails it: adding one to the README means
//! saying here what it must do. The README's CLI reference is checked against the clap
//! definition: the same flags, defaults and environment variables.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::CommandFactory;
use podcidr_speaker::cli::Cli;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Each command line of each ```sh block, comments stripped.
fn readme_commands() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let mut out = Vec::new();
    let mut in_sh = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_sh = !in_sh && trimmed == "```sh";
            continue;
        }
        if in_sh {
            let command = trimmed.split(" #").next().unwrap_or("").trim();
            if !command.is_empty() && !command.starts_with('#') {
                out.push(command.to_string());
            }
        }
    }
    out
}

/// Runs `program args` from the repository root with a deadline; returns (exit code,
/// stdout + stderr).
fn run(program: &Path, args: &[&str], timeout: Duration) -> (i32, String) {
    run_env(program, args, &[], timeout)
}

/// [`run`] with these environment variables set.
fn run_env(
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> (i32, String) {
    let log =
        std::env::temp_dir().join(format!("readme-{}-{}.log", std::process::id(), args.len()));
    let file = std::fs::File::create(&log).expect("log file");
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("dup"))
        .stderr(file)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} {args:?} did not finish within {timeout:?}",
                program.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    (status.code().unwrap_or(-1), output)
}

#[test]
fn readme_has_the_two_commands() {
    let commands = readme_commands();
    assert!(commands.iter().any(|c| c == "scripts/demo"), "{commands:?}");
    assert!(commands.iter().any(|c| c == "scripts/test"), "{commands:?}");
}

#[test]
fn every_readme_command_runs_as_documented() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_podcidr-speaker"));
    let mut ran = 0;
    for command in readme_commands() {
        let words: Vec<&str> = command.split_whitespace().collect();
        match words.as_slice() {
            ["scripts/test"] => {
                // Running the suite from inside itself would recurse; what the README
                // promises is that this is the command CI runs.
                let ci = std::fs::read_to_string(repo().join(".ci/run")).expect(".ci/run");
                assert!(ci.lines().any(|l| l.trim() == "exec scripts/test"), "{ci}");
            }
            ["scripts/demo"] => {
                if std::env::var_os("PODCIDR_SKIP_INTEROP").is_some() {
                    println!("skipped scripts/demo: PODCIDR_SKIP_INTEROP is set");
                    continue;
                }
                let (code, out) = run(&repo().join("scripts/demo"), &[], Duration::from_secs(300));
                assert_eq!(code, 0, "scripts/demo failed:\n{out}");
                for step in ["== 1.", "== 2.", "== 3.", "== 4.", "== 5.", "== done"] {
                    assert!(
                        out.contains(step),
                        "scripts/demo did not show {step:?}:\n{out}"
                    );
                }
                // Step 4 shows the table after the deletion: worker2's prefix is gone,
                // the others are still there.
                let after_delete = out
                    .split("== 4.")
                    .nth(1)
                    .and_then(|s| s.split("== 5.").next());
                let after_delete = after_delete.expect("step 4 output");
                let table: Vec<&str> = after_delete
                    .lines()
                    .filter(|l| l.starts_with("10.244."))
                    .map(|l| l.split_whitespace().next().unwrap_or(""))
                    .collect();
                assert_eq!(table, ["10.244.1.0/24", "10.244.13.0/24"], "{after_delete}");
                // The demo checks steps 4 and 5 itself (a failed check exits 1, caught
                // above); each check must have run.
                assert!(!out.contains("DEMO FAILED"), "{out}");
                for check in [
                    "check ok: 10.244.2.0/24 is gone from the switch",
                    "check ok: every other route is untouched",
                    "check ok: the switch keeps 10.244.1.0/24, held as stale",
                    "check ok: speaker back; 10.244.1.0/24 is at the switch and no longer stale",
                    "check ok: never withdrawn",
                ] {
                    assert!(
                        out.contains(check),
                        "scripts/demo did not check {check:?}:\n{out}"
                    );
                }
            }
            ["cargo", "install", "--locked", "--path", "."] => {
                // Building a release binary into ~/.cargo/bin from inside the suite would
                // take minutes and write outside the repository. What the README promises:
                // it installs, from the committed lock file, the binary its examples call.
                let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
                assert!(
                    manifest.contains("[[bin]]\nname = \"podcidr-speaker\""),
                    "Cargo.toml no longer builds the `podcidr-speaker` the README calls"
                );
                assert!(
                    repo().join("Cargo.lock").is_file(),
                    "--locked needs Cargo.lock"
                );
            }
            ["podcidr-speaker", "allocate", ..] => {
                // The allocator needs an API server. What can be shown without one: the
                // flags as written parse and validate, and the command goes on to the
                // cluster (here none: exit 1, saying so) rather than stopping at a usage
                // error (exit 2).
                let args = &words[1..];
                let (code, out) = run_env(
                    &bin,
                    args,
                    &[
                        ("KUBECONFIG", "/nonexistent/kubeconfig"),
                        ("KUBERNETES_SERVICE_HOST", ""),
                    ],
                    Duration::from_secs(60),
                );
                assert_eq!(code, 1, "`{command}` exited {code}:\n{out}");
                assert!(out.contains("kubernetes client"), "`{command}`:\n{out}");
            }
            ["podcidr-speaker", args @ ..] => {
                let (code, out) = run(&bin, args, Duration::from_secs(60));
                let expected = match args.first() {
                    // The outage's cluster-state is wrong on purpose: doctor must say so.
                    Some(&"doctor") => 1,
                    _ => 0,
                };
                assert_eq!(code, expected, "`{command}` exited {code}:\n{out}");
                match args.first() {
                    Some(&"check") => assert!(out.contains(": ok"), "{out}"),
                    Some(&"plan") => assert!(out.contains("10.244.13.0/24"), "{out}"),
                    Some(&"doctor") => {
                        for node in ["master1", "master2", "master3", "worker1"] {
                            assert!(out.contains(node), "doctor does not name {node}:\n{out}");
                        }
                        assert!(out.contains("4 with drift"), "{out}");
                    }
                    Some(&"decode") => assert!(out.contains("\"KEEPALIVE\""), "{out}"),
                    _ => panic!("README command `{command}`: say here what it must print"),
                }
            }
            ["helm", "install", release, chart, "--namespace", namespace] => {
                // Installing needs a cluster; what the README promises is a chart at that
                // path, named as the release, installed where its RBAC expects the
                // speaker. scripts/validate-helm renders and checks that chart.
                let meta = std::fs::read_to_string(repo().join(chart).join("Chart.yaml"))
                    .unwrap_or_else(|e| panic!("`{command}`: no chart at {chart}: {e}"));
                assert!(
                    meta.lines().any(|l| l.trim() == format!("name: {release}")),
                    "`{command}`: the chart is not named {release}:\n{meta}"
                );
                assert_eq!(*namespace, "kube-system", "`{command}`");
            }
            ["kubectl", "apply", "-k", dir] => {
                // As for helm: the kustomization exists (proto-tests/deploy renders it).
                assert!(
                    repo().join(dir).join("kustomization.yaml").is_file(),
                    "`{command}`: no kustomization in {dir}"
                );
            }
            _ => panic!("README command `{command}` is not known to this test"),
        }
        ran += 1;
    }
    assert!(ran >= 5, "only {ran} README commands ran");
}

/// The README's lines, and where its first table starts: a newcomer must meet the
/// set-up before the first wide table.
fn readme_lines() -> (Vec<String>, usize) {
    let text = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let first_table = lines
        .iter()
        .position(|l| l.starts_with('|'))
        .expect("README.md has tables");
    (lines, first_table)
}

#[test]
fn the_set_up_and_its_prerequisites_come_before_any_table() {
    let (lines, first_table) = readme_lines();
    let before = lines[..first_table].join("\n");
    for command in [
        "scripts/demo",
        "scripts/test",
        "cargo install --locked --path .",
    ] {
        let at = lines
            .iter()
            .position(|l| l.split(" #").next().is_some_and(|c| c.trim() == command));
        assert!(
            at.is_some_and(|at| at < first_table),
            "`{command}` is not among the README's commands before its first table \
             (line {})",
            first_table + 1
        );
    }
    // The Rust version is Cargo.toml's, not a copy that drifts from it.
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let rust = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .expect("Cargo.toml sets rust-version")
        .trim_matches('"');
    assert!(
        before.contains(&format!("Rust {rust} or newer")),
        "the README's prerequisites do not say Rust {rust}"
    );
    // Every package scripts/install-peers may install is named, and the tools the
    // scripts do not install (kubectl for the manifests, cargo-fuzz for the fuzz step).
    let install_peers = std::fs::read_to_string(repo().join("scripts/install-peers")).unwrap();
    let packages: Vec<&str> = install_peers
        .lines()
        .filter_map(|l| l.strip_prefix("need "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(packages.len() >= 4, "install-peers needs {packages:?}");
    for needed in packages.iter().chain(&["kubectl", "cargo-fuzz", "unshare"]) {
        assert!(
            before.contains(&format!("`{needed}`")),
            "the README's prerequisites do not name `{needed}`"
        );
    }
}

/// The value of `--FLAG` in a command line, as `--flag value` or `--flag=value`.
fn flag_value<'a>(line: &'a str, flag: &str) -> Option<&'a str> {
    let mut words = line.split_whitespace();
    while let Some(word) = words.next() {
        if word == flag {
            return words.next();
        }
        if let Some(value) = word.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            return Some(value);
        }
    }
    None
}

/// The README's `plan` example runs on the demo's files: it must plan what the demo's
/// speakers announce, with the same `--announce-lb-ips` (absent: `auto`).
#[test]
fn the_readme_plan_example_and_the_demo_agree() {
    let demo = std::fs::read_to_string(repo().join("scripts/demo")).unwrap();
    let run_lines: Vec<&str> = demo
        .lines()
        .skip_while(|l| !l.contains("\"$bin\" run "))
        .take_while(|l| l.trim_end().ends_with('\\') || l.contains("\"$bin\" run "))
        .collect();
    assert!(
        !run_lines.is_empty(),
        "scripts/demo no longer runs the speaker"
    );
    let run = run_lines.join(" ");
    assert!(
        run.contains("$work/bgp-config.yaml") && demo.contains("cp -r \"$repo/config/demo/.\""),
        "scripts/demo no longer runs on config/demo: {run}"
    );
    let plans: Vec<String> = readme_commands()
        .into_iter()
        .filter(|c| c.starts_with("podcidr-speaker plan "))
        .collect();
    assert!(!plans.is_empty(), "the README has no plan example");
    for plan in &plans {
        assert_eq!(
            flag_value(plan, "--bgp-config"),
            Some("config/demo/bgp-config.yaml"),
            "{plan}"
        );
        assert_eq!(
            flag_value(plan, "--cluster-state"),
            Some("config/demo/cluster-state"),
            "{plan}"
        );
        assert_eq!(
            flag_value(plan, "--announce-lb-ips").unwrap_or("auto"),
            flag_value(&run, "--announce-lb-ips").unwrap_or("auto"),
            "the README's `{plan}` and scripts/demo's `{run}` disagree on the LoadBalancer IPs"
        );
    }
    // A silent build of a minute or more looks hung: the demo shows cargo's progress.
    let build = demo
        .lines()
        .find(|l| l.contains("cargo build"))
        .expect("scripts/demo builds the speaker");
    assert!(
        !build.contains("--quiet") && !build.split_whitespace().any(|w| w == "-q"),
        "scripts/demo builds quietly: {build}"
    );
}

/// One row of a flag table in the README's CLI reference.
#[derive(Debug)]
struct FlagRow {
    longs: Vec<String>,
    default: String,
    env: String,
}

/// The README's "## CLI reference": per subcommand (its `### `NAME` heading), the rows
/// of its flag table.
fn cli_reference() -> Vec<(String, Vec<FlagRow>)> {
    let text = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let section = text
        .split("\n## CLI reference\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README.md has a \"## CLI reference\" section");
    let mut out: Vec<(String, Vec<FlagRow>)> = Vec::new();
    for line in section.lines() {
        if let Some(heading) = line.strip_prefix("### `") {
            let name = heading.split([' ', '`']).next().unwrap_or_default();
            out.push((name.to_owned(), Vec::new()));
            continue;
        }
        if !line.starts_with("| `") {
            continue;
        }
        // `\|` is a pipe inside a cell.
        let cells: Vec<String> = line
            .replace("\\|", "\u{0}")
            .split('|')
            .map(|c| c.trim().replace('\u{0}', "|"))
            .collect();
        let [_, flag, default, env, ..] = cells.as_slice() else {
            panic!("a CLI reference row without flag, default and env cells: {line}");
        };
        let longs = flag
            .split("--")
            .skip(1)
            .map(|rest| {
                rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let (_, rows) = out
            .last_mut()
            .unwrap_or_else(|| panic!("a flag row before any ### heading: {line}"));
        rows.push(FlagRow {
            longs,
            default: default.clone(),
            env: env.clone(),
        });
    }
    out
}

#[test]
fn the_cli_reference_matches_the_clap_definition() {
    let reference = cli_reference();
    let cli = Cli::command();
    let mut problems = Vec::new();
    let documented: Vec<&str> = reference.iter().map(|(n, _)| n.as_str()).collect();
    for sub in cli.get_subcommands() {
        let name = sub.get_name();
        let Some((_, rows)) = reference.iter().find(|(n, _)| n == name) else {
            problems.push(format!(
                "`{name}` has no ### heading (found {documented:?})"
            ));
            continue;
        };
        let mut seen = Vec::new();
        for arg in sub.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if matches!(long, "help" | "version") {
                continue;
            }
            seen.push(long.to_owned());
            let Some(row) = rows.iter().find(|r| r.longs.iter().any(|l| l == long)) else {
                problems.push(format!("`{name} --{long}` is not in the README"));
                continue;
            };
            let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
            match &env {
                Some(var) if row.env != format!("`{var}`") => problems.push(format!(
                    "`{name} --{long}`: env is `{var}`, the README says {:?}",
                    row.env
                )),
                None if row.env != "-" => problems.push(format!(
                    "`{name} --{long}` has no env var, the README says {:?}",
                    row.env
                )),
                _ => {}
            }
            if arg.get_action().takes_values() {
                for default in arg.get_default_values() {
                    let want = format!("`{}`", default.to_string_lossy());
                    if !row.default.contains(&want) {
                        problems.push(format!(
                            "`{name} --{long}`: default {want}, the README says {:?}",
                            row.default
                        ));
                    }
                }
                if arg.is_required_set() && row.default != "required" {
                    problems.push(format!(
                        "`{name} --{long}` is required, the README says {:?}",
                        row.default
                    ));
                }
            }
        }
        for row in rows {
            for long in &row.longs {
                if !seen.contains(long) {
                    problems.push(format!(
                        "the README documents `{name} --{long}`: no such flag"
                    ));
                }
            }
        }
    }
    for (name, _) in &reference {
        if cli.find_subcommand(name).is_none() {
            problems.push(format!("the README documents `{name}`: no such subcommand"));
        }
    }
    // The run flags are the ones operators set: make sure the table was really read.
    let run = reference
        .iter()
        .find(|(n, _)| n == "run")
        .map(|(_, r)| r.len());
    assert!(run >= Some(10), "run's table has {run:?} rows");
    assert!(
        problems.is_empty(),
        "README.md's CLI reference: {problems:#?}"
    );
}

/// ARCHITECTURE.md's network rule, checked on the source: the calls that open a socket
/// or make a Kubernetes API client appear only in the files the rule names.
#[test]
fn only_the_modules_architecture_md_names_open_sockets() {
    const OPENERS: [&str; 8] = [
        "TcpStream::connect",
        "TcpListener::bind",
        "TcpSocket::new",
        "UdpSocket::bind",
        "Socket::new(",
        "Client::try_default",
        "Client::try_from",
        "Client::new(",
    ];
    // peer: BGP sockets; metrics::server: its listener; commands/status/client.rs: its one GET;
    // gate.rs: its GET of the Cilium agent's health; the kube client, made by daemon
    // (used by sources::kube) and by commands/doctor.rs.
    let allowed = |path: &str| {
        path.starts_with("src/peer/")
            || matches!(
                path,
                "src/metrics/server.rs"
                    | "src/commands/status/client.rs"
                    | "src/gate.rs"
                    | "src/sources/kube/mod.rs"
            )
    };
    let architecture = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    assert!(
        architecture.contains("Network access happens in exactly these places"),
        "ARCHITECTURE.md no longer states the network rule this test checks"
    );
    let mut files = vec![repo().join("src")];
    let mut found = Vec::new();
    let mut scanned = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        scanned += 1;
        let relative = path
            .strip_prefix(repo())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        // Unit tests may open sockets of their own.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            let line = line.trim_start();
            if line.starts_with("//") {
                continue;
            }
            for opener in OPENERS {
                if line.contains(opener) {
                    found.push((relative.clone(), n + 1, opener));
                }
            }
        }
    }
    assert!(scanned > 20, "only {scanned} source files");
    let outside: Vec<_> = found.iter().filter(|(p, ..)| !allowed(p)).collect();
    assert!(
        outside.is_empty(),
        "sockets opened outside the modules ARCHITECTURE.md names: {outside:?}"
    );
    for needed in [
        "src/commands/status/client.rs",
        "src/gate.rs",
        "src/metrics/server.rs",
        "src/sources/kube/mod.rs",
    ] {
        assert!(
            found.iter().any(|(p, ..)| p == needed),
            "{needed} opens no socket any more: update ARCHITECTURE.md and this test ({found:?})"
        );
    }
}
