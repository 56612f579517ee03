//! Every parser on the real captures in tests/captures/ (sources in the
//! README there), asserting exact values read from the files.

use sampler::captures::vm_stat::{ColumnRole, VmStatCapture};
use sampler::captures::vmmap::{ColumnKind, Measure};
use sampler::captures::{
    Capture, ParseOptions, Tool, cgroup, footprint, memory_pressure, parse, proc_files, ps, time_l,
    vm_stat, vmmap,
};
use std::path::PathBuf;

fn dir(tool_dir: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/captures")
        .join(tool_dir)
}

fn load(tool_dir: &str, file: &str) -> String {
    let path = dir(tool_dir).join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

const STRICT: ParseOptions = ParseOptions {
    lenient: false,
    page_size: None,
};

/// The sum of the rows' values in `column` and the TOTAL row's value.
fn column_sum_and_total(t: &vmmap::Table, column: Measure) -> (u64, u64) {
    let sum = t.rows.iter().map(|r| t.measured(r, column).unwrap()).sum();
    (sum, t.measured(t.total("TOTAL").unwrap(), column).unwrap())
}

/// The region counts of all rows add up to the TOTAL row's count.
fn region_counts_add_up(t: &vmmap::Table) -> u64 {
    let (sum, total) = column_sum_and_total(t, Measure::RegionCount);
    assert_eq!(sum, total);
    sum
}

/// vmmap prints sizes rounded to three significant figures (`330.2M`,
/// `8192K`): a sum of `rows` rounded values may differ from the rounded
/// total by half a unit of the largest printed figure per row.
fn within_rounding(sum: u64, total: u64, rows: usize, unit: u64) {
    let slack = rows as u64 * unit / 2 + unit / 2;
    assert!(
        sum.abs_diff(total) <= slack,
        "sum {sum} vs total {total}: off by more than {slack}"
    );
}

fn cell(row: &vmmap::Row, index: usize) -> &vmmap::Cell {
    row.cells[index].as_ref().unwrap()
}

#[test]
fn vmmap_macos_13_intel() {
    let v = vmmap::parse(
        &load("vmmap", "macos-13.2.1-x86_64-memory-user-100mib.txt"),
        STRICT,
    )
    .unwrap()
    .value;
    let fp = v.physical_footprint.unwrap();
    assert_eq!((fp.raw.as_str(), fp.bytes), ("100.3M", 105_172_173));
    assert_eq!(v.physical_footprint_peak.unwrap().raw, "100.3M");
    // macOS 13 prints `Idle exit: untracked` with one space.
    assert!(
        v.header
            .iter()
            .any(|h| h.key == "Idle exit" && h.value == "untracked")
    );
    let r = v.regions.unwrap();
    assert_eq!(r.columns.len(), 8);
    assert_eq!(r.rows.len(), 20);
    assert_eq!(region_counts_add_up(&r), 178);
    let large = r.row("MALLOC_LARGE").unwrap();
    assert_eq!(r.value(large, "DIRTY SIZE"), Some(104_857_600));
    assert_eq!(large.detail.as_deref(), Some("see MALLOC ZONE table below"));
    // A value under 1 KiB is printed as bare bytes.
    let objc = r.row("__OBJC_RW").unwrap();
    assert_eq!(
        (cell(objc, 2).raw.as_str(), cell(objc, 2).value),
        ("1520", 1520)
    );
    assert!(r.total("TOTAL, minus reserved VM space").is_none());
    let z = v.malloc_zones.unwrap();
    assert_eq!(z.columns[7].name, "% FRAG");
    let zone = z.row("DefaultMallocZone_0x105051000").unwrap();
    assert_eq!(z.value(zone, "ALLOCATION COUNT"), Some(176));
    assert_eq!(z.value(zone, "DIRTY+SWAP FRAG SIZE"), Some(16 * 1024));
    assert_eq!(z.value(zone, "% FRAG"), Some(1));
}

#[test]
fn vmmap_macos_14_arm64() {
    let v = vmmap::parse(&load("vmmap", "macos-14.1.1-arm64-clion.txt"), STRICT)
        .unwrap()
        .value;
    assert_eq!(v.physical_footprint.unwrap().bytes, 1_825_361_101); // 1.7G
    assert_eq!(v.physical_footprint_peak.unwrap().bytes, 1_932_735_283); // 1.8G
    assert_eq!(v.summary_lines[1].key, "Writable regions");
    let r = v.regions.unwrap();
    assert_eq!(region_counts_add_up(&r), 12_542);
    let io = r.row("IOAccelerator").unwrap();
    assert_eq!(r.value(io, "VOLATILE SIZE"), Some(50_017_075)); // 47.7M
    assert_eq!(
        r.value(r.row("__INFO_FILTER").unwrap(), "VIRTUAL SIZE"),
        Some(8)
    );
    assert_eq!(
        r.row("VM_ALLOCATE (reserved)").unwrap().detail.as_deref(),
        Some("reserved VM address space (unallocated)")
    );
    let z = v.malloc_zones.unwrap();
    assert_eq!(z.rows.len(), 4);
    let total = z.total("TOTAL").unwrap();
    assert_eq!(z.value(total, "ALLOCATION COUNT"), Some(2_443_339));
    assert_eq!(z.value(total, "% FRAG"), Some(12));
}

#[test]
fn vmmap_macos_26() {
    let v = vmmap::parse(&load("vmmap", "macos-26.6-arm64-ferryx.txt"), STRICT)
        .unwrap()
        .value;
    assert_eq!(v.physical_footprint.unwrap().bytes, 963_641_344); // 919.0M
    assert_eq!(v.physical_footprint_peak.unwrap().bytes, 987_129_446); // 941.4M
    assert!(
        v.header
            .iter()
            .any(|h| h.key == "Target Type" && h.value == "live task")
    );
    let r = v.regions.unwrap();
    assert_eq!(region_counts_add_up(&r), 7_248);
    let minus = r.total("TOTAL, minus reserved VM space").unwrap();
    assert_eq!(cell(minus, 0).raw, "4.0G");
    assert_eq!(
        r.value(r.row("IOSurface").unwrap(), "SWAPPED SIZE"),
        Some(372_034_765)
    ); // 354.8M
    assert_eq!(
        r.value(r.row("Memory Tag 240").unwrap(), "REGION COUNT"),
        Some(43)
    );
    let z = v.malloc_zones.unwrap();
    let zone = z.row("AttributeGraph graph data_0x110d34000").unwrap();
    assert_eq!(z.value(zone, "BYTES ALLOCATED"), Some(2496));
    assert_eq!(
        z.value(z.row("LSBindingEvaluator_0x105488000").unwrap(), "% FRAG"),
        Some(100)
    );

    let llama = vmmap::parse(
        &load("vmmap", "macos-26.4.1-arm64-llama-server.txt"),
        STRICT,
    )
    .unwrap()
    .value;
    assert_eq!(llama.physical_footprint_peak.unwrap().bytes, 15_569_256_448); // 14.5G
    let r = llama.regions.unwrap();
    assert_eq!(region_counts_add_up(&r), 3_270);
    assert_eq!(
        r.value(r.row("__AUTH").unwrap(), "SWAPPED SIZE"),
        Some(1840)
    );
    // The capture's zone table was cut after its first row: no TOTAL there.
    let z = llama.malloc_zones.unwrap();
    assert_eq!((z.rows.len(), z.totals.len()), (1, 0));
}

fn vmmap_table(file: &str) -> vmmap::VmmapSummary {
    vmmap::parse(&load("vmmap", file), STRICT).unwrap().value
}

fn names(t: &vmmap::Table) -> Vec<&str> {
    t.columns.iter().map(|c| c.name.as_str()).collect()
}

#[test]
fn vmmap_osx_10_10_one_header_line_and_full_percent() {
    let v = vmmap_table("osx-10.10.5-x86_64-ocspd.txt");
    assert!(
        v.header
            .iter()
            .any(|h| h.key == "OS Version" && h.value == "Mac OS X 10.10.5 (14F2511)")
    );
    // 10.10 prints no footprint lines: absent, not zero.
    assert_eq!(
        (v.physical_footprint, v.physical_footprint_peak),
        (None, None)
    );
    assert!(
        v.header
            .iter()
            .any(|h| h.key.starts_with("==== Summary for process 94338"))
    );
    let r = v.regions.unwrap();
    assert_eq!(r.name_header, "REGION TYPE");
    assert_eq!(names(&r), ["VIRTUAL"]);
    assert_eq!(
        (r.columns[0].kind, r.columns[0].measure),
        (ColumnKind::Bytes, Some(Measure::Virtual))
    );
    assert_eq!(r.rows.len(), 15);
    let total = r.total("TOTAL").unwrap();
    assert_eq!(cell(total, 0).raw, "330.2M");
    assert_eq!(r.measured(total, Measure::Virtual), Some(346_239_795));
    // No resident, dirty or region-count column: absent, never 0.
    for m in [Measure::Resident, Measure::Dirty, Measure::RegionCount] {
        assert_eq!(r.measured(total, m), None, "{m:?}");
    }
    let (sum, total) = column_sum_and_total(&r, Measure::Virtual);
    within_rounding(sum, total, r.rows.len(), 104_858);
    let malloc = r.row("MALLOC").unwrap();
    assert_eq!(
        malloc.detail.as_deref(),
        Some("see MALLOC ZONE table below")
    );
    assert_eq!(
        r.value(r.row("MALLOC freed, no zone").unwrap(), "VIRTUAL"),
        Some(264 * 1024)
    );

    let z = v.malloc_zones.unwrap();
    assert_eq!(
        names(&z),
        [
            "VIRTUAL SIZE",
            "ALLOCATION COUNT",
            "BYTES ALLOCATED",
            "% FULL"
        ]
    );
    let kinds: Vec<ColumnKind> = z.columns.iter().map(|c| c.kind).collect();
    use ColumnKind::{Bytes, Count, Percent};
    assert_eq!(kinds, [Bytes, Count, Bytes, Percent]);
    let default = z.row("DefaultMallocZone_0x10c523000").unwrap();
    assert_eq!(z.measured(default, Measure::FullPercent), Some(1));
    assert_eq!(
        z.measured(default, Measure::BytesAllocated),
        Some(634 * 1024)
    );
    assert_eq!(z.measured(default, Measure::FragPercent), None);
    // The empty zone has no % FULL: the cell is blank, so None.
    let gfx = z.row("GFXMallocZone_0x10c554000").unwrap();
    assert_eq!(gfx.cells[3], None);
    assert_eq!(z.measured(gfx, Measure::FullPercent), None);
    assert_eq!(z.measured(gfx, Measure::AllocationCount), Some(0));
    let (sum, total) = column_sum_and_total(&z, Measure::AllocationCount);
    assert_eq!((sum, total), (7081, 7081));
}

#[test]
fn vmmap_osx_resident_only_table() {
    let v = vmmap_table("osx-report-2.2-x86_64-python-resident.txt");
    assert!(v.header.iter().any(|h| h.key == "Output report format"));
    assert_eq!(v.summary_lines.len(), 2);
    let r = v.regions.unwrap();
    assert_eq!(names(&r), ["VIRTUAL", "RESIDENT"]);
    assert_eq!((r.rows.len(), r.totals.len()), (16, 2));
    let total = r.total("TOTAL").unwrap();
    assert_eq!(r.measured(total, Measure::Resident), Some(446_903_091)); // 426.2M
    assert_eq!(r.measured(total, Measure::Dirty), None);
    let minus = r.total("TOTAL, minus reserved VM space").unwrap();
    assert_eq!(cell(minus, 1).raw, "426.2M");
    let vm = r.row("VM_ALLOCATE").unwrap();
    assert_eq!(
        (
            r.measured(vm, Measure::Virtual),
            r.measured(vm, Measure::Resident)
        ),
        (Some(28 << 30), Some(12 * 1024))
    );
    assert_eq!(
        r.row("IOKit (reserved)").unwrap().detail.as_deref(),
        Some("reserved VM address space (unallocated)")
    );
    let (sum, total) = column_sum_and_total(&r, Measure::Resident);
    within_rounding(sum, total, r.rows.len(), 104_858);

    let z = v.malloc_zones.unwrap();
    assert_eq!(
        names(&z),
        [
            "VIRTUAL SIZE",
            "RESIDENT SIZE",
            "ALLOCATION COUNT",
            "BYTES ALLOCATED",
            "% FULL"
        ]
    );
    let default = z.row("DefaultMallocZone_0x105b64000").unwrap();
    assert_eq!(z.measured(default, Measure::Resident), Some(174_587_904)); // 166.5M
    assert_eq!(z.measured(default, Measure::FullPercent), Some(81));
    assert_eq!(z.row("GFXMallocZone_0x1093a9000").unwrap().cells[4], None);
    assert_eq!(
        z.measured(z.total("TOTAL").unwrap(), Measure::AllocationCount),
        Some(23_534)
    );
}

#[test]
fn vmmap_macos_10_12_to_10_14() {
    // 10.12, not run as root: only the virtual size and the region count.
    let v = vmmap_table("macos-10.12-x86_64-hyperkit-no-resident.txt");
    assert!(
        v.header
            .iter()
            .any(|h| h.key == "OS Version" && h.value == "Mac OS X 10.12 (16A323)")
    );
    assert_eq!(v.physical_footprint, None);
    let r = v.regions.unwrap();
    assert_eq!(names(&r), ["VIRTUAL SIZE", "REGION COUNT"]);
    assert_eq!(r.rows.len(), 23);
    // 10.12 to 10.14 count one region more per row than their TOTAL does;
    // the 10.13 and 10.14 captures below show the same.
    assert_eq!(column_sum_and_total(&r, Measure::RegionCount), (374, 351));
    let total = r.total("TOTAL").unwrap();
    assert_eq!(r.measured(total, Measure::Resident), None);
    assert_eq!(
        r.row("MALLOC_SMALL (empty)").unwrap().detail.as_deref(),
        Some("see MALLOC ZONE table below")
    );
    let z = v.malloc_zones.unwrap();
    assert_eq!(
        names(&z),
        [
            "VIRTUAL SIZE",
            "ALLOCATION COUNT",
            "BYTES ALLOCATED",
            "% FULL",
            "REGION COUNT"
        ]
    );
    let default = &z.rows[0];
    assert_eq!(
        (
            z.measured(default, Measure::FullPercent),
            z.measured(default, Measure::RegionCount),
            z.measured(default, Measure::AllocationCount)
        ),
        (Some(98), Some(11), Some(1620))
    );
    assert!(z.totals.is_empty());

    let v = vmmap_table("macos-10.13.6-x86_64-go.txt");
    assert_eq!(v.physical_footprint.unwrap().bytes, 10_695_475); // 10.2M
    assert_eq!(v.physical_footprint_peak.unwrap().bytes, 12_792_627); // 12.2M
    let r = v.regions.unwrap();
    assert_eq!(r.columns.len(), 8);
    assert_eq!(column_sum_and_total(&r, Measure::RegionCount), (448, 432));
    assert_eq!(r.rows.len(), 16);
    let (sum, total) = column_sum_and_total(&r, Measure::Dirty);
    within_rounding(sum, total, r.rows.len(), 104_858);
    let z = v.malloc_zones.unwrap();
    // The newer % FRAG prints 0% for an empty zone, where % FULL was blank.
    let gfx = z.row("GFXMallocZone_0x1bfd000").unwrap();
    assert_eq!(z.measured(gfx, Measure::FragPercent), Some(0));
    assert_eq!(
        z.measured(&z.rows[0], Measure::DirtySwapFrag),
        Some(126 * 1024)
    );

    let v = vmmap_table("macos-10.14.1-x86_64-hyperkit.txt");
    assert_eq!(v.physical_footprint.unwrap().raw, "3.7G");
    assert!(
        v.header
            .iter()
            .any(|h| h.key == "Analysis Tool Version" && h.value == "Xcode 10.1 (10B61)")
    );
    let r = v.regions.unwrap();
    assert_eq!(column_sum_and_total(&r, Measure::RegionCount), (473, 450));
    assert_eq!(r.rows.len(), 23);
    // Every swapped size is printed in whole KiB: the sum is exact.
    assert_eq!(
        column_sum_and_total(&r, Measure::Swapped),
        (96 * 1024, 96 * 1024)
    );
    assert_eq!(
        r.measured(r.row("__pci_devemu_set").unwrap(), Measure::Dirty),
        Some(4096)
    );
    let z = v.malloc_zones.unwrap();
    assert_eq!(z.measured(&z.rows[0], Measure::Swapped), Some(52 * 1024));
}

fn snapshot(file: &str) -> vm_stat::VmStat {
    match vm_stat::parse(&load("vm_stat", file), STRICT)
        .unwrap()
        .value
    {
        VmStatCapture::Snapshot(s) => s,
        other => panic!("{file}: {other:?}"),
    }
}

#[test]
fn vm_stat_snapshots() {
    let intel = snapshot("macos-intel-4k-wazuh-22113.txt");
    assert_eq!(intel.page_size, 4096);
    assert_eq!(intel.entries.len(), 22);
    assert_eq!(intel.bytes.free, Some(6_127_229 * 4096));
    assert_eq!(intel.bytes.occupied_by_compressor, Some(0));
    let mini = snapshot("macos-arm64-16k-mini2-20260524.txt");
    assert_eq!(mini.bytes.wired_down, Some(127_718 * 16384));
    assert_eq!(
        sampler::captures::entry(&mini.entries, "Translation faults"),
        Some(5_220_385_534)
    );
    let big = snapshot("macos-arm64-16k-48gib.txt");
    assert_eq!(
        sampler::captures::entry(&big.entries, "Swapouts"),
        Some(4_209_984)
    );
    assert_eq!(big.bytes.stored_in_compressor, Some(2_068_175 * 16384));
    // The newer 53-column format with the MTE lines.
    let mte = snapshot("macos-26-arm64-m5-mte.txt");
    assert_eq!(mte.entries.len(), 33);
    assert_eq!(
        sampler::captures::entry(&mte.entries, "Bytes of compressed tags"),
        Some(1_935_104)
    );
    assert_eq!(mte.bytes.anonymous, Some(1_946_873 * 16384));
}

#[test]
fn vm_stat_interval_tables() {
    let t = |file: &str| match vm_stat::parse(&load("vm_stat", file), STRICT)
        .unwrap()
        .value
    {
        VmStatCapture::Interval(i) => i,
        other => panic!("{file}: {other:?}"),
    };
    let ex2 = t("osx-intel-4k-vm_stat-1-ex2.txt");
    assert_eq!((ex2.columns.len(), ex2.samples.len()), (22, 12));
    let faults = ex2.column("faults").unwrap();
    assert_eq!(ex2.columns[faults].role, ColumnRole::Counter);
    let first = &ex2.samples[0];
    assert!(first.since_boot && !ex2.samples[1].since_boot);
    // `5919477K`: divided by 1000 and truncated by the tool.
    let c = &first.cells[faults];
    assert_eq!(
        (c.value, c.approximate, c.raw.as_str()),
        (5_919_477_000, true, "5919477K")
    );
    assert_eq!(ex2.samples[1].cells[faults].value, 17_818);
    let free = ex2.column("free").unwrap();
    assert_eq!(ex2.samples[11].cells[free].bytes, Some(440_092 * 4096));
    let swapouts = ex2.column("swapouts").unwrap();
    assert_eq!(ex2.samples[7].cells[swapouts].value, 297_889);

    let one = t("osx-intel-4k-vm_stat-c1-1.txt");
    assert_eq!(one.samples.len(), 1);
    assert_eq!(
        one.samples[0].cells[one.column("faults").unwrap()].value,
        146_832_000
    );
    assert_eq!(
        one.samples[0].cells[one.column("swapouts").unwrap()].value,
        18_050
    );

    let ostep = t("osx-intel-4k-vm_stat-1-ostep.txt");
    assert_eq!(ostep.samples.len(), 4);
    assert_eq!(
        ostep.samples[3].cells[ostep.column("0fill").unwrap()].value,
        3844
    );
}

#[test]
fn memory_pressure_captures() {
    let p = |file: &str| {
        memory_pressure::parse(&load("memory_pressure", file), STRICT)
            .unwrap()
            .value
    };
    let a = p("macos-arm64-16k-mini2-20260524.txt");
    assert_eq!(
        (a.total_bytes, a.total_pages, a.page_size),
        (34_359_738_368, 2_097_152, 16384)
    );
    assert_eq!(a.free_percentage, Some(86));
    assert_eq!(a.entries.len(), 15);
    assert_eq!(a.bytes.used_by_compressor, Some(153_447 * 16384));
    assert_eq!(a.value("Pageins"), Some(35_398_821));
    assert_eq!(a.entries[3].section, "Swap I/O");
    // Taken with the vm_stat snapshot of the same minute: the same compressor size.
    let vm = snapshot("macos-arm64-16k-mini2-20260524.txt");
    assert_eq!(vm.bytes.occupied_by_compressor, a.bytes.used_by_compressor);
    assert_eq!(p("macos-arm64-16k-mini2-b.txt").value("Swapouts"), Some(16));
    assert_eq!(p("macos-arm64-16k-mini2-c.txt").free_percentage, Some(90));
    let q = p("macos-15.6-x86_64-quiet.txt");
    assert_eq!(
        (q.total_bytes, q.page_size, q.free_percentage),
        (17_179_869_184, 4096, Some(60))
    );
    assert!(q.entries.is_empty());
}

#[test]
fn footprint_captures() {
    let f = |file: &str| {
        footprint::parse(&load("footprint", file), STRICT)
            .unwrap()
            .value
    };
    let sleep = f("macos-26.5.2-arm64-sleep.txt");
    let p = &sleep.processes[0];
    assert_eq!(
        (p.name.as_str(), p.pid, p.page_size),
        ("sleep", 39461, 16384)
    );
    assert_eq!(p.footprint.bytes, 832 * 1024);
    let table = p.table.as_ref().unwrap();
    assert_eq!(table.rows.len(), 19);
    let total = table.total.as_ref().unwrap();
    assert_eq!(
        (total.dirty.bytes, total.clean.bytes, total.regions),
        (832 * 1024, 48 * 1024, 360)
    );
    // The headline figure and phys_footprint differ in the same output.
    assert_eq!(p.phys_footprint(), Some(848 * 1024));
    assert_eq!(p.phys_footprint_peak(), Some(864 * 1024));
    let chrome = f("macos-26-arm64-chrome-renderer.txt");
    let c = &chrome.processes[0];
    assert_eq!(c.name, "Google Chrome Helper (Renderer)");
    assert_eq!(c.phys_footprint_peak(), Some(617 << 20));
    assert_eq!(
        c.table.as_ref().unwrap().rows[1].reclaimable.bytes,
        37 << 20
    );
    let ferryx = f("macos-26.6-arm64-ferryx.txt");
    let x = &ferryx.processes[0];
    assert_eq!(
        x.table.as_ref().unwrap().rows[0].category,
        "Owned physical footprint (unmapped) (graphics)"
    );
    let x_total = x.table.as_ref().unwrap().total.as_ref().unwrap();
    assert_eq!(x_total.regions, 9386);
    assert_eq!(x.phys_footprint(), Some(922 << 20));
    assert!(ferryx.summary.is_none() && ferryx.shared.is_empty() && x.shared.is_empty());
}

#[test]
fn footprint_multi_process_summaries() {
    let f = |file: &str| {
        footprint::parse(&load("footprint", file), STRICT)
            .unwrap()
            .value
    };
    let bytes = f("macos-arm64-muxbase-5-processes-bytes.txt");
    let pids: Vec<i32> = bytes.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [14756, 14768, 14694, 17302, 14757]);
    assert_eq!(bytes.processes[1].name, "MuxBase Helper (Renderer)");
    assert_eq!(bytes.processes[1].footprint.bytes, 96_454_216);
    assert_eq!(bytes.processes[0].phys_footprint_peak(), Some(425_788_640));
    assert_eq!(bytes.processes[4].phys_footprint(), Some(7_013_216));
    // --noCategories: no tables at all.
    assert!(
        bytes
            .processes
            .iter()
            .all(|p| p.table.is_none() && p.shared.is_empty())
    );
    let summary = bytes.summary.as_ref().unwrap();
    assert_eq!((summary.line, summary.footprint.bytes), (42, 368_056_728));
    // Shared memory counted once: below the sum of the headline figures.
    let sum: u64 = bytes.processes.iter().map(|p| p.footprint.bytes).sum();
    assert_eq!(sum - summary.footprint.bytes, 1_277_952);
    assert!(summary.table.is_none() && summary.auxiliary.is_empty());

    let formatted = f("macos-arm64-muxbase-2-processes-formatted.txt");
    let helper = &formatted.processes[1];
    assert_eq!(
        (
            helper.pid,
            helper.footprint.bytes,
            helper.phys_footprint_peak()
        ),
        (14757, 6817 * 1024, Some(6897 * 1024))
    );
    assert_eq!(formatted.processes[0].phys_footprint(), Some(67 << 20));
    let summary = formatted.summary.unwrap();
    assert_eq!(
        (summary.footprint.raw.as_str(), summary.footprint.bytes),
        ("74 MB", 74 << 20)
    );
}

#[test]
fn footprint_rube_render_pipeline() {
    let f = footprint::parse(
        &load("footprint", "macos-arm64-rube-render-pipeline.txt"),
        STRICT,
    )
    .unwrap()
    .value;
    let p = &f.processes[0];
    assert_eq!((p.name.as_str(), p.pid), ("rube-bin", 39974));
    let t = p.table.as_ref().unwrap();
    assert_eq!(
        t.columns,
        ["Dirty", "Clean", "Reclaimable", "Regions", "Category"]
    );
    assert_eq!(t.rows.len(), 36);
    let reusable = t.row("MALLOC_LARGE_REUSABLE").unwrap();
    assert_eq!(
        (
            reusable.dirty.bytes,
            reusable.reclaimable.bytes,
            reusable.regions
        ),
        (0, 33 << 20, 2)
    );
    // Not asked for: no swapped or wired figures, rather than zeros.
    assert!(
        t.rows
            .iter()
            .all(|r| r.swapped.is_none() && r.wired.is_none())
    );
    let total = t.total.as_ref().unwrap();
    assert_eq!((total.dirty.bytes, total.regions), (114 << 20, 6945));
    // The listed regions sum to 2 less than TOTAL, as in the Chrome and
    // Ferryx captures from other machines.
    let regions: u64 = t.rows.iter().map(|r| r.regions).sum();
    assert_eq!(regions, 6943);
    // Whole units of at most 4 digits: each row is off by under half a unit.
    let dirty: u64 = t.rows.iter().map(|r| r.dirty.bytes).sum();
    assert!(dirty.abs_diff(total.dirty.bytes) < (1 << 20), "{dirty}");
    assert_eq!(p.phys_footprint(), Some(114 << 20));
}

#[test]
fn footprint_shared_with_lines() {
    let f = footprint::parse(
        &load("footprint", "macos-arm64-unreal-zsh-shared-cut.txt"),
        STRICT,
    )
    .unwrap()
    .value;
    let pids: Vec<i32> = f.processes.iter().map(|p| p.pid).collect();
    assert_eq!(pids, [11916, 25484]);
    // Inside UnrealEditor's block: the memory it shares with zsh.
    let unreal = &f.processes[0];
    assert_eq!(unreal.shared.len(), 1);
    let with = &unreal.shared[0].with;
    assert_eq!(
        (with[0].name.as_str(), with[0].pid, with.len()),
        ("zsh", 25484, 1)
    );
    // The source cut the tables: absent, not empty.
    assert!(unreal.shared[0].table.is_none() && unreal.table.is_none());
    assert!(f.processes[1].shared.is_empty());
    // After the processes: the group's shared memory, naming both.
    assert_eq!(f.shared.len(), 1);
    let group: Vec<(&str, i32)> = f.shared[0]
        .with
        .iter()
        .map(|w| (w.name.as_str(), w.pid))
        .collect();
    assert_eq!(group, [("UnrealEditor", 11916), ("zsh", 25484)]);
    let summary = f.summary.unwrap();
    assert_eq!(summary.footprint.bytes, 4358 << 20);
    let sum: u64 = f.processes.iter().map(|p| p.footprint.bytes).sum();
    assert!(sum.abs_diff(summary.footprint.bytes) < (1 << 20));
}

#[test]
fn time_l_captures() {
    let t = |file: &str| time_l::parse(&load("time", file), STRICT).unwrap().value;
    let old = t("macos-old-10col-verify.txt");
    assert_eq!(old.max_rss_bytes, Some(6_078_464));
    assert_eq!(old.peak_memory_footprint_bytes, None);
    assert_eq!(old.real.as_ref().unwrap().micros, 660_000);
    assert_eq!(old.counter("involuntary context switches"), Some(2221));
    let before = t("macos-render-before.txt");
    assert_eq!(before.max_rss_bytes, Some(5_367_103_488));
    assert_eq!(before.peak_memory_footprint_bytes, Some(81_171_712));
    assert_eq!(before.counter("instructions retired"), Some(1_623_273_994));
    assert_eq!(before.user.as_ref().unwrap().raw, "128.61");
    assert_eq!(
        t("macos-render-after-basic.txt").peak_memory_footprint_bytes,
        Some(81_663_136)
    );
    let tern = t("macos-arm64-ternary-infer.txt");
    assert_eq!(
        (tern.max_rss_bytes, tern.peak_memory_footprint_bytes),
        (Some(1_867_776), Some(1_393_000))
    );
    assert_eq!(tern.counters.len(), 17);
}

#[test]
fn ps_captures() {
    let p = |file: &str| ps::parse(&load("ps", file), STRICT).unwrap().value;
    let mac = p("macos-14.1.1-clion-header.txt");
    assert_eq!(
        mac.columns,
        ["PID", "PPID", "STAT", "TIME", "RSS", "VSZ", "COMM"]
    );
    let r = &mac.rows[0];
    assert_eq!(
        (r.pid, r.rss_bytes, r.vsz_bytes),
        (62913, Some(1_504_912 * 1024), Some(419_321_952 * 1024))
    );
    assert_eq!(
        r.command.as_deref(),
        Some("/Applications/CLion.app/Contents/MacOS/clion")
    );
    let cmd = p("linux-procps-pid-rss-vsz-command.txt");
    assert_eq!(cmd.rows.len(), 2);
    assert_eq!(cmd.rows[0].command.as_deref(), Some("sleep 60"));
    assert_eq!(cmd.rows[1].rss_bytes, Some(62_704 * 1024));
    let bare = p("linux-procps-pid-rss-vsz.txt");
    assert_eq!(
        (
            bare.rows[0].pid,
            bare.rows[0].vsz_bytes,
            bare.rows[0].command.clone()
        ),
        (1215, Some(65_908 * 1024), None)
    );
    assert_eq!(
        p("linux-procps-header.txt").rows[0].command.as_deref(),
        Some("sleep")
    );
}

#[test]
fn proc_status_statm_smaps_rollup() {
    let s = proc_files::parse_status(&load("status", "linux-6.18-python3-64mib.txt"), STRICT)
        .unwrap()
        .value;
    assert_eq!((s.name.as_str(), s.threads), ("python3", 1));
    assert_eq!(s.vm_hwm, Some(79_152 * 1024));
    assert_eq!(s.rss_anon, Some(72_420 * 1024));
    assert_eq!(
        s.entries.iter().find(|e| e.name == "VmRSS").unwrap().raw,
        "79152 kB"
    );
    let sleep = proc_files::parse_status(&load("status", "linux-6.18-sleep.txt"), STRICT)
        .unwrap()
        .value;
    assert_eq!(
        (sleep.state.as_str(), sleep.vm_rss),
        ("S (sleeping)", Some(1816 * 1024))
    );
    let cat = proc_files::parse_status(&load("status", "linux-6.18-cat-self.txt"), STRICT)
        .unwrap()
        .value;
    assert_eq!(cat.vm_swap, Some(0));

    let with_pages = ParseOptions {
        page_size: Some(4096),
        ..STRICT
    };
    let m = proc_files::parse_statm(&load("statm", "linux-6.18-python3-64mib.txt"), with_pages)
        .unwrap()
        .value;
    assert_eq!(
        (m.size_pages, m.resident_pages, m.shared_pages),
        (20_526, 19_788, 1_683)
    );
    assert_eq!(m.resident_bytes, Some(19_788 * 4096));
    let m = proc_files::parse_statm(&load("statm", "linux-6.18-sleep.txt"), STRICT)
        .unwrap()
        .value;
    assert_eq!((m.resident_pages, m.resident_bytes), (454, None));
    assert_eq!(
        proc_files::parse_statm(&load("statm", "linux-6.18-cat-self.txt"), STRICT)
            .unwrap()
            .value
            .data_pages,
        123
    );

    let r = proc_files::parse_smaps_rollup(
        &load("smaps_rollup", "linux-6.18-python3-64mib.txt"),
        STRICT,
    )
    .unwrap()
    .value;
    assert_eq!(
        (r.rss, r.pss, r.private_dirty),
        (Some(81_051_648), Some(79_704_064), Some(74_158_080))
    );
    assert!(r.header.ends_with("[rollup]"));
    let r = proc_files::parse_smaps_rollup(&load("smaps_rollup", "linux-6.18-sleep.txt"), STRICT)
        .unwrap()
        .value;
    assert_eq!((r.pss_file, r.anonymous), (Some(267_264), Some(114_688)));
    let r =
        proc_files::parse_smaps_rollup(&load("smaps_rollup", "linux-6.18-cat-self.txt"), STRICT)
            .unwrap()
            .value;
    assert_eq!(r.pss, Some(497_664));
}

#[test]
fn meminfo_vmstat_pressure() {
    let m = |f: &str| {
        proc_files::parse_meminfo(&load("meminfo", f), STRICT)
            .unwrap()
            .value
    };
    let a = m("linux-6.18-a.txt");
    assert_eq!(a.mem_total, 24_683_652 * 1024);
    assert_eq!(a.mem_available, Some(24_163_456 * 1024));
    let held = m("linux-6.18-b-512mib-held.txt");
    assert_eq!(held.anon_pages, Some(540_916 * 1024));
    assert_eq!(m("linux-6.18-c.txt").committed_as, 54_844 * 1024);
    let hp = held
        .entries
        .iter()
        .find(|e| e.name == "HugePages_Total")
        .unwrap();
    assert_eq!((hp.raw.as_str(), hp.bytes), ("0", None));

    let v = |f: &str| {
        proc_files::parse_vmstat(&load("vmstat", f), STRICT)
            .unwrap()
            .value
    };
    let a = v("linux-6.18-a.txt");
    assert_eq!(
        (a.entries.len(), a.nr_free_pages, a.pgfault),
        (192, Some(1_603_751), Some(74_304_461))
    );
    assert_eq!(v("linux-6.18-b-512mib-held.txt").pgmajfault, Some(12_512));
    assert_eq!(v("linux-6.18-c.txt").nr_free_pages, Some(1_534_321));

    let p = |f: &str| {
        proc_files::parse_pressure(&load("pressure", f), STRICT)
            .unwrap()
            .value
    };
    let cpu = p("linux-6.18-cpu.txt").some.unwrap();
    assert_eq!(
        (cpu.avg10.as_str(), cpu.avg300_hundredths, cpu.total_us),
        ("0.66", 415, 107_433_483)
    );
    let io = p("linux-6.18-io.txt").full.unwrap();
    assert_eq!((io.avg60_hundredths, io.total_us), (34, 10_010_344));
    assert_eq!(p("linux-6.18-memory.txt").full.unwrap().total_us, 0);
}

#[test]
fn cgroup_v2_files() {
    let s = |f: &str| {
        cgroup::parse_memory_stat(&load("memory.stat", f), STRICT)
            .unwrap()
            .value
    };
    let nixos = s("linux-nixos-root-cgroup.txt");
    assert_eq!(
        (nixos.anon, nixos.file, nixos.entries.len()),
        (Some(2_049_646_592), Some(9_518_583_808), 65)
    );
    let runc = s("runc-fs2-test-no-final-newline.txt");
    assert_eq!(
        (runc.kernel, runc.anon, runc.pgmajfault),
        (None, Some(790_425_600), Some(6879))
    );
    assert_eq!(
        s("velox-linux-memory-checker-v2.txt").inactive_anon,
        Some(274_713_391_104)
    );

    let e = |f: &str| {
        cgroup::parse_memory_events(&load("memory.events", f), STRICT)
            .unwrap()
            .value
    };
    let old = e("linux-fork-bomb-child-5-keys.txt");
    assert_eq!(
        (old.max, old.oom_kill, old.oom_group_kill),
        (Some(24), Some(1), None)
    );
    let pg = e("linux-docker-postgres-after-recovery.txt");
    assert_eq!(
        (pg.max, pg.oom, pg.oom_group_kill),
        (Some(13_693), Some(0), Some(0))
    );
    let vps = e("linux-vps-systemd-255-oom.txt");
    assert_eq!(
        (vps.high, vps.max, vps.oom, vps.oom_kill, vps.oom_group_kill),
        (Some(0), Some(37), Some(1), Some(1), Some(0))
    );
    let run = e("linux-systemd-run-512mib-oom.txt");
    assert_eq!(
        (run.max, run.oom_kill, run.entries.len()),
        (Some(35), Some(1), 6)
    );

    let peak = cgroup::parse_memory_peak(
        &load("memory.peak", "linux-systemd-run-512mib-oom.txt"),
        STRICT,
    )
    .unwrap()
    .value;
    assert_eq!(peak.bytes, 536_870_912);
    let peak = |f: &str| {
        cgroup::parse_memory_peak(&load("memory.peak", f), STRICT)
            .unwrap()
            .value
            .bytes
    };
    assert_eq!(peak("linux-vps-systemd-255-oom.txt"), 173_756_416);
    // The 50M limit exactly: the peak never passes memory.max.
    assert_eq!(peak("linux-stress-ng-oomable.txt"), 50 << 20);
}

#[test]
fn every_capture_parses_strictly_and_round_trips() {
    let mut n = 0;
    for tool in Tool::ALL {
        for f in std::fs::read_dir(dir(tool.name())).unwrap() {
            let path = f.unwrap().path();
            if path.extension().is_none_or(|e| e != "txt") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let p =
                parse(tool, &text, STRICT).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(p.skipped.is_empty());
            let json = serde_json::to_string(&p).unwrap();
            let back: sampler::captures::Parsed<Capture> = serde_json::from_str(&json).unwrap();
            assert_eq!(back, p, "{}", path.display());
            n += 1;
        }
    }
    assert_eq!(n, 63);
}
