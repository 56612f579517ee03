//! `memqual import TOOL FILE`: parse one captured tool output (from an
//! earlier campaign, or a test fixture) and print the structured result.

use anyhow::Context;
use sampler::captures::footprint::SharedBlock;
use sampler::captures::vm_stat::VmStatCapture;
use sampler::captures::vmmap::Measure;
use sampler::captures::{self, Capture, ParseOptions, Parsed, Tool};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;

/// What `import --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportReport {
    /// The capture file as given on the command line.
    pub file: String,
    /// The parsed capture, its fields inlined into this JSON object.
    #[serde(flatten)]
    pub parsed: Parsed<Capture>,
}

/// `TOOL` of `memqual import`: every capture parser, by its name (aliases
/// accepted), listed with what it reads in `--help` and completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportTool(pub Tool);

static TOOLS: std::sync::LazyLock<Vec<ImportTool>> =
    std::sync::LazyLock::new(|| Tool::ALL.iter().copied().map(ImportTool).collect());

/// What each tool's capture is, for `--help`.
fn describe(tool: Tool) -> &'static str {
    match tool {
        Tool::VmmapSummary => "macOS `vmmap -summary PID`",
        Tool::VmStat => "macOS `vm_stat`",
        Tool::MemoryPressure => "macOS `memory_pressure`",
        Tool::Footprint => "macOS `footprint PID`",
        Tool::TimeL => "macOS `/usr/bin/time -l` (rusage counters)",
        Tool::Ps => "`ps -o pid=,rss=,vsz=` or any `ps -o` with its header",
        Tool::ProcStatus => "Linux /proc/<pid>/status",
        Tool::ProcStatm => "Linux /proc/<pid>/statm (with --page-size)",
        Tool::SmapsRollup => "Linux /proc/<pid>/smaps_rollup",
        Tool::Meminfo => "Linux /proc/meminfo",
        Tool::Vmstat => "Linux /proc/vmstat",
        Tool::Pressure => "Linux /proc/pressure/memory (PSI)",
        Tool::CgroupMemoryStat => "cgroup v2 memory.stat",
        Tool::CgroupMemoryEvents => "cgroup v2 memory.events",
        Tool::CgroupMemoryPeak => "cgroup v2 memory.peak",
    }
}

impl clap::ValueEnum for ImportTool {
    fn value_variants<'a>() -> &'a [Self] {
        &TOOLS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let names = self.0.names();
        Some(
            clap::builder::PossibleValue::new(self.0.name())
                .aliases(names.iter().skip(1).copied())
                .help(describe(self.0)),
        )
    }
}

/// `memqual import`: parse `file` and print the parse (JSON, or a summary).
pub fn command(
    tool: Tool,
    file: &Path,
    json: bool,
    opts: ParseOptions,
) -> Result<u8, crate::exit::Failure> {
    let report = import(tool, file, opts).map_err(crate::exit::usage)?;
    if json {
        crate::console::print_json(&report)?;
    } else {
        out!("{}", human(&report));
    }
    Ok(crate::exit::PASS)
}

/// Read the capture `file` (a regular file of bounded size) and parse it as
/// `tool`'s output. Fails when it cannot be read, is not UTF-8 (unless
/// `opts.lenient`), is empty (nothing but blank lines), or does not parse
/// (each parser also refuses a capture without the lines it needs, e.g. one
/// whose lines `opts.lenient` all skipped); the error names the file and
/// what was expected.
pub fn import(tool: Tool, file: &Path, opts: ParseOptions) -> anyhow::Result<ImportReport> {
    let bytes = run_dir::input::read(file, run_dir::limits::CAPTURE)?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) if opts.lenient => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        Err(e) => anyhow::bail!(
            "{}: not UTF-8 at byte offset {} (pass --lenient to read it with replacement characters)",
            file.display(),
            e.utf8_error().valid_up_to()
        ),
    };
    // The same for every tool: a capture with no line in it measured nothing.
    if text.lines().all(|l| l.trim().is_empty()) {
        anyhow::bail!(
            "{}: empty ({} bytes, no line that is not blank): expected the output of {}",
            file.display(),
            text.len(),
            describe(tool)
        );
    }
    // A capture whose lines are all unrecognised (skipped by --lenient) is
    // refused by each parser, which names the line or table it lacks.
    let parsed = captures::parse(tool, &text, opts)
        .with_context(|| format!("{} as {tool} output", file.display()))?;
    Ok(ImportReport {
        file: file.display().to_string(),
        parsed,
    })
}

fn bytes(b: Option<u64>) -> String {
    match b {
        None => "-".to_string(),
        Some(b) if b >= 1 << 30 => format!("{:.2} GiB ({b} B)", b as f64 / (1u64 << 30) as f64),
        Some(b) if b >= 1 << 20 => format!("{:.1} MiB ({b} B)", b as f64 / (1u64 << 20) as f64),
        Some(b) => format!("{b} B"),
    }
}

/// `a [1], b [2]: dirty 16 KB` for a `Shared with` block of footprint.
fn shared(b: &SharedBlock) -> String {
    let who: Vec<String> = b
        .with
        .iter()
        .map(|w| format!("{} [{}]", w.name, w.pid))
        .collect();
    let dirty = b
        .table
        .as_ref()
        .and_then(|t| t.total.as_ref())
        .map(|total| total.dirty.bytes);
    format!("{}: dirty {}", who.join(", "), bytes(dirty))
}

/// A short human summary; `--json` has everything.
pub fn human(r: &ImportReport) -> String {
    let mut s = String::new();
    let mut line = |text: String| {
        let _ = writeln!(s, "{text}");
    };
    let tool = match &r.parsed.value {
        Capture::VmmapSummary(_) => "vmmap -summary",
        Capture::VmStat(_) => "vm_stat",
        Capture::MemoryPressure(_) => "memory_pressure",
        Capture::Footprint(_) => "footprint",
        Capture::TimeL(_) => "time -l",
        Capture::Ps(_) => "ps",
        Capture::ProcStatus(_) => "/proc/<pid>/status",
        Capture::ProcStatm(_) => "/proc/<pid>/statm",
        Capture::SmapsRollup(_) => "/proc/<pid>/smaps_rollup",
        Capture::Meminfo(_) => "/proc/meminfo",
        Capture::Vmstat(_) => "/proc/vmstat",
        Capture::Pressure(_) => "PSI",
        Capture::CgroupMemoryStat(_) => "memory.stat",
        Capture::CgroupMemoryEvents(_) => "memory.events",
        Capture::CgroupMemoryPeak(_) => "memory.peak",
    };
    line(format!("{}: {tool}", r.file));
    match &r.parsed.value {
        Capture::VmmapSummary(v) => {
            line(format!(
                "  physical footprint       {}",
                bytes(v.physical_footprint.as_ref().map(|x| x.bytes))
            ));
            line(format!(
                "  physical footprint peak  {}",
                bytes(v.physical_footprint_peak.as_ref().map(|x| x.bytes))
            ));
            if let Some(t) = &v.regions {
                // Older macOS prints fewer columns: those it lacks show as "-".
                let total = t.total("TOTAL");
                let get = |m: Measure| total.and_then(|row| t.measured(row, m));
                line(format!(
                    "  regions: {} rows; TOTAL virtual {}, resident {}, dirty {}, swapped {}",
                    t.rows.len(),
                    bytes(get(Measure::Virtual)),
                    bytes(get(Measure::Resident)),
                    bytes(get(Measure::Dirty)),
                    bytes(get(Measure::Swapped))
                ));
            }
            if let Some(z) = &v.malloc_zones {
                line(format!("  malloc zones: {}", z.rows.len()));
            }
        }
        Capture::VmStat(VmStatCapture::Snapshot(v)) => {
            line(format!(
                "  page size {} B; free {}, wired {}, compressor {}",
                v.page_size,
                bytes(v.bytes.free),
                bytes(v.bytes.wired_down),
                bytes(v.bytes.occupied_by_compressor)
            ));
        }
        Capture::VmStat(VmStatCapture::Interval(v)) => {
            line(format!(
                "  page size {} B; {} columns, {} rows (the first is totals since boot)",
                v.page_size,
                v.columns.len(),
                v.samples.len()
            ));
        }
        Capture::MemoryPressure(p) => {
            line(format!(
                "  memory {}; free percentage {}",
                bytes(Some(p.total_bytes)),
                p.free_percentage.map_or("-".into(), |f| format!("{f}%"))
            ));
            line(format!(
                "  wired {}, compressor {}",
                bytes(p.bytes.wired_down),
                bytes(p.bytes.used_by_compressor)
            ));
        }
        Capture::Footprint(f) => {
            for p in &f.processes {
                line(format!(
                    "  {} [{}]: footprint {}, phys_footprint {}, peak {}",
                    p.name,
                    p.pid,
                    bytes(Some(p.footprint.bytes)),
                    bytes(p.phys_footprint()),
                    bytes(p.phys_footprint_peak())
                ));
                for b in &p.shared {
                    line(format!("    shared with {}", shared(b)));
                }
            }
            for b in &f.shared {
                line(format!("  shared by the group: {}", shared(b)));
            }
            if let Some(s) = &f.summary {
                line(format!(
                    "  summary (shared memory counted once): {}",
                    bytes(Some(s.footprint.bytes))
                ));
            }
        }
        Capture::TimeL(t) => {
            line(format!(
                "  real {} s; max RSS {}; peak footprint {}",
                t.real.as_ref().map_or("-", |r| r.raw.as_str()),
                bytes(t.max_rss_bytes),
                bytes(t.peak_memory_footprint_bytes)
            ));
        }
        Capture::Ps(p) => {
            for row in &p.rows {
                line(format!(
                    "  pid {}: rss {}, vsz {}",
                    row.pid,
                    bytes(row.rss_bytes),
                    bytes(row.vsz_bytes)
                ));
            }
        }
        Capture::ProcStatus(st) => {
            line(format!(
                "  {} [{}]: VmRSS {}, VmHWM {}, RssAnon {}, VmSwap {}",
                st.name,
                st.pid,
                bytes(st.vm_rss),
                bytes(st.vm_hwm),
                bytes(st.rss_anon),
                bytes(st.vm_swap)
            ));
        }
        Capture::ProcStatm(m) => {
            line(format!(
                "  resident {} pages ({}), size {} pages",
                m.resident_pages,
                bytes(m.resident_bytes),
                m.size_pages
            ));
        }
        Capture::SmapsRollup(r) => {
            line(format!(
                "  Rss {}, Pss {}, Private_Dirty {}, Swap {}",
                bytes(r.rss),
                bytes(r.pss),
                bytes(r.private_dirty),
                bytes(r.swap)
            ));
        }
        Capture::Meminfo(m) => {
            line(format!(
                "  MemTotal {}, MemAvailable {}, SwapFree {}",
                bytes(Some(m.mem_total)),
                bytes(m.mem_available),
                bytes(Some(m.swap_free))
            ));
        }
        Capture::Vmstat(v) => {
            line(format!(
                "  {} counters; pgmajfault {:?}, pswpout {:?}",
                v.entries.len(),
                v.pgmajfault,
                v.pswpout
            ));
        }
        Capture::Pressure(p) => {
            for (name, r) in [("some", &p.some), ("full", &p.full)] {
                if let Some(r) = r {
                    line(format!(
                        "  {name}: avg10 {}%, total {} us",
                        r.avg10, r.total_us
                    ));
                }
            }
        }
        Capture::CgroupMemoryStat(m) => {
            line(format!(
                "  anon {}, file {}, {} entries",
                bytes(m.anon),
                bytes(m.file),
                m.entries.len()
            ));
        }
        Capture::CgroupMemoryEvents(e) => {
            line(format!(
                "  max {:?}, oom {:?}, oom_kill {:?}",
                e.max, e.oom, e.oom_kill
            ));
        }
        Capture::CgroupMemoryPeak(p) => line(format!("  peak {}", bytes(Some(p.bytes)))),
    }
    for sk in &r.parsed.skipped {
        line(format!(
            "  skipped line {}: {} ({:?})",
            sk.line, sk.reason, sk.text
        ));
    }
    s
}
