//! The external encoder, out of process: on a Mac whisper.cpp's encoder runs
//! in Core ML (whose memory lives partly in system services); here it runs in
//! a second process of the patched worker (`--external-encoder`), holding the
//! full model's native encoder, so its memory is outside the decoding worker.
//!
//! Protocol on the child's stdin/stdout, little-endian:
//! - start: one JSON line [`EncoderStart`] in; one JSON line [`EncoderReady`] out;
//! - per window: `MQER`, n_mel, n_frames, n_ctx, n_threads (u32 each), then
//!   n_mel × n_frames f32; back `MQEO`, status (i32), type (i32), n_dims
//!   (i32), ne\[4\] (i64), nb\[4\] (i64), nbytes (u64), then nbytes of data
//!   (or, with a non-zero status, a u32 length and a UTF-8 message).
//!
//! The worker never trusts the reply: the header is checked against the shape
//! whisper.cpp expects before any data is read (so a hostile size cannot make
//! it allocate), a short read fails the window, and the patch checks the
//! tensor again before copying. Every failure fails the request closed.
//!
//! The worker never trusts the process either. Its pid is logged when it
//! starts; every exchange (the ready line, each window and its reply) is
//! bounded by `external_encoder.timeout_s` (default
//! [`worker_contract::EXTERNAL_ENCODER_TIMEOUT_S`]); a process that dies,
//! closes its pipes, stalls or breaks the protocol is killed if it still runs
//! and always reaped, and the error names how it ended (`waitpid`'s signal or
//! exit status) and where the exchange was. A failure before the ready line
//! fails the arm at load; after it, the request. On Linux the process gets
//! `PR_SET_PDEATHSIG` (SIGKILL): it dies with the worker, however the worker
//! dies; it also sits in the worker's process group, which the harness kills
//! at every arm's end. It exits on end of file on its stdin (teardown).
//!
//! Test only: `external_encoder.fault` ([`EncoderFault`]) makes the process
//! misbehave on purpose, at each phase of its life, so the tests can prove
//! all of the above.

use super::patch::MemqualTensor;
use serde::{Deserialize, Serialize};
use std::ffi::{c_int, c_void};
use std::io::{BufRead, Read, Write};
use std::os::fd::AsRawFd;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};
use worker_contract::{
    BadHeader, BadReady, EncoderFault, EncoderPhase, FaultSignal, ModelInput, ProcessFault,
    ReplyFault,
};

const REQUEST_MAGIC: &[u8; 4] = b"MQER";
const REPLY_MAGIC: &[u8; 4] = b"MQEO";

/// The first line the encoder process reads.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderStart {
    /// The model whose native encoder it runs: a full model, or (layout
    /// `encoder_only`) an encoder-only artifact loaded without any decoder.
    pub model: ModelInput,
    /// Encoder positions its state is sized for (0: the model's own).
    #[serde(default)]
    pub max_audio_ctx: u32,
    /// A deliberate defect, for the tests that prove the worker refuses it.
    #[serde(default)]
    pub fault: Option<EncoderFault>,
}

/// The encoder process's answer once its model is loaded.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderReady {
    /// `None` when it is ready; else why it is not.
    pub error: Option<String>,
    /// Its model's SHA-256, as it checked it.
    pub model_sha256: Option<String>,
    /// Its own memory at each step of its start.
    #[serde(default)]
    pub memory: Option<worker_contract::EncoderProcessSteps>,
    /// What whisper.cpp logged there while loading and creating its state.
    #[serde(default)]
    pub topology: Option<worker_contract::Topology>,
}

/// How long a process that closed its pipes gets to finish exiting before
/// the worker kills it: its memory is torn down before its descriptors close,
/// so a process really ending is gone within milliseconds.
const EXIT_GRACE: Duration = Duration::from_secs(1);

/// Most bytes of a ready line (memory steps and topology are a few KiB).
const MOST_READY: usize = 64 * 1024;

/// Bytes of a reply header.
const REPLY_HEAD: usize = 4 + 4 * 3 + 8 * 8 + 8;

/// Why a read from or a write to the process stopped.
enum Stop {
    /// Its end of the pipe closed: end of file, or EPIPE on a write.
    Closed,
    /// The deadline passed.
    TimedOut,
    /// Anything else.
    Io(std::io::Error),
}

/// Where in the exchange the worker was.
#[derive(Clone, Copy)]
enum Stage {
    /// Sending the start line.
    Start,
    /// Waiting for the ready line.
    Ready,
    /// Sending a window.
    Send,
    /// Reading a reply's header.
    Header,
    /// Reading a reply's data of this many bytes.
    Data(usize),
}

impl Stage {
    /// "while the worker …", with how far it got.
    fn when(self, got: usize) -> String {
        match self {
            Stage::Start => "while the worker sent it its start line".into(),
            Stage::Ready if got == 0 => "while the worker waited for its ready line".into(),
            Stage::Ready => format!("in the middle of its ready line ({got} bytes came)"),
            Stage::Send => "while the worker sent it a window".into(),
            Stage::Header if got == 0 => "while the worker waited for its reply".into(),
            Stage::Header => {
                format!("in the middle of its reply's header ({got} of {REPLY_HEAD} bytes came)")
            }
            Stage::Data(n) => format!("in the middle of its reply ({got} of {n} bytes came)"),
        }
    }
}

/// How a process ended, as `waitpid` said: "was killed by signal 9
/// (SIGKILL)", "exited with status 3".
fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        let name = nix::sys::signal::Signal::try_from(sig)
            .map(|s| s.as_str())
            .unwrap_or("unknown");
        let core = if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        };
        format!("was killed by signal {sig} ({name}{core})")
    } else if let Some(code) = status.code() {
        format!("exited with status {code}")
    } else {
        format!("ended ({status})")
    }
}

/// Wait up to `deadline` until `fd` is ready for `events`; false when the
/// deadline passed first. A closed peer counts as ready (the read or write
/// that follows says so).
fn wait_fd(fd: c_int, events: libc::c_short, deadline: Instant) -> std::io::Result<bool> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let ms = c_int::try_from(left.as_millis().saturating_add(1)).unwrap_or(c_int::MAX);
        let mut poll = libc::pollfd {
            fd,
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut poll, 1, ms) };
        if rc > 0 {
            return Ok(true);
        }
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

/// Make `fd` non-blocking: every read and write is bounded by a deadline.
fn set_nonblocking(fd: c_int) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The process and its two pipes, every exchange bounded by `timeout`.
/// Dropped unreaped, it kills and reaps the process: the worker never leaves
/// an orphan or a zombie behind, whatever path it leaves by.
struct Pipes {
    child: Child,
    pid: u32,
    /// `None` once closed (teardown).
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    timeout: Duration,
    reaped: bool,
}

impl Pipes {
    /// Write all of `buf` before `deadline`.
    fn write_all(&mut self, buf: &[u8], deadline: Instant) -> Result<(), (usize, Stop)> {
        use std::io::ErrorKind;
        let Some(stdin) = self.stdin.as_mut() else {
            return Err((0, Stop::Closed));
        };
        let mut sent = 0;
        while sent < buf.len() {
            match stdin.write(&buf[sent..]) {
                Ok(0) => return Err((sent, Stop::Closed)),
                Ok(n) => sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    match wait_fd(stdin.as_raw_fd(), libc::POLLOUT, deadline) {
                        Ok(true) => {}
                        Ok(false) => return Err((sent, Stop::TimedOut)),
                        Err(e) => return Err((sent, Stop::Io(e))),
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::BrokenPipe => return Err((sent, Stop::Closed)),
                Err(e) => return Err((sent, Stop::Io(e))),
            }
        }
        Ok(())
    }

    /// Read at most `buf.len()` bytes, at least one, before `deadline`.
    fn read_some(&mut self, buf: &mut [u8], deadline: Instant) -> Result<usize, Stop> {
        use std::io::ErrorKind;
        loop {
            match self.stdout.read(buf) {
                Ok(0) => return Err(Stop::Closed),
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    match wait_fd(self.stdout.as_raw_fd(), libc::POLLIN, deadline) {
                        Ok(true) => {}
                        Ok(false) => return Err(Stop::TimedOut),
                        Err(e) => return Err(Stop::Io(e)),
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Stop::Io(e)),
            }
        }
    }

    /// Fill `buf` before `deadline`.
    fn read_full(&mut self, buf: &mut [u8], deadline: Instant) -> Result<(), (usize, Stop)> {
        let mut got = 0;
        while got < buf.len() {
            got += self
                .read_some(&mut buf[got..], deadline)
                .map_err(|e| (got, e))?;
        }
        Ok(())
    }

    /// Kill and reap the process (once).
    fn kill(&mut self) {
        if !self.reaped {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }

    /// Reap the process if it exits within `grace`.
    fn reap_within(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.reaped = true;
                    return Some(status);
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => return None,
            }
        }
    }

    /// The exchange stopped at `stage` after `got` bytes: find out what
    /// happened to the process, make sure it is gone and reaped, and say so.
    fn failed(&mut self, stage: Stage, got: usize, stop: Stop) -> String {
        let (pid, when) = (self.pid, stage.when(got));
        match stop {
            Stop::Closed => match self.reap_within(EXIT_GRACE) {
                Some(status) => format!(
                    "the external encoder process (pid {pid}) {} {when}",
                    describe_exit(status)
                ),
                None => {
                    self.kill();
                    let end = match stage {
                        Stage::Start | Stage::Send => "input",
                        _ => "output",
                    };
                    format!(
                        "the external encoder process (pid {pid}) closed its {end} {when} but \
                         kept running; the worker killed it"
                    )
                }
            },
            Stop::TimedOut => {
                self.kill();
                format!(
                    "the external encoder process (pid {pid}) did not answer within {} s {when}; \
                     the worker killed it",
                    self.timeout.as_secs()
                )
            }
            Stop::Io(e) => {
                self.kill();
                format!(
                    "the worker lost the external encoder process (pid {pid}) {when}: {e}; the \
                     worker killed it"
                )
            }
        }
    }

    /// The process broke the protocol (it may still run): stop it and say so.
    fn refused(&mut self, why: String) -> String {
        self.kill();
        let pid = self.pid;
        if why.contains(&format!("(pid {pid})")) {
            format!("{why}; the worker stopped it")
        } else {
            format!("{why}; the worker stopped the external encoder process (pid {pid})")
        }
    }
}

impl Drop for Pipes {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The encoder process started, its ready line not read yet.
pub struct Starting {
    pipes: Pipes,
    deadline: Instant,
}

/// The running encoder process, as the worker holds it.
pub struct EncoderProcess {
    pipes: Pipes,
    /// The window being sent, kept between windows: a request's path
    /// allocates nothing per window once the first has been sent.
    request: Vec<u8>,
    /// The last reply's data; the patch copies it before the next call.
    reply: Vec<u8>,
    /// What it said about itself once ready.
    identity: EncoderIdentity,
}

/// The encoder process as it described itself once ready.
#[derive(Debug, Clone)]
pub struct EncoderIdentity {
    /// Its process id.
    pub pid: u32,
    /// Its model's SHA-256 as it checked it.
    pub model_sha256: String,
    /// Its memory at each step of its start, as it measured it.
    pub memory: Option<worker_contract::EncoderProcessSteps>,
    /// What whisper.cpp logged there.
    pub topology: Option<worker_contract::Topology>,
}

/// Where the encode callback finds the process: filled once the process
/// is ready (after the decoder's context loaded), `'static` for the worker's
/// life. whisper.cpp calls back on the thread that runs `whisper_full`.
pub struct EncoderSlot(std::sync::Mutex<Option<EncoderProcess>>);

impl EncoderSlot {
    /// An empty slot, leaked: whisper.cpp keeps a pointer to it for the process.
    pub fn leak() -> &'static EncoderSlot {
        Box::leak(Box::new(EncoderSlot(std::sync::Mutex::new(None))))
    }

    /// The patch's encode callback bound to this slot: whisper.cpp hands
    /// each window to the slot's process.
    pub fn encode_hook(&'static self) -> super::patch::EncodeHook {
        super::patch::EncodeHook {
            encode: encode_callback,
            user_data: self,
        }
    }

    /// Put the ready process in.
    pub fn fill(&self, process: EncoderProcess) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(process);
        }
    }

    /// How the process described itself once ready, when it runs.
    pub fn identity(&self) -> Option<EncoderIdentity> {
        let slot = self.0.lock().ok()?;
        slot.as_ref().map(|p| p.identity.clone())
    }

    /// Stop the process (teardown): close its stdin, let it exit within its
    /// timeout, else kill it; always reaped. `Some` says what went wrong.
    pub fn stop(&self) -> Option<String> {
        let mut process = self.0.lock().ok()?.take()?;
        let pipes = &mut process.pipes;
        // Its end of file on stdin is the encoder's teardown.
        pipes.stdin = None;
        match pipes.reap_within(pipes.timeout) {
            Some(status) if status.success() => None,
            Some(status) => Some(format!(
                "the external encoder process (pid {}) {} at teardown",
                pipes.pid,
                describe_exit(status)
            )),
            None => {
                pipes.kill();
                Some(format!(
                    "the external encoder process (pid {}) did not exit within {} s of its \
                     teardown; the worker killed it",
                    pipes.pid,
                    pipes.timeout.as_secs()
                ))
            }
        }
    }
}

/// Stops the slot's process when dropped: whatever way the worker's run
/// ends (an error included), the encoder process is ended and reaped.
pub struct StopOnDrop(pub &'static EncoderSlot);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = self.0.stop();
    }
}

impl EncoderProcess {
    /// Start `exe --external-encoder` and send it its start line; its pid is
    /// known from here on. Every exchange after this one is bounded by `timeout`.
    pub fn spawn(
        exe: &std::path::Path,
        start: &EncoderStart,
        timeout: Duration,
    ) -> anyhow::Result<Starting> {
        use anyhow::Context;
        let mut command = Command::new(exe);
        command
            .arg("--external-encoder")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        {
            use std::os::unix::process::CommandExt;
            #[cfg(target_os = "linux")]
            let parent = std::process::id() as libc::pid_t;
            // SAFETY: prctl, getppid, close and _exit are async-signal-safe;
            // nothing else runs between fork and exec.
            unsafe {
                command.pre_exec(move || {
                    // The encoder must not outlive the worker it serves:
                    // killed when the worker dies, however it dies (and at
                    // once when the worker died before this line ran).
                    #[cfg(target_os = "linux")]
                    {
                        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        if libc::getppid() != parent {
                            libc::_exit(1);
                        }
                    }
                    // The harness's message channel is the worker's alone;
                    // the lifeline (fd 4) stays, for the encoder to watch.
                    libc::close(worker_contract::MESSAGE_FD);
                    Ok(())
                });
            }
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start the external encoder {}", exe.display()))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the external encoder process (pid {pid}) has no pipes");
        };
        for fd in [stdin.as_raw_fd(), stdout.as_raw_fd()] {
            if let Err(e) = set_nonblocking(fd) {
                let _ = child.kill();
                let _ = child.wait();
                anyhow::bail!("cannot make the external encoder's pipes non-blocking: {e}");
            }
        }
        let mut pipes = Pipes {
            child,
            pid,
            stdin: Some(stdin),
            stdout,
            timeout,
            reaped: false,
        };
        let deadline = Instant::now() + timeout;
        let mut line = serde_json::to_vec(start)?;
        line.push(b'\n');
        if let Err((sent, stop)) = pipes.write_all(&line, deadline) {
            anyhow::bail!(pipes.failed(Stage::Start, sent, stop));
        }
        Ok(Starting { pipes, deadline })
    }
}

impl Starting {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pipes.pid
    }

    /// Wait for its ready line and check it: a JSON [`EncoderReady`] of a
    /// model whose digest is `expected_sha256` (when the arm pinned one).
    /// On any failure the process is gone and reaped, and the error says why.
    pub fn ready(mut self, expected_sha256: Option<&str>) -> Result<EncoderProcess, String> {
        let pid = self.pipes.pid;
        let mut line = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            match self.pipes.read_some(&mut chunk, self.deadline) {
                Ok(n) => line.extend_from_slice(&chunk[..n]),
                Err(stop) => return Err(self.pipes.failed(Stage::Ready, line.len(), stop)),
            }
            if let Some(end) = line.iter().position(|&b| b == b'\n') {
                break end;
            }
            if line.len() > MOST_READY {
                return Err(self.pipes.refused(format!(
                    "the external encoder process (pid {pid}) sent more than {MOST_READY} bytes \
                     without ending its ready line"
                )));
            }
        };
        if end + 1 != line.len() {
            return Err(self.pipes.refused(format!(
                "the external encoder process (pid {pid}) sent {} bytes after its ready line",
                line.len() - end - 1
            )));
        }
        let text = String::from_utf8_lossy(&line[..end]);
        let ready: EncoderReady = match serde_json::from_str(&text) {
            Ok(ready) => ready,
            Err(e) => {
                let shown: String = text.chars().take(200).collect();
                return Err(self.pipes.refused(format!(
                    "the external encoder process (pid {pid}) answered {shown:?}, not its ready \
                     line: {e}"
                )));
            }
        };
        if let Some(error) = ready.error {
            // It exits once it said why; kill it if it does not.
            if self.pipes.reap_within(EXIT_GRACE).is_none() {
                self.pipes.kill();
            }
            return Err(format!("the external encoder failed to start: {error}"));
        }
        let Some(model_sha256) = ready.model_sha256 else {
            return Err(self.pipes.refused(format!(
                "the external encoder process (pid {pid}) said it was ready without its \
                 model's SHA-256"
            )));
        };
        if let Some(expected) = expected_sha256
            && !model_sha256.eq_ignore_ascii_case(expected)
        {
            return Err(self.pipes.refused(format!(
                "the external encoder process (pid {pid}) checked a model of SHA-256 \
                 {model_sha256:?}, not the arm's {expected}"
            )));
        }
        Ok(EncoderProcess {
            identity: EncoderIdentity {
                pid,
                model_sha256,
                memory: ready.memory,
                topology: ready.topology,
            },
            pipes: self.pipes,
            request: Vec::new(),
            reply: Vec::new(),
        })
    }
}

impl EncoderProcess {
    /// One window: send the mel, read and check the reply header, then
    /// exactly its data, all within the process's timeout. On any failure the
    /// process is gone and reaped.
    fn encode(
        &mut self,
        mel: &[f32],
        dims: [u32; 4],
        n_state: u32,
    ) -> Result<MemqualTensor, String> {
        let n_ctx = dims[2];
        let deadline = Instant::now() + self.pipes.timeout;
        let frame = &mut self.request;
        frame.clear();
        frame.extend_from_slice(REQUEST_MAGIC);
        for d in dims {
            frame.extend_from_slice(&d.to_le_bytes());
        }
        for v in mel {
            frame.extend_from_slice(&v.to_le_bytes());
        }
        if let Err((sent, stop)) = self.pipes.write_all(frame, deadline) {
            return Err(self.pipes.failed(Stage::Send, sent, stop));
        }
        let mut head = [0u8; REPLY_HEAD];
        if let Err((got, stop)) = self.pipes.read_full(&mut head, deadline) {
            return Err(self.pipes.failed(Stage::Header, got, stop));
        }
        if &head[..4] != REPLY_MAGIC {
            return Err(self
                .pipes
                .refused("the external encoder's reply does not start with MQEO".into()));
        }
        let i32_at = |o: usize| i32::from_le_bytes(head[o..o + 4].try_into().unwrap_or([0; 4]));
        let i64_at = |o: usize| i64::from_le_bytes(head[o..o + 8].try_into().unwrap_or([0; 8]));
        let status = i32_at(4);
        if status != 0 {
            let mut len = [0u8; 4];
            let mut message = Vec::new();
            if self.pipes.read_full(&mut len, deadline).is_ok() {
                message.resize(u32::from_le_bytes(len).min(4096) as usize, 0);
                if let Err((got, _)) = self.pipes.read_full(&mut message, deadline) {
                    message.truncate(got);
                }
            }
            return Err(self.pipes.refused(format!(
                "the external encoder failed ({status}): {}",
                String::from_utf8_lossy(&message)
            )));
        }
        // Never read (or allocate) more than the window's output can be.
        let announced = u64::from_le_bytes(head[80..88].try_into().unwrap_or([0; 8]));
        let most = u64::from(n_state) * u64::from(n_ctx) * 4;
        if announced > most {
            return Err(self.pipes.refused(format!(
                "the external encoder announced {announced} bytes; a [{n_state}, {n_ctx}] float32 \
                 output has {most}"
            )));
        }
        let nbytes = announced as usize; // at most `most`, which fits: the window's own size
        let tensor = MemqualTensor {
            type_: i32_at(8),
            n_dims: i32_at(12),
            ne: [i64_at(16), i64_at(24), i64_at(32), i64_at(40)],
            nb: [i64_at(48), i64_at(56), i64_at(64), i64_at(72)],
            data: std::ptr::null(),
            nbytes,
        };
        self.reply.resize(nbytes, 0);
        if let Err((got, stop)) = self.pipes.read_full(&mut self.reply, deadline) {
            return Err(self.pipes.failed(Stage::Data(nbytes), got, stop));
        }
        Ok(MemqualTensor {
            data: self.reply.as_ptr().cast(),
            ..tensor
        })
    }
}

/// Why the last window failed, for the request's error.
static LAST_ERROR: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Take why the external encoder last failed, if it did.
pub fn take_last_error() -> Option<String> {
    LAST_ERROR.lock().ok()?.take()
}

/// The engine's hook that explains a failed `whisper_full` by the external
/// encoder's last error.
pub struct EncoderFailureHook;

impl super::engine::EngineHook for EncoderFailureHook {
    fn explain_failure(&self) -> Option<String> {
        take_last_error()
    }
}

/// The patch's `whisper_memqual_encode_fn`: forwards one window to the
/// process in the slot `user_data` points at.
///
/// # Safety
/// Called by whisper.cpp with the pointers its header documents: `user_data`
/// is the `'static` [`EncoderSlot`], `mel` holds n_mel × n_frames floats and
/// `out` is writable.
unsafe extern "C" fn encode_callback(
    user_data: *mut c_void,
    mel: *const f32,
    n_mel: c_int,
    n_frames: c_int,
    n_ctx: c_int,
    n_state: c_int,
    n_threads: c_int,
    out: *mut MemqualTensor,
) -> c_int {
    if user_data.is_null() || mel.is_null() || out.is_null() {
        return -1;
    }
    let (Ok(mel_n), Ok(frames_n), Ok(ctx_n), Ok(state_n), Ok(threads_n)) = (
        u32::try_from(n_mel),
        u32::try_from(n_frames),
        u32::try_from(n_ctx),
        u32::try_from(n_state),
        u32::try_from(n_threads),
    ) else {
        return -2;
    };
    // SAFETY: per this function's contract, user_data is the leaked slot.
    let slot = unsafe { &*user_data.cast::<EncoderSlot>() };
    // SAFETY: per the header, mel holds n_mel*n_frames floats for the call.
    let mel = unsafe { std::slice::from_raw_parts(mel, mel_n as usize * frames_n as usize) };
    let Ok(mut guard) = slot.0.lock() else {
        return -3;
    };
    let Some(process) = guard.as_mut() else {
        let message = "no external encoder process is running (an earlier window failed)";
        super::logcapture::note(&format!("external encoder: {message}"));
        if let Ok(mut last) = LAST_ERROR.lock() {
            *last = Some(message.into());
        }
        return -4;
    };
    match process.encode(mel, [mel_n, frames_n, ctx_n, threads_n], state_n) {
        Ok(tensor) => {
            // SAFETY: out is writable per the contract.
            unsafe { *out = tensor };
            0
        }
        Err(message) => {
            // The process is gone and reaped; nothing more goes to it.
            *guard = None;
            super::logcapture::note(&format!("external encoder: {message}"));
            if let Ok(mut last) = LAST_ERROR.lock() {
                *last = Some(message);
            }
            -5
        }
    }
}

/// Most mel bands and frames a window can have (whisper.cpp: 80 or 128 bands,
/// 3000 frames); a request beyond them is refused before anything is allocated.
const MOST_MELS: u32 = 128;
const MOST_FRAMES: u32 = 3000;

/// Test only: whether `fault` acts at `phase` (a signal, an exit or a hang).
fn acts_at(fault: Option<EncoderFault>, phase: EncoderPhase) -> bool {
    matches!(
        fault,
        Some(EncoderFault::Process(
            ProcessFault::Signal { at, .. } | ProcessFault::Exit { at, .. } | ProcessFault::Hang { at }
        )) if at == phase
    )
}

/// Test only: do what `fault` says at `phase`, if it acts there. A signal
/// or an exit never returns; a hang blocks this thread for good. The caller
/// has flushed whatever the worker should have before it acts.
fn strike(fault: Option<EncoderFault>, phase: EncoderPhase) {
    if !acts_at(fault, phase) {
        return;
    }
    match fault {
        Some(EncoderFault::Process(ProcessFault::Signal { signal, .. })) => raise(signal),
        // SAFETY: _exit ends the process at once (no destructors run while
        // another thread may still be encoding).
        Some(EncoderFault::Process(ProcessFault::Exit { code, .. })) => unsafe {
            libc::_exit(c_int::from(code))
        },
        _ => loop {
            std::thread::park();
        },
    }
}

/// Test only: raise `signal` on this process with its default action, and
/// no core file left on the host.
fn raise(signal: FaultSignal) -> ! {
    let sig = match signal {
        FaultSignal::Kill => libc::SIGKILL,
        FaultSignal::Term => libc::SIGTERM,
        FaultSignal::Int => libc::SIGINT,
        FaultSignal::Hup => libc::SIGHUP,
        FaultSignal::Abrt => libc::SIGABRT,
        FaultSignal::Segv => libc::SIGSEGV,
        FaultSignal::Bus => libc::SIGBUS,
    };
    // SAFETY: plain libc calls on this process; each of these signals ends
    // it by default, so `raise` (delivered to this thread before it returns)
    // does not come back.
    unsafe {
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_DUMPABLE, 0);
        if sig != libc::SIGKILL {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        }
        libc::raise(sig);
        libc::_exit(125)
    }
}

/// Test only: close stdout (the worker sees end of file) and live on until
/// the worker closes our stdin or kills us.
fn close_output_and_linger(output: &mut impl Write, input: &mut impl Read) -> u8 {
    let _ = output.flush();
    // SAFETY: closing our own stdout; nothing writes to it after this.
    unsafe { libc::close(1) };
    let _ = std::io::copy(input, &mut std::io::sink());
    1
}

/// Never outlive memqual, on macOS too (no `PR_SET_PDEATHSIG` there): the
/// lifeline the worker inherited on fd 4, and passed on, closes when memqual
/// is gone, wherever this process is (loading, encoding, hung).
fn die_with_harness() {
    use std::os::unix::fs::FileTypeExt;
    let Ok(file) = std::fs::File::open(format!("/dev/fd/{}", worker_contract::LIFELINE_FD)) else {
        return;
    };
    if file.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
        let _ = worker_contract::Lifeline::from_file(file).watch(|| {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
            std::process::abort();
        });
    }
}

/// `--external-encoder`: the encoder process's main loop. Returns the exit code.
pub fn serve() -> u8 {
    die_with_harness();
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut output = stdout.lock();
    let mut line = String::new();
    if (&mut input).take(1 << 20).read_line(&mut line).is_err() {
        return 2;
    }
    let started = serde_json::from_str::<EncoderStart>(line.trim_end())
        .map_err(anyhow::Error::from)
        .and_then(start);
    let Started {
        engine,
        model_sha256,
        fault,
        memory,
        topology,
    } = match started {
        Ok(started) => started,
        Err(e) => {
            let ready = EncoderReady {
                error: Some(worker_contract::error_text(e.as_ref())),
                model_sha256: None,
                memory: None,
                topology: None,
            };
            let _ = writeln!(
                output,
                "{}",
                serde_json::to_string(&ready).unwrap_or_default()
            );
            return 1;
        }
    };
    let ready = EncoderReady {
        error: None,
        model_sha256: Some(model_sha256),
        memory,
        topology,
    };
    let mut ready_line = serde_json::to_string(&ready).unwrap_or_default();
    if let Some(EncoderFault::Process(ProcessFault::BadReady { ready: bad })) = fault {
        let mut value = serde_json::to_value(&ready).unwrap_or_default();
        ready_line = match bad {
            BadReady::NotJson => "the encoder is ready".into(),
            BadReady::UnknownField => {
                value["surprise"] = serde_json::json!(true);
                value.to_string()
            }
            BadReady::WrongType => r#"{"error":null,"model_sha256":42}"#.into(),
            BadReady::MissingDigest => r#"{"error":null}"#.into(),
            BadReady::WrongDigest => {
                value["model_sha256"] = serde_json::json!("0".repeat(64));
                value.to_string()
            }
            BadReady::Truncated => {
                let half = ready_line.len() / 2;
                let _ = output.write_all(&ready_line.as_bytes()[..half]);
                return close_output_and_linger(&mut output, &mut input);
            }
        };
    }
    if writeln!(output, "{ready_line}")
        .and_then(|()| output.flush())
        .is_err()
    {
        return 1;
    }
    strike(fault, EncoderPhase::Ready);
    let (ctx, state) = engine.raw();
    let n_state = engine.hparams().n_audio_state.max(0) as u32;
    let (mut raw, mut mel, mut out) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        let mut head = [0u8; 20];
        match input.read_exact(&mut head) {
            Ok(()) => {}
            // The worker closed our stdin: teardown.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return 0,
            Err(_) => return 1,
        }
        let u32_at = |o: usize| u32::from_le_bytes(head[o..o + 4].try_into().unwrap_or([0; 4]));
        let (n_mel, n_frames, n_ctx, n_threads) = (u32_at(4), u32_at(8), u32_at(12), u32_at(16));
        if &head[..4] != REQUEST_MAGIC || n_mel > MOST_MELS || n_frames > MOST_FRAMES {
            return 1; // not a request: the stream cannot be trusted any further
        }
        raw.resize(n_mel as usize * n_frames as usize * 4, 0);
        if input.read_exact(&mut raw).is_err() {
            return 1;
        }
        mel.clear();
        mel.extend(
            raw.chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        );
        out.clear();
        out.resize(n_state as usize * n_ctx as usize, 0.0);
        // Test only: the fault acts while the native encoder runs, and the
        // reply waits for it (a hang never lets it leave).
        let mid_encode = acts_at(fault, EncoderPhase::MidEncode).then(|| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                strike(fault, EncoderPhase::MidEncode);
            })
        });
        let result = match state {
            // SAFETY: ctx and state are the live pointers of `engine`.
            Some(state) => unsafe {
                super::patch::encode_mel(
                    ctx,
                    state,
                    &mel,
                    n_mel as i32,
                    n_frames as i32,
                    n_ctx as i32,
                    n_threads.max(1) as i32,
                    &mut out,
                )
            },
            None => Err(-20),
        };
        if let Some(fault) = mid_encode {
            let _ = fault.join();
        }
        let written = match result {
            Ok(()) => match fault {
                Some(EncoderFault::Process(ProcessFault::BadHeader {
                    header: BadHeader::Truncated,
                })) => {
                    let (head, _) = reply_plan(&out, n_state, n_ctx, None);
                    let _ = output.write_all(&head[..head.len() / 2]);
                    return close_output_and_linger(&mut output, &mut input);
                }
                _ => write_reply(&mut output, &out, n_state, n_ctx, fault),
            },
            Err(rc) => write_failure(&mut output, rc, "the native encoder failed"),
        };
        if written.is_err() {
            return 1;
        }
    }
}

/// The encoder process once its model is loaded.
struct Started {
    engine: super::engine::Engine,
    model_sha256: String,
    fault: Option<EncoderFault>,
    memory: Option<worker_contract::EncoderProcessSteps>,
    topology: Option<worker_contract::Topology>,
}

fn start(start: EncoderStart) -> anyhow::Result<Started> {
    use worker_contract::{EncoderMemory, ModelLayout};
    let process_start = EncoderMemory::now();
    strike(start.fault, EncoderPhase::ProcessStart);
    if start.model.layout == ModelLayout::DecoderOnly {
        anyhow::bail!(
            "model {}: a decoder-only artifact has no encoder to run",
            start.model.path.display()
        );
    }
    // An encoder-only artifact loads without any decoder: whisper.cpp (patch
    // 0004) allocates the encoder's tensors and an encoder-sized state only.
    super::patch::set_plan(super::patch::LoadPlan {
        external_encoder: None,
        max_audio_ctx: start.max_audio_ctx,
        max_batch: 0,
        coreml_encoder_only: false,
        coreml_compute_units: worker_contract::CoremlComputeUnits::All,
        encoder_only: start.model.layout == ModelLayout::EncoderOnly,
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    let model = super::model::VerifiedModel::open(&start.model)?;
    // What this process costs whatever its model: the runtime's tables and
    // the file's check, before the first weight (the pair gate's allowance).
    super::patch::runtime_init().map_err(|e| anyhow::anyhow!(e))?;
    let runtime_ready = EncoderMemory::now();
    let settings = super::engine::RunSettings {
        hooks: super::engine::Hooks(&[&super::patch::LoadPlanHook]),
        ..super::engine::RunSettings::plain()
    };
    let mut engine =
        super::engine::Engine::load(&model, worker_contract::Initializer::NoState, settings)?;
    // What loading freed goes back to the kernel before it is counted: a
    // weight read through a staging buffer (whisper.cpp does so for a buffer
    // that is not host memory, such as ggml's AMX weights on a CPU with AMX)
    // leaves that buffer free in the heap, where glibc keeps it once an
    // earlier large free raised its mmap threshold. This process stands in
    // for Core ML's, and a lean one returns it.
    super::residency::trim_heap();
    let model_loaded = EncoderMemory::now();
    strike(start.fault, EncoderPhase::ModelLoaded);
    engine.create_states(worker_contract::Initializer::NoState, 0)?;
    super::residency::trim_heap();
    let state_ready = EncoderMemory::now();
    strike(start.fault, EncoderPhase::StateReady);
    let log = super::logcapture::drain();
    let topology = worker_contract::Topology::from_log(log.iter().map(|(_, line)| line.as_str()));
    let memory = match (process_start, model_loaded, state_ready) {
        (Some(process_start), Some(model_loaded), Some(state_ready)) => {
            Some(worker_contract::EncoderProcessSteps {
                process_start,
                runtime_ready,
                model_loaded,
                state_ready,
            })
        }
        _ => None,
    };
    Ok(Started {
        engine,
        model_sha256: model.identity.sha256.clone(),
        fault: start.fault,
        memory,
        topology: Some(topology),
    })
}

/// A reply's header for `data` as `fault` (test only) bends it, and how many
/// bytes of the data then go out.
fn reply_plan(
    data: &[f32],
    n_state: u32,
    n_ctx: u32,
    fault: Option<EncoderFault>,
) -> (Vec<u8>, usize) {
    let (n_state, n_ctx) = (i64::from(n_state), i64::from(n_ctx));
    let mut ne = [n_state, n_ctx, 1, 1];
    let nb = [4, 4 * n_state, 4 * n_state * n_ctx, 4 * n_state * n_ctx];
    let mut nbytes = (data.len() * 4) as u64;
    let mut sent = data.len() * 4;
    match fault {
        Some(EncoderFault::Reply(ReplyFault::WrongShape)) => ne = [n_ctx, n_state, 1, 1],
        // Announces the whole tensor, then sends half and closes.
        Some(EncoderFault::Reply(ReplyFault::ShortBuffer)) => sent /= 2,
        Some(EncoderFault::Reply(ReplyFault::SmallTensor)) => {
            ne = [n_state, n_ctx - 1, 1, 1];
            nbytes -= n_state as u64 * 4;
            sent = nbytes as usize;
        }
        Some(EncoderFault::Process(ProcessFault::BadHeader {
            header: BadHeader::Huge,
        })) => {
            nbytes = u64::MAX;
            sent = 0;
        }
        _ => {}
    }
    let mut head = Vec::with_capacity(REPLY_HEAD);
    head.extend_from_slice(REPLY_MAGIC);
    head.extend_from_slice(&0i32.to_le_bytes());
    head.extend_from_slice(&0i32.to_le_bytes()); // float32
    head.extend_from_slice(&2i32.to_le_bytes());
    for v in ne.iter().chain(nb.iter()) {
        head.extend_from_slice(&v.to_le_bytes());
    }
    head.extend_from_slice(&nbytes.to_le_bytes());
    (head, sent)
}

fn write_reply(
    output: &mut impl Write,
    data: &[f32],
    n_state: u32,
    n_ctx: u32,
    fault: Option<EncoderFault>,
) -> std::io::Result<()> {
    match fault {
        Some(EncoderFault::Reply(ReplyFault::Fail)) => {
            return write_failure(output, -30, "injected failure");
        }
        Some(EncoderFault::Process(ProcessFault::BadHeader {
            header: BadHeader::Garbage,
        })) => {
            let garbage: Vec<u8> = b"NOT A REPLY "
                .iter()
                .copied()
                .cycle()
                .take(REPLY_HEAD)
                .collect();
            output.write_all(&garbage)?;
            return output.flush();
        }
        _ => {}
    }
    let (head, mut sent) = reply_plan(data, n_state, n_ctx, fault);
    let whole = data.len() * 4;
    let mid_reply = acts_at(fault, EncoderPhase::MidReply);
    if mid_reply {
        sent = whole / 2;
    }
    output.write_all(&head)?;
    let mut body = Vec::with_capacity(sent);
    for v in data {
        body.extend_from_slice(&v.to_le_bytes());
    }
    output.write_all(&body[..sent])?;
    output.flush()?;
    // Test only: the header and half the data are out.
    strike(fault, EncoderPhase::MidReply);
    if sent < whole
        && !matches!(
            fault,
            Some(EncoderFault::Process(ProcessFault::BadHeader { .. }))
        )
    {
        // The short buffer: the worker must see the stream end, not wait for more.
        return Err(std::io::Error::other("short buffer sent"));
    }
    Ok(())
}

fn write_failure(output: &mut impl Write, rc: i32, message: &str) -> std::io::Result<()> {
    let mut head = vec![0u8; REPLY_HEAD];
    head[..4].copy_from_slice(REPLY_MAGIC);
    head[4..8].copy_from_slice(&rc.to_le_bytes());
    output.write_all(&head)?;
    output.write_all(&(message.len() as u32).to_le_bytes())?;
    output.write_all(message.as_bytes())?;
    output.flush()
}
