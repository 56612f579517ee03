//! A kept-open `/proc` file re-read with `pread` into a reused buffer, and
//! tiny scanners for its `Key: value` lines.
//!
//! Hand-written instead of `procfs` on the external sampler's hot path only:
//! per tick `procfs` costs ~124 µs (it reopens each file and builds a map of
//! every line), while re-reading open files and picking out the dozen keys
//! memqual needs costs about what the kernel takes to generate the text. The
//! in-process marker keeps using `procfs`; tests check both agree.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// First size of a [`ReadBuf`]: every file the sampler reads fits (vmstat, the
/// largest, is about 4 KiB), so the buffer never grows in a normal run.
const INITIAL_BUF: usize = 16 << 10;

/// One reusable read buffer, zeroed once and shared by the files a probe reads
/// each tick. Sharing keeps the tick's cache footprint to the bytes the kernel
/// wrote: clearing and re-zeroing an 8–16 KiB buffer per file per tick (as an
/// earlier version did) cost more after a 50 ms idle gap than parsing does.
pub struct ReadBuf {
    buf: Vec<u8>,
}

impl Default for ReadBuf {
    fn default() -> Self {
        ReadBuf {
            buf: vec![0; INITIAL_BUF],
        }
    }
}

/// A `/proc` file kept open and re-read from offset 0 with `pread`.
pub struct ProcFile {
    file: File,
}

impl ProcFile {
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        Ok(ProcFile {
            file: File::open(path)?,
        })
    }

    /// The file's current contents (seq_file regenerates them at offset 0),
    /// read until `pread` returns 0, into `into`.
    // Inlined into the probes, with `scan_keys`: after the 50 ms gap each
    // separate function is more code met cold, and a call per file and per
    // scan cost the process tick about 1.5 µs of its floor's 38 (`tick_floor`).
    #[inline(always)]
    pub fn read<'a>(&self, into: &'a mut ReadBuf) -> std::io::Result<&'a [u8]> {
        let buf = &mut into.buf;
        let mut len = 0;
        loop {
            if len == buf.len() {
                // Rare (a file over 16 KiB): grow, zeroing only the new part.
                buf.resize(buf.len() * 2, 0);
            }
            match self.file.read_at(&mut buf[len..], len as u64) {
                Ok(0) => break,
                Ok(n) => len += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(&buf[..len])
    }
}

/// Fill `out[i]` with the number after `keys[i]` for each line of `text`
/// shaped `Key<sep> value [kB]` (sep is ':' in status/meminfo, ' ' in
/// vmstat). Keys not found stay `None`. Values are returned as written
/// (callers convert kB).
/// Inlined into each probe, as [`ProcFile::read`] is, for the reason given there.
#[inline(always)]
pub fn scan_keys(text: &[u8], sep: u8, keys: &[&[u8]], out: &mut [Option<u64>]) {
    debug_assert_eq!(keys.len(), out.len());
    debug_assert!(keys.len() <= 64);
    // After the sampler's 50 ms idle gap almost none of this is in cache:
    // scanning a status file for its seven keys took about 1,100 cycles
    // back to back and about 2,400 after a 50 ms sleep, so a tick pays for
    // the code and branches it touches, not its instructions. Hence one
    // small byte loop, no vector line search and no separate number parser,
    // and a key compared only when its first byte matches.
    // A key's first line counts, even when its value does not parse.
    let mut unseen: u64 = match keys.len() {
        64.. => u64::MAX,
        len => (1 << len) - 1,
    };
    let n = text.len();
    let mut i = 0;
    while unseen != 0 && i < n {
        let first = text[i];
        let mut end = i;
        for (bit, (k, slot)) in keys.iter().zip(out.iter_mut()).enumerate() {
            if k.first() == Some(&first)
                && text.get(i + k.len()) == Some(&sep)
                && text[i..].starts_with(k)
            {
                if unseen & (1 << bit) != 0 {
                    let (value, after) = leading_u64(text, i + k.len() + 1);
                    *slot = value;
                    end = after;
                    unseen &= !(1 << bit);
                }
                break;
            }
        }
        i = line_end(text, end) + 1;
    }
}

/// The index of the first '\n' at or after `at`, or the text's length.
fn line_end(text: &[u8], mut at: usize) -> usize {
    while at < text.len() && text[at] != b'\n' {
        at += 1;
    }
    at
}

/// The run of digits at `text[from..]` after optional spaces/tabs, and the
/// index just past it; `None` when there are no digits or they overflow a u64.
fn leading_u64(text: &[u8], mut from: usize) -> (Option<u64>, usize) {
    while from < text.len() && matches!(text[from], b' ' | b'\t') {
        from += 1;
    }
    let start = from;
    let mut value = Some(0u64);
    while from < text.len() && text[from].is_ascii_digit() {
        value = value
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| v.checked_add(u64::from(text[from] - b'0')));
        from += 1;
    }
    (if from > start { value } else { None }, from)
}

/// The first `N` whitespace-separated fields of `text` (statm's line of page
/// counts) as numbers; a missing or non-numeric field is `None`.
/// Inlined into the process probe, as [`ProcFile::read`] is.
#[inline]
pub fn leading_fields<const N: usize>(text: &[u8]) -> [Option<u64>; N] {
    let mut out = [None; N];
    let mut at = 0;
    for slot in &mut out {
        while at < text.len() && text[at].is_ascii_whitespace() {
            at += 1;
        }
        let (value, mut end) = leading_u64(text, at);
        if ends_token(text, end) {
            *slot = value;
        } else {
            while !ends_token(text, end) {
                end += 1;
            }
        }
        at = end;
    }
    out
}

/// Whether `text[at]` ends a whitespace-separated token (or `at` is past the end).
fn ends_token(text: &[u8], at: usize) -> bool {
    text.get(at).is_none_or(u8::is_ascii_whitespace)
}

/// Start fetching `len` bytes of code at `start` into the cache, so that
/// the lines arrive while the kernel generates the first file instead of
/// one by one as the tick reaches them. A hint only: a prefetch never
/// faults, and where there is none (not x86-64) this does nothing.
///
/// Why: after the sampler's 50 ms gap the tick's own code is out of cache;
/// the cold process tick paid about 2 µs above its floor, mostly that code
/// and its branch state, and prefetching the code won back about 0.5 µs
/// (`tick_floor`, docs/measurement.md).
#[inline(always)]
pub fn prefetch_code(start: *const u8, len: usize) {
    // A loop, not unrolled: fully unrolled, the prefetches of a 4 KiB span
    // were half a kilobyte of code met cold themselves.
    #[cfg(target_arch = "x86_64")]
    for offset in (0..std::hint::black_box(len)).step_by(64) {
        // SAFETY: PREFETCHT0 only hints the cache; it reads nothing into a
        // register and never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                start.wrapping_add(offset).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, len);
}

/// One PSI line: `some avg10=0.12 avg60=… avg300=… total=123`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PsiLine {
    pub avg10: f64,
    pub total_us: u64,
}

/// Parse the `some` and `full` lines of a PSI file. The kernel writes
/// `avg10` as `%lu.%02lu`; it is read as digits, a point and digits (no
/// general float parser on the tick's path, for the reason given at
/// [`scan_keys`]), and divided once, so it is the double nearest the text.
pub fn parse_psi(text: &[u8]) -> (Option<PsiLine>, Option<PsiLine>) {
    let (mut some, mut full) = (None, None);
    let mut i = 0;
    while i < text.len() {
        let slot = if text[i..].starts_with(b"some ") {
            Some(&mut some)
        } else if text[i..].starts_with(b"full ") {
            Some(&mut full)
        } else {
            None
        };
        let (mut avg10, mut total) = (None, None);
        let mut at = i;
        if slot.is_some() {
            at += 5;
            while at < text.len() && text[at] != b'\n' {
                if text[at..].starts_with(b"avg10=") {
                    let (value, end) = decimal(text, at + 6);
                    avg10 = value.filter(|_| ends_token(text, end));
                    at = end;
                } else if text[at..].starts_with(b"total=") {
                    let (value, end) = leading_u64(text, at + 6);
                    total = value.filter(|_| ends_token(text, end));
                    at = end;
                }
                while !ends_token(text, at) {
                    at += 1;
                }
                while at < text.len() && matches!(text[at], b' ' | b'\t') {
                    at += 1;
                }
            }
        }
        if let (Some(slot), Some(avg10), Some(total_us)) = (slot, avg10, total) {
            *slot = Some(PsiLine { avg10, total_us });
        }
        i = line_end(text, at) + 1;
    }
    (some, full)
}

/// `digits[.digits]` at `text[from..]` as the double nearest it, and the
/// index just past it; `None` without digits before the point or after it.
fn decimal(text: &[u8], from: usize) -> (Option<f64>, usize) {
    let (whole, mut end) = leading_u64(text, from);
    let Some(whole) = whole else {
        return (None, end);
    };
    if text.get(end) != Some(&b'.') {
        return (Some(whole as f64), end);
    }
    let start = end + 1;
    let mut scaled = Some(whole);
    let mut scale = 1u64;
    end = start;
    while end < text.len() && text[end].is_ascii_digit() {
        scaled = scaled
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| v.checked_add(u64::from(text[end] - b'0')));
        scale = scale.saturating_mul(10);
        end += 1;
    }
    // One rounding (the division) while the digits fit 2^53 exactly, as
    // the kernel's do; more digits than that are refused, not approximated.
    let value = scaled.filter(|v| end > start && *v <= 1 << 53);
    (value.map(|v| v as f64 / scale as f64), end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_keys_picks_exact_keys_only() {
        let text = b"VmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nRssAnon:\t 512 kB\nRssAnonX: 9 kB\n";
        let mut out = [None; 3];
        scan_keys(text, b':', &[b"VmRSS", b"RssAnon", b"VmSwap"], &mut out);
        assert_eq!(out, [Some(1024), Some(512), None]);
        let vmstat = b"nr_free_pages 100\npgpgin 5\npgpgout 7\npswpin 0\n";
        let mut out = [None; 3];
        scan_keys(vmstat, b' ', &[b"pgpgout", b"pswpin", b"pgpgin"], &mut out);
        assert_eq!(out, [Some(7), Some(0), Some(5)]);
    }

    #[test]
    fn statm_fields_parse_and_garbage_is_none() {
        assert_eq!(
            leading_fields::<3>(b"1000 250 30 5 0 100 0\n"),
            [Some(1000), Some(250), Some(30)]
        );
        assert_eq!(leading_fields::<3>(b"12 x3\n"), [Some(12), None, None]);
        assert_eq!(
            leading_fields::<2>(b"99999999999999999999999 1"),
            [None, Some(1)]
        );
        assert_eq!(leading_fields::<2>(b""), [None, None]);
        // A field that is not all digits is None and the next is still read.
        assert_eq!(leading_fields::<3>(b"12x 5 7"), [None, Some(5), Some(7)]);
        assert_eq!(leading_fields::<2>(b"  3\t4\n"), [Some(3), Some(4)]);
    }

    #[test]
    fn a_file_larger_than_the_buffer_is_read_whole() {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        let text: Vec<u8> = (0..40_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        std::io::Write::write_all(&mut tmp, &text).unwrap();
        let f = ProcFile::open(tmp.path()).unwrap();
        let mut buf = ReadBuf::default();
        assert_eq!(f.read(&mut buf).unwrap(), &text[..]);
        // A shorter re-read returns only the new length, not stale bytes.
        std::fs::write(tmp.path(), b"short").unwrap();
        assert_eq!(f.read(&mut buf).unwrap(), b"short");
    }

    #[test]
    fn a_key_whose_value_does_not_parse_is_none_and_the_scan_goes_on() {
        // The first line of a key counts: a later duplicate does not fill it,
        // and does not use up the count so that a key after it is missed.
        let mut out = [None; 2];
        scan_keys(
            b"VmRSS: x kB\nVmRSS: 1 kB\nVmHWM: 2 kB\n",
            b':',
            &[b"VmRSS", b"VmHWM"],
            &mut out,
        );
        assert_eq!(out, [None, Some(2)]);
    }

    #[test]
    fn garbage_values_are_none_not_zero() {
        let mut out = [None; 2];
        scan_keys(
            b"VmRSS: lots kB\nVmHWM:",
            b':',
            &[b"VmRSS", b"VmHWM"],
            &mut out,
        );
        assert_eq!(out, [None, None]);
    }

    /// What `scan_keys` must return, the slow and obvious way.
    fn scan_by_lines(text: &str, sep: char, keys: &[&str]) -> Vec<Option<u64>> {
        let mut out = vec![None; keys.len()];
        for line in text.split('\n') {
            for (k, slot) in keys.iter().zip(out.iter_mut()) {
                let Some(rest) = line.strip_prefix(k).and_then(|r| r.strip_prefix(sep)) else {
                    continue;
                };
                if slot.is_none() {
                    let digits: String = rest
                        .trim_start_matches([' ', '\t'])
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .collect();
                    *slot = Some(digits.parse::<u64>().ok());
                }
                break;
            }
        }
        out.into_iter().map(Option::flatten).collect()
    }

    proptest::proptest! {
        #[test]
        fn scan_keys_agrees_with_a_line_by_line_reading(
            lines in proptest::collection::vec(
                ("(VmRSS|VmRSSx|VmHWM|Rss|RssAnon|pgpgin|[A-Za-z]{0,9})", "[:  ]", "[ \t]{0,3}", "[0-9]{0,22}", "( kB)?"),
                0..40,
            ),
        ) {
            let text: String = lines
                .iter()
                .map(|(k, sep, pad, v, unit)| format!("{k}{sep}{pad}{v}{unit}\n"))
                .collect();
            let keys = ["VmRSS", "VmHWM", "RssAnon", "pgpgin"];
            let key_bytes = keys.map(str::as_bytes);
            for sep in [':', ' '] {
                let mut out = [None; 4];
                scan_keys(text.as_bytes(), sep as u8, &key_bytes, &mut out);
                proptest::prop_assert_eq!(out.to_vec(), scan_by_lines(&text, sep, &keys), "{:?}", text);
            }
        }

        #[test]
        fn a_psi_average_is_the_double_nearest_its_text(whole in 0u64..100_000, frac in 0u64..100) {
            let text = format!("some avg10={whole}.{frac:02} avg60=0.00 avg300=0.00 total=5\n");
            let (some, _) = parse_psi(text.as_bytes());
            let expected: f64 = format!("{whole}.{frac:02}").parse().unwrap();
            proptest::prop_assert_eq!(some.map(|p| p.avg10.to_bits()), Some(expected.to_bits()));
        }
    }

    #[test]
    fn psi_lines_parse() {
        let text = b"some avg10=1.50 avg60=0.20 avg300=0.00 total=12345\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=7\n";
        let (some, full) = parse_psi(text);
        assert_eq!(
            some,
            Some(PsiLine {
                avg10: 1.5,
                total_us: 12345
            })
        );
        assert_eq!(
            full,
            Some(PsiLine {
                avg10: 0.0,
                total_us: 7
            })
        );
        assert_eq!(parse_psi(b"some avg10=x total=1\n"), (None, None));
        assert_eq!(parse_psi(b"some avg10=1.5x total=1\n"), (None, None));
        assert_eq!(parse_psi(b"some avg10=1. total=1\n"), (None, None));
        assert_eq!(
            parse_psi(b"some avg10=1.25 total=1x\nfull avg10=2 total=3"),
            (
                None,
                Some(PsiLine {
                    avg10: 2.0,
                    total_us: 3
                })
            )
        );
        // A key must start a token: `xavg10=` is not `avg10=`.
        assert_eq!(
            parse_psi(b"some xavg10=1.00 avg10=0.50 total=9\n")
                .0
                .map(|p| p.avg10),
            Some(0.5)
        );
    }

    #[test]
    fn prefetching_code_never_reads_what_it_names() {
        // A hint, not a load: a span over unmapped addresses (null, and one
        // that wraps past the top of the address space) must not fault, as
        // a `read_volatile` or a copy "warming" the code would.
        prefetch_code(std::ptr::null(), 8 << 10);
        prefetch_code(usize::MAX as *const u8, 4 << 10);
        let text = b"VmRSS:\t 7 kB\n";
        prefetch_code(text.as_ptr(), text.len());
        let mut out = [None];
        scan_keys(text, b':', &[b"VmRSS"], &mut out);
        assert_eq!(out, [Some(7)]);
    }

    #[test]
    fn reread_sees_fresh_contents() {
        let _lock = crate::OWN_MEMORY_TEST_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let f = ProcFile::open("/proc/self/status").unwrap();
        let mut buf = ReadBuf::default();
        let mut rss = || {
            let mut out = [None];
            scan_keys(f.read(&mut buf).unwrap(), b':', &[b"VmRSS"], &mut out);
            out[0].unwrap()
        };
        let before = rss();
        let mut block = vec![0u8; 32 << 20];
        for i in (0..block.len()).step_by(4096) {
            block[i] = 1;
        }
        let after = rss();
        std::hint::black_box(&block);
        assert!(after >= before + 30 * 1024, "{before} kB -> {after} kB");
    }
}
