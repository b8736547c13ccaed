//! The Secrets that hold TCP MD5 keys (`password-secret`), as the sources read them:
//! [`SecretsView`], a snapshot of every Secret the bgp-config names, and the pure rule
//! that turns a [`SecretKeyRef`] into a key or into an error for that one peer.
//!
//! The drivers are beside the other sources: `kube::secrets` (get + watch of each named
//! Secret, nothing else) and `file::secrets` (`--secrets-dir DIR`, `DIR/NAME/KEY` as a
//! Secret volume mounts it). The daemon tells them which names to follow through a
//! [`SecretNames`] watch; they answer with [`SourceUpdate::Secrets`](super::SourceUpdate).
//!
//! Must not: log, format or keep a value anywhere but in a [`Secret`] (whose Debug and
//! Display print `<redacted>`); errors name the Secret and the key, never the content.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use tokio::sync::watch;

use crate::config::{Md5KeyProblem, Secret, SecretKeyRef};

/// The names of the Secrets the config refers to, sent by the daemon on each change.
pub type SecretNames = watch::Receiver<BTreeSet<String>>;

/// One Secret's content as last read.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretState {
    /// Not read yet (the first get or directory read has not completed).
    Pending,
    /// The Secret (or its directory) does not exist.
    Missing,
    /// Never read: why (an API or file error, never content).
    Unreadable(String),
    /// The Secret's data: each key's value, or why it is not text.
    Present(BTreeMap<String, Result<Secret, NotText>>),
}

/// A value that is not UTF-8: no TCP MD5 key can be taken from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotText;

impl fmt::Debug for SecretState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pending => f.write_str("Pending"),
            Self::Missing => f.write_str("Missing"),
            Self::Unreadable(e) => f.debug_tuple("Unreadable").field(e).finish(),
            // Keys only: a value never reaches a log line, even a debug one.
            Self::Present(data) => f.debug_set().entries(data.keys()).finish(),
        }
    }
}

/// Where the Secrets are read from, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecretOrigin {
    /// The Kubernetes API, in this namespace.
    Namespace(String),
    /// `--secrets-dir`.
    Directory(std::path::PathBuf),
}

impl fmt::Display for SecretOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Namespace(ns) => write!(f, "namespace {ns}"),
            Self::Directory(dir) => write!(f, "--secrets-dir {}", dir.display()),
        }
    }
}

/// Every followed Secret, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretsView {
    pub origin: SecretOrigin,
    pub secrets: BTreeMap<String, SecretState>,
}

/// Why a peer's `password-secret` gives no key. Never holds a value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    #[error("password-secret: no secret source (run in a cluster, or give --secrets-dir)")]
    NoSource,
    #[error("password-secret: {secret} in {origin} not read yet")]
    Pending {
        secret: SecretKeyRef,
        origin: SecretOrigin,
    },
    #[error("password-secret: secret {name} not found in {origin}", name = .secret.name)]
    SecretMissing {
        secret: SecretKeyRef,
        origin: SecretOrigin,
    },
    #[error("password-secret: secret {name} in {origin} cannot be read: {reason}", name = .secret.name)]
    Unreadable {
        secret: SecretKeyRef,
        origin: SecretOrigin,
        reason: String,
    },
    #[error("password-secret: secret {name} in {origin} has no key {key}", name = .secret.name, key = .secret.key)]
    KeyMissing {
        secret: SecretKeyRef,
        origin: SecretOrigin,
    },
    #[error("password-secret: {secret} in {origin}: the value {problem}")]
    Unusable {
        secret: SecretKeyRef,
        origin: SecretOrigin,
        problem: KeyProblem,
    },
}

impl SecretError {
    /// The Secret is still being read: a wait, not a fault.
    pub fn is_pending(&self) -> bool {
        matches!(self, Self::Pending { .. })
    }
}

/// Why a value is no TCP MD5 key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    #[error("is not UTF-8 text")]
    NotText,
    #[error("{0}")]
    Md5(Md5KeyProblem),
}

impl SecretsView {
    pub fn new(origin: SecretOrigin) -> Self {
        Self {
            origin,
            secrets: BTreeMap::new(),
        }
    }

    /// The TCP MD5 key `r` names (see [`Secret::md5_key`] for what a key may be).
    pub fn resolve(&self, r: &SecretKeyRef) -> Result<Secret, SecretError> {
        let origin = self.origin.clone();
        let secret = r.clone();
        let data = match self.secrets.get(&r.name) {
            None | Some(SecretState::Pending) => {
                return Err(SecretError::Pending { secret, origin })
            }
            Some(SecretState::Missing) => {
                return Err(SecretError::SecretMissing { secret, origin })
            }
            Some(SecretState::Unreadable(reason)) => {
                let reason = reason.clone();
                return Err(SecretError::Unreadable {
                    secret,
                    origin,
                    reason,
                });
            }
            Some(SecretState::Present(data)) => data,
        };
        let unusable = |problem| SecretError::Unusable {
            secret: r.clone(),
            origin: self.origin.clone(),
            problem,
        };
        match data.get(&r.key) {
            None => Err(SecretError::KeyMissing { secret, origin }),
            Some(Err(NotText)) => Err(unusable(KeyProblem::NotText)),
            Some(Ok(text)) => {
                Secret::md5_key(text.expose()).map_err(|p| unusable(KeyProblem::Md5(p)))
            }
        }
    }
}

/// A Secret's data from raw bytes (the API's base64-decoded `data`, a file's content).
pub fn secret_data<'a>(
    entries: impl IntoIterator<Item = (String, &'a [u8])>,
) -> BTreeMap<String, Result<Secret, NotText>> {
    entries
        .into_iter()
        .map(|(key, bytes)| {
            let value = std::str::from_utf8(bytes)
                .map(Secret::new)
                .map_err(|_| NotText);
            (key, value)
        })
        .collect()
}

/// The key a peer uses: its `password`, or the one its `password-secret` names
/// (`secrets` is `None` when no secret source runs).
pub fn peer_md5_key(
    peer: &crate::config::Peer,
    secrets: Option<&SecretsView>,
) -> Result<Option<Secret>, SecretError> {
    match (&peer.password_secret, secrets) {
        (None, _) => Ok(peer.password.clone()),
        (Some(_), None) => Err(SecretError::NoSource),
        (Some(r), Some(view)) => view.resolve(r).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(state: SecretState) -> SecretsView {
        let mut v = SecretsView::new(SecretOrigin::Namespace("kube-system".into()));
        v.secrets.insert("tor-md5".into(), state);
        v
    }

    fn r(key: &str) -> SecretKeyRef {
        SecretKeyRef {
            name: "tor-md5".into(),
            key: key.into(),
        }
    }

    fn present(pairs: &[(&str, &[u8])]) -> SecretState {
        SecretState::Present(secret_data(
            pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)),
        ))
    }

    #[test]
    fn a_key_resolves_without_its_trailing_line_break() {
        let v = view(present(&[("tor-a", b"s3cret\n"), ("tor-b", b"other")]));
        assert_eq!(v.resolve(&r("tor-a")).unwrap().expose(), "s3cret");
        assert_eq!(v.resolve(&r("tor-b")).unwrap().expose(), "other");
    }

    #[test]
    fn every_failure_names_the_secret_and_key_and_never_the_value() {
        let value = "hunter2-value";
        let long = value.repeat(10);
        let cases: Vec<(SecretState, &str, &str)> = vec![
            (
                SecretState::Pending,
                "tor-a",
                "secret tor-md5 key tor-a in namespace kube-system not read yet",
            ),
            (
                SecretState::Missing,
                "tor-a",
                "secret tor-md5 not found in namespace kube-system",
            ),
            (
                SecretState::Unreadable("api error 403".into()),
                "tor-a",
                "secret tor-md5 in namespace kube-system cannot be read: api error 403",
            ),
            (
                present(&[("other", value.as_bytes())]),
                "tor-a",
                "secret tor-md5 in namespace kube-system has no key tor-a",
            ),
            (present(&[("tor-a", b"")]), "tor-a", "the value is empty"),
            (
                present(&[("tor-a", b"\xff\xfe")]),
                "tor-a",
                "the value is not UTF-8 text",
            ),
            (
                present(&[("tor-a", long.as_bytes())]),
                "tor-a",
                "the value is longer than 80 bytes",
            ),
            (
                present(&[("tor-a", b"hunter2-value\nx")]),
                "tor-a",
                "the value must not contain a line break",
            ),
        ];
        for (state, key, want) in cases {
            let e = view(state).resolve(&r(key)).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(want), "{text:?} lacks {want:?}");
            assert!(text.starts_with("password-secret: "), "{text}");
            assert!(!text.contains("hunter2"), "{text}");
            assert!(!format!("{e:?}").contains("hunter2"), "{e:?}");
        }
    }

    #[test]
    fn the_debug_form_of_a_secret_lists_keys_only() {
        let state = present(&[("tor-a", b"hunter2")]);
        assert_eq!(format!("{state:?}"), "{\"tor-a\"}");
        assert!(!format!("{:?}", view(state)).contains("hunter2"));
    }

    #[test]
    fn a_peer_key_comes_from_password_or_from_its_secret() {
        let config = crate::config::parse(
            "peers:\n  - peer-address: 192.0.2.1\n    peer-asn: 65000\n    my-asn: 65001\n    password-secret: {name: tor-md5, key: tor-a}\n  - peer-address: 192.0.2.2\n    peer-asn: 65000\n    my-asn: 65001\n    password: plain\n",
        )
        .unwrap();
        let v = view(present(&[("tor-a", b"from-secret")]));
        let key = |i: usize, v: Option<&SecretsView>| {
            peer_md5_key(&config.peers[i], v).map(|k| k.map(|k| k.expose().to_owned()))
        };
        assert_eq!(key(0, Some(&v)), Ok(Some("from-secret".into())));
        assert_eq!(key(0, None), Err(SecretError::NoSource));
        assert_eq!(key(1, Some(&v)), Ok(Some("plain".into())));
        assert_eq!(key(1, None), Ok(Some("plain".into())));
    }
}
