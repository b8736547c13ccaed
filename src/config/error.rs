//! The errors of the config layer: one [`ConfigError`] per problem found, each naming
//! the place (a path such as `peers[1].hold-time`, and the line and column when the
//! text came from a file) and the offending value. A file's problems are collected into
//! one [`ConfigErrors`] so that a user sees all of them at once.
//!
//! Passwords never appear in an error: the validator reports `<redacted>` instead.

use std::fmt;

/// A position in the YAML text, both numbers counted from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// One problem in a config file.
///
/// Displays as `path: message`, e.g. `peers[1].hold-time: "2s" must be 0 or at least 3s`.
/// The location is not part of the Display: a caller that knows the file name prints
/// `file:line:column: ` in front (see `check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Where in the document: `peers[1].hold-time`; empty for the document itself.
    pub path: String,
    pub location: Option<Location>,
    pub kind: ConfigErrorKind,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: {}", self.path, self.kind)
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    pub fn new(path: impl Into<String>, location: Option<Location>, kind: ConfigErrorKind) -> Self {
        ConfigError {
            path: path.into(),
            location,
            kind,
        }
    }

    /// Moves the location `lines` down and `indent` right (a config embedded in a
    /// ConfigMap manifest).
    pub(crate) fn shift(&mut self, lines: usize, indent: usize) {
        if let Some(l) = &mut self.location {
            l.line += lines;
            l.column += indent;
        }
    }

    /// A value that is well-formed but not acceptable: `value` is shown as written
    /// (already quoted by the caller when it is a string).
    pub fn invalid(
        path: impl Into<String>,
        location: Option<Location>,
        value: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Self::new(
            path,
            location,
            ConfigErrorKind::Invalid {
                value: value.into(),
                reason: reason.into(),
            },
        )
    }
}

/// What is wrong. The Display is the part after `path: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigErrorKind {
    /// The text is not YAML.
    #[error("invalid YAML: {0}")]
    Syntax(String),
    /// A key the format does not define (MetalLB parsed strictly, so do we).
    #[error("unknown key {}{}", quote(.key), hint(.suggestion, .expected))]
    UnknownKey {
        key: String,
        suggestion: Option<String>,
        expected: Vec<&'static str>,
    },
    /// The same key twice in one mapping.
    #[error("duplicate key {} (first defined at line {})", quote(.key), .first.line)]
    DuplicateKey { key: String, first: Location },
    /// A required field is absent (or null).
    #[error("is required")]
    Missing,
    /// The YAML node has the wrong shape or scalar type.
    #[error("{found} must be {expected}")]
    WrongType {
        expected: &'static str,
        found: String,
    },
    /// A value of the right type that is not acceptable.
    #[error("{value} {reason}")]
    Invalid { value: String, reason: String },
    /// A problem that is not about one value (e.g. the ConfigMap has no config key).
    #[error("{0}")]
    Other(String),
}

fn hint(suggestion: &Option<String>, expected: &[&'static str]) -> String {
    match suggestion {
        Some(s) => format!(", did you mean {}?", quote(s)),
        None if expected.is_empty() => String::new(),
        None => format!(" (expected one of: {})", expected.join(", ")),
    }
}

/// Quotes a string the way the error messages show string values: `"2s"`.
pub(crate) fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// Every problem found in one config document, in document order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    errors: Vec<ConfigError>,
}

impl ConfigErrors {
    /// Sorts by position so that the report reads top to bottom; errors without a
    /// position (cross-references found after the walk) keep their order at the end.
    pub(crate) fn new(mut errors: Vec<ConfigError>) -> Self {
        errors.sort_by_key(|e| {
            e.location
                .map_or((usize::MAX, usize::MAX), |l| (l.line, l.column))
        });
        ConfigErrors { errors }
    }

    pub(crate) fn single(error: ConfigError) -> Self {
        ConfigErrors {
            errors: vec![error],
        }
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.errors.iter()
    }

    pub fn len(&self) -> usize {
        self.errors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// Moves every location `lines` lines down: the config text was embedded in a
    /// ConfigMap manifest starting after that many lines.
    pub(crate) fn shift_lines(&mut self, lines: usize, indent: usize) {
        for e in &mut self.errors {
            e.shift(lines, indent);
        }
    }

    pub(crate) fn strip_locations(&mut self) {
        for e in &mut self.errors {
            e.location = None;
        }
    }
}

impl std::error::Error for ConfigErrors {}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errors.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} errors:", many.len())?;
                for e in many {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl<'a> IntoIterator for &'a ConfigErrors {
    type Item = &'a ConfigError;
    type IntoIter = std::slice::Iter<'a, ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.errors.iter()
    }
}

/// The closest of `candidates` to `key`, for a did-you-mean hint: first a candidate that
/// differs only in case or separators (`holdTime` for `hold-time`, as in MetalLB's
/// CRDs), then the one at the smallest edit distance if that distance is small for the
/// key's length.
pub(crate) fn suggest(key: &str, candidates: &[&'static str]) -> Option<String> {
    let norm = |s: &str| -> String {
        s.chars()
            .filter(|c| !matches!(c, '-' | '_' | ' '))
            .flat_map(char::to_lowercase)
            .collect()
    };
    let key_norm = norm(key);
    if let Some(c) = candidates.iter().find(|c| norm(c) == key_norm) {
        return Some((*c).to_string());
    }
    let limit = (key.chars().count() / 3).clamp(1, 3);
    candidates
        .iter()
        .map(|c| (edit_distance(&key.to_lowercase(), c), *c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.to_string())
}

/// Edit distance over chars where a swap of two neighbours counts as one edit
/// (optimal string alignment), since "fsat" for "fast" is the typical typo.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions() {
        let keys = &[
            "peer-address",
            "peer-asn",
            "my-asn",
            "hold-time",
            "keepalive-time",
        ];
        let cases = [
            ("hold-tme", Some("hold-time")),
            ("holdTime", Some("hold-time")),
            ("peerASN", Some("peer-asn")),
            ("hold_time", Some("hold-time")),
            ("peer-adress", Some("peer-address")),
            ("my-as", Some("my-asn")),
            ("colour", None),
            ("x", None),
        ];
        for (key, want) in cases {
            assert_eq!(suggest(key, keys).as_deref(), want, "{key}");
        }
    }

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("same", "same"), 0);
        assert_eq!(edit_distance("fsat", "fast"), 1);
        assert_eq!(edit_distance("ab", "ba"), 1);
    }

    #[test]
    fn display_forms() {
        let e = ConfigError::invalid(
            "peers[1].hold-time",
            None,
            quote("2s"),
            "must be 0 or at least 3s",
        );
        assert_eq!(
            e.to_string(),
            r#"peers[1].hold-time: "2s" must be 0 or at least 3s"#
        );
        let e = ConfigError::new(
            "peers[0]",
            None,
            ConfigErrorKind::UnknownKey {
                key: "hold-tme".into(),
                suggestion: Some("hold-time".into()),
                expected: vec![],
            },
        );
        assert_eq!(
            e.to_string(),
            r#"peers[0]: unknown key "hold-tme", did you mean "hold-time"?"#
        );
        let e = ConfigError::new(
            "",
            None,
            ConfigErrorKind::UnknownKey {
                key: "zz".into(),
                suggestion: None,
                expected: vec!["a", "b"],
            },
        );
        assert_eq!(e.to_string(), r#"unknown key "zz" (expected one of: a, b)"#);
        let errs = ConfigErrors::new(vec![
            ConfigError::new("b", None, ConfigErrorKind::Missing),
            ConfigError::new(
                "a",
                Some(Location { line: 3, column: 1 }),
                ConfigErrorKind::Missing,
            ),
        ]);
        assert_eq!(
            errs.to_string(),
            "2 errors:\n  a: is required\n  b: is required"
        );
    }
}
