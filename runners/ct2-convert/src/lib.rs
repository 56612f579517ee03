//! CTranslate2 Whisper models (`model.bin`, binary version 6) and their
//! conversion to whisper.cpp GGML (reference file §2 and §4).
//!
//! Contract: [`Ct2Model`] reads a `model.bin` strictly; [`convert_to_ggml`]
//! writes it as a GGML F16 file through `ggml_container`'s writer, in the
//! reference conversion's record order ([`ggml_container::record_order`]),
//! so the digests reproduce; [`dir`] checks a model directory against its
//! pinned files before anything reads it. Not here: the GGML format itself
//! (`ggml_container`) or running CTranslate2 (the `memqual-ct2` worker).

// Every public item says what it is: the harness and the CTranslate2 worker
// read CTranslate2 models only through this crate.
#![warn(missing_docs)]

mod convert;
pub mod dir;
mod vocab;

pub use convert::{ConvertError, ConvertSummary, convert_to_ggml};
pub use vocab::{VocabError, decode_vocabulary};

use memmap2::Mmap;
use std::fs::File;
use std::ops::Deref;
use std::path::Path;

/// The only binary version this reader knows.
pub const BINARY_VERSION: u32 = 6;

/// A CT2 variable's element type (`model_spec.py` dtype ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ct2Dtype {
    /// 32-bit float (id 0).
    F32,
    /// 8-bit integer (id 1).
    I8,
    /// 16-bit integer (id 2), e.g. the `num_heads` scalars.
    I16,
    /// 32-bit integer (id 3).
    I32,
    /// 16-bit IEEE half float (id 4).
    F16,
    /// bfloat16 (id 5); read, but not converted.
    Bf16,
}

impl Ct2Dtype {
    fn from_id(id: u8) -> Option<Self> {
        Some(match id {
            0 => Ct2Dtype::F32,
            1 => Ct2Dtype::I8,
            2 => Ct2Dtype::I16,
            3 => Ct2Dtype::I32,
            4 => Ct2Dtype::F16,
            5 => Ct2Dtype::Bf16,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Ct2Dtype::I8 => 1,
            Ct2Dtype::I16 | Ct2Dtype::F16 | Ct2Dtype::Bf16 => 2,
            Ct2Dtype::F32 | Ct2Dtype::I32 => 4,
        }
    }
}

/// One variable: its shape and where its data sits in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ct2Variable {
    /// CTranslate2 name, slash-separated (`decoder/layer_norm/beta`).
    pub name: String,
    /// Dims as stored, outermost first (numpy order, unlike ggml's `ne`).
    pub shape: Vec<u32>,
    /// Element type.
    pub dtype: Ct2Dtype,
    /// Byte range of the data within the model bytes.
    pub offset: usize,
    /// Data length in bytes: elements x `Ct2Dtype::size`.
    pub len: usize,
}

/// Why a `model.bin` was refused.
#[derive(Debug, thiserror::Error)]
pub enum Ct2Error {
    /// Opening or mapping the file failed.
    #[error("cannot read the model: {0}")]
    Io(#[from] std::io::Error),
    /// The bytes are not a version-6 `model.bin`: wrong version, unknown dtype,
    /// a length that disagrees with its shape, a bad string, a truncation, or
    /// bytes after the alias table.
    #[error("byte offset {offset}: {reason}")]
    Malformed {
        /// Byte offset where reading stood: just past the field at fault, or
        /// where the missing bytes should start (for a bad string, its first
        /// byte after the length).
        offset: usize,
        /// What is wrong, for a person to read.
        reason: String,
    },
}

/// The bytes of a model: mapped from a file or owned (e.g. two parts joined).
enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// A parsed CT2 model; variable data is borrowed from the mapped bytes.
pub struct Ct2Model {
    bytes: Bytes,
    /// The model spec's name (`WhisperSpec` for Whisper models).
    pub spec_name: String,
    /// The model spec's revision number.
    pub spec_revision: u32,
    /// In file order (CTranslate2 sorts them by name).
    pub variables: Vec<Ct2Variable>,
    /// The alias table in file order, as (alias, name of the variable it stands
    /// for); `variable` does not follow aliases.
    pub aliases: Vec<(String, String)>,
}

impl Ct2Model {
    /// Map and parse `path`.
    pub fn open(path: &Path) -> Result<Self, Ct2Error> {
        let file = File::open(path)?;
        // SAFETY: the map is read-only and private to this process; memqual does
        // not modify model files while converting them.
        let map = unsafe { Mmap::map(&file)? };
        Self::parse(Bytes::Mapped(map))
    }

    /// Parse owned bytes.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Self, Ct2Error> {
        Self::parse(Bytes::Owned(bytes))
    }

    /// The model's bytes back, without a copy when they were owned.
    pub fn into_bytes(self) -> Vec<u8> {
        match self.bytes {
            Bytes::Mapped(m) => m.to_vec(),
            Bytes::Owned(v) => v,
        }
    }

    fn parse(bytes: Bytes) -> Result<Self, Ct2Error> {
        let mut r = Reader { b: &bytes, at: 0 };
        let version = r.u32()?;
        if version != BINARY_VERSION {
            return Err(r.bad(format!(
                "binary version {version}, only {BINARY_VERSION} is known"
            )));
        }
        let spec_name = r.string()?;
        let spec_revision = r.u32()?;
        let count = r.u32()?;
        let mut variables = Vec::new();
        for _ in 0..count {
            let name = r.string()?;
            let rank = r.u8()?;
            let shape = (0..rank).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
            let dtype_id = r.u8()?;
            let dtype = Ct2Dtype::from_id(dtype_id)
                .ok_or_else(|| r.bad(format!("{name}: unknown dtype {dtype_id}")))?;
            let len = r.u32()? as usize;
            let elements = shape
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize));
            if elements.and_then(|e| e.checked_mul(dtype.size())) != Some(len) {
                return Err(r.bad(format!(
                    "{name}: {len} bytes do not match shape {shape:?} of {dtype:?}"
                )));
            }
            let offset = r.at;
            r.take(len)?;
            variables.push(Ct2Variable {
                name,
                shape,
                dtype,
                offset,
                len,
            });
        }
        let n_aliases = r.u32()?;
        let mut aliases = Vec::new();
        for _ in 0..n_aliases {
            aliases.push((r.string()?, r.string()?));
        }
        if r.at != bytes.len() {
            return Err(r.bad(format!(
                "{} bytes after the alias table",
                bytes.len() - r.at
            )));
        }
        Ok(Self {
            bytes,
            spec_name,
            spec_revision,
            variables,
            aliases,
        })
    }

    /// The variable stored under `name`, if any.
    pub fn variable(&self, name: &str) -> Option<&Ct2Variable> {
        self.variables.iter().find(|v| v.name == name)
    }

    /// The raw little-endian data of a variable.
    pub fn data(&self, var: &Ct2Variable) -> &[u8] {
        &self.bytes[var.offset..var.offset + var.len]
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn bad(&self, reason: String) -> Ct2Error {
        Ct2Error::Malformed {
            offset: self.at,
            reason,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Ct2Error> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| self.bad(format!("{n} bytes needed, the file ends first")))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, Ct2Error> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, Ct2Error> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// `u16 length including the NUL`, bytes, NUL.
    fn string(&mut self) -> Result<String, Ct2Error> {
        let s = self.take(2)?;
        let len = usize::from(u16::from_le_bytes([s[0], s[1]]));
        let start = self.at;
        let raw = self.take(len)?;
        match raw.split_last() {
            Some((0, text)) => String::from_utf8(text.to_vec()).map_err(|_| Ct2Error::Malformed {
                offset: start,
                reason: "string is not UTF-8".into(),
            }),
            _ => Err(Ct2Error::Malformed {
                offset: start,
                reason: "string is not NUL-terminated".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u16 + 1).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
        out.push(0);
    }

    /// A one-variable model (an f16 [2] vector) with one alias.
    fn model() -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&6u32.to_le_bytes());
        string(&mut b, "WhisperSpec");
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        string(&mut b, "decoder/layer_norm/beta");
        b.push(1);
        b.extend_from_slice(&2u32.to_le_bytes());
        b.push(4);
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&[0x00, 0x3c, 0x00, 0xc0]); // 1.0, -2.0
        b.extend_from_slice(&1u32.to_le_bytes());
        string(&mut b, "a");
        string(&mut b, "decoder/layer_norm/beta");
        b
    }

    #[test]
    fn owned_bytes_come_back_unchanged_after_parsing() {
        let bytes = model();
        let m = Ct2Model::from_bytes(bytes.clone()).unwrap();
        assert_eq!(m.into_bytes(), bytes);
    }

    #[test]
    fn reads_variables_and_aliases_to_exact_eof() {
        let m = Ct2Model::from_bytes(model()).unwrap();
        assert_eq!((m.spec_name.as_str(), m.spec_revision), ("WhisperSpec", 3));
        let v = m.variable("decoder/layer_norm/beta").unwrap();
        assert_eq!(
            (v.shape.clone(), v.dtype, v.offset, v.len),
            (vec![2], Ct2Dtype::F16, 62, 4)
        );
        assert_eq!(m.data(v), &[0x00, 0x3c, 0x00, 0xc0]);
        assert_eq!(
            m.aliases,
            vec![("a".into(), "decoder/layer_norm/beta".into())]
        );
    }

    #[test]
    fn trailing_truncated_and_inconsistent_files_are_refused() {
        let good = model();
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(matches!(
            Ct2Model::from_bytes(trailing),
            Err(Ct2Error::Malformed { reason, .. }) if reason.contains("1 bytes after")
        ));
        for cut in [3, 20, 50, good.len() - 1] {
            assert!(
                Ct2Model::from_bytes(good[..cut].to_vec()).is_err(),
                "cut {cut}"
            );
        }
        let mut wrong_len = good.clone();
        wrong_len[58] = 6; // num_bytes 6 for a [2] f16 vector
        assert!(matches!(
            Ct2Model::from_bytes(wrong_len),
            Err(Ct2Error::Malformed { offset: 62, .. })
        ));
        let mut version = good;
        version[0] = 5;
        assert!(Ct2Model::from_bytes(version).is_err());
    }
}
