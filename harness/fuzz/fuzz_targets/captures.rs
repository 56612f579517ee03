//! Every capture parser in `sampler::captures` on arbitrary text. The first
//! byte picks the parser (the 15 tools `memqual import` knows, then
//! vm_stat's snapshot and interval forms); the rest is the capture. Each is
//! run strict (valid UTF-8 only, as `import` does) and lenient (lossy
//! UTF-8), and a parsed capture goes through `import`'s human summary and
//! its JSON, as `memqual import` prints them.
//!
//! A `CaptureError` is a correct answer; a panic or a hang is a finding.

#![no_main]

use harness::import::{ImportReport, human};
use libfuzzer_sys::fuzz_target;
use sampler::captures::{self, ParseOptions, Tool, vm_stat};

fn options() -> [ParseOptions; 3] {
    [
        ParseOptions::strict(),
        ParseOptions::lenient(),
        // statm counts pages; any page size memqual accepts.
        ParseOptions {
            lenient: false,
            page_size: Some(16384),
        },
    ]
}

fn parse_tool(tool: Tool, text: &str, opts: ParseOptions) {
    if let Ok(parsed) = captures::parse(tool, text, opts) {
        let report = ImportReport {
            file: "fuzz.txt".into(),
            parsed,
        };
        let _ = human(&report);
        let _ = serde_json::to_string(&report);
    }
}

fn parse_vm_stat(which: usize, text: &str, opts: ParseOptions) {
    if which == 0 {
        let _ = vm_stat::parse_snapshot(text, opts);
    } else {
        let _ = vm_stat::parse_interval(text, opts);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let choices = Tool::ALL.len() + 2;
    let choice = usize::from(selector) % choices;
    let strict = std::str::from_utf8(rest).ok();
    let lossy = String::from_utf8_lossy(rest);
    for opts in options() {
        let text: &str = if opts.lenient {
            &lossy
        } else {
            match strict {
                Some(t) => t,
                None => continue,
            }
        };
        match Tool::ALL.get(choice) {
            Some(&tool) => parse_tool(tool, text, opts),
            None => parse_vm_stat(choice - Tool::ALL.len(), text, opts),
        }
    }
});
