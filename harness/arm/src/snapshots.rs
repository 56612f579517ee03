//! Tool snapshots of the worker at phase boundaries (and at the protocol's
//! cadence): each tool's raw output is kept under `snapshots/`, its parse,
//! wall time and exit status go to `snapshots.jsonl`.
//!
//! Linux reads `/proc/<pid>/smaps_rollup` and the cgroup v2 memory files of
//! the worker's cgroup; macOS runs `vmmap -summary PID`, `footprint PID`,
//! `vm_stat` and `memory_pressure` (never `-S`, which changes the system).

use crate::boundary::{Job, RecordSink};
use reports::snapshots::{
    SNAPSHOTS, SNAPSHOTS_DIR, SnapshotOutcome, SnapshotRecord, ToolRun, Trigger,
};
use run_dir::{Rel, RunDir};
use sampler::captures::{self, ParseOptions, Tool};
use sampler::clock;
#[cfg(not(target_os = "macos"))]
use std::path::{Path, PathBuf};
#[cfg(any(test, target_os = "macos"))]
use {
    std::io::Read,
    std::process::{Command, Stdio},
    std::time::Duration,
};

/// A tool that does not finish in this long is killed (a hung `vmmap`
/// must not hold the snapshot thread for the rest of the arm).
#[cfg(any(test, target_os = "macos"))]
const TOOL_TIMEOUT: Duration = Duration::from_secs(30);

/// Takes snapshots of one worker into its arm folder.
pub(crate) struct Snapshotter {
    pid: u32,
    run: RunDir,
    arm: Rel,
    records: RecordSink,
}

impl Snapshotter {
    pub(crate) fn create(pid: u32, run: &RunDir, arm: &Rel) -> Result<Self, run_dir::RunDirError> {
        run.create_dir(&arm.join(SNAPSHOTS_DIR))?;
        Ok(Snapshotter {
            pid,
            run: run.clone(),
            arm: arm.clone(),
            records: RecordSink::open(run, &arm.join(SNAPSHOTS))?,
        })
    }
}

impl Job for Snapshotter {
    fn take(&mut self, seq: u64, trigger: Trigger, due_ns: u64) {
        let started_ns = clock::monotonic_ns();
        let prefix = format!("{seq:04}-{}", trigger.label());
        let dir = self.arm.join(SNAPSHOTS_DIR);
        let tools = platform_tools(self.pid)
            .into_iter()
            .map(|source| source.run(&self.run, &dir, &prefix))
            .collect();
        let record = SnapshotRecord {
            seq,
            trigger,
            due_ns,
            outcome: SnapshotOutcome::Taken {
                started_ns,
                ended_ns: clock::monotonic_ns(),
                tools,
            },
        };
        self.records.append(&record);
    }

    fn skip(&mut self, seq: u64, trigger: Trigger, due_ns: u64, busy_with: u64, triggers: u64) {
        self.records.append(&SnapshotRecord {
            seq,
            trigger,
            due_ns,
            outcome: SnapshotOutcome::Skipped {
                busy_with,
                triggers,
            },
        });
    }

    fn errors(self) -> Vec<String> {
        self.records.errors()
    }
}

/// Where one tool's output comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// Linux reads files.
    #[cfg(not(target_os = "macos"))]
    File { tool: Tool, path: PathBuf },
    /// Only macOS runs tools as commands; tests everywhere run the same
    /// path with stand-in commands.
    #[cfg(any(test, target_os = "macos"))]
    Command {
        tool: Tool,
        argv: Vec<String>,
        suspends_target: bool,
    },
    /// Known absent before trying (cgroup v1, no cgroup file): say why.
    #[cfg(not(target_os = "macos"))]
    Unavailable { tool: &'static str, reason: String },
}

/// What a read or a run produced before parsing.
struct Output {
    text: Option<String>,
    exit_code: Option<i32>,
    unavailable: Option<String>,
}

impl Source {
    fn tool_name(&self) -> &'static str {
        match self {
            #[cfg(not(target_os = "macos"))]
            Source::File { tool, .. } => tool.name(),
            #[cfg(any(test, target_os = "macos"))]
            Source::Command { tool, .. } => tool.name(),
            #[cfg(not(target_os = "macos"))]
            Source::Unavailable { tool, .. } => tool,
        }
    }

    /// Read or run it, keep the raw text as `<prefix>-<tool>.txt` in
    /// `arm_dir`, and parse it.
    pub(crate) fn run(&self, run_dir: &RunDir, out_dir: &Rel, prefix: &str) -> ToolRun {
        let started_ns = clock::monotonic_ns();
        let (source, suspends_target, out) = match self {
            #[cfg(not(target_os = "macos"))]
            Source::File { path, .. } => (path.display().to_string(), false, read_file(path)),
            #[cfg(any(test, target_os = "macos"))]
            Source::Command {
                argv,
                suspends_target,
                ..
            } => (argv.join(" "), *suspends_target, run_command(argv)),
            #[cfg(not(target_os = "macos"))]
            Source::Unavailable { reason, .. } => (
                String::new(),
                false,
                Output {
                    text: None,
                    exit_code: None,
                    unavailable: Some(reason.clone()),
                },
            ),
        };
        let wall_ns = clock::monotonic_ns().saturating_sub(started_ns);
        let mut run = ToolRun {
            tool: self.tool_name().to_string(),
            source,
            raw_file: None,
            started_ns,
            wall_ns,
            exit_code: out.exit_code,
            suspends_target,
            unavailable: out.unavailable,
            parsed: None,
            parse_error: None,
        };
        let Some(text) = out.text else { return run };
        let name = format!("{prefix}-{}.txt", run.tool.replace('/', "_"));
        let raw = format!("{SNAPSHOTS_DIR}/{name}");
        match out_dir
            .try_join(&name)
            .map_err(run_dir::RunDirError::from)
            .and_then(|rel| run_dir.write_bytes(&rel, text.as_bytes()))
        {
            Ok(()) => run.raw_file = Some(raw),
            Err(e) => run.parse_error = Some(format!("cannot keep the raw output as {raw}: {e}")),
        }
        if run.unavailable.is_none() {
            let tool = match self {
                #[cfg(not(target_os = "macos"))]
                Source::File { tool, .. } => *tool,
                #[cfg(any(test, target_os = "macos"))]
                Source::Command { tool, .. } => *tool,
                #[cfg(not(target_os = "macos"))]
                Source::Unavailable { .. } => return run,
            };
            match captures::parse(tool, &text, ParseOptions::strict()) {
                Ok(parsed) => run.parsed = Some(parsed.value),
                Err(e) => {
                    run.parse_error
                        .get_or_insert_with(|| format!("{}: {e}", run.source));
                }
            }
        }
        run
    }
}

#[cfg(not(target_os = "macos"))]
fn read_file(path: &Path) -> Output {
    match std::fs::read_to_string(path) {
        // A process that has exited but not been reaped shows empty files.
        Ok(text) if text.is_empty() => Output {
            text: None,
            exit_code: None,
            unavailable: Some(format!(
                "{} is empty (the process has exited)",
                path.display()
            )),
        },
        Ok(text) => Output {
            text: Some(text),
            exit_code: None,
            unavailable: None,
        },
        Err(e) => Output {
            text: None,
            exit_code: None,
            unavailable: Some(match e.kind() {
                std::io::ErrorKind::NotFound => format!("{} is absent", path.display()),
                // A process that exited but is not reaped yet (a zombie)
                // answers ESRCH for the files that need its memory map.
                _ if e.raw_os_error() == Some(nix::libc::ESRCH) => {
                    format!("{} cannot be read: the process has exited", path.display())
                }
                _ => format!("cannot read {}: {e}", path.display()),
            }),
        },
    }
}

/// Run `argv`, capturing stdout; kill it after [`TOOL_TIMEOUT`]. A tool
/// that is missing, refused or failed is unavailable, with its stderr.
#[cfg(any(test, target_os = "macos"))]
fn run_command(argv: &[String]) -> Output {
    let unavailable = |reason: String| Output {
        text: None,
        exit_code: None,
        unavailable: Some(reason),
    };
    let Some((program, args)) = argv.split_first() else {
        return unavailable("empty command".into());
    };
    let mut child = match Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return unavailable(format!("{program} is not installed"));
        }
        Err(e) => return unavailable(format!("cannot run {program}: {e}")),
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let pid = child.id();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(TOOL_TIMEOUT) == Err(std::sync::mpsc::RecvTimeoutError::Timeout)
            && let Ok(pid) = i32::try_from(pid)
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    });
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    if let Some(mut out) = child.stdout.take() {
        let _ = out.read_to_end(&mut stdout);
    }
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_end(&mut stderr);
    }
    let status = child.wait();
    let _ = done_tx.send(());
    let _ = watchdog.join();
    let text = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr);
    let first_err = stderr.lines().next().unwrap_or("").trim();
    match status {
        Ok(s) if s.success() => Output {
            text: Some(text),
            exit_code: s.code(),
            unavailable: None,
        },
        Ok(s) => Output {
            text: Some(text),
            exit_code: s.code(),
            unavailable: Some(match s.code() {
                Some(c) => format!("{program} exited with code {c}: {first_err}"),
                None => format!(
                    "{program} was killed (after {} s at most): {first_err}",
                    TOOL_TIMEOUT.as_secs()
                ),
            }),
        },
        Err(e) => unavailable(format!("cannot wait for {program}: {e}")),
    }
}

/// Where the unified cgroup hierarchy is mounted.
#[cfg(not(target_os = "macos"))]
const CGROUP2_ROOT: &str = "/sys/fs/cgroup";

/// The cgroup v2 path of a process from its `/proc/<pid>/cgroup` text: the
/// `0::<path>` line. `None` on a cgroup v1-only process.
#[cfg(not(target_os = "macos"))]
pub(crate) fn cgroup2_path(proc_cgroup: &str) -> Option<&str> {
    proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::trim)
        .filter(|p| p.starts_with('/'))
}

/// The cgroup v2 memory files of `pid`, or why there are none.
#[cfg(not(target_os = "macos"))]
pub(crate) fn cgroup_sources(pid: u32, root: &Path) -> Vec<Source> {
    let unavailable = |reason: String| {
        vec![Source::Unavailable {
            tool: "cgroup v2",
            reason,
        }]
    };
    if !root.join("cgroup.controllers").exists() {
        return unavailable(format!(
            "no cgroup v2 hierarchy at {} (cgroup v1 or none on this host): cgroup memory files not read",
            root.display()
        ));
    }
    let proc_path = format!("/proc/{pid}/cgroup");
    let text = match std::fs::read_to_string(&proc_path) {
        Ok(t) => t,
        Err(e) => return unavailable(format!("cannot read {proc_path}: {e}")),
    };
    let Some(rel) = cgroup2_path(&text) else {
        return unavailable(format!(
            "{proc_path} names no cgroup v2 path (no '0::' line)"
        ));
    };
    let dir = root.join(rel.trim_start_matches('/'));
    [
        (Tool::CgroupMemoryStat, "memory.stat"),
        (Tool::CgroupMemoryPeak, "memory.peak"),
        (Tool::CgroupMemoryEvents, "memory.events"),
    ]
    .into_iter()
    .map(|(tool, file)| Source::File {
        tool,
        path: dir.join(file),
    })
    .collect()
}

/// The tools a snapshot runs on this platform.
#[cfg(not(target_os = "macos"))]
fn platform_tools(pid: u32) -> Vec<Source> {
    let mut out = vec![Source::File {
        tool: Tool::SmapsRollup,
        path: PathBuf::from(format!("/proc/{pid}/smaps_rollup")),
    }];
    out.extend(cgroup_sources(pid, Path::new(CGROUP2_ROOT)));
    out
}

/// The tools a snapshot runs on macOS. `vmmap` suspends the worker while it
/// walks its regions; `memory_pressure` runs without `-S` (which would
/// simulate pressure on the whole system).
#[cfg(target_os = "macos")]
fn platform_tools(pid: u32) -> Vec<Source> {
    let cmd = |tool: Tool, argv: &[&str], suspends_target: bool| Source::Command {
        tool,
        argv: argv.iter().map(|s| s.to_string()).collect(),
        suspends_target,
    };
    let pid = pid.to_string();
    vec![
        cmd(Tool::VmmapSummary, &["vmmap", "-summary", &pid], true),
        cmd(Tool::Footprint, &["footprint", &pid], false),
        cmd(Tool::VmStat, &["vm_stat"], false),
        cmd(Tool::MemoryPressure, &["memory_pressure"], false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../sampler/tests/captures");

    fn first_capture(dir: &str) -> PathBuf {
        let mut files: Vec<PathBuf> = std::fs::read_dir(Path::new(CAPTURES).join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files.into_iter().next().unwrap()
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn the_cgroup_v2_path_is_the_zero_line() {
        assert_eq!(
            cgroup2_path("12:memory:/user.slice\n0::/user.slice/session-2.scope\n"),
            Some("/user.slice/session-2.scope")
        );
        assert_eq!(cgroup2_path("0::/\n"), Some("/"));
        assert_eq!(cgroup2_path("4:memory:/docker/abc\n"), None);
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn without_a_cgroup_v2_hierarchy_the_record_says_so() {
        let root = tempfile::tempdir().unwrap();
        let got = cgroup_sources(std::process::id(), root.path());
        let [Source::Unavailable { tool, reason }] = got.as_slice() else {
            panic!("{got:?}")
        };
        assert_eq!(*tool, "cgroup v2");
        assert!(reason.starts_with("no cgroup v2 hierarchy at "), "{reason}");
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn with_a_cgroup_v2_hierarchy_the_three_memory_files_are_read() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("cgroup.controllers"), "memory\n").unwrap();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let got = cgroup_sources(std::process::id(), root.path());
        match cgroup2_path(&own) {
            Some(rel) => {
                let dir = root.path().join(rel.trim_start_matches('/'));
                assert_eq!(
                    got,
                    vec![
                        Source::File {
                            tool: Tool::CgroupMemoryStat,
                            path: dir.join("memory.stat")
                        },
                        Source::File {
                            tool: Tool::CgroupMemoryPeak,
                            path: dir.join("memory.peak")
                        },
                        Source::File {
                            tool: Tool::CgroupMemoryEvents,
                            path: dir.join("memory.events")
                        },
                    ]
                );
                // Absent files are unavailable, not errors.
                let (_tmp, out, dir) = out_dir();
                let run = got[1].run(&out, &dir, "0000-x");
                assert!(run.unavailable.unwrap().ends_with("memory.peak is absent"));
                assert_eq!(run.raw_file, None);
            }
            None => assert!(matches!(got.as_slice(), [Source::Unavailable { .. }])),
        }
    }

    /// A run directory with an arm's `snapshots/` folder, as the snapshotter writes it.
    fn out_dir() -> (tempfile::TempDir, RunDir, Rel) {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::create(&tmp.path().join("run")).unwrap();
        let dir = Rel::file(SNAPSHOTS_DIR);
        run.create_dir(&dir).unwrap();
        (tmp, run, dir)
    }

    #[test]
    fn a_command_s_output_is_kept_raw_and_parsed_with_its_exit_status() {
        // `cat` stands in for the macOS tool: the same capture, through the
        // same spawn, keep and parse path.
        let capture = first_capture("vm_stat");
        let (_tmp, out, dir) = out_dir();
        let source = Source::Command {
            tool: Tool::VmStat,
            argv: vec!["cat".into(), capture.display().to_string()],
            suspends_target: false,
        };
        let run = source.run(&out, &dir, "0003-model_loaded");
        assert_eq!(run.exit_code, Some(0));
        assert_eq!(run.unavailable, None);
        assert_eq!(run.parse_error, None);
        assert_eq!(
            run.raw_file.as_deref(),
            Some("snapshots/0003-model_loaded-vm_stat.txt")
        );
        let kept = out
            .read_text(&dir.join("0003-model_loaded-vm_stat.txt"))
            .unwrap()
            .unwrap();
        assert_eq!(kept, std::fs::read_to_string(&capture).unwrap());
        let expected = captures::parse(Tool::VmStat, &kept, ParseOptions::strict()).unwrap();
        assert_eq!(run.parsed, Some(expected.value));
    }

    #[test]
    fn a_failing_or_missing_tool_is_unavailable_with_its_reason() {
        let (_tmp, out, dir) = out_dir();
        let failing = Source::Command {
            tool: Tool::VmmapSummary,
            argv: vec!["sh".into(), "-c".into(), "echo refused >&2; exit 3".into()],
            suspends_target: true,
        };
        let run = failing.run(&out, &dir, "0000-a");
        assert_eq!(run.exit_code, Some(3));
        assert_eq!(
            run.unavailable.as_deref(),
            Some("sh exited with code 3: refused")
        );
        assert!(run.suspends_target);
        assert_eq!(run.parsed, None);

        let missing = Source::Command {
            tool: Tool::Footprint,
            argv: vec!["memqual-no-such-tool".into()],
            suspends_target: false,
        };
        let run = missing.run(&out, &dir, "0000-a");
        assert_eq!(
            run.unavailable.as_deref(),
            Some("memqual-no-such-tool is not installed")
        );
        assert_eq!((run.exit_code, run.raw_file), (None, None));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_process_that_exited_is_unavailable_not_an_error() {
        // An exited, unreaped worker (a zombie) answers ESRCH for
        // smaps_rollup: the race between a marker and the snapshot.
        let mut child = std::process::Command::new("sleep")
            .arg("100")
            .spawn()
            .unwrap();
        let pid = child.id();
        child.kill().unwrap();
        let stat = format!("/proc/{pid}/stat");
        let zombie = (0..500).any(|_| {
            let state = std::fs::read_to_string(&stat).unwrap_or_default();
            let is_zombie = state
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'));
            if !is_zombie {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            is_zombie
        });
        assert!(zombie, "the killed child never became a zombie");
        let out = read_file(Path::new(&format!("/proc/{pid}/smaps_rollup")));
        child.wait().unwrap();
        assert_eq!(out.text, None);
        let why = out.unavailable.unwrap();
        assert!(
            why.ends_with("cannot be read: the process has exited"),
            "{why}"
        );
    }

    #[test]
    fn own_smaps_rollup_is_read_and_parsed() {
        if !Path::new("/proc/self/smaps_rollup").exists() {
            return; // not Linux
        }
        let (_tmp, out, dir) = out_dir();
        let tools = platform_tools(std::process::id());
        let run = tools[0].run(&out, &dir, "0000-before_arm");
        assert_eq!(run.tool, "smaps_rollup");
        assert_eq!(run.parse_error, None);
        let Some(captures::Capture::SmapsRollup(s)) = run.parsed else {
            panic!("{run:?}")
        };
        assert!(s.rss.unwrap() > 0);
    }
}
