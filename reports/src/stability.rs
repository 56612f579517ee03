//! A soak arm's `stability` section, read from its run directory: the
//! arm's `settled.jsonl` and `series.csv` (the series streamed once, so
//! memory grows with requests, not with ticks) handed to
//! [`analysis::stability`], which judges them. A `stability` gate reads
//! [`Stability::stable`].

use crate::ReportError;
use crate::record::files;
use analysis::stability::{SoakSettings, Stability, SystemJoin, analyse};
use run_dir::{Rel, RunDir};
use sampler::Marker;
use worker_contract::{RequestResult, Settled};

/// The soak settings file in an arm's directory.
pub use run_dir::names::SOAK as SOAK_FILE;

/// Judge the arm in `arm` with `settings`, from its markers and results,
/// its `settled.jsonl` and its `series.csv` (an absent file reads as
/// empty).
pub fn analyse_arm(
    run: &RunDir,
    arm: &Rel,
    markers: &[Marker],
    results: &[RequestResult],
    settings: &SoakSettings,
) -> Result<Stability, ReportError> {
    let settled = run.read_jsonl::<Settled>(&arm.join(files::SETTLED))?;
    let mut system = SystemJoin::new(markers);
    crate::series::for_each_row(run, &arm.join(files::SERIES), |row| system.row(row))?;
    Ok(analyse(markers, results, &settled, system, settings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use analysis::growth::{Classification, GrowthSettings};
    use sampler::{Phase, SeriesRow, TaskMemory};

    /// The files of a soak of `n` requests, written into arm `a` of a new
    /// run: each request ends at 40 MiB resident (request i at 10 i + 6 ns)
    /// and settles at 30 MiB; the series rows between them have shmem
    /// growing by `shmem_step` a request, and no device columns.
    struct Soak {
        _tmp: tempfile::TempDir,
        run: RunDir,
        arm: Rel,
        markers: Vec<Marker>,
        settings: SoakSettings,
    }

    fn soak(n: u64, shmem_step: u64, with_files: bool) -> Soak {
        let memory = |mib: u64| TaskMemory {
            resident_bytes: mib << 20,
            ..TaskMemory::default()
        };
        let (tmp, run) = crate::testing::run();
        let arm = crate::testing::arm(&run, "a");
        let markers = (0..n)
            .map(|i| Marker {
                phase: Phase::RequestEnd,
                seq: i,
                request_id: Some(i),
                t_ns: i * 10 + 6,
                memory: memory(40),
                system: None,
                cpu: None,
            })
            .collect();
        if with_files {
            let settled: Vec<Settled> = (0..n)
                .map(|i| Settled {
                    request_id: i,
                    settle_ms: 500,
                    t_ns: i * 10 + 8,
                    memory: memory(30),
                })
                .collect();
            crate::testing::jsonl(&run, &arm.join(files::SETTLED), &settled);
            let rows = (0..n).map(|i| SeriesRow {
                t_ns: i * 10 + 5,
                sys_shmem_bytes: Some(i * shmem_step),
                sys_total_bytes: Some(1000),
                sys_available_bytes: Some(400),
                ..SeriesRow::default()
            });
            crate::testing::csv(&run, &arm.join(files::SERIES), rows);
        }
        let settings = SoakSettings {
            settle_ms: 500,
            system_slope_bytes_per_request: 16_384.0,
            growth: GrowthSettings::default(),
            lifecycle: None,
        };
        Soak {
            _tmp: tmp,
            run,
            arm,
            markers,
            settings,
        }
    }

    fn judged(s: &Soak) -> Result<Stability, ReportError> {
        analyse_arm(&s.run, &s.arm, &s.markers, &[], &s.settings)
    }

    #[test]
    fn the_series_and_settled_files_are_what_is_judged() {
        let s = judged(&soak(300, 262_144, true)).unwrap();
        assert_eq!(s.requests, 300);
        assert_eq!(s.settled_series[0].points, 300);
        assert_eq!(s.system_growth_while_worker_flat, ["sys_shmem"]);
        assert_eq!(
            s.system_series[0].bytes_per_request.unwrap().estimate,
            262_144.0
        );
        assert_eq!(s.host_used.as_ref().unwrap().points, 300);
        assert_eq!(s.stable, Some(false));
    }

    #[test]
    fn an_arm_without_settled_or_series_files_has_only_its_own_series() {
        let s = judged(&soak(50, 0, false)).unwrap();
        assert!(s.settled_series.is_empty());
        assert!(s.system_series.is_empty() && s.host_used.is_none());
        assert_eq!(s.worker, Classification::Plateau);
        assert_eq!(s.stable, Some(true));
    }

    #[test]
    fn a_series_without_device_columns_has_no_device_series() {
        let soak = soak(50, 0, true);
        let s = judged(&soak).unwrap();
        assert!(s.device_series.is_empty());
        assert!(s.device_growth_while_resident_flat.is_empty());
        let text = std::fs::read_to_string(soak.run.path().join("arms/a/series.csv")).unwrap();
        assert!(!text.lines().next().unwrap().contains("gpu_"));
    }

    #[test]
    fn a_broken_line_in_either_file_names_the_file_and_line() {
        // A line that does not parse after the good ones, as a worker or
        // sampler bug would write it: settled line 2, series line 5.
        for (file, bad, at) in [
            (
                files::SETTLED,
                "{\"request_id\": \"x\"}",
                "settled.jsonl:2:",
            ),
            (files::SERIES, "not-a-number", "series.csv:5:"),
        ] {
            let soak = soak(if file == files::SETTLED { 1 } else { 3 }, 0, true);
            let path = soak.run.display(&soak.arm.join(file));
            let good = std::fs::read_to_string(&path).unwrap();
            std::fs::write(&path, format!("{good}{bad}\n")).unwrap();
            let text = judged(&soak).unwrap_err().to_string();
            assert!(text.contains(at), "{text}");
        }
    }
}
