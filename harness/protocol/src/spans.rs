//! Where a key sits in a protocol's TOML text. Checks run on the typed
//! protocol after deserialization and name the key they refused as a dotted
//! path (`arm[1].calibrate.plateau.mib`); this resolves such a path to the
//! byte span of its value in the source, so the error can say file:line:col.

use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// The spanned document tree of one protocol text.
pub struct Spans<'t> {
    doc: Option<Spanned<DeTable<'t>>>,
}

/// One step of a key path: a table key or an array index.
#[derive(Debug, PartialEq, Eq)]
enum Step<'p> {
    Key(&'p str),
    Index(usize),
}

/// `a.b[2].c` → `a`, `b`, 2, `c`. Protocol keys never contain `.` or `[`.
fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let (name, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !name.is_empty() {
            out.push(Step::Key(name));
        }
        while let Some(close) = rest.find(']') {
            if let Ok(i) = rest[1..close].parse() {
                out.push(Step::Index(i));
            }
            rest = &rest[close + 1..];
        }
    }
    out
}

impl<'t> Spans<'t> {
    /// Parse `text` for spans (a text that does not parse has none).
    pub fn parse(text: &'t str) -> Self {
        Spans {
            doc: DeTable::parse(text).ok(),
        }
    }

    /// The span of the value at `path`, or of its deepest ancestor present
    /// in the text (a key left at its default is located at its table);
    /// `None` when not even the first step is written.
    pub fn value(&self, path: &str) -> Option<Range<usize>> {
        let doc = self.doc.as_ref()?;
        let mut table: &DeTable = doc.get_ref();
        let mut found: Option<Range<usize>> = None;
        let mut current: Option<&Spanned<DeValue>> = None;
        for step in steps(path) {
            let next = match (step, current.map(Spanned::get_ref)) {
                (Step::Key(k), None) => table.get(k),
                (Step::Key(k), Some(DeValue::Table(t))) => {
                    table = t;
                    table.get(k)
                }
                (Step::Index(i), Some(DeValue::Array(a))) => a.get(i),
                _ => None,
            };
            let Some(next) = next else { break };
            found = Some(next.span());
            current = Some(next);
        }
        found
    }

    /// The span of key `name` (not its value) in the top-level table `table`:
    /// where a `[params]` entry is declared.
    pub fn key(&self, table: &str, name: &str) -> Option<Range<usize>> {
        let doc = self.doc.as_ref()?;
        let DeValue::Table(t) = doc.get_ref().get(table)?.get_ref() else {
            return None;
        };
        t.get_key_value(name).map(|(k, _)| k.span())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"schema_version = 1
name = "t"

[params]
"a.b" = "x"

[[arm]]
id = "a"
[arm.calibrate]
plateau = { mib = 8 }

[[arm]]
id = "b"
[arm.calibrate]
steps = { mib = 1, at_requests = [0, 7] }
[[arm.gate]]
kind = "validity"
max_skipped_fraction = 2.0
"#;

    fn at(span: Option<Range<usize>>) -> &'static str {
        let s = span.expect("located");
        &TEXT[s]
    }

    #[test]
    fn paths_resolve_to_values_through_tables_and_arrays() {
        let spans = Spans::parse(TEXT);
        assert_eq!(at(spans.value("arm[0].calibrate.plateau.mib")), "8");
        assert_eq!(
            at(spans.value("arm[1].calibrate.steps.at_requests[1]")),
            "7"
        );
        assert_eq!(
            at(spans.value("arm[1].gate[0].max_skipped_fraction")),
            "2.0"
        );
        assert_eq!(at(spans.value("name")), "\"t\"");
    }

    #[test]
    fn a_missing_key_falls_back_to_its_table() {
        let spans = Spans::parse(TEXT);
        let table = spans.value("arm[0].calibrate.plateau").unwrap();
        assert_eq!(spans.value("arm[0].calibrate.plateau.hold_ms"), Some(table));
        assert_eq!(spans.value("sampling.period_ms"), None);
        assert_eq!(Spans::parse("not toml [").value("a"), None);
    }

    #[test]
    fn keys_with_dots_are_found_by_name() {
        let spans = Spans::parse(TEXT);
        assert_eq!(at(spans.key("params", "a.b")), "\"a.b\"");
        assert_eq!(spans.key("params", "zz"), None);
    }

    #[test]
    fn steps_split_keys_and_indices() {
        assert_eq!(
            steps("arm[2].gate[0].x"),
            [
                Step::Key("arm"),
                Step::Index(2),
                Step::Key("gate"),
                Step::Index(0),
                Step::Key("x")
            ]
        );
    }
}
