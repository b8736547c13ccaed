//! The YAML documents of a config file as a tree of nodes that remember where they were
//! written and, for scalars, the exact text and whether it was quoted.
//!
//! MetalLB read its config with Go's yaml.v2, which follows YAML 1.1: `yes`/`on` are
//! booleans, `0123` read into a string field stays `"0123"`, merge keys (`<<: *base`)
//! work. A YAML 1.2 value tree would change the meaning of such files (a password
//! `0123` would become `123`), so this module keeps the text as written and resolves a
//! scalar's type only when the field asks for one, with yaml.v2's rules.
//!
//! Owns: turning text into [`Node`]s (anchors, aliases and merge keys resolved).
//! Must not: know any config key; that is `raw`'s job.

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle, Span};

use super::error::{ConfigError, ConfigErrorKind, Location};

/// Collections nested deeper than this are refused; a config is at most six deep.
const MAX_DEPTH: usize = 64;
/// Total nodes after alias expansion: bounds the "billion laughs" document.
const MAX_NODES: usize = 200_000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub kind: NodeKind,
    pub at: Location,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeKind {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

/// A scalar as written. Only a plain (unquoted, untagged or core-tagged) scalar can be
/// null, a boolean or a number; anything quoted, a block scalar or tagged `!!str` is a
/// string whatever it looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scalar {
    pub text: String,
    pub plain: bool,
    /// A literal block (`|`): its lines are the source lines, so positions inside the
    /// text map back onto the file (a config embedded in a ConfigMap).
    pub literal: bool,
}

impl Scalar {
    /// YAML 1.1 null (yaml.v2's resolve table).
    pub fn is_null(&self) -> bool {
        self.plain && matches!(self.text.as_str(), "" | "~" | "null" | "Null" | "NULL")
    }

    /// YAML 1.1 booleans, as yaml.v2 resolves them.
    pub fn as_bool(&self) -> Option<bool> {
        if !self.plain {
            return None;
        }
        match self.text.as_str() {
            "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" | "true" | "True" | "TRUE" => {
                Some(true)
            }
            "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" | "false" | "False"
            | "FALSE" => Some(false),
            _ => None,
        }
    }

    /// A YAML 1.1 integer as yaml.v2 resolves it: optional sign, underscores ignored,
    /// `0x` hex, `0b` binary, `0o` or leading-`0` octal, else decimal. Values beyond
    /// i128 are not integers here (they are out of every range a config field has).
    pub fn as_int(&self) -> Option<i128> {
        if !self.plain {
            return None;
        }
        let t: String = self.text.chars().filter(|c| *c != '_').collect();
        let (neg, body) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t.as_str()),
        };
        let (radix, digits) = if let Some(h) = body.strip_prefix("0x") {
            (16, h)
        } else if let Some(b) = body.strip_prefix("0b") {
            (2, b)
        } else if let Some(o) = body.strip_prefix("0o") {
            (8, o)
        } else if body.len() > 1 && body.starts_with('0') {
            (8, &body[1..])
        } else {
            (10, body)
        };
        if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
            return None;
        }
        let v = i128::from_str_radix(digits, radix).ok()?;
        Some(if neg { -v } else { v })
    }

    /// A YAML 1.1 float (only used to say "must be an integer" precisely).
    pub fn is_float(&self) -> bool {
        if !self.plain {
            return false;
        }
        let t = self.text.trim_start_matches(['-', '+']);
        if matches!(t, ".inf" | ".Inf" | ".INF" | ".nan" | ".NaN" | ".NAN") {
            return true;
        }
        let t = t.replace('_', "");
        let (mantissa, exponent) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], Some(&t[i + 1..])),
            None => (t.as_str(), None),
        };
        let mantissa_ok = match mantissa.split_once('.') {
            Some((a, b)) => {
                (!a.is_empty() || !b.is_empty())
                    && a.chars().all(|c| c.is_ascii_digit())
                    && b.chars().all(|c| c.is_ascii_digit())
            }
            None => !mantissa.is_empty() && mantissa.chars().all(|c| c.is_ascii_digit()),
        };
        let exponent_ok = exponent.is_none_or(|e| {
            let e = e.trim_start_matches(['-', '+']);
            !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
        });
        mantissa_ok && exponent_ok && (mantissa.contains('.') || exponent.is_some())
    }
}

impl Node {
    /// How the node reads in an error message: `string "abc"`, `integer 5`, `a list`...
    pub fn describe(&self) -> String {
        match &self.kind {
            NodeKind::Seq(_) => "a list".to_string(),
            NodeKind::Map(_) => "a mapping".to_string(),
            NodeKind::Scalar(s) if s.is_null() => "null".to_string(),
            NodeKind::Scalar(s) if s.as_bool().is_some() => format!("boolean {}", s.text),
            NodeKind::Scalar(s) if s.as_int().is_some() => format!("integer {}", s.text),
            NodeKind::Scalar(s) if s.is_float() => format!("number {}", s.text),
            NodeKind::Scalar(s) => format!("string {:?}", s.text),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(&self.kind, NodeKind::Scalar(s) if s.is_null())
    }

    /// The node in YAML flow style (`{a: b}`, `[x, y]`), cut at 60 characters: to show
    /// a collection in a message where a single value was expected.
    pub fn flow(&self) -> String {
        const MAX: usize = 60;
        let mut out = String::new();
        self.write_flow(&mut out, MAX);
        if out.chars().count() > MAX {
            out = out.chars().take(MAX).collect::<String>() + "...";
        }
        out
    }

    fn write_flow(&self, out: &mut String, budget: usize) {
        if out.len() > budget {
            return;
        }
        match &self.kind {
            NodeKind::Scalar(s) if s.plain => out.push_str(&s.text),
            NodeKind::Scalar(s) => out.push_str(&format!("{:?}", s.text)),
            NodeKind::Seq(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_flow(out, budget);
                }
                out.push(']');
            }
            NodeKind::Map(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    k.write_flow(out, budget);
                    out.push_str(": ");
                    v.write_flow(out, budget);
                }
                out.push('}');
            }
        }
    }

    fn size(&self) -> usize {
        match &self.kind {
            NodeKind::Scalar(_) => 1,
            NodeKind::Seq(items) => 1 + items.iter().map(Node::size).sum::<usize>(),
            NodeKind::Map(entries) => {
                1 + entries
                    .iter()
                    .map(|(k, v)| k.size() + v.size())
                    .sum::<usize>()
            }
        }
    }
}

/// Every document of the stream, in order. An empty stream has none.
pub(crate) fn parse_documents(text: &str) -> Result<Vec<Node>, ConfigError> {
    let options = granit_parser::options! {
        emit_comments: false,
        flow_nesting_limit: MAX_DEPTH,
        block_nesting_limit: MAX_DEPTH,
    };
    let mut builder = Builder::default();
    let lines: Vec<&str> = text.lines().collect();
    for item in Parser::new_from_str_with_options(text, options) {
        let (event, span) = item.map_err(|e| {
            let m = e.marker();
            syntax(location(m.line(), m.col()), e.info())
        })?;
        let starts_node = matches!(
            event,
            Event::Scalar(..)
                | Event::SequenceStart(..)
                | Event::MappingStart(..)
                | Event::Alias(_)
        );
        if starts_node && matches!(builder.stack.last(), Some(Frame::Seq { .. })) {
            let line = lines.get(span.start.line().wrapping_sub(1)).copied();
            if let Some(tab) = line.and_then(|l| tab_after_dash(l, span.start.col())) {
                return Err(syntax(
                    location(span.start.line(), tab),
                    "a tab after the list dash \"-\": write a space (YAML 1.1 parsers, MetalLB's among them, refuse a tab there)",
                ));
            }
        }
        builder.event(event, span)?;
    }
    Ok(builder.documents)
}

/// Where (0-based char column) a tab lies between a block sequence's `-` and the item
/// starting at char column `col` of `line`, if one does. libyaml, and so MetalLB's
/// yaml.v2, refuses a tab there ("found character that cannot start any token"); the
/// parser here takes it, so the rule is kept here to refuse the same files.
fn tab_after_dash(line: &str, col: usize) -> Option<usize> {
    let before: Vec<char> = line.chars().take(col).collect();
    let blank = |c: &char| matches!(c, ' ' | '\t');
    let gap = before.iter().rposition(|c| !blank(c))? + 1;
    let dash_is_indicator = before[gap - 1] == '-' && (gap == 1 || blank(&before[gap - 2]));
    if !dash_is_indicator {
        return None;
    }
    before[gap..]
        .iter()
        .position(|c| *c == '\t')
        .map(|i| gap + i)
}

fn syntax(at: Location, message: impl Into<String>) -> ConfigError {
    ConfigError::new("", Some(at), ConfigErrorKind::Syntax(message.into()))
}

fn location(line: usize, col: usize) -> Location {
    Location {
        line,
        column: col + 1,
    }
}

fn span_location(span: &Span) -> Location {
    location(span.start.line(), span.start.col())
}

enum Frame {
    Seq {
        at: Location,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        at: Location,
        anchor: usize,
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    documents: Vec<Node>,
    nodes: usize,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> Result<(), ConfigError> {
        let at = span_location(&span);
        match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => Ok(()),
            Event::DocumentStart(..) => {
                self.anchors.clear();
                Ok(())
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = match tag.as_deref() {
                    None => matches!(style, ScalarStyle::Plain),
                    Some(tag) if tag.is_yaml_core_schema() => {
                        tag.suffix() != "str" && matches!(style, ScalarStyle::Plain)
                    }
                    // The non-specific tag `!` makes a plain scalar a string.
                    Some(tag) if format!("{}{}", tag.handle(), tag.suffix()) == "!" => false,
                    Some(tag) => {
                        return Err(syntax(
                            at,
                            format!("unsupported tag \"{}{}\"", tag.handle(), tag.suffix()),
                        ))
                    }
                };
                let literal = matches!(style, ScalarStyle::Literal);
                let node = Node {
                    kind: NodeKind::Scalar(Scalar {
                        text: text.into_owned(),
                        plain,
                        literal,
                    }),
                    at,
                };
                self.complete(node, anchor)
            }
            Event::SequenceStart(_, anchor, tag) => {
                check_collection_tag(tag.as_deref(), "seq", at)?;
                self.stack.push(Frame::Seq {
                    at,
                    anchor,
                    items: Vec::new(),
                });
                Ok(())
            }
            Event::MappingStart(_, anchor, tag) => {
                check_collection_tag(tag.as_deref(), "map", at)?;
                self.stack.push(Frame::Map {
                    at,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                });
                Ok(())
            }
            Event::SequenceEnd => match self.stack.pop() {
                Some(Frame::Seq { at, anchor, items }) => self.complete(
                    Node {
                        kind: NodeKind::Seq(items),
                        at,
                    },
                    anchor,
                ),
                _ => Err(syntax(at, "unbalanced sequence end")),
            },
            Event::MappingEnd => match self.stack.pop() {
                Some(Frame::Map {
                    at,
                    anchor,
                    entries,
                    ..
                }) => {
                    let entries = merge_keys(entries)?;
                    self.complete(
                        Node {
                            kind: NodeKind::Map(entries),
                            at,
                        },
                        anchor,
                    )
                }
                _ => Err(syntax(at, "unbalanced mapping end")),
            },
            Event::Alias(id) => match self.anchors.get(&id) {
                Some(node) => {
                    // The copy keeps the anchor's location: errors point at the definition.
                    let node = node.clone();
                    self.complete(node, 0)
                }
                None => Err(syntax(
                    at,
                    "alias to a node that contains it (recursive alias)",
                )),
            },
            Event::UnresolvedAlias(name) => Err(syntax(at, format!("unknown alias {name:?}"))),
            // Comments and anchor metadata are presentation only.
            _ => Ok(()),
        }
    }

    fn complete(&mut self, node: Node, anchor: usize) -> Result<(), ConfigError> {
        self.nodes += node.size();
        if self.nodes > MAX_NODES {
            return Err(syntax(
                node.at,
                "document too large (more than 200000 nodes after aliases)",
            ));
        }
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.documents.push(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => entries.push((k, node)),
            },
        }
        Ok(())
    }
}

fn check_collection_tag(
    tag: Option<&granit_parser::Tag>,
    expected: &str,
    at: Location,
) -> Result<(), ConfigError> {
    match tag {
        None => Ok(()),
        Some(t) if t.is_yaml_core_schema() && t.suffix() == expected => Ok(()),
        Some(t) => Err(syntax(
            at,
            format!("unsupported tag \"{}{}\"", t.handle(), t.suffix()),
        )),
    }
}

/// Applies YAML merge keys (`<<: *base` or `<<: [*a, *b]`) as yaml.v2 does: keys
/// written in the mapping win over merged ones, and earlier merged mappings win over
/// later ones.
fn merge_keys(entries: Vec<(Node, Node)>) -> Result<Vec<(Node, Node)>, ConfigError> {
    let is_merge = |k: &Node| matches!(&k.kind, NodeKind::Scalar(s) if s.plain && s.text == "<<");
    if !entries.iter().any(|(k, _)| is_merge(k)) {
        return Ok(entries);
    }
    let mut own = Vec::new();
    let mut merged: Vec<(Node, Node)> = Vec::new();
    for (k, v) in entries {
        if !is_merge(&k) {
            own.push((k, v));
            continue;
        }
        let sources = match v.kind {
            NodeKind::Map(m) => vec![m],
            NodeKind::Seq(items) => {
                let mut maps = Vec::new();
                for item in items {
                    match item.kind {
                        NodeKind::Map(m) => maps.push(m),
                        _ => return Err(syntax(item.at, "merge key list items must be mappings")),
                    }
                }
                maps
            }
            NodeKind::Scalar(_) => return Err(syntax(v.at, "merge key value must be a mapping")),
        };
        for source in sources {
            for (mk, mv) in source {
                if !merged.iter().any(|(k, _)| same_key(k, &mk)) {
                    merged.push((mk, mv));
                }
            }
        }
    }
    let extra: Vec<_> = merged
        .into_iter()
        .filter(|(mk, _)| !own.iter().any(|(k, _)| same_key(k, mk)))
        .collect();
    own.extend(extra);
    Ok(own)
}

fn same_key(a: &Node, b: &Node) -> bool {
    match (&a.kind, &b.kind) {
        (NodeKind::Scalar(x), NodeKind::Scalar(y)) => x.text == y.text,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scalar(text: &str, plain: bool) -> Scalar {
        Scalar {
            text: text.to_string(),
            plain,
            literal: false,
        }
    }

    fn one(text: &str) -> Node {
        let mut docs = parse_documents(text).expect("valid yaml");
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    fn map_get<'a>(node: &'a Node, key: &str) -> &'a Node {
        match &node.kind {
            NodeKind::Map(entries) => {
                &entries
                    .iter()
                    .find(|(k, _)| matches!(&k.kind, NodeKind::Scalar(s) if s.text == key))
                    .expect(key)
                    .1
            }
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn yaml11_resolution_table() {
        // (text, plain, null, bool, int, float)
        type Case = (&'static str, bool, bool, Option<bool>, Option<i128>, bool);
        let cases: &[Case] = &[
            ("", true, true, None, None, false),
            ("~", true, true, None, None, false),
            ("null", true, true, None, None, false),
            ("null", false, false, None, None, false),
            ("yes", true, false, Some(true), None, false),
            ("Off", true, false, Some(false), None, false),
            ("yes", false, false, None, None, false),
            ("TRUE", true, false, Some(true), None, false),
            ("tRue", true, false, None, None, false),
            ("65000", true, false, None, Some(65000), false),
            ("65000", false, false, None, None, false),
            ("0123", true, false, None, Some(0o123), false),
            ("0x1F", true, false, None, Some(31), false),
            ("0b101", true, false, None, Some(5), false),
            ("0o17", true, false, None, Some(15), false),
            ("-5", true, false, None, Some(-5), false),
            ("+5", true, false, None, Some(5), false),
            ("65_000", true, false, None, Some(65000), false),
            ("0", true, false, None, Some(0), false),
            ("09", true, false, None, None, false),
            ("1.5", true, false, None, None, true),
            ("1e3", true, false, None, None, true),
            (".5", true, false, None, None, true),
            (".inf", true, false, None, None, true),
            ("1.2.3", true, false, None, None, false),
            ("10.0.0.1", true, false, None, None, false),
            ("90s", true, false, None, None, false),
            ("-", true, false, None, None, false),
        ];
        for &(text, plain, null, b, i, f) in cases {
            let s = scalar(text, plain);
            assert_eq!(s.is_null(), null, "null {text:?}");
            assert_eq!(s.as_bool(), b, "bool {text:?}");
            assert_eq!(s.as_int(), i, "int {text:?}");
            assert_eq!(s.is_float(), f, "float {text:?}");
        }
    }

    #[test]
    fn scalars_keep_text_and_quoting() {
        let doc = one("a: 0123\nb: \"0123\"\nc: |\n  line\nd: !!str 5\ne: ! 5\nf: !!int 5\n");
        let s = |k: &str| match &map_get(&doc, k).kind {
            NodeKind::Scalar(s) => s.clone(),
            _ => panic!("{k} not a scalar"),
        };
        assert_eq!(s("a"), scalar("0123", true));
        assert_eq!(s("b"), scalar("0123", false));
        assert_eq!(
            s("c"),
            Scalar {
                text: "line\n".into(),
                plain: false,
                literal: true
            }
        );
        assert_eq!(s("d"), scalar("5", false));
        assert_eq!(s("e"), scalar("5", false));
        assert_eq!(s("f"), scalar("5", true));
    }

    #[test]
    fn locations_are_one_based() {
        let doc = one("peers:\n- peer-address: 10.0.0.1\n  hold-time: 2s\n");
        let peers = map_get(&doc, "peers");
        let NodeKind::Seq(items) = &peers.kind else {
            panic!("not a seq")
        };
        let ht = map_get(&items[0], "hold-time");
        assert_eq!(
            ht.at,
            Location {
                line: 3,
                column: 14
            }
        );
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let doc = one("base: &b {hold-time: 9s, peer-asn: 1}\n\
             list: [*b]\n\
             peer:\n  <<: *b\n  peer-asn: 2\n\
             multi:\n  <<: [{x: 1}, {x: 2, y: 3}]\n");
        let NodeKind::Seq(list) = &map_get(&doc, "list").kind else {
            panic!()
        };
        assert_eq!(list.len(), 1);
        assert!(
            matches!(&map_get(&list[0], "hold-time").kind, NodeKind::Scalar(s) if s.text == "9s")
        );
        // An alias points at where the anchored node was written.
        assert_eq!(map_get(&list[0], "hold-time").at.line, 1);
        let peer = map_get(&doc, "peer");
        assert!(matches!(&map_get(peer, "peer-asn").kind, NodeKind::Scalar(s) if s.text == "2"));
        assert!(matches!(&map_get(peer, "hold-time").kind, NodeKind::Scalar(s) if s.text == "9s"));
        let multi = map_get(&doc, "multi");
        assert!(matches!(&map_get(multi, "x").kind, NodeKind::Scalar(s) if s.text == "1"));
        assert!(matches!(&map_get(multi, "y").kind, NodeKind::Scalar(s) if s.text == "3"));
    }

    #[test]
    fn documents_and_errors() {
        assert_eq!(parse_documents("").unwrap().len(), 0);
        assert_eq!(parse_documents("a: 1\n---\nb: 2\n").unwrap().len(), 2);
        let e = parse_documents("a: [1, 2\n").unwrap_err();
        assert!(matches!(e.kind, ConfigErrorKind::Syntax(_)), "{e}");
        assert!(e.location.is_some());
        let e = parse_documents("a: !custom 1\n").unwrap_err();
        assert_eq!(e.to_string(), "invalid YAML: unsupported tag \"!custom\"");
        let e = parse_documents("a: *nope\n").unwrap_err();
        assert!(matches!(e.kind, ConfigErrorKind::Syntax(_)), "{e}");
        let deep = "[".repeat(1000) + &"]".repeat(1000);
        assert!(parse_documents(&deep).is_err());
    }

    #[test]
    fn alias_bomb_is_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..8 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = parse_documents(&text).unwrap_err();
        assert!(e.to_string().contains("document too large"), "{e}");
    }

    #[test]
    fn a_tab_after_a_block_list_dash() {
        // (line, item column) -> the tab's column, or None.
        let cases: &[(&str, usize, Option<usize>)] = &[
            ("-\tpeer-address: x", 2, Some(1)),
            ("  - \t10.0.0.0/24", 5, Some(4)),
            ("- - \tx", 5, Some(4)),
            ("- peer-address: x", 2, None),
            ("  -   x", 6, None),
            // Not a list dash: a dash right after text, or no dash at all.
            ("a-\tb", 3, None),
            ("", 0, None),
        ];
        for (line, col, want) in cases {
            assert_eq!(tab_after_dash(line, *col), *want, "{line:?}");
        }
    }

    #[test]
    fn flow_shows_a_collection_briefly() {
        assert_eq!(
            one("{a: [1, \"x\"], b: {c: d}}").flow(),
            r#"{a: [1, "x"], b: {c: d}}"#
        );
        let long = format!("[{}]", vec!["abcdefghij"; 20].join(", "));
        let shown = one(&long).flow();
        assert!(
            shown.ends_with("...") && shown.chars().count() == 63,
            "{shown}"
        );
    }
}
