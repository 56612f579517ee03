//! `.cargo/cmake`, the CMake that whisper-rs-sys's build script runs
//! (`.cargo/config.toml`): the system's when there is one, else CMake from
//! PyPI, else a message that says what to install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cargo/cmake")
}

/// A PATH folder holding only the named tools, linked from the system's.
fn bin_with(dir: &Path, tools: &[&str]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in tools {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is not in /usr/bin or /bin"));
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    bin
}

fn run(path: &str, cache: &Path, from_pip: bool) -> Output {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg(script())
        .arg("--version")
        .env_clear()
        .env("PATH", path)
        // pip's own download cache stays the user's.
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("MEMQUAL_CACHE", cache);
    if from_pip {
        cmd.env("MEMQUAL_CMAKE_FROM_PIP", "1");
    }
    cmd.output().unwrap()
}

const SHELL_TOOLS: &[&str] = &["dirname", "basename", "mkdir", "rm", "touch"];

#[test]
fn without_cmake_or_python_it_says_what_to_install() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_with(tmp.path(), SHELL_TOOLS);
    let out = run(bin.to_str().unwrap(), tmp.path(), false);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(127), "{stderr}");
    assert!(
        stderr.contains("neither cmake nor Python 3") && stderr.contains("apt install cmake"),
        "{stderr}"
    );
}

/// A `cmake` on PATH is the one used: here a stand-in that says who it is,
/// so the test needs no system CMake.
#[test]
fn a_cmake_on_path_is_used_and_nothing_is_installed() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_with(tmp.path(), SHELL_TOOLS);
    let cmake = bin.join("cmake");
    std::fs::write(
        &cmake,
        "#!/bin/sh\necho \"stand-in cmake called with: $*\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&cmake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run(bin.to_str().unwrap(), tmp.path(), false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "stand-in cmake called with: --version\n"
    );
    // Nothing was installed: the cache stays empty.
    assert!(!tmp.path().join("cmake").exists());
}

/// Debian's python3 without python3-venv: `-m venv` fails, pip remains.
#[test]
fn without_a_venv_module_cmake_comes_from_pip_into_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = bin_with(tmp.path(), SHELL_TOOLS);
    let python = bin.join("python3");
    std::fs::write(
        &python,
        "#!/bin/sh\nif [ \"$1\" = -m ] && [ \"$2\" = venv ]; then\n  echo 'ensurepip is not available' >&2; exit 1\nfi\nexec /usr/bin/python3 \"$@\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = bin.to_str().unwrap();
    let out = run(path, tmp.path(), true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("cmake version 3."),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(tmp.path().join("cmake/pkg/.complete").is_file());
    // The second call uses the cache and installs nothing.
    let again = run(path, tmp.path(), true);
    assert!(again.status.success());
    assert!(!String::from_utf8_lossy(&again.stderr).contains("installing"));
}
