//! Short temp dirs and child processes, each with a Drop guard: a [`TempDir`] is removed,
//! a [`Process`] gets SIGTERM, a bounded wait, SIGKILL and is reaped, even when the test
//! panics (and then prints the tail of the process's log). [`run`] bounds every
//! one-shot command (vtysh, gobgp, ip...) in time. Knows nothing of BGP.

use std::collections::hash_map::RandomState;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{Read, Seek, SeekFrom};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use super::{HarnessError, Result};

/// How long a daemon gets between SIGTERM and SIGKILL. gobgpd holding many routes takes
/// seconds to exit; nothing in the tests holds that many.
pub const STOP_GRACE: Duration = Duration::from_secs(5);

/// How long a one-shot query command (vtysh, gobgp, ip) may take.
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a daemon may take from spawn to answering queries and listening (ExaBGP's
/// Python start is the slowest, seconds on a loaded machine).
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// A directory under /tmp with a random suffix, removed on Drop (kept when
/// `PODCIDR_KEEP_TMP=1`). Under /tmp and short because the daemons put UNIX sockets in
/// it and `sun_path` holds 108 bytes.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(prefix: &str) -> Result<TempDir> {
        let mut last = None;
        for _ in 0..16 {
            let path = Path::new("/tmp").join(format!("{prefix}-{:08x}", random_u32()));
            match fs::create_dir(&path) {
                Ok(()) => return Ok(TempDir { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(HarnessError::io(format!("create {}", path.display()), e)),
            }
        }
        Err(HarnessError::io(
            "create a temp dir under /tmp",
            last.unwrap_or_else(|| std::io::Error::other("no attempt made")),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("PODCIDR_KEEP_TMP").is_some_and(|v| v == "1") {
            eprintln!("harness: keeping {}", self.path.display());
            return;
        }
        if let Err(e) = fs::remove_dir_all(&self.path) {
            eprintln!("harness: cannot remove {}: {e}", self.path.display());
        }
    }
}

/// Creates `parent/name`, or `name-2`, `name-3`... if taken: two instances never share
/// a dir, and a test may start a second instance on the same address.
pub fn fresh_subdir(parent: &Path, name: &str) -> Result<PathBuf> {
    for i in 1..100 {
        let path = match i {
            1 => parent.join(name),
            _ => parent.join(format!("{name}-{i}")),
        };
        match fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(HarnessError::io(format!("create {}", path.display()), e)),
        }
    }
    Err(HarnessError::Config(format!(
        "99 instances named {name} in {}",
        parent.display()
    )))
}

pub fn write_file(path: &Path, contents: &str) -> Result<()> {
    fs::write(path, contents).map_err(|e| HarnessError::io(format!("write {}", path.display()), e))
}

fn random_u32() -> u32 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u32
}

/// A long-running child (a daemon) whose stdout and stderr go to a log file.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Process {
    /// Spawns `cmd` with stdin from /dev/null and stdout + stderr appended to `log`. The
    /// child gets SIGTERM if the spawning thread dies first (PR_SET_PDEATHSIG), so a test
    /// process killed on timeout does not leave daemons behind.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<Process> {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| HarnessError::io(format!("open {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| HarnessError::io(format!("dup {}", log.display()), e))?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: the closure only makes the prctl(2) system call, which is
        // async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = cmd
            .spawn()
            .map_err(|source| HarnessError::Spawn { program, source })?;
        Ok(Process {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn is_running(&mut self) -> bool {
        if self.status.is_some() {
            return false;
        }
        match self.child.try_wait() {
            Ok(Some(status)) => {
                self.status = Some(status);
                false
            }
            Ok(None) => true,
            // Cannot happen for a child we own and have not reaped; treat as gone.
            Err(_) => false,
        }
    }

    /// Polls `probe` until it returns `Ok`, failing early (with the log tail) if the
    /// process exits, or with the last observation on timeout.
    pub fn wait_ready<T>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut probe: impl FnMut() -> Result<T, String>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = match probe() {
                Ok(v) => return Ok(v),
                Err(seen) => seen,
            };
            if !self.is_running() {
                return Err(HarnessError::Command {
                    command: format!("{} (waiting for {what})", self.name),
                    status: self.exit_description(),
                    output: self.log_tail(30),
                });
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::Timeout {
                    what: format!("{} {what}", self.name),
                    waited: timeout,
                    last: format!("{seen}\n--- log tail ---\n{}", self.log_tail(30)),
                });
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    fn exit_description(&self) -> String {
        match self.status {
            Some(s) => format!("exited: {s}"),
            None => "running".into(),
        }
    }

    /// SIGTERM, up to [`STOP_GRACE`] for the process to exit, then SIGKILL; reaps it.
    pub fn stop(&mut self) -> Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        self.signal(libc::SIGTERM);
        // A paused process (`pause`) takes its SIGTERM only once it runs again.
        self.signal(libc::SIGCONT);
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if !self.is_running() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        if self.is_running() {
            eprintln!(
                "harness: {} (pid {}) ignored SIGTERM for {STOP_GRACE:?}; killing it",
                self.name,
                self.pid()
            );
        }
        self.kill()
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`): a paused process reads nothing, so its
    /// peers' data waits in the kernel's buffers, and its timers do not run.
    pub fn pause(&mut self, paused: bool) {
        self.signal(if paused { libc::SIGSTOP } else { libc::SIGCONT });
    }

    /// SIGKILL and reap: the process gets no chance to say goodbye to its peers (for
    /// graceful-restart and crash scenarios).
    pub fn kill(&mut self) -> Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        self.signal(libc::SIGKILL);
        let status = self
            .child
            .wait()
            .map_err(|e| HarnessError::io(format!("wait for {}", self.name), e))?;
        self.status = Some(status);
        Ok(status)
    }

    fn signal(&mut self, sig: libc::c_int) {
        if !self.is_running() {
            return;
        }
        // The child is not reaped yet (is_running() just said so), so its pid cannot
        // have been reused by another process.
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe {
            libc::kill(pid, sig);
        }
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail_file(&self.log, lines)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if thread::panicking() {
            eprintln!(
                "--- last lines of {} (pid {}) log {} ---\n{}\n--- end of {} log ---",
                self.name,
                self.pid(),
                self.log.display(),
                self.log_tail(40),
                self.name
            );
        }
        if let Err(e) = self.stop() {
            eprintln!("harness: stopping {}: {e}", self.name);
        }
    }
}

/// The last `lines` lines of a file (reads at most its last 64 KiB).
pub fn tail_file(path: &Path, lines: usize) -> String {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) => return format!("(cannot read {}: {e})", path.display()),
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return format!("(cannot seek {})", path.display());
    }
    let mut buf = Vec::new();
    if let Err(e) = f.read_to_end(&mut buf) {
        return format!("(cannot read {}: {e})", path.display());
    }
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs a one-shot command with stdin from /dev/null, collecting its output; kills it
/// after `timeout`.
pub fn run(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    run_pid(cmd, timeout).map(|(_, out)| out)
}

/// [`run`], also returning the pid the command had (to clean up after it).
pub fn run_pid(cmd: &mut Command, timeout: Duration) -> Result<(u32, Output)> {
    let described = describe(cmd);
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| HarnessError::Spawn { program, source })?;
    let out = child.stdout.take().map(reader_thread);
    let err = child.stderr.take().map(reader_thread);
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline => break None,
            Ok(None) => thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(HarnessError::io(format!("wait for {described}"), e)),
        }
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(HarnessError::Timeout {
            what: described,
            waited: timeout,
            last: "still running; killed".into(),
        });
    };
    let stdout = out.map(join_reader).unwrap_or_default();
    let stderr = err.map(join_reader).unwrap_or_default();
    Ok((
        child.id(),
        Output {
            status,
            stdout,
            stderr,
        },
    ))
}

/// [`run`], requiring success; returns stdout as text.
pub fn run_ok(cmd: &mut Command, timeout: Duration) -> Result<String> {
    let described = describe(cmd);
    let out = run(cmd, timeout)?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(HarnessError::Command {
            command: described,
            status: out.status.to_string(),
            output: format!("{}{}", stdout, String::from_utf8_lossy(&out.stderr)),
        });
    }
    Ok(stdout)
}

pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        let a = a.to_string_lossy();
        if a.contains(' ') || a.is_empty() {
            s.push_str(&format!("'{a}'"));
        } else {
            s.push_str(&a);
        }
    }
    s
}

fn reader_thread(mut r: impl Read + Send + 'static) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        buf
    })
}

fn join_reader(h: thread::JoinHandle<Vec<u8>>) -> Vec<u8> {
    h.join().unwrap_or_default()
}

/// Whether something listens on TCP `addr:port` (or on the wildcard address of its
/// family) in this process's network namespace, per /proc/net/tcp{,6}.
pub fn is_listening(addr: IpAddr, port: u16) -> bool {
    let table = match addr {
        IpAddr::V4(_) => "/proc/net/tcp",
        IpAddr::V6(_) => "/proc/net/tcp6",
    };
    let Ok(text) = fs::read_to_string(table) else {
        return false;
    };
    listening_in(&text, addr, port)
}

/// `/proc/net/tcp` format: `sl local_address rem_address st ...`, addresses as hex
/// 32-bit words in host (little-endian) order, `:PORT` in hex, state 0A = LISTEN.
fn listening_in(table: &str, addr: IpAddr, port: u16) -> bool {
    table.lines().skip(1).any(|line| {
        let mut cols = line.split_whitespace();
        let (Some(_), Some(local), Some(_), Some(state)) =
            (cols.next(), cols.next(), cols.next(), cols.next())
        else {
            return false;
        };
        if state != "0A" {
            return false;
        }
        let Some((hex_addr, hex_port)) = local.split_once(':') else {
            return false;
        };
        if u16::from_str_radix(hex_port, 16).ok() != Some(port) {
            return false;
        }
        match parse_proc_addr(hex_addr) {
            Some(a) => a == addr || a.is_unspecified(),
            None => false,
        }
    })
}

fn parse_proc_addr(hex: &str) -> Option<IpAddr> {
    let word = |s: &str| u32::from_str_radix(s, 16).ok().map(u32::to_le_bytes);
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(hex)?))),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(hex.get(i * 8..i * 8 + 8)?)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(b)))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_net_tcp_listen_entries_are_found() {
        // Lines as Linux prints them: 100.64.0.2:179 listening, and a connection from it
        // to 100.64.0.1, which listens nowhere.
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue\n\
   0: 02004064:00B3 00000000:0000 0A 00000000:00000000\n\
   1: 02004064:00B3 01004064:C350 01 00000000:00000000\n";
        assert!(listening_in(tcp, "100.64.0.2".parse().unwrap(), 179));
        assert!(!listening_in(tcp, "100.64.0.1".parse().unwrap(), 179));
        assert!(!listening_in(tcp, "100.64.0.2".parse().unwrap(), 180));

        let tcp6 = "  sl  local_address                         remote_address                        st\n\
   0: 000000FD000000000000000002000000:00B3 00000000000000000000000000000000:0000 0A 0\n";
        assert!(listening_in(tcp6, "fd00::2".parse().unwrap(), 179));
        assert!(!listening_in(tcp6, "fd00::1".parse().unwrap(), 179));
    }

    #[test]
    fn run_kills_a_command_at_its_timeout() {
        let started = Instant::now();
        let err = run(Command::new("sleep").arg("30"), Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, HarnessError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn run_ok_reports_failure_with_output() {
        let err = run_ok(
            Command::new("sh").args(["-c", "echo oops >&2; exit 3"]),
            COMMAND_TIMEOUT,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("oops") && text.contains('3'), "{text}");
    }

    #[test]
    fn process_guard_stops_and_reaps_on_drop() {
        let dir = TempDir::new("pcs-unit").unwrap();
        let log = dir.path().join("sleep.log");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec sleep 30"]);
        let p = Process::spawn("sleep", cmd, &log).unwrap();
        let pid = p.pid() as libc::pid_t;
        super::super::wait_for("the greeting", COMMAND_TIMEOUT, || {
            let t = tail_file(&log, 5);
            if t.contains("started") {
                Ok(())
            } else {
                Err(t)
            }
        })
        .unwrap();
        drop(p);
        // SAFETY: kill(2) with signal 0 only checks for existence.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "pid {pid} survived the guard");
    }

    #[test]
    fn temp_dir_is_short_and_removed_on_drop() {
        let dir = TempDir::new("pcs-unit").unwrap();
        let path = dir.path().to_path_buf();
        assert!(path.is_dir());
        assert!(path.as_os_str().len() < 30, "{}", path.display());
        fs::write(path.join("f"), "x").unwrap();
        drop(dir);
        if std::env::var_os("PODCIDR_KEEP_TMP").is_none() {
            assert!(!path.exists());
        }
    }
}
