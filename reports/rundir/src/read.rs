//! Bounded reading: whole small files up to a limit, and line-oriented files
//! (JSON lines, CSV) streamed line by line with a per-line limit. A last
//! line without its end-of-line was cut short by a failed write: it is
//! dropped, never half-parsed, and the caller learns how many bytes went.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Take};
use std::os::unix::fs::FileExt;

/// Read at most `limit` bytes of `file` (whose `fstat` size is `size`);
/// `Err(size)` when the file holds more.
pub fn read_bounded(mut file: File, size: u64, limit: u64) -> io::Result<Result<Vec<u8>, u64>> {
    if size > limit {
        return Ok(Err(size));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    // One byte over the limit tells a file that grew after the fstat.
    (&mut file).take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Ok(Err(bytes.len() as u64));
    }
    Ok(Ok(bytes))
}

/// The length of the prefix of `file` (of `size` bytes) that ends with a
/// newline: everything after it is a torn last line.
pub fn complete_prefix_len(file: &File, size: u64) -> io::Result<u64> {
    const CHUNK: u64 = 64 * 1024;
    let mut end = size;
    let mut buf = vec![0u8; CHUNK as usize];
    while end > 0 {
        let start = end.saturating_sub(CHUNK);
        let len = (end - start) as usize;
        file.read_exact_at(&mut buf[..len], start)?;
        if let Some(pos) = buf[..len].iter().rposition(|&b| b == b'\n') {
            return Ok(start + pos as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// A line-oriented file: only its complete lines, each at most `max_line`
/// bytes (without the newline).
pub struct Lines {
    reader: BufReader<Take<File>>,
    max_line: u64,
    line_no: u64,
}

/// Why a line could not be read.
#[derive(Debug)]
pub enum LineError {
    Io(io::Error),
    TooLong { line: u64 },
}

impl Lines {
    /// `file` limited to its first `complete` bytes.
    pub fn new(file: File, complete: u64, max_line: u64) -> Lines {
        Lines {
            reader: BufReader::with_capacity(64 * 1024, file.take(complete)),
            max_line,
            line_no: 0,
        }
    }

    /// The next line (1-based number, bytes without the newline), or `None`
    /// at the end.
    pub fn next_line(&mut self, line: &mut Vec<u8>) -> Option<Result<u64, LineError>> {
        line.clear();
        loop {
            let available = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Some(Err(LineError::Io(e))),
            };
            if available.is_empty() {
                // Only complete lines are exposed, so this is the clean end.
                return if line.is_empty() {
                    None
                } else {
                    self.line_no += 1;
                    Some(Ok(self.line_no))
                };
            }
            let (take, done) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (available.len(), false),
            };
            let body = if done { take - 1 } else { take };
            line.extend_from_slice(&available[..body]);
            self.reader.consume(take);
            if line.len() as u64 > self.max_line {
                self.line_no += 1;
                return Some(Err(LineError::TooLong { line: self.line_no }));
            }
            if done {
                self.line_no += 1;
                return Some(Ok(self.line_no));
            }
        }
    }
}

/// A reader over complete lines that fails on a line longer than `max_line`,
/// for parsers (csv) that read bytes themselves.
pub struct BoundedLineReader {
    inner: BufReader<Take<File>>,
    max_line: u64,
    run: u64,
}

impl BoundedLineReader {
    pub fn new(file: File, complete: u64, max_line: u64) -> Self {
        BoundedLineReader {
            inner: BufReader::with_capacity(64 * 1024, file.take(complete)),
            max_line,
            run: 0,
        }
    }
}

impl Read for BoundedLineReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(out)?;
        // Only the newlines need looking at (memchr's vector scan): the
        // bytes between two of them, or since the last read, are one line.
        let mut start = 0usize;
        for nl in memchr::memchr_iter(b'\n', &out[..n]) {
            self.check(nl - start)?;
            self.run = 0;
            start = nl + 1;
        }
        self.check(n - start)?;
        self.run += (n - start) as u64;
        Ok(n)
    }
}

impl BoundedLineReader {
    /// Fail when the current line, grown by `more` bytes, is too long.
    fn check(&self, more: usize) -> io::Result<()> {
        if self.run + more as u64 > self.max_line {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a line longer than {} bytes", self.max_line),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_with(bytes: &[u8]) -> (tempfile::NamedTempFile, File, u64) {
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(bytes).unwrap();
        let f = File::open(tmp.path()).unwrap();
        (tmp, f, bytes.len() as u64)
    }

    #[test]
    fn the_complete_prefix_ends_at_the_last_newline() {
        for (text, expect) in [
            (&b""[..], 0),
            (b"abc", 0),
            (b"a\n", 2),
            (b"a\nb", 2),
            (b"a\nbc\n", 5),
            (b"a\nbc\n{\"torn", 5),
        ] {
            let (_t, f, size) = file_with(text);
            assert_eq!(complete_prefix_len(&f, size).unwrap(), expect, "{text:?}");
        }
        // Across chunk boundaries.
        let mut big = vec![b'x'; 200_000];
        big[70_000] = b'\n';
        let (_t, f, size) = file_with(&big);
        assert_eq!(complete_prefix_len(&f, size).unwrap(), 70_001);
    }

    #[test]
    fn lines_stop_at_the_limit_and_number_each_line() {
        let (_t, f, size) = file_with(b"one\n\nthree\nfourfourfour\n");
        let mut lines = Lines::new(f, size, 5);
        let mut buf = Vec::new();
        assert_eq!(lines.next_line(&mut buf).unwrap().unwrap(), 1);
        assert_eq!(buf, b"one");
        assert_eq!(lines.next_line(&mut buf).unwrap().unwrap(), 2);
        assert!(buf.is_empty());
        assert_eq!(lines.next_line(&mut buf).unwrap().unwrap(), 3);
        assert_eq!(buf, b"three");
        assert!(matches!(
            lines.next_line(&mut buf),
            Some(Err(LineError::TooLong { line: 4 }))
        ));
    }

    #[test]
    fn bounded_reads_refuse_more_than_the_limit() {
        let (_t, f, size) = file_with(b"0123456789");
        assert_eq!(read_bounded(f, size, 10).unwrap().unwrap(), b"0123456789");
        let (_t, f, size) = file_with(b"0123456789");
        assert_eq!(read_bounded(f, size, 9).unwrap().unwrap_err(), 10);
    }

    #[test]
    fn a_line_reader_refuses_a_long_line_even_across_small_reads() {
        let text = b"ab\ncdef\n\nghi\n";
        for (max, whole) in [(4, true), (3, false)] {
            for chunk in [1usize, 2, 3, 5, 64] {
                let (_t, f, size) = file_with(text);
                let mut r = BoundedLineReader::new(f, size, max);
                let (mut got, mut buf) = (Vec::new(), vec![0u8; chunk]);
                let outcome = loop {
                    match r.read(&mut buf) {
                        Ok(0) => break Ok(()),
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(e) => break Err(e),
                    }
                };
                if whole {
                    assert!(outcome.is_ok(), "max {max} chunk {chunk}");
                    assert_eq!(got, text);
                } else {
                    let e = outcome.unwrap_err();
                    assert!(e.to_string().contains("longer than 3"), "{e}");
                    // The refusal comes at "cdef", never past it.
                    assert!(got.len() < 8, "max {max} chunk {chunk}: {got:?}");
                }
            }
        }
    }
}
