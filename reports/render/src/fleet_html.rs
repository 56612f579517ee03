//! `fleet.html`: the fleet report as one offline page (maud templates, so
//! every host label, arm id and note is escaped).

use fleet::fleet::{Cell, FleetReport, boot_name, cell_text, format_value};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use reports::gates::Outcome;

const CSS: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}\
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}\
th{background:#f4f4f4;white-space:nowrap}.pass{background:#e6f4ea}.fail{background:#fce8e6}\
.none{color:#888}code{font-size:12px}";

fn class(c: &Cell) -> &'static str {
    if c.fails { "fail" } else { "pass" }
}

fn verdict_class(v: Outcome) -> &'static str {
    if v == Outcome::Pass { "pass" } else { "fail" }
}

/// The page.
pub fn page(f: &FleetReport) -> String {
    let markup: Markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "memqual fleet: " (f.protocol_name) }
                style { (PreEscaped(CSS)) }
            }
            body {
                h1 { "memqual fleet: " code { (f.protocol_name) } }
                p class=(verdict_class(f.verdict)) {
                    strong { "Verdict: " (f.verdict.as_str()) }
                    " over " (f.runs.len()) " run(s) on " (f.hosts.len()) " host(s)."
                }
                h2 { "Host × arm" }
                table id="hosts-by-arms" {
                    tr { th { "host" } @for a in &f.arms { th { (a) } } }
                    @for h in &f.hosts {
                        tr {
                            th { (h) }
                            @for a in &f.arms {
                                @let here = f.cells_at(h, a);
                                @match here.as_slice() {
                                    [] => td class="none" { "–" },
                                    [c] => td class=(class(c)) { (cell_text(c)) },
                                    many => td class=(if many.iter().any(|c| c.fails) { "fail" } else { "pass" }) {
                                        @for c in many {
                                            div class=(class(c)) { "run " (c.run) ": " (cell_text(c)) }
                                        }
                                    },
                                }
                            }
                        }
                    }
                }
                h2 { "Spread across hosts" }
                table id="spread" {
                    tr { th { "arm" } th { "metric" } th { "hosts" } th { "min" } th { "median" } th { "max" } }
                    @for s in &f.spread {
                        tr {
                            td { (s.arm) } td { (s.metric) } td { (s.hosts) }
                            td { (format_value(s.min, &s.unit)) " (" (s.min_host) ")" }
                            td { (format_value(s.median, &s.unit)) }
                            td { (format_value(s.max, &s.unit)) " (" (s.max_host) ")" }
                        }
                    }
                }
                h2 { "What fails" }
                @if f.failing_hosts.is_empty() { p { "No host and no arm fails." } }
                ul id="failing" {
                    @for h in &f.failing_hosts { li { "host " strong { (h.name) } ": " (h.on.join(", ")) } }
                    @for a in &f.failing_arms { li { "arm " strong { (a.name) } ": on " (a.on.join(", ")) } }
                    @for c in f.cells.iter().filter(|c| c.shown && !c.failed_gates.is_empty()) {
                        li { (c.arm) " on " (c.host) ": " (c.failed_gates.join("; ")) }
                    }
                }
                h2 { "Runs" }
                table id="runs" {
                    tr { th { "#" } th { "host" } th { "directory" } th { "shard" } th { "verdict" } th { "memqual" } th { "receipt sha256" } }
                    @for r in &f.runs {
                        tr {
                            td { (r.index) } td { (r.host) } td { code { (r.dir) } }
                            td { @match &r.shard { Some(s) => { (s.index) "/" (s.count) }, None => "–" } }
                            td { (r.verdict.map_or("–", Outcome::as_str)) }
                            td { (r.memqual_version) " " (r.memqual_commit.as_deref().unwrap_or("")) }
                            td { code { (r.receipt_sha256) } }
                        }
                    }
                }
                @if !f.boots.is_empty() {
                    h2 { "Boots" }
                    table id="boots" {
                        tr { th { "host" } th { "boot" } th { "runs" } }
                        @for h in &f.boots {
                            @for b in &h.boots {
                                tr class=[h.rebooted().then_some("fail")] {
                                    td { (h.host) }
                                    td { code { (boot_name(b.boot_id.as_deref())) } }
                                    td { (b.runs.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")) }
                                }
                            }
                        }
                    }
                }
                @if !f.notes.is_empty() {
                    h2 { "Notes" }
                    ul { @for n in &f.notes { li { (n) } } }
                }
            }
        }
    };
    markup.into_string()
}
