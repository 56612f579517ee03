//! The HTML report in a real browser: headless Chromium (Debian package
//! `chromium`) loads `report.html` offline at 1400×900, the console must
//! stay free of errors, and the comparison section must be on the first
//! screen. Ignored unless asked for (`-- --ignored`): it needs Chromium.
//!
//! Layout is measured by loading a copy of the page with a small script
//! appended (the report itself has none) and reading what it wrote back
//! from `--dump-dom`. Screenshots of the quickstart-shaped report and of a
//! 3-arm matrix report are kept as test artifacts in
//! `target/tmp/browser-screenshots/` (`CARGO_TARGET_TMPDIR`).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const WIDTH: u32 = 1400;
const HEIGHT: u32 = 900;

/// Chromium under one of its usual names; failing, the test names the package.
fn chromium() -> PathBuf {
    for name in ["chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("which").arg(name).output()
            && out.status.success()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !path.is_empty() {
                return PathBuf::from(path);
            }
        }
    }
    system_tool("chromium", "chromium")
}

/// Where the screenshots are kept after the test.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Chromium headless with a fresh profile, offline, 1400×900.
fn headless(browser: &Path, profile: &Path) -> Command {
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        &format!("--window-size={WIDTH},{HEIGHT}"),
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    cmd
}

fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("ERROR") || l.contains("Uncaught")))
        .collect()
}

/// Screenshot `page` (its first screen) to `png`; check it is a 1400×900
/// PNG with more than a blank page in it.
fn screenshot(browser: &Path, profile: &Path, page: &Path, png: &Path) {
    let out = headless(browser, profile)
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    assert_eq!(console_errors(&log), Vec::<&str>::new());
    let bytes = std::fs::read(png).expect("a screenshot was written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let dim = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    assert_eq!((dim(16), dim(20)), (WIDTH, HEIGHT), "IHDR width × height");
    // A blank 1400×900 page compresses to a few KB; tables, text and the
    // charts take far more.
    assert!(
        bytes.len() > 40_000,
        "{} looks blank ({} bytes)",
        png.display(),
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());
}

/// Appended to a copy of the page: what the first screen holds.
const MEASURE: &str = r##"<script>
(function () {
  function box(el) {
    if (!el) return null;
    var r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, width: r.width, height: r.height};
  }
  var q = function (s) { return document.querySelector(s); };
  var out = {
    vw: window.innerWidth, vh: window.innerHeight,
    comparison: box(q('#comparison')),
    headlines: box(q('#comparison ul.headlines')),
    matrix: box(q('#matrix')),
    matrix_rows: document.querySelectorAll('#matrix tr').length - 1,
    memory_gates: document.querySelectorAll('#comparison figure.gate[data-gate="memory"]').length,
    gate: box(q('#comparison figure.gate[data-gate="memory"] svg')),
    thresholds: document.querySelectorAll('#comparison figure.gate[data-gate="memory"] svg [stroke="#C80000"]').length,
    charts: Array.prototype.map.call(document.querySelectorAll('#comparison svg'), function (s) {
      var b = box(s); return [b.width, b.height];
    }),
    verdict: box(q('#verdict')),
    checks: box(q('#checks'))
  };
  var pre = document.createElement('pre');
  pre.id = 'measured';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"##;

/// Load a measuring copy of `page` and return what the script measured.
fn measure(browser: &Path, profile: &Path, page: &Path) -> serde_json::Value {
    let html = std::fs::read_to_string(page).unwrap();
    assert!(!html.contains("<script"), "the report itself has no script");
    let probe = page.with_file_name("measure.html");
    std::fs::write(
        &probe,
        html.replace("</body>", &format!("{MEASURE}</body>")),
    )
    .unwrap();
    let out = headless(browser, profile)
        .arg("--dump-dom")
        .arg(format!("file://{}", probe.display()))
        .output()
        .expect("chromium runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    assert_eq!(console_errors(&log), Vec::<&str>::new());
    let dom = String::from_utf8_lossy(&out.stdout);
    let start = dom.find("<pre id=\"measured\">").expect("the script ran") + 19;
    let end = start + dom[start..].find("</pre>").unwrap();
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

fn f(v: &serde_json::Value, path: &str) -> f64 {
    v.pointer(path)
        .and_then(|x| x.as_f64())
        .unwrap_or_else(|| panic!("{path} missing in {v}"))
}

/// The first screen shows the comparison: its top, the failing gates'
/// sentences and the first memory gate's picture with its limit, whole.
fn assert_first_screen(m: &serde_json::Value, what: &str) {
    // `--dump-dom` lays the page out 1400 px wide (its height there is the
    // window's less the browser's own bars, which the layout does not
    // depend on): the first screen is the top 900 px, as the screenshot is.
    assert_eq!(f(m, "/vw"), WIDTH as f64, "{what}: viewport width");
    let vh = HEIGHT as f64;
    assert!(
        f(m, "/verdict/bottom") <= f(m, "/comparison/top"),
        "{what}: verdict first"
    );
    assert!(
        f(m, "/comparison/top") < vh,
        "{what}: the comparison starts on the first screen: {m}"
    );
    assert!(
        f(m, "/headlines/bottom") <= vh,
        "{what}: the failing gates are on the first screen: {m}"
    );
    assert!(
        f(m, "/gate/top") >= 0.0 && f(m, "/gate/bottom") <= vh,
        "{what}: the memory gate picture is whole on the first screen: {m}"
    );
    assert!(
        f(m, "/gate/right") <= WIDTH as f64,
        "{what}: the picture fits the width: {m}"
    );
    assert!(f(m, "/thresholds") >= 1.0, "{what}: the limit is drawn");
    for chart in m["charts"].as_array().unwrap() {
        assert!(
            f(chart, "/0") > 100.0 && f(chart, "/1") > 100.0,
            "{what}: a chart of size {chart}"
        );
    }
    assert!(
        f(m, "/comparison/bottom") <= f(m, "/checks/top"),
        "{what}: checks come after"
    );
}

#[test]
#[ignore = "needs chromium (Debian package chromium): loads report.html in a browser"]
fn the_quickstart_report_shows_the_comparison_on_the_first_screen() {
    let browser = chromium();
    tiny_en();
    // The quickstart's arms and gates on two short fixtures.
    let arm = |id: &str, extra: &str| {
        format!(
            "\n[[arm]]\nid = \"{id}\"\n{extra}[arm.whisper]\nmodel = \"tiny.en\"\ninitializer = \"no_state\"\n\
             fixtures = [\"s3\", \"s4\"]\nrepetitions = 2\nwarmup = 1\nidle_s = 0.3\n"
        )
    };
    let body = arm("fp16-one-state", "")
        + &arm(
            "fp16-extra-state",
            "control = \"fp16-one-state\"\npromote = true\n",
        )
        .replace("idle_s = 0.3\n", "idle_s = 0.3\nextra_states = 1\n")
        + "\n[[arm.gate]]\nkind = \"memory\"\nphase = \"state_ready\"\nfield = \"peak\"\ncontrol_factor = 1.05\n\
           \n[[arm.gate]]\nkind = \"parity\"\n"
        + LENIENT_ADMISSION;
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(
        r.out.status.code(),
        Some(1),
        "the extra state fails its gate: {}",
        stderr(&r.out)
    );
    let page = r.dir.join("report.html");
    let profile = r.tmp.path().join("profile");
    let m = measure(&browser, &profile, &page);
    assert_first_screen(&m, "quickstart");
    assert_eq!(f(&m, "/matrix_rows"), 2.0);
    screenshot(
        &browser,
        &profile,
        &page,
        &artifacts().join("quickstart.png"),
    );
}

#[test]
#[ignore = "needs chromium (Debian package chromium): loads report.html in a browser"]
fn a_three_arm_matrix_report_is_one_table_and_one_picture_per_gate() {
    let browser = chromium();
    // A control and two candidates: one smaller (passes its memory gate),
    // one larger (fails it), both against the same control.
    let arm = |id: &str, mib: u32, extra: &str| {
        format!(
            "\n[[arm]]\nid = \"{id}\"\n{extra}[arm.calibrate]\nrequests = 4\nrequest_ms = 30\nidle_ms = 200\nplateau = {{ mib = {mib} }}\n"
        )
    };
    let gate = |how: &str| {
        format!(
            "\n[[arm.gate]]\nkind = \"memory\"\nphase = \"state_ready\"\nfield = \"peak\"\n{how}\n"
        )
    };
    let body = arm("control", 64, "")
        + &arm("smaller", 32, "control = \"control\"\npromote = true\n")
        + &gate("min_reduction = 0.2")
        + "\n[[arm.gate]]\nkind = \"latency\"\ntolerance = 1.0\n"
        + &arm("larger", 128, "control = \"control\"\npromote = true\n")
        + &gate("control_factor = 1.05")
        + LENIENT_ADMISSION;
    let r = run_protocol_body("run", &body, &["--json"]);
    assert_eq!(
        r.out.status.code(),
        Some(1),
        "`larger` fails its gate: {}",
        stderr(&r.out)
    );
    let page = r.dir.join("report.html");
    let profile = r.tmp.path().join("profile");
    let m = measure(&browser, &profile, &page);
    assert_eq!(f(&m, "/matrix_rows"), 3.0, "one table, arms as rows: {m}");
    assert_eq!(
        f(&m, "/memory_gates"),
        1.0,
        "both memory gates share one picture"
    );
    assert!(
        f(&m, "/thresholds") >= 2.0,
        "each candidate's limit is drawn"
    );
    assert_first_screen(&m, "matrix");
    screenshot(
        &browser,
        &profile,
        &page,
        &artifacts().join("matrix-3-arms.png"),
    );
}
