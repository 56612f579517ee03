//! whisper.cpp's custom model loader (`whisper_model_loader`) reading the
//! verified model from the worker's own open file, and hashing every byte as
//! whisper.cpp consumes it.
//!
//! whisper.cpp 1.8.3 (`whisper_model_load`) reads the model strictly in
//! order and never seeks: header, mel filters, vocabulary, then tensor
//! records until `eof` is true after a record header read. It ignores the
//! byte count `read` returns. This loader therefore keeps its own offset
//! (`pread`, so the file position used by the strict parse does not matter),
//! makes `eof` sticky once a read reached the end of the file (an
//! `std::ifstream`'s behaviour, which the file-path entry point used), and
//! zero-fills whatever part of a request it could not satisfy, so whisper.cpp
//! never sees uninitialised memory.
//!
//! After loading, [`FileLoader::finish`] gives the count and SHA-256 of the
//! bytes handed to whisper.cpp; the caller compares them with the verified
//! file's and refuses the context when they differ. Small reads are served
//! from a 64 KiB buffer (as `ifstream` buffered them); large ones (tensor
//! payloads) are read straight into whisper.cpp's buffer.

use sha2::{Digest, Sha256};
use std::ffi::c_void;
use std::fs::File;
use std::os::fd::AsRawFd;
use whisper_rs::whisper_rs_sys as sys;

const BUFFER: usize = 64 << 10;

/// What whisper.cpp consumed through the loader.
#[derive(Debug)]
pub struct Consumed {
    /// Bytes handed to whisper.cpp (zero-filled parts past a short read excluded).
    pub bytes: u64,
    /// Lowercase hex SHA-256 of those bytes.
    pub sha256: String,
    /// Time spent hashing (inside the load), so the cold-load time can be
    /// reported without the worker's own check.
    pub hash_ns: u64,
    /// The read error that ended the stream early, if one did.
    pub error: Option<std::io::Error>,
}

/// The loader's state; `whisper_model_loader::context` points at it.
pub struct FileLoader<'f> {
    file: &'f File,
    /// File offset of the next read.
    offset: u64,
    buffer: Vec<u8>,
    /// `buffer[pos..filled]` is read but not yet handed out; `buffer[..pos]`
    /// was handed out and is hashed at the next refill or at the end.
    pos: usize,
    filled: usize,
    hash: Sha256,
    delivered: u64,
    hash_ns: u64,
    eof: bool,
    error: Option<std::io::Error>,
}

impl<'f> FileLoader<'f> {
    /// A loader reading `file` from its first byte.
    pub fn new(file: &'f File) -> Self {
        FileLoader {
            file,
            offset: 0,
            buffer: vec![0; BUFFER],
            pos: 0,
            filled: 0,
            hash: Sha256::new(),
            delivered: 0,
            hash_ns: 0,
            eof: false,
            error: None,
        }
    }

    /// The C struct whisper.cpp calls back through. `self` must stay where it
    /// is (not moved) while whisper.cpp holds the struct.
    pub fn callbacks(&mut self) -> sys::whisper_model_loader {
        sys::whisper_model_loader {
            context: (self as *mut Self).cast::<c_void>(),
            read: Some(read_cb),
            eof: Some(eof_cb),
            close: Some(close_cb),
        }
    }

    fn timed_hash(&mut self, bytes: &[u8]) {
        let t0 = sampler::clock::monotonic_ns();
        self.hash.update(bytes);
        self.hash_ns += sampler::clock::monotonic_ns().saturating_sub(t0);
    }

    /// Hash the buffered bytes already handed out and empty the buffer.
    fn retire_buffer(&mut self) {
        let buffer = std::mem::take(&mut self.buffer);
        self.timed_hash(&buffer[..self.pos]);
        self.buffer = buffer;
        self.pos = 0;
        self.filled = 0;
    }

    /// `pread` at the current offset into `dst`, retrying on EINTR.
    /// `Ok(0)` is the end of the file.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `len` bytes.
    unsafe fn pread(&self, dst: *mut u8, len: usize) -> std::io::Result<usize> {
        let offset = libc::off_t::try_from(self.offset)
            .map_err(|_| std::io::Error::other("model offset beyond off_t"))?;
        loop {
            // SAFETY: `dst` is valid for writes of `len` bytes (this
            // function's contract); the descriptor outlives the loader.
            let n = unsafe { libc::pread(self.file.as_raw_fd(), dst.cast(), len, offset) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Fill `out[..len]` as far as the file allows; the rest is zeroed.
    ///
    /// # Safety
    /// `out` must be valid for writes of `len` bytes.
    unsafe fn read_into(&mut self, out: *mut u8, len: usize) -> usize {
        let mut done = 0;
        while done < len && !self.eof && self.error.is_none() {
            let available = self.filled - self.pos;
            if available > 0 {
                let k = available.min(len - done);
                // SAFETY: `buffer[pos..pos + k]` is initialised; `out + done`
                // has `len - done >= k` writable bytes; they do not overlap
                // (whisper.cpp's memory, not ours).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        self.buffer.as_ptr().add(self.pos),
                        out.add(done),
                        k,
                    )
                };
                self.pos += k;
                done += k;
                continue;
            }
            self.retire_buffer();
            let want = len - done;
            if want >= BUFFER {
                // A tensor payload: straight into whisper.cpp's buffer.
                // SAFETY: `out + done` has `want` writable bytes.
                match unsafe { self.pread(out.add(done), want) } {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        // SAFETY: `pread` initialised these `n` bytes.
                        let got = unsafe { std::slice::from_raw_parts(out.add(done), n) };
                        self.timed_hash(got);
                        self.offset += n as u64;
                        done += n;
                    }
                    Err(e) => self.error = Some(e),
                }
            } else {
                let buffer = self.buffer.as_mut_ptr();
                // SAFETY: the buffer holds `BUFFER` initialised bytes; `pread`
                // does not touch `self.buffer` itself, only the memory.
                match unsafe { self.pread(buffer, BUFFER) } {
                    Ok(0) => self.eof = true,
                    Ok(n) => {
                        self.filled = n;
                        self.offset += n as u64;
                    }
                    Err(e) => self.error = Some(e),
                }
            }
        }
        if done < len {
            // SAFETY: `out + done` has `len - done` writable bytes.
            unsafe { std::ptr::write_bytes(out.add(done), 0, len - done) };
        }
        self.delivered += done as u64;
        done
    }

    /// The bytes whisper.cpp consumed: count, digest and hashing time.
    pub fn finish(mut self) -> Consumed {
        self.retire_buffer();
        Consumed {
            bytes: self.delivered,
            sha256: ggml_container::digest::hex(&self.hash.finalize()),
            hash_ns: self.hash_ns,
            error: self.error,
        }
    }
}

/// # Safety
/// `ctx` is the `FileLoader` set by [`FileLoader::callbacks`]; `output` is
/// valid for writes of `read_size` bytes (whisper.cpp's contract).
unsafe extern "C" fn read_cb(ctx: *mut c_void, output: *mut c_void, read_size: usize) -> usize {
    // SAFETY: see the function's contract; whisper.cpp calls back on the
    // loading thread only, so this is the one live reference.
    let loader = unsafe { &mut *ctx.cast::<FileLoader>() };
    if output.is_null() {
        return 0;
    }
    // SAFETY: as above.
    unsafe { loader.read_into(output.cast(), read_size) }
}

/// # Safety
/// `ctx` is the `FileLoader` set by [`FileLoader::callbacks`].
unsafe extern "C" fn eof_cb(ctx: *mut c_void) -> bool {
    // SAFETY: see the function's contract.
    let loader = unsafe { &*ctx.cast::<FileLoader>() };
    loader.eof || loader.error.is_some()
}

/// The file belongs to the worker, which still needs it; nothing to close.
unsafe extern "C" fn close_cb(_ctx: *mut c_void) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Read through the C callbacks as whisper.cpp would.
    fn read(loader: &mut FileLoader, n: usize) -> (Vec<u8>, usize) {
        let callbacks = loader.callbacks();
        let mut out = vec![0xEEu8; n];
        // SAFETY: `out` has `n` writable bytes; `callbacks.context` is `loader`.
        let got = unsafe { callbacks.read.unwrap()(callbacks.context, out.as_mut_ptr().cast(), n) };
        (out, got)
    }

    fn eof(loader: &mut FileLoader) -> bool {
        let callbacks = loader.callbacks();
        // SAFETY: `callbacks.context` is `loader`.
        unsafe { callbacks.eof.unwrap()(callbacks.context) }
    }

    #[test]
    fn small_and_large_reads_deliver_the_file_and_its_digest() {
        let _lock = crate::memory_test_lock();
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(&bytes).unwrap();
        let file = File::open(tmp.path()).unwrap();
        let mut loader = FileLoader::new(&file);
        let mut got = Vec::new();
        // whisper.cpp's pattern: 4-byte fields, a name, then a payload.
        for n in [4usize, 4, 4, 13, 100_000, 4, 150_000] {
            let (chunk, k) = read(&mut loader, n);
            assert_eq!(k, n);
            got.extend(chunk);
            assert!(!eof(&mut loader));
        }
        let rest = bytes.len() - got.len();
        let (chunk, k) = read(&mut loader, rest + 10);
        assert_eq!(k, rest);
        // The part past the end is zeroed, not left as it was.
        assert!(chunk[rest..].iter().all(|&b| b == 0));
        got.extend(&chunk[..rest]);
        assert!(eof(&mut loader));
        // After the end, reads return nothing (sticky, as `ifstream`).
        assert_eq!(read(&mut loader, 4), (vec![0; 4], 0));
        assert_eq!(got, bytes);
        let consumed = loader.finish();
        assert_eq!(consumed.bytes, bytes.len() as u64);
        assert_eq!(consumed.sha256, ggml_container::digest::sha256_hex(&bytes));
        assert!(consumed.error.is_none());
    }

    #[test]
    fn only_the_bytes_handed_out_are_hashed() {
        let _lock = crate::memory_test_lock();
        let mut tmp = tempfile::NamedTempFile::new().unwrap();
        tmp.write_all(b"0123456789").unwrap();
        let file = File::open(tmp.path()).unwrap();
        let mut loader = FileLoader::new(&file);
        // The buffer holds all ten bytes; four were consumed.
        assert_eq!(read(&mut loader, 4), (b"0123".to_vec(), 4));
        let consumed = loader.finish();
        assert_eq!(consumed.bytes, 4);
        assert_eq!(consumed.sha256, ggml_container::digest::sha256_hex(b"0123"));
    }
}
