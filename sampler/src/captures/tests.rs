use super::*;

#[test]
fn sizes_scale_exactly_and_keep_the_token() {
    let s = |t| Size::parse_suffixed(t, SizeUnits::Binary).map(|s| s.bytes);
    assert_eq!(s("824"), Some(824));
    assert_eq!(s("8192K"), Some(8192 * 1024));
    // 100.3 MiB = 105_172_172.8 bytes, rounded to the nearest byte.
    assert_eq!(s("100.3M"), Some(105_172_173));
    assert_eq!(s("1.4T"), Some(1_539_316_278_886));
    assert_eq!(s("0K"), Some(0));
    for bad in [
        "",
        "M",
        "1.M",
        ".5M",
        "1..2K",
        "12Q",
        "-1K",
        "1 K",
        "99999999999999999999999K",
    ] {
        assert_eq!(s(bad), None, "{bad:?}");
    }
    let dec = Size::parse_suffixed("5919477K", SizeUnits::Decimal).unwrap();
    assert_eq!((dec.bytes, dec.raw.as_str()), (5_919_477_000, "5919477K"));
    let fp = Size::parse_number_unit("832", "KB").unwrap();
    assert_eq!((fp.bytes, fp.raw.as_str()), (851_968, "832 KB"));
    assert_eq!(Size::parse_number_unit("1", "kB"), None);
}

#[test]
fn strict_names_the_line_and_lenient_lists_it() {
    let text = "Mach Virtual Memory Statistics: (page size of 4096 bytes)\nPages free: 1.\ngarbage\nPages active: 2.\n";
    let err = vm_stat::parse_snapshot(text, ParseOptions::strict()).unwrap_err();
    assert_eq!(
        err,
        CaptureError::Line {
            line: 3,
            text: "garbage".into(),
            reason: "expected 'label: N.'".into()
        }
    );
    let ok = vm_stat::parse_snapshot(text, ParseOptions::lenient()).unwrap();
    assert_eq!(ok.skipped.len(), 1);
    assert_eq!(
        (ok.skipped[0].line, ok.skipped[0].text.as_str()),
        (3, "garbage")
    );
    assert_eq!(ok.value.bytes.active, Some(8192));
}

#[test]
fn tool_names_round_trip() {
    for t in Tool::ALL {
        assert_eq!(t.name().parse::<Tool>(), Ok(t));
    }
    assert_eq!("/proc/meminfo".parse::<Tool>(), Ok(Tool::Meminfo));
    assert!(
        "top"
            .parse::<Tool>()
            .unwrap_err()
            .to_string()
            .contains("vm_stat")
    );
}

#[test]
fn a_footprint_summary_must_close_the_processes_and_carry_a_size() {
    let process = "sleep [1]: 64-bit    Footprint: 832 KB (16384 bytes per page)\n";
    let err = |text: &str| match footprint::parse(text, ParseOptions::lenient()) {
        Err(CaptureError::Line { line, reason, .. }) => (line, reason),
        other => panic!("{other:?}"),
    };
    let order = "'Summary Footprint:' must follow the processes, once".to_string();
    assert_eq!(err("Summary Footprint: 1 MB\n"), (1, order.clone()));
    let twice = format!("{process}Summary Footprint: 1 MB\nSummary Footprint: 1 MB\n");
    assert_eq!(err(&twice), (3, order));
    let after = format!("{process}Summary Footprint: 1 MB\n{process}");
    assert_eq!(
        err(&after),
        (3, "a process after 'Summary Footprint:'".to_string())
    );
    let garbled = format!("{process}Summary Footprint: 1 MiB\n");
    assert_eq!(
        err(&garbled),
        (2, "expected 'Summary Footprint: N UNIT'".to_string())
    );
    // A summary table and its auxiliary data belong to the summary.
    let table = format!(
        "{process}Summary Footprint: 48 KB\n  Dirty      Clean  Reclaimable    Regions    Category\n    ---        ---          ---        ---    ---\n  48 KB        0 B          0 B          3    stack\n    ---        ---          ---        ---    ---\n  48 KB        0 B          0 B          3    TOTAL\n\nAuxiliary data:\n    phys_footprint: 64 KB\n"
    );
    let f = footprint::parse(&table, ParseOptions::strict())
        .unwrap()
        .value;
    let s = f.summary.unwrap();
    let table = s.table.unwrap();
    assert_eq!(
        (
            table.rows.len(),
            table.total.unwrap().regions,
            s.auxiliary[0].size.bytes
        ),
        (1, 3, 64 * 1024)
    );
    assert!(f.processes[0].table.is_none());
}

fn line_error(r: Result<impl std::fmt::Debug, CaptureError>) -> (usize, String) {
    match r {
        Err(CaptureError::Line { line, reason, .. }) => (line, reason),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_blank_vmmap_cell_is_none_only_under_a_percentage() {
    // Constructed from the layout of the 10.10 capture's tables.
    let table = "REGION TYPE                      VIRTUAL RESIDENT\n===========                      ======= ========\n__TEXT                             74.5M\n";
    let (line, reason) = line_error(vmmap::parse(table, ParseOptions::strict()));
    assert_eq!(
        (line, reason.as_str()),
        (3, "no value under column \"RESIDENT\"")
    );
    let shifted = table.replace("74.5M\n", "74.5M   40.9M\n");
    let (line, reason) = line_error(vmmap::parse(&shifted, ParseOptions::strict()));
    assert_eq!(line, 3);
    assert_eq!(
        reason,
        "the value under column \"RESIDENT\" ends at byte 48, before the column's edge at byte 49"
    );
    let overlong = table.replace("74.5M\n", "74.5M    40.9MB\n");
    let (_, reason) = line_error(vmmap::parse(&overlong, ParseOptions::strict()));
    assert_eq!(
        reason,
        "the value under column \"RESIDENT\" does not end at the column's edge (byte 49)"
    );
    let bad = table.replace("74.5M\n", "74.5M    40.9Q\n");
    let (_, reason) = line_error(vmmap::parse(&bad, ParseOptions::strict()));
    assert!(
        reason.starts_with("\"40.9Q\" under column \"RESIDENT\" is not a size"),
        "{reason}"
    );
    let zones = "                                 VIRTUAL ALLOCATION      BYTES\nMALLOC ZONE                         SIZE      COUNT  ALLOCATED  % FULL\n===========                      =======  =========  =========  ======\nGFXMallocZone_0x10c554000             0K          0         0K\n";
    let z = vmmap::parse(zones, ParseOptions::strict())
        .unwrap()
        .value
        .malloc_zones
        .unwrap();
    assert_eq!(z.rows[0].cells[3], None);
    assert_eq!(z.rows[0].cells[1].as_ref().map(|c| c.value), Some(0));
    // A row with no name before its values.
    let nameless = table.replace(
        "__TEXT                             74.5M\n",
        "                                   74.5M    40.9M\n",
    );
    let (_, reason) = line_error(vmmap::parse(&nameless, ParseOptions::strict()));
    assert_eq!(reason, "a row without a name before its first value");
}

/// The header and rows of `footprint -p 1581 --swapped --wired` as quoted in
/// a report whose author cut the middle rows and the rules (index id
/// 69173928752); the `---` rules are put back here.
const SWAPPED_WIRED: &str = "Python [1581]: 64-bit    Footprint: 5154 MB (16384 bytes per page)
  Dirty  (Swapped)      Clean  Reclaimable    (Wired)    Regions    Category
    ---        ---        ---          ---        ---        ---    ---
4879 MB    4879 MB        0 B          0 B        0 B       1144    IOAccelerator (graphics)
  91 MB      89 MB        0 B          0 B        0 B         72    MALLOC_SMALL
    ---        ---        ---          ---        ---        ---    ---
5154 MB    5141 MB    4272 KB          0 B        0 B       4275    TOTAL
";

#[test]
fn footprint_swapped_and_wired_columns() {
    let f = footprint::parse(SWAPPED_WIRED, ParseOptions::strict())
        .unwrap()
        .value;
    let t = f.processes[0].table.as_ref().unwrap();
    assert_eq!(
        t.columns,
        [
            "Dirty",
            "(Swapped)",
            "Clean",
            "Reclaimable",
            "(Wired)",
            "Regions",
            "Category"
        ]
    );
    let gpu = t.row("IOAccelerator (graphics)").unwrap();
    assert_eq!(
        (
            gpu.dirty.bytes,
            gpu.swapped.as_ref().map(|s| s.bytes),
            gpu.regions
        ),
        (4879 << 20, Some(4879 << 20), 1144)
    );
    assert_eq!(gpu.wired.as_ref().map(|s| s.bytes), Some(0));
    let total = t.total.as_ref().unwrap();
    assert_eq!(
        (total.swapped.as_ref().map(|s| s.bytes), total.clean.bytes),
        (Some(5141 << 20), 4272 << 10)
    );
    // The columns are read from the header: drop (Wired) from it and the
    // rows no longer fit.
    let no_wired = SWAPPED_WIRED.replacen("    (Wired)", "", 1);
    let (line, reason) = line_error(footprint::parse(&no_wired, ParseOptions::strict()));
    assert_eq!(line, 4);
    assert_eq!(
        reason,
        "more values than the header's 6 columns (category would start with \"B\")"
    );
}

/// Constructed in the layout the real captures show (the `Shared with` lines
/// as in the UnrealEditor and WebKit excerpts, the tables as in single-process
/// captures).
const SHARED: &str = "======================================================================
a [1]: 64-bit    Footprint: 100 KB (16384 bytes per page)
======================================================================

  Dirty      Clean  Reclaimable    Regions    Category
    ---        ---          ---        ---    ---
  64 KB        0 B          0 B          2    MALLOC_SMALL
    ---        ---          ---        ---    ---
  64 KB        0 B          0 B          2    TOTAL

Shared with b [2]:
  Dirty      Clean  Reclaimable    Regions    Category
    ---        ---          ---        ---    ---
  16 KB        0 B          0 B          1    shared memory
    ---        ---          ---        ---    ---
  16 KB        0 B          0 B          1    TOTAL

Auxiliary data:
    phys_footprint: 100 KB

======================================================================
b [2]: 64-bit    Footprint: 32 KB (16384 bytes per page)
======================================================================

Shared with a [1]:

======================================================================
Shared with c d [3], a [1]:
======================================================================
  Dirty      Clean  Reclaimable    Regions    Category
    ---        ---          ---        ---    ---
   8 KB        0 B          0 B          1    IOSurface
    ---        ---          ---        ---    ---
   8 KB        0 B          0 B          1    TOTAL

======================================================================
Summary Footprint: 116 KB
======================================================================
";

#[test]
fn footprint_shared_blocks_belong_to_a_process_or_the_group() {
    let f = footprint::parse(SHARED, ParseOptions::strict())
        .unwrap()
        .value;
    let a = &f.processes[0];
    assert_eq!(a.table.as_ref().unwrap().rows.len(), 1);
    let with_b = &a.shared[0];
    assert_eq!((with_b.with[0].pid, with_b.line), (2, 11));
    let t = with_b.table.as_ref().unwrap();
    assert_eq!(
        (
            t.rows[0].category.as_str(),
            t.total.as_ref().unwrap().dirty.bytes
        ),
        ("shared memory", 16 << 10)
    );
    // Auxiliary data after a shared block is the process's own.
    assert_eq!(a.phys_footprint(), Some(100 << 10));
    let b = &f.processes[1];
    assert_eq!((b.shared.len(), b.shared[0].with[0].pid), (1, 1));
    assert!(b.shared[0].table.is_none());
    // Opened by a rule and not naming b: the group's block, not b's.
    let group = &f.shared[0];
    let names: Vec<&str> = group.with.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["c d", "a"]);
    assert_eq!(group.table.as_ref().unwrap().rows[0].category, "IOSurface");
    assert_eq!(f.summary.unwrap().footprint.bytes, 116 << 10);
}

#[test]
fn footprint_errors_name_the_line_and_why() {
    let strict = |text: &str| line_error(footprint::parse(text, ParseOptions::strict()));
    let unknown = SHARED.replacen(
        "Reclaimable    Regions",
        "Reclaimable    (Purgeable)    Regions",
        1,
    );
    let (line, reason) = strict(&unknown);
    assert_eq!(line, 5);
    assert!(
        reason.starts_with("unknown column \"(Purgeable)\""),
        "{reason}"
    );
    let no_clean = SHARED.replacen("  Dirty      Clean  Reclaimable", "  Dirty  Reclaimable", 1);
    assert_eq!(
        strict(&no_clean),
        (
            5,
            "the category table header has no Clean column".to_string()
        )
    );
    let no_rule = SHARED.replacen(
        "    ---        ---          ---        ---    ---\n  64 KB",
        "  64 KB",
        1,
    );
    assert_eq!(
        strict(&no_rule),
        (
            6,
            "a category row before the --- rule under the header".to_string()
        )
    );
    let not_total = SHARED.replacen("2    TOTAL", "2    ALL", 1);
    assert_eq!(
        strict(&not_total),
        (
            9,
            "expected the TOTAL row under the closing --- rule".to_string()
        )
    );
    let bad_pid = SHARED.replacen("Shared with b [2]:", "Shared with b [two]:", 1);
    let (line, reason) = strict(&bad_pid);
    assert_eq!(line, 11);
    assert!(reason.contains("\"two\" is not a pid"), "{reason}");
    let bad_size = SHARED.replacen("  16 KB        0 B", "  16 KiB       0 B", 1);
    let (line, reason) = strict(&bad_size);
    assert_eq!(line, 14);
    assert!(
        reason.starts_with("\"16\" \"KiB\" under Dirty is not a size"),
        "{reason}"
    );
    // Lenient: the line is listed and the rest still read.
    let ok = footprint::parse(&bad_size, ParseOptions::lenient()).unwrap();
    assert_eq!(ok.skipped.len(), 1);
    assert_eq!(
        ok.value.processes[0].shared[0]
            .table
            .as_ref()
            .unwrap()
            .rows
            .len(),
        0
    );
    assert_eq!(ok.value.processes.len(), 2);
}

#[test]
fn an_error_shows_a_long_line_cut() {
    let long = format!(
        "REGION TYPE   VIRTUAL\n===========   =======\n{}    1K\n",
        "é".repeat(5000)
    );
    let err = vmmap::parse(&long, ParseOptions::strict()).unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("\"{}…\"", "é".repeat(200))),
        "{shown}"
    );
    assert!(shown.len() < 600, "{}", shown.len());
    // The error value keeps the whole line.
    assert!(matches!(err, CaptureError::Line { ref text, .. } if text.chars().count() == 5006));
}
