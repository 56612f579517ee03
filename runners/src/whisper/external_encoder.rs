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

use super::patch::MemqualTensor;
use serde::{Deserialize, Serialize};
use std::ffi::{c_int, c_void};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use worker_contract::{EncoderFault, ModelInput};

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

/// The running encoder process, as the worker holds it.
pub struct EncoderProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
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

    /// Stop the process (teardown): close its stdin, then wait.
    pub fn stop(&self) {
        if let Ok(mut slot) = self.0.lock()
            && let Some(process) = slot.take()
        {
            let EncoderProcess {
                mut child, stdin, ..
            } = process;
            drop(stdin);
            let _ = child.wait();
        }
    }
}

impl EncoderProcess {
    /// Start `exe --external-encoder` and wait until its model is loaded.
    pub fn spawn(exe: &std::path::Path, start: &EncoderStart) -> anyhow::Result<EncoderProcess> {
        use anyhow::Context;
        let mut command = Command::new(exe);
        command
            .arg("--external-encoder")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
            unsafe {
                command.pre_exec(|| {
                    // The encoder must not outlive the worker it serves.
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start the external encoder {}", exe.display()))?;
        let mut stdin = child.stdin.take().context("encoder stdin")?;
        let mut stdout = BufReader::new(child.stdout.take().context("encoder stdout")?);
        let mut line = serde_json::to_vec(start)?;
        line.push(b'\n');
        stdin
            .write_all(&line)
            .context("cannot send the external encoder its model")?;
        let mut answer = String::new();
        (&mut stdout)
            .take(64 * 1024)
            .read_line(&mut answer)
            .context("the external encoder did not answer")?;
        let ready: EncoderReady = serde_json::from_str(answer.trim_end()).with_context(|| {
            let _ = child.kill();
            format!("the external encoder answered {answer:?}, not its ready line")
        })?;
        if let Some(error) = ready.error {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the external encoder failed to start: {error}");
        }
        Ok(EncoderProcess {
            stdin,
            stdout,
            request: Vec::new(),
            reply: Vec::new(),
            identity: EncoderIdentity {
                pid: child.id(),
                model_sha256: ready.model_sha256.unwrap_or_default(),
                memory: ready.memory,
                topology: ready.topology,
            },
            child,
        })
    }

    /// One window: send the mel, read and check the reply header, then exactly its data.
    fn encode(
        &mut self,
        mel: &[f32],
        dims: [u32; 4],
        n_state: u32,
    ) -> Result<MemqualTensor, String> {
        let n_ctx = dims[2];
        let frame = &mut self.request;
        frame.clear();
        frame.extend_from_slice(REQUEST_MAGIC);
        for d in dims {
            frame.extend_from_slice(&d.to_le_bytes());
        }
        for v in mel {
            frame.extend_from_slice(&v.to_le_bytes());
        }
        self.stdin
            .write_all(frame)
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("cannot send the window to the external encoder: {e}"))?;
        let mut head = [0u8; 4 + 4 * 3 + 8 * 8 + 8];
        self.stdout
            .read_exact(&mut head)
            .map_err(|e| format!("the external encoder's reply ended early: {e}"))?;
        if &head[..4] != REPLY_MAGIC {
            return Err("the external encoder's reply does not start with MQEO".into());
        }
        let i32_at = |o: usize| i32::from_le_bytes(head[o..o + 4].try_into().unwrap_or([0; 4]));
        let i64_at = |o: usize| i64::from_le_bytes(head[o..o + 8].try_into().unwrap_or([0; 8]));
        let status = i32_at(4);
        if status != 0 {
            let mut len = [0u8; 4];
            let mut message = Vec::new();
            if self.stdout.read_exact(&mut len).is_ok() {
                let n = u32::from_le_bytes(len).min(4096) as u64;
                let _ = (&mut self.stdout).take(n).read_to_end(&mut message);
            }
            return Err(format!(
                "the external encoder failed ({status}): {}",
                String::from_utf8_lossy(&message)
            ));
        }
        let tensor = MemqualTensor {
            type_: i32_at(8),
            n_dims: i32_at(12),
            ne: [i64_at(16), i64_at(24), i64_at(32), i64_at(40)],
            nb: [i64_at(48), i64_at(56), i64_at(64), i64_at(72)],
            data: std::ptr::null(),
            nbytes: u64::from_le_bytes(head[80..88].try_into().unwrap_or([0; 8])) as usize,
        };
        // Never read (or allocate) more than the window's output can be.
        let most = n_state as usize * n_ctx as usize * 4;
        if tensor.nbytes > most {
            return Err(format!(
                "the external encoder announced {} bytes; a [{n_state}, {n_ctx}] float32 output has {most}",
                tensor.nbytes
            ));
        }
        self.reply.resize(tensor.nbytes, 0);
        self.stdout.read_exact(&mut self.reply).map_err(|e| {
            format!(
                "the external encoder sent less than the {} bytes it announced: {e}",
                tensor.nbytes
            )
        })?;
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

/// The patch's `whisper_memqual_encode_fn`: forwards one window to the
/// process in the slot `user_data` points at.
///
/// # Safety
/// Called by whisper.cpp with the pointers its header documents: `user_data`
/// is the `'static` [`EncoderSlot`], `mel` holds n_mel × n_frames floats and
/// `out` is writable.
pub unsafe extern "C" fn encode_callback(
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
        eprintln!("external encoder: no process is running");
        return -4;
    };
    match process.encode(mel, [mel_n, frames_n, ctx_n, threads_n], state_n) {
        Ok(tensor) => {
            // SAFETY: out is writable per the contract.
            unsafe { *out = tensor };
            0
        }
        Err(message) => {
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

/// `--external-encoder`: the encoder process's main loop. Returns the exit code.
pub fn serve() -> u8 {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut output = stdout.lock();
    let mut line = String::new();
    if (&mut input).take(1 << 20).read_line(&mut line).is_err() {
        return 2;
    }
    let Started {
        engine,
        model_sha256,
        fault,
        memory,
        topology,
    } = match start(&line) {
        Ok(started) => started,
        Err(e) => {
            let ready = EncoderReady {
                error: Some(format!("{e:#}")),
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
    if writeln!(
        output,
        "{}",
        serde_json::to_string(&ready).unwrap_or_default()
    )
    .and_then(|()| output.flush())
    .is_err()
    {
        return 1;
    }
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
        let written = match result {
            Ok(()) => write_reply(&mut output, &out, n_state, n_ctx, fault),
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

fn start(line: &str) -> anyhow::Result<Started> {
    use worker_contract::{EncoderMemory, ModelLayout};
    let process_start = EncoderMemory::now();
    let start: EncoderStart = serde_json::from_str(line.trim_end())?;
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
    let settings = super::engine::RunSettings::plain();
    let mut engine =
        super::engine::Engine::load(&model, worker_contract::Initializer::NoState, settings)?;
    let model_loaded = EncoderMemory::now();
    engine.create_states(worker_contract::Initializer::NoState, 0)?;
    let state_ready = EncoderMemory::now();
    let log = super::logcapture::drain();
    let topology = worker_contract::Topology::from_log(log.iter().map(|(_, line)| line.as_str()));
    let memory = match (process_start, model_loaded, state_ready) {
        (Some(process_start), Some(model_loaded), Some(state_ready)) => {
            Some(worker_contract::EncoderProcessSteps {
                process_start,
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

fn write_reply(
    output: &mut impl Write,
    data: &[f32],
    n_state: u32,
    n_ctx: u32,
    fault: Option<EncoderFault>,
) -> std::io::Result<()> {
    let (n_state, n_ctx) = (i64::from(n_state), i64::from(n_ctx));
    let mut ne = [n_state, n_ctx, 1, 1];
    let nb = [4, 4 * n_state, 4 * n_state * n_ctx, 4 * n_state * n_ctx];
    let mut nbytes = data.len() * 4;
    let mut sent = nbytes;
    match fault {
        Some(EncoderFault::Fail) => return write_failure(output, -30, "injected failure"),
        Some(EncoderFault::WrongShape) => ne = [n_ctx, n_state, 1, 1],
        // Announces the whole tensor, then sends half and closes.
        Some(EncoderFault::ShortBuffer) => sent = nbytes / 2,
        Some(EncoderFault::SmallTensor) => {
            ne = [n_state, n_ctx - 1, 1, 1];
            nbytes -= n_state as usize * 4;
            sent = nbytes;
        }
        None => {}
    }
    let mut head = Vec::with_capacity(88);
    head.extend_from_slice(REPLY_MAGIC);
    head.extend_from_slice(&0i32.to_le_bytes());
    head.extend_from_slice(&0i32.to_le_bytes()); // float32
    head.extend_from_slice(&2i32.to_le_bytes());
    for v in ne.iter().chain(nb.iter()) {
        head.extend_from_slice(&v.to_le_bytes());
    }
    head.extend_from_slice(&(nbytes as u64).to_le_bytes());
    output.write_all(&head)?;
    let mut body = Vec::with_capacity(sent);
    for v in data {
        body.extend_from_slice(&v.to_le_bytes());
    }
    output.write_all(&body[..sent])?;
    output.flush()?;
    if sent < nbytes {
        // The short buffer: the worker must see the stream end, not wait for more.
        return Err(std::io::Error::other("short buffer sent"));
    }
    Ok(())
}

fn write_failure(output: &mut impl Write, rc: i32, message: &str) -> std::io::Result<()> {
    let mut head = vec![0u8; 88];
    head[..4].copy_from_slice(REPLY_MAGIC);
    head[4..8].copy_from_slice(&rc.to_le_bytes());
    output.write_all(&head)?;
    output.write_all(&(message.len() as u32).to_le_bytes())?;
    output.write_all(message.as_bytes())?;
    output.flush()
}
