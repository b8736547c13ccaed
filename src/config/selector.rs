//! Kubernetes label selectors as MetalLB's `node-selectors` use them: `match-labels`
//! and `match-expressions` (In, NotIn, Exists, DoesNotExist), ANDed inside one
//! selector. The validation messages are Kubernetes' own (apimachinery
//! `labels.NewRequirement`, `validation.IsQualifiedName`, `IsValidLabelValue`,
//! `metav1.LabelSelectorAsSelector`), so a user who knows them recognises them.
//!
//! Owns: the selector value, its validation and `matches`. Must not: know about
//! peers or paths in the config file (`validate` places the messages).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A selector operator (metav1.LabelSelectorOperator, plus the `=` that
/// `match-labels` entries become).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];

impl Operator {
    /// The operator of a `match-expressions` entry; case-sensitive as in Kubernetes.
    pub fn parse(s: &str) -> Result<Operator, String> {
        match s {
            "In" => Ok(Operator::In),
            "NotIn" => Ok(Operator::NotIn),
            "Exists" => Ok(Operator::Exists),
            "DoesNotExist" => Ok(Operator::DoesNotExist),
            _ => {
                let mut reason = "is not a valid label selector operator".to_string();
                if let Some(s) = super::error::suggest(s, OPERATORS) {
                    reason.push_str(&format!(", did you mean {s:?}?"));
                }
                Err(reason)
            }
        }
    }
}

/// Which part of a requirement a validation message is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequirementField {
    Key,
    /// The whole values list.
    Values,
    /// One value, by index.
    Value(usize),
}

/// One validation failure of a requirement: the part, the value shown, the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequirementError {
    pub field: RequirementField,
    pub value: String,
    pub reason: String,
}

/// One ANDed term of a selector.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: BTreeSet<String>,
}

impl Requirement {
    /// Validates like Kubernetes' `labels.NewRequirement`, collecting every problem.
    pub fn new(
        key: &str,
        operator: Operator,
        values: &[String],
    ) -> Result<Requirement, Vec<RequirementError>> {
        let mut errors = Vec::new();
        let key_errors = validate_label_key(key);
        if !key_errors.is_empty() {
            errors.push(RequirementError {
                field: RequirementField::Key,
                value: format!("{key:?}"),
                reason: key_errors.join("; "),
            });
        }
        let shown = || format!("{values:?}");
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => errors.push(RequirementError {
                field: RequirementField::Values,
                value: shown(),
                reason: "for 'in', 'notin' operators, values set can't be empty".into(),
            }),
            Operator::Equals if values.len() != 1 => errors.push(RequirementError {
                field: RequirementField::Values,
                value: shown(),
                reason: "exact-match compatibility requires one single value".into(),
            }),
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                errors.push(RequirementError {
                    field: RequirementField::Values,
                    value: shown(),
                    reason: "values set must be empty for exists and does not exist".into(),
                })
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let value_errors = validate_label_value(v);
            if !value_errors.is_empty() {
                errors.push(RequirementError {
                    field: RequirementField::Value(i),
                    value: format!("{v:?}"),
                    reason: value_errors.join("; "),
                });
            }
        }
        if errors.is_empty() {
            Ok(Requirement {
                key: key.to_string(),
                operator,
                values: values.iter().cloned().collect(),
            })
        } else {
            Err(errors)
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &BTreeSet<String> {
        &self.values
    }

    /// Kubernetes' `Requirement.Matches`: NotIn and DoesNotExist match a node without
    /// the label.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = || {
            self.values
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
                .join(",")
        };
        match self.operator {
            Operator::Equals => write!(f, "{}={}", self.key, list()),
            Operator::In => write!(f, "{} in ({})", self.key, list()),
            Operator::NotIn => write!(f, "{} notin ({})", self.key, list()),
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
        }
    }
}

/// A label selector: the AND of its requirements. No requirement selects every node,
/// as an empty `metav1.LabelSelector` does.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelSelector {
    /// Sorted, so that two selectors written in a different order compare equal.
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that selects every node.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    pub fn new(mut requirements: Vec<Requirement>) -> LabelSelector {
        requirements.sort();
        requirements.dedup();
        LabelSelector { requirements }
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

/// Kubernetes' selector string: `a=x,b in (x,y),!c`; empty for "everything".
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// A list of selectors as `node-selectors` holds them: ORed, and an empty list selects
/// every node.
pub fn any_matches(selectors: &[LabelSelector], labels: &BTreeMap<String, String>) -> bool {
    selectors.is_empty() || selectors.iter().any(|s| s.matches(labels))
}

const QUALIFIED_NAME_MAX_LEN: usize = 63;
const LABEL_VALUE_MAX_LEN: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Kubernetes' `validation.RegexError` wording.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A name Kubernetes accepts for most objects (`metadata.name`): a lowercase RFC 1123
/// subdomain of at most 253 characters.
pub fn is_object_name(s: &str) -> bool {
    s.len() <= DNS1123_SUBDOMAIN_MAX_LEN && is_dns1123_subdomain(s)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`
fn is_dns1123_subdomain(s: &str) -> bool {
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        let edge = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(first), Some(last)) => {
                edge(first) && edge(last) && b.iter().all(|c| edge(c) || *c == b'-')
            }
            _ => false,
        }
    };
    s.split('.').all(label_ok)
}

/// Kubernetes' `validation.IsQualifiedName`: `[prefix/]name`.
pub fn validate_label_key(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = key.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > DNS1123_SUBDOMAIN_MAX_LEN {
                    errs.push(format!(
                        "prefix part {}",
                        max_len_error(DNS1123_SUBDOMAIN_MAX_LEN)
                    ));
                }
                if !is_dns1123_subdomain(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_MSG,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > QUALIFIED_NAME_MAX_LEN {
        errs.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LEN)
        ));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Kubernetes' `validation.IsValidLabelValue`; the empty value is valid.
pub fn validate_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LEN {
        errs.push(max_len_error(LABEL_VALUE_MAX_LEN));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
        let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
        Requirement::new(key, op, &values).expect("valid requirement")
    }

    #[test]
    fn requirement_semantics() {
        let node = labels(&[("kubernetes/route", "bgp-peer-83"), ("zone", "a")]);
        let bare = labels(&[]);
        let cases = [
            (
                req("kubernetes/route", Operator::Equals, &["bgp-peer-83"]),
                true,
                false,
            ),
            (
                req("kubernetes/route", Operator::Equals, &["other"]),
                false,
                false,
            ),
            (req("zone", Operator::In, &["a", "b"]), true, false),
            (req("zone", Operator::In, &["b"]), false, false),
            (req("zone", Operator::NotIn, &["b"]), true, true),
            (req("zone", Operator::NotIn, &["a"]), false, true),
            (req("zone", Operator::Exists, &[]), true, false),
            (req("rack", Operator::Exists, &[]), false, false),
            (req("zone", Operator::DoesNotExist, &[]), false, true),
            (req("rack", Operator::DoesNotExist, &[]), true, true),
        ];
        for (r, on_node, on_bare) in cases {
            assert_eq!(r.matches(&node), on_node, "{r} on node");
            assert_eq!(r.matches(&bare), on_bare, "{r} on a node without labels");
        }
    }

    #[test]
    fn selectors_and_inside_or_across_empty_selects_all() {
        let node83 = labels(&[("kubernetes/route", "bgp-peer-83"), ("zone", "a")]);
        let node84 = labels(&[("kubernetes/route", "bgp-peer-84"), ("zone", "a")]);
        let unlabelled = labels(&[]);
        let sel83 = LabelSelector::new(vec![
            req("kubernetes/route", Operator::Equals, &["bgp-peer-83"]),
            req("zone", Operator::In, &["a"]),
        ]);
        let sel84_zone_b = LabelSelector::new(vec![
            req("kubernetes/route", Operator::Equals, &["bgp-peer-84"]),
            req("zone", Operator::In, &["b"]),
        ]);
        // AND inside one selector: 84's selector also needs zone b.
        assert!(sel83.matches(&node83));
        assert!(!sel84_zone_b.matches(&node84));
        // OR across the list.
        let list = [sel83.clone(), sel84_zone_b.clone()];
        assert!(any_matches(&list, &node83));
        assert!(!any_matches(&list, &node84));
        // Empty list and empty selector select everything, even a node without labels.
        assert!(any_matches(&[], &unlabelled));
        assert!(any_matches(&[LabelSelector::everything()], &unlabelled));
        assert!(any_matches(&[sel83, LabelSelector::everything()], &node84));
        assert!(!any_matches(&list, &unlabelled));
    }

    #[test]
    fn display_is_kubernetes_string() {
        let s = LabelSelector::new(vec![
            req("zone", Operator::NotIn, &["c", "b"]),
            req("a", Operator::Equals, &["x"]),
            req("gpu", Operator::DoesNotExist, &[]),
            req("rack", Operator::Exists, &[]),
            req("b", Operator::In, &["y", "x"]),
        ]);
        assert_eq!(s.to_string(), "a=x,b in (x,y),!gpu,rack,zone notin (b,c)");
        assert_eq!(LabelSelector::everything().to_string(), "");
    }

    #[test]
    fn operator_errors() {
        assert_eq!(Operator::parse("In"), Ok(Operator::In));
        assert_eq!(
            Operator::parse("in"),
            Err("is not a valid label selector operator, did you mean \"In\"?".to_string())
        );
        assert_eq!(
            Operator::parse("Equals"),
            Err("is not a valid label selector operator".to_string())
        );
        assert_eq!(
            Operator::parse("Gt"),
            Err("is not a valid label selector operator".to_string())
        );
    }

    #[test]
    fn requirement_value_list_errors() {
        let cases: &[(Operator, &[&str], &str)] = &[
            (
                Operator::In,
                &[],
                "for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                Operator::NotIn,
                &[],
                "for 'in', 'notin' operators, values set can't be empty",
            ),
            (
                Operator::Exists,
                &["a"],
                "values set must be empty for exists and does not exist",
            ),
            (
                Operator::DoesNotExist,
                &["a"],
                "values set must be empty for exists and does not exist",
            ),
            (
                Operator::Equals,
                &["a", "b"],
                "exact-match compatibility requires one single value",
            ),
        ];
        for (op, values, want) in cases {
            let values: Vec<String> = values.iter().map(|s| s.to_string()).collect();
            let errs = Requirement::new("zone", *op, &values).unwrap_err();
            assert_eq!(errs.len(), 1, "{op:?}");
            assert_eq!(errs[0].field, RequirementField::Values);
            assert_eq!(errs[0].reason, *want);
        }
    }

    #[test]
    fn all_problems_of_a_requirement_are_reported() {
        let values = vec!["ok".to_string(), "-bad".to_string()];
        let errs = Requirement::new("Bad_Prefix/name", Operator::In, &values).unwrap_err();
        let fields: Vec<_> = errs.iter().map(|e| e.field.clone()).collect();
        assert_eq!(
            fields,
            vec![RequirementField::Key, RequirementField::Value(1)]
        );
        assert_eq!(errs[1].value, "\"-bad\"");
    }

    #[test]
    fn label_key_messages() {
        let name_regex = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
        let prefix_regex = "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
        let long = "a".repeat(64);
        let cases: Vec<(String, Vec<String>)> = vec![
            ("kubernetes.io/hostname".into(), vec![]),
            ("kubernetes/route".into(), vec![]),
            ("a".into(), vec![]),
            ("a_b.c-d".into(), vec![]),
            ("".into(), vec!["name part must be non-empty".into(), name_regex.into()]),
            ("-a".into(), vec![name_regex.into()]),
            ("a b".into(), vec![name_regex.into()]),
            ("/a".into(), vec!["prefix part must be non-empty".into()]),
            ("Example.com/a".into(), vec![prefix_regex.into()]),
            ("a/".into(), vec!["name part must be non-empty".into(), name_regex.into()]),
            (long.clone(), vec!["name part must be no more than 63 characters".into()]),
            ("a/b/c".into(), vec!["a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".into()]),
        ];
        for (key, want) in cases {
            assert_eq!(validate_label_key(&key), want, "{key:?}");
        }
    }

    #[test]
    fn label_value_messages() {
        let regex = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        assert!(validate_label_value("").is_empty());
        assert!(validate_label_value("bgp-peer-83").is_empty());
        assert!(validate_label_value("A.b_c").is_empty());
        assert_eq!(validate_label_value("a/b"), vec![regex.to_string()]);
        assert_eq!(validate_label_value("-x"), vec![regex.to_string()]);
        assert_eq!(
            validate_label_value(&"b".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
    }
}
