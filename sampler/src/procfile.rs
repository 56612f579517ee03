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
pub fn scan_keys(text: &[u8], sep: u8, keys: &[&[u8]], out: &mut [Option<u64>]) {
    debug_assert_eq!(keys.len(), out.len());
    let mut left = keys.len();
    let mut rest = text;
    // memchr finds line ends many bytes at a time, and a key is compared
    // only when its first byte matches: a tick scans ~300 lines, and a
    // byte-at-a-time split with a full compare per key was most of the
    // tick's own instructions (callgrind).
    while left > 0 && !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let line = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or_default();
        let Some(&first) = line.first() else {
            continue;
        };
        for (k, slot) in keys.iter().zip(out.iter_mut()) {
            if k.first() == Some(&first)
                && slot.is_none()
                && line.get(k.len()) == Some(&sep)
                && line.starts_with(k)
            {
                *slot = parse_leading_u64(&line[k.len() + 1..]);
                left -= 1;
                break;
            }
        }
    }
}

/// The first run of digits after optional spaces/tabs; `None` when there is
/// none or it overflows a u64.
fn parse_leading_u64(s: &[u8]) -> Option<u64> {
    let s = &s[s.iter().position(|b| !matches!(b, b' ' | b'\t'))?..];
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    digits(&s[..end])
}

/// The value of a run of ASCII digits; `None` when empty or over u64::MAX.
fn digits(d: &[u8]) -> Option<u64> {
    if d.is_empty() {
        return None;
    }
    d.iter().try_fold(0u64, |acc, &c| {
        acc.checked_mul(10)?
            .checked_add(u64::from(c.wrapping_sub(b'0')))
    })
}

/// The first `N` whitespace-separated fields of `text` (statm's line of page
/// counts) as numbers; a missing or non-numeric field is `None`.
pub fn leading_fields<const N: usize>(text: &[u8]) -> [Option<u64>; N] {
    let mut out = [None; N];
    let fields = text
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    for (slot, field) in out.iter_mut().zip(fields) {
        *slot = field
            .iter()
            .all(u8::is_ascii_digit)
            .then(|| digits(field))
            .flatten();
    }
    out
}

/// One PSI line: `some avg10=0.12 avg60=… avg300=… total=123`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PsiLine {
    pub avg10: f64,
    pub total_us: u64,
}

/// Parse the `some` and `full` lines of a PSI file.
pub fn parse_psi(text: &[u8]) -> (Option<PsiLine>, Option<PsiLine>) {
    let (mut some, mut full) = (None, None);
    for line in text.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let mut parts = line.split_ascii_whitespace();
        let slot = match parts.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        let (mut avg10, mut total) = (None, None);
        for kv in parts {
            match kv.split_once('=') {
                Some(("avg10", v)) => avg10 = v.parse::<f64>().ok(),
                Some(("total", v)) => total = v.parse::<u64>().ok(),
                _ => {}
            }
        }
        if let (Some(avg10), Some(total_us)) = (avg10, total) {
            *slot = Some(PsiLine { avg10, total_us });
        }
    }
    (some, full)
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
