//! The data sweep: every MRT file and every packet capture under the shared BGP data
//! directory goes through the `decode` readers and the codec. Each must finish without
//! a panic or a hang; the test prints, per file, the messages by type and the errors
//! by kind, and checks the totals SOURCES.md gives for the files it counted.

// A test crate: a failed unwrap is a failed test (clippy.toml covers #[test] fns only),
// and its harness may call libc (signals, process groups, raw sockets): the rules of
// Cargo.toml's [lints] are for src/.
#![allow(clippy::unwrap_used, clippy::expect_used, unsafe_code)]

mod common;

use common::{data_dir, Tally};
use podcidr_speaker::decode::event::Event;
use podcidr_speaker::decode::source::{self, Options};
use podcidr_speaker::decode::{flows, input, packet};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest a single file may take (the largest is ~20 MB of MRT).
const PER_FILE: Duration = Duration::from_secs(300);

/// Files that are damaged or malformed on purpose (SOURCES.md says why for each): they
/// must report at least one error. Every other file must decode without any.
const MALFORMED: &[&str] = &[
    // NLRI with a dangling prefix length: 3/10, session reset (RFC 7606 section 5.3).
    "mrt/edge-cases/bgpdump-updates.nlri_mask_trailing_bits.gz",
    // Batched TABLE_DUMP entries with a wrong record length: the framing is lost.
    "mrt/edge-cases/bgpkit-ris-rrc00-bview.20000111.0032.gz",
    // Two damaged record boundaries.
    "mrt/edge-cases/bgpkit-ris-rrc00-updates.20000325.0345.gz",
    // OpenBGPD writes a 4-octet AGGREGATOR beside 2-octet AS_PATHs in TABLE_DUMP.
    "mrt/implementations/mrtparse-openbgpd_rib_table",
    // Captures that end inside a message.
    "pcap/netgauze/pmacct-301-BGP-CISCO-pretag-traffic-00.pcap",
    "pcap/netgauze/pmacct-302-BGP-IPv6-multiple-sources-traffic-00.pcap",
    "pcap/netgauze/pmacct-302-BGP-IPv6-multiple-sources-traffic-01.pcap",
    // Malformed OPENs.
    "pcap/pcapplusplus/Bgp_open_malformed.pcap",
    "pcap/pcapplusplus/Bgp_open_malformed_opt_param_len.dat",
    "pcap/pcapplusplus/Bgp_open_partial_valid_opt_params.dat",
    "pcap/pcapplusplus/Bgp_open_too_short_header.dat",
    "pcap/pcapplusplus/Bgp_open_truncated_opt_param_hdr.dat",
    // ADD-PATH NLRI with no OPEN in the capture: 3/10 read without ADD-PATH, and with it
    // MP_REACH_NLRI sent with well-known flags: 3/4.
    "pcap/tcpdump-tests/bgp-addpath.pcap",
    // Fuzzer-found crashers and undefined-behaviour repros.
    "pcap/tcpdump-tests/bgp-aigp-oobr.pcap",
    "pcap/tcpdump-tests/bgp-as-path-oobr.pcap",
    "pcap/tcpdump-tests/bgp-bgp_capabilities_print-oobr-1.pcap",
    "pcap/tcpdump-tests/bgp-bgp_capabilities_print-oobr-2.pcap",
    "pcap/tcpdump-tests/bgp-infinite-loop.pcap",
    "pcap/tcpdump-tests/bgp-ub.pcap",
    "pcap/tcpdump-tests/bgp_mp_reach_nlri-oobr.pcap",
    "pcap/tcpdump-tests/bgp_mvpn_6_and_7_oobr.pcap",
    "pcap/tcpdump-tests/bgp_pmsi_tunnel-oobr.pcap",
    "pcap/tcpdump-tests/bgp_vpn_rt-oobr.pcap",
    // BGPsec UPDATEs carry BGPsec_PATH instead of AS_PATH (RFC 8205 section 3), which a
    // speaker that does not do BGPsec sees as a missing AS_PATH (treat-as-withdraw).
    "pcap/tcpdump-tests/bgp-bgpsec.pcap",
    "pcap/tcpdump-tests/bgpsec_invalid_signature_block_length.pcap",
];

/// Message counts by type, and prefixes announced (IPv4 NLRI, MP_REACH_NLRI) and
/// withdrawn (Withdrawn Routes, MP_UNREACH_NLRI), as SOURCES.md counts them.
struct Counted {
    file: &'static str,
    messages: &'static [(&'static str, u64)],
    /// (announced IPv4, announced MP, withdrawn IPv4, withdrawn MP).
    prefixes: (u64, u64, u64, u64),
}

const O: &str = "OPEN";
const U: &str = "UPDATE";
const N: &str = "NOTIFICATION";
const K: &str = "KEEPALIVE";
const R: &str = "ROUTE_REFRESH";

/// SOURCES.md "Counted:" lines of the MRT update files, and the pcap "counted" column
/// of every capture that has one. Where this decoder counts differently from the
/// survey's walker, the comment gives SOURCES.md's figure and says why. Prefixes of
/// families other than IPv4/IPv6 unicast (VPN, labeled unicast, FlowSpec, EVPN: the
/// "AFI/SAFI" column) are not counted, as in SOURCES.md.
#[rustfmt::skip]
const COUNTED: &[Counted] = &[
    Counted { file: "mrt/large/bgpdump-updates.et-header.2015.gz", messages: &[(O, 1), (K, 2), (U, 89679)], prefixes: (577737, 0, 3, 0) },
    Counted { file: "mrt/large/bgp-rs-updates.20190101.0000.gz", messages: &[(U, 54107), (K, 364)], prefixes: (150389, 9559, 2173, 453) },
    Counted { file: "mrt/updates/bgpdump-updates.20020722.2238.gz", messages: &[(K, 615), (U, 393), (O, 13), (N, 7)], prefixes: (825, 0, 2419, 0) },
    Counted { file: "mrt/updates/bgpdump-updates.20070211.0141.gz", messages: &[(U, 23394)], prefixes: (46816, 4513, 1920, 408) },
    Counted { file: "mrt/updates/bgpdump-updates.20071015.1505.gz", messages: &[(U, 4222), (K, 75)], prefixes: (10064, 47, 385, 0) },
    Counted { file: "mrt/updates/bgpdump-updates.20100722.2015.gz", messages: &[(U, 1822), (K, 331)], prefixes: (5037, 30, 539, 8) },
    Counted { file: "mrt/updates/bgpdump-updates.20160811.1600.gz", messages: &[(U, 17216), (K, 168)], prefixes: (32710, 6546, 1616, 340) },
    Counted { file: "mrt/updates/bgpkit-examples-updates.bz2", messages: &[(U, 85)], prefixes: (69, 90, 34, 75) },
    Counted { file: "mrt/updates/bgpkit-ris-rrc03-updates.20100227.1600.first-796-records.gz", messages: &[(K, 23), (U, 768), (N, 1)], prefixes: (1189, 37, 127, 6) },
    Counted { file: "mrt/updates/bgpkit-ris-rrc15-updates.20100227.1600.gz", messages: &[(U, 6546), (K, 47), (O, 1), (N, 1)], prefixes: (52468, 0, 1318, 0) },
    Counted { file: "mrt/updates/bgpkit-ris-rrc15-updates.20100227.1610.gz", messages: &[(U, 1888), (O, 1), (K, 47), (N, 1)], prefixes: (5920, 0, 1549, 0) },
    Counted { file: "mrt/updates/libbgpstream-ris.rrc06.updates.1427846400.gz", messages: &[(K, 30), (U, 761)], prefixes: (1160, 275, 106, 16) },
    Counted { file: "mrt/updates/libbgpstream-routeviews.route-views.jinx.updates.1427846400.bz2", messages: &[(U, 1756)], prefixes: (8149, 11, 440, 11) },
    Counted { file: "mrt/edge-cases/bgpdump-updates.long_withdrawal.gz", messages: &[(U, 1)], prefixes: (0, 0, 0, 4096) },
    // The survey found 9 OPENs and 21 "messages shorter than a header": those are the
    // OPENs of Zebra records written without interface and addresses, read here.
    Counted { file: "mrt/edge-cases/bgpkit-ris-rrc01-updates.20001104.0124.gz", messages: &[(K, 618), (O, 9 + 21), (U, 266), (N, 8)], prefixes: (378, 0, 141, 0) },
    // Deprecated type-5 records: the survey counted records by subtype.
    Counted { file: "mrt/edge-cases/bgpkit-ris-rrc00-updates.19990903.1041.gz", messages: &[(U, 24216), (O, 1), (K, 21)], prefixes: (65286, 0, 25, 0) },
    Counted { file: "mrt/edge-cases/bgpkit-ris-rrc00-updates.19991214.1621.gz", messages: &[(U, 18054), (O, 1), (N, 1), (K, 120)], prefixes: (54126, 0, 1363, 0) },
    Counted { file: "mrt/edge-cases/bgpkit-ris-rrc00-updates.20000102.2014.gz", messages: &[(U, 3818), (K, 123)], prefixes: (5668, 0, 675, 0) },
    Counted { file: "mrt/implementations/mrtparse-bird-mrtdump_bgp", messages: &[(O, 2), (K, 5), (U, 6), (R, 1), (N, 1)], prefixes: (12, 0, 0, 0) },
    Counted { file: "mrt/implementations/mrtparse-bird6-mrtdump_bgp", messages: &[(O, 2), (K, 5), (U, 6), (R, 1), (N, 1)], prefixes: (0, 12, 0, 0) },
    Counted { file: "mrt/implementations/mrtparse-openbgpd_bgp", messages: &[(O, 4), (K, 13), (U, 48), (R, 4), (N, 2)], prefixes: (33, 60, 0, 0) },
    Counted { file: "mrt/implementations/mrtparse-quagga_bgp", messages: &[(O, 4), (K, 10), (U, 24), (R, 7), (N, 2)], prefixes: (6, 12, 0, 0) },
    // Pre-RFC 8050 BIRD: ADD-PATH NLRI in plain MESSAGE_AS4 records. The survey's
    // walker read path identifiers as prefixes (24 and 32, with anomalies); with
    // ADD-PATH tried these are 14 real prefixes each.
    Counted { file: "mrt/implementations/mrtparse-bird_bgp", messages: &[(O, 2), (K, 5), (U, 8), (R, 1), (N, 1)], prefixes: (14, 0, 0, 0) },
    Counted { file: "mrt/implementations/mrtparse-bird6_bgp", messages: &[(O, 2), (K, 5), (U, 8), (R, 1), (N, 1)], prefixes: (0, 14, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-4byte-asn.pcap", messages: &[(O, 8), (K, 16), (U, 10), (N, 1)], prefixes: (35, 0, 15, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-cease-hard-reset.pcap", messages: &[(O, 2), (N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-enhanced-route-refresh-subtype.pcapng", messages: &[(R, 3), (U, 5)], prefixes: (12, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-large-community.pcap", messages: &[(U, 5)], prefixes: (5, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-link-bw-extcommunity.pcapng", messages: &[(U, 6)], prefixes: (7, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-lu-multiple-labels.pcap", messages: &[(O, 4), (K, 8), (U, 7), (N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-ovs.pcapng", messages: &[(U, 4)], prefixes: (4, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-role.pcapng", messages: &[(O, 1), (U, 9), (K, 2)], prefixes: (11, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-rt-prefix.pcap", messages: &[(U, 8)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-shutdown-communication.pcapng", messages: &[(N, 2)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-shutdown-msg-variations.pcap", messages: &[(N, 3)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-bfd-cease.pcap", messages: &[(N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/mpbgp-linklocal-nexthop.pcap", messages: &[(U, 1)], prefixes: (0, 1, 0, 0) },
    Counted { file: "pcap/packetlife/4-byte_AS_numbers_Full_Support.cap", messages: &[(K, 5), (O, 2), (U, 9)], prefixes: (7, 0, 0, 0) },
    Counted { file: "pcap/packetlife/4-byte_AS_numbers_Mixed_Scenario.cap", messages: &[(K, 2), (U, 2)], prefixes: (2, 0, 0, 0) },
    Counted { file: "pcap/packetlife/BGP_AS_set.cap", messages: &[(K, 7), (O, 2), (U, 1)], prefixes: (1, 0, 0, 0) },
    Counted { file: "pcap/packetlife/BGP_MD5.cap", messages: &[(O, 2), (K, 8)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/packetlife/BGP_MP_NLRI.cap", messages: &[(O, 4), (K, 16), (U, 4)], prefixes: (6, 6, 0, 0) },
    Counted { file: "pcap/packetlife/BGP_hard_reset.cap", messages: &[(K, 12), (O, 2), (U, 12)], prefixes: (26, 0, 0, 0) },
    Counted { file: "pcap/packetlife/BGP_notification.cap", messages: &[(O, 1), (N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/packetlife/BGP_soft_reset.cap", messages: &[(K, 8), (U, 12), (R, 1)], prefixes: (26, 0, 0, 0) },
    Counted { file: "pcap/packetlife/EBGP_adjacency.cap", messages: &[(O, 2), (K, 12), (U, 12)], prefixes: (26, 0, 0, 0) },
    Counted { file: "pcap/packetlife/IBGP_adjacency.cap", messages: &[(O, 2), (K, 8), (U, 14)], prefixes: (26, 0, 2, 0) },
    // The survey's walker ignored the ADD-PATH negotiated by the two OPENs and read
    // path identifiers as prefixes (20, with an anomaly); there are 4.
    Counted { file: "pcap/packetlife/bgp-add-path.cap", messages: &[(O, 2), (K, 4), (U, 4), (R, 2)], prefixes: (4, 0, 0, 0) },
    Counted { file: "pcap/packetlife/bgp_as_confed_sequence.pcapng.cap", messages: &[(U, 3)], prefixes: (3, 0, 0, 0) },
    Counted { file: "pcap/packetlife/bgp_med.pcapng.cap", messages: &[(U, 2)], prefixes: (3, 0, 0, 0) },
    Counted { file: "pcap/packetlife/bgplu.cap", messages: &[(O, 2), (K, 3), (U, 4)], prefixes: (1, 0, 0, 0) },
    Counted { file: "pcap/packetlife/no-advertise_community.pcapng.cap", messages: &[(R, 1), (U, 1)], prefixes: (1, 0, 0, 0) },
    Counted { file: "pcap/bgp-rs/BGP_flowspec_redirect.cap", messages: &[(O, 2), (K, 4), (U, 6)], prefixes: (0, 2, 0, 0) },
    Counted { file: "pcap/bgp-rs/BGP_flowspec_v6.cap", messages: &[(O, 1), (K, 1), (U, 2)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/bgp-rs/BGP_notification_msg.cap", messages: &[(O, 2), (N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/bgp-rs/bgp_withdraw.cap", messages: &[(U, 2)], prefixes: (0, 0, 1, 1) },
    Counted { file: "pcap/netgauze/bgp-multiple-sessions.pcap", messages: &[(K, 171), (O, 20), (U, 100)], prefixes: (68, 60, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-300-BGP-IPv6-CISCO-extNH_enc-traffic-00.pcap", messages: &[(O, 1), (K, 1), (U, 45)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-302-BGP-IPv6-multiple-sources-traffic-02.pcap", messages: &[(O, 1), (K, 1), (U, 8)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-303-BGP-high-availability-traffic-00.pcap", messages: &[(O, 1), (K, 1), (U, 45)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-305-BGP-mem-leak-test-bgp-multi-sources-open.pcap", messages: &[(O, 8)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-305-BGP-mem-leak-test-bgp-multi-sources-update-keepalive.pcap", messages: &[(K, 32), (U, 416)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-500-IPFIXv10-BGP-CISCO-SRv6-traffic-00.pcap", messages: &[(O, 1), (K, 1), (U, 6)], prefixes: (1, 0, 0, 0) },
    Counted { file: "pcap/pcapplusplus/BgpPackets.pcap", messages: &[(O, 2), (R, 1), (U, 6), (K, 1), (N, 2)], prefixes: (6, 0, 5, 0) },
    // Captures of one message each (the tcpdump feature tests).
    Counted { file: "pcap/tcpdump-tests/bgp-aigp-2.pcap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-aigp.pcap", messages: &[(U, 2)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-encap.pcap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-enhanced-route-refresh.pcapng", messages: &[(O, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-evpn.pcap", messages: &[(O, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-extended-msg.pcapng", messages: &[(O, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-extended-optional-parameters-length.pcapng", messages: &[(O, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-extended-shutdown-msg.pcapng", messages: &[(N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-malformed-hard-reset.pcap", messages: &[(N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-orf.pcapng", messages: &[(R, 2)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp_notification_rr_msg_error.pcap", messages: &[(N, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp_vpn_attrset.pcap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/packetlife/bgp_orf_capabilty_negotitation.pcapng.cap", messages: &[(O, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/packetlife/bgp_orf_prefix_advertisement.pcapng.cap", messages: &[(K, 1), (R, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/bgp-rs/BGP_flowspec_dscp.cap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/bgp-rs/BGP_flowspec_v4.cap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    // Two frames, two TCP streams (2.2.2.2 to 4.4.4.4 and to 5.5.5.5) carrying the same
    // UPDATE. The survey counted 1: the first frame is Cisco HDLC with ethertype 0x8847
    // (one MPLS label before the IPv4 header), which its dpkt walker does not decode.
    Counted { file: "pcap/packetlife/BGP_redist.cap", messages: &[(U, 1 + 1)], prefixes: (0, 0, 0, 0) },
    // pmacct captures (VPNv4/VPNv6 only: no unicast prefixes). The three truncated ones
    // are in MALFORMED: the partial last message is an error, not a message.
    Counted { file: "pcap/netgauze/pmacct-301-BGP-CISCO-pretag-traffic-00.pcap", messages: &[(O, 1), (K, 1), (U, 20)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-302-BGP-IPv6-multiple-sources-traffic-00.pcap", messages: &[(O, 1), (K, 1), (U, 24)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-302-BGP-IPv6-multiple-sources-traffic-01.pcap", messages: &[(O, 1), (K, 1), (U, 26)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-302-BGP-IPv6-multiple-sources-traffic-03.pcap", messages: &[(O, 1), (K, 1), (U, 8)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-501-IPFIXv10-BGP-IPv6-CISCO-MPLS-traffic-00.pcap", messages: &[(O, 1), (K, 1), (U, 28)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/netgauze/pmacct-502-IPFIXv10-BGP-IPv6-CISCO-SRv6-lcomms-traffic-00.pcap", messages: &[(O, 1), (K, 1), (U, 28)], prefixes: (0, 0, 0, 0) },
    // The malformed files. Message counts include the malformed messages. Prefixes are
    // those of UPDATEs that decoded (possibly with RFC 7606 treat-as-withdraw): an UPDATE
    // with a session-reset error (3/1, 3/10...) yields none, because no receiver may act
    // on any part of it. The survey's walker counted the prefixes it read before the bad
    // field; where that gives a different figure, SOURCES.md's is in the comment.
    // BGPsec_PATH instead of AS_PATH: treat-as-withdraw, the MP_REACH prefixes counted.
    Counted { file: "pcap/tcpdump-tests/bgp-bgpsec.pcap", messages: &[(O, 4), (K, 4), (U, 24)], prefixes: (0, 20, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgpsec_invalid_signature_block_length.pcap", messages: &[(U, 1)], prefixes: (0, 2, 0, 0) },
    // SOURCES.md: announced 1 (11.13.0.0/13, read before the dangling length octet).
    Counted { file: "mrt/edge-cases/bgpdump-updates.nlri_mask_trailing_bits.gz", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    // SOURCES.md: announced 40 / withdrawn 23, path identifiers read as prefixes (its
    // anomalies say so). tcpdump's decode shows 2 + 4 announced and 2 + 4 withdrawn, but
    // the message is malformed either way: 3/10 without ADD-PATH, 3/4 (MP_REACH_NLRI
    // with well-known flags) with it.
    Counted { file: "pcap/tcpdump-tests/bgp-addpath.pcap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    // SOURCES.md: withdrawn 1 (withdrawn_bad).
    Counted { file: "pcap/tcpdump-tests/bgp-as-path-oobr.pcap", messages: &[(U, 334)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-aigp-oobr.pcap", messages: &[(U, 449)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-bgp_capabilities_print-oobr-1.pcap", messages: &[(O, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp-bgp_capabilities_print-oobr-2.pcap", messages: &[(O, 1)], prefixes: (0, 0, 0, 0) },
    // SOURCES.md: announced 4 / withdrawn 2, the difference read from the UPDATEs its
    // walker flagged nlri_bad / withdrawn_bad, which fail here with 3/10 or 3/1.
    Counted { file: "pcap/tcpdump-tests/bgp-ub.pcap", messages: &[(U, 22)], prefixes: (2, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp_mp_reach_nlri-oobr.pcap", messages: &[(U, 6)], prefixes: (0, 0, 0, 0) },
    // SOURCES.md: withdrawn 1, 1 and 3 (each from an UPDATE that fails with 3/1).
    Counted { file: "pcap/tcpdump-tests/bgp_mvpn_6_and_7_oobr.pcap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp_pmsi_tunnel-oobr.pcap", messages: &[(U, 1)], prefixes: (0, 0, 0, 0) },
    Counted { file: "pcap/tcpdump-tests/bgp_vpn_rt-oobr.pcap", messages: &[(U, 3)], prefixes: (0, 0, 0, 0) },
    // The 4 UPDATE headers of length 19 are header errors (1/2), counted in HEADER_ERRORS.
    Counted { file: "pcap/tcpdump-tests/bgp-infinite-loop.pcap", messages: &[], prefixes: (0, 0, 0, 0) },
    // SOURCES.md: OPEN 4; the fourth, 25 octets long, is a header error (1/2), counted
    // in HEADER_ERRORS.
    Counted { file: "pcap/pcapplusplus/Bgp_open_malformed.pcap", messages: &[(O, 3)], prefixes: (0, 0, 0, 0) },
    // SOURCES.md counts the type-5 records: 4 UPDATE and 1 KEEPALIVE before the damage
    // (no prefix counts given; these are ours).
    Counted { file: "mrt/edge-cases/bgpkit-ris-rrc00-updates.20000325.0345.gz", messages: &[(U, 4), (K, 1)], prefixes: (2, 0, 2, 0) },
    // Deprecated BGP4MP_ENTRY records: SOURCES.md's "type168 11, type0 20" are its
    // walker reading them as messages (bad_marker 31). They hold no BGP message.
    Counted { file: "mrt/implementations/mrtparse-openbgpd_rib_table-mp", messages: &[], prefixes: (0, 0, 0, 0) },
];

/// Messages SOURCES.md counts whose header this decoder rejects with 1/2 Bad Message
/// Length (RFC 4271 section 6.1: shorter than the minimum for the type), so that they
/// are errors here, not messages: (file, how many).
const HEADER_ERRORS: &[(&str, u64)] = &[
    // 4 UPDATEs whose header says 19 octets, below the 23 of an empty UPDATE.
    ("pcap/tcpdump-tests/bgp-infinite-loop.pcap", 4),
    // An OPEN of 25 octets, below the 29-octet minimum.
    ("pcap/pcapplusplus/Bgp_open_malformed.pcap", 1),
];

/// RIB dumps: (entries, distinct prefixes), as SOURCES.md counts them.
const RIBS: &[(&str, u64, usize)] = &[
    ("mrt/large/bgpdump-bview.20020722.2337.gz", 115521, 112988),
    (
        "mrt/rib-small/bgpdump-bview.ipv4_unicast_add_path.gz",
        62,
        31,
    ),
    (
        "mrt/rib-small/bgpdump-bview.ipv6_unicast_add_path.gz",
        62,
        31,
    ),
    ("mrt/edge-cases/bgpdump-bview.64k_stream_overflow.gz", 23, 1),
    ("mrt/implementations/mrtparse-bird-mrtdump_rib", 18, 6),
    ("mrt/implementations/mrtparse-bird6-mrtdump_rib", 10, 5),
    ("mrt/implementations/mrtparse-openbgpd_rib_table", 31, 21),
    // Plus the two RIB_GENERIC (VPNv4) records, one entry each, the survey skipped.
    (
        "mrt/implementations/mrtparse-openbgpd_rib_table-v2",
        31 + 2,
        21 + 2,
    ),
    ("mrt/implementations/mrtparse-quagga_rib", 9, 6),
    // SOURCES.md: 6 entries / 6 prefixes, read by its walker out of the first record's
    // batched bytes (5 of them with an attribute overrun). A TABLE_DUMP record holds one
    // entry (RFC 6396 section 4.2) and this one declares a length 4 octets short, so this
    // decoder reads one entry and then reports the lost framing.
    (
        "mrt/edge-cases/bgpkit-ris-rrc00-bview.20000111.0032.gz",
        1,
        1,
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Format {
    Mrt,
    Pcap,
    /// PcapPlusPlus `.dat`: one Ethernet frame as a hex string.
    HexFrame,
}

fn files(dir: &Path) -> Vec<(PathBuf, Format)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let format = if rel.starts_with("mrt/") && !rel.starts_with("mrt/bgpdump-expected/") {
                Format::Mrt
            } else if rel.starts_with("pcap/")
                && (name.ends_with(".pcap") || name.ends_with(".cap") || name.ends_with(".pcapng"))
            {
                Format::Pcap
            } else if rel.starts_with("pcap/") && name.ends_with(".dat") {
                Format::HexFrame
            } else {
                continue;
            };
            out.push((path, format));
        }
    }
    out.sort();
    out
}

fn sweep_file(path: &Path, format: Format) -> Tally {
    let mut tally = Tally::default();
    let mut sink = |e: Event| tally.add(&e);
    let options = Options::default();
    match format {
        Format::Mrt => source::mrt(input::open(path).unwrap(), &mut sink),
        Format::Pcap => flows::pcap(input::open(path).unwrap(), &options, &mut sink).unwrap(),
        Format::HexFrame => {
            let text = std::fs::read_to_string(path).unwrap();
            let frame = source::parse_hex(&text).unwrap();
            let segment = packet::tcp_segment(packet::linktype::ETHERNET, &frame).unwrap();
            source::stream(segment.payload, &options, &mut sink).unwrap();
        }
    }
    tally
}

#[test]
fn every_mrt_and_pcap_file_decodes_without_panic() {
    let Some(dir) = data_dir() else { return };
    let files = files(&dir);
    assert!(
        files.len() > 100,
        "expected the whole data set, found {} files",
        files.len()
    );
    let mut totals = Tally::default();
    let mut failures = Vec::new();
    let mut checked = 0;
    for (path, format) in files {
        let rel = path
            .strip_prefix(&dir)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let started = Instant::now();
        let (tx, rx) = mpsc::channel();
        let worker_path = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(std::panic::catch_unwind(|| {
                sweep_file(&worker_path, format)
            }));
        });
        let tally = match rx.recv_timeout(PER_FILE) {
            Ok(Ok(tally)) => tally,
            Ok(Err(_)) => panic!("{rel}: the decoder panicked"),
            Err(_) => panic!("{rel}: not finished after {PER_FILE:?}"),
        };
        println!(
            "{rel}: {:?} messages {:?} errors {:?} other {:?}; announced {} ({} + MP {}), withdrawn {} ({} + MP {}); RIB {} entries {} prefixes; {} ms",
            format,
            tally.messages,
            tally.errors,
            tally.events,
            tally.announced(),
            tally.announced_ipv4,
            tally.announced_mp,
            tally.withdrawn(),
            tally.withdrawn_ipv4,
            tally.withdrawn_mp,
            tally.rib_entries,
            tally.rib_prefixes.len(),
            started.elapsed().as_millis()
        );

        let malformed = MALFORMED.contains(&rel.as_str());
        if malformed && tally.error_total() == 0 {
            failures.push(format!(
                "{rel}: malformed on purpose, but no error was reported"
            ));
        }
        if !malformed && tally.error_total() != 0 {
            failures.push(format!("{rel}: errors {:?}", tally.errors));
        }
        if let Some(c) = COUNTED.iter().find(|c| c.file == rel) {
            checked += 1;
            for (kind, n) in c.messages {
                if tally.message_count(kind) != *n {
                    failures.push(format!(
                        "{rel}: {kind} {} != {n}",
                        tally.message_count(kind)
                    ));
                }
            }
            let listed: u64 = c.messages.iter().map(|(_, n)| n).sum();
            let seen: u64 = tally.messages.values().sum();
            if listed != seen {
                failures.push(format!(
                    "{rel}: {seen} messages, {listed} expected: {:?}",
                    tally.messages
                ));
            }
            let got = (
                tally.announced_ipv4,
                tally.announced_mp,
                tally.withdrawn_ipv4,
                tally.withdrawn_mp,
            );
            if got != c.prefixes {
                failures.push(format!("{rel}: prefixes {got:?} != {:?}", c.prefixes));
            }
        }
        if let Some((_, n)) = HEADER_ERRORS.iter().find(|(f, _)| *f == rel) {
            checked += 1;
            let seen: u64 = tally
                .errors
                .iter()
                .filter(|(k, _)| k.starts_with("header 1/2 "))
                .map(|(_, v)| v)
                .sum();
            if seen != *n {
                failures.push(format!("{rel}: {seen} headers with 1/2, {n} expected"));
            }
        }
        if let Some((_, entries, prefixes)) = RIBS.iter().find(|(f, _, _)| *f == rel) {
            checked += 1;
            if (tally.rib_entries, tally.rib_prefixes.len()) != (*entries, *prefixes) {
                failures.push(format!(
                    "{rel}: RIB {} entries / {} prefixes != {entries} / {prefixes}",
                    tally.rib_entries,
                    tally.rib_prefixes.len()
                ));
            }
        }
        for (k, v) in &tally.messages {
            *totals.messages.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &tally.errors {
            *totals.errors.entry(k.clone()).or_default() += v;
        }
    }
    println!("ALL messages by type: {:?}", totals.messages);
    println!("ALL errors by kind:");
    for (k, v) in &totals.errors {
        println!("  {v:>7}  {k}");
    }
    assert_eq!(
        checked,
        COUNTED.len() + RIBS.len() + HEADER_ERRORS.len(),
        "a counted file is missing from the data directory"
    );
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
