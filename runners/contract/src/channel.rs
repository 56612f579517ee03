//! The worker's side of the contract: read the spec, open the inherited
//! descriptors, write messages to fd 3.

use crate::{ArmSpec, CONTRACT_VERSION, LIFELINE_FD, Lifeline, MESSAGE_FD, WorkerMessage};
use std::fs::File;
use std::io::{BufWriter, Read, Write};

/// Open what the harness passed: the message [`Channel`] (fd 3) and the
/// [`Lifeline`] (fd 4). Both are checked before either is opened: opening
/// one takes the lowest free descriptor, which is the other's number when
/// the harness did not pass it, and the worker would then take its own
/// channel for its lifeline (or the reverse).
pub fn open_descriptors() -> std::io::Result<(Channel, Lifeline)> {
    for (fd, what) in [(MESSAGE_FD, "message channel"), (LIFELINE_FD, "lifeline")] {
        let path = format!("/dev/fd/{fd}");
        std::fs::metadata(&path).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "cannot open the {what} {path} ({e}): workers are started by `memqual run`, \
                     which passes a pipe on fd {MESSAGE_FD} for messages and the read end of a \
                     pipe on fd {LIFELINE_FD} as the lifeline"
                ),
            )
        })?;
    }
    Ok((Channel::open()?, Lifeline::open()?))
}

/// Writes [`WorkerMessage`]s as JSON lines to fd 3, flushing each line so the
/// harness has every message even if the worker dies right after.
pub struct Channel {
    out: BufWriter<File>,
}

impl Channel {
    /// Open fd 3 as the harness set it up (through [`open_descriptors`]).
    fn open() -> std::io::Result<Self> {
        // Opening /dev/fd/N duplicates the inherited descriptor without unsafe code.
        let path = format!("/dev/fd/{MESSAGE_FD}");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot open the message channel {path} ({e}): workers are started by \
                         `memqual run`, which passes a pipe on fd {MESSAGE_FD}"
                    ),
                )
            })?;
        Ok(Channel {
            out: BufWriter::new(file),
        })
    }

    /// Write `msg` as one JSON line and flush it; fails when the harness
    /// closed its end of the pipe (`BrokenPipe`) or the write fails.
    pub fn send(&mut self, msg: &WorkerMessage) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, msg)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Write a raw line, bypassing the types (fault injection only).
    pub fn send_raw(&mut self, line: &str) -> std::io::Result<()> {
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

/// Read the arm spec from `input` (the worker's stdin) and check its version.
pub fn read_spec(mut input: impl Read) -> Result<ArmSpec, String> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read the arm spec from stdin: {e}"))?;
    let spec: ArmSpec = serde_json::from_str(&text)
        .map_err(|e| format!("the arm spec on stdin is invalid: {e}"))?;
    if spec.contract_version != CONTRACT_VERSION {
        return Err(format!(
            "arm spec has contract version {}, this worker speaks {CONTRACT_VERSION}",
            spec.contract_version
        ));
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CalibrationSpec, WorkerSpec};

    fn spec(version: u32) -> ArmSpec {
        ArmSpec {
            contract_version: version,
            arm_id: "a".into(),
            scratch_dir: "/tmp".into(),
            sampler: None,
            settle_ms: 0,
            lifecycle: None,
            attribution: None,
            worker: WorkerSpec::Calibrate(CalibrationSpec::default()),
        }
    }

    #[test]
    fn spec_round_trips_and_version_is_checked() {
        let json = serde_json::to_string(&spec(CONTRACT_VERSION)).unwrap();
        assert_eq!(read_spec(json.as_bytes()).unwrap(), spec(CONTRACT_VERSION));
        let json = serde_json::to_string(&spec(99)).unwrap();
        let err = read_spec(json.as_bytes()).unwrap_err();
        assert!(err.contains("contract version 99"), "{err}");
        let err = read_spec(&b"{\"contract_version\":1}"[..]).unwrap_err();
        assert!(err.contains("missing field"), "{err}");
    }
}
