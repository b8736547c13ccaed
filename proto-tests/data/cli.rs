//! The `decode` command as an operator runs it: the built binary, its JSON lines and
//! its exit status (0 all good, 1 something malformed, 2 usage or I/O error).

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_podcidr-speaker");
const DEADLINE: Duration = Duration::from_secs(60);

/// A KEEPALIVE (RFC 4271 section 4.4).
const KEEPALIVE: &str = "ffffffffffffffffffffffffffffffff001304";

struct Run {
    code: i32,
    lines: Vec<Value>,
    stderr: String,
}

/// Runs the binary with `args` and `stdin`, bounded by [`DEADLINE`].
fn run(args: &[&str], stdin: &[u8]) -> Run {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    let mut err = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let status = wait(&mut child);
    writer.join().unwrap();
    let stdout = reader.join().unwrap();
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    Run {
        code: status,
        lines,
        stderr: err_reader.join().unwrap(),
    }
}

fn wait(child: &mut std::process::Child) -> i32 {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code().expect("exited by a signal");
        }
        if started.elapsed() > DEADLINE {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("decode did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn hex_keepalive_is_one_clean_line() {
    let r = run(&["decode", "--hex", KEEPALIVE], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.lines,
        vec![serde_json::json!({"type": "KEEPALIVE", "offset": 0, "length": 19})]
    );
}

#[test]
fn hex_with_separators_and_two_messages() {
    // An UPDATE withdrawing 10.0.0.0/8, then a KEEPALIVE, written with spaces and colons.
    let update = "ffffffff ffffffff ffffffff ffffffff 0019 02 0002 080a 0000";
    let r = run(
        &["decode", "--hex", &format!("0x{update}:{KEEPALIVE}")],
        b"",
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.lines.len(), 2);
    assert_eq!(r.lines[0]["type"], "UPDATE");
    assert_eq!(r.lines[0]["withdrawn"], serde_json::json!(["10.0.0.0/8"]));
    assert_eq!(r.lines[0]["errors"], serde_json::json!([]));
    assert_eq!(r.lines[1]["type"], "KEEPALIVE");
    assert_eq!(r.lines[1]["offset"], 25);
}

#[test]
fn malformed_message_prints_its_notification_and_exits_1() {
    // Message type 9 does not exist: 1/3 with the type octet as data.
    let bad = "ffffffffffffffffffffffffffffffff001309";
    let r = run(&["decode", "--hex", &format!("{bad}{KEEPALIVE}")], b"");
    assert_eq!(r.code, 1);
    let err = &r.lines[0];
    assert_eq!(
        err["notification"],
        serde_json::json!({"code": 1, "subcode": 3, "name": "message header error BadMessageType (1/3)", "data": "09"})
    );
    assert!(err["error"]
        .as_str()
        .unwrap()
        .contains("bad message type 9"));
    assert_eq!(err["raw"], bad);
    // Decoding goes on with the next message.
    assert_eq!(r.lines.last().unwrap()["type"], "KEEPALIVE");
    assert!(r.stderr.contains("malformed"), "{}", r.stderr);
}

#[test]
fn open_with_hold_time_1_or_2_is_malformed_with_2_6() {
    // RFC 4271 section 6.2: a Hold Time of one or two seconds is refused with OPEN
    // Message Error / Unacceptable Hold Time; 0 and 3 are fine.
    let open = |hold: &str| format!("ffffffffffffffffffffffffffffffff001d0104fde8{hold}0a00000100");
    for hold in ["0001", "0002"] {
        let r = run(
            &["decode", "--hex", &format!("{}{KEEPALIVE}", open(hold))],
            b"",
        );
        assert_eq!(r.code, 1, "{hold}: {}", r.stderr);
        let err = &r.lines[0];
        assert_eq!(err["type"], "OPEN");
        assert_eq!(
            err["notification"],
            serde_json::json!({"code": 2, "subcode": 6, "name": "open message error UnacceptableHoldTime (2/6)", "data": ""})
        );
        let seconds = u16::from_str_radix(hold, 16).unwrap();
        assert_eq!(
            err["error"],
            format!("open: unacceptable hold time {seconds}")
        );
        assert_eq!(err["raw"], open(hold));
        assert_eq!(r.lines[1]["type"], "KEEPALIVE");
        assert!(r.stderr.contains("malformed"), "{}", r.stderr);
    }
    for (hold, seconds) in [("0000", 0), ("0003", 3)] {
        let r = run(&["decode", "--hex", &open(hold)], b"");
        assert_eq!(r.code, 0, "{hold}: {}", r.stderr);
        assert_eq!(r.lines[0]["type"], "OPEN");
        assert_eq!(r.lines[0]["hold_time"], seconds);
        assert!(r.lines[0].get("notification").is_none());
    }
}

#[test]
fn update_error_under_rfc7606_is_malformed_but_decoded() {
    // ORIGIN with value 5 (undefined) and an IPv4 NLRI: treat-as-withdraw
    // (RFC 7606 section 7.1); the UPDATE is printed with its error, exit 1.
    let msg = concat!(
        "ffffffffffffffffffffffffffffffff",
        "002f",
        "02",
        "0000",
        "0014",
        "40010105",
        "40020602010000fde8",
        "400304c0000201",
        "18c00002"
    );
    let r = run(&["decode", "--hex", msg, "--as-width", "4"], b"");
    assert_eq!(r.code, 1, "{:?}", r.lines);
    assert_eq!(r.lines.len(), 1);
    assert_eq!(r.lines[0]["type"], "UPDATE");
    assert_eq!(r.lines[0]["nlri"], serde_json::json!(["192.0.2.0/24"]));
    assert_eq!(r.lines[0]["errors"][0]["reaction"], "treat-as-withdraw");
    assert_eq!(r.lines[0]["errors"][0]["attr_type"], 1);
}

#[test]
fn stdin_carries_raw_messages() {
    // OPEN: AS 65000, hold 90, id 192.0.2.1, capability 4-octet AS 65000.
    let mut input =
        hex("ffffffffffffffffffffffffffffffff002501045a5a005ac000020108020641040000fde8");
    input.extend(hex(KEEPALIVE));
    input.extend(&hex(KEEPALIVE)[..10]);
    let r = run(&["decode", "-"], &input);
    assert_eq!(r.code, 1, "a truncated last message is malformed");
    let types: Vec<_> = r
        .lines
        .iter()
        .map(|l| l["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(types, ["OPEN", "KEEPALIVE", "TRUNCATED"]);
    assert_eq!(r.lines[0]["asn"], 65000);
    assert_eq!(r.lines[0]["hold_time"], 90);
    assert_eq!(r.lines[0]["capabilities"][0]["name"], "four_octet_as");
    assert_eq!(r.lines[2]["length"], 10);
}

#[test]
fn generated_gzip_mrt_file() {
    // A BGP4MP_ET MESSAGE_AS4 record holding a KEEPALIVE, gzip-compressed.
    let mut record = hex("5e0b8d00" /* timestamp */);
    record.extend(hex("001100040000002b")); // type 17, subtype 4, length 43
    record.extend(hex("0001e240")); // 123456 microseconds
    record.extend(hex("0000fde80000fde900000001c0000201c0000202"));
    record.extend(hex(KEEPALIVE));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&record).unwrap();
    let path =
        std::env::temp_dir().join(format!("podcidr-decode-cli-{}.mrt.gz", std::process::id()));
    std::fs::write(&path, gz.finish().unwrap()).unwrap();
    let r = run(&["decode", "--mrt", path.to_str().unwrap()], b"");
    std::fs::remove_file(&path).unwrap();
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.lines,
        vec![serde_json::json!({
            "type": "KEEPALIVE", "timestamp": 1577815296u32, "microseconds": 123456,
            "peer_ip": "192.0.2.1", "peer_as": 65000, "local_ip": "192.0.2.2", "local_as": 65001,
            "interface": 0, "direction": "received", "length": 19
        })]
    );
}

#[test]
fn usage_and_io_errors_exit_2() {
    let none = run(&["decode"], b"");
    assert_eq!(none.code, 2);
    assert!(none.lines.is_empty());
    let two = run(&["decode", "--hex", KEEPALIVE, "-"], b"");
    assert_eq!(two.code, 2);
    let bad_hex = run(&["decode", "--hex", "fz"], b"");
    assert_eq!(bad_hex.code, 2);
    assert!(bad_hex.stderr.contains("invalid hex"), "{}", bad_hex.stderr);
    let missing = run(&["decode", "--mrt", "/nonexistent/podcidr.mrt"], b"");
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("/nonexistent/podcidr.mrt"),
        "{}",
        missing.stderr
    );
    let not_pcap = run(&["decode", "--pcap", BIN], b"");
    assert_eq!(not_pcap.code, 2);
    assert!(
        not_pcap.stderr.contains("not a pcap"),
        "{}",
        not_pcap.stderr
    );
}

#[test]
fn real_mrt_and_pcap_files() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let mrt = dir.join("mrt/updates/bgpkit-examples-updates.bz2");
    let r = run(&["decode", "--mrt", mrt.to_str().unwrap()], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.lines.len(), 85);
    assert!(r
        .lines
        .iter()
        .all(|l| l["type"] == "UPDATE" && l["peer_as"].is_u64() && l["microseconds"].is_u64()));
    let announced: usize = r
        .lines
        .iter()
        .map(|l| {
            let mp: usize = l["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["type"] == "MP_REACH_NLRI")
                .map(|a| a["value"]["nlri"].as_array().unwrap().len())
                .sum();
            l["nlri"].as_array().unwrap().len() + mp
        })
        .sum();
    assert_eq!(announced, 159, "SOURCES.md: 69 IPv4 + 90 MP_REACH");

    let bad = dir.join("mrt/edge-cases/bgpdump-updates.nlri_mask_trailing_bits.gz");
    let r = run(&["decode", "--mrt", bad.to_str().unwrap()], b"");
    assert_eq!(r.code, 1);
    assert_eq!(r.lines[0]["notification"]["code"], 3);
    assert_eq!(r.lines[0]["notification"]["subcode"], 10);

    let pcap = dir.join("pcap/packetlife/BGP_AS_set.cap");
    let r = run(&["decode", "--pcap", pcap.to_str().unwrap()], b"");
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.lines.len(), 10);
    let update = r.lines.iter().find(|l| l["type"] == "UPDATE").unwrap();
    let as_path = update["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["type"] == "AS_PATH")
        .unwrap();
    let kinds: Vec<_> = as_path["value"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].clone())
        .collect();
    assert_eq!(kinds, ["AS_SEQUENCE", "AS_SET"]);
    assert!(
        update["src"].as_str().unwrap().ends_with(":179")
            || update["dst"].as_str().unwrap().ends_with(":179")
    );
    assert!(update["frame"].is_u64());

    let oobr = dir.join("pcap/tcpdump-tests/bgp-as-path-oobr.pcap");
    let r = run(&["decode", "--pcap", oobr.to_str().unwrap()], b"");
    assert_eq!(r.code, 1);
    assert!(r.lines.iter().any(|l| l["notification"]["code"] == 3));
}

#[test]
fn a_closed_pipe_ends_the_run_early() {
    let Some(dir) = common::data_dir() else {
        return;
    };
    let big = dir.join("mrt/large/bgpdump-updates.et-header.2015.gz");
    let mut child = Command::new(BIN)
        .args(["decode", "--mrt", big.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    out.read_exact(&mut first).unwrap();
    assert!(
        first.starts_with(b"{\"type\":\"STATE_CHANGE\""),
        "{}",
        String::from_utf8_lossy(&first)
    );
    drop(out);
    assert_eq!(wait(&mut child), 0);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
