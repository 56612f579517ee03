//! The test suite's own promise, checked: `cargo test --workspace` passes on
//! a fresh clone with only what the README asks for, so a test that needs
//! more is ignored with its reason (see `tests/common/prerequisites.rs`):
//! - every `#[ignore]` in the workspace reads "needs WHAT (…): why", and
//!   the README's table of what a fresh machine lacks names WHAT;
//! - `.ci/run` runs the README's test command first, as written, and then
//!   the ignored tests with their tools installed;
//! - no test prints that it skipped and then passes.
//!
//! Reads files only.

use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("harness/ sits inside the repository")
        .to_path_buf()
}

/// Every `.rs` file of the repository outside build outputs.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `(file:line, reason)` of every `#[ignore…]` attribute in `text`; a bare
/// `#[ignore]` has an empty reason.
fn ignore_reasons(name: &str, text: &str) -> Vec<(String, String)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("#[ignore"))
        .map(|(i, l)| {
            let reason = l
                .split_once('"')
                .and_then(|(_, rest)| rest.rsplit_once('"'))
                .map(|(r, _)| r.to_string())
                .unwrap_or_default();
            (format!("{name}:{}", i + 1), reason)
        })
        .collect()
}

/// What an ignore reason says is needed ("needs WHAT (…): why" → WHAT's
/// names: `espeak-ng and sox` gives both).
fn needed(reason: &str) -> Option<Vec<String>> {
    let what = reason.strip_prefix("needs ")?;
    let what = what
        .split([' ', ':'])
        .take_while(|w| !w.starts_with('('))
        .collect::<Vec<_>>();
    let names: Vec<String> = what
        .into_iter()
        .filter(|w| !w.is_empty() && *w != "and")
        .map(str::to_string)
        .collect();
    (!names.is_empty()).then_some(names)
}

/// The README's section on what a fresh machine lacks.
fn readme_prerequisites(readme: &str) -> &str {
    let start = readme
        .find("### What the tests need")
        .expect("README.md has a section `### What the tests need`");
    let rest = &readme[start..];
    let end = rest[4..].find("\n#").map_or(rest.len(), |e| e + 4);
    &rest[..end]
}

fn problems_of_ignored_tests(files: &[(String, String)], readme: &str) -> Vec<String> {
    let table = readme_prerequisites(readme);
    let mut problems = Vec::new();
    for (name, text) in files {
        for (at, reason) in ignore_reasons(name, text) {
            match needed(&reason) {
                None => problems.push(format!(
                    "{at}: #[ignore] without \"needs WHAT (…): why\": {reason:?}"
                )),
                Some(names) => {
                    for n in names {
                        if !table.contains(&format!("`{n}`")) {
                            problems.push(format!(
                                "{at}: needs `{n}`, which README.md's \"What the tests need\" does not name"
                            ));
                        }
                    }
                }
            }
        }
    }
    problems
}

/// A test that says it skipped and returns passes without testing.
fn silent_skips(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (name, text) in files {
        for (i, line) in text.lines().enumerate() {
            let l = line.to_lowercase();
            // Spelled in pieces, so this line is not a finding itself.
            let prints = l.contains(concat!("eprint", "ln!"));
            let says_skipped = l.contains(concat!("ski", "pp"));
            if prints && says_skipped {
                found.push(format!("{name}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    found
}

fn workspace_sources() -> Vec<(String, String)> {
    let root = repo_root();
    let mut paths = Vec::new();
    rust_files(&root, &mut paths);
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p.strip_prefix(&root).unwrap().display().to_string(), text)
        })
        .collect()
}

#[test]
fn every_ignored_test_names_what_it_needs_and_the_readme_lists_it() {
    let files = workspace_sources();
    let ignored: usize = files.iter().map(|(n, t)| ignore_reasons(n, t).len()).sum();
    // The browser, XSD, minisign, groff, drift and full-disk tests at least.
    assert!(ignored >= 7, "found only {ignored} ignored tests");
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let problems = problems_of_ignored_tests(&files, &readme);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let skips = silent_skips(&files);
    assert!(
        skips.is_empty(),
        "tests that print a skip and pass (make what they need, or ignore them with \"needs …\"):\n{}",
        skips.join("\n")
    );
}

#[test]
fn ci_runs_the_readme_test_command_first_and_then_the_ignored_tests() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let command = "cargo test --workspace --no-fail-fast";
    assert!(
        readme.contains(&format!("```sh\n{command}\n```")),
        "README.md's test command is not `{command}`"
    );
    // A command's output may be kept (`2>&1 | tee FILE`): the command is the
    // part before that.
    let commands: Vec<&str> = ci
        .lines()
        .map(|l| l.split(" 2>&1 | tee ").next().unwrap_or_default().trim())
        .filter(|l| l.starts_with("cargo ") || l.starts_with("apt-get install"))
        .collect();
    assert_eq!(
        commands.first().copied(),
        Some(command),
        ".ci/run's first build or install step must be the README's test command: {commands:?}"
    );
    assert!(
        commands.contains(&"cargo test --workspace --no-fail-fast -- --ignored"),
        ".ci/run must run the ignored tests once their tools are installed: {commands:?}"
    );
}

#[test]
fn a_bad_ignore_reason_an_unlisted_tool_and_a_silent_skip_are_reported() {
    let readme = "# x\n### What the tests need\n| `chromium` | ignored |\n## next\n`xmllint`\n";
    // Built from pieces, so that this file's own lines hold no attribute
    // or skip message for the scan of the real sources to find.
    let (attr, print, said) = ("#[ignore", "eprintln", "SKIPPED: no tool");
    let text = [
        format!("{attr}]"),
        "fn a() {}".to_string(),
        format!("{attr} = \"needs chromium (Debian package chromium): x\"]"),
        format!("{attr} = \"needs xmllint (Debian package libxml2-utils): y\"]"),
        format!("fn b() {{ {print}!(\"{said}\"); }}"),
    ]
    .join("\n");
    let files = vec![("t.rs".to_string(), text)];
    assert_eq!(
        problems_of_ignored_tests(&files, readme),
        [
            "t.rs:1: #[ignore] without \"needs WHAT (…): why\": \"\"",
            "t.rs:4: needs `xmllint`, which README.md's \"What the tests need\" does not name",
        ]
    );
    assert_eq!(
        needed("needs espeak-ng and sox (Debian packages espeak-ng, sox): z"),
        Some(vec!["espeak-ng".to_string(), "sox".to_string()])
    );
    assert_eq!(
        needed("needs root (mount): w"),
        Some(vec!["root".to_string()])
    );
    assert_eq!(
        silent_skips(&files),
        [format!("t.rs:5: fn b() {{ {print}!(\"{said}\"); }}")]
    );
}
