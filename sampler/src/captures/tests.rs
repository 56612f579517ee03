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
    assert_eq!(
        (
            s.categories.len(),
            s.total.unwrap().regions,
            s.auxiliary[0].size.bytes
        ),
        (1, 3, 64 * 1024)
    );
    assert!(f.processes[0].categories.is_empty());
}
