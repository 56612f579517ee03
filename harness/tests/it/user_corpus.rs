//! A user's own corpus: `memqual fixtures manifest DIR` over WAV + TXT pairs
//! made from the committed slices (some resampled here to 44.1 kHz stereo),
//! run through `memqual run` on the real tiny.en with `fixture_set`, and the
//! refusals (a changed file, a missing reference, strict input, links,
//! FIFOs, huge files).

use crate::common::*;
use reports::record::ArmStatus;
use rubato::audioadapter_buffers::direct::InterleavedSlice;
use rubato::audioadapter_buffers::owned::InterleavedOwned;
use rubato::{Fft, FixedSync, Resampler};
use std::path::{Path, PathBuf};

/// A committed slice's samples and reference.
fn slice(id: &str) -> (Vec<i16>, String) {
    let fixtures = speech_fixtures::Fixtures::open_default().unwrap();
    let s = fixtures.slice(id).unwrap().clone();
    (fixtures.read_verified_i16(&s).unwrap(), s.reference)
}

/// `samples` (16 kHz mono) as a 44.1 kHz stereo 16-bit WAV; the right
/// channel is the left at 3/4 level, so the downmix is not a plain copy.
fn write_44k_stereo(path: &Path, samples: &[i16]) {
    let mono: Vec<f32> = samples.iter().map(|&s| f32::from(s) / 32768.0).collect();
    let mut up = Fft::<f32>::new(16_000, 44_100, 1024, 1, FixedSync::Input).unwrap();
    let input = InterleavedSlice::new(&mono, 1, mono.len()).unwrap();
    let mut out =
        InterleavedOwned::<f32>::new(0.0, 1, up.process_all_needed_output_len(mono.len()));
    let (_, produced) = up
        .process_all_into_buffer(&input, &mut out, mono.len(), None)
        .unwrap();
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 44_100,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    for &s in &out.take_data()[..produced] {
        let v = (s * 32767.0).clamp(-32768.0, 32767.0);
        w.write_sample(v as i16).unwrap();
        w.write_sample((v * 0.75) as i16).unwrap();
    }
    w.finalize().unwrap();
}

/// The corpus: category folders with WAV + TXT pairs, `hifi` files at 44.1 kHz stereo.
fn corpus(root: &Path) -> PathBuf {
    let dir = root.join("corpus");
    for (category, id, hifi) in [
        ("people", "s1", false),
        ("people", "s4", true),
        ("figures", "s2", true),
        ("meetings", "clean-01", false),
        ("meetings", "s3", true),
        // The same slice again at 44.1 kHz stereo, to compare with its original.
        ("people", "s1", true),
    ] {
        let folder = dir.join(category);
        std::fs::create_dir_all(&folder).unwrap();
        let (samples, reference) = slice(id);
        let stem = if hifi {
            format!("{id}-44k")
        } else {
            id.to_string()
        };
        let wav = folder.join(format!("{stem}.wav"));
        if hifi {
            write_44k_stereo(&wav, &samples);
        } else {
            speech_fixtures::wav::write_i16(&wav, &samples).unwrap();
        }
        std::fs::write(folder.join(format!("{stem}.txt")), format!("{reference}\n")).unwrap();
    }
    dir
}

fn write_manifest(dir: &Path) -> String {
    let out = memqual(&["fixtures", "manifest", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

fn protocol(manifest: &Path, extra: &str) -> String {
    format!(
        "[[arm]]\nid = \"mine\"\n[arm.whisper]\nmodel = \"tiny.en\"\nthreads = 2\nidle_s = 0.1\n\
         fixture_set = {:?}\n{extra}\n",
        manifest.to_str().unwrap()
    )
}

#[test]
fn a_user_corpus_runs_with_wer_by_its_own_categories() {
    tiny_en();
    let tmp = tempfile::tempdir().unwrap();
    let dir = corpus(tmp.path());
    let said = write_manifest(&dir);
    assert!(
        said.contains(
            "6 files in 3 categories (figures, meetings, people; categories from subfolder names), \
             4 to be resampled to 16 kHz mono"
        ),
        "{said}"
    );
    let manifest = dir.join("manifest.toml");
    let r = run_protocol_body("run", &protocol(&manifest, ""), &["--json"]);
    assert!(r.out.status.success(), "{}", stderr(&r.out));
    validate_receipt(&r.dir);
    let receipt = receipt(&r.dir);
    let a = &receipt.arms[0];
    assert_eq!(a.status, ArmStatus::Completed, "{:?}", a.failure);
    let speech = a.speech.as_ref().unwrap();
    let ids: Vec<&str> = speech
        .transcripts
        .iter()
        .map(|t| t.result.fixture_id.as_str())
        .collect();
    // Manifest order: folders, then file names, byte by byte (`-` before `.`).
    assert_eq!(
        ids,
        [
            "figures/s2-44k",
            "meetings/clean-01",
            "meetings/s3-44k",
            "people/s1-44k",
            "people/s1",
            "people/s4-44k"
        ]
    );
    // Recorded as converted: the four 44.1 kHz stereo files, with their layout.
    let converted: Vec<(&str, u32, u16)> = speech
        .converted_inputs
        .iter()
        .map(|c| {
            (
                c.fixture_id.as_str(),
                c.from.sample_rate_hz,
                c.from.channels,
            )
        })
        .collect();
    assert_eq!(
        converted,
        [
            ("figures/s2-44k", 44_100, 2),
            ("meetings/s3-44k", 44_100, 2),
            ("people/s1-44k", 44_100, 2),
            ("people/s4-44k", 44_100, 2)
        ]
    );
    // WER by the user's categories, each over its own files.
    let wer = speech.quality.wer.as_ref().expect("WER computed");
    let categories: Vec<(&str, u32)> = wer
        .categories
        .iter()
        .map(|c| (c.category.as_str(), c.slices))
        .collect();
    assert_eq!(categories, [("figures", 1), ("meetings", 2), ("people", 3)]);
    assert!(
        speech.quality.errors.is_empty(),
        "{:?}",
        speech.quality.errors
    );
    // Resampled to 44.1 kHz stereo and back, s1 still says what it said.
    let text = |id: &str| {
        speech
            .transcripts
            .iter()
            .find(|t| t.result.fixture_id == id)
            .unwrap()
            .result
            .text
            .clone()
    };
    assert_eq!(text("people/s1-44k"), text("people/s1"));
    for c in &wer.categories {
        eprintln!(
            "category {}: {} files, WER {:?}",
            c.category, c.slices, c.wer
        );
    }
}

#[test]
fn a_changed_file_and_strict_input_are_refused_before_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corpus(tmp.path());
    write_manifest(&dir);
    let manifest = dir.join("manifest.toml");

    let r = run_protocol_body("run", &protocol(&manifest, "strict_input = true"), &[]);
    assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r.out));
    let err = stderr(&r.out);
    assert!(
        err.contains("fixture_set `figures/s2-44k`")
            && err.contains(
                "is 44100 Hz, 2 channels, 16-bit PCM, and strict_input = true accepts only"
            ),
        "{err}"
    );
    assert!(!r.dir.exists());

    // One byte of the audio changes after the manifest was written.
    let wav = dir.join("people/s1.wav");
    let mut bytes = std::fs::read(&wav).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&wav, &bytes).unwrap();
    let r = run_protocol_body("run", &protocol(&manifest, ""), &[]);
    assert_eq!(r.out.status.code(), Some(2), "{}", stderr(&r.out));
    let err = stderr(&r.out);
    assert!(
        err.contains("people/s1.wav: SHA-256 ") && err.contains("the file changed since"),
        "{err}"
    );
    assert!(!r.dir.exists());
}

#[test]
fn fixtures_manifest_refuses_what_is_not_a_wav_and_txt_pair() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = corpus(tmp.path());
    let refused = |what: &str| {
        let out = memqual(&["fixtures", "manifest", dir.to_str().unwrap(), "--force"]);
        // A refused folder is the user's input, not memqual failing: exit 2.
        assert_eq!(out.status.code(), Some(2), "{what}: {}", stderr(&out));
        stderr(&out)
    };
    std::fs::remove_file(dir.join("people/s4-44k.txt")).unwrap();
    let err = refused("missing TXT");
    assert!(
        err.contains("s4-44k.wav: no reference: write what is spoken into s4-44k.txt"),
        "{err}"
    );
    std::fs::write(dir.join("people/s4-44k.txt"), "Please send the report.").unwrap();

    std::os::unix::fs::symlink(dir.join("people/s1.wav"), dir.join("people/x.wav")).unwrap();
    let err = refused("symlink");
    assert!(err.contains("people/x.wav: a symbolic link"), "{err}");
    std::fs::remove_file(dir.join("people/x.wav")).unwrap();

    let fifo = dir.join("people/y.wav");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = refused("FIFO");
    assert!(
        err.contains("people/y.wav: not a regular file (a FIFO"),
        "{err}"
    );
    std::fs::remove_file(&fifo).unwrap();

    let huge = dir.join("people/z.wav");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(speech_fixtures::MAX_WAV_BYTES + 1)
        .unwrap();
    std::fs::write(dir.join("people/z.txt"), "z").unwrap();
    let err = refused("huge");
    assert!(
        err.contains("people/z.wav is 67108865 bytes, more than the 67108864 bytes"),
        "{err}"
    );
    std::fs::remove_file(&huge).unwrap();
    std::fs::remove_file(dir.join("people/z.txt")).unwrap();

    // Clean again: written, and not overwritten without --force.
    write_manifest(&dir);
    let out = memqual(&["fixtures", "manifest", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already exists; pass --force"),
        "{}",
        stderr(&out)
    );

    // A link planted beside `--out`, where a fixed temporary name would go,
    // is never written through.
    let victim = tmp.path().join("victim.txt");
    std::fs::write(&victim, "keep").unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&victim, elsewhere.join("set.toml.tmp")).unwrap();
    let target = elsewhere.join("set.toml");
    let out = memqual(&[
        "fixtures",
        "manifest",
        dir.to_str().unwrap(),
        "--out",
        target.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(
        std::fs::read_to_string(&target)
            .unwrap()
            .contains("memqual-fixture-set")
    );
}

/// A 64-byte WAV whose `data` chunk claims 0xFFFFFFF0 bytes: ten samples
/// that would pass for 2,147,483,640 frames.
fn forged_wav() -> Vec<u8> {
    let mut bytes = Vec::new();
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: 16_000,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::new(std::io::Cursor::new(&mut bytes), spec).unwrap();
    for s in 0..10i16 {
        w.write_sample(s * 100).unwrap();
    }
    w.finalize().unwrap();
    assert_eq!(bytes.len(), 64);
    assert_eq!(&bytes[36..40], b"data");
    bytes[40..44].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
    bytes
}

/// A one-file corpus `<root>/set/talk/a.wav` (slice s1) with its manifest.
fn one_file_set(root: &Path) -> (PathBuf, PathBuf) {
    let dir = root.join("set");
    std::fs::create_dir_all(dir.join("talk")).unwrap();
    let (samples, reference) = slice("s1");
    speech_fixtures::wav::write_i16(&dir.join("talk/a.wav"), &samples).unwrap();
    std::fs::write(dir.join("talk/a.txt"), reference).unwrap();
    write_manifest(&dir);
    let manifest = dir.join("manifest.toml");
    (dir, manifest)
}

#[test]
fn a_wav_whose_data_chunk_claims_more_than_the_file_holds_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    // `fixtures manifest`: refused by name with both sizes, nothing written.
    let dir = tmp.path().join("corpus");
    std::fs::create_dir_all(dir.join("talk")).unwrap();
    std::fs::write(dir.join("talk/forged.wav"), forged_wav()).unwrap();
    std::fs::write(dir.join("talk/forged.txt"), "ten samples").unwrap();
    let out = memqual(&["fixtures", "manifest", dir.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: the `data` chunk claims 4294967280 bytes but the file holds only 20 after the \
             chunk header (at byte 44)",
            dir.join("talk/forged.wav").display()
        )),
        "{err}"
    );
    assert!(!dir.join("manifest.toml").exists());
    assert!(out.stdout.is_empty());

    // A run reading a manifest that pins the forged file (as a forger would
    // write it: its digest and the frame count hound believes) is refused
    // before a run directory exists.
    let (set, manifest) = one_file_set(tmp.path());
    let forged = forged_wav();
    std::fs::write(set.join("talk/a.wav"), &forged).unwrap();
    let text = std::fs::read_to_string(&manifest).unwrap();
    let mut m: speech_fixtures::fixture_set::SetManifest = toml::from_str(&text).unwrap();
    m.fixtures[0].sha256 = speech_fixtures::sha256_hex(&forged);
    m.fixtures[0].frames = 2_147_483_640;
    std::fs::write(&manifest, m.to_toml()).unwrap();
    let r = run_protocol_body("run", &protocol(&manifest, ""), &[]);
    let err = stderr(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "talk/a.wav: the `data` chunk claims 4294967280 bytes but the file holds only 20"
        ),
        "{err}"
    );
    assert!(!r.dir.exists());
}

#[test]
fn a_run_refuses_a_fixture_file_replaced_by_a_link() {
    let tmp = tempfile::tempdir().unwrap();
    let (set, manifest) = one_file_set(tmp.path());
    // The same bytes elsewhere, linked in: the digest would still match.
    let wav = set.join("talk/a.wav");
    let moved = tmp.path().join("outside.wav");
    std::fs::rename(&wav, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &wav).unwrap();
    let r = run_protocol_body("run", &protocol(&manifest, ""), &[]);
    let err = stderr(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}: a symbolic link", wav.display())),
        "{err}"
    );
    assert!(!r.dir.exists());
    // The category folder as a link to a copy: refused too.
    std::fs::remove_file(&wav).unwrap();
    let copy = tmp.path().join("talk-copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::rename(&moved, copy.join("a.wav")).unwrap();
    std::fs::rename(set.join("talk/a.txt"), copy.join("a.txt")).unwrap();
    std::fs::remove_dir(set.join("talk")).unwrap();
    std::os::unix::fs::symlink(&copy, set.join("talk")).unwrap();
    let r = run_protocol_body("run", &protocol(&manifest, ""), &[]);
    let err = stderr(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("{}: a symbolic link", set.join("talk").display())),
        "{err}"
    );
    assert!(!r.dir.exists());
}
