//! One network namespace per test.
//!
//! The choice: a `#[test]` re-executes itself. Called from the test's first line,
//! [`isolated!`] runs `unshare -rn <this test binary> --exact <this test> --nocapture
//! --test-threads=1` with `PODCIDR_IN_NETNS=1`, streams the child's output into the
//! test's own, and fails the test if the child fails, or kills the child (its whole
//! process group, daemons included) after a timeout. In the child the same macro call
//! sees the variable, brings `lo` up, adds the requested addresses (100.64.x.y/32,
//! fd00::x/128) and returns a [`Netns`] to run the test body with.
//!
//! Why this and not a cargo runner or one `unshare` per daemon: every test gets a fresh
//! user + network namespace of its own without root, so tests run in parallel with the
//! same addresses and port 179; nothing needs configuring outside the test binary; the
//! namespace and everything bound in it vanish when the child exits, whatever happened.
//!
//! If `unshare -rn` is missing or fails (no unprivileged user namespaces), the test
//! FAILS with the reason, unless `PODCIDR_SKIP_INTEROP=1`, which skips every isolated
//! test with a printed reason. Must not touch any namespace but the one it creates.

use std::io::{BufRead, BufReader, Read};
use std::net::IpAddr;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::process::{run, run_ok, TempDir, COMMAND_TIMEOUT};
use super::{HarnessError, Result};

/// Set (to "1") in the re-executed child: "you are inside your namespace".
pub const IN_NETNS_ENV: &str = "PODCIDR_IN_NETNS";
/// "1": skip every isolated test, printing why.
pub const SKIP_ENV: &str = "PODCIDR_SKIP_INTEROP";
/// Seconds; overrides the kill timeout of every isolated test.
pub const TIMEOUT_ENV: &str = "PODCIDR_INTEROP_TIMEOUT";
/// Kill timeout of an isolated test. The tests themselves aim at ~30 s; the slack is for
/// a loaded 2-core machine.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);
/// After SIGTERM to the child's process group, how long before SIGKILL.
const KILL_GRACE: Duration = Duration::from_secs(5);

/// Runs the calling `#[test]` in a network namespace of its own. Outside the namespace
/// it returns `None` after the child passed (and panics if it failed); inside it returns
/// the [`Netns`] to run the test with:
///
/// ```ignore
/// #[test]
/// fn gobgp_talks_to_bird() {
///     let Some(ns) = isolated!(&[v4(1), v4(2)]) else { return };
///     // ... start daemons in ns.dir() ...
/// }
/// ```
///
/// `isolated!(addrs, timeout)` sets the kill timeout (default [`DEFAULT_TIMEOUT`]).
#[macro_export]
macro_rules! isolated {
    ($addrs:expr) => {
        $crate::isolated!($addrs, $crate::harness::netns::DEFAULT_TIMEOUT)
    };
    ($addrs:expr, $timeout:expr) => {{
        fn isolated_marker() {}
        $crate::harness::netns::isolate(
            &$crate::harness::netns::test_path(::std::any::type_name_of_val(&isolated_marker)),
            $addrs,
            $timeout,
        )
    }};
}

/// The namespace a test body runs in: its addresses and a short temp dir for its
/// daemons (removed on Drop).
#[derive(Debug)]
pub struct Netns {
    test: String,
    addrs: Vec<IpAddr>,
    dir: TempDir,
}

impl Netns {
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn addrs(&self) -> &[IpAddr] {
        &self.addrs
    }

    pub fn test(&self) -> &str {
        &self.test
    }
}

/// libtest's name for a test from the type name of a fn item declared in its body:
/// `crate::module::test_fn::marker` -> `module::test_fn`.
pub fn test_path(marker_type_name: &str) -> String {
    let mut parts: Vec<&str> = marker_type_name.split("::").collect();
    parts.pop();
    if parts.len() > 1 {
        parts.remove(0);
    }
    parts.join("::")
}

/// See [`isolated!`].
pub fn isolate(test_path: &str, addrs: &[IpAddr], timeout: Duration) -> Option<Netns> {
    if inside() {
        return Some(enter(test_path, addrs));
    }
    if skip_requested() {
        println!("skipping {test_path}: {SKIP_ENV}=1");
        return None;
    }
    if let Err(why) = probe_unshare() {
        panic!(
            "{test_path}: cannot create a network namespace with `unshare -rn`: {why}\n\
             Interop tests need util-linux unshare and unprivileged user namespaces \
             (or root). Set {SKIP_ENV}=1 to skip them."
        );
    }
    let timeout = timeout_override().unwrap_or(timeout);
    match run_child(test_path, timeout, &[]) {
        Ok(o) if o.passed() => None,
        Ok(o) if o.timed_out => panic!(
            "{test_path}: timed out after {timeout:?} in its namespace and was killed \
             (its output is above)"
        ),
        Ok(o) => panic!(
            "{test_path}: failed inside its namespace ({}); its output is above",
            o.describe_status()
        ),
        Err(e) => panic!("{test_path}: could not run in a namespace: {e}"),
    }
}

/// `PODCIDR_SKIP_INTEROP=1`: every test that needs the real daemons skips.
pub fn skip_requested() -> bool {
    std::env::var_os(SKIP_ENV).is_some_and(|v| v == "1")
}

/// Whether this process is the re-executed child.
pub fn inside() -> bool {
    std::env::var_os(IN_NETNS_ENV).is_some_and(|v| v == "1")
}

fn timeout_override() -> Option<Duration> {
    let v = std::env::var(TIMEOUT_ENV).ok()?;
    match v.trim().parse::<u64>() {
        Ok(secs) if secs > 0 => Some(Duration::from_secs(secs)),
        _ => panic!("{TIMEOUT_ENV}={v:?}: expected a positive number of seconds"),
    }
}

fn enter(test_path: &str, addrs: &[IpAddr]) -> Netns {
    // If the parent test process dies, this one must not outlive it (and its daemons,
    // which have their own death signal, follow).
    // SAFETY: prctl(2) with these arguments has no memory-safety preconditions.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    if let Err(e) = setup_loopback(addrs) {
        panic!("{test_path}: cannot configure lo in the test namespace: {e}");
    }
    let dir = match TempDir::new("pcs") {
        Ok(d) => d,
        Err(e) => panic!("{test_path}: {e}"),
    };
    Netns {
        test: test_path.to_string(),
        addrs: addrs.to_vec(),
        dir,
    }
}

/// Brings lo up and adds each address as a host route on it. IPv6 addresses get
/// `nodad`: duplicate address detection would hold them "tentative" (unbindable) for a
/// second or more.
pub fn setup_loopback(addrs: &[IpAddr]) -> Result<()> {
    run_ok(
        Command::new("ip").args(["link", "set", "lo", "up"]),
        COMMAND_TIMEOUT,
    )?;
    for addr in addrs {
        let mut cmd = Command::new("ip");
        match addr {
            IpAddr::V4(a) => cmd.args(["-4", "addr", "add", &format!("{a}/32"), "dev", "lo"]),
            IpAddr::V6(a) => cmd.args([
                "-6",
                "addr",
                "add",
                &format!("{a}/128"),
                "dev",
                "lo",
                "nodad",
            ]),
        };
        run_ok(&mut cmd, COMMAND_TIMEOUT)?;
    }
    Ok(())
}

/// Checks once per test binary that `unshare -rn` works here.
pub fn probe_unshare() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let out = run(
                Command::new("unshare").args(["-rn", "true"]),
                COMMAND_TIMEOUT,
            )
            .map_err(|e| e.to_string())?;
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "`unshare -rn true` {}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ))
            }
        })
        .clone()
}

/// How a re-executed test ended.
#[derive(Debug)]
pub struct ChildOutcome {
    /// `None` if it had to be killed.
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    /// Its stdout and stderr, interleaved by line as they arrived.
    pub output: String,
    pub elapsed: Duration,
}

impl ChildOutcome {
    /// Exit status 0 and libtest said exactly one test passed: a test path that matched
    /// nothing must not count as a pass.
    pub fn passed(&self) -> bool {
        !self.timed_out
            && self.status.is_some_and(|s| s.success())
            && self.output.contains("test result: ok. 1 passed")
    }

    pub fn describe_status(&self) -> String {
        match (self.timed_out, self.status) {
            (true, _) => "timed out".into(),
            (false, Some(s)) if s.success() && !self.passed() => {
                "exit 0 but libtest did not report exactly one passed test: \
                 is the test path right?"
                    .into()
            }
            (false, Some(s)) => s.to_string(),
            (false, None) => "unknown status".into(),
        }
    }
}

/// Re-executes this test binary under `unshare -rn` to run exactly `test_path`, with
/// extra environment `env`; kills its process group after `timeout`. Its output lines
/// are printed as they arrive (prefixed `[netns] `), so libtest shows them with the
/// failing test.
pub fn run_child(test_path: &str, timeout: Duration, env: &[(&str, &str)]) -> Result<ChildOutcome> {
    let exe =
        std::env::current_exe().map_err(|e| HarnessError::io("find the current test binary", e))?;
    let mut cmd = Command::new("unshare");
    cmd.arg("-rn")
        .arg(&exe)
        .args([
            "--exact",
            test_path,
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(IN_NETNS_ENV, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so a timeout can kill the daemons it started too.
        .process_group(0);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| HarnessError::Spawn {
        program: "unshare".into(),
        source,
    })?;
    let output = Arc::new(Mutex::new(String::new()));
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|r| echo_lines(r, output.clone(), false)),
        child
            .stderr
            .take()
            .map(|r| echo_lines(r, output.clone(), true)),
    ]
    .into_iter()
    .flatten()
    .collect();

    let pgid = child.id() as libc::pid_t;
    let deadline = started + timeout;
    let mut timed_out = false;
    let mut status = None;
    loop {
        match child.try_wait() {
            Ok(Some(s)) => {
                status = Some(s);
                break;
            }
            Ok(None) => {}
            Err(e) => return Err(HarnessError::io("wait for the namespaced test", e)),
        }
        if Instant::now() >= deadline {
            timed_out = true;
            kill_group(pgid, &mut child);
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    if status.is_none() {
        status = child.wait().ok();
    }
    // The pipes close when the last process holding them exits; every such process is
    // in the child's process group, which is gone. Bounded anyway.
    let join_deadline = Instant::now() + KILL_GRACE;
    for r in readers {
        while !r.is_finished() && Instant::now() < join_deadline {
            thread::sleep(Duration::from_millis(10));
        }
        if r.is_finished() {
            let _ = r.join();
        }
    }
    let output = output.lock().map(|o| o.clone()).unwrap_or_default();
    Ok(ChildOutcome {
        status: if timed_out { None } else { status },
        timed_out,
        output,
        elapsed: started.elapsed(),
    })
}

/// SIGTERM to the whole group (daemons exit cleanly), then SIGKILL to what is left.
fn kill_group(pgid: libc::pid_t, child: &mut std::process::Child) {
    // SAFETY: killpg(2) has no memory-safety preconditions; pgid is our child's own
    // group (process_group(0)), and the child is not reaped yet.
    unsafe {
        libc::killpg(pgid, libc::SIGTERM);
    }
    let deadline = Instant::now() + KILL_GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    // The leader may be gone while daemons of its group linger: kill the group anyway.
    // SAFETY: as above; ESRCH if nothing is left is fine.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

fn echo_lines(
    r: impl Read + Send + 'static,
    into: Arc<Mutex<String>>,
    stderr: bool,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            if stderr {
                eprintln!("[netns] {line}");
            } else {
                println!("[netns] {line}");
            }
            if let Ok(mut o) = into.lock() {
                o.push_str(&line);
                o.push('\n');
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_path_drops_crate_and_marker() {
        assert_eq!(
            test_path("interop_harness::gobgp_talks::isolated_marker"),
            "gobgp_talks"
        );
        assert_eq!(
            test_path("interop_harness::harness::bird::tests::t::isolated_marker"),
            "harness::bird::tests::t"
        );
    }

    #[test]
    fn marker_type_name_has_the_shape_test_path_expects() {
        fn isolated_marker() {}
        let name = std::any::type_name_of_val(&isolated_marker);
        assert_eq!(
            test_path(name),
            "harness::netns::tests::marker_type_name_has_the_shape_test_path_expects"
        );
    }
}
