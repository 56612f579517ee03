//! The command line described for shells and `man`: `memqual completions
//! SHELL` (clap_complete) and `memqual man [--dir DIR]` (clap_mangen), both
//! generated from the clap command tree, and the check that every argument
//! of every subcommand has help text.

use crate::exit::{self, Failure, harness};
use anyhow::Context;
use clap::Command;
use std::path::Path;

/// The shells `memqual completions` writes for.
pub use clap_complete::Shell;

/// Completions for `shell` on stdout.
pub fn completions(mut cmd: Command, shell: Shell) -> Result<u8, Failure> {
    let name = cmd.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, name, &mut out);
    crate::console::out(format_args!("{}", String::from_utf8_lossy(&out)));
    Ok(exit::PASS)
}

/// The man page of `memqual` (roff) on stdout, or with `dir` one page per
/// command and subcommand (`memqual.1`, `memqual-run.1`, …) into it.
pub fn man(cmd: Command, dir: Option<&Path>) -> Result<u8, Failure> {
    render_man(cmd, dir).map_err(harness)?;
    Ok(exit::PASS)
}

fn render_man(cmd: Command, dir: Option<&Path>) -> anyhow::Result<()> {
    match dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
            note!("memqual: man pages written to {}", dir.display());
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .context("cannot render the man page")?;
            crate::console::out(format_args!("{}", String::from_utf8_lossy(&out)));
        }
    }
    Ok(())
}

/// Every argument, in every subcommand, without help text
/// (`memqual run --json`), clap's own `--help` and `--version` aside. The
/// binary's tests use it on the real command line.
pub fn args_without_help(cmd: &Command) -> Vec<String> {
    let mut missing = Vec::new();
    walk(cmd, cmd.get_name(), &mut missing);
    missing
}

fn walk(cmd: &Command, path: &str, missing: &mut Vec<String>) {
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if matches!(id, "help" | "version") {
            continue;
        }
        if arg.get_help().is_none() && arg.get_long_help().is_none() {
            let shown = match arg.get_long() {
                Some(long) => format!("--{long}"),
                None => id.to_uppercase(),
            };
            missing.push(format!("{path} {shown}"));
        }
    }
    for sub in cmd.get_subcommands() {
        if sub.get_name() == "help" {
            continue;
        }
        if sub.get_about().is_none() && sub.get_long_about().is_none() {
            missing.push(format!("{path} {} (the subcommand)", sub.get_name()));
        }
        walk(sub, &format!("{path} {}", sub.get_name()), missing);
    }
}
