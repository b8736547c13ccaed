//! The sources layer's error type: an object that cannot be mapped to facts, a
//! cluster-state file that cannot be read or parsed.
//!
//! Every message names the object (kind and name) or the file, the field and the value,
//! so an operator can fix it from the log line alone. Nothing here is fatal to a watch:
//! the caller keeps the last good facts and reports the error.

use std::path::PathBuf;

/// Why an object or a file could not be turned into cluster facts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// The object has no `metadata.name`; it cannot be keyed.
    #[error("{kind} without metadata.name")]
    MissingName { kind: &'static str },
    /// A CIDR field does not parse.
    #[error("{kind} {name}: {field}: {value:?} is not a CIDR ({reason})")]
    InvalidCidr {
        kind: &'static str,
        name: String,
        field: String,
        value: String,
        reason: String,
    },
    /// A CIDR field of one family holds a CIDR of the other.
    #[error("{kind} {name}: {field}: {value:?} is not an {expected} CIDR")]
    WrongFamily {
        kind: &'static str,
        name: String,
        field: String,
        value: String,
        expected: &'static str,
    },
    /// A boolean option holds something Cilium would not read as a boolean.
    #[error("{kind} {name}: {field}: {value:?} is not a boolean (true or false)")]
    InvalidBool {
        kind: &'static str,
        name: String,
        field: String,
        value: String,
    },
    /// A field has the wrong shape (e.g. a string where a list is expected).
    #[error("{kind} {name}: {field}: {reason}")]
    Malformed {
        kind: &'static str,
        name: String,
        field: String,
        reason: String,
    },
    /// A cluster-state or bgp-config file could not be read.
    #[error("{}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    /// A document of a cluster-state file is not valid YAML/JSON or not a valid object.
    #[error("{}: document {document}: {reason}", path.display())]
    Parse {
        path: PathBuf,
        /// 1-based position of the document in a multi-document file.
        document: usize,
        reason: String,
    },
    /// The object mapping failed for an object of a cluster-state file.
    #[error("{}: {error}", path.display())]
    InFile {
        path: PathBuf,
        error: Box<SourceError>,
    },
    /// The same object appears twice in the cluster-state path.
    #[error("{kind} {name} is defined twice: in {} and in {}", first.display(), second.display())]
    Duplicate {
        kind: &'static str,
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
}
