//! Writing the container: header, mel filters, vocabulary, tensor records.
//! The writer only lays bytes out; whether the result loads is the parser's
//! call, so producers reparse what they wrote.

use crate::types::{GGML_MAGIC, GgmlType, Hparams};
use std::io::{self, Write};

/// Writes a GGML Whisper file section by section and counts bytes.
pub struct GgmlWriter<W: Write> {
    out: W,
    written: u64,
}

impl<W: Write> GgmlWriter<W> {
    /// A writer at byte 0 of `out`. Wrap a file in a `BufWriter`: every field is
    /// a separate write.
    pub fn new(out: W) -> Self {
        Self { out, written: 0 }
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Write raw bytes (e.g. a record copied verbatim from another file).
    pub fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn i32(&mut self, v: i32) -> io::Result<()> {
        self.raw(&v.to_le_bytes())
    }

    /// Magic and the eleven hyperparameters.
    pub fn header(&mut self, h: &Hparams) -> io::Result<()> {
        self.raw(&GGML_MAGIC.to_le_bytes())?;
        for v in h.to_array() {
            self.i32(v)?;
        }
        Ok(())
    }

    /// The mel filter block: `n_mel`, `n_fft`, then `n_mel * n_fft` f32 row-major.
    pub fn mel_filters(&mut self, n_mel: i32, n_fft: i32, data: &[f32]) -> io::Result<()> {
        self.i32(n_mel)?;
        self.i32(n_fft)?;
        let mut buf = Vec::with_capacity(data.len() * 4);
        for v in data {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        self.raw(&buf)
    }

    /// The vocabulary block: a count, then `u32 len + bytes` per token.
    pub fn vocab<T: AsRef<[u8]>>(&mut self, tokens: &[T]) -> io::Result<()> {
        let count = i32::try_from(tokens.len()).map_err(|_| invalid("too many tokens"))?;
        self.i32(count)?;
        for t in tokens {
            let t = t.as_ref();
            let len = u32::try_from(t.len()).map_err(|_| invalid("token longer than 4 GiB"))?;
            self.raw(&len.to_le_bytes())?;
            self.raw(t)?;
        }
        Ok(())
    }

    /// One tensor record; `ne` in ggml order.
    pub fn tensor(
        &mut self,
        name: &str,
        ggml_type: GgmlType,
        ne: &[u64],
        payload: &[u8],
    ) -> io::Result<()> {
        self.record_header(name, ggml_type.id(), ne)?;
        self.raw(payload)
    }

    /// A record header with an arbitrary type id (tests write wrong ones on purpose).
    pub fn record_header(&mut self, name: &str, type_id: i32, ne: &[u64]) -> io::Result<()> {
        let n_dims = i32::try_from(ne.len()).map_err(|_| invalid("too many dims"))?;
        let name_len = i32::try_from(name.len()).map_err(|_| invalid("name too long"))?;
        self.i32(n_dims)?;
        self.i32(name_len)?;
        self.i32(type_id)?;
        for &d in ne {
            self.i32(i32::try_from(d).map_err(|_| invalid("dim beyond i32"))?)?;
        }
        self.raw(name.as_bytes())
    }

    /// Flush the underlying writer.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// The underlying writer (not flushed).
    pub fn into_inner(self) -> W {
        self.out
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}
