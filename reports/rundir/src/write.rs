//! Append-only line files. Each line goes to the file in one `write_all`
//! of the line and its newline, unbuffered, so what is on disk is always
//! whole lines plus at most one torn line after a failed write; after the
//! first failure nothing more is written (a later success would bury the
//! torn line in the middle of the file).

use crate::RunDirError;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// An append-only line file inside a run directory.
#[derive(Debug)]
pub struct Appender {
    file: File,
    path: PathBuf,
    line: Vec<u8>,
    failed: Option<String>,
}

impl Appender {
    pub(crate) fn new(file: File, path: PathBuf) -> Self {
        Appender {
            file,
            path,
            line: Vec::new(),
            failed: None,
        }
    }

    /// Append `text` and a newline (`text` must not hold one).
    pub fn append(&mut self, text: &[u8]) -> Result<(), RunDirError> {
        if let Some(first) = &self.failed {
            return Err(RunDirError::Poisoned {
                path: self.path.clone(),
                first: first.clone(),
            });
        }
        self.line.clear();
        self.line.extend_from_slice(text);
        self.line.push(b'\n');
        self.file.write_all(&self.line).map_err(|source| {
            self.failed = Some(source.to_string());
            RunDirError::Io {
                op: "append to",
                path: self.path.clone(),
                error: source,
            }
        })
    }

    /// Append `value` as one line of compact JSON.
    pub fn append_json(&mut self, value: &impl serde::Serialize) -> Result<(), RunDirError> {
        let text = serde_json::to_vec(value).map_err(|e| RunDirError::Serialize {
            what: self.path.display().to_string(),
            reason: e.to_string(),
        })?;
        self.append(&text)
    }

    /// The file's path, for messages.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

/// An append-only CSV file: the header with the first row, then one row per
/// call, each written whole.
#[derive(Debug)]
pub struct CsvAppender {
    out: Appender,
    header_written: bool,
}

impl CsvAppender {
    /// Rows go to `out`; the header is written with the first row.
    pub fn new(out: Appender) -> Self {
        CsvAppender {
            out,
            header_written: false,
        }
    }

    /// Append one row (and, the first time, the header).
    pub fn append(&mut self, row: &impl serde::Serialize) -> Result<(), RunDirError> {
        let serialize = |reason: String| RunDirError::Serialize {
            what: self.out.path.display().to_string(),
            reason,
        };
        let mut writer = csv::WriterBuilder::new()
            .has_headers(!self.header_written)
            .terminator(csv::Terminator::Any(b'\n'))
            .from_writer(Vec::new());
        writer
            .serialize(row)
            .map_err(|e| serialize(e.to_string()))?;
        let bytes = writer.into_inner().map_err(|e| serialize(e.to_string()))?;
        self.header_written = true;
        // The csv writer ends every record with a newline; the appender adds its own.
        let mut result = Ok(());
        for line in bytes
            .strip_suffix(b"\n")
            .unwrap_or(&bytes)
            .split(|&b| b == b'\n')
        {
            result = self.out.append(line);
            if result.is_err() {
                break;
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Serialize)]
    struct Row {
        a: u32,
        b: String,
    }

    #[test]
    fn csv_rows_arrive_whole_with_one_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.csv");
        let file = File::create(&path).unwrap();
        let mut csv = CsvAppender::new(Appender::new(file, path.clone()));
        csv.append(&Row {
            a: 1,
            b: "x".into(),
        })
        .unwrap();
        csv.append(&Row {
            a: 2,
            b: "y,z".into(),
        })
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "a,b\n1,x\n2,\"y,z\"\n"
        );
    }

    /// Linux's /dev/full fails every write with ENOSPC (macOS has none).
    #[cfg(target_os = "linux")]
    #[test]
    fn after_a_failed_write_nothing_more_is_written() {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("Linux has /dev/full");
        let mut out = Appender::new(full, PathBuf::from("/dev/full"));
        let first = out.append(b"x").unwrap_err();
        assert!(first.is_disk_full(), "{first}");
        let second = out.append(b"y").unwrap_err();
        assert!(matches!(second, RunDirError::Poisoned { .. }), "{second}");
        assert!(second.to_string().contains("No space left"), "{second}");
    }
}
