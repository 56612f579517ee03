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
use std::collections::BTreeSet;
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

/// The rows the receipt keeps. A long arm's every row is written to
/// `arms/<id>/phase-rows.jsonl` in `run` now, streaming, and only its
/// record is kept (`None`: a short arm, whose rows all stay). A run opened
/// read-only is not written: the record gives the digest the file would
/// have, as a later `memqual report` writes it.
pub fn split(
    run: &RunDir,
    arm: &str,
    rows: Vec<PhaseRow>,
) -> Result<(Vec<PhaseRow>, Option<PhaseRowsFile>), RunDirError> {
    if rows.iter().filter(|r| repeats(r)).count() <= RECEIPT_ROWS {
        return Ok((rows, None));
    }
    let keep = keys_to_keep(&rows);
    let mut sha = None;
    let mut fill = |out: &mut dyn Write| {
        let mut hashing = Hashing {
            out,
            sha: Sha256::new(),
        };
        write_lines(&rows, &mut hashing)?;
        sha = Some(hashing.sha.finalize());
        Ok(())
    };
    if run.is_writable() {
        run.write_with(&run.arm(arm)?.join(FILE), fill)?;
    } else {
        // Hashing into a sink cannot fail.
        let _ = fill(&mut std::io::sink());
    }
    let count = rows.len() as u64;
    let kept: Vec<PhaseRow> = rows
        .into_iter()
        .filter(|r| !repeats(r) || keep.contains(&key(r)))
        .collect();
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

/// The requests (and request-less rows) whose rows stay in the receipt.
fn keys_to_keep(rows: &[PhaseRow]) -> BTreeSet<Key> {
    let repeating: Vec<&PhaseRow> = rows.iter().filter(|r| repeats(r)).collect();
    let mut keep = BTreeSet::new();
    let phases: BTreeSet<&str> = repeating.iter().map(|r| r.phase.as_str()).collect();
    for phase in phases {
        let of_phase: Vec<&&PhaseRow> = repeating
            .iter()
            .filter(|r| r.phase.as_str() == phase)
            .collect();
        // The first and last of every repeating phase.
        keep.extend(of_phase.iter().take(EDGE_REQUESTS).map(|r| key(r)));
        keep.extend(of_phase.iter().rev().take(EDGE_REQUESTS).map(|r| key(r)));
        // Its largest value of every figure a gate or a chart reads.
        for figure in FIGURES {
            let best = of_phase
                .iter()
                .filter_map(|r| Some((figure(r)?, r.seq, key(r))))
                // The earliest row of the largest value, as the gate picks it.
                .max_by_key(|(v, seq, _)| (*v, std::cmp::Reverse(*seq)));
            if let Some((_, _, k)) = best {
                keep.insert(k);
            }
        }
    }
    keep.extend(
        repeating
            .iter()
            .filter(|r| r.peak_between_samples == Some(true))
            .map(|r| key(r))
            .take(EDGE_REQUESTS),
    );
    keep
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
