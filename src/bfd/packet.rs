//! The BFD control packet (RFC 5880 section 4.1): the mandatory 24 octets <-> [`Packet`],
//! with the reception checks of section 6.8.6 that need no session. Decoding never
//! panics: every input is either a `Packet` or a [`PacketError`] with a bounded reason.
//! Must not decide what a packet does to a session: that is `session`'s job.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Vers |  Diag   |Sta|P|F|C|A|D|M|  Detect Mult  |    Length     |
//! |                       My Discriminator                        |
//! |                      Your Discriminator                       |
//! |                    Desired Min TX Interval                    |
//! |                   Required Min RX Interval                    |
//! |                 Required Min Echo RX Interval                 |
//! ```
//!
//! The optional authentication section that follows when A is set is not parsed
//! (authentication is not implemented): decode checks only that the Length leaves room
//! for it, and the session discards such a packet.

use std::fmt;

/// The protocol version this codec speaks (RFC 5880 section 4.1).
pub const VERSION: u8 = 1;

/// The mandatory section's length; also the length of every packet we send.
pub const LEN: usize = 24;

/// The least Length with the A bit set: the mandatory section plus Auth Type and Auth
/// Len (RFC 5880 section 6.8.6).
pub const LEN_WITH_AUTH: usize = 26;

const POLL: u8 = 0x20;
const FINAL: u8 = 0x10;
const CONTROL_PLANE_INDEPENDENT: u8 = 0x08;
const AUTH_PRESENT: u8 = 0x04;
const DEMAND: u8 = 0x02;
const MULTIPOINT: u8 = 0x01;

/// Session state (RFC 5880 section 4.1, "Sta"; section 6.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum State {
    AdminDown = 0,
    Down = 1,
    Init = 2,
    Up = 3,
}

impl State {
    /// The two-bit field's value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Every two-bit value is a state.
    pub fn from_code(code: u8) -> State {
        match code & 0x03 {
            0 => State::AdminDown,
            1 => State::Down,
            2 => State::Init,
            _ => State::Up,
        }
    }

    /// A lowercase name, bounded, fit for a metric label.
    pub fn name(self) -> &'static str {
        match self {
            State::AdminDown => "admin_down",
            State::Down => "down",
            State::Init => "init",
            State::Up => "up",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Diagnostic code (RFC 5880 section 4.1; IANA "BFD Diagnostic Codes"): why the sender's
/// session last changed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Diag {
    None,
    ControlDetectionTimeExpired,
    EchoFailed,
    NeighborSignaledDown,
    ForwardingPlaneReset,
    PathDown,
    ConcatenatedPathDown,
    AdministrativelyDown,
    ReverseConcatenatedPathDown,
    /// 9-31, reserved: kept as received.
    Unknown(u8),
}

impl Diag {
    /// The five-bit field's value (an `Unknown` above 31 keeps its low five bits).
    pub fn code(self) -> u8 {
        match self {
            Diag::None => 0,
            Diag::ControlDetectionTimeExpired => 1,
            Diag::EchoFailed => 2,
            Diag::NeighborSignaledDown => 3,
            Diag::ForwardingPlaneReset => 4,
            Diag::PathDown => 5,
            Diag::ConcatenatedPathDown => 6,
            Diag::AdministrativelyDown => 7,
            Diag::ReverseConcatenatedPathDown => 8,
            Diag::Unknown(c) => c & 0x1f,
        }
    }

    pub fn from_code(code: u8) -> Diag {
        match code & 0x1f {
            0 => Diag::None,
            1 => Diag::ControlDetectionTimeExpired,
            2 => Diag::EchoFailed,
            3 => Diag::NeighborSignaledDown,
            4 => Diag::ForwardingPlaneReset,
            5 => Diag::PathDown,
            6 => Diag::ConcatenatedPathDown,
            7 => Diag::AdministrativelyDown,
            8 => Diag::ReverseConcatenatedPathDown,
            c => Diag::Unknown(c),
        }
    }

    /// A lowercase name, bounded, fit for a metric label or a log field.
    pub fn name(self) -> &'static str {
        match self {
            Diag::None => "none",
            Diag::ControlDetectionTimeExpired => "control_detection_time_expired",
            Diag::EchoFailed => "echo_failed",
            Diag::NeighborSignaledDown => "neighbor_signaled_down",
            Diag::ForwardingPlaneReset => "forwarding_plane_reset",
            Diag::PathDown => "path_down",
            Diag::ConcatenatedPathDown => "concatenated_path_down",
            Diag::AdministrativelyDown => "administratively_down",
            Diag::ReverseConcatenatedPathDown => "reverse_concatenated_path_down",
            Diag::Unknown(_) => "unknown",
        }
    }
}

impl fmt::Display for Diag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Diag::Unknown(c) => write!(f, "unknown ({c})"),
            d => f.write_str(d.name()),
        }
    }
}

/// A BFD control packet's mandatory section (RFC 5880 section 4.1). Intervals are in
/// microseconds, as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Always [`VERSION`] in a decoded packet.
    pub version: u8,
    pub diag: Diag,
    pub state: State,
    pub poll: bool,
    pub final_: bool,
    pub control_plane_independent: bool,
    /// The A bit. A decoded packet with it set had room for an authentication section,
    /// which is not parsed; the session discards it.
    pub auth_present: bool,
    pub demand: bool,
    /// Always false in a decoded packet (section 6.8.6).
    pub multipoint: bool,
    pub detect_mult: u8,
    pub my_discr: u32,
    pub your_discr: u32,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub required_min_echo_rx_us: u32,
}

/// Why a received packet was discarded before any session saw it (RFC 5880 section
/// 6.8.6, the checks that need no session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PacketError {
    #[error("packet: {len} octets, expected at least {LEN}")]
    Short { len: usize },
    #[error("version: {0}, expected {VERSION}")]
    BadVersion(u8),
    #[error("length: {length}, expected at least {min} (A bit {auth})")]
    LengthTooSmall { length: u8, min: u8, auth: bool },
    #[error("length: {length}, more than the {payload} octets received")]
    LengthExceedsPayload { length: u8, payload: usize },
    #[error("detect mult: 0, expected at least 1")]
    ZeroDetectMult,
    #[error("multipoint (M) bit: set, expected clear")]
    Multipoint,
    #[error("my discriminator: 0, expected non-zero")]
    ZeroMyDiscriminator,
    #[error("your discriminator: 0 with state {0}, expected non-zero unless down or admin down")]
    ZeroYourDiscriminator(State),
}

impl PacketError {
    /// A lowercase name, bounded, fit for a metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            PacketError::Short { .. } => "short",
            PacketError::BadVersion(_) => "bad_version",
            PacketError::LengthTooSmall { .. } => "length_too_small",
            PacketError::LengthExceedsPayload { .. } => "length_exceeds_payload",
            PacketError::ZeroDetectMult => "zero_detect_mult",
            PacketError::Multipoint => "multipoint",
            PacketError::ZeroMyDiscriminator => "zero_my_discriminator",
            PacketError::ZeroYourDiscriminator(_) => "zero_your_discriminator",
        }
    }

    /// Every reason [`PacketError::reason`] can return, for metrics that list them.
    pub const REASONS: &'static [&'static str] = &[
        "short",
        "bad_version",
        "length_too_small",
        "length_exceeds_payload",
        "zero_detect_mult",
        "multipoint",
        "zero_my_discriminator",
        "zero_your_discriminator",
    ];
}

impl Packet {
    /// A version 1 packet with every flag clear and no Required Min Echo RX Interval:
    /// what a session sends before it sets P or F. Intervals in microseconds.
    pub fn new(
        state: State,
        diag: Diag,
        detect_mult: u8,
        my_discr: u32,
        your_discr: u32,
        desired_min_tx_us: u32,
        required_min_rx_us: u32,
    ) -> Packet {
        Packet {
            version: VERSION,
            diag,
            state,
            poll: false,
            final_: false,
            control_plane_independent: false,
            auth_present: false,
            demand: false,
            multipoint: false,
            detect_mult,
            my_discr,
            your_discr,
            desired_min_tx_us,
            required_min_rx_us,
            required_min_echo_rx_us: 0,
        }
    }

    /// Decode one UDP payload, `bytes`, applying RFC 5880 section 6.8.6's checks that
    /// need no session, in its order: version 1; Length at least 24 (26 with the A bit)
    /// and no more than the payload; Detect Mult non-zero; M clear; My Discriminator
    /// non-zero; Your Discriminator zero only in state Down or AdminDown. Octets past
    /// Length are ignored.
    pub fn decode(bytes: &[u8]) -> Result<Packet, PacketError> {
        let Some(b) = bytes.first_chunk::<LEN>() else {
            return Err(PacketError::Short { len: bytes.len() });
        };
        let version = b[0] >> 5;
        if version != VERSION {
            return Err(PacketError::BadVersion(version));
        }
        let flags = b[1];
        let auth_present = flags & AUTH_PRESENT != 0;
        let length = b[3];
        let min = if auth_present { LEN_WITH_AUTH } else { LEN };
        if usize::from(length) < min {
            return Err(PacketError::LengthTooSmall {
                length,
                // LEN_WITH_AUTH and LEN are below 256.
                min: min as u8,
                auth: auth_present,
            });
        }
        if usize::from(length) > bytes.len() {
            return Err(PacketError::LengthExceedsPayload {
                length,
                payload: bytes.len(),
            });
        }
        let detect_mult = b[2];
        if detect_mult == 0 {
            return Err(PacketError::ZeroDetectMult);
        }
        if flags & MULTIPOINT != 0 {
            return Err(PacketError::Multipoint);
        }
        let word = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let my_discr = word(4);
        if my_discr == 0 {
            return Err(PacketError::ZeroMyDiscriminator);
        }
        let state = State::from_code(flags >> 6);
        let your_discr = word(8);
        if your_discr == 0 && !matches!(state, State::Down | State::AdminDown) {
            return Err(PacketError::ZeroYourDiscriminator(state));
        }
        Ok(Packet {
            version,
            diag: Diag::from_code(b[0]),
            state,
            poll: flags & POLL != 0,
            final_: flags & FINAL != 0,
            control_plane_independent: flags & CONTROL_PLANE_INDEPENDENT != 0,
            auth_present,
            demand: flags & DEMAND != 0,
            multipoint: false,
            detect_mult,
            my_discr,
            your_discr,
            desired_min_tx_us: word(12),
            required_min_rx_us: word(16),
            required_min_echo_rx_us: word(20),
        })
    }

    /// The mandatory section with Length 24. Fields are written as they are (the
    /// version's low three bits, the diag's low five): the session never sets the A or
    /// M bits, and a packet with A set and no authentication section does not decode.
    pub fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[0] = (self.version & 0x07) << 5 | self.diag.code();
        let bit = |on: bool, mask: u8| if on { mask } else { 0 };
        b[1] = self.state.code() << 6
            | bit(self.poll, POLL)
            | bit(self.final_, FINAL)
            | bit(self.control_plane_independent, CONTROL_PLANE_INDEPENDENT)
            | bit(self.auth_present, AUTH_PRESENT)
            | bit(self.demand, DEMAND)
            | bit(self.multipoint, MULTIPOINT);
        b[2] = self.detect_mult;
        b[3] = LEN as u8;
        b[4..8].copy_from_slice(&self.my_discr.to_be_bytes());
        b[8..12].copy_from_slice(&self.your_discr.to_be_bytes());
        b[12..16].copy_from_slice(&self.desired_min_tx_us.to_be_bytes());
        b[16..20].copy_from_slice(&self.required_min_rx_us.to_be_bytes());
        b[20..24].copy_from_slice(&self.required_min_echo_rx_us.to_be_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An FRR bfdd packet in state Up, as RFC 5880 section 4.1 lays it out: version 1,
    /// diag 0, Up, detect mult 3, length 24, discriminators 1 and 2, 300 ms intervals,
    /// echo 50 ms.
    const UP: [u8; 24] = [
        0x20, 0xc0, 0x03, 0x18, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02, 0x00, 0x04, 0x93,
        0xe0, 0x00, 0x04, 0x93, 0xe0, 0x00, 0x00, 0xc3, 0x50,
    ];

    fn up() -> Packet {
        Packet {
            required_min_echo_rx_us: 50_000,
            ..Packet::new(State::Up, Diag::None, 3, 1, 2, 300_000, 300_000)
        }
    }

    #[test]
    fn decodes_and_encodes_the_layout_of_section_4_1() {
        assert_eq!(Packet::decode(&UP), Ok(up()));
        assert_eq!(up().encode(), UP);
    }

    #[test]
    fn every_flag_bit_lands_where_the_rfc_puts_it() {
        let p = Packet {
            state: State::Init,
            diag: Diag::ReverseConcatenatedPathDown,
            poll: true,
            control_plane_independent: true,
            demand: true,
            ..up()
        };
        let b = p.encode();
        assert_eq!(b[0], 0x28);
        assert_eq!(b[1], 0x80 | 0x20 | 0x08 | 0x02);
        assert_eq!(Packet::decode(&b), Ok(p));
        let f = Packet {
            final_: true,
            ..up()
        };
        assert_eq!(f.encode()[1], 0xd0);
        assert_eq!(Packet::decode(&f.encode()), Ok(f));
    }

    #[test]
    fn reserved_diags_are_kept() {
        let mut b = UP;
        b[0] = 0x20 | 0x1f;
        let p = Packet::decode(&b).unwrap();
        assert_eq!(p.diag, Diag::Unknown(31));
        assert_eq!(p.encode(), b);
        for c in 0..32 {
            assert_eq!(Diag::from_code(c).code(), c);
        }
    }

    #[test]
    fn each_session_free_check_of_6_8_6_discards_with_its_reason() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (UP[..23].to_vec(), "short"),
            (vec![], "short"),
            (set(0, 0x40), "bad_version"),
            (set(0, 0x00), "bad_version"),
            (set(3, 23), "length_too_small"),
            (set(1, 0xc4), "length_too_small"),
            (set(3, 25), "length_exceeds_payload"),
            (set(2, 0), "zero_detect_mult"),
            (set(1, 0xc1), "multipoint"),
            (set(7, 0), "zero_my_discriminator"),
            (set(11, 0), "zero_your_discriminator"),
            (
                [&set(11, 0)[..1], &[0x80], &set(11, 0)[2..]].concat(),
                "zero_your_discriminator",
            ),
        ];
        for (bytes, reason) in cases {
            let e = Packet::decode(&bytes).unwrap_err();
            assert_eq!(e.reason(), reason, "{bytes:02x?}: {e}");
            assert!(PacketError::REASONS.contains(&e.reason()));
        }
    }

    #[test]
    fn your_discriminator_zero_is_fine_while_down() {
        for state in [0x40u8, 0x00] {
            let mut b = set(11, 0);
            b[1] = state;
            let p = Packet::decode(&b).unwrap();
            assert_eq!(p.your_discr, 0);
        }
    }

    #[test]
    fn a_longer_payload_and_an_auth_section_are_accepted_by_the_codec() {
        let mut b = UP.to_vec();
        b.extend_from_slice(&[0x01, 0x05, 0x00, 0x61, 0x62]);
        assert_eq!(Packet::decode(&b), Ok(up()));
        b[1] |= 0x04;
        b[3] = 29;
        let p = Packet::decode(&b).unwrap();
        assert!(p.auth_present);
        b[3] = 30;
        assert_eq!(
            Packet::decode(&b).unwrap_err(),
            PacketError::LengthExceedsPayload {
                length: 30,
                payload: 29
            }
        );
    }

    #[test]
    fn errors_name_the_field_and_what_is_expected() {
        assert_eq!(
            Packet::decode(&set(0, 0x40)).unwrap_err().to_string(),
            "version: 2, expected 1"
        );
        assert_eq!(
            Packet::decode(&set(3, 20)).unwrap_err().to_string(),
            "length: 20, expected at least 24 (A bit false)"
        );
    }

    fn set(at: usize, v: u8) -> Vec<u8> {
        let mut b = UP.to_vec();
        b[at] = v;
        b
    }
}
