//! What a worker writes on fd 3, one JSON object per line. Each line goes
//! through `worker_contract::decode_line` (and a decoded message must
//! survive the harness's own re-encoding: the harness writes markers and
//! results back out as JSON, and reports decode them again). Then the whole
//! input goes through the harness's message reader (`ChannelReader`, the
//! per-line checks against the contract and the appends to the arm's
//! files) over a real pipe into a fresh run directory, with no worker
//! spawned.
//!
//! A decode error or a contract violation is a correct answer; a panic, a
//! hang or unbounded memory is a finding.

#![no_main]

#[path = "scratch.rs"]
mod scratch;
use arm_runner::reader::ChannelReader;
use libfuzzer_sys::fuzz_target;
use run_dir::RunDir;
use scratch::scratch;
use std::io::Write;
use worker_contract::decode_line;

fn decode_each_line(data: &[u8]) {
    for raw in data.split(|&b| b == b'\n') {
        // As the reader does: lossy UTF-8, line ending trimmed.
        let text = String::from_utf8_lossy(raw);
        let line = text.trim_end_matches(['\n', '\r']);
        let Ok(msg) = decode_line(line) else {
            continue;
        };
        let again = serde_json::to_string(&msg)
            .unwrap_or_else(|e| panic!("a decoded message must encode: {e}: {msg:?}"));
        match decode_line(&again) {
            Ok(back) => assert_eq!(back, msg, "re-encoded as {again}"),
            Err(e) => panic!("the harness's own encoding does not decode: {e}: {again}"),
        }
    }
}

fn read_as_channel(data: &[u8]) {
    let tmp = scratch();
    let run = RunDir::create(&tmp.path().join("run"))
        .unwrap_or_else(|e| panic!("cannot create the run directory: {e}"));
    let dir = run.arm("a").unwrap_or_else(|e| panic!("arm id `a`: {e}"));
    run.create_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot create the arm folder: {e}"));
    let (pipe_out, mut pipe_in) =
        std::io::pipe().unwrap_or_else(|e| panic!("cannot make a pipe: {e}"));
    let (events, _heard) = std::sync::mpsc::channel();
    let reader = ChannelReader::start(pipe_out, &run, &dir, events);
    // The reader drains the pipe on its own thread; a closed pipe is its end.
    let _ = pipe_in.write_all(data);
    drop(pipe_in);
    let report = reader.join();
    assert!(
        report.harness_errors.is_empty(),
        "the reader could not write the arm's files: {:?}",
        report.harness_errors
    );
}

fuzz_target!(|data: &[u8]| {
    decode_each_line(data);
    read_as_channel(data);
});
