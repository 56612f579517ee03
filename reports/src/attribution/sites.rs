//! One profile as live and allocated bytes per site, from either profiler.

use super::heap_profile::{self, HeapProfile};
use super::malloc_history;
use super::symbols::{self, Frame, Location, SymbolTable};
use super::{AttributionReceipt, SYMBOLS, Site};
use crate::ReportError;
use run_dir::{Rel, RunDir};
use std::collections::BTreeMap;

/// Frames kept of a site's heaviest stack, the site first.
const STACK_FRAMES: usize = 8;

/// One site's counts in one profile.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteCounts {
    /// Live bytes (unbiased).
    pub live_bytes: f64,
    /// Bytes allocated since the start (unbiased; 0 without cumulative counts).
    pub accum_bytes: f64,
    /// The site's object file name.
    pub object: Option<String>,
    /// The heaviest stack through the site, from the site outwards.
    pub stack: Vec<String>,
    /// The weight of the stack kept in `stack`.
    pub(super) heaviest: f64,
}

/// One profile, by site.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteTable {
    /// The profile, relative to the arm's folder (`heap/…`).
    pub file: String,
    /// By site name.
    pub sites: BTreeMap<String, SiteCounts>,
    /// Whether the profiler kept cumulative counts.
    pub has_accumulated: bool,
}

impl SiteTable {
    /// Add one stack's bytes to the site chosen in `frames`.
    pub fn add(&mut self, frames: &[Frame], live_bytes: f64, accum_bytes: f64) {
        let at = symbols::site_index(frames);
        let Some(site) = frames.get(at) else { return };
        let entry = self.sites.entry(site.name.clone()).or_default();
        entry.live_bytes += live_bytes;
        entry.accum_bytes += accum_bytes;
        let weight = live_bytes.max(accum_bytes);
        if entry.stack.is_empty() || weight > entry.heaviest {
            entry.heaviest = weight;
            entry.object = site.object.clone();
            entry.stack = frames[at..]
                .iter()
                .take(STACK_FRAMES)
                .map(|f| f.name.clone())
                .collect();
        }
    }

    /// Live bytes over every site.
    pub fn live_bytes(&self) -> f64 {
        self.sites.values().map(|s| s.live_bytes).sum()
    }

    /// Cumulative bytes over every site.
    pub fn accumulated_bytes(&self) -> f64 {
        self.sites.values().map(|s| s.accum_bytes).sum()
    }

    /// Every site of this profile against `prev`, with its share of the
    /// kernel's `measured` growth.
    pub fn against(&self, prev: &SiteTable, measured: Option<i64>) -> Vec<Site> {
        self.sites
            .iter()
            .map(|(name, now)| {
                let before = prev.sites.get(name);
                let growth = now.live_bytes - before.map_or(0.0, |b| b.live_bytes);
                let allocated = if self.has_accumulated {
                    now.accum_bytes - before.map_or(0.0, |b| b.accum_bytes)
                } else {
                    growth
                };
                Site {
                    site: name.clone(),
                    object: now.object.clone(),
                    stack: now.stack.clone(),
                    retained_bytes: now.live_bytes.max(0.0).round() as u64,
                    growth_bytes: growth.round() as i64,
                    allocated_bytes: allocated.max(0.0).round() as u64,
                    share_of_measured_growth: measured
                        .filter(|m| *m > 0)
                        .map(|m| growth / m as f64),
                }
            })
            .collect()
    }
}

/// `0012-request_end.heap` → 12.
fn seq_of(name: &str, suffix: &str) -> Option<u64> {
    let stem = name.strip_suffix(suffix)?;
    let (seq, _phase) = stem.split_once('-')?;
    seq.parse().ok()
}

/// The `heap/` profiles matching `suffix`, by marker sequence, as (seq,
/// relative path, text); unreadable ones go to `problems`.
fn profiles(
    run: &RunDir,
    heap: &Rel,
    suffix: &str,
    problems: &mut Vec<String>,
) -> Result<Vec<(u64, Rel, String)>, ReportError> {
    if !run.has_dir(heap)? {
        problems.push(format!(
            "no {} folder: the worker wrote no profile",
            super::HEAP_DIR
        ));
        return Ok(Vec::new());
    }
    let walk = run.walk(heap)?;
    for odd in &walk.irregular {
        problems.push(format!("{} is {}: not read", odd.path, odd.what));
    }
    let mut out = Vec::new();
    for file in walk.files {
        let Some(seq) = file.rel.name().and_then(|n| seq_of(n, suffix)) else {
            continue;
        };
        match run.read_bytes(&file.rel, run_dir::limits::TEXT) {
            Ok(Some(bytes)) => {
                out.push((seq, file.rel, String::from_utf8_lossy(&bytes).into_owned()))
            }
            Ok(None) => {}
            Err(e) => problems.push(e.to_string()),
        }
    }
    out.sort_by_key(|(seq, _, _)| *seq);
    Ok(out)
}

/// Where `address` lies when no symbol table says: its object and offset
/// from the profile's own maps.
fn mapped(profile: &HeapProfile, address: u64) -> Option<Location> {
    let m = profile.mapping(address)?;
    Some(Location {
        object: m.path.clone(),
        offset: Some(address - m.start + m.offset),
        frames: Vec::new(),
    })
}

fn arm_relative(rel: &Rel) -> String {
    let parts = rel.components();
    parts[parts.len().saturating_sub(2)..].join("/")
}

/// jemalloc's profiles in `heap`, by marker sequence.
pub fn jemalloc_tables(
    run: &RunDir,
    heap: &Rel,
    receipt: &mut AttributionReceipt,
) -> Result<BTreeMap<u64, SiteTable>, ReportError> {
    let mut problems = Vec::new();
    let found = profiles(run, heap, ".heap", &mut problems)?;
    let table: Option<SymbolTable> = match run.read_json(&heap.join(SYMBOLS)) {
        Ok(t) => t,
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    if let Some(t) = &table {
        problems.extend(t.problems.iter().cloned());
    } else if !found.is_empty() {
        problems.push(format!(
            "no {}/{SYMBOLS}: sites are named by object and offset",
            super::HEAP_DIR
        ));
    }
    let mut out = BTreeMap::new();
    for (seq, rel, text) in found {
        let profile = match heap_profile::parse(&text, &run.display(&rel).display().to_string()) {
            Ok(p) => p,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        receipt.sample_interval_bytes.get_or_insert(profile.period);
        let mut sites = SiteTable {
            file: arm_relative(&rel),
            has_accumulated: profile.total.accum_objects > 0,
            ..SiteTable::default()
        };
        for stack in &profile.stacks {
            let frames: Vec<Frame> = stack
                .frames
                .iter()
                .flat_map(|a| {
                    let known = table
                        .as_ref()
                        .and_then(|t| t.addresses.get(&symbols::key(*a)));
                    match known {
                        Some(loc) => symbols::frames_of(Some(loc), *a),
                        None => symbols::frames_of(mapped(&profile, *a).as_ref(), *a),
                    }
                })
                .collect();
            sites.add(
                &frames,
                stack.counts.live(profile.period).bytes,
                stack.counts.accumulated(profile.period).bytes,
            );
        }
        out.insert(seq, sites);
    }
    receipt.problems.extend(problems);
    Ok(out)
}

/// `malloc_history` captures in `heap`, by marker sequence.
pub fn malloc_history_tables(
    run: &RunDir,
    heap: &Rel,
    problems: &mut Vec<String>,
) -> Result<BTreeMap<u64, SiteTable>, ReportError> {
    let mut out = BTreeMap::new();
    for (seq, rel, text) in profiles(run, heap, ".malloc_history.txt", problems)? {
        let entries = match malloc_history::parse(&text, &run.display(&rel).display().to_string()) {
            Ok(e) => e,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        let mut sites = SiteTable {
            file: arm_relative(&rel),
            ..SiteTable::default()
        };
        for entry in &entries {
            let frames: Vec<Frame> = entry
                .frames
                .iter()
                .zip(&entry.images)
                .map(|(name, image)| Frame {
                    name: name.clone(),
                    object: image.clone(),
                    allocator: symbols::allocator_function(name)
                        || name.starts_with("_malloc")
                        || image.as_deref().is_some_and(|i| {
                            symbols::ALLOCATOR_OBJECTS.iter().any(|a| i.starts_with(a))
                        }),
                })
                .collect();
            sites.add(&frames, entry.bytes as f64, 0.0);
        }
        out.insert(seq, sites);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_give_their_sequence() {
        assert_eq!(seq_of("0012-request_end.heap", ".heap"), Some(12));
        assert_eq!(seq_of("symbols.json", ".heap"), None);
        assert_eq!(seq_of("x-y.heap", ".heap"), None);
        assert_eq!(
            seq_of("0003-state_ready.malloc_history.txt", ".malloc_history.txt"),
            Some(3)
        );
    }
}
