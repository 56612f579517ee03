//! jemalloc's heap profile (`heap_v2`), as `mallctl("prof.dump")` writes it:
//!
//! ```text
//! heap_v2/16384                                  sampling period (bytes)
//!   t*: 418: 4533268 [418: 4533268]              totals: live objects: bytes [accumulated objects: bytes]
//!   t0: 418: 4533268 [418: 4533268]              the same per thread
//! @ 0x7f32… 0x7f32… 0x55ef…                      one sampled stack, innermost first
//!   t*: 1: 8388608 [1: 8388608]                  its counts (then per thread)
//! MAPPED_LIBRARIES:
//! 55ef776b5000-55ef776b6000 r--p 00000000 fe:00 10027059  /tmp/t    /proc/self/maps
//! ```
//!
//! The counts are the *sampled* ones: [`unbias`] scales them as
//! jeprof does. The bracketed pair is cumulative since the start (all
//! zero unless jemalloc runs with `prof_accum:true`). Per-thread lines are
//! read and dropped: memqual attributes by site, not by thread. A line that
//! does not fit is an error naming the file and line; a profile without
//! its `MAPPED_LIBRARIES:` section was cut short and is refused.

/// At most this many frames in one stack (jemalloc records at most 128).
pub const MAX_FRAMES: usize = 1024;

/// Sampled counts of one stack or of the whole profile.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Sampled objects live at the dump.
    pub live_objects: u64,
    /// Their bytes (as requested).
    pub live_bytes: u64,
    /// Sampled objects allocated since the start (`prof_accum`), freed or not.
    pub accum_objects: u64,
    /// Their bytes.
    pub accum_bytes: u64,
}

/// An unbiased estimate of real objects and bytes from sampled ones.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimate {
    /// Estimated objects.
    pub objects: f64,
    /// Estimated bytes.
    pub bytes: f64,
}

/// jeprof's unbiasing of one sampled `(objects, bytes)` pair under a
/// Poisson sampling process of mean interval `period` bytes: an object of
/// mean size `s` is sampled with probability `1 - exp(-s / period)`, so
/// both counts are divided by it. A zero period means every byte was
/// sampled; zero objects stay zero.
pub fn unbias(objects: u64, bytes: u64, period: u64) -> Estimate {
    if objects == 0 || period == 0 {
        return Estimate {
            objects: objects as f64,
            bytes: bytes as f64,
        };
    }
    let mean = bytes as f64 / objects as f64;
    let p = 1.0 - (-mean / period as f64).exp();
    if p <= 0.0 {
        // Zero-byte objects: no estimate beyond what was sampled.
        return Estimate {
            objects: objects as f64,
            bytes: bytes as f64,
        };
    }
    Estimate {
        objects: objects as f64 / p,
        bytes: bytes as f64 / p,
    }
}

impl Counts {
    /// The live pair, unbiased for `period`.
    pub fn live(&self, period: u64) -> Estimate {
        unbias(self.live_objects, self.live_bytes, period)
    }

    /// The cumulative pair, unbiased for `period`.
    pub fn accumulated(&self, period: u64) -> Estimate {
        unbias(self.accum_objects, self.accum_bytes, period)
    }
}

/// One sampled stack and its counts over every thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSample {
    /// Return addresses, innermost (jemalloc's own frames) first.
    pub frames: Vec<u64>,
    /// The stack's `t*` counts.
    pub counts: Counts,
}

/// One line of `/proc/self/maps` as the profile recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First address of the mapping.
    pub start: u64,
    /// One past its last address.
    pub end: u64,
    /// Permissions, e.g. `r-xp`.
    pub perms: String,
    /// Offset in the mapped file.
    pub offset: u64,
    /// The file (or `[heap]`, `[stack]`…); `None` for anonymous memory.
    pub path: Option<String>,
}

impl Mapping {
    /// Whether the mapping holds code (`x` in its permissions).
    pub fn executable(&self) -> bool {
        self.perms.contains('x')
    }
}

/// A parsed heap profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeapProfile {
    /// The mean sampling interval in bytes (`heap_v2/<period>`).
    pub period: u64,
    /// The profile's `t*` summary line, as jemalloc wrote it. jemalloc
    /// merges it from its per-thread data, and it need not equal the sum
    /// of the stacks below; memqual sums the stacks.
    pub total: Counts,
    /// Every sampled stack, in file order.
    pub stacks: Vec<StackSample>,
    /// The process's mappings at the dump (`MAPPED_LIBRARIES:`).
    pub maps: Vec<Mapping>,
}

impl HeapProfile {
    /// The mapping that holds `address`, if any.
    pub fn mapping(&self, address: u64) -> Option<&Mapping> {
        self.maps
            .iter()
            .find(|m| m.start <= address && address < m.end)
    }
}

/// A profile that is not a well-formed `heap_v2` dump.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct HeapProfileError {
    /// The profile as named in messages.
    pub file: String,
    /// The 1-based line the problem is on (the last line when the file ended early).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

fn hex(token: &str) -> Option<u64> {
    let digits = token.strip_prefix("0x").unwrap_or(token);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// `t<id>: <objs>: <bytes> [<objs>: <bytes>]` → the thread id and counts.
fn counts_line(line: &str) -> Option<(&str, Counts)> {
    let (thread, rest) = line.trim().split_once(':')?;
    let thread = thread.strip_prefix('t')?;
    let (now, accum) = rest.split_once('[')?;
    let accum = accum.trim_end().strip_suffix(']')?;
    let pair = |text: &str| -> Option<(u64, u64)> {
        let (objs, bytes) = text.split_once(':')?;
        Some((objs.trim().parse().ok()?, bytes.trim().parse().ok()?))
    };
    let (live_objects, live_bytes) = pair(now)?;
    let (accum_objects, accum_bytes) = pair(accum)?;
    Some((
        thread,
        Counts {
            live_objects,
            live_bytes,
            accum_objects,
            accum_bytes,
        },
    ))
}

/// One `/proc/self/maps` line.
fn mapping_line(line: &str) -> Option<Mapping> {
    let mut fields = line.split_whitespace();
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?.to_string();
    let offset = hex(fields.next()?)?;
    let _device = fields.next()?;
    let _inode = fields.next()?;
    // The path is the rest of the line, spaces included.
    let path = fields.next().map(|first| {
        let at = line.find(first).unwrap_or(line.len());
        line[at..].trim_end().to_string()
    });
    Some(Mapping {
        start: hex(start)?,
        end: hex(end)?,
        perms,
        offset,
        path,
    })
}

/// Parse the heap profile `text`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<HeapProfile, HeapProfileError> {
    let err = |line: usize, reason: String| HeapProfileError {
        file: file.to_string(),
        line,
        reason,
    };
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (_, header) = lines
        .next()
        .ok_or_else(|| err(1, "empty: not a heap profile".into()))?;
    let period = header
        .trim()
        .strip_prefix("heap_v2/")
        .and_then(|p| p.parse::<u64>().ok())
        .ok_or_else(|| {
            err(
                1,
                format!(
                    "expected the header `heap_v2/<sampling period>`, found {:?}",
                    truncate(header)
                ),
            )
        })?;
    let mut total: Option<Counts> = None;
    let mut stacks: Vec<StackSample> = Vec::new();
    // The stack whose `t*` line is still due.
    let mut open: Option<(usize, Vec<u64>)> = None;
    let mut last = 1;
    for (n, line) in lines.by_ref() {
        last = n;
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if trimmed == "MAPPED_LIBRARIES:" {
            if let Some((at, _)) = open {
                return Err(err(at, "a stack without its `t*:` counts line".into()));
            }
            let total =
                total.ok_or_else(|| err(n, "no `t*:` totals line before the maps".into()))?;
            let mut maps = Vec::new();
            for (m, line) in lines.by_ref() {
                if line.trim().is_empty() {
                    continue;
                }
                maps.push(mapping_line(line).ok_or_else(|| {
                    err(
                        m,
                        format!("not a /proc/self/maps line: {:?}", truncate(line)),
                    )
                })?);
            }
            return Ok(HeapProfile {
                period,
                total,
                stacks,
                maps,
            });
        }
        if let Some(addresses) = trimmed.strip_prefix('@') {
            if let Some((at, _)) = open {
                return Err(err(at, "a stack without its `t*:` counts line".into()));
            }
            if total.is_none() {
                return Err(err(n, "a stack before the `t*:` totals line".into()));
            }
            let mut frames = Vec::new();
            for token in addresses.split_whitespace() {
                let address = hex(token).ok_or_else(|| {
                    err(
                        n,
                        format!("{:?} is not a hexadecimal address", truncate(token)),
                    )
                })?;
                frames.push(address);
                if frames.len() > MAX_FRAMES {
                    return Err(err(
                        n,
                        format!("more than {MAX_FRAMES} frames in one stack"),
                    ));
                }
            }
            if frames.is_empty() {
                return Err(err(n, "a stack with no address".into()));
            }
            open = Some((n, frames));
            continue;
        }
        let (thread, counts) = counts_line(trimmed).ok_or_else(|| {
            err(
                n,
                format!(
                    "expected `@ <addresses>` or `t<thread>: <objects>: <bytes> [<objects>: <bytes>]`, found {:?}",
                    truncate(trimmed)
                ),
            )
        })?;
        if thread != "*" {
            if thread.parse::<u64>().is_err() {
                return Err(err(
                    n,
                    format!("thread `t{thread}` is neither `t*` nor a number"),
                ));
            }
            continue; // per-thread detail
        }
        match open.take() {
            Some((_, frames)) => stacks.push(StackSample { frames, counts }),
            None if total.is_none() => total = Some(counts),
            None => return Err(err(n, "a second `t*:` line for one stack".into())),
        }
    }
    Err(err(
        last,
        "the profile ends before its MAPPED_LIBRARIES: section: it was cut short".into(),
    ))
}

/// At most 80 characters of `text`, for messages.
fn truncate(text: &str) -> &str {
    match text.char_indices().nth(80) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real profile, dumped by memqual-calibrate under Debian's
    /// libjemalloc2 5.3.0 (see `reports/tests/heap/README.md`).
    const REAL: &str = include_str!("../../tests/heap/calibrate-state_ready.heap");

    #[test]
    fn a_real_profile_parses_whole() {
        let p = parse(REAL, "real.heap").unwrap();
        assert_eq!(p.period, 16384);
        assert_eq!(p.stacks.len(), 10);
        // jemalloc's own summary line, kept as written (memqual sums the stacks).
        assert_eq!(
            (p.total.live_objects, p.total.live_bytes),
            (614, 32_353_742)
        );
        // The heaviest stack is the 32 MiB heap plateau: one object, every byte.
        let heaviest = p.stacks.iter().max_by_key(|s| s.counts.live_bytes).unwrap();
        assert_eq!(heaviest.counts.live_objects, 1);
        assert_eq!(heaviest.counts.live_bytes, 32 << 20);
        assert_eq!(heaviest.counts.accum_bytes, 32 << 20);
        let est = heaviest.counts.live(p.period);
        assert!((est.bytes - (32 << 20) as f64).abs() < 1.0, "{est:?}");
        assert!(p.maps.iter().any(|m| {
            m.executable()
                && m.path
                    .as_deref()
                    .is_some_and(|p| p.ends_with("memqual-calibrate"))
        }));
        // Every frame of every stack lies in a mapping.
        for s in &p.stacks {
            assert!(s.frames.iter().all(|a| p.mapping(*a).is_some()));
        }
    }

    #[test]
    fn the_unbiasing_is_jeprofs() {
        // One 8 MiB object at a 16 KiB period: sampled almost surely.
        let big = unbias(1, 8 << 20, 16384);
        assert!((big.bytes - (8 << 20) as f64).abs() < 1.0, "{big:?}");
        // 52 sampled 1024-byte objects: p = 1 - e^(-1/16).
        let small = unbias(52, 52 * 1024, 16384);
        let p = 1.0 - (-1.0f64 / 16.0).exp();
        assert!((small.objects - 52.0 / p).abs() < 1e-9);
        assert!((small.bytes - 52.0 * 1024.0 / p).abs() < 1e-6);
        assert!((small.objects - 858.5).abs() < 0.5, "{small:?}");
        assert_eq!(unbias(0, 0, 16384), Estimate::default());
        assert_eq!(unbias(3, 30, 0).bytes, 30.0);
        assert_eq!(unbias(3, 0, 16384).bytes, 0.0);
    }

    #[test]
    fn a_cut_profile_names_its_file_and_line() {
        let cut: String = REAL.lines().take(6).collect::<Vec<_>>().join("\n");
        let e = parse(&cut, "cut.heap").unwrap_err();
        assert_eq!(e.line, 6);
        assert!(e.to_string().starts_with("cut.heap:6: "), "{e}");
        assert!(e.reason.contains("cut short"), "{e}");

        let bad_count = REAL.replacen("  t*: ", "  t*: x", 2);
        let e = parse(&bad_count, "b.heap").unwrap_err();
        assert!(e.line > 1 && e.reason.contains("expected"), "{e}");

        let e = parse("heap_v1/5\n", "h.heap").unwrap_err();
        assert_eq!((e.line, e.reason.contains("header")), (1, true), "{e}");
        let e = parse("", "e.heap").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse("heap_v2/1\n  t*: 1: 2 [0: 0]\n@ 0xzz\n", "z.heap").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = parse(
            "heap_v2/1\n  t*: 1: 2 [0: 0]\n@ 0x1\nMAPPED_LIBRARIES:\n",
            "o.heap",
        )
        .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.reason.contains("without its"), "{e}");
        let e = parse(
            "heap_v2/1\n  t*: 1: 2 [0: 0]\nMAPPED_LIBRARIES:\nnot a map\n",
            "m.heap",
        )
        .unwrap_err();
        assert_eq!(e.line, 4, "{e}");
    }

    #[test]
    fn a_minimal_profile_and_a_path_with_spaces() {
        let text = "heap_v2/524288\n  t*: 2: 100 [3: 300]\n  t0: 2: 100 [3: 300]\n\
                    @ 0x10 0x20\n  t*: 2: 100 [3: 300]\n  t0: 2: 100 [3: 300]\n\
                    MAPPED_LIBRARIES:\n\
                    00000010-00000030 r-xp 00001000 fe:00 42   /opt/my lib.so\n\
                    7f00-7f10 rw-p 00000000 00:00 0 \n";
        let p = parse(text, "m.heap").unwrap();
        assert_eq!(p.stacks.len(), 1);
        assert_eq!(p.stacks[0].frames, [0x10, 0x20]);
        assert_eq!(p.stacks[0].counts.accum_bytes, 300);
        assert_eq!(p.maps[0].path.as_deref(), Some("/opt/my lib.so"));
        assert_eq!(p.maps[0].offset, 0x1000);
        assert_eq!(p.maps[1].path, None);
        assert_eq!(p.mapping(0x20).map(|m| m.start), Some(0x10));
        assert_eq!(p.mapping(0x30), None);
    }

    #[test]
    fn any_bytes_parse_or_fail_without_panicking() {
        let mut text = REAL.as_bytes().to_vec();
        for i in (0..text.len()).step_by(97) {
            text[i] = text[i].wrapping_add(13);
            let _ = parse(&String::from_utf8_lossy(&text), "fuzz.heap");
        }
    }
}
