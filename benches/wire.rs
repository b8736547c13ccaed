//! Codec throughput on a real full-table UPDATE stream: the PCH collector's 2015 iBGP
//! session (`mrt/large/bgpdump-updates.et-header.2015.gz`, 89,679 UPDATEs carrying
//! 577,737 IPv4 prefixes), extracted once with the `decode` MRT reader.
//!
//! Always measured: our decode (`bgp::wire::decode_message`), encode
//! (`encode_message` of the decoded values) and the UPDATE builder (`UpdateBuilder`
//! packing every announced IPv4 prefix under one attribute set). With `--features
//! bench-compare`, the same message bytes are also decoded, in the same run, by
//! netgauze-bgp-pkt, zettabgp, routecore and rustbgpd-wire, each made to parse every
//! attribute and NLRI (the count of prefixes and attributes it returns is checked
//! against ours before timing); and netgauze-bgp-pkt, zettabgp and rustbgpd-wire encode
//! the stream back from their own decoded values (the octets each writes are checked
//! against the stream's). routecore has no owned-value encoder of decoded UPDATEs (its
//! builder assembles new ones), so it is left out of encode.
//!
//! Criterion reports messages/s; a summary printed at the end gives messages/s,
//! prefixes/s and each codec's time relative to ours.
//!
//! ```text
//! cargo bench --bench wire --features bench-compare
//! ```
//!
//! The data directory comes from `PODCIDR_BGP_DATA` (default `../shared/data/bgp`);
//! without it the bench prints why and measures nothing.

// A bench crate: a failed unwrap aborts the measurement, not a speaker; its harness
// may call libc. The rules of Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use podcidr_speaker::bgp::wire::{self, Context, Message, Nlri, PathAttribute, UpdateBuilder};
use podcidr_speaker::decode::{input, mrt};
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

const FILE: &str = "mrt/large/bgpdump-updates.et-header.2015.gz";

struct Stream {
    messages: Vec<Bytes>,
    ctx: Context,
    /// Announced + withdrawn prefixes over all messages.
    prefixes: u64,
    /// Path attributes over all messages.
    attributes: u64,
}

fn load() -> Option<Stream> {
    let dir = std::env::var_os("PODCIDR_BGP_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/data/bgp"))
        });
    let path = dir.join(FILE);
    if !path.is_file() {
        println!(
            "skipped: {} not found (set PODCIDR_BGP_DATA)",
            path.display()
        );
        return None;
    }
    let mut messages = Vec::new();
    let mut ctx = None;
    for record in mrt::Reader::new(input::open(&path).ok()?) {
        let Ok(mrt::Entry::Message(m)) = record.ok()?.entry() else {
            continue;
        };
        if m.message.get(18) == Some(&2) {
            ctx.get_or_insert(m.ctx);
            messages.push(m.message);
        }
    }
    let ctx = ctx?;
    let (prefixes, attributes) = messages.iter().fold((0, 0), |(p, a), m| {
        let (dp, da) = ours(m, &ctx);
        (p + dp, a + da)
    });
    Some(Stream {
        messages,
        ctx,
        prefixes,
        attributes,
    })
}

/// Our decode of one message: (prefixes, attributes). `decode_message` (copying the
/// few values kept as bytes) measured a little faster here than `decode_message_bytes`
/// (reference-counted slices), whose per-message `Bytes` clone costs an atomic pair.
fn ours(msg: &Bytes, ctx: &Context) -> (u64, u64) {
    match wire::decode_message(msg, ctx) {
        Ok(Message::Update(u)) => {
            let mp: usize = u
                .attributes
                .iter()
                .map(|a| match a {
                    PathAttribute::MpReach(r) => r.nlri.len(),
                    PathAttribute::MpUnreach(w) => w.withdrawn.len(),
                    _ => 0,
                })
                .sum();
            (
                (u.nlri.len() + u.withdrawn.len() + mp) as u64,
                u.attributes.len() as u64,
            )
        }
        _ => (0, 0),
    }
}

/// Decodes one whole message; returns the (prefixes, attributes) found.
type DecodeFn = Box<dyn Fn(&Bytes) -> (u64, u64)>;

/// One codec under test.
struct Codec {
    name: &'static str,
    decode: DecodeFn,
}

/// Encodes the whole stream from values the codec decoded beforehand (outside the
/// timing); returns the octets written, headers included.
type EncodeFn = Box<dyn Fn() -> u64>;

/// One encoder under test.
struct Encoder {
    name: &'static str,
    encode: EncodeFn,
}

/// Room for the whole stream's encoding, so no encoder pays for growing its output.
const OUT_CAPACITY: usize = 1 << 24;

fn encoders(stream: &Stream, decoded: &[Message]) -> Vec<Encoder> {
    let ctx = stream.ctx;
    let ours = decoded.to_vec();
    #[allow(unused_mut)]
    let mut out = vec![Encoder {
        name: "podcidr-speaker",
        encode: Box::new(move || {
            let mut out = BytesMut::with_capacity(OUT_CAPACITY);
            for m in &ours {
                wire::encode_message(black_box(m), &ctx, &mut out).ok();
            }
            out.len() as u64
        }),
    }];
    #[cfg(feature = "bench-compare")]
    out.extend(compare::encoders(&stream.messages, ctx));
    out
}

fn codecs(ctx: Context) -> Vec<Codec> {
    #[allow(unused_mut)]
    let mut out = vec![Codec {
        name: "podcidr-speaker",
        decode: Box::new(move |m| ours(m, &ctx)),
    }];
    #[cfg(feature = "bench-compare")]
    out.extend(compare::codecs(ctx));
    out
}

#[cfg(feature = "bench-compare")]
mod compare {
    //! The other codecs, each asked for the same work as ours: every prefix and every
    //! path attribute decoded into values. Prefixes are counted in the IPv4 NLRI and
    //! Withdrawn Routes fields only: the benchmark stream has no MP_REACH_NLRI
    //! (SOURCES.md), and each codec nests multiprotocol NLRI differently.

    use super::Codec;
    use bytes::Bytes;
    use podcidr_speaker::bgp::wire::Context;

    pub fn codecs(ctx: Context) -> Vec<Codec> {
        vec![
            Codec {
                name: "netgauze-bgp-pkt 0.13",
                decode: Box::new(move |m| netgauze(m, ctx)),
            },
            Codec {
                name: "zettabgp 0.6",
                decode: Box::new(move |m| zettabgp(m, ctx)),
            },
            Codec {
                name: "routecore 0.7",
                decode: Box::new(move |m| routecore(m, ctx)),
            },
            Codec {
                name: "rustbgpd-wire 0.27",
                decode: Box::new(move |m| rustbgpd(m, ctx)),
            },
        ]
    }

    pub fn encoders(messages: &[Bytes], ctx: Context) -> Vec<super::Encoder> {
        vec![
            super::Encoder {
                name: "netgauze-bgp-pkt 0.13",
                encode: netgauze_encoder(messages, ctx),
            },
            super::Encoder {
                name: "zettabgp 0.6",
                encode: zettabgp_encoder(messages, ctx),
            },
            super::Encoder {
                name: "rustbgpd-wire 0.27",
                encode: rustbgpd_encoder(messages, ctx),
            },
        ]
    }

    fn netgauze_context(ctx: Context) -> netgauze_bgp_pkt::wire::deserializer::BgpParsingContext {
        netgauze_bgp_pkt::wire::deserializer::BgpParsingContext::new(
            ctx.four_octet_as,
            std::collections::HashMap::new(),
            std::collections::HashMap::new(),
            true,
            true,
            true,
            true,
        )
    }

    fn netgauze_encoder(messages: &[Bytes], ctx: Context) -> super::EncodeFn {
        use netgauze_bgp_pkt::BgpMessage;
        use netgauze_parse_utils::reader::SliceReader;
        use netgauze_parse_utils::traits::ParseFromWithOneInput;
        use netgauze_parse_utils::WritablePdu;
        let mut pctx = netgauze_context(ctx);
        let values: Vec<BgpMessage> = messages
            .iter()
            .filter_map(|m| BgpMessage::parse(&mut SliceReader::new(&m[..]), &mut pctx).ok())
            .collect();
        Box::new(move || {
            let mut out: Vec<u8> = Vec::with_capacity(super::OUT_CAPACITY);
            for m in &values {
                std::hint::black_box(m).write(&mut out).ok();
            }
            out.len() as u64
        })
    }

    fn zettabgp_params(ctx: Context) -> zettabgp::prelude::BgpSessionParams {
        use zettabgp::prelude::*;
        let mut params = BgpSessionParams::new(
            0,
            180,
            BgpTransportMode::IPv4,
            std::net::Ipv4Addr::UNSPECIFIED,
            Vec::new(),
        );
        params.has_as32bit = ctx.four_octet_as;
        params.fuzzy_pathid = false;
        params
    }

    fn zettabgp_encoder(messages: &[Bytes], ctx: Context) -> super::EncodeFn {
        use zettabgp::prelude::*;
        let params = zettabgp_params(ctx);
        let values: Vec<BgpUpdateMessage> = messages
            .iter()
            .filter_map(|m| {
                let mut u = BgpUpdateMessage::new();
                u.decode_from(&params, &m[19..]).ok().map(|()| u)
            })
            .collect();
        Box::new(move || {
            // encode_to writes the message body into a slice; the 19-octet header
            // (marker, length, type) is left for the caller, as zettabgp's own session
            // code does. It is written here (the other codecs write theirs), so that
            // every codec is timed for whole messages.
            let mut out = vec![0u8; super::OUT_CAPACITY];
            let mut at = 0;
            for u in &values {
                if let Ok(n) = std::hint::black_box(u).encode_to(&params, &mut out[at + 19..]) {
                    let len = 19 + n;
                    let mut header = [0xff; 19];
                    header[16..18].copy_from_slice(&(len as u16).to_be_bytes());
                    header[18] = 2;
                    out[at..at + 19].copy_from_slice(&header);
                    at += len;
                }
            }
            at as u64
        })
    }

    fn rustbgpd_encoder(messages: &[Bytes], ctx: Context) -> super::EncodeFn {
        use rustbgpd_wire::{
            decode_message, Ipv4UnicastMode, Message, ParsedUpdate, UpdateMessage,
        };
        let max = if ctx.extended_message { 65535 } else { 4096 };
        let values: Vec<ParsedUpdate> = messages
            .iter()
            .filter_map(|m| match decode_message(&mut m.clone(), max) {
                Ok(Message::Update(u)) => u
                    .parse(ctx.four_octet_as, ctx.add_path_ipv4_unicast, &[])
                    .ok(),
                _ => None,
            })
            .collect();
        let four = ctx.four_octet_as;
        Box::new(move || {
            let mut out = bytes::BytesMut::with_capacity(super::OUT_CAPACITY);
            for p in &values {
                let p = std::hint::black_box(p);
                // Its value -> wire path: build the UPDATE's fields from the values,
                // then write the message.
                if let Ok(u) = UpdateMessage::try_build(
                    &p.announced,
                    &p.withdrawn,
                    &p.attributes,
                    four,
                    false,
                    Ipv4UnicastMode::Body,
                ) {
                    u.encode_with_limit(&mut out, max).ok();
                }
            }
            out.len() as u64
        })
    }

    fn netgauze(msg: &Bytes, ctx: Context) -> (u64, u64) {
        use netgauze_bgp_pkt::BgpMessage;
        use netgauze_parse_utils::reader::SliceReader;
        use netgauze_parse_utils::traits::ParseFromWithOneInput;
        let mut pctx = netgauze_context(ctx);
        match BgpMessage::parse(&mut SliceReader::new(&msg[..]), &mut pctx) {
            Ok(BgpMessage::Update(u)) => (
                (u.nlri().len() + u.withdraw_routes().len()) as u64,
                u.path_attributes().len() as u64,
            ),
            _ => (0, 0),
        }
    }

    fn zettabgp(msg: &Bytes, ctx: Context) -> (u64, u64) {
        use zettabgp::prelude::*;
        // Path identifiers are known to be absent: no guessing (fuzzy_pathid off).
        let params = zettabgp_params(ctx);
        let mut update = BgpUpdateMessage::new();
        match update.decode_from(&params, &msg[19..]) {
            Ok(()) => (
                (update.updates.len() + update.withdraws.len()) as u64,
                update.attrs.len() as u64,
            ),
            Err(_) => (0, 0),
        }
    }

    fn routecore(msg: &Bytes, ctx: Context) -> (u64, u64) {
        use routecore::bgp::message::{SessionConfig, UpdateMessage};
        let config = if ctx.four_octet_as {
            SessionConfig::modern()
        } else {
            SessionConfig::legacy()
        };
        // routecore parses lazily: iterate everything and turn every attribute into
        // its owned value so that the work matches an eager decoder's.
        let Ok(u) = UpdateMessage::from_octets(&msg[..], &config) else {
            return (0, 0);
        };
        let announced = u
            .announcements()
            .map(|i| i.filter(|n| n.is_ok()).count())
            .unwrap_or(0);
        let withdrawn = u
            .withdrawals()
            .map(|i| i.filter(|n| n.is_ok()).count())
            .unwrap_or(0);
        let attributes = u
            .path_attributes()
            .map(|i| {
                i.filter_map(Result::ok)
                    .filter(|a| a.to_owned().is_ok())
                    .count()
            })
            .unwrap_or(0);
        ((announced + withdrawn) as u64, attributes as u64)
    }

    fn rustbgpd(msg: &Bytes, ctx: Context) -> (u64, u64) {
        use rustbgpd_wire::{decode_message, Message};
        let mut buf = msg.clone();
        let max = if ctx.extended_message { 65535 } else { 4096 };
        match decode_message(&mut buf, max) {
            Ok(Message::Update(u)) => {
                match u.parse(ctx.four_octet_as, ctx.add_path_ipv4_unicast, &[]) {
                    Ok(p) => (
                        (p.announced.len() + p.withdrawn.len()) as u64,
                        p.attributes.len() as u64,
                    ),
                    Err(_) => (0, 0),
                }
            }
            _ => (0, 0),
        }
    }
}

fn bench(c: &mut Criterion) {
    let Some(stream) = load() else { return };
    let n = stream.messages.len() as u64;
    println!(
        "{FILE}: {n} UPDATEs, {} prefixes, {} path attributes, {} octets",
        stream.prefixes,
        stream.attributes,
        stream.messages.iter().map(|m| m.len()).sum::<usize>()
    );
    let codecs = codecs(stream.ctx);
    for codec in &codecs {
        let (p, a) = stream.messages.iter().fold((0, 0), |(p, a), m| {
            let (dp, da) = (codec.decode)(m);
            (p + dp, a + da)
        });
        if (p, a) != (stream.prefixes, stream.attributes) {
            println!(
                "note: {} found {p} prefixes and {a} attributes (ours: {} and {})",
                codec.name, stream.prefixes, stream.attributes
            );
        }
    }

    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Elements(n));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    for codec in &codecs {
        group.bench_function(codec.name, |b| {
            b.iter(|| {
                let mut total = 0u64;
                for m in &stream.messages {
                    total += (codec.decode)(black_box(m)).0;
                }
                black_box(total)
            })
        });
    }
    group.finish();

    let decoded: Vec<Message> = stream
        .messages
        .iter()
        .filter_map(|m| wire::decode_message_bytes(m.clone(), &stream.ctx).ok())
        .collect();
    let encoders = encoders(&stream, &decoded);
    let octets: u64 = stream.messages.iter().map(|m| m.len() as u64).sum();
    for e in &encoders {
        let wrote = (e.encode)();
        if wrote != octets {
            println!(
                "note: {} wrote {wrote} octets from its decoded values (the stream has \
                 {octets}; a codec that re-encodes canonically, e.g. one-octet attribute \
                 lengths where the sender used two, writes fewer)",
                e.name
            );
        }
    }
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(decoded.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    for e in &encoders {
        group.bench_function(e.name, |b| b.iter(|| black_box((e.encode)())));
    }
    group.finish();

    let build = build_input(&decoded, &stream.ctx);
    if let Some(input) = &build {
        let mut group = c.benchmark_group("build");
        group.throughput(Throughput::Elements(input.prefixes.len() as u64));
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(8));
        group.bench_function("podcidr-speaker announce", |b| {
            let mut out = BytesMut::with_capacity(1 << 24);
            b.iter(|| {
                out.clear();
                black_box(input.builder.announce(black_box(&input.prefixes), &mut out)).ok();
                black_box(out.len())
            })
        });
        group.finish();
    }

    // `cargo bench` passes --bench; under `cargo test` each benchmark runs once as a
    // smoke test and the timing summary would only measure an unoptimised build.
    if std::env::args().any(|a| a == "--bench") {
        summary(&stream, &codecs, &encoders, build.as_ref());
    }
}

/// The builder's work: every IPv4 prefix the stream announces, packed into UPDATEs
/// under one attribute set (that of the stream's first announcement), at the common
/// 4096-octet maximum (the capture's context allows extended messages).
struct BuildInput {
    builder: UpdateBuilder,
    prefixes: Vec<Nlri>,
}

fn build_input(decoded: &[Message], ctx: &Context) -> Option<BuildInput> {
    let updates = decoded.iter().filter_map(|m| match m {
        Message::Update(u) => Some(u),
        _ => None,
    });
    let attrs = &updates.clone().find(|u| !u.nlri.is_empty())?.attributes;
    let ctx = Context {
        extended_message: false,
        ..*ctx
    };
    let builder = UpdateBuilder::new(&ctx, attrs, None).ok()?;
    let prefixes = updates.flat_map(|u| u.nlri.iter().copied()).collect();
    Some(BuildInput { builder, prefixes })
}

/// Passes per codec in the summary.
const ROUNDS: usize = 15;

/// Best of [`ROUNDS`] full passes per codec, the codecs taking turns pass by pass so
/// that load from other processes on a shared machine falls on all of them alike:
/// messages/s, prefixes/s, and time relative to ours. Passes are timed in this thread's
/// CPU time, which leaves out the time the scheduler gave to other processes.
fn summary(stream: &Stream, codecs: &[Codec], encoders: &[Encoder], build: Option<&BuildInput>) {
    let time = |f: &dyn Fn()| {
        let t = thread_cpu_time();
        f();
        thread_cpu_time().saturating_sub(t)
    };
    let decode_pass = |codec: &Codec| {
        let mut total = 0u64;
        for m in &stream.messages {
            total += (codec.decode)(black_box(m)).0;
        }
        black_box(total);
    };
    let build_pass = |input: &BuildInput| {
        let mut out = BytesMut::with_capacity(1 << 24);
        black_box(input.builder.announce(black_box(&input.prefixes), &mut out)).ok();
        black_box(out.len());
    };
    let mut best = vec![Duration::MAX; codecs.len()];
    let mut best_encode = vec![Duration::MAX; encoders.len()];
    let mut best_build = Duration::MAX;
    for _ in 0..ROUNDS {
        for (codec, b) in codecs.iter().zip(best.iter_mut()) {
            *b = (*b).min(time(&|| decode_pass(codec)));
        }
        for (e, b) in encoders.iter().zip(best_encode.iter_mut()) {
            *b = (*b).min(time(&|| {
                black_box((e.encode)());
            }));
        }
        if let Some(input) = build {
            best_build = best_build.min(time(&|| build_pass(input)));
        }
    }
    let n = stream.messages.len() as f64;
    let p = stream.prefixes as f64;
    println!(
        "\n{:<24} {:>14} {:>16} {:>10}",
        "decode", "messages/s", "prefixes/s", "vs ours"
    );
    let base = best[0].as_secs_f64();
    for (codec, t) in codecs.iter().zip(&best) {
        let secs = t.as_secs_f64();
        println!(
            "{:<24} {:>14.0} {:>16.0} {:>9.2}x",
            codec.name,
            n / secs,
            p / secs,
            secs / base
        );
    }
    println!(
        "\n{:<24} {:>14} {:>16} {:>10}",
        "encode", "messages/s", "prefixes/s", "vs ours"
    );
    let base = best_encode[0].as_secs_f64();
    for (e, t) in encoders.iter().zip(&best_encode) {
        let secs = t.as_secs_f64();
        println!(
            "{:<24} {:>14.0} {:>16.0} {:>9.2}x",
            e.name,
            n / secs,
            p / secs,
            secs / base
        );
    }
    if let Some(input) = build {
        let mut out = BytesMut::new();
        let messages = input
            .builder
            .announce(&input.prefixes, &mut out)
            .unwrap_or(0);
        let secs = best_build.as_secs_f64();
        println!(
            "{:<24} {:>14.0} {:>16.0}   ({} prefixes in {messages} UPDATEs)",
            "build (ours)",
            messages as f64 / secs,
            input.prefixes.len() as f64 / secs,
            input.prefixes.len()
        );
    }
}

/// CPU time consumed by the calling thread.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is supported
    // on every Linux this crate targets. On failure `ts` stays zero.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

criterion_group!(benches, bench);
criterion_main!(benches);
