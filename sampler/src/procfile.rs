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

pub struct ProcFile {
    file: File,
    buf: Vec<u8>,
}

impl ProcFile {
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let file = File::open(path)?;
        Ok(ProcFile {
            file,
            buf: Vec::with_capacity(8192),
        })
    }

    /// The file's current contents (seq_file regenerates them at offset 0).
    pub fn read(&mut self) -> std::io::Result<&[u8]> {
        self.buf.clear();
        let mut offset = 0u64;
        loop {
            if self.buf.capacity() - self.buf.len() < 4096 {
                self.buf.reserve(8192);
            }
            let start = self.buf.len();
            self.buf.resize(self.buf.capacity(), 0);
            let n = self.file.read_at(&mut self.buf[start..], offset);
            match n {
                Ok(0) => {
                    self.buf.truncate(start);
                    break;
                }
                Ok(n) => {
                    self.buf.truncate(start + n);
                    offset += n as u64;
                }
                Err(e) => {
                    self.buf.truncate(start);
                    return Err(e);
                }
            }
        }
        Ok(&self.buf)
    }
}

/// Fill `out[i]` with the number after `keys[i]` for each line of `text`
/// shaped `Key<sep> value [kB]` (sep is ':' in status/meminfo, ' ' in
/// vmstat). Keys not found stay `None`. Values are returned as written
/// (callers convert kB).
pub fn scan_keys(text: &[u8], sep: u8, keys: &[&[u8]], out: &mut [Option<u64>]) {
    debug_assert_eq!(keys.len(), out.len());
    let mut left = keys.len();
    for line in text.split(|&b| b == b'\n') {
        let Some(pos) = line.iter().position(|&b| b == sep) else {
            continue;
        };
        let key = &line[..pos];
        if let Some(i) = keys.iter().position(|k| *k == key)
            && out[i].is_none()
        {
            out[i] = parse_leading_u64(&line[pos + 1..]);
            left -= 1;
            if left == 0 {
                break;
            }
        }
    }
}

/// The first run of digits after optional spaces/tabs.
fn parse_leading_u64(s: &[u8]) -> Option<u64> {
    let s = &s[s.iter().position(|b| !matches!(b, b' ' | b'\t'))?..];
    let end = s
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len());
    std::str::from_utf8(&s[..end]).ok()?.parse().ok()
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
        let mut f = ProcFile::open("/proc/self/status").unwrap();
        let rss = |f: &mut ProcFile| {
            let mut out = [None];
            scan_keys(f.read().unwrap(), b':', &[b"VmRSS"], &mut out);
            out[0].unwrap()
        };
        let before = rss(&mut f);
        let mut block = vec![0u8; 32 << 20];
        for i in (0..block.len()).step_by(4096) {
            block[i] = 1;
        }
        let after = rss(&mut f);
        std::hint::black_box(&block);
        assert!(after >= before + 30 * 1024, "{before} kB -> {after} kB");
    }
}
