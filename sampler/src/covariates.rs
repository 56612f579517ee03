//! The soak's covariates: the host's thermal and power state beside the
//! memory series, read with the system files (once per system period, 1 s by
//! default) into the series' `cov_*` columns. A soak whose thermal state or
//! power source changed meanwhile ran under two hosts, not one; the reports
//! say so beside the verdict.
//!
//! - Linux: the hottest thermal zone (`/sys/class/thermal/thermal_zone*/temp`
//!   in millidegrees Celsius, named by its `type`) and the lowest and
//!   highest current CPU frequency
//!   (`/sys/devices/system/cpu/cpu*/cpufreq/scaling_cur_freq`, kHz). A VM
//!   often has neither: the columns stay empty ("unreadable").
//! - macOS: the thermal pressure level (libnotify, the reading admission
//!   takes), the power source (`Now drawing from '…'` of `pmset -g batt`) and
//!   low-power mode (`lowpowermode` of `pmset -g`). `pmset` runs on a helper
//!   thread of the probe, so the sampler thread never waits on a process.
//!
//! The sysfs reads are written by hand: `procfs` covers `/proc` only, and
//! each file here is one short decimal number or name, read with a bound.
//! The `pmset` parsers are pure and tested on captures on every platform.

use crate::SeriesRow;
use std::io::Read;
use std::path::Path;

/// At most this many thermal zones or CPUs are read (a bound on a tree a
/// test or a strange kernel could make arbitrarily large).
pub const MAX_ENTRIES: usize = 4096;

/// Bytes read at most from one sysfs file (a number or a zone name).
const MAX_FILE_BYTES: u64 = 64;

/// What the Linux sysfs tree gave at one reading.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinuxThermal {
    /// The hottest zone's temperature, millidegrees Celsius.
    pub max_millicelsius: Option<i64>,
    /// That zone's `type` (e.g. `x86_pkg_temp`), or its folder name when it has none.
    pub zone: Option<String>,
    /// The lowest `scaling_cur_freq` of any CPU, kHz.
    pub cpu_freq_min_khz: Option<u64>,
    /// The highest `scaling_cur_freq` of any CPU, kHz.
    pub cpu_freq_max_khz: Option<u64>,
}

impl LinuxThermal {
    /// Put the reading into the row's covariate columns.
    pub fn fill(self, row: &mut SeriesRow) {
        row.cov_thermal_max_millicelsius = self.max_millicelsius;
        row.cov_thermal_zone = self.zone;
        row.cov_cpu_freq_min_khz = self.cpu_freq_min_khz;
        row.cov_cpu_freq_max_khz = self.cpu_freq_max_khz;
    }
}

/// Up to [`MAX_FILE_BYTES`] of `path`, trimmed; `None` when unreadable or not UTF-8.
fn small_file(path: &Path) -> Option<String> {
    // A FIFO or device would block or never end: regular files only, checked
    // before the open (opening a FIFO for reading waits for a writer).
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_FILE_BYTES).read_to_string(&mut text).ok()?;
    Some(text.trim().to_string())
}

/// The entries of `dir` whose names start with `prefix` and go on with
/// digits only, sorted, at most [`MAX_ENTRIES`].
fn numbered(dir: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<std::path::PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.strip_prefix(prefix)
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
        })
        .take(MAX_ENTRIES)
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The sysfs files a reading reads: found once, when the probe starts, so
/// the tick that reads them lists no directories (zones and CPUs do not
/// come and go during a run; a file that vanishes is read as missing).
#[derive(Debug, Clone, Default)]
pub struct LinuxSysfs {
    /// Each thermal zone's folder, for its `temp` and `type`.
    zones: Vec<std::path::PathBuf>,
    /// Each CPU's `cpufreq/scaling_cur_freq`.
    cpu_freqs: Vec<std::path::PathBuf>,
}

impl LinuxSysfs {
    /// The thermal zones and CPUs under `sys` (normally `/sys`).
    pub fn discover(sys: &Path) -> Self {
        LinuxSysfs {
            zones: numbered(&sys.join("class/thermal"), "thermal_zone"),
            cpu_freqs: numbered(&sys.join("devices/system/cpu"), "cpu")
                .into_iter()
                .map(|cpu| cpu.join("cpufreq/scaling_cur_freq"))
                .collect(),
        }
    }

    /// One reading. Anything missing or unparsable is left out; a tree
    /// without any gives all `None`.
    pub fn read(&self) -> LinuxThermal {
        let mut out = LinuxThermal::default();
        for zone in &self.zones {
            let Some(t) = small_file(&zone.join("temp")).and_then(|t| t.parse::<i64>().ok()) else {
                continue;
            };
            if out.max_millicelsius.is_none_or(|m| t > m) {
                out.max_millicelsius = Some(t);
                out.zone = small_file(&zone.join("type"))
                    .filter(|n| !n.is_empty())
                    .or_else(|| {
                        zone.file_name()
                            .and_then(|n| n.to_str())
                            .map(str::to_string)
                    });
            }
        }
        for file in &self.cpu_freqs {
            let Some(khz) = small_file(file).and_then(|t| t.parse::<u64>().ok()) else {
                continue;
            };
            out.cpu_freq_min_khz = Some(out.cpu_freq_min_khz.map_or(khz, |m| m.min(khz)));
            out.cpu_freq_max_khz = Some(out.cpu_freq_max_khz.map_or(khz, |m| m.max(khz)));
        }
        out
    }
}

/// Discover and read the thermal zones and CPU frequencies under `sys` at once.
pub fn read_linux_sysfs(sys: &Path) -> LinuxThermal {
    LinuxSysfs::discover(sys).read()
}

/// The power source `pmset -g batt` names on its first line (`Now drawing
/// from 'AC Power'`, `'Battery Power'`, `'UPS Power'`); `None` when no line
/// says.
pub fn parse_pmset_batt(text: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("Now drawing from '")?;
        let (source, _) = rest.split_once('\'')?;
        (!source.is_empty()).then(|| source.to_string())
    })
}

/// Low-power mode from one settings line: `lowpowermode 0|1`, or on newer
/// Macs the energy-mode dial `powermode 0|1|2` (1 is Low Power; 0 automatic
/// and 2 High Power are not). `None` for any other line or value.
pub fn low_power_setting(line: &str) -> Option<bool> {
    let mut words = line.split_whitespace();
    match (words.next()?, words.next()?, words.next()) {
        ("lowpowermode", "0", None) => Some(false),
        ("lowpowermode", "1", None) => Some(true),
        ("powermode", "1", None) => Some(true),
        ("powermode", "0" | "2", None) => Some(false),
        _ => None,
    }
}

/// Low-power mode of the power source in use, from `pmset -g custom`: the
/// settings under the `<source>:` header (`AC Power:`, `Battery Power:`)
/// that `pmset -g batt` named. `None` where that section has no such
/// setting (a Mac without the mode) or is missing.
pub fn parse_pmset_custom(text: &str, source: &str) -> Option<bool> {
    let mut in_section = false;
    for line in text.lines() {
        // Section headers start in column 0 and end with a colon.
        if !line.starts_with([' ', '\t']) && line.trim_end().ends_with(':') {
            in_section = line.trim_end().strip_suffix(':') == Some(source);
            continue;
        }
        if in_section && let Some(on) = low_power_setting(line) {
            return Some(on);
        }
    }
    None
}

/// The power source and low-power mode, read by running `pmset -g batt`
/// and `pmset -g custom` once a second on a thread of its own, so the
/// sampler thread only takes the latest reading and never waits on a
/// process. Plain std (only the path is macOS's), so it lives beside the
/// parsers it feeds, which are tested on captures.
#[cfg(target_os = "macos")]
pub struct PowerWatch {
    latest: std::sync::Arc<std::sync::Mutex<(Option<String>, Option<bool>)>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[cfg(target_os = "macos")]
impl PowerWatch {
    /// Start the thread; until its first reading, both values are `None`.
    pub fn start() -> Self {
        use std::sync::atomic::Ordering;
        let latest = std::sync::Arc::new(std::sync::Mutex::new((None, None)));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (out, quit) = (latest.clone(), stop.clone());
        let pmset = |arg: &str| -> Option<String> {
            let o = std::process::Command::new("/usr/bin/pmset")
                .args(["-g", arg])
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output()
                .ok()?;
            o.status
                .success()
                .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
        };
        let spawned = std::thread::Builder::new()
            .name("memqual-pmset".into())
            .spawn(move || {
                while !quit.load(Ordering::Relaxed) {
                    let source = pmset("batt").and_then(|t| parse_pmset_batt(&t));
                    let low = source
                        .as_deref()
                        .and_then(|s| pmset("custom").and_then(|t| parse_pmset_custom(&t, s)));
                    if let Ok(mut l) = out.lock() {
                        *l = (source, low);
                    }
                    std::thread::sleep(std::time::Duration::from_secs(1));
                }
            });
        // Without the thread the values stay unreadable (`None`).
        drop(spawned);
        PowerWatch { latest, stop }
    }

    /// The last reading: power source and low-power mode.
    pub fn latest(&self) -> (Option<String>, Option<bool>) {
        self.latest
            .lock()
            .map(|l| l.clone())
            .unwrap_or((None, None))
    }
}

#[cfg(target_os = "macos")]
impl Drop for PowerWatch {
    fn drop(&mut self) {
        // The thread ends within a second; nothing waits for it.
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Reads the covariates at each system reading.
pub struct CovariateProbe {
    #[cfg(target_os = "linux")]
    sys: LinuxSysfs,
    #[cfg(target_os = "macos")]
    power: PowerWatch,
}

impl Default for CovariateProbe {
    fn default() -> Self {
        Self::new()
    }
}

impl CovariateProbe {
    /// Read the running host (Linux `/sys`; on macOS, start the `pmset` helper thread).
    pub fn new() -> Self {
        CovariateProbe {
            #[cfg(target_os = "linux")]
            sys: LinuxSysfs::discover(Path::new("/sys")),
            #[cfg(target_os = "macos")]
            power: PowerWatch::start(),
        }
    }

    /// Fill the row's `cov_*` columns; what cannot be read stays `None`.
    pub fn sample(&mut self, row: &mut SeriesRow) {
        #[cfg(target_os = "linux")]
        self.sys.read().fill(row);
        #[cfg(target_os = "macos")]
        {
            row.cov_thermal_pressure = crate::platform::thermal_pressure_state().ok();
            let (source, low_power) = self.power.latest();
            row.cov_power_source = source;
            row.cov_low_power_mode = low_power;
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos")))]
        let _ = row;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fabricated sysfs tree (this VM's own `/sys` has no thermal zone and
    /// no cpufreq): zones 0 and 2 readable, zone 1 without a temperature,
    /// a `thermal_zone9x` that is no zone, CPUs 0 and 1 with frequencies,
    /// CPU 2 without cpufreq.
    fn tree() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let put = |rel: &str, text: &str| {
            let p = tmp.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        put("class/thermal/thermal_zone0/temp", "41000\n");
        put("class/thermal/thermal_zone0/type", "acpitz\n");
        put("class/thermal/thermal_zone1/type", "iwlwifi_1\n");
        put("class/thermal/thermal_zone2/temp", "67500\n");
        put("class/thermal/thermal_zone2/type", "x86_pkg_temp\n");
        put("class/thermal/thermal_zone9x/temp", "99000\n");
        put("class/thermal/cooling_device0/cur_state", "3\n");
        put(
            "devices/system/cpu/cpu0/cpufreq/scaling_cur_freq",
            "2800000\n",
        );
        put(
            "devices/system/cpu/cpu1/cpufreq/scaling_cur_freq",
            "1200000\n",
        );
        std::fs::create_dir_all(tmp.path().join("devices/system/cpu/cpu2")).unwrap();
        put("devices/system/cpu/cpufreq/policy0/scaling_cur_freq", "1\n");
        tmp
    }

    #[test]
    fn the_hottest_zone_and_the_frequency_range_are_read() {
        let t = tree();
        let r = read_linux_sysfs(t.path());
        assert_eq!(r.max_millicelsius, Some(67_500));
        assert_eq!(r.zone.as_deref(), Some("x86_pkg_temp"));
        assert_eq!(r.cpu_freq_min_khz, Some(1_200_000));
        assert_eq!(r.cpu_freq_max_khz, Some(2_800_000));
        let mut row = SeriesRow::default();
        r.fill(&mut row);
        assert_eq!(row.cov_thermal_max_millicelsius, Some(67_500));
        assert_eq!(row.cov_cpu_freq_max_khz, Some(2_800_000));
    }

    #[test]
    fn the_files_are_found_once_and_read_again_at_every_reading() {
        let t = tree();
        let sysfs = LinuxSysfs::discover(t.path());
        assert_eq!(sysfs.read().cpu_freq_max_khz, Some(2_800_000));
        // A new value in a known file is read; a file gone is missing, not an error.
        std::fs::write(
            t.path()
                .join("devices/system/cpu/cpu1/cpufreq/scaling_cur_freq"),
            "3400000\n",
        )
        .unwrap();
        assert_eq!(sysfs.read().cpu_freq_max_khz, Some(3_400_000));
        std::fs::remove_dir_all(t.path().join("class/thermal")).unwrap();
        let r = sysfs.read();
        assert_eq!((r.max_millicelsius, r.zone), (None, None));
        assert_eq!(r.cpu_freq_max_khz, Some(3_400_000));
    }

    #[test]
    fn a_tree_without_sensors_is_unreadable_not_zero() {
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(read_linux_sysfs(empty.path()), LinuxThermal::default());
        // Garbage, a huge file and a zone without a type.
        let t = tempfile::tempdir().unwrap();
        let zone = t.path().join("class/thermal/thermal_zone0");
        std::fs::create_dir_all(&zone).unwrap();
        std::fs::write(zone.join("temp"), "hot\n").unwrap();
        let other = t.path().join("class/thermal/thermal_zone1");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("temp"), format!("{}\n", "9".repeat(100_000))).unwrap();
        let third = t.path().join("class/thermal/thermal_zone2");
        std::fs::create_dir_all(&third).unwrap();
        std::fs::write(third.join("temp"), "-5000\n").unwrap();
        let r = read_linux_sysfs(t.path());
        assert_eq!(
            r.max_millicelsius,
            Some(-5000),
            "only the parsable zone counts"
        );
        assert_eq!(r.zone.as_deref(), Some("thermal_zone2"));
    }

    fn capture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/captures/pmset")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn pmset_batt_names_the_power_source() {
        assert_eq!(
            parse_pmset_batt(&capture("batt-ac-arm64.txt")).as_deref(),
            Some("AC Power")
        );
        assert_eq!(
            parse_pmset_batt(&capture("batt-battery.txt")).as_deref(),
            Some("Battery Power")
        );
        // A desktop Mac prints the first line only (documented, not captured).
        assert_eq!(
            parse_pmset_batt("Now drawing from 'AC Power'\n").as_deref(),
            Some("AC Power")
        );
        assert_eq!(parse_pmset_batt(""), None);
        assert_eq!(parse_pmset_batt("Now drawing from '"), None);
        assert_eq!(parse_pmset_batt("Now drawing from ''"), None);
    }

    #[test]
    fn pmset_custom_gives_the_low_power_mode_of_the_source_in_use() {
        let both = capture("custom-lowpower-on-both.txt");
        assert_eq!(parse_pmset_custom(&both, "Battery Power"), Some(true));
        assert_eq!(parse_pmset_custom(&both, "AC Power"), Some(true));
        let battery_only = capture("custom-lowpower-on-battery-only.txt");
        assert_eq!(
            parse_pmset_custom(&battery_only, "Battery Power"),
            Some(true)
        );
        assert_eq!(parse_pmset_custom(&battery_only, "AC Power"), Some(false));
        assert_eq!(parse_pmset_custom(&battery_only, "UPS Power"), None);
        // The newer energy-mode dial: 2 is High Power, not low.
        let dial = capture("custom-powermode-high-excerpt.txt");
        assert_eq!(low_power_setting(dial.trim_end()), Some(false));
        assert_eq!(low_power_setting(" powermode 1"), Some(true));
        assert_eq!(low_power_setting(" lowpowermode 2"), None);
        assert_eq!(low_power_setting(" lowpowermode 1 x"), None);
        assert_eq!(low_power_setting("lowpowermode"), None);
    }
}
