//! A strict reader of the Prometheus text exposition format (0.0.4), for tests: every
//! sample must belong to a family declared by `# TYPE` before it, label values are
//! unescaped, values parse as floats. Shared with other suites through `#[path]`.

#![allow(dead_code)]

use std::collections::BTreeMap;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A whole scrape.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// Family name -> type (`counter`, `gauge`, `histogram`...).
    pub types: BTreeMap<String, String>,
    pub help: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// The value of the one sample named `name` whose labels are exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.name == name && s.labels == want)
            .collect();
        assert!(
            found.len() <= 1,
            "{name}{labels:?} appears {} times",
            found.len()
        );
        found.first().map(|s| s.value)
    }

    /// Every sample named `name`.
    pub fn series(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }

    /// Every sample with `label` = `value`, whatever its name.
    pub fn with_label(&self, label: &str, value: &str) -> Vec<&Sample> {
        self.samples
            .iter()
            .filter(|s| s.labels.get(label).map(String::as_str) == Some(value))
            .collect()
    }

    /// The family a sample name belongs to (`x_bucket` -> `x` for histograms).
    pub fn family_of(&self, sample: &str) -> Option<&str> {
        if self.types.contains_key(sample) {
            return self.types.get_key_value(sample).map(|(k, _)| k.as_str());
        }
        for suffix in ["_bucket", "_sum", "_count"] {
            if let Some(base) = sample.strip_suffix(suffix) {
                if matches!(
                    self.types.get(base).map(String::as_str),
                    Some("histogram" | "summary")
                ) {
                    return self.types.get_key_value(base).map(|(k, _)| k.as_str());
                }
            }
        }
        None
    }

    /// Every name a query may use: family names and histogram sample names.
    pub fn names(&self) -> std::collections::BTreeSet<String> {
        let mut out: std::collections::BTreeSet<String> = self.types.keys().cloned().collect();
        for s in &self.samples {
            out.insert(s.name.clone());
        }
        out
    }
}

/// Parses a scrape; an error names the line.
pub fn parse(text: &str) -> Result<Scrape, String> {
    let mut scrape = Scrape::default();
    for (i, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", i + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').ok_or_else(|| at("TYPE".into()))?;
            if !matches!(
                kind,
                "counter" | "gauge" | "histogram" | "summary" | "untyped"
            ) {
                return Err(at(format!("type {kind}")));
            }
            if scrape
                .types
                .insert(name.to_owned(), kind.to_owned())
                .is_some()
            {
                return Err(at("family declared twice".into()));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            scrape.help.insert(name.to_owned(), help.to_owned());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let sample = sample(line).map_err(at)?;
        if scrape.family_of(&sample.name).is_none() {
            return Err(at("sample without a # TYPE".into()));
        }
        scrape.samples.push(sample);
    }
    Ok(scrape)
}

fn sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("no value")?;
    let name = &line[..name_end];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    {
        return Err(format!("metric name {name:?}"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let (pairs, after) = labels_tail(body)?;
        for (k, v) in pairs {
            if labels.insert(k.clone(), v).is_some() {
                return Err(format!("label {k} twice"));
            }
        }
        rest = after;
    }
    let rest = rest.strip_prefix(' ').ok_or("no space before the value")?;
    // A timestamp may follow the value; the speaker never writes one.
    let value_text = rest.split(' ').next().unwrap_or_default();
    let value = match value_text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|_| format!("value {v:?}"))?,
    };
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Label pairs in their order.
type Labels = Vec<(String, String)>;

/// Parses `k="v",k2="v2"}rest` (what follows the `{`) into labels and `rest`.
fn labels_tail(text: &str) -> Result<(Labels, &str), String> {
    let mut out = Vec::new();
    let mut i = 0;
    let bytes = text.as_bytes();
    loop {
        if bytes.get(i) == Some(&b'}') {
            return Ok((out, &text[i + 1..]));
        }
        let eq = text[i..].find('=').ok_or("label without =")? + i;
        let key = text[i..eq].to_owned();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("label name {key:?}"));
        }
        if bytes.get(eq + 1) != Some(&b'"') {
            return Err(format!("label {key} value not quoted"));
        }
        let mut value = String::new();
        let mut j = eq + 2;
        loop {
            let ch = text[j..].chars().next().ok_or("unterminated label value")?;
            j += ch.len_utf8();
            match ch {
                '\\' => {
                    let esc = text[j..].chars().next().ok_or("unterminated escape")?;
                    j += esc.len_utf8();
                    value.push(match esc {
                        'n' => '\n',
                        '\\' => '\\',
                        '"' => '"',
                        other => return Err(format!("escape \\{other}")),
                    });
                }
                '"' => break,
                c => value.push(c),
            }
        }
        out.push((key, value));
        i = j;
        if bytes.get(i) == Some(&b',') {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_families_labels_escapes_and_special_values() {
        let text = "# HELP a_total A counter.\n# TYPE a_total counter\n\
                    a_total{peer=\"192.0.2.1:179\",x=\"q\\\"\\\\\\n\"} 3\n\
                    # TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 0.5\nh_count 2\n\
                    # TYPE g gauge\ng -Inf\n";
        let s = parse(text).unwrap();
        assert_eq!(
            s.value("a_total", &[("peer", "192.0.2.1:179"), ("x", "q\"\\\n")]),
            Some(3.0)
        );
        assert_eq!(s.value("h_count", &[]), Some(2.0));
        assert_eq!(s.value("g", &[]), Some(f64::NEG_INFINITY));
        assert_eq!(s.family_of("h_bucket"), Some("h"));
        assert_eq!(s.help["a_total"], "A counter.");
    }

    #[test]
    fn refuses_what_is_not_the_format() {
        for bad in [
            "x 1\n",
            "# TYPE x gauge\nx{a=1} 1\n",
            "# TYPE x gauge\nx{a=\"1\" 1\n",
            "# TYPE x gauge\nx{a=\"1\",a=\"2\"} 1\n",
            "# TYPE x gauge\nx one\n",
            "# TYPE x gauge\n# TYPE x gauge\n",
            "# TYPE x widget\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
