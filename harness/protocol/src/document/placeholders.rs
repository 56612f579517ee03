//! Whole-value parameters: outside `[params]`, a string value that is
//! exactly `"${NAME}"` stands for the parameter's value, typed as TOML reads
//! it (`64` an integer, `0.5` a float, `true` a boolean, anything else a
//! string). This is what lets a number (a calibration size, a gate bound,
//! a timeout) vary by `--param` and so be bisected.
//!
//! The text is rewritten before it is deserialized, so every type check,
//! bound and message stays the one the literal value would get. A rewrite
//! moves the columns after it on its line, so [`Rewritten::original`] maps
//! a location in the rewritten text back to the file as written.

use std::collections::BTreeMap;
use std::ops::Range;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// One replaced value: where it was in the file, and its new length.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edit {
    original: Range<usize>,
    new_len: usize,
}

/// The protocol text with its whole-value placeholders replaced.
#[derive(Debug, Clone)]
pub struct Rewritten {
    /// The text to deserialize.
    pub text: String,
    edits: Vec<Edit>,
}

/// A placeholder naming a parameter that is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unset {
    /// Where the placeholder is in the file as written.
    pub span: Range<usize>,
    /// The parameter it names.
    pub name: String,
}

impl Rewritten {
    /// The span in the file as written of `span` in the rewritten text; a
    /// span inside a replaced value is the whole original value.
    pub fn original(&self, span: Range<usize>) -> Range<usize> {
        let back = |offset: usize, end: bool| {
            let mut shift: isize = 0;
            for e in &self.edits {
                let new_start = (e.original.start as isize + shift) as usize;
                let new_end = new_start + e.new_len;
                if offset < new_start || (end && offset == new_start) {
                    break;
                }
                if offset < new_end || (end && offset == new_end) {
                    return if end {
                        e.original.end
                    } else {
                        e.original.start
                    };
                }
                shift += e.new_len as isize - e.original.len() as isize;
            }
            (offset as isize - shift).max(0) as usize
        };
        let start = back(span.start, false);
        start..back(span.end, true).max(start)
    }
}

/// The parameter named by a string that is exactly `${NAME}`.
fn placeholder(value: &str) -> Option<&str> {
    let name = value.strip_prefix("${")?.strip_suffix('}')?;
    (!name.is_empty() && !name.contains(['$', '{', '}'])).then_some(name)
}

/// `value` as a TOML literal: a plain decimal integer, a finite decimal
/// float or a boolean as such, anything else as a quoted string. Only
/// plain spellings are typed, so a word like `inf`, `nan` or a date stays
/// a string.
fn literal(value: &str) -> String {
    let plain_number = !value.is_empty()
        && value
            .trim_start_matches(['-', '+'])
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
        && value
            .trim_start_matches(['-', '+'])
            .starts_with(|c: char| c.is_ascii_digit())
        && !value.ends_with('.');
    if value == "true" || value == "false" {
        return value.to_string();
    }
    if plain_number {
        if let Ok(i) = value.parse::<i64>() {
            return i.to_string();
        }
        if let Ok(f) = value.parse::<f64>()
            && f.is_finite()
            && value.matches('.').count() == 1
        {
            // Debug keeps the point (`1.0`), which TOML needs to read a float.
            return format!("{f:?}");
        }
    }
    basic_string(value)
}

/// `value` as a one-line TOML basic string: a replacement never adds a
/// line, so line numbers after it stay those of the file.
fn basic_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c < ' ' || c == '\u{7f}' => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn collect<'t>(value: &Spanned<DeValue<'t>>, found: &mut Vec<(Range<usize>, String)>) {
    match value.get_ref() {
        DeValue::String(s) => {
            if let Some(name) = placeholder(s) {
                found.push((value.span(), name.to_string()));
            }
        }
        DeValue::Array(items) => items.iter().for_each(|v| collect(v, found)),
        DeValue::Table(t) => t.values().for_each(|v| collect(v, found)),
        _ => {}
    }
}

/// Replace every whole-value placeholder outside the top-level `[params]`
/// table with its parameter from `params` (already expanded). A text that
/// does not parse is returned unchanged (deserializing it reports why).
pub fn rewrite(text: &str, params: &BTreeMap<String, String>) -> Result<Rewritten, Unset> {
    let mut found = Vec::new();
    if let Ok(doc) = DeTable::parse(text) {
        for (key, value) in doc.get_ref() {
            if key.get_ref() != "params" {
                collect(value, &mut found);
            }
        }
    }
    found.sort_by_key(|(span, _)| span.start);
    let mut out = String::with_capacity(text.len());
    let mut edits = Vec::with_capacity(found.len());
    let mut at = 0;
    for (span, name) in found {
        let Some(value) = params.get(&name) else {
            return Err(Unset { span, name });
        };
        let replacement = literal(value);
        out.push_str(&text[at..span.start]);
        out.push_str(&replacement);
        edits.push(Edit {
            original: span.clone(),
            new_len: replacement.len(),
        });
        at = span.end;
    }
    out.push_str(&text[at..]);
    Ok(Rewritten { text: out, edits })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn values_are_typed_as_toml_reads_them() {
        assert_eq!(literal("64"), "64");
        assert_eq!(literal("-3"), "-3");
        assert_eq!(literal("0.25"), "0.25");
        assert_eq!(literal("007.50"), "7.5");
        assert_eq!(literal("2.0"), "2.0");
        assert_eq!(literal("true"), "true");
        assert_eq!(literal("200 MiB"), "\"200 MiB\"");
        assert_eq!(literal("inf"), "\"inf\"");
        assert_eq!(literal("1e3"), "\"1e3\"");
        assert_eq!(literal("1.2.3"), "\"1.2.3\"");
        assert_eq!(literal("7."), "\"7.\"");
        assert_eq!(literal(""), "\"\"");
        assert_eq!(literal("a\"b\nc\\"), "\"a\\\"b\\u000Ac\\\\\"");
        // Too large for 64 bits: kept as text, refused by the key's type.
        assert_eq!(literal("99999999999999999999"), "\"99999999999999999999\"");
    }

    #[test]
    fn only_whole_values_outside_params_are_replaced() {
        let text = "[params]\nsize = \"${size}\"\n[[arm]]\nid = \"${id}\"\nnote = \"a ${size}\"\nplateau = { mib = \"${size}\", x = 1 }\n";
        let r = rewrite(text, &params(&[("size", "48"), ("id", "p")])).unwrap();
        assert_eq!(
            r.text,
            "[params]\nsize = \"${size}\"\n[[arm]]\nid = \"p\"\nnote = \"a ${size}\"\nplateau = { mib = 48, x = 1 }\n"
        );
        // `x` moved left by 5 bytes; its location is mapped back.
        let x_new = r.text.find("x = 1").unwrap();
        let x_old = text.find("x = 1").unwrap();
        assert_eq!(r.original(x_new..x_new + 5), x_old..x_old + 5);
        // A span inside the replaced value is the placeholder as written.
        let v = r.text.find("48").unwrap();
        let placeholder = text.rfind("\"${size}\"").unwrap();
        assert_eq!(r.original(v..v + 2), placeholder..placeholder + 9);
        // Before any edit nothing moves.
        assert_eq!(r.original(0..8), 0..8);
    }

    #[test]
    fn an_unset_placeholder_is_located() {
        let text = "[[arm]]\nid = \"a\"\nsize = \"${nope}\"\n";
        let e = rewrite(text, &params(&[])).unwrap_err();
        assert_eq!(e.name, "nope");
        assert_eq!(&text[e.span], "\"${nope}\"");
    }

    #[test]
    fn malformed_placeholders_are_left_alone() {
        for s in ["${}", "${a", "$a}", "${a}${b}", "x${a}"] {
            assert_eq!(placeholder(s), None, "{s}");
        }
        assert_eq!(placeholder("${a.b}"), Some("a.b"));
        let text = "not [ toml";
        assert_eq!(rewrite(text, &params(&[])).unwrap().text, text);
    }
}
