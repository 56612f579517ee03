//! A long soak's phase rows, kept out of `receipt.json` so the receipt does
//! not grow with the night.
//!
//! An arm with more than [`RECEIPT_ROWS`] rows of repeating phases (request
//! begin and end, lifecycle release and reload) keeps in the receipt every
//! row of a phase that happens once, and of the repeating ones only the
//! requests a reviewer needs: the first and last [`EDGE_REQUESTS`], every
//! request that holds a phase's largest value of any memory figure (so a
//! memory gate judges the same maximum), and the first [`EDGE_REQUESTS`]
//! whose kernel peak was missed between samples. Every row goes to
//! `arms/<id>/phase-rows.jsonl` (derived, sealed by the manifest; written
//! as the receipt is assembled, so no second copy is held), whose
//! digest and counts the receipt keeps in [`PhaseRowsFile`] (a receipt
//! type: the receipt does not depend on how the rows are chosen).

use crate::receipt::{PhaseRow, PhaseRowsFile};
use run_dir::digest::hex;
use run_dir::{RunDir, RunDirError};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::Write;

pub use run_dir::names::PHASE_ROWS as FILE;

/// Rows of repeating phases an arm keeps whole in the receipt.
pub const RECEIPT_ROWS: usize = 256;
/// Requests kept at each end of a long arm.
pub const EDGE_REQUESTS: usize = 32;

/// Whether the row's phase repeats over an arm's life.
fn repeats(row: &PhaseRow) -> bool {
    row.phase.is_request() || sampler::Phase::POLICY.contains(&row.phase)
}

/// Write every row as one JSON line.
pub fn write_lines(rows: &[PhaseRow], out: &mut dyn Write) -> std::io::Result<()> {
    for row in rows {
        serde_json::to_writer(&mut *out, row)?;
        out.write_all(b"\n")?;
    }
    Ok(())
}

/// A writer that hashes what it passes on.
struct Hashing<'a> {
    out: &'a mut dyn Write,
    sha: Sha256,
}

impl Write for Hashing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// The rows the receipt keeps, taken from `rows` in one pass. A long
/// arm's every row is written to `arms/<id>/phase-rows.jsonl` in `run` as
/// it comes, and only the rows the receipt keeps are held (so memory does
/// not grow with the night); its record is returned (`None`: a short arm,
/// whose rows all stay). A run opened read-only is not written: the record
/// gives the digest the file would have, as a later `memqual report`
/// writes it.
pub fn split(
    run: &RunDir,
    arm: &str,
    rows: impl IntoIterator<Item = PhaseRow>,
) -> Result<(Vec<PhaseRow>, Option<PhaseRowsFile>), RunDirError> {
    let mut rows = rows.into_iter();
    // Rows are held only until the arm proves long.
    let mut head = Vec::new();
    let mut repeating = 0;
    for row in rows.by_ref() {
        repeating += usize::from(repeats(&row));
        head.push(row);
        if repeating > RECEIPT_ROWS {
            break;
        }
    }
    if repeating <= RECEIPT_ROWS {
        return Ok((head, None));
    }
    let mut selector = Selector::default();
    let mut count = 0u64;
    let mut sha = None;
    let mut fill = |out: &mut dyn Write| {
        let mut hashing = Hashing {
            out,
            sha: Sha256::new(),
        };
        for row in head.drain(..).chain(rows.by_ref()) {
            write_lines(std::slice::from_ref(&row), &mut hashing)?;
            count += 1;
            selector.push(row);
        }
        sha = Some(hashing.sha.finalize());
        Ok(())
    };
    if run.is_writable() {
        run.write_with(&run.arm(arm)?.join(FILE), fill)?;
    } else {
        // Hashing into a sink cannot fail.
        let _ = fill(&mut std::io::sink());
    }
    let kept = selector.finish();
    let file = PhaseRowsFile {
        path: format!("{}/{arm}/{FILE}", run_dir::names::ARMS),
        rows: count,
        kept: kept.len() as u64,
        sha256: sha.map(|d| hex(&d)).unwrap_or_default(),
    };
    Ok((kept, Some(file)))
}

/// What keeps a repeating row: its request (both its begin and end stay
/// together), or, for a lifecycle release or reload, which has none, the
/// row itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Request(u64),
    Row(u64),
}

fn key(row: &PhaseRow) -> Key {
    row.request_id.map_or(Key::Row(row.seq), Key::Request)
}

/// One repeating phase's reasons to keep a row, as the rows go by.
#[derive(Debug, Default)]
struct PhaseReasons {
    seen: usize,
    /// The keys of its last [`EDGE_REQUESTS`] rows, oldest first.
    last: VecDeque<Key>,
    /// For every figure: its largest value so far, with the earliest row's
    /// key (as a gate picks it).
    best: [Option<(u64, Key)>; FIGURES.len()],
}

/// Chooses the rows the receipt keeps in one pass, holding only the rows
/// some reason still points at: the first and last [`EDGE_REQUESTS`] of
/// every repeating phase, its maximum of every figure, and the first
/// [`EDGE_REQUESTS`] rows whose kernel peak fell between samples.
#[derive(Debug, Default)]
struct Selector {
    /// Every row of a once-only phase.
    once: Vec<PhaseRow>,
    /// The held rows of repeating phases, by key.
    held: BTreeMap<Key, Vec<PhaseRow>>,
    phases: BTreeMap<sampler::Phase, PhaseReasons>,
    first: BTreeSet<Key>,
    missed: Vec<Key>,
}

impl Selector {
    fn push(&mut self, row: PhaseRow) {
        if !repeats(&row) {
            self.once.push(row);
            return;
        }
        let k = key(&row);
        let mut dropped = Vec::new();
        let reasons = self.phases.entry(row.phase).or_default();
        if reasons.seen < EDGE_REQUESTS {
            self.first.insert(k);
        }
        reasons.seen += 1;
        reasons.last.push_back(k);
        if reasons.last.len() > EDGE_REQUESTS {
            dropped.extend(reasons.last.pop_front());
        }
        for (figure, best) in FIGURES.iter().zip(reasons.best.iter_mut()) {
            let Some(v) = figure(&row) else { continue };
            match best {
                Some((top, _)) if v <= *top => {}
                _ => {
                    dropped.extend(best.map(|(_, old)| old));
                    *best = Some((v, k));
                }
            }
        }
        if row.peak_between_samples == Some(true) && self.missed.len() < EDGE_REQUESTS {
            self.missed.push(k);
        }
        self.held.entry(k).or_default().push(row);
        for old in dropped {
            if !self.wanted(old) {
                self.held.remove(&old);
            }
        }
    }

    /// Whether any reason still points at `k`.
    fn wanted(&self, k: Key) -> bool {
        self.first.contains(&k)
            || self.missed.contains(&k)
            || self
                .phases
                .values()
                .any(|p| p.last.contains(&k) || p.best.iter().flatten().any(|(_, b)| *b == k))
    }

    /// The kept rows, in the order they came (by sequence number).
    fn finish(self) -> Vec<PhaseRow> {
        let mut kept: Vec<PhaseRow> = self.held.into_values().flatten().chain(self.once).collect();
        kept.sort_by_key(|r| r.seq);
        kept
    }
}

/// Every figure of a row a gate or a chart reads.
const FIGURES: [fn(&PhaseRow) -> Option<u64>; 16] = [
    |r| Some(r.memory.resident_bytes),
    |r| r.memory.resident_peak_bytes,
    |r| r.memory.footprint_bytes,
    |r| r.memory.footprint_peak_bytes,
    |r| r.memory.compressed_bytes,
    |r| r.memory.swap_bytes,
    |r| Some(r.memory.virtual_bytes),
    |r| r.memory.rss_anon_bytes,
    |r| r.memory.rss_file_bytes,
    |r| r.memory.rss_shmem_bytes,
    |r| r.memory.device_bytes,
    |r| r.series_max_resident_bytes,
    |r| r.series_max_footprint_bytes,
    |r| Some(r.observed_max_resident_bytes),
    |r| r.observed_max_footprint_bytes,
    |r| r.series_max_gpu_worker_bytes,
];

#[cfg(test)]
mod tests {
    use super::*;
    use sampler::{Phase, TaskMemory};

    fn row(phase: Phase, seq: u64, request_id: Option<u64>, resident: u64) -> PhaseRow {
        let memory = TaskMemory {
            resident_bytes: resident,
            ..TaskMemory::default()
        };
        PhaseRow {
            request_id,
            ..PhaseRow::of(phase, seq, memory)
        }
    }

    fn soak(requests: u64, spike_request: u64) -> Vec<PhaseRow> {
        let mut rows = vec![row(Phase::ProcessStart, 0, None, 1 << 20)];
        for id in 0..requests {
            let resident = if id == spike_request {
                900 << 20
            } else {
                100 << 20
            };
            rows.push(row(Phase::RequestBegin, 1 + 2 * id, Some(id), 100 << 20));
            rows.push(row(Phase::RequestEnd, 2 + 2 * id, Some(id), resident));
        }
        rows.push(row(Phase::TeardownDone, 1 + 2 * requests, None, 1 << 20));
        rows
    }

    /// The rows to keep, chosen with every row in hand: the rule stated
    /// once more, plainly, to hold the one-pass [`Selector`] to.
    fn chosen_whole(rows: &[PhaseRow]) -> Vec<PhaseRow> {
        let repeating: Vec<&PhaseRow> = rows.iter().filter(|r| repeats(r)).collect();
        let mut keep = BTreeSet::new();
        let phases: BTreeSet<sampler::Phase> = repeating.iter().map(|r| r.phase).collect();
        for phase in phases {
            let of_phase: Vec<&&PhaseRow> = repeating.iter().filter(|r| r.phase == phase).collect();
            keep.extend(of_phase.iter().take(EDGE_REQUESTS).map(|r| key(r)));
            keep.extend(of_phase.iter().rev().take(EDGE_REQUESTS).map(|r| key(r)));
            for figure in FIGURES {
                let best = of_phase
                    .iter()
                    .filter_map(|r| Some((figure(r)?, r.seq, key(r))))
                    .max_by_key(|(v, seq, _)| (*v, std::cmp::Reverse(*seq)));
                keep.extend(best.map(|(_, _, k)| k));
            }
        }
        keep.extend(
            repeating
                .iter()
                .filter(|r| r.peak_between_samples == Some(true))
                .map(|r| key(r))
                .take(EDGE_REQUESTS),
        );
        rows.iter()
            .filter(|r| !repeats(r) || keep.contains(&key(r)))
            .cloned()
            .collect()
    }

    #[test]
    fn one_pass_keeps_what_the_whole_arm_would() {
        // A night of requests whose figures wander (xorshift), with ties,
        // missed peaks, device readings and lifecycle rows between them.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut rows = vec![row(Phase::ProcessStart, 0, None, 1 << 20)];
        let mut seq = 1;
        for id in 0..5000u64 {
            for phase in [Phase::RequestBegin, Phase::RequestEnd] {
                let mut r = row(phase, seq, Some(id), (90 + next(20)) << 20);
                r.memory.rss_anon_bytes = Some(next(1000));
                r.memory.device_bytes = (next(3) > 0).then(|| next(50) << 20);
                r.series_max_resident_bytes = Some((95 + next(10)) << 20);
                r.peak_between_samples = (next(50) == 0).then_some(true);
                rows.push(r);
                seq += 1;
            }
            if next(40) == 0 {
                rows.push(row(Phase::Release, seq, None, next(100) << 20));
                seq += 1;
            }
        }
        rows.push(row(Phase::TeardownDone, seq, None, 1 << 20));
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(&dir.path().join("run")).unwrap();
        run.create_dir(&run.arm("a").unwrap()).unwrap();
        let (kept, file) = split(&run, "a", rows.clone()).unwrap();
        assert_eq!(file.map(|f| f.rows), Some(rows.len() as u64));
        let whole = chosen_whole(&rows);
        assert_eq!(kept.len(), whole.len());
        assert!(
            kept == whole,
            "the one-pass choice differs from the whole-arm one"
        );
        assert!(
            kept.len() < rows.len() / 10,
            "{} of {}",
            kept.len(),
            rows.len()
        );
    }

    #[test]
    fn short_arms_keep_every_row_and_long_ones_the_edges_and_every_maximum() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::create(&dir.path().join("run")).unwrap();
        run.create_dir(&run.arm("a").unwrap()).unwrap();
        let short = soak(120, 50);
        let (kept, file) = split(&run, "a", short.clone()).unwrap();
        assert_eq!(kept, short);
        assert!(file.is_none());
        assert!(!dir.path().join("run/arms/a/phase-rows.jsonl").exists());

        let long = soak(3000, 1234);
        let (kept, file) = split(&run, "a", long.clone()).unwrap();
        let file = file.expect("a long arm has a file");
        assert_eq!(file.rows, long.len() as u64);
        assert_eq!(file.kept, kept.len() as u64);
        assert_eq!(file.path, "arms/a/phase-rows.jsonl");
        // Both ends, the spike's request (both its rows), nothing else of
        // the middle, every once-only phase.
        let ids: BTreeSet<u64> = kept.iter().filter_map(|r| r.request_id).collect();
        assert!(ids.contains(&0) && ids.contains(&31) && !ids.contains(&32));
        assert!(ids.contains(&2999) && ids.contains(&2968) && !ids.contains(&2967));
        assert!(ids.contains(&1234), "the request with the largest resident");
        assert_eq!(
            kept.iter().filter(|r| r.request_id == Some(1234)).count(),
            2
        );
        assert!(kept.iter().any(|r| r.phase == Phase::ProcessStart));
        assert!(kept.iter().any(|r| r.phase == Phase::TeardownDone));
        assert!(kept.len() < 2 * 70 + 2, "{}", kept.len());
        // The file holds every row, and the digest is of its bytes.
        let bytes = std::fs::read(dir.path().join("run/arms/a/phase-rows.jsonl")).unwrap();
        let mut expected = Vec::new();
        write_lines(&long, &mut expected).unwrap();
        assert!(bytes == expected, "the file is not every row");
        assert_eq!(file.sha256, run_dir::digest::sha256_hex(&bytes));
        assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), long.len());
        // Request-less repeating rows (a lifecycle's release) keep their
        // own ends and maximum.
        let mut cycles = long.clone();
        for c in 0..100u64 {
            let resident = if c == 60 { 950 << 20 } else { 10 << 20 };
            cycles.push(row(Phase::Release, 10_000 + c, None, resident));
        }
        let (kept, _) = split(&run, "a", cycles).unwrap();
        let releases: Vec<u64> = kept
            .iter()
            .filter(|r| r.phase == Phase::Release)
            .map(|r| r.seq - 10_000)
            .collect();
        assert!(releases.contains(&0) && releases.contains(&99) && releases.contains(&60));
        assert!(!releases.contains(&50), "{releases:?}");
        // Opened read-only (a receipt assembled from committed raw files),
        // nothing is written and the record holds the digest all the same.
        drop(run);
        let path = dir.path().join("run/arms/a/phase-rows.jsonl");
        std::fs::remove_file(&path).unwrap();
        let read_only = RunDir::open(&dir.path().join("run"), run_dir::Access::Read).unwrap();
        let (_, again) = split(&read_only, "a", long.clone()).unwrap();
        assert_eq!(again, Some(file));
        assert!(!path.exists());
    }
}
