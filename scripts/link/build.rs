//! Link settings for the speaker binary that cut its idle memory (issue 31); no code is
//! generated. Only the `podcidr-speaker` binary is affected, only when the linker is the
//! toolchain's rust-lld (the default for x86_64-unknown-linux-gnu since Rust 1.90), and
//! never the dependencies' compilation (RUSTFLAGS would rebuild every crate).
//!
//! - `--symbol-ordering-file=scripts/link/startup.order`: the functions the daemon runs from start
//!   to idle (recorded by scripts/symbol-order) are placed together at the start of .text.
//!   Scattered over the 13 MB of code, the 1.7 MB of them kept about 9 MiB of the binary
//!   resident (the kernel maps 64 KiB around each page fault); packed, a fraction of that.
//!   A name no longer in the binary (renamed function, other toolchain) is skipped by the
//!   linker: a stale file costs locality, never a build.
//! - `-z pack-relative-relocs` (DT_RELR, glibc 2.36+, Debian 12's; left out when the
//!   build machine's glibc is older): the position-
//!   independent binary's 30,000 relative relocations as a bitmap of a few KiB instead of
//!   a 740 KB .rela.dyn, which the loader reads whole at every start.
//! - GCC's unwinder linked in statically (`libgcc_eh.a`, see [`static_unwinder`]) instead
//!   of loaded from libgcc_s.so.1: it runs only on a panic, and the shared library cost
//!   about 90 KiB resident at idle. Left as it was when `cc` cannot name the archive.

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=scripts/link/startup.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    if !uses_rust_lld() {
        println!(
            "cargo:warning=linking podcidr-speaker without the startup order (not the default rust-lld)"
        );
        return;
    }
    let order = format!(
        "{}/scripts/link/startup.order",
        env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into())
    );
    let mut args = vec![
        format!("-Wl,--symbol-ordering-file={order}"),
        "-Wl,--no-warn-symbol-ordering".to_owned(),
    ];
    // A DT_RELR binary needs glibc 2.36 to load (GLIBC_ABI_DT_RELR): packed only when
    // the glibc built against has it, so the binary always runs where it was built.
    if glibc_at_least(2, 36) {
        args.push("-Wl,-z,pack-relative-relocs".to_owned());
    } else {
        println!("cargo:warning=relocations not packed (glibc before 2.36 or unknown)");
    }
    match static_unwinder() {
        Some(dir) => args.push(format!("-L{}", dir.display())),
        None => {
            println!("cargo:warning=the unwinder stays in libgcc_s.so.1 (no libgcc_eh.a from `cc`)")
        }
    }
    for arg in args {
        println!("cargo:rustc-link-arg-bin=podcidr-speaker={arg}");
    }
}

/// A directory whose `libgcc_s.so` is a linker script naming GCC's static unwinder
/// (`libgcc_eh.a`), so that the `-lgcc_s` rustc passes for the standard library's
/// unwinding links it into the binary instead of loading libgcc_s.so.1 at every start.
/// The unwinder runs only on a panic; as a shared library it cost a mapping, its
/// relocations and about 90 KiB resident at idle (`-static-libgcc` cannot do this:
/// rustc names `gcc_s` itself). A directory given with `-L` is searched before the
/// system's, whatever its place on the command line. `None` when `cc` does not know
/// where `libgcc_eh.a` is, or for a cross build.
fn static_unwinder() -> Option<std::path::PathBuf> {
    // A cross build's `cc` would name the build machine's archive, not the target's.
    if env::var("HOST").ok() != env::var("TARGET").ok() {
        return None;
    }
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Not found, cc prints the bare name back.
    if !path.is_absolute() || !path.is_file() {
        return None;
    }
    let dir = std::path::PathBuf::from(env::var_os("OUT_DIR")?).join("unwinder");
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(
        dir.join("libgcc_s.so"),
        format!("INPUT({})\n", path.display()),
    )
    .ok()?;
    Some(dir)
}

/// The build machine's glibc (a native build: `uses_rust_lld` holds the target to
/// x86_64 GNU Linux) is at least `major.minor`, by `getconf GNU_LIBC_VERSION`
/// ("glibc 2.36"); false when it cannot be told.
fn glibc_at_least(major: u32, minor: u32) -> bool {
    if env::var("HOST").ok() != env::var("TARGET").ok() {
        return false;
    }
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut version = text
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().ok());
    match (version.next().flatten(), version.next().flatten()) {
        (Some(a), Some(b)) => (a, b) >= (major, minor),
        _ => false,
    }
}

/// rustc links x86_64-unknown-linux-gnu with its own rust-lld from 1.90 on, unless a
/// linker or linker flavour is configured: then the flags above may be unknown (GNU ld
/// has no --symbol-ordering-file), so they are left out.
fn uses_rust_lld() -> bool {
    if env::var("TARGET").as_deref() != Ok("x86_64-unknown-linux-gnu") {
        return false;
    }
    if env::var_os("RUSTC_LINKER").is_some() {
        return false;
    }
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if flags
        .split('\x1f')
        .any(|f| f.contains("linker") || f.contains("link-self-contained") || f.contains("fuse-ld"))
    {
        return false;
    }
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("-V").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let version = String::from_utf8_lossy(&out.stdout);
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    matches!(minor, Some(m) if m >= 90)
}
