//! Go durations ("90s", "1m30s", "1.5h", "500ms", "0"), read exactly as Go's
//! `time.ParseDuration` reads them, since MetalLB's hold-time and keepalive-time are
//! Go durations and a file must keep its meaning.
//!
//! Grammar: `[-+]?` then one or more `[0-9]*(\.[0-9]*)?unit` with unit one of ns, us,
//! µs (U+00B5), μs (U+03BC), ms, s, m, h; or the bare `0`. Results are signed
//! nanoseconds in an i64, like Go's `time.Duration`; callers decide what a negative
//! value means.
//!
//! Owns: parsing and the compact display used in summaries. Must not: decide a field's
//! range (that is `validate`).

use std::fmt;
use std::time::Duration;

/// Why a string is not a Go duration. The Display is the reason only; the caller adds
/// the field and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("is not a duration")]
    Invalid,
    #[error("has no unit (e.g. \"90s\"; units are ns, us, ms, s, m, h)")]
    MissingUnit,
    #[error("has an unknown unit {0:?} (units are ns, us, ms, s, m, h)")]
    UnknownUnit(String),
    #[error("is too long (more than 2562047h)")]
    Overflow,
}

const NANOS_PER_UNIT: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// A signed duration in nanoseconds, as Go's `time.Duration`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GoDuration(pub i64);

impl GoDuration {
    /// The whole seconds, truncated toward zero as Go's `int(d.Seconds())` does (which
    /// is how MetalLB rounded the hold time). Negative durations give None.
    pub fn whole_seconds(self) -> Option<Duration> {
        u64::try_from(self.0)
            .ok()
            .map(|n| Duration::from_secs(n / 1_000_000_000))
    }

    /// The exact value, or None if negative.
    pub fn to_std(self) -> Option<Duration> {
        u64::try_from(self.0).ok().map(Duration::from_nanos)
    }
}

/// Parses a Go duration; see the module documentation for the grammar.
pub fn parse(text: &str) -> Result<GoDuration, DurationError> {
    const LIMIT: u64 = 1 << 63;
    let mut s = text;
    let mut neg = false;
    if let Some(rest) = s.strip_prefix('-') {
        neg = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(GoDuration(0));
    }
    if s.is_empty() {
        return Err(DurationError::Invalid);
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let b = s.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return Err(DurationError::Invalid);
        }
        let int_len = b.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut whole: u64 = 0;
        for &c in &b[..int_len] {
            whole = whole
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(c - b'0')))
                .filter(|v| *v <= LIMIT)
                .ok_or(DurationError::Overflow)?;
        }
        s = &s[int_len..];
        let pre = int_len > 0;
        let mut post = false;
        let (mut frac, mut scale) = (0u64, 1f64);
        if let Some(rest) = s.strip_prefix('.') {
            s = rest;
            let frac_len = s.bytes().take_while(u8::is_ascii_digit).count();
            post = frac_len > 0;
            // Like Go, digits beyond what fits are consumed but add no precision.
            let mut overflowed = false;
            for c in s[..frac_len].bytes() {
                if overflowed || frac > (i64::MAX as u64) / 10 {
                    overflowed = true;
                    continue;
                }
                let v = frac * 10 + u64::from(c - b'0');
                if v > LIMIT {
                    overflowed = true;
                    continue;
                }
                frac = v;
                scale *= 10.0;
            }
            s = &s[frac_len..];
        }
        if !pre && !post {
            return Err(DurationError::Invalid);
        }
        let unit_len = s
            .bytes()
            .take_while(|c| !(*c == b'.' || c.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(DurationError::MissingUnit);
        }
        // The unit ends at an ASCII byte or at the end, so the slice is on a boundary.
        let unit = &s[..unit_len];
        s = &s[unit_len..];
        let per_unit = NANOS_PER_UNIT
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, n)| *n)
            .ok_or_else(|| DurationError::UnknownUnit(unit.to_string()))?;
        if whole > LIMIT / per_unit {
            return Err(DurationError::Overflow);
        }
        let mut v = whole * per_unit;
        if frac > 0 {
            // Go computes the fraction in float64; the same arithmetic keeps "1.1s" equal
            // to Go's 1.1s to the nanosecond.
            let add = (frac as f64 * (per_unit as f64 / scale)) as u64;
            v = v
                .checked_add(add)
                .filter(|v| *v <= LIMIT)
                .ok_or(DurationError::Overflow)?;
        }
        total = total
            .checked_add(v)
            .filter(|v| *v <= LIMIT)
            .ok_or(DurationError::Overflow)?;
    }
    if neg {
        // -(1<<63) is representable.
        return Ok(GoDuration(0i64.wrapping_sub_unsigned(total)));
    }
    i64::try_from(total)
        .map(GoDuration)
        .map_err(|_| DurationError::Overflow)
}

/// A compact display of a duration: seconds below an hour (`90s`, `120s`), else
/// hours and minutes when exact (`1h30m`).
pub struct Compact(pub Duration);

impl fmt::Display for Compact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.0.as_secs();
        let millis = self.0.subsec_millis();
        if millis != 0 {
            return write!(f, "{}.{:03}s", total, millis);
        }
        if total < 3600 || total % 60 != 0 {
            return write!(f, "{total}s");
        }
        let (h, m) = (total / 3600, total % 3600 / 60);
        if m == 0 {
            write!(f, "{h}h")
        } else {
            write!(f, "{h}h{m}m")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn go_parse_duration_table() {
        // Cases from the behaviour of Go's time.ParseDuration.
        let ok: &[(&str, i64)] = &[
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("0s", 0),
            ("90s", 90 * S),
            ("1m30s", 90 * S),
            ("1h", 3600 * S),
            ("500ms", 500_000_000),
            ("1.5s", 1_500_000_000),
            (".5s", 500_000_000),
            ("1.s", S),
            ("1.1s", 1_100_000_000),
            ("-1s", -S),
            ("+3s", 3 * S),
            ("3000us", 3_000_000),
            ("3000\u{b5}s", 3_000_000),
            ("3000\u{3bc}s", 3_000_000),
            ("10ns", 10),
            ("1h1m1s1ms1us1ns", 3661 * S + 1_001_001),
            ("0.3333333333333333333h", 1_200_000_000_000),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("2562047h", 2_562_047 * 3600 * S),
        ];
        for &(text, nanos) in ok {
            assert_eq!(parse(text), Ok(GoDuration(nanos)), "{text:?}");
        }
        let bad: &[(&str, DurationError)] = &[
            ("", DurationError::Invalid),
            ("-", DurationError::Invalid),
            ("s", DurationError::Invalid),
            (".s", DurationError::Invalid),
            ("1..5s", DurationError::MissingUnit),
            ("90", DurationError::MissingUnit),
            ("00", DurationError::MissingUnit),
            ("1s2", DurationError::MissingUnit),
            ("1d", DurationError::UnknownUnit("d".into())),
            ("1 s", DurationError::UnknownUnit(" s".into())),
            ("1S", DurationError::UnknownUnit("S".into())),
            ("1sec", DurationError::UnknownUnit("sec".into())),
            (" 1s", DurationError::Invalid),
            ("9223372036854775808ns", DurationError::Overflow),
            ("2562048h", DurationError::Overflow),
            ("99999999999999999999s", DurationError::Overflow),
        ];
        for (text, err) in bad {
            assert_eq!(parse(text).as_ref(), Err(err), "{text:?}");
        }
    }

    #[test]
    fn whole_seconds_truncates_like_metallb() {
        assert_eq!(
            parse("2.9s").unwrap().whole_seconds(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse("500ms").unwrap().whole_seconds(),
            Some(Duration::ZERO)
        );
        assert_eq!(parse("-1s").unwrap().whole_seconds(), None);
        assert_eq!(
            parse("1.5s").unwrap().to_std(),
            Some(Duration::from_millis(1500))
        );
    }

    #[test]
    fn compact_display() {
        let cases = [
            (0, "0s"),
            (90, "90s"),
            (120, "120s"),
            (3599, "3599s"),
            (3600, "1h"),
            (3601, "3601s"),
            (5400, "1h30m"),
            (7200, "2h"),
        ];
        for (secs, want) in cases {
            assert_eq!(Compact(Duration::from_secs(secs)).to_string(), want);
        }
        assert_eq!(Compact(Duration::from_millis(1500)).to_string(), "1.500s");
    }
}
