//! Protocol parameters: `[params]` and `--param NAME=VALUE`, named strings
//! that `${name}` expands in model paths and in other parameters.
//!
//! Expansion is bounded: a value may nest at most [`MAX_DEPTH`] parameters
//! deep and expand to at most [`MAX_LEN`] bytes (so a table that doubles a
//! string at every step fails at once instead of growing until killed),
//! all of them together to at most [`MAX_TOTAL`] bytes, each parameter is
//! expanded once, cycles and self-references are refused
//! with the chain of parameters and where each is declared, and a `${`
//! left over after expansion is an error rather than a literal.

use std::collections::BTreeMap;

/// Longest expanded value, in bytes: Linux's `PATH_MAX`.
pub const MAX_LEN: usize = 4096;

/// Deepest chain of parameters referring to parameters.
pub const MAX_DEPTH: usize = 16;

/// All expanded values together, in bytes: many parameters that each repeat
/// one long value must not add up to what one could not.
pub const MAX_TOTAL: usize = 1 << 20;

/// Parameters as declared, with where each came from (for messages).
pub struct Declared<'a> {
    /// The protocol's `[params]` with the `--param` overrides, by name, not yet
    /// expanded.
    pub values: &'a BTreeMap<String, String>,
    /// `file:line:col` of a `[params]` entry, or `--param NAME`.
    pub origin: &'a dyn Fn(&str) -> String,
}

/// A parameter that cannot be expanded; `name` is the one to point at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParamError {
    /// The parameter the error is about.
    pub name: String,
    /// What is wrong with it.
    pub message: String,
}

/// The one rule for `--param NAME=VALUE`, in every command (`run`, `soak`,
/// `calibrate`, `bisect`): `NAME` must be declared under the protocol's
/// `[params]`, so a typo (`sise` for `size`) is refused before anything
/// runs instead of leaving the default to be measured. `None` when it is
/// declared; else the message refusing it.
pub fn undeclared<'a>(
    name: &str,
    file: &str,
    declared: impl IntoIterator<Item = &'a String>,
) -> Option<String> {
    let declared: Vec<&str> = declared.into_iter().map(String::as_str).collect();
    if declared.contains(&name) {
        return None;
    }
    // A control character in the name is shown escaped, never printed raw.
    let name = name.escape_debug().to_string();
    let known = if declared.is_empty() {
        "it declares none".to_string()
    } else {
        let shown: Vec<String> = declared
            .iter()
            .map(|d| d.escape_debug().to_string())
            .collect();
        format!("it declares {}", shown.join(", "))
    };
    Some(format!(
        "--param {name}: `{name}` is not a parameter of {file}: {known}. Declare it under \
         [params] (with a default) and write \"${{{name}}}\" where the value goes"
    ))
}

/// Expand every parameter; the result holds no `${`.
pub fn resolve(declared: &Declared) -> Result<BTreeMap<String, String>, ParamError> {
    let mut done = BTreeMap::new();
    let mut total = 0usize;
    for name in declared.values.keys() {
        let mut chain = Vec::new();
        total = total.saturating_add(expand(name, declared, &mut chain, &mut done)?.len());
        if total > MAX_TOTAL {
            return Err(ParamError {
                name: name.clone(),
                message: format!(
                    "params expand to more than {MAX_TOTAL} bytes in all (reached at {})",
                    named(declared, name)
                ),
            });
        }
    }
    Ok(done)
}

fn named(declared: &Declared, name: &str) -> String {
    format!("`{name}` ({})", (declared.origin)(name))
}

fn expand(
    name: &str,
    declared: &Declared,
    chain: &mut Vec<String>,
    done: &mut BTreeMap<String, String>,
) -> Result<String, ParamError> {
    if let Some(v) = done.get(name) {
        return Ok(v.clone());
    }
    if let Some(start) = chain.iter().position(|n| n == name) {
        let mut cycle: Vec<String> = chain[start..].iter().map(|n| named(declared, n)).collect();
        cycle.push(format!("`{name}`"));
        let message = if chain.len() - start == 1 {
            format!(
                "param {} refers to itself: `${{{name}}}` can never be expanded",
                named(declared, name)
            )
        } else {
            format!(
                "params refer to each other in a cycle: {}",
                cycle.join(" → ")
            )
        };
        return Err(ParamError {
            name: chain[start].clone(),
            message,
        });
    }
    if chain.len() >= MAX_DEPTH {
        let path: Vec<&str> = chain.iter().map(String::as_str).collect();
        return Err(ParamError {
            name: chain[0].clone(),
            message: format!(
                "params nest more than {MAX_DEPTH} deep: {} → {name}",
                path.join(" → ")
            ),
        });
    }
    let raw = declared.values.get(name).map(String::as_str).unwrap_or("");
    chain.push(name.to_string());
    let here = named(declared, name);
    let result = substitute_with(
        raw,
        |r| {
            if !declared.values.contains_key(r) {
                return Err(ParamError {
                    name: name.to_string(),
                    message: format!(
                        "param {here} uses `${{{r}}}`, which is not set: declare it under [params] or pass --param {r}=…"
                    ),
                });
            }
            expand(r, declared, chain, done)
        },
        |problem| ParamError {
            name: name.to_string(),
            message: format!("param {here} {problem}"),
        },
    );
    chain.pop();
    let value = result?;
    if value.contains("${") {
        return Err(ParamError {
            name: name.to_string(),
            message: format!(
                "param {here} expands to {value:?}, which still holds `${{`: parameters are expanded once"
            ),
        });
    }
    done.insert(name.to_string(), value.clone());
    Ok(value)
}

/// Replace every `${name}` of `text` by `lookup(name)`, stopping as soon as
/// the result would exceed [`MAX_LEN`]; `problem` turns what is wrong with
/// the text itself into the caller's error.
fn substitute_with<E>(
    text: &str,
    mut lookup: impl FnMut(&str) -> Result<String, E>,
    problem: impl Fn(String) -> E,
) -> Result<String, E> {
    let too_long = || problem(format!("expands to more than {MAX_LEN} bytes"));
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| problem(format!("has an unclosed `${{` in {text:?}")))?;
        let name = &after[..end];
        if name.is_empty() {
            return Err(problem(format!(
                "has `${{}}`, which names no parameter, in {text:?}"
            )));
        }
        let value = lookup(name)?;
        if out.len() + value.len() > MAX_LEN {
            return Err(too_long());
        }
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    if out.len() + rest.len() > MAX_LEN {
        return Err(too_long());
    }
    out.push_str(rest);
    Ok(out)
}

/// Replace every `${name}` in `text` (a model path, a sidecar path) with
/// its resolved parameter; `what` names the key in messages.
pub fn substitute(
    what: &str,
    text: &str,
    resolved: &BTreeMap<String, String>,
) -> Result<String, String> {
    let out = substitute_with(
        text,
        |name| {
            resolved.get(name).cloned().ok_or_else(|| {
                format!(
                    "parameter `{name}` is not set: declare it under [params] or pass --param {name}=…"
                )
            })
        },
        |problem| format!("{what} {problem}"),
    )?;
    if out.contains("${") {
        return Err(format!(
            "{what} expands to {out:?}, which still holds `${{`: parameters are expanded once"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve_map(pairs: &[(&str, &str)]) -> Result<BTreeMap<String, String>, ParamError> {
        let values: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let origin = |name: &str| format!("p.toml:{name}");
        resolve(&Declared {
            values: &values,
            origin: &origin,
        })
    }

    #[test]
    fn nested_parameters_expand() {
        let r = resolve_map(&[
            ("root", "/m"),
            ("f16", "${root}/f16.bin"),
            ("alias", "${f16}"),
        ])
        .unwrap();
        assert_eq!(r["alias"], "/m/f16.bin");
        assert_eq!(r["root"], "/m");
    }

    #[test]
    fn self_reference_and_cycles_name_every_parameter() {
        let e = resolve_map(&[("m", "${m}")]).unwrap_err();
        assert_eq!(e.name, "m");
        assert_eq!(
            e.message,
            "param `m` (p.toml:m) refers to itself: `${m}` can never be expanded"
        );
        let e = resolve_map(&[("a", "${b}"), ("b", "x${a}")]).unwrap_err();
        assert_eq!(e.name, "a");
        assert_eq!(
            e.message,
            "params refer to each other in a cycle: `a` (p.toml:a) → `b` (p.toml:b) → `a`"
        );
        let e = resolve_map(&[("a", "${b}"), ("b", "${c}"), ("c", "${b}")]).unwrap_err();
        assert!(
            e.message.contains("`b` (p.toml:b) → `c` (p.toml:c) → `b`"),
            "{e}"
        );
    }

    #[test]
    fn doubling_stops_at_the_length_bound() {
        let mut pairs = vec![("p0".to_string(), "xx".to_string())];
        for i in 1..=40 {
            pairs.push((format!("p{i}"), format!("${{p{}}}${{p{}}}", i - 1, i - 1)));
        }
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let e = resolve_map(&pairs).unwrap_err();
        // p11 is 4096 bytes, p12 would be 8192.
        assert_eq!(e.name, "p12");
        assert_eq!(
            e.message,
            "param `p12` (p.toml:p12) expands to more than 4096 bytes"
        );
    }

    #[test]
    fn many_copies_of_one_long_value_are_bounded_in_all() {
        let long = "x".repeat(MAX_LEN);
        let mut pairs = vec![("big".to_string(), long)];
        for i in 0..300 {
            pairs.push((format!("c{i:03}"), "${big}".to_string()));
        }
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let e = resolve_map(&pairs).unwrap_err();
        // big and c000..c254 are 256 × 4096 bytes = 1 MiB; c255 passes it.
        assert_eq!(e.name, "c255");
        assert!(
            e.message
                .starts_with("params expand to more than 1048576 bytes in all"),
            "{e}"
        );
        assert_eq!(resolve_map(&pairs[..200]).unwrap().len(), 200);
    }

    #[test]
    fn chains_deeper_than_the_bound_are_refused() {
        let names: Vec<String> = (0..=MAX_DEPTH).map(|i| format!("n{i:02}")).collect();
        let mut pairs: Vec<(String, String)> = names
            .windows(2)
            .map(|w| (w[0].clone(), format!("${{{}}}", w[1])))
            .collect();
        pairs.push((names[MAX_DEPTH].clone(), "end".into()));
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let e = resolve_map(&pairs).unwrap_err();
        assert!(
            e.message
                .starts_with("params nest more than 16 deep: n00 → n01"),
            "{e}"
        );
        // One level less is fine.
        assert_eq!(resolve_map(&pairs[1..]).unwrap()["n01"], "end");
    }

    #[test]
    fn leftovers_unknowns_and_malformed_references_are_errors() {
        let e = resolve_map(&[("d", "$"), ("x", "${d}{y}")]).unwrap_err();
        assert_eq!(e.name, "x");
        assert!(e.message.contains("still holds `${`"), "{e}");
        let e = resolve_map(&[("a", "${nope}")]).unwrap_err();
        assert!(
            e.message.contains("uses `${nope}`, which is not set"),
            "{e}"
        );
        let e = resolve_map(&[("a", "${b")]).unwrap_err();
        assert!(
            e.message.contains("param `a` (p.toml:a) has an unclosed"),
            "{e}"
        );
        let e = resolve_map(&[("a", "${}")]).unwrap_err();
        assert!(e.message.contains("names no parameter"), "{e}");
    }

    #[test]
    fn substitution_refuses_unset_long_and_leftover_text() {
        let r = BTreeMap::from([("d".to_string(), "$".to_string())]);
        assert_eq!(substitute("model", "a/${d}b", &r).unwrap(), "a/$b");
        let e = substitute("model", "${d}{x}", &r).unwrap_err();
        assert!(e.starts_with("model expands to \"${x}\""), "{e}");
        let e = substitute("model", "${m}/x.bin", &r).unwrap_err();
        assert!(e.contains("parameter `m` is not set"), "{e}");
        let long = "x".repeat(MAX_LEN + 1);
        let e = substitute("model", &long, &r).unwrap_err();
        assert_eq!(e, "model expands to more than 4096 bytes");
    }
}
