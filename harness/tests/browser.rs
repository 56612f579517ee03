//! The HTML report in a real browser: headless Chromium (Debian package
//! `chromium`) loads `report.html` offline, takes a screenshot, and the
//! console must stay free of errors. Skips, saying so, when Chromium is not
//! installed.

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        if let Ok(out) = Command::new("which").arg(name).output()
            && out.status.success()
        {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if !path.is_empty() {
                return Some(PathBuf::from(path));
            }
        }
    }
    None
}

#[test]
fn the_report_renders_in_headless_chromium_without_console_errors() {
    let Some(browser) = chromium() else {
        eprintln!(
            "SKIPPED: no Chromium found (install the Debian package `chromium` to run this check)"
        );
        return;
    };
    let r = run_protocol_body(
        "run",
        "\n[[arm]]\nid = \"plateau\"\n[arm.calibrate]\nrequests = 3\nrequest_ms = 50\nidle_ms = 200\nplateau = { mib = 32 }\n",
        &["--json"],
    );
    assert_eq!(r.out.status.code(), Some(0), "{}", stderr(&r.out));
    let page = r.dir.join("report.html");
    let shot = r.tmp.path().join("shot.png");
    let profile = r.tmp.path().join("profile");
    let out = Command::new(&browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1200,1600",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("ERROR") || l.contains("Uncaught")))
        .collect();
    assert!(console_errors.is_empty(), "{console_errors:?}");
    let png = std::fs::read(&shot).expect("a screenshot was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // A blank 1200×1600 page compresses to a few KB; tables, text and the
    // chart take far more.
    assert!(
        png.len() > 30_000,
        "screenshot of {} bytes looks blank",
        png.len()
    );
}
