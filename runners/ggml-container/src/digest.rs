//! SHA-256 helpers shared by the parser and the tools around it.

use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// Lower-case hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// SHA-256 of a byte slice, as hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 of a file, streamed in 1 MiB chunks, as hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hash = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(hex(&hash.finalize()));
        }
        hash.update(&buf[..n]);
    }
}

/// A SHA-256 computed on a second thread, so that a parser hashing each
/// payload as well as the whole file uses both cores. Small updates are
/// batched into 1 MiB messages; buffers are recycled.
pub(crate) struct BackgroundSha256 {
    pending: Vec<u8>,
    full: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    empty: std::sync::mpsc::Receiver<Vec<u8>>,
    worker: Option<std::thread::JoinHandle<String>>,
    /// Buffers created so far (the one in `pending` included).
    allocated: usize,
}

const BATCH: usize = 1 << 20;

/// Buffers circulating between the parser and the hashing thread.
const IN_FLIGHT: usize = 6;

impl BackgroundSha256 {
    pub(crate) fn new() -> Self {
        let (full_tx, full_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(IN_FLIGHT);
        let (empty_tx, empty_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let worker = std::thread::Builder::new()
            .name("sha256".into())
            .spawn(move || {
                let mut hash = Sha256::new();
                for mut buf in full_rx {
                    hash.update(&buf);
                    buf.clear();
                    // The parser may be gone already; then the buffer just drops.
                    let _ = empty_tx.send(buf);
                }
                hex(&hash.finalize())
            })
            .ok();
        Self {
            pending: Vec::with_capacity(BATCH),
            full: Some(full_tx),
            empty: empty_rx,
            worker,
            allocated: 1,
        }
    }

    /// A placeholder that hashes nothing (no thread), for moving a real one out.
    pub(crate) fn idle() -> Self {
        let (_, empty) = std::sync::mpsc::channel();
        Self {
            pending: Vec::new(),
            full: None,
            empty,
            worker: None,
            allocated: 0,
        }
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        if self.pending.len() >= BATCH {
            self.send();
        }
    }

    /// Hash `buf` without copying it; returns an empty buffer to reuse.
    pub(crate) fn update_owned(&mut self, buf: Vec<u8>) -> Vec<u8> {
        if !self.pending.is_empty() {
            self.send();
        }
        let spare = std::mem::replace(&mut self.pending, buf);
        self.send();
        spare
    }

    fn send(&mut self) {
        // At most IN_FLIGHT buffers exist: past that, wait for a spent one
        // (fresh allocations would page-fault on every batch).
        let next = match self.empty.try_recv() {
            Ok(buf) => Some(buf),
            Err(_) if self.allocated < IN_FLIGHT => None,
            Err(_) => self.empty.recv().ok(),
        };
        let next = next.unwrap_or_else(|| {
            self.allocated += 1;
            Vec::with_capacity(BATCH)
        });
        let batch = std::mem::replace(&mut self.pending, next);
        if let Some(tx) = &self.full {
            // A send fails only if the worker is gone; finish() reports that.
            let _ = tx.send(batch);
        }
    }

    /// The hex digest of everything passed to [`Self::update`]; `None` if the
    /// hashing thread could not be started or died.
    pub(crate) fn finish(mut self) -> Option<String> {
        if !self.pending.is_empty() {
            self.send();
        }
        self.full = None; // closes the channel: the worker drains and returns
        self.worker.take()?.join().ok()
    }
}

impl Drop for BackgroundSha256 {
    /// A parse that stops early (a defect) must not leave its hashing
    /// thread running after it returns: close the channel and join it.
    fn drop(&mut self) {
        self.full = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
