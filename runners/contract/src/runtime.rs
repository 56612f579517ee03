//! What the whisper worker reports about its runtime once the state is ready:
//! identity (whisper.cpp version, system info, model digest) and the topology
//! whisper.cpp logged while loading (buffers per backend, kv caches, compute
//! buffers per graph, Core ML engagement).
//!
//! [`Topology::from_log`] is the one parser of whisper.cpp 1.8.3's allocation
//! lines; the worker uses it for the Core ML fail-closed check and the
//! receipt carries its output. Sizes are the logged MB values (10^6 bytes,
//! two decimals) kept as logged, plus their byte equivalents.

use serde::{Deserialize, Serialize};

/// A buffer size as whisper.cpp logs it (`%7.2f MB`, MB = 10^6 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LoggedSize {
    /// The logged value in MB (10^6 bytes), two decimals, as printed.
    pub mb: f64,
    /// `mb × 10^6`, rounded: accurate to ±5 kB because the log rounds.
    pub bytes: u64,
}

impl LoggedSize {
    fn from_mb(mb: f64) -> Self {
        LoggedSize {
            mb,
            bytes: (mb * 1e6).round() as u64,
        }
    }
}

/// The kv caches and compute buffers of one `whisper_init_state`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StateBuffers {
    /// `kv self size`: the decoder's self-attention kv cache, sized for one
    /// decoder (whisper.cpp recreates it larger when more decoders run).
    /// Absent when not logged.
    pub kv_self: Option<LoggedSize>,
    /// `kv cross size`: the decoder's cross-attention kv cache over the
    /// encoder output. Absent when not logged.
    pub kv_cross: Option<LoggedSize>,
    /// `kv pad size`: the encoder's padded attention k/v buffer (used by
    /// flash attention, allocated either way). Absent when not logged.
    pub kv_pad: Option<LoggedSize>,
    /// `compute buffer (<graph>)` in log order: conv, encode, cross, decode.
    pub compute: Vec<(String, LoggedSize)>,
    /// The Core ML path whisper.cpp tried for this state, if it tried.
    pub coreml_path: Option<String>,
    /// whisper.cpp logged `Core ML model loaded` for this state.
    pub coreml_loaded: bool,
    /// whisper.cpp logged `failed to load Core ML model` for this state (it
    /// then falls back to the native encoder).
    pub coreml_failed: bool,
}

impl StateBuffers {
    /// The compute buffer logged for `graph` (`conv`, `encode`, `cross`,
    /// `decode`); `None` when whisper.cpp logged none for it.
    pub fn compute_size(&self, graph: &str) -> Option<LoggedSize> {
        self.compute
            .iter()
            .find(|(g, _)| g == graph)
            .map(|(_, s)| *s)
    }

    /// kv self + cross + pad + every compute buffer, in bytes.
    pub fn total_bytes(&self) -> u64 {
        [self.kv_self, self.kv_cross, self.kv_pad]
            .into_iter()
            .flatten()
            .chain(self.compute.iter().map(|(_, s)| *s))
            // Saturating: read back from a run directory, the sizes are data.
            .fold(0u64, |sum, s| sum.saturating_add(s.bytes))
    }
}

/// Everything whisper.cpp said about where memory went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Topology {
    /// `<backend> total size = … MB` lines of the model load, per buffer type.
    pub model_buffers: Vec<(String, LoggedSize)>,
    /// `model size = … MB`: the summed size of every tensor loaded. Absent
    /// when not logged.
    pub model_size: Option<LoggedSize>,
    /// Backends whisper.cpp reported using (`using <name> backend`).
    pub backends: Vec<String>,
    /// `no GPU found` was logged.
    pub no_gpu: bool,
    /// One entry per state whisper.cpp initialised, in order.
    pub states: Vec<StateBuffers>,
    /// The raw allocation lines this was parsed from, in order.
    pub lines: Vec<String>,
}

/// The value after the last `=` of a `… = 12.34 MB` line.
fn mb_after_equals(line: &str) -> Option<f64> {
    let value = line.rsplit_once('=')?.1.trim();
    value.strip_suffix("MB")?.trim().parse().ok()
}

/// Text between the first pair of single quotes.
fn quoted(line: &str) -> Option<String> {
    let start = line.find('\'')? + 1;
    let end = start + line[start..].find('\'')?;
    Some(line[start..end].to_string())
}

impl Topology {
    /// Parse whisper.cpp log lines (any order of other lines is ignored).
    pub fn from_log<'a>(lines: impl IntoIterator<Item = &'a str>) -> Topology {
        let mut t = Topology::default();
        for raw in lines {
            let line = raw.trim();
            let Some((func, rest)) = line.split_once(": ") else {
                continue;
            };
            let rest = rest.trim();
            let keep = match func {
                "whisper_model_load" if rest.contains("total size") => {
                    let name = rest.split("total size").next().unwrap_or("").trim();
                    if let Some(mb) = mb_after_equals(rest) {
                        t.model_buffers
                            .push((name.to_string(), LoggedSize::from_mb(mb)));
                    }
                    true
                }
                "whisper_model_load" if rest.starts_with("model size") => {
                    t.model_size = mb_after_equals(rest).map(LoggedSize::from_mb);
                    true
                }
                "whisper_backend_init_gpu" | "whisper_backend_init" => {
                    if let Some(name) = rest
                        .strip_prefix("using ")
                        .and_then(|r| r.strip_suffix(" backend"))
                    {
                        if !t.backends.iter().any(|b| b == name) {
                            t.backends.push(name.to_string());
                        }
                    } else if rest.starts_with("no GPU found") {
                        t.no_gpu = true;
                    }
                    true
                }
                "whisper_init_state" => {
                    t.state_line(rest);
                    true
                }
                _ => false,
            };
            if keep {
                t.lines.push(line.to_string());
            }
        }
        t
    }

    fn state_line(&mut self, rest: &str) {
        // Every state starts with its kv self cache, so that line opens a new entry.
        if rest.starts_with("kv self size") || self.states.is_empty() {
            self.states.push(StateBuffers::default());
        }
        let Some(state) = self.states.last_mut() else {
            return;
        };
        let size = mb_after_equals(rest).map(LoggedSize::from_mb);
        if rest.starts_with("kv self size") {
            state.kv_self = size;
        } else if rest.starts_with("kv cross size") {
            state.kv_cross = size;
        } else if rest.starts_with("kv pad") {
            state.kv_pad = size;
        } else if let Some(after) = rest.strip_prefix("compute buffer (") {
            if let (Some(graph), Some(size)) = (after.split(')').next(), size) {
                state.compute.push((graph.trim().to_string(), size));
            }
        } else if rest.starts_with("loading Core ML model from") {
            state.coreml_path = quoted(rest);
        } else if rest.starts_with("Core ML model loaded") {
            state.coreml_loaded = true;
        } else if rest.starts_with("failed to load Core ML model") {
            state.coreml_failed = true;
            state.coreml_path = state.coreml_path.take().or_else(|| quoted(rest));
        }
    }

    /// Whether the Core ML encoder really replaced the native one in every
    /// state: loaded, never failed, and no native `encode` compute buffer.
    pub fn coreml_engaged(&self) -> Result<(), String> {
        if self.states.is_empty() {
            return Err("whisper.cpp logged no state initialisation".into());
        }
        for (i, s) in self.states.iter().enumerate() {
            if s.coreml_path.is_none() {
                return Err(format!(
                    "state {i}: whisper.cpp never tried a Core ML model (worker built without the `coreml` feature?)"
                ));
            }
            if s.coreml_failed || !s.coreml_loaded {
                return Err(format!(
                    "state {i}: the Core ML model at {} did not load; whisper.cpp fell back to the native encoder",
                    s.coreml_path.as_deref().unwrap_or("?")
                ));
            }
            if let Some(size) = s.compute_size("encode") {
                return Err(format!(
                    "state {i}: a native encode compute buffer of {:.2} MB was allocated although Core ML loaded",
                    size.mb
                ));
            }
        }
        Ok(())
    }
}

/// Identity of the loaded model file. With `prevalidate` off (negative
/// controls) the header fields are the raw words at their offsets, 0 past
/// the end of a short file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelIdentity {
    /// The model path as the arm spec gave it.
    pub path: String,
    /// The file's length in bytes.
    pub bytes: u64,
    /// SHA-256 of the whole file (lowercase hex), hashed from the open file
    /// whisper.cpp then read.
    pub sha256: String,
    /// The header's raw ftype field (quantization version × 1000 + type).
    pub ftype: i32,
    /// The header's vocabulary size (51864 for the English-only models).
    pub n_vocab: i32,
    /// The header's encoder layer count.
    pub n_audio_layer: i32,
    /// The header's decoder layer count.
    pub n_text_layer: i32,
}

/// The Core ML sidecar actually used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CoremlIdentity {
    /// The `-encoder.mlmodelc` path whisper.cpp opened (from its log).
    pub path: String,
    /// That path with every link resolved: the tree that was digested.
    pub resolved_path: String,
    /// The compute units the model was loaded with, in Core ML's words
    /// (`MLComputeUnitsAll`, what stock whisper.cpp 1.8.3 hard-codes).
    pub compute_units: String,
    /// True when the arm chose them (`coreml_compute_units`, patched
    /// runtime); false when they are whisper.cpp's hard-coded default.
    pub compute_units_from_arm: bool,
    /// Whether whisper.cpp may run its native encoder when the Core ML model
    /// fails to load (stock whisper-rs builds define
    /// `WHISPER_COREML_ALLOW_FALLBACK`; the patched set compiles it out).
    pub fallback_allowed: bool,
    /// Whether every prediction's output is checked (feature, type, shape,
    /// count, strides) before it is copied: the patched set's fail-closed
    /// encoder. Stock whisper.cpp copies it unchecked.
    pub output_checked: bool,
    /// Where Core ML plans to run the encoder's operations (its compute
    /// plan), or why that is not attributable. Placement is never inferred
    /// from timing.
    pub placement: crate::CoremlPlacement,
    /// SHA-256 over the sorted tree (`sampler::captures::tree_digest`).
    pub tree_sha256: String,
    /// Regular files in the digested tree.
    pub files: u64,
    /// Sum of those files' sizes, in bytes.
    pub bytes: u64,
}

/// The worker's runtime report, sent once after `state_ready`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeReport {
    /// The inference runtime's name (`whisper.cpp`).
    pub runtime: String,
    /// The runtime's own version string (`whisper_version()`, `1.8.3`).
    pub runtime_version: String,
    /// `whisper_print_system_info()`.
    pub system_info: String,
    /// Path of the running worker executable (its bare name when the OS
    /// would not say).
    pub worker_executable: String,
    /// SHA-256 of that executable (lowercase hex); `None` when it could not
    /// be read.
    pub worker_sha256: Option<String>,
    /// The model file that was checked and loaded.
    pub model: ModelIdentity,
    /// The Core ML sidecar whisper.cpp loaded; `None` for the native
    /// encoder (a `coreml` arm whose sidecar did not engage fails before
    /// this report is sent).
    pub coreml: Option<CoremlIdentity>,
    /// States alive at `state_ready`: the working one plus the extras.
    pub state_count: u32,
    /// How the worker built its state (the arm's `initializer`).
    pub initializer: crate::Initializer,
    /// The effective settings (after defaults), as the runtime was called.
    pub settings: serde_json::Value,
    /// What whisper.cpp logged about its buffers while loading and creating states.
    pub topology: Topology,
    /// Wall time of the context load (`process_start` work excluded), less
    /// the time the worker spent hashing the bytes whisper.cpp read.
    pub load_ns: u64,
    /// Wall time to create all states.
    pub state_ns: u64,
    /// Each state's creation, in the order the worker made them (empty in
    /// receipts from workers older than this field). With a Core ML encoder
    /// each state loads the compiled model: the first pays Core ML's
    /// specialization when the OS has none cached, a later one is the warm
    /// load, and its footprint change is what one more state costs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<StateCreation>,
    /// The external encoder process (patched whisper.cpp,
    /// `encoder = "external_process"`): its memory is outside the worker's,
    /// and the census reports it apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_encoder: Option<ExternalEncoderProcess>,
    /// How the runtime was built: its sources, features and patches (`None`
    /// in receipts from workers older than this field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<RuntimeBuild>,
}

/// One state's creation (`whisper_init_state`) as the worker timed and measured it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StateCreation {
    /// 0 for the working state, then the extras in order.
    pub index: u32,
    /// Wall time of the call, in ns.
    pub create_ns: u64,
    /// The worker's footprint just before the call; `None` where the
    /// platform reports none.
    pub footprint_before_bytes: Option<u64>,
    /// The worker's footprint just after it.
    pub footprint_after_bytes: Option<u64>,
}

impl StateCreation {
    /// What the state added to the footprint (negative when the process
    /// returned more than the state took); `None` without both readings.
    pub fn footprint_delta_bytes(&self) -> Option<i64> {
        let (before, after) = (self.footprint_before_bytes?, self.footprint_after_bytes?);
        Some(after as i64 - before as i64)
    }
}

/// Where a worker's runtime came from and what was switched on, so two
/// receipts that record the same version string can still be told apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RuntimeBuild {
    /// The crate that vendors the runtime's sources (`whisper-rs-sys` for
    /// whisper.cpp, `ct2rs` for CTranslate2).
    pub source_crate: String,
    /// Its version in the lock file the worker was built with (empty when
    /// the build had none).
    pub source_crate_version: String,
    /// Its registry checksum in that lock file: cargo refuses sources that do
    /// not match it, so the tree built is the registry's, unmodified; the
    /// patch set below is the only change. Empty when not from a registry.
    pub source_checksum: String,
    /// The worker's cargo features that reach the runtime: `metal`,
    /// `coreml`, `cuda`.
    pub features: Vec<String>,
    /// memqual's patch set, file by file in the order applied (empty for stock).
    pub patches: Vec<PatchFile>,
    /// The patch set's digest as the linked library reports it (`None` for stock).
    pub patch_set_digest: Option<String>,
    /// Whether Core ML may fall back to the native encoder when its model
    /// fails to load: whisper-rs-sys defines `WHISPER_COREML_ALLOW_FALLBACK`
    /// in its Core ML builds, the patch set compiles it out. `None` without Core ML.
    pub coreml_fallback_allowed: Option<bool>,
}

/// One file of memqual's whisper.cpp patch set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PatchFile {
    /// Its name in `runners/whisper-patch/`.
    pub name: String,
    /// Its SHA-256 (lowercase hex).
    pub sha256: String,
}

/// The process that computes an arm's encoder output outside the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExternalEncoderProcess {
    /// Its process id.
    pub pid: u32,
    /// The model whose native encoder it runs, as it checked it.
    pub model: std::path::PathBuf,
    /// That model's SHA-256 (lowercase hex), as the encoder process read it.
    pub model_sha256: String,
    /// `full` (the whole model, decoder loaded and unused) or `encoder_only`
    /// (an encoder-only artifact and a state for the encoder alone).
    #[serde(default)]
    pub layout: crate::ModelLayout,
    /// Encoder positions its state was sized for (0: the model's own).
    #[serde(default)]
    pub max_audio_ctx: u32,
    /// Its own memory as it measured it (`/proc/self`, `TASK_VM_INFO`) at
    /// its three steps; `None` where the platform gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<EncoderProcessSteps>,
    /// What whisper.cpp logged in the encoder process while loading and
    /// creating its state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
}

/// The external encoder process's own memory at each step of its start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EncoderProcessSteps {
    /// As it started, before its runtime or its model.
    pub process_start: EncoderMemory,
    /// Its runtime started (whisper.cpp's backend registry and CPU backend,
    /// whose first start fills ggml's tables) and its model file checked,
    /// before any weight is read: the baseline any second process costs,
    /// whatever its model. `None` in runs made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_ready: Option<EncoderMemory>,
    /// Its model loaded.
    pub model_loaded: EncoderMemory,
    /// Its one state created: ready to encode.
    pub state_ready: EncoderMemory,
}

/// The encoder process's memory at one step, in the fields of the
/// worker's markers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EncoderMemory {
    /// Linux `VmRSS`, macOS `resident_size`: counts the pages of the
    /// executable and libraries it shares with the worker again.
    pub resident_bytes: u64,
    /// Linux `RssAnon + RssShmem + VmSwap`, macOS `phys_footprint`: its
    /// own memory, which a sum with the worker's counts once.
    pub footprint_bytes: Option<u64>,
    /// Linux `VmSize`, macOS `virtual_size`.
    pub virtual_bytes: u64,
}

impl EncoderMemory {
    /// This process's memory now; `None` where the platform reports none.
    pub fn now() -> Option<EncoderMemory> {
        let m = sampler::snapshot_self().ok()?;
        Some(EncoderMemory {
            resident_bytes: m.resident_bytes,
            footprint_bytes: m.footprint_bytes,
            virtual_bytes: m.virtual_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The load log of tiny.en F16 on CPU, whisper.cpp 1.8.3, one state.
    const TINY_LOG: &str = "\
whisper_init_from_file_with_params_no_state: loading model from 'ggml-tiny.en-f16.bin'
whisper_init_with_params_no_state: use gpu    = 0
whisper_model_load: loading model
whisper_model_load: n_vocab       = 51864
whisper_model_load: adding 1608 extra tokens
whisper_model_load: n_langs       = 99
whisper_model_load:          CPU total size =    77.11 MB
whisper_model_load: model size    =   77.11 MB
whisper_backend_init_gpu: no GPU found
whisper_init_state: kv self size  =    3.15 MB
whisper_init_state: kv cross size =    9.44 MB
whisper_init_state: kv pad  size  =    2.36 MB
whisper_init_state: compute buffer (conv)   =   13.21 MB
whisper_init_state: compute buffer (encode) =   64.81 MB
whisper_init_state: compute buffer (cross)  =    3.89 MB
whisper_init_state: compute buffer (decode) =   95.91 MB
";

    #[test]
    fn parses_the_tiny_en_load_log() {
        let t = Topology::from_log(TINY_LOG.lines());
        assert_eq!(t.model_buffers.len(), 1);
        assert_eq!(t.model_buffers[0].0, "CPU");
        assert_eq!(t.model_buffers[0].1.bytes, 77_110_000);
        assert_eq!(t.model_size.unwrap().mb, 77.11);
        assert!(t.no_gpu);
        assert_eq!(t.states.len(), 1);
        let s = &t.states[0];
        assert_eq!(s.kv_self.unwrap().bytes, 3_150_000);
        assert_eq!(s.kv_cross.unwrap().bytes, 9_440_000);
        assert_eq!(s.kv_pad.unwrap().bytes, 2_360_000);
        let graphs: Vec<&str> = s.compute.iter().map(|(g, _)| g.as_str()).collect();
        assert_eq!(graphs, ["conv", "encode", "cross", "decode"]);
        assert_eq!(s.compute_size("decode").unwrap().bytes, 95_910_000);
        // 3.15 + 9.44 + 2.36 + 13.21 + 64.81 + 3.89 + 95.91 MB
        assert_eq!(s.total_bytes(), 192_770_000);
        assert_eq!(t.lines.len(), 10);
    }

    #[test]
    fn each_kv_self_line_opens_a_state() {
        let two = format!(
            "{TINY_LOG}{}",
            TINY_LOG
                .lines()
                .filter(|l| l.starts_with("whisper_init_state"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        let t = Topology::from_log(two.lines());
        assert_eq!(t.states.len(), 2);
        assert_eq!(t.states[0], t.states[1]);
    }

    #[test]
    fn coreml_must_load_and_replace_the_native_encoder() {
        let native = Topology::from_log(TINY_LOG.lines());
        assert!(native.coreml_engaged().unwrap_err().contains("never tried"));

        let fallback = TINY_LOG.replace(
            "whisper_init_state: compute buffer (conv)",
            "whisper_init_state: loading Core ML model from 'm-encoder.mlmodelc'\n\
             whisper_init_state: failed to load Core ML model from 'm-encoder.mlmodelc'\n\
             whisper_init_state: compute buffer (conv)",
        );
        let t = Topology::from_log(fallback.lines());
        assert_eq!(
            t.states[0].coreml_path.as_deref(),
            Some("m-encoder.mlmodelc")
        );
        assert!(t.coreml_engaged().unwrap_err().contains("fell back"));

        let engaged: String = TINY_LOG
            .replace(
                "whisper_init_state: compute buffer (conv)",
                "whisper_init_state: loading Core ML model from 'm-encoder.mlmodelc'\n\
                 whisper_init_state: Core ML model loaded\n\
                 whisper_init_state: compute buffer (conv)",
            )
            .lines()
            .filter(|l| !l.contains("compute buffer (encode)"))
            .map(|l| format!("{l}\n"))
            .collect();
        let t = Topology::from_log(engaged.lines());
        assert_eq!(t.coreml_engaged(), Ok(()));

        let both = engaged.replace(
            "compute buffer (cross)",
            "compute buffer (encode) =   64.81 MB\nwhisper_init_state: compute buffer (cross)",
        );
        let t = Topology::from_log(both.lines());
        assert!(
            t.coreml_engaged()
                .unwrap_err()
                .contains("native encode compute buffer")
        );
    }
}
