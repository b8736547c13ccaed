//! Never panics on input: arbitrary text, and the samples with random edits, always
//! give a config or a list of located, non-empty errors.

use proptest::prelude::*;

use podcidr_speaker::config::{parse, parse_configmap_data};

const SAMPLES: [&str; 3] = [
    include_str!("../../config/cilium-bgp-config.yaml"),
    include_str!("../../config/metallb-full.yaml"),
    include_str!("../../config/speaker-extensions.yaml"),
];

/// The samples with a byte range replaced by text likely to matter in YAML.
fn mutated() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "",
        ":",
        "-",
        " ",
        "\n",
        "  ",
        "- ",
        "[",
        "]",
        "{",
        "}",
        "\"",
        "'",
        "|",
        ">",
        "&a",
        "*a",
        "<<: *a",
        "!!str ",
        "0",
        "-1",
        "4294967296",
        "1.5",
        "yes",
        "~",
        "peers",
        "hold-time: ",
        "10.0.0.1",
        "10.0.0.1-10.0.0.0",
        "::",
        "/33",
        "In",
        "large:",
        "65535:65536",
        "\t",
        "µs",
    ]);
    (
        0..SAMPLES.len(),
        any::<prop::sample::Index>(),
        0usize..40,
        prop::collection::vec(pieces, 0..4),
    )
        .prop_map(|(which, at, len, inserted)| {
            let s = SAMPLES[which];
            let mut start = at.index(s.len() + 1);
            while !s.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len).min(s.len());
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}{}{}", &s[..start], inserted.concat(), &s[end..])
        })
}

fn check(text: &str) {
    if let Err(errors) = parse(text) {
        assert!(!errors.is_empty());
        for e in &errors {
            assert!(!e.to_string().is_empty());
            if let Some(l) = e.location {
                assert!(l.line >= 1 && l.column >= 1, "{e:?}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        check(&text);
        let data = std::collections::BTreeMap::from([("config".to_string(), text)]);
        let _ = parse_configmap_data(&data);
    }

    #[test]
    fn edited_samples_never_panic(text in mutated()) {
        check(&text);
    }
}
