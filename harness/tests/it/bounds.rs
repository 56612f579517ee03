//! Bounds on every number (issue 13, findings 7 and 8): the real `memqual`
//! binary on the inputs that used to panic, wrap or grow until killed. Each
//! must now exit 2 with a message naming file:line:col (or the flag) and the
//! allowed range, before anything is created.

use crate::common::*;

/// `memqual run` on `body` (after `schema_version` and `name`); checks that
/// it exits 2 without creating the run directory and returns stderr.
fn refused(body: &str) -> (ProtocolRun, String) {
    let r = run_protocol_body("run", body, &[]);
    let err = stderr(&r.out);
    assert_eq!(r.out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!r.dir.exists(), "nothing may be created: {err}");
    (r, err)
}

/// The first line of stderr, which must be the whole error.
fn first_line(err: &str) -> &str {
    err.lines().next().unwrap_or("")
}

#[test]
fn a_huge_timeout_is_refused_at_load_not_a_panic_after_the_worker_started() {
    let (r, err) = refused(
        "\n[[arm]]\nid = \"a\"\ntimeout_s = 10000000000000000000\n[arm.calibrate]\nplateau = { mib = 8 }\n",
    );
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {}:6:13: arm `a`: timeout_s = 10000000000000000000 is out of range: \
             allowed 1..=604800 (seconds, at most 7 days)",
            r.protocol.display()
        )
    );
    // The finding's spelling: a float is not a number of seconds at all.
    let (r, err) = refused("\n[[arm]]\nid = \"a\"\ntimeout_s = 1e19\n[arm.calibrate]\n");
    assert!(
        err.contains(&format!(
            "{}:6:13: invalid type: floating point",
            r.protocol.display()
        )),
        "{err}"
    );
}

#[test]
fn a_plateau_of_16_eib_is_refused_instead_of_wrapping_to_one_byte() {
    let (r, err) =
        refused("\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nplateau = { mib = 17592186044416 }\n");
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {}:7:19: arm `a`: calibrate.plateau.mib = 17592186044416 is out of \
             range: allowed 0..=1048576 (MiB, at most 1 TiB)",
            r.protocol.display()
        )
    );
}

#[test]
fn patterns_larger_than_this_hosts_ram_are_refused() {
    // 1 TiB of leak over 2 requests: within every per-key bound, beyond any CI host.
    let (_, err) = refused(
        "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nrequests = 2\nleak = { mib_per_request = 1048576.0 }\n",
    );
    assert!(err.contains(":6:1: arm `a`: calibrate: the patterns would hold 2097152 MiB at their peak, more than this host's physical memory"), "{err}");
}

#[test]
fn extra_states_100000_is_refused_with_the_reason() {
    let (r, err) = refused(
        "\n[[arm]]\nid = \"w\"\n[arm.whisper]\nmodel = \"tiny.en\"\nfixtures = [\"all\"]\nextra_states = 100000\n",
    );
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {}:9:16: arm `w`: whisper: extra_states = 100000 is out of range: \
             allowed 0..=16 (each state costs its own kv caches and compute buffers)",
            r.protocol.display()
        )
    );
}

#[test]
fn a_params_table_that_doubles_40_times_fails_at_once() {
    let mut params = String::from("\n[params]\np00 = \"xx\"\n");
    for i in 1..=40 {
        params.push_str(&format!(
            "p{i:02} = \"${{p{:02}}}${{p{:02}}}\"\n",
            i - 1,
            i - 1
        ));
    }
    let body = format!(
        "{params}\n[[arm]]\nid = \"w\"\n[arm.whisper]\nmodel = \"${{p40}}/x.bin\"\nfixtures = [\"all\"]\n"
    );
    let (r, err) = refused(&body);
    let p = r.protocol.display();
    assert_eq!(
        first_line(&err),
        format!("memqual: error: {p}:17:1: param `p12` ({p}:17:1) expands to more than 4096 bytes")
    );
}

#[test]
fn parameter_cycles_used_in_a_model_path_never_reach_the_worker() {
    let arm =
        "\n[[arm]]\nid = \"w\"\n[arm.whisper]\nmodel = \"${m}/x.bin\"\nfixtures = [\"all\"]\n";
    let (r, err) = refused(&format!("\n[params]\nm = \"${{m}}\"\n{arm}"));
    let p = r.protocol.display();
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {p}:5:1: param `m` ({p}:5:1) refers to itself: `${{m}}` can never be expanded"
        )
    );
    let (r, err) = refused(&format!(
        "\n[params]\nm = \"${{n}}\"\nn = \"${{m}}/y\"\n{arm}"
    ));
    let p = r.protocol.display();
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {p}:5:1: params refer to each other in a cycle: `m` ({p}:5:1) → `n` ({p}:6:1) → `m`"
        )
    );
    // A `${` that survives expansion is an error, not a literal path.
    let (r, err) = refused(&format!("\n[params]\nd = \"$\"\n{arm}").replace("${m}", "${d}{m}"));
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {}:10:9: arm `w`: whisper: model expands to \"${{m}}/x.bin\", which \
             still holds `${{`: parameters are expanded once",
            r.protocol.display()
        )
    );
}

#[test]
fn shm_file_dir_is_refused_so_nothing_is_written_outside_the_run() {
    let (r, err) = refused(
        "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nshm_file = { kib_per_request = 4, dir = \"/tmp\" }\n",
    );
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {}:7:41: arm `a`: calibrate.shm_file.dir = \"/tmp\" is no longer \
             accepted: the pattern's shared memory has no path (memfd), so nothing is written \
             outside the run directory; remove the key",
            r.protocol.display()
        )
    );
}

#[test]
fn the_shm_pattern_runs_without_a_path_and_leaves_no_file_behind() {
    let before = shm_entries();
    let r = run_protocol_body(
        "run",
        "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nrequests = 4\nrequest_ms = 5\nshm_file = { kib_per_request = 1024 }\n",
        &[],
    );
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let spec = std::fs::read_to_string(r.dir.join("arms/a/spec.json")).unwrap();
    assert!(!spec.contains("\"dir\""), "{spec}");
    let new: Vec<String> = shm_entries()
        .into_iter()
        .filter(|e| !before.contains(e) && e.starts_with("memqual-calibrate"))
        .collect();
    assert!(new.is_empty(), "files left in /dev/shm: {new:?}");
}

fn shm_entries() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// `memqual ARGS` that must be refused by the argument parser: exit 2, a
/// message naming the flag and the range, no panic, nothing created.
fn flag_refused(args: &[&str], flag: &str, range: &str) {
    let out = memqual(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(err.contains(flag), "{args:?}: {err}");
    assert!(err.contains(range), "{args:?}: {err}");
}

#[test]
fn soak_lengths_out_of_range_are_refused_by_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let protocol = write_protocol(
        tmp.path(),
        "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nplateau = { mib = 8 }\n",
    );
    let (p, out) = (
        protocol.to_str().unwrap(),
        tmp.path().join("run").display().to_string(),
    );
    for duration in [
        "18446744073709551615s",
        "18446744073709551616s",
        "169h",
        "99999999999h",
    ] {
        flag_refused(
            &[
                "soak",
                p,
                "--duration",
                duration,
                "--out",
                &out,
                "--no-history",
            ],
            "--duration",
            "allowed 1..=604800 (at most 7 days (168h))",
        );
    }
    for requests in ["0", "10000001", "18446744073709551615", "-1"] {
        let flag = format!("--requests={requests}");
        flag_refused(
            &["soak", p, &flag, "--out", &out, "--no-history"],
            "--requests",
            "1..=10000000",
        );
    }
    for cycles in ["0", "1000001", "18446744073709551616"] {
        let flag = format!("--cycles={cycles}");
        flag_refused(
            &["soak", p, &flag, "--out", &out, "--no-history"],
            "--cycles",
            "allowed 1..=1000000",
        );
    }
    assert!(!tmp.path().join("run").exists());
}

#[test]
fn other_numeric_flags_name_their_range() {
    let tmp = tempfile::tempdir().unwrap();
    let capture = tmp.path().join("statm");
    std::fs::write(&capture, "1 2 3 4 0 5 0\n").unwrap();
    let c = capture.to_str().unwrap();
    flag_refused(
        &["import", "statm", c, "--page-size", "4097"],
        "--page-size",
        "power of two",
    );
    flag_refused(
        &["import", "statm", c, "--page-size", "18446744073709551615"],
        "--page-size",
        "allowed 1024..=1073741824",
    );
    for (flag, value, range) in [
        ("--beams", "100", "allowed 1..=8"),
        ("--audio-ctx", "18446744073709551615", "allowed 1..=1500"),
        ("--text-ctx", "0", "allowed 1..=448"),
    ] {
        flag_refused(&["artifact", "estimate", c, flag, value], flag, range);
    }
}

#[test]
fn real_time_keys_are_bounded_and_located() {
    let arm = "\n[[arm]]\nid = \"a\"\n[arm.whisper]\nmodel = \"tiny.en\"\nfixtures = [\"s3\"]\n";
    for (line, at, message) in [
        (
            "request_mode = \"realtime\"\nchunk_ms = 5",
            "10:12",
            "chunk_ms = 5 is out of range: allowed 10..=1000 (milliseconds per chunk)",
        ),
        (
            "gaps_s = [2.0, 3600.5]",
            "9:16",
            "gaps_s[1] = 3600.5 is out of range: allowed a finite number in [0, 3600] (seconds, at most 1 hour)",
        ),
        (
            "idle_policy = \"unload_after_idle\"\nunload_after_idle_s = nan",
            "10:23",
            "unload_after_idle_s = NaN is out of range: allowed a finite number in [0, 3600] (seconds, at most 1 hour)",
        ),
    ] {
        let (r, err) = refused(&format!("{arm}{line}\n"));
        assert_eq!(
            first_line(&err),
            format!(
                "memqual: error: {}:{at}: arm `a`: whisper: {message}",
                r.protocol.display()
            )
        );
    }
}

#[test]
fn a_lifecycle_soak_of_zero_cycles_is_refused_at_load_naming_the_key() {
    let arm = "\n[[arm]]\nid = \"a\"\n[arm.calibrate]\nplateau = { mib = 8 }\n";
    let (r, err) = refused(&format!("{arm}[soak]\nmode = \"lifecycle\"\ncycles = 0\n"));
    assert_eq!(
        first_line(&err),
        format!(
            "memqual: error: {}:10:10: soak.cycles = 0 is out of range: allowed 1..=1000000 \
             (load → requests → teardown cycles)",
            r.protocol.display()
        )
    );
    // Without cycles, the key is named all the same.
    let (_, err) = refused(&format!("{arm}[soak]\nmode = \"lifecycle\"\n"));
    assert!(
        first_line(&err).contains("soak.cycles is missing: mode = \"lifecycle\" needs it"),
        "{err}"
    );
}
