//! Stable-toolchain stand-in for a short fuzzing run: the cargo-fuzz targets of
//! `proto-tests/fuzz` (bodies in `targets.rs`) replayed over the seed corpora in the
//! shared data directory and over deterministic mutations of every seed (bit flips,
//! byte overwrites, length-field edits, truncation, insertion, deletion, splicing).
//! A panic anywhere — in the codec, the readers, or the two decoders disagreeing —
//! fails the test. Bounded in time; the seed and mutation counts are printed.
//!
//! The text targets (`config_parse`, `cluster_state`) are seeded from the samples in
//! the repository's `config/` and need no data directory; their mutations also work on
//! lines and YAML tokens, since byte flips alone rarely keep a document parseable.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

#[path = "targets.rs"]
mod targets;

#[path = "../common/data.rs"]
mod data;
use data::data_dir;
use podcidr_speaker::decode::input;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Wall-clock budget of each corpus (the test stops mutating, not failing, when spent).
const BUDGET: Duration = Duration::from_secs(40);

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Regular files of a gzip-compressed ustar archive (the corpi corpora).
fn tar_gz_members(path: &Path) -> Vec<Vec<u8>> {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at + 512 <= raw.len() {
        let header = &raw[at..at + 512];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let size_field = std::str::from_utf8(&header[124..136])
            .unwrap()
            .trim_matches(|c: char| c == '\0' || c == ' ');
        let size = usize::from_str_radix(size_field, 8).unwrap();
        let name = String::from_utf8_lossy(&header[..100]);
        let body = &raw[at + 512..at + 512 + size];
        if matches!(header[156], b'0' | 0) && !name.ends_with(".md") {
            out.push(body.to_vec());
        }
        at += 512 + size.div_ceil(512) * 512;
    }
    out
}

/// Raw messages of ExaBGP's qa/encoding files: `N:raw:<marker>:<len>:<type>:<body>`.
fn exabgp_messages(path: &Path) -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| l.split_once(":raw:").map(|(_, hex)| hex.replace(':', "")))
        .filter_map(|hex| {
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
                .collect()
        })
        .collect()
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn mutate(seed: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut m = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let len = m.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                m[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                m[i] = [0x00, 0xff, 0x7f, 0x80, 0x01][rng.below(5)];
            }
            // A 16-bit length field (BGP header, attribute, NLRI length) pushed off.
            2 if len > 1 => {
                let i = rng.below(len - 1);
                let v = u16::from_be_bytes([m[i], m[i + 1]])
                    .wrapping_add([1, 0xffff, 0x100, 0xff00][rng.below(4)]);
                m[i..i + 2].copy_from_slice(&v.to_be_bytes());
            }
            3 => m.truncate(rng.below(len + 1)),
            4 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(16);
                let fill = rng.next() as u8;
                m.splice(i..i, std::iter::repeat_n(fill, n));
            }
            5 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                m.drain(i..i + n);
            }
            6 if !other.is_empty() => {
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                m.truncate(cut);
                m.extend_from_slice(&other[from..]);
            }
            _ => {
                // Re-mark: corpora like GoBGP's use ASCII zeros as the marker.
                for b in m.iter_mut().take(16) {
                    *b = 0xff;
                }
            }
        }
    }
    m
}

/// Runs `target` over every seed and `mutations` mutations of each; returns how many
/// inputs ran.
fn replay(name: &str, seeds: &[Vec<u8>], mutations: usize, target: fn(&[u8])) -> usize {
    assert!(!seeds.is_empty(), "{name}: no seeds");
    let started = Instant::now();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ name.len() as u64);
    let mut runs = 0;
    'seeds: for (i, seed) in seeds.iter().enumerate() {
        target(seed);
        runs += 1;
        let other = &seeds[(i + 1) % seeds.len()];
        for _ in 0..mutations {
            if started.elapsed() > BUDGET {
                println!(
                    "{name}: time budget reached after {} of {} seeds",
                    i + 1,
                    seeds.len()
                );
                break 'seeds;
            }
            target(&mutate(seed, other, &mut rng));
            runs += 1;
        }
    }
    println!(
        "{name}: {} seeds, {runs} inputs in {:?}",
        seeds.len(),
        started.elapsed()
    );
    runs
}

fn message_seeds(dir: &Path) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let corpora = dir.join("messages/fuzz-corpora");
    for f in files(&corpora.join("frr-bgpd-seeds"))
        .into_iter()
        .chain(files(&dir.join("messages/gobgp-bad-len")))
    {
        seeds.push(std::fs::read(f).unwrap());
    }
    for archive in [
        "corpi-frr-bgpd-corpus.tar.gz",
        "corpi-bird-bgp-corpus.tar.gz",
    ] {
        seeds.extend(tar_gz_members(&corpora.join(archive)));
    }
    for f in files(&dir.join("messages/exabgp-qa-encoding")) {
        seeds.extend(exabgp_messages(&f));
    }
    seeds
}

/// Decompressed contents of the files of `sub` under `limit` octets.
fn file_seeds(dir: &Path, sub: &[&str], limit: usize) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for s in sub {
        for f in files(&dir.join(s)) {
            let mut data = Vec::new();
            if input::open(&f)
                .unwrap()
                .take(limit as u64 + 1)
                .read_to_end(&mut data)
                .is_ok()
                && data.len() <= limit
            {
                seeds.push(data);
            }
        }
    }
    seeds
}

#[test]
fn decode_message_over_seed_corpora_and_mutations() {
    let Some(dir) = data_dir() else { return };
    let seeds = message_seeds(&dir);
    assert!(
        seeds.len() > 3000,
        "expected the FRR, BIRD, GoBGP and ExaBGP corpora, found {} seeds",
        seeds.len()
    );
    let runs = replay("decode_message", &seeds, 64, targets::decode_message);
    assert!(runs >= seeds.len().min(3000), "only {runs} inputs ran");
}

#[test]
fn decode_stream_over_seed_corpora_and_mutations() {
    let Some(dir) = data_dir() else { return };
    let seeds = message_seeds(&dir);
    let runs = replay("decode_stream", &seeds, 24, targets::stream);
    assert!(runs >= seeds.len().min(3000), "only {runs} inputs ran");
}

#[test]
fn decode_mrt_over_small_files_and_mutations() {
    let Some(dir) = data_dir() else { return };
    let seeds = file_seeds(
        &dir,
        &[
            "mrt/implementations",
            "mrt/rib-small",
            "mrt/edge-cases",
            "mrt/updates",
        ],
        100_000,
    );
    assert!(seeds.len() >= 15, "found {} small MRT files", seeds.len());
    replay("decode_mrt", &seeds, 150, targets::mrt);
}

#[test]
fn decode_pcap_over_small_captures_and_mutations() {
    let Some(dir) = data_dir() else { return };
    let seeds = file_seeds(
        &dir,
        &[
            "pcap/tcpdump-tests",
            "pcap/packetlife",
            "pcap/bgp-rs",
            "pcap/netgauze",
            "pcap/pcapplusplus",
        ],
        20_000,
    );
    let seeds: Vec<_> = seeds
        .into_iter()
        .filter(|s| s.starts_with(&[0xd4, 0xc3]) || s.starts_with(&[0x0a, 0x0d]))
        .collect();
    assert!(seeds.len() >= 40, "found {} small captures", seeds.len());
    replay("decode_pcap", &seeds, 300, targets::pcap);
}

/// Every `*.yaml` under the repository's `config/` (bgp-configs, ConfigMaps and
/// cluster-state files alike: each target gets the other's samples as well).
fn repo_yaml_seeds() -> Vec<Vec<u8>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("config"),
        &mut paths,
    );
    paths.sort();
    paths
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect()
}

/// Tokens that change a YAML document's meaning rather than its bytes.
const YAML_TOKENS: &[&str] = &[
    "\n- ",
    ": ",
    "- ",
    "  ",
    "\n",
    "{",
    "}",
    "[",
    "]",
    "&a ",
    "*a",
    "!!str ",
    "---\n",
    "'",
    "\"",
    "~",
    "null",
    "0x",
    "-1",
    "4294967296",
    "1e9",
    "::",
    "0.0.0.0/0",
    "/33",
    "peers:",
    "peer-address: ",
    "peer-asn: ",
    "my-asn: ",
    "hold-time: ",
    "password: ",
    "node-selectors:",
    "match-labels:",
    "max-prefix:",
    "kind: Node\n",
    "kind: List\n",
    "items:",
    "podCIDRs:",
    "ipam: ",
    "cluster-pool-ipv4-cidr: ",
    "<<: ",
    "? ",
];

/// A byte-level mutation half of the time, otherwise one on lines or YAML tokens.
fn mutate_text(seed: &[u8], other: &[u8], rng: &mut Rng) -> Vec<u8> {
    if rng.below(2) == 0 {
        return mutate(seed, other, rng);
    }
    let text = String::from_utf8_lossy(seed);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let others: Vec<&[u8]> = other.split(|&b| b == b'\n').collect();
    for _ in 0..1 + rng.below(3) {
        let n = lines.len();
        match rng.below(6) {
            0 if n > 0 => {
                lines.remove(rng.below(n));
            }
            1 if n > 0 => {
                let l = lines[rng.below(n)].clone();
                lines.insert(rng.below(n + 1), l);
            }
            2 if n > 0 => {
                let i = rng.below(n);
                let indent = " ".repeat(rng.below(6));
                let trimmed = lines[i].trim_start().to_owned();
                lines[i] = indent + &trimmed;
            }
            3 if n > 0 => {
                let i = rng.below(n);
                let line = &mut lines[i];
                let at = (0..=rng.below(line.len() + 1))
                    .rev()
                    .find(|&k| line.is_char_boundary(k))
                    .unwrap_or(0);
                line.insert_str(at, YAML_TOKENS[rng.below(YAML_TOKENS.len())]);
            }
            4 if n > 0 => {
                // A line from the other seed: Nodes into configs and the reverse.
                let l = String::from_utf8_lossy(others[rng.below(others.len())]);
                lines.insert(rng.below(n + 1), l.into_owned());
            }
            _ if n > 1 => {
                let (a, b) = (rng.below(n), rng.below(n));
                lines.swap(a, b);
            }
            _ => lines.push(YAML_TOKENS[rng.below(YAML_TOKENS.len())].to_owned()),
        }
    }
    lines.join("\n").into_bytes()
}

/// As [`replay`], with text mutations.
fn replay_text(name: &str, seeds: &[Vec<u8>], mutations: usize, target: fn(&[u8])) -> usize {
    assert!(!seeds.is_empty(), "{name}: no seeds");
    let started = Instant::now();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ name.len() as u64);
    let mut runs = 0;
    'seeds: for (i, seed) in seeds.iter().enumerate() {
        target(seed);
        runs += 1;
        let other = &seeds[(i + 1) % seeds.len()];
        for _ in 0..mutations {
            if started.elapsed() > TEXT_BUDGET {
                println!(
                    "{name}: time budget reached after {} of {} seeds",
                    i + 1,
                    seeds.len()
                );
                break 'seeds;
            }
            target(&mutate_text(seed, other, &mut rng));
            runs += 1;
        }
    }
    println!(
        "{name}: {} seeds, {runs} inputs in {:?}",
        seeds.len(),
        started.elapsed()
    );
    runs
}

/// Wall-clock budget of each text target.
const TEXT_BUDGET: Duration = Duration::from_secs(20);

#[test]
fn config_parse_over_samples_and_mutations() {
    let seeds = repo_yaml_seeds();
    assert!(seeds.len() >= 10, "found {} config/ samples", seeds.len());
    // The samples themselves must be what the target expects of good input.
    for name in [
        "cilium-bgp-config.yaml",
        "metallb-full.yaml",
        "speaker-extensions.yaml",
    ] {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("config")
                .join(name),
        )
        .unwrap();
        assert!(
            podcidr_speaker::config::parse(&text).is_ok(),
            "{name} is refused"
        );
    }
    let runs = replay_text("config_parse", &seeds, 400, targets::config_parse);
    assert!(runs >= 1000, "only {runs} inputs ran");
}

#[test]
fn cluster_state_over_samples_and_mutations() {
    let mut seeds = repo_yaml_seeds();
    // A whole directory as one input (files separated by NUL), as the target splits it.
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo/cluster-state");
    let joined: Vec<Vec<u8>> = files(&demo)
        .into_iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    seeds.push(joined.join(&0u8));
    let state = podcidr_speaker::sources::file::load(&demo).expect("the demo cluster state loads");
    assert!(
        state.nodes.len() >= 4,
        "the demo has {} nodes",
        state.nodes.len()
    );
    let runs = replay_text("cluster_state", &seeds, 400, targets::cluster_state);
    assert!(runs >= 1000, "only {runs} inputs ran");
}

/// BFD control packets written from RFC 5880 section 4.1's layout (there is no BFD
/// capture in the shared data): every state with a diag, each flag, the discriminators
/// and intervals at their extremes, and the authentication sections of section 4.2-4.4
/// (simple password, keyed MD5, keyed SHA1) after the A bit.
fn bfd_seeds() -> Vec<Vec<u8>> {
    let base: [u8; 24] = [
        0x20, 0x40, 0x03, 0x18, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x42,
        0x40, 0x00, 0x04, 0x93, 0xe0, 0x00, 0x00, 0x00, 0x00,
    ];
    let mut seeds = Vec::new();
    for (state, your) in [(0x00u8, 0u32), (0x40, 0), (0x80, 7), (0xc0, 7)] {
        for flags in [0x00u8, 0x20, 0x10, 0x08, 0x02, 0x30] {
            for (diag, mult) in [(0u8, 3u8), (1, 1), (3, 255), (7, 2), (31, 3)] {
                let mut p = base;
                p[0] = 0x20 | diag;
                p[1] = state | flags;
                p[2] = mult;
                p[8..12].copy_from_slice(&your.to_be_bytes());
                seeds.push(p.to_vec());
            }
        }
    }
    for interval in [0u32, 1, 10_000, 300_000, u32::MAX] {
        let mut p = base;
        p[1] = 0xc0;
        p[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
        p[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        for at in [12, 16, 20] {
            p[at..at + 4].copy_from_slice(&interval.to_be_bytes());
        }
        seeds.push(p.to_vec());
    }
    // Authentication sections: type, length, key id, then the password or the sequence
    // number and digest.
    let password = [0x01, 0x07, 0x01, b's', b'e', b'c', b'r'].to_vec();
    let md5 = [
        &[0x02, 0x18, 0x01, 0x00][..],
        &[0x00, 0x00, 0x00, 0x2a],
        &[0xab; 16],
    ]
    .concat();
    let sha1 = [
        &[0x04, 0x1c, 0x01, 0x00][..],
        &[0x00, 0x00, 0x00, 0x2a],
        &[0xcd; 20],
    ]
    .concat();
    for auth in [password, md5, sha1] {
        let mut p = base.to_vec();
        p[1] |= 0x04;
        p[3] = (24 + auth.len()) as u8;
        p.extend_from_slice(&auth);
        seeds.push(p);
    }
    // Octets past Length (a padded payload).
    let mut padded = base.to_vec();
    padded.extend_from_slice(&[0u8; 8]);
    seeds.push(padded);
    seeds
}

#[test]
fn bfd_packet_over_rfc_layout_seeds_and_mutations() {
    use podcidr_speaker::bfd::Packet;
    let seeds = bfd_seeds();
    let accepted = seeds.iter().filter(|s| Packet::decode(s).is_ok()).count();
    // Every seed is a valid packet (Init and Up ones carry a your discriminator), so the
    // session half of the target runs on each.
    assert_eq!(accepted, seeds.len(), "a seed is refused");
    let runs = replay("bfd_packet", &seeds, 3000, targets::bfd_packet);
    assert!(runs >= seeds.len() * 1000, "only {runs} inputs ran");
}
