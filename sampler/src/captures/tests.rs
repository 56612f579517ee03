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
