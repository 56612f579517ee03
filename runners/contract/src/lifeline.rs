//! The worker's side of the lifeline: the read end of a pipe whose only
//! write end the harness holds, on [`LIFELINE_FD`].
//!
//! Nobody ever writes to the pipe. When the harness exits, however it dies
//! (SIGKILL included), the kernel closes its write end and a read returns
//! end-of-file; a worker thread blocked in that read then ends the worker.
//! This works the same on Linux and macOS (unlike Linux's
//! `PR_SET_PDEATHSIG`), so the path tested on Linux is the one a Mac runs.

use crate::LIFELINE_FD;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::FileTypeExt;

/// The read end of the lifeline, not yet watched.
pub struct Lifeline {
    file: File,
}

impl Lifeline {
    /// Open fd 4 as the harness set it up (through
    /// [`crate::open_descriptors`]). Fails when fd 4 is not a pipe.
    pub(crate) fn open() -> std::io::Result<Self> {
        // Opening /dev/fd/N duplicates the inherited descriptor without unsafe code.
        let path = format!("/dev/fd/{LIFELINE_FD}");
        let missing = |e: std::io::Error| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "cannot open the lifeline {path} ({e}): workers are started by `memqual run`, \
                     which passes the read end of a pipe on fd {LIFELINE_FD}"
                ),
            )
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .open(&path)
            .map_err(missing)?;
        if !file.metadata().map_err(missing)?.file_type().is_fifo() {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!(
                    "the lifeline {path} is not a pipe: workers are started by `memqual run`, \
                     which passes the read end of a pipe on fd {LIFELINE_FD}"
                ),
            ));
        }
        Ok(Lifeline { file })
    }

    /// A lifeline read from `file` (tests hand in their own pipe).
    pub fn from_file(file: File) -> Self {
        Lifeline { file }
    }

    /// Watch the lifeline on a thread of its own: once every write end is
    /// closed, `on_harness_gone` runs (it should end the process). A read
    /// that fails counts as closed: a worker that cannot tell whether the
    /// harness lives must not risk outliving it.
    pub fn watch(
        self,
        on_harness_gone: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("lifeline".into())
            .spawn(move || {
                wait_until_closed(self.file);
                on_harness_gone();
            })
    }
}

/// Block until `file` reads end-of-file or fails. Bytes (which the harness
/// never sends) are read and ignored.
fn wait_until_closed(mut file: File) {
    let mut buf = [0u8; 64];
    loop {
        match file.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Generous: the thread only has to wake from a read.
    const WAKE: Duration = Duration::from_secs(30);

    fn watched() -> (std::io::PipeWriter, mpsc::Receiver<()>) {
        let (reader, writer) = std::io::pipe().unwrap();
        let (tx, rx) = mpsc::channel();
        Lifeline::from_file(File::from(std::os::fd::OwnedFd::from(reader)))
            .watch(move || tx.send(()).unwrap())
            .unwrap();
        (writer, rx)
    }

    #[test]
    fn closing_the_last_write_end_runs_the_action() {
        let (writer, rx) = watched();
        let second = writer.try_clone().unwrap();
        drop(writer);
        // One write end is still open: the harness lives.
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(200)),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        drop(second);
        assert_eq!(rx.recv_timeout(WAKE), Ok(()));
    }

    #[test]
    fn bytes_on_the_lifeline_are_not_a_death() {
        let (mut writer, rx) = watched();
        writer.write_all(b"not a signal").unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(200)),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        drop(writer);
        assert_eq!(rx.recv_timeout(WAKE), Ok(()));
    }

    #[test]
    fn a_closed_lifeline_runs_the_action_at_once() {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(writer);
        let (tx, rx) = mpsc::channel();
        Lifeline::from_file(File::from(std::os::fd::OwnedFd::from(reader)))
            .watch(move || tx.send(()).unwrap())
            .unwrap();
        assert_eq!(rx.recv_timeout(WAKE), Ok(()));
    }
}
