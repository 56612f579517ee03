//! Each crate target's top-level modules use only the siblings that
//! ARCHITECTURE.md lists for them.
//!
//! The table between the `module-deps` markers in ARCHITECTURE.md names, for
//! every crate target, each top-level module and the sibling modules it may
//! use. The edges are the ones `module_graph` finds (through `use`, paths in
//! code and re-exports; test-only code left out). The check fails, naming the
//! edge and where it was first seen, on:
//! - an edge the table does not list (a new dependency to decide on);
//! - a listed edge no code uses any more (the table says more than is true);
//! - a module or crate target missing from the table, or listed but gone.
//!
//! `MEMQUAL_BLESS=1 cargo test -p harness --test it module_deps` rewrites
//! the table from the code, for a change that adds an edge on purpose.

use super::module_graph::{Graph, graphs_of, members, targets, top_modules, workspace_root};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const BEGIN: &str = "<!-- module-deps:begin -->";
const END: &str = "<!-- module-deps:end -->";

/// Crate target (its root file from the workspace root) -> module -> the
/// siblings the table lets it use.
type Deps = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// Crate target -> module -> each sibling it uses -> where that is first
/// seen, as `file:line`.
type Edges = BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>>;

/// The top-level dependencies the code has.
fn actual(root: &Path, targets_of: &[std::path::PathBuf]) -> Edges {
    let mut deps = Edges::new();
    for target in targets_of {
        let shown = target
            .strip_prefix(root)
            .unwrap_or(target)
            .display()
            .to_string();
        let modules = top_modules(target);
        if modules.is_empty() {
            continue; // a single-file binary has no siblings to order
        }
        let graphs = graphs_of(target);
        let empty = Graph::default();
        let top = graphs.get(&Vec::new()).unwrap_or(&empty);
        let entry = deps.entry(shown.clone()).or_default();
        for module in modules {
            let uses = top
                .edges
                .get(&module)
                .into_iter()
                .flatten()
                .map(|(to, site)| {
                    let file = site.file.strip_prefix(root).unwrap_or(&site.file);
                    (to.clone(), format!("{}:{}", file.display(), site.line))
                })
                .collect();
            entry.insert(module, uses);
        }
    }
    deps
}

/// The table between the markers: `#### `target`` headings, then rows
/// `| `module` | `a`, `b` |` (`—` for none).
fn declared(text: &str) -> Result<Deps, String> {
    let start = text
        .find(BEGIN)
        .ok_or("ARCHITECTURE.md has no module-deps:begin marker")?;
    let end = text
        .find(END)
        .ok_or("ARCHITECTURE.md has no module-deps:end marker")?;
    let first_line = text[..start].lines().count() + 1;
    let mut deps = Deps::new();
    let mut target: Option<String> = None;
    for (n, line) in text[start..end].lines().enumerate() {
        let at = first_line + n;
        let names = |s: &str| -> Vec<String> {
            s.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        };
        if let Some(heading) = line.strip_prefix("#### ") {
            let name = names(heading).into_iter().next().ok_or(format!(
                "ARCHITECTURE.md:{at}: a crate target heading names it in backticks"
            ))?;
            deps.entry(name.clone()).or_default();
            target = Some(name);
        } else if line.starts_with("| `") {
            let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
            let [module, uses] = cells[..] else {
                return Err(format!("ARCHITECTURE.md:{at}: a row has two cells: {line}"));
            };
            let target = target.as_ref().ok_or(format!(
                "ARCHITECTURE.md:{at}: a row before any crate target heading"
            ))?;
            let module = names(module).into_iter().next().unwrap_or_default();
            let previous = deps
                .entry(target.clone())
                .or_default()
                .insert(module.clone(), names(uses).into_iter().collect());
            if previous.is_some() {
                return Err(format!(
                    "ARCHITECTURE.md:{at}: `{module}` listed twice under `{target}`"
                ));
            }
        }
    }
    Ok(deps)
}

/// Every way the code and the table disagree, one line each.
fn disagreements(actual: &Edges, declared: &Deps) -> Vec<String> {
    let mut out = Vec::new();
    for target in declared.keys().filter(|t| !actual.contains_key(*t)) {
        out.push(format!(
            "{target}: listed, but no such crate target has modules"
        ));
    }
    for (target, modules) in actual {
        let Some(listed) = declared.get(target) else {
            out.push(format!("{target}: a crate target the table does not list"));
            continue;
        };
        for module in listed.keys().filter(|m| !modules.contains_key(*m)) {
            out.push(format!(
                "{target}: `{module}` is listed but is not a top-level module"
            ));
        }
        for (module, uses) in modules {
            let Some(allowed) = listed.get(module) else {
                out.push(format!("{target}: `{module}` is not listed"));
                continue;
            };
            for (to, site) in uses.iter().filter(|(to, _)| !allowed.contains(*to)) {
                out.push(format!(
                    "{target}: `{module}` uses `{to}` at {site}, which the table does not allow"
                ));
            }
            for to in allowed.iter().filter(|to| !uses.contains_key(*to)) {
                out.push(format!(
                    "{target}: `{module}` is listed as using `{to}`, but no code does any more"
                ));
            }
        }
    }
    out
}

/// The table as ARCHITECTURE.md holds it, from the code's dependencies.
fn render(deps: &Edges) -> String {
    let mut text = String::from(BEGIN);
    text.push('\n');
    for (target, modules) in deps {
        text += &format!("\n#### `{target}`\n\n| module | may use |\n|---|---|\n");
        for (module, uses) in modules {
            let uses = if uses.is_empty() {
                "—".to_string()
            } else {
                uses.keys()
                    .map(|u| format!("`{u}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            text += &format!("| `{module}` | {uses} |\n");
        }
    }
    text.push('\n');
    text += END;
    text
}

fn workspace_targets(root: &Path) -> Vec<std::path::PathBuf> {
    members(root).iter().flat_map(|m| targets(m)).collect()
}

#[test]
fn the_top_level_modules_use_only_what_architecture_md_lists() {
    let root = workspace_root();
    let path = root.join("ARCHITECTURE.md");
    let text = std::fs::read_to_string(&path).expect("read ARCHITECTURE.md");
    let actual = actual(&root, &workspace_targets(&root));
    assert!(
        actual.len() >= 6,
        "only {} crate targets with modules",
        actual.len()
    );
    let declared = declared(&text).unwrap_or_else(|e| panic!("{e}"));
    let problems = disagreements(&actual, &declared);
    if !problems.is_empty() && std::env::var_os("MEMQUAL_BLESS").is_some() {
        let start = text.find(BEGIN).expect("checked by declared");
        let end = text.find(END).expect("checked by declared") + END.len();
        let updated = format!("{}{}{}", &text[..start], render(&actual), &text[end..]);
        std::fs::write(&path, updated).expect("write ARCHITECTURE.md");
        return;
    }
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md's module table and the code disagree. A new edge must \
         keep the layering (no cycle, lower modules not reaching up); then \
         MEMQUAL_BLESS=1 cargo test -p harness --test it module_deps rewrites \
         the table:\n{}",
        problems.join("\n")
    );
}

/// A planted edge, a stale listing and an unlisted module are each named.
#[test]
fn the_check_names_a_planted_edge_and_a_stale_listing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod low;\nmod mid;\nmod top;\nmod new;\n",
    )
    .unwrap();
    std::fs::write(src.join("low.rs"), "pub struct Low;\n").unwrap();
    std::fs::write(src.join("mid.rs"), "pub fn f(_: crate::low::Low) {}\n").unwrap();
    std::fs::write(
        src.join("top.rs"),
        "use crate::mid::f;\nuse crate::low::Low;\n",
    )
    .unwrap();
    std::fs::write(src.join("new.rs"), "").unwrap();
    let actual = actual(dir.path(), &[src.join("lib.rs")]);
    let table = format!(
        "x\n{BEGIN}\n#### `src/lib.rs`\n\n| module | may use |\n|---|---|\n\
         | `low` | `mid` |\n| `mid` | `low` |\n| `top` | `mid` |\n{END}\n"
    );
    let listed = declared(&table).unwrap();
    let problems = disagreements(&actual, &listed);
    assert_eq!(
        problems,
        [
            "src/lib.rs: `low` is listed as using `mid`, but no code does any more",
            "src/lib.rs: `new` is not listed",
            "src/lib.rs: `top` uses `low` at src/top.rs:2, which the table does not allow",
        ],
    );
    // What bless writes is what the check then accepts.
    let blessed = declared(&render(&actual)).expect("the rendered table parses");
    assert!(disagreements(&actual, &blessed).is_empty());
}

/// A table that cannot be read is refused with the line to fix.
#[test]
fn a_malformed_table_is_refused_with_its_line() {
    let table = |rows: &str| format!("intro\n{BEGIN}\n{rows}{END}\n");
    let early = declared(&table("| `a` | — |\n")).unwrap_err();
    assert_eq!(
        early,
        "ARCHITECTURE.md:3: a row before any crate target heading"
    );
    let twice = declared(&table("#### `x/lib.rs`\n| `a` | — |\n| `a` | `b` |\n")).unwrap_err();
    assert_eq!(
        twice,
        "ARCHITECTURE.md:5: `a` listed twice under `x/lib.rs`"
    );
    let unmarked = declared("no markers here").unwrap_err();
    assert!(unmarked.contains("module-deps:begin"), "{unmarked}");
}
