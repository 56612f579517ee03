//! `memqual artifact …`: the GGML artifact tools. The container logic lives in
//! the `ggml-container` crate; this module is the command line around it:
//! arguments, JSON or human output, and exit codes (a rejected artifact is a
//! failed check, exit 1; an I/O problem is memqual's failure, exit 3).

mod closure;
pub mod coreml;
mod human;
pub mod provenance;

use anyhow::Context;
use ggml_container::corpus::{CorpusError, build_corpus};
use ggml_container::derive::{
    Derivation, DeriveError, derive, derive_decoder, receipt_path, verify_derivation,
};
use ggml_container::estimate::{EstimateOptions, estimate};
use ggml_container::quantize::{QuantizeError, quantize_as};
use ggml_container::{Expect, GgmlType, ParseError, inspect};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The artifact subcommands.
#[derive(clap::Subcommand, Debug)]
pub enum ArtifactCommand {
    /// Parse a GGML Whisper model strictly and print its full inventory:
    /// header, ftype, mel and vocabulary blocks, every tensor record with its
    /// offsets and SHA-256, totals per class, prefix and file digests. Given
    /// a Core ML model (a .mlpackage or .mlmodelc directory): its tree
    /// digest, sizes, spec version, input and output features and weight
    /// storage (bit depth, palettized or dense); links, FIFOs and devices
    /// inside it, a missing manifest or a damaged specification are refused.
    Inspect {
        /// The GGML model file, or a Core ML model directory.
        model: PathBuf,
        /// (Core ML) Check the model's input and output against what
        /// whisper.cpp binds for this GGML model's n_mels, n_audio_ctx and
        /// n_audio_state; exit 1 naming the first mismatch.
        #[arg(long, value_name = "MODEL.bin")]
        against: Option<PathBuf>,
        /// Check against the decoder-only inventory (a derived artifact).
        #[arg(long, conflicts_with = "encoder_only")]
        decoder_only: bool,
        /// Check against the encoder-only inventory (every native-encoder
        /// tensor, no decoder tensor; a derived artifact).
        #[arg(long)]
        encoder_only: bool,
        /// List every tensor record (human output).
        #[arg(long)]
        tensors: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write the lossless decoder-only derivative of SRC to OUT (prefix and
    /// decoder records copied byte for byte), reparse it, and write the sealed
    /// receipt to OUT.derivation.json.
    DeriveDecoder {
        /// The full model to derive from.
        src: PathBuf,
        /// The decoder-only file to write (must not exist).
        out: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a lossless derivative of SRC to OUT that keeps one class of
    /// tensors: --decoder-only (as derive-decoder) or --encoder-only (prefix
    /// and every native-encoder record copied byte for byte; every decoder
    /// record, the token embedding included, omitted; the vocabulary stays,
    /// as the container requires it). The output is reparsed against its
    /// kind's inventory, and the sealed receipt written to OUT.derivation.json.
    #[command(group = clap::ArgGroup::new("kind").required(true))]
    Derive {
        /// The full model to derive from.
        src: PathBuf,
        /// The derivative to write (must not exist).
        out: PathBuf,
        /// Keep the native encoder only (stock whisper.cpp refuses the result;
        /// `inspect --encoder-only` accepts it).
        #[arg(long, group = "kind")]
        encoder_only: bool,
        /// Keep the decoder only (the same file as derive-decoder).
        #[arg(long, group = "kind")]
        decoder_only: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Re-check a derivation (decoder-only or encoder-only, as its receipt
    /// says): both files, every inventory entry and the receipt's seal and
    /// bytes.
    VerifyDerivation {
        /// The full model the derivative was made from.
        src: PathBuf,
        /// The derivative.
        out: PathBuf,
        /// The derivation receipt. Default: OUT.derivation.json.
        receipt: Option<PathBuf>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Quantize an F16/F32 model with ggml's quantizer, following
    /// whisper.cpp's rules (2-D weights only; conv weights stay F16).
    Quantize {
        /// The F16 or F32 model to quantize.
        src: PathBuf,
        /// The quantized model to write (must not exist).
        out: PathBuf,
        /// The quantization type.
        #[arg(long = "type", value_enum)]
        target: QuantTarget,
        /// SRC is a decoder-only derivative (`derive-decoder`); so is OUT.
        #[arg(long)]
        decoder_only: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Build the negative-control corpus of SRC in DIR, one defective file
    /// per case, and DIR/manifest.json naming the rejection each must get.
    Corpus {
        /// A valid model the defective files are made from.
        src: PathBuf,
        /// The folder to write the corpus into.
        dir: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Predict whisper.cpp's state allocations for MODEL: K/V caches with
    /// contexts padded to 256, the logits reserve, and weight bytes per class.
    Estimate {
        /// The GGML model file.
        model: PathBuf,
        /// Audio positions the state is sized for, 1 to 1500 (default: the header's).
        #[arg(long, value_name = "N", value_parser = protocol::limits::int_flag(protocol::limits::AUDIO_POSITIONS))]
        audio_ctx: Option<u64>,
        /// Text positions the state is sized for, 1 to 448 (default: the header's).
        #[arg(long, value_name = "N", value_parser = protocol::limits::int_flag(protocol::limits::TEXT_POSITIONS))]
        text_ctx: Option<u64>,
        /// Decoders (beam size or best-of), 1 to 8; more than one grows the self cache.
        #[arg(long, value_name = "N", value_parser = protocol::limits::int_flag(protocol::limits::BEAMS))]
        beams: Option<u64>,
        /// Tokens per decoder batch the logits capacity holds, 1 to 448 (the
        /// patched worker's `state_bounds.max_batch`; default: the text context).
        #[arg(long, value_name = "N", value_parser = protocol::limits::int_flag(protocol::limits::TEXT_POSITIONS))]
        max_batch: Option<u64>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Quantization targets on the command line.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum QuantTarget {
    /// 4-bit, blocks of 32 with one f16 scale.
    #[value(name = "q4_0")]
    Q4_0,
    /// 5-bit, blocks of 32 with one f16 scale.
    #[value(name = "q5_0")]
    Q5_0,
    /// 5-bit, blocks of 32 with an f16 scale and minimum.
    #[value(name = "q5_1")]
    Q5_1,
    /// 8-bit, blocks of 32 with one f16 scale.
    #[value(name = "q8_0")]
    Q8_0,
}

impl QuantTarget {
    fn ggml(self) -> GgmlType {
        match self {
            QuantTarget::Q4_0 => GgmlType::Q4_0,
            QuantTarget::Q5_0 => GgmlType::Q5_0,
            QuantTarget::Q5_1 => GgmlType::Q5_1,
            QuantTarget::Q8_0 => GgmlType::Q8_0,
        }
    }
}

/// How a command ended: the artifact passed its checks, or was rejected.
pub enum Outcome {
    /// The artifact passed every check (exit 0).
    Passed,
    /// The artifact was rejected; the reason was printed (exit 1).
    Rejected,
}

/// The `--json` form of a rejection.
#[derive(Serialize)]
struct Rejection<'a> {
    path: &'a Path,
    accepted: bool,
    rejection: &'a ParseError,
}

fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    outln!(
        "{}",
        serde_json::to_string_pretty(value).context("serializing the output")?
    );
    Ok(())
}

/// Report a strict-parse rejection of `path` (stdout JSON or stderr text).
fn rejected(path: &Path, e: &ParseError, json: bool) -> anyhow::Result<Outcome> {
    if json {
        print_json(&Rejection {
            path,
            accepted: false,
            rejection: e,
        })?;
    }
    note!("memqual: {} rejected: {e}", path.display());
    if let ggml_container::Defect::MissingTensors { names } = &e.defect {
        if names.iter().all(|n| n.starts_with("encoder.")) {
            note!(
                "memqual: only native-encoder tensors are missing: if this is a derived decoder-only artifact, check it with --decoder-only"
            );
        } else if names.iter().all(|n| n.starts_with("decoder.")) {
            note!(
                "memqual: only decoder tensors are missing: if this is a derived encoder-only artifact, check it with --encoder-only"
            );
        }
    }
    Ok(Outcome::Rejected)
}

/// The files and folders a command writes, with the argument that names
/// each: what the one output rule (`out_path`) checks before it runs.
pub fn written_paths(command: &ArtifactCommand) -> Vec<(&Path, &'static str)> {
    match command {
        ArtifactCommand::DeriveDecoder { out, .. }
        | ArtifactCommand::Derive { out, .. }
        | ArtifactCommand::Quantize { out, .. } => vec![(out.as_path(), "OUT")],
        ArtifactCommand::Corpus { dir, .. } => vec![(dir.as_path(), "DIR")],
        ArtifactCommand::Inspect { .. }
        | ArtifactCommand::Estimate { .. }
        | ArtifactCommand::VerifyDerivation { .. } => vec![],
    }
}

/// Run one artifact subcommand.
/// The model files a command reads: each must be a regular file, checked
/// without blocking (a FIFO would hang the parser's open forever).
fn inputs(command: &ArtifactCommand) -> Vec<&Path> {
    match command {
        // A Core ML model is a directory; its reader checks every entry.
        ArtifactCommand::Inspect { model, .. } if coreml::is_model_dir(model) => vec![],
        ArtifactCommand::Inspect { model, .. } | ArtifactCommand::Estimate { model, .. } => {
            vec![model]
        }
        ArtifactCommand::DeriveDecoder { src, .. }
        | ArtifactCommand::Derive { src, .. }
        | ArtifactCommand::Quantize { src, .. }
        | ArtifactCommand::Corpus { src, .. } => vec![src],
        ArtifactCommand::VerifyDerivation {
            src, out, receipt, ..
        } => [Some(src), Some(out), receipt.as_ref()]
            .into_iter()
            .flatten()
            .map(PathBuf::as_path)
            .collect(),
    }
}

/// Run one artifact subcommand, printing its result (JSON or human) to
/// stdout. Every input path is opened first, so a FIFO or missing file fails
/// at once. `Err` is memqual's own failure (I/O, exit 3).
pub fn main(command: ArtifactCommand) -> anyhow::Result<Outcome> {
    for path in inputs(&command) {
        run_dir::input::open(path)?;
    }
    match command {
        ArtifactCommand::Inspect {
            model,
            against,
            json,
            ..
        } if coreml::is_model_dir(&model) => coreml::main(&model, against.as_deref(), json),
        ArtifactCommand::Inspect {
            against: Some(_),
            model,
            ..
        } => anyhow::bail!(
            "--against checks a Core ML model (a .mlpackage or .mlmodelc directory); {} is not a directory",
            model.display()
        ),
        ArtifactCommand::Inspect {
            model,
            decoder_only,
            encoder_only,
            tensors,
            json,
            against: None,
        } => {
            let expect = match (decoder_only, encoder_only) {
                (true, _) => Expect::DecoderOnly,
                (_, true) => Expect::EncoderOnly,
                _ => Expect::Full,
            };
            match inspect(&model, expect) {
                Ok(inv) if json => print_json(&inv).map(|_| Outcome::Passed),
                Ok(inv) => {
                    out!("{}", human::inventory(&model, &inv, tensors));
                    Ok(Outcome::Passed)
                }
                Err(e) => rejected(&model, &e, json),
            }
        }
        ArtifactCommand::DeriveDecoder { src, out, json } => {
            match derive_decoder(&src, &out, &provenance::current()) {
                Ok(receipt) if json => print_json(&receipt).map(|_| Outcome::Passed),
                Ok(receipt) => {
                    out!("{}", human::derivation(&out, &receipt));
                    Ok(Outcome::Passed)
                }
                Err(e) => derive_failure(e, json),
            }
        }
        ArtifactCommand::Derive {
            src,
            out,
            encoder_only,
            decoder_only: _,
            json,
        } => {
            let kind = if encoder_only {
                Derivation::EncoderOnly
            } else {
                Derivation::DecoderOnly
            };
            match derive(&src, &out, kind, &provenance::current()) {
                Ok(receipt) if json => print_json(&receipt).map(|_| Outcome::Passed),
                Ok(receipt) => {
                    out!("{}", human::derivation(&out, &receipt));
                    Ok(Outcome::Passed)
                }
                Err(e) => derive_failure(e, json),
            }
        }
        ArtifactCommand::VerifyDerivation {
            src,
            out,
            receipt,
            json,
        } => {
            let receipt = receipt.unwrap_or_else(|| receipt_path(&out));
            match verify_derivation(&src, &out, &receipt) {
                Ok(r) if json => print_json(&r).map(|_| Outcome::Passed),
                Ok(r) => {
                    outln!(
                        "derivation verified: {} ({} bytes, SHA-256 {}) is {} minus {} {} records; receipt {} sealed {}",
                        out.display(),
                        r.output.bytes,
                        r.output.sha256,
                        src.display(),
                        r.totals.removed_records,
                        human::removed_class(&r),
                        receipt.display(),
                        r.receipt_sha256
                    );
                    Ok(Outcome::Passed)
                }
                Err(e) => derive_failure(e, json),
            }
        }
        ArtifactCommand::Quantize {
            src,
            out,
            target,
            decoder_only,
            json,
        } => match quantize_as(
            &src,
            &out,
            target.ggml(),
            if decoder_only {
                Expect::DecoderOnly
            } else {
                Expect::Full
            },
        ) {
            Ok(s) if json => print_json(&s).map(|_| Outcome::Passed),
            Ok(s) => {
                outln!(
                    "{}: {} ({} tensors quantized, ftype {}), {} bytes (from {}), SHA-256 {}",
                    out.display(),
                    s.target,
                    s.quantized_tensors,
                    s.ftype.raw,
                    s.output.file_len,
                    s.source_bytes,
                    s.output.file_sha256
                );
                Ok(Outcome::Passed)
            }
            Err(QuantizeError::Source { path, source }) => rejected(&path, &source, json),
            Err(e) => Err(e).with_context(|| format!("quantizing {}", src.display())),
        },
        ArtifactCommand::Corpus { src, dir, json } => match build_corpus(&src, &dir) {
            Ok(m) if json => print_json(&m).map(|_| Outcome::Passed),
            Ok(m) => {
                out!("{}", human::corpus(&dir, &m));
                Ok(Outcome::Passed)
            }
            Err(CorpusError::Source { path, source }) => rejected(&path, &source, json),
            Err(e) => Err(e).with_context(|| format!("building the corpus of {}", src.display())),
        },
        ArtifactCommand::Estimate {
            model,
            audio_ctx,
            text_ctx,
            beams,
            max_batch,
            json,
        } => {
            // A stripped artifact (either kind) is a valid subject too.
            let inv = match inspect(&model, Expect::Full) {
                Ok(inv) => inv,
                Err(full) => match inspect(&model, Expect::DecoderOnly)
                    .or_else(|_| inspect(&model, Expect::EncoderOnly))
                {
                    Ok(inv) => inv,
                    Err(_) => return rejected(&model, &full, json),
                },
            };
            let opts = EstimateOptions {
                audio_ctx,
                text_ctx,
                decoders: beams,
                max_batch,
            };
            let e = estimate(&inv.hparams, Some(&inv.totals), opts);
            if json {
                print_json(&e)?;
            } else {
                out!("{}", human::estimate(&model, &e));
            }
            Ok(Outcome::Passed)
        }
    }
}

/// A derivation or verification that failed: a check (exit 1) unless the
/// failure is memqual's own I/O.
fn derive_failure(e: DeriveError, json: bool) -> anyhow::Result<Outcome> {
    match e {
        DeriveError::Source { path, source } | DeriveError::Output { path, source, .. } => {
            rejected(&path, &source, json)
        }
        DeriveError::Io { .. } => Err(e.into()),
        other => {
            if json {
                print_json(&serde_json::json!({ "accepted": false, "reason": other.to_string() }))?;
            }
            note!("memqual: {other}");
            Ok(Outcome::Rejected)
        }
    }
}
