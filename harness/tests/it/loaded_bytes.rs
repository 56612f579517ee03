//! Verified bytes are loaded bytes: the real `memqual run` on a copy of the
//! real tiny.en model, with the worker held after its input checks (the
//! `MEMQUAL_TEST_PAUSE_AFTER_CHECKS` hook) while the test changes the files on
//! disk. Renaming other valid files over the model and the fixture changes
//! nothing the worker loads; changing the model in place makes the arm fail
//! closed. Never does whisper.cpp run new bytes under the checked digest.

use crate::common::*;
use reports::receipt::ArmReceipt;
use reports::record::ArmStatus;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const TINY_EN_SHA256: &str = "28d66f40682b78e7eb7114e4688b3cf4e9f8a50a474e9cf5cb03992d12e07ca3";
const PAUSE_HOOK_ENV: &str = "MEMQUAL_TEST_PAUSE_AFTER_CHECKS";

/// A copy of tiny.en and of the speech fixtures that the test may change,
/// and a protocol running tiny.en once on `s1`.
struct Setup {
    tmp: tempfile::TempDir,
    model: PathBuf,
    fixtures: PathBuf,
    protocol: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model.bin");
        std::fs::copy(tiny_en(), &model).unwrap();
        let fixtures = tmp.path().join("fixtures");
        let audio = fixtures.join("audio");
        std::fs::create_dir_all(&audio).unwrap();
        let committed = speech_fixtures::audio_dir();
        for entry in std::fs::read_dir(&committed).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                std::fs::copy(&path, audio.join(path.file_name().unwrap())).unwrap();
            }
        }
        // `max_tokens` bounds the decode should the random-weight model ever
        // load (it never says end-of-text); tiny.en says `s1` in far fewer.
        let protocol = write_protocol(
            tmp.path(),
            &format!(
                "[[arm]]\nid = \"a\"\n[arm.whisper]\nmodel = \"{}\"\nfixtures = [\"s1\"]\nmax_tokens = 64\n\
                 warmup = 0\nidle_s = 0\n",
                model.display()
            ),
        );
        Setup {
            tmp,
            model,
            fixtures,
            protocol,
        }
    }

    fn command(&self, out: &Path) -> Command {
        let mut cmd = Command::new(MEMQUAL);
        cmd.args(["run", self.protocol.to_str().unwrap(), "--force", "--out"])
            .arg(out)
            .env("MEMQUAL_WORKER_DIR", worker_dir())
            .env("MEMQUAL_ADMISSION_WINDOW_MS", "50")
            .env("MEMQUAL_FIXTURES", &self.fixtures)
            .env_remove(PAUSE_HOOK_ENV)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    /// Run the protocol; with `during_pause`, the worker waits after its
    /// checks until `during_pause` has run.
    fn run(&self, name: &str, during_pause: Option<&dyn Fn(&Setup)>) -> (Output, PathBuf) {
        let out = self.tmp.path().join(name);
        let mut cmd = self.command(&out);
        let Some(during_pause) = during_pause else {
            return (cmd.output().unwrap(), out);
        };
        let fifo = self.tmp.path().join(format!("{name}.pause"));
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let mut child = cmd.env(PAUSE_HOOK_ENV, &fifo).spawn().unwrap();
        // The worker opens the FIFO to read once its checks are done; until
        // then a non-blocking open for writing fails with ENXIO.
        let writer = loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .open(&fifo)
            {
                Ok(w) => break w,
                Err(e) if e.raw_os_error() == Some(nix::libc::ENXIO) => {
                    if let Some(status) = child.try_wait().unwrap() {
                        let output = child.wait_with_output().unwrap();
                        panic!(
                            "memqual ended ({status}) before the worker paused: {}",
                            stderr(&output)
                        );
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(e) => panic!("opening {}: {e}", fifo.display()),
            }
        };
        during_pause(self);
        // End of file: the worker goes on.
        drop(writer);
        (child.wait_with_output().unwrap(), out)
    }
}

fn the_arm(run_dir: &Path) -> ArmReceipt {
    let mut receipt = receipt(run_dir);
    assert_eq!(receipt.arms.len(), 1);
    receipt.arms.remove(0)
}

fn model_sha256(arm: &ArmReceipt) -> &str {
    let speech = arm.speech.as_ref().unwrap();
    &speech.runtime.as_ref().unwrap().model.sha256
}

fn transcript(arm: &ArmReceipt) -> Vec<u8> {
    let speech = arm.speech.as_ref().unwrap();
    assert_eq!(speech.transcripts.len(), 1);
    speech.transcripts[0].result.text_bytes()
}

#[test]
fn files_renamed_over_the_checked_inputs_are_not_what_the_worker_loads() {
    let setup = Setup::new();
    let (out, dir) = setup.run("baseline", None);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let baseline = the_arm(&dir);
    assert_eq!(model_sha256(&baseline), TINY_EN_SHA256);
    let original_text = transcript(&baseline);
    assert!(!original_text.is_empty());

    let swap = |s: &Setup| {
        // Another valid model, and another valid slice, renamed over the
        // checked ones while the worker waits.
        let other = s.tmp.path().join("synthetic.bin");
        let made = memqual(&["fixtures", "synthetic", other.to_str().unwrap()]);
        assert!(made.status.success(), "{}", stderr(&made));
        std::fs::rename(&other, &s.model).unwrap();
        let audio = s.fixtures.join("audio");
        std::fs::rename(audio.join("s2.wav"), audio.join("s1.wav")).unwrap();
    };
    let (out, dir) = setup.run("swapped", Some(&swap));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let swapped = the_arm(&dir);
    assert_eq!(
        swapped.status,
        ArmStatus::Completed,
        "{:?}",
        swapped.failure
    );
    // The checked model and slice were loaded: same digest, same words.
    assert_eq!(model_sha256(&swapped), TINY_EN_SHA256);
    assert_eq!(
        String::from_utf8_lossy(&transcript(&swapped)),
        String::from_utf8_lossy(&original_text)
    );
    // The files on disk really did change.
    assert_ne!(
        ggml_container::digest::sha256_file(&setup.model).unwrap(),
        TINY_EN_SHA256
    );
}

#[test]
fn a_model_changed_in_place_after_the_check_fails_the_arm_closed() {
    let setup = Setup::new();
    let change = |s: &Setup| {
        // One byte of the last tensor's payload: the file stays a valid
        // model, so only the digest of the loaded bytes can tell.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&s.model)
            .unwrap();
        let last = file.metadata().unwrap().len() - 1;
        let mut byte = [0u8];
        std::fs::File::open(&s.model)
            .unwrap()
            .read_exact_at(&mut byte, last)
            .unwrap();
        file.write_all_at(&[byte[0] ^ 0x01], last).unwrap();
    };
    let (out, dir) = setup.run("changed", Some(&change));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let arm = the_arm(&dir);
    assert_eq!(arm.status, ArmStatus::Failed);
    let exit = arm.exit.as_ref().unwrap();
    assert_eq!((exit.code, exit.signal), (Some(1), None));
    let changed_sha = ggml_container::digest::sha256_file(&setup.model).unwrap();
    assert!(
        arm.failure
            .iter()
            .any(|f| f.contains(&format!(
                "with SHA-256 {changed_sha}, but the checked file had"
            )) && f.contains(&format!("SHA-256 {TINY_EN_SHA256}: the file changed"))),
        "{:?}",
        arm.failure
    );
    // No request ran on the changed bytes.
    assert_eq!(arm.requests, 0);
}
