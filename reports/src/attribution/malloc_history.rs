//! `malloc_history PID -allBySize` (macOS), run by the harness at each
//! marker while the worker runs under `MallocStackLogging=lite`: every
//! live allocation's stack, grouped and sorted by total size.
//!
//! ```text
//! 1 call for 8388608 bytes: thread_16f0a3000 | start | main | runners::calibrate::run | calibration_heap_plateau | malloc | _malloc_zone_malloc
//! 12 calls for 3072 bytes: thread_16f0a3000 | start | main | whisper_init_state | operator new(unsigned long) | malloc
//! ```
//!
//! Frames are outermost first; a frame may carry ` (in IMAGE)` and
//! ` + OFFSET`. Lines before the first entry are the report's header and
//! are skipped; a `Binary Images:` section ends the list. Any other line
//! among the entries is an error naming its line. Sizes may be written
//! with a unit (`8.0M`, `512K`, `3 bytes`); they are read as bytes. This
//! parser builds and is tested on every platform; only the capture needs
//! a Mac.

/// One entry: allocations of one stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Live allocations with this stack.
    pub calls: u64,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Function names, innermost (the allocator) first.
    pub frames: Vec<String>,
    /// The image of each frame where the line names it (` (in IMAGE)`).
    pub images: Vec<Option<String>>,
}

/// A capture that is not `malloc_history -allBySize` output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct MallocHistoryError {
    /// The capture as named in messages.
    pub file: String,
    /// The 1-based line.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// `8388608`, `8388608 bytes`, `512K`, `8.0M`, `1.5G` → bytes.
fn size(text: &str) -> Option<u64> {
    let t = text.trim().trim_end_matches("bytes").trim();
    let (number, scale) = match t.char_indices().last()? {
        (at, 'K') => (&t[..at], 1u64 << 10),
        (at, 'M') => (&t[..at], 1 << 20),
        (at, 'G') => (&t[..at], 1 << 30),
        _ => (t, 1),
    };
    if scale == 1 {
        return number.parse().ok();
    }
    let value: f64 = number.trim().parse().ok()?;
    (0.0..1e12)
        .contains(&value)
        .then(|| (value * scale as f64).round() as u64)
}

/// `name (in image) + 12` → (`name`, `Some(image)`).
fn frame(text: &str) -> (String, Option<String>) {
    let text = text.trim();
    let text = match text.rsplit_once(" + ") {
        Some((head, tail))
            if tail
                .trim()
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == 'x') =>
        {
            head
        }
        _ => text,
    };
    match text.rsplit_once(" (in ") {
        Some((name, image)) => (
            name.trim().to_string(),
            Some(image.trim_end_matches(')').trim().to_string()),
        ),
        None => (text.to_string(), None),
    }
}

/// Parse one capture; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Vec<Entry>, MallocHistoryError> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.starts_with("Binary Images") {
            break;
        }
        let parsed = trimmed.split_once(" for ").and_then(|(count, rest)| {
            let calls: u64 = count
                .strip_suffix(" calls")
                .or_else(|| count.strip_suffix(" call"))?
                .trim()
                .parse()
                .ok()?;
            let (amount, stack) = rest.split_once(':')?;
            Some((calls, size(amount)?, stack))
        });
        let Some((calls, bytes, stack)) = parsed else {
            if entries.is_empty() || trimmed.is_empty() {
                continue; // the header, or a blank line
            }
            return Err(MallocHistoryError {
                file: file.to_string(),
                line: i + 1,
                reason: format!(
                    "expected `<n> calls for <size>: <frame> | …`, found {:?}",
                    trimmed.chars().take(80).collect::<String>()
                ),
            });
        };
        let (mut frames, mut images): (Vec<String>, Vec<Option<String>>) = stack
            .split('|')
            .map(str::trim)
            .filter(|f| !f.is_empty() && !f.starts_with("thread_"))
            .map(frame)
            .unzip();
        frames.reverse();
        images.reverse();
        entries.push(Entry {
            calls,
            bytes,
            frames,
            images,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MADE capture, written by hand in the shape of `malloc_history
    /// -allBySize` output: no Mac was at hand to take a real one.
    const MADE: &str = include_str!("../../tests/heap/made-malloc_history-allBySize.txt");

    #[test]
    fn the_made_capture_parses() {
        let entries = parse(MADE, "made.txt").unwrap();
        assert_eq!(entries.len(), 4);
        assert_eq!(entries[0].calls, 1);
        assert_eq!(entries[0].bytes, 8 << 20);
        assert_eq!(entries[0].frames[0], "_malloc_zone_malloc");
        assert!(
            entries[0]
                .frames
                .contains(&"calibration_heap_plateau".to_string())
        );
        assert_eq!(entries[0].frames.last().map(String::as_str), Some("start"));
        assert_eq!(entries[1].bytes, 1536 << 10);
        assert_eq!(entries[2].images[1].as_deref(), Some("libc++abi.dylib"));
        assert_eq!(entries[2].frames[1], "operator new(unsigned long)");
        let total: u64 = entries.iter().map(|e| e.bytes).sum();
        assert_eq!(total, (8 << 20) + (1536 << 10) + 3072 + 48);
    }

    #[test]
    fn a_stray_line_among_the_entries_is_named() {
        let text = format!("{MADE}\ngarbage here\n");
        // Binary Images ends the list before the garbage.
        assert!(parse(&text, "m").is_ok());
        let cut = &MADE[..MADE.find("Binary Images:").unwrap()];
        let e = parse(&format!("{cut}garbage here\n"), "m.txt").unwrap_err();
        assert_eq!(e.line, cut.lines().count() + 1, "{e}");
        assert!(e.to_string().starts_with("m.txt:"), "{e}");
        assert!(e.reason.contains("garbage"), "{e}");
        assert_eq!(size("8.0M"), Some(8 << 20));
        assert_eq!(size("12 bytes"), Some(12));
        assert_eq!(size("x"), None);
        assert_eq!(size("1e300M"), None);
    }
}
