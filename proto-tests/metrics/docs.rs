//! The README's metrics table against the registry: every family the speaker registers
//! is in the table and every family in the table is registered, so neither side can
//! drift from the other.

use std::collections::BTreeSet;

use crate::crate_root;
use crate::deploy::full_scrape;

const PREFIX: &str = "podcidr_speaker_";

/// The family names in the first column of the README's "## Metrics" table: every
/// backticked name there, without its `{labels}`.
fn readme_families() -> BTreeSet<String> {
    let text = std::fs::read_to_string(crate_root().join("README.md")).unwrap();
    let section = text
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README.md has a \"## Metrics\" section");
    let mut names = BTreeSet::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap_or_default();
        for (i, part) in first.split('`').enumerate() {
            if i % 2 == 1 {
                let name = part.split('{').next().unwrap_or_default();
                names.insert(name.to_owned());
            }
        }
    }
    names
}

/// The names passed to the registrar in src/metrics/families.rs
/// (`r.gauge("name", ...)`, `r.counter_vec(\n "name", ...)` and so on).
fn registered_in_source() -> BTreeSet<String> {
    let text = std::fs::read_to_string(crate_root().join("src/metrics/families.rs")).unwrap();
    let mut names = BTreeSet::new();
    for kind in [
        "gauge(",
        "float_gauge(",
        "gauge_vec(",
        "float_gauge_vec(",
        "counter(",
        "counter_vec(",
        "histogram(",
    ] {
        for (i, piece) in text.split(&format!("r.{kind}")).enumerate() {
            if i == 0 {
                continue;
            }
            let name = piece
                .trim_start()
                .strip_prefix('"')
                .and_then(|rest| rest.split('"').next())
                .unwrap_or_else(|| panic!("r.{kind} without a literal name: {piece:.60}"));
            names.insert(name.to_owned());
        }
    }
    names
}

#[test]
fn the_readme_metrics_table_lists_exactly_the_registered_families() {
    let readme = readme_families();
    let source = registered_in_source();
    let scraped: BTreeSet<String> = full_scrape()
        .types
        .keys()
        .map(|f| f.strip_prefix(PREFIX).unwrap_or(f).to_owned())
        .collect();
    assert!(source.len() >= 30, "registrations found: {source:?}");
    assert_eq!(
        source, scraped,
        "src/metrics/families.rs and a registry that recorded every event disagree"
    );
    let undocumented: Vec<_> = source.difference(&readme).collect();
    let unregistered: Vec<_> = readme.difference(&source).collect();
    assert!(
        undocumented.is_empty() && unregistered.is_empty(),
        "README.md's metrics table: missing {undocumented:?}; not registered {unregistered:?}"
    );
}
