//! The harness's end of the workers' lifeline: one pipe for the life of
//! the process. memqual holds its write end and never writes to it; each
//! worker gets a copy of the read end on `LIFELINE_FD` (fd 4) and ends
//! itself when a read there returns end-of-file, which happens only once
//! every write end is closed: when memqual has exited, however it died.
//!
//! The write end must never reach another process, or that process would
//! keep the workers alive. Both ends are close-on-exec, so no worker and no
//! tool memqual runs (`vmmap`, `footprint`, `pip`, …) inherits them, except
//! the read end each worker's spawn maps to fd 4 on purpose. On macOS the
//! standard library sets close-on-exec right after creating a pipe, not
//! atomically; [`init`] runs first thing in `main`, before any thread that
//! could spawn a process exists, so no spawn can catch the pipe in between.

use command_fds::FdMapping;
use std::os::fd::OwnedFd;
use std::sync::OnceLock;
use worker_contract::LIFELINE_FD;

struct Lifeline {
    read: OwnedFd,
    /// Held, never written, never dropped (it lives in a static): the
    /// kernel closes it when the process ends.
    _write: OwnedFd,
}

static LIFELINE: OnceLock<Result<Lifeline, String>> = OnceLock::new();

fn get() -> &'static Result<Lifeline, String> {
    LIFELINE.get_or_init(|| {
        std::io::pipe()
            .map(|(read, write)| Lifeline {
                read: read.into(),
                _write: write.into(),
            })
            .map_err(|e| format!("cannot create the workers' lifeline pipe: {e}"))
    })
}

/// Create the lifeline now. Call it before starting any thread; a failure
/// is kept and reported by the first [`fd_mapping`].
pub fn init() {
    get();
}

/// The mapping that gives a worker its copy of the read end on fd 4. The
/// copy is close-on-exec in memqual and goes away with the `Command`.
pub fn fd_mapping() -> std::io::Result<FdMapping> {
    let lifeline = get()
        .as_ref()
        .map_err(|e| std::io::Error::other(e.clone()))?;
    Ok(FdMapping {
        parent_fd: lifeline.read.try_clone()?,
        child_fd: LIFELINE_FD,
    })
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use command_fds::CommandFdExt;
    use std::os::fd::AsRawFd;
    use std::process::{Command, Stdio};

    /// The descriptor and access mode of each of `pid`'s descriptors on the
    /// pipe `inode` (`pipe:[N]`).
    fn lifeline_fds(pid: u32, inode: &str) -> Vec<(i32, &'static str)> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
            let entry = entry.unwrap();
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            if target.to_string_lossy() != inode {
                continue;
            }
            let fd: i32 = entry.file_name().to_string_lossy().parse().unwrap();
            // A descriptor closed since it was listed is no longer held.
            let Ok(info) = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")) else {
                continue;
            };
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .map(|f| u32::from_str_radix(f.trim(), 8).unwrap())
                .unwrap();
            found.push((fd, if flags & 0o3 == 0 { "read" } else { "write" }));
        }
        found.sort();
        found
    }

    fn inode() -> String {
        let Ok(l) = get() else {
            panic!("{:?}", get().as_ref().err())
        };
        let fd = l.read.as_raw_fd();
        std::fs::read_link(format!("/proc/self/fd/{fd}"))
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    /// A child that lives until we kill it, so its descriptors can be read.
    fn sleeper(cmd: &mut Command) -> std::process::Child {
        cmd.arg("300").stdin(Stdio::null()).spawn().unwrap()
    }

    #[test]
    fn a_worker_gets_only_the_read_end_on_fd_4_and_other_children_get_nothing() {
        init();
        let inode = inode();
        assert!(inode.starts_with("pipe:"), "{inode}");

        let mut worker = Command::new("sleep");
        worker.fd_mappings(vec![fd_mapping().unwrap()]).unwrap();
        let mut worker_child = sleeper(&mut worker);
        // A tool run the way memqual runs tools: a plain Command.
        let mut tool_child = sleeper(&mut Command::new("sleep"));

        let in_worker = lifeline_fds(worker_child.id(), &inode);
        let in_tool = lifeline_fds(tool_child.id(), &inode);
        for c in [&mut worker_child, &mut tool_child] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        assert_eq!(in_worker, [(LIFELINE_FD, "read")]);
        assert_eq!(in_tool, []);
        // memqual itself holds one read end and the write end (its mapping
        // copies went away with their commands).
        drop(worker);
        let own = lifeline_fds(std::process::id(), &inode);
        assert_eq!(
            own.iter().filter(|(_, mode)| *mode == "write").count(),
            1,
            "{own:?}"
        );
    }
}
