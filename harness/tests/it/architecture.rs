//! ARCHITECTURE.md and CONTRIBUTING.md against the repository: every path
//! they name in backticks exists, the crate graph ARCHITECTURE.md states is
//! the one the `Cargo.toml` files declare, and no crate reaches one it may
//! not depend on. Also: every relative link in the project's Markdown pages
//! (README.md, docs/, ARCHITECTURE.md, CONTRIBUTING.md) leads to a file, and
//! to a heading of it when it names an anchor. Reads files only; no memqual
//! binary is needed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness/ sits inside the repository")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Lines outside fenced code blocks, with their 1-based numbers.
fn prose_lines(doc: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in doc.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// Backticked spans that name a repository path: no spaces, a `/`, not
/// absolute or home-relative, no placeholder (`<id>`, `*`, `{a,b}`), no URL.
/// Run-directory paths are written with placeholders (`arms/<id>/…`), so
/// they are not taken for repository paths.
fn repository_paths(doc: &str) -> Vec<(usize, String)> {
    let mut paths = Vec::new();
    for (number, line) in prose_lines(doc) {
        for span in line.split('`').skip(1).step_by(2) {
            let is_path = span.contains('/')
                && !span.contains(char::is_whitespace)
                && !span.starts_with(['/', '~', '$'])
                && !span.contains(['<', '>', '*', '{', '}', '|', ':', '…', '='])
                && !span.contains("://");
            if is_path {
                paths.push((number, span.to_string()));
            }
        }
    }
    paths
}

/// The folders `.gitignore` anchors at the repository root (`/target`):
/// what lies under them is made by a build or a run, never committed.
fn build_output_roots(gitignore: &str) -> Vec<String> {
    gitignore
        .lines()
        .filter_map(|l| l.trim().strip_prefix('/'))
        .map(|l| l.trim_end_matches('/'))
        .filter(|l| !l.is_empty() && !l.contains('/'))
        .map(str::to_string)
        .collect()
}

/// Every named path that does not exist under `root` (a trailing `/` must
/// be a folder). A path under a build-output root (`target/patched/`)
/// exists only after a build, so it is not looked for: that it is a build
/// output is the check, and a clean clone passes.
fn missing_paths(root: &Path, doc_name: &str, doc: &str) -> Vec<String> {
    let outputs = build_output_roots(&read(&root.join(".gitignore")));
    repository_paths(doc)
        .into_iter()
        .filter(|(_, p)| {
            let first = p.split('/').next().unwrap_or_default();
            if outputs.iter().any(|o| o == first) {
                return false;
            }
            let full = root.join(p.trim_end_matches('/'));
            if p.ends_with('/') {
                !full.is_dir()
            } else {
                !full.exists()
            }
        })
        .map(|(line, p)| format!("{doc_name}:{line}: `{p}` does not exist in the repository"))
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(doc: &str) -> BTreeSet<String> {
    prose_lines(doc)
        .into_iter()
        .filter_map(|(_, l)| {
            let text = l.trim_start_matches('#');
            (l.starts_with('#') && text.starts_with(' ')).then(|| anchor(text))
        })
        .collect()
}

/// Every relative link of `doc` (at `doc_path`) whose file or anchor is missing.
fn broken_links(root: &Path, doc_path: &Path, doc: &str) -> Vec<String> {
    let name = doc_path.strip_prefix(root).unwrap_or(doc_path).display();
    let mut broken = Vec::new();
    for (number, line) in prose_lines(doc) {
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            let target = &after[..end];
            rest = &after[end..];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file_path = if file.is_empty() {
                doc_path.to_path_buf()
            } else {
                doc_path.parent().unwrap_or(root).join(file)
            };
            if !file_path.exists() {
                broken.push(format!("{name}:{number}: link to {target}: no such file"));
                continue;
            }
            if !fragment.is_empty() && !anchors(&read(&file_path)).contains(fragment) {
                broken.push(format!(
                    "{name}:{number}: link to {target}: no heading with anchor #{fragment}"
                ));
            }
        }
    }
    broken
}

/// One row of ARCHITECTURE.md's crate table.
#[derive(Debug)]
struct CrateRow {
    name: String,
    folder: String,
    depends_on: BTreeSet<String>,
    forbidden: BTreeSet<String>,
}

fn backticked(cell: &str) -> BTreeSet<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The table under `## Crates`: crate, folder, depends on, may not depend on.
fn crate_table(doc: &str) -> Vec<CrateRow> {
    let start = doc
        .find("\n## Crates\n")
        .expect("ARCHITECTURE.md has a `## Crates` section");
    let section = &doc[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    section
        .lines()
        .skip_while(|l| !l.starts_with("| crate |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            assert!(cells.len() >= 6, "crate table row has too few cells: {l}");
            let single = |cell: &str| -> String {
                let names = backticked(cell);
                assert_eq!(names.len(), 1, "expected one name in `{cell}` ({l})");
                names.into_iter().next().unwrap_or_default()
            };
            CrateRow {
                name: single(cells[1]),
                folder: single(cells[2]),
                depends_on: backticked(cells[3]),
                forbidden: backticked(cells[4]),
            }
        })
        .collect()
}

/// The workspace's crates: name → (folder, workspace crates it depends on,
/// any kind of dependency, any target).
fn workspace_graph(root: &Path) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let workspace: toml::Table =
        toml::from_str(&read(&root.join("Cargo.toml"))).expect("the workspace Cargo.toml parses");
    let members: Vec<String> = workspace["workspace"]["members"]
        .as_array()
        .expect("workspace.members is a list")
        .iter()
        .map(|m| m.as_str().expect("a member is a path").to_string())
        .collect();
    let manifests: Vec<(String, toml::Table)> = members
        .iter()
        .map(|m| {
            let text = read(&root.join(m).join("Cargo.toml"));
            let table = toml::from_str(&text).unwrap_or_else(|e| panic!("{m}/Cargo.toml: {e}"));
            (m.clone(), table)
        })
        .collect();
    let names: BTreeSet<String> = manifests
        .iter()
        .map(|(_, t)| {
            t["package"]["name"]
                .as_str()
                .expect("package.name")
                .to_string()
        })
        .collect();
    manifests
        .into_iter()
        .map(|(member, table)| {
            let mut sections: Vec<&toml::Table> = Vec::new();
            let kinds = ["dependencies", "dev-dependencies", "build-dependencies"];
            sections.extend(kinds.iter().filter_map(|k| table.get(*k)?.as_table()));
            if let Some(targets) = table.get("target").and_then(|t| t.as_table()) {
                for target in targets.values().filter_map(|t| t.as_table()) {
                    sections.extend(kinds.iter().filter_map(|k| target.get(*k)?.as_table()));
                }
            }
            let deps = sections
                .iter()
                .flat_map(|s| s.iter())
                .map(|(key, value)| {
                    // `foo = { package = "bar" }` depends on bar.
                    value
                        .get("package")
                        .and_then(|p| p.as_str())
                        .unwrap_or(key)
                        .to_string()
                })
                .filter(|d| names.contains(d))
                .collect();
            let name = table["package"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            (name, (format!("{member}/"), deps))
        })
        .collect()
}

fn reachable(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(node) = stack.pop() {
        for next in graph.get(&node).into_iter().flatten() {
            if seen.insert(next.clone()) {
                stack.push(next.clone());
            }
        }
    }
    seen
}

/// Every way the stated table and the real graph disagree, and every rule
/// the real graph breaks.
fn graph_problems(
    rows: &[CrateRow],
    real: &BTreeMap<String, (String, BTreeSet<String>)>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let stated: BTreeSet<&String> = rows.iter().map(|r| &r.name).collect();
    let actual: BTreeSet<&String> = real.keys().collect();
    if stated != actual {
        problems.push(format!(
            "ARCHITECTURE.md lists the crates {stated:?}, the workspace has {actual:?}"
        ));
    }
    let edges: BTreeMap<String, BTreeSet<String>> = real
        .iter()
        .map(|(name, (_, deps))| (name.clone(), deps.clone()))
        .collect();
    for row in rows {
        let Some((folder, deps)) = real.get(&row.name) else {
            continue;
        };
        if &row.folder != folder {
            problems.push(format!(
                "`{}` is stated to live in {}, Cargo.toml puts it in {folder}",
                row.name, row.folder
            ));
        }
        if &row.depends_on != deps {
            problems.push(format!(
                "`{}` is stated to depend on {:?}, its Cargo.toml says {deps:?}",
                row.name, row.depends_on
            ));
        }
        let reach = reachable(&edges, &row.name);
        for banned in &row.forbidden {
            if !actual.contains(banned) {
                problems.push(format!(
                    "`{}` may not depend on `{banned}`, which is no workspace crate",
                    row.name
                ));
            } else if reach.contains(banned) {
                problems.push(format!(
                    "`{}` may not depend on `{banned}`, but it does (directly or through another crate)",
                    row.name
                ));
            }
        }
    }
    problems
}

#[test]
fn every_path_architecture_and_contributing_name_exists() {
    let root = repo_root();
    let mut problems = Vec::new();
    for name in ["ARCHITECTURE.md", "CONTRIBUTING.md"] {
        let doc = read(&root.join(name));
        let named = repository_paths(&doc).len();
        // A parser that found nothing would pass vacuously.
        assert!(named >= 20, "{name} names only {named} repository paths");
        problems.extend(missing_paths(&root, name, &doc));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_build_output_is_not_looked_for_but_a_missing_source_path_still_fails() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(
        root.path().join(".gitignore"),
        "/target\n/runs\n/harness/fuzz/corpus/\n",
    )
    .unwrap();
    std::fs::create_dir(root.path().join("src")).unwrap();
    assert_eq!(
        build_output_roots(&read(&root.path().join(".gitignore"))),
        ["target", "runs"]
    );
    let doc = "Builds into `target/patched/` from `src/`; see `srcs/lib.rs` and `harness/fuzz/corpus/x`.\n";
    assert_eq!(
        missing_paths(root.path(), "DOC.md", doc),
        [
            "DOC.md:1: `srcs/lib.rs` does not exist in the repository",
            "DOC.md:1: `harness/fuzz/corpus/x` does not exist in the repository",
        ]
    );
}

#[test]
fn the_stated_crate_graph_is_the_real_one_and_keeps_its_rules() {
    let root = repo_root();
    let rows = crate_table(&read(&root.join("ARCHITECTURE.md")));
    let real = workspace_graph(&root);
    assert!(
        real.len() >= 8,
        "found only {} workspace crates",
        real.len()
    );
    let problems = graph_problems(&rows, &real);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_relative_link_in_the_project_pages_resolves() {
    let root = repo_root();
    let mut pages: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md"]
        .iter()
        .map(|p| root.join(p))
        .collect();
    let docs = std::fs::read_dir(root.join("docs")).expect("docs/ exists");
    pages.extend(
        docs.filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "md")),
    );
    assert!(pages.len() >= 8, "found only {} pages", pages.len());
    let problems: Vec<String> = pages
        .iter()
        .flat_map(|p| broken_links(&root, p, &read(p)))
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_license_is_the_one_cargo_toml_names() {
    let root = repo_root();
    let workspace: toml::Table =
        toml::from_str(&read(&root.join("Cargo.toml"))).expect("Cargo.toml parses");
    assert_eq!(
        workspace["workspace"]["package"]["license"].as_str(),
        Some("Apache-2.0")
    );
    let license = read(&root.join("LICENSE"));
    assert!(license.contains("Apache License\n") && license.contains("Version 2.0, January 2004"));
    assert!(license.contains("END OF TERMS AND CONDITIONS"));
}

// The checkers themselves, on inputs made to fail.

#[test]
fn a_named_path_that_does_not_exist_is_reported() {
    let root = repo_root();
    let doc = "Real: `harness/src/exit.rs`, `sampler/src/`.\n\
               Gone: `harness/src/no_such_module.rs`, `harness/src/exit.rs/`.\n\
               Not paths: `arms/<id>/markers.jsonl`, `/proc/self/status`, `--features runners/metal`.\n\
               ```\nharness/src/in_a_code_block.rs\n```\n";
    assert_eq!(repository_paths(doc).len(), 4);
    assert_eq!(
        missing_paths(&root, "doc", doc),
        [
            "doc:2: `harness/src/no_such_module.rs` does not exist in the repository",
            "doc:2: `harness/src/exit.rs/` does not exist in the repository",
        ]
    );
}

#[test]
fn a_forbidden_edge_and_an_unstated_edge_are_reported() {
    let row = |name: &str, deps: &[&str], forbidden: &[&str]| CrateRow {
        name: name.into(),
        folder: format!("{name}/"),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        forbidden: forbidden.iter().map(|d| d.to_string()).collect(),
    };
    let rows = [
        row("sampler", &[], &["reports"]),
        row("contract", &["sampler"], &["reports"]),
        row("reports", &["contract"], &[]),
    ];
    let real_of = |edges: &[(&str, &[&str])]| -> BTreeMap<String, (String, BTreeSet<String>)> {
        edges
            .iter()
            .map(|(n, d)| {
                let deps = d.iter().map(|x| x.to_string()).collect();
                (n.to_string(), (format!("{n}/"), deps))
            })
            .collect()
    };
    let clean = real_of(&[
        ("sampler", &[]),
        ("contract", &["sampler"]),
        ("reports", &["contract"]),
    ]);
    assert_eq!(graph_problems(&rows, &clean), Vec::<String>::new());
    // A back edge: sampler → reports.
    let with_back_edge = real_of(&[
        ("sampler", &["reports"]),
        ("contract", &["sampler"]),
        ("reports", &["contract"]),
    ]);
    let problems = graph_problems(&rows, &with_back_edge);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`sampler` is stated to depend on {}")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("`sampler` may not depend on `reports`, but it does")),
        "{problems:?}"
    );
    // contract reaches reports only through sampler: still forbidden.
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("`contract` may not depend on `reports`, but it does")),
        "{problems:?}"
    );
}

#[test]
fn a_link_to_a_missing_file_or_heading_is_reported() {
    let root = repo_root();
    let doc_path = root.join("ARCHITECTURE.md");
    let doc = "[ok](README.md#exit-codes) [ok](#crates) [web](https://example.invalid/x)\n\
               [gone](docs/nope.md) [bad anchor](README.md#no-such-heading)\n\
               ## Crates\n";
    assert_eq!(
        broken_links(&root, &doc_path, doc),
        [
            "ARCHITECTURE.md:2: link to docs/nope.md: no such file",
            "ARCHITECTURE.md:2: link to README.md#no-such-heading: no heading with anchor #no-such-heading",
        ]
    );
    assert_eq!(anchor("`peak_between_samples`"), "peak_between_samples");
    assert_eq!(
        anchor("System counter freshness (macOS)"),
        "system-counter-freshness-macos"
    );
}
