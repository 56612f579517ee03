//! The strict streaming parser: one pass, bounded memory, hashing as it reads.
//!
//! Every length read from the file is checked against what is left of the file
//! before anything is allocated or read, and all offset arithmetic is checked,
//! so no input can make the parser panic or allocate more than the file holds.

use crate::digest::{BackgroundSha256, hex};
use crate::error::{Defect, ParseError, Section};
use crate::expect::{ExpectedInventory, class_of};
use crate::inventory::{ClassTotals, Inventory, MelInfo, TensorRecord, VocabInfo};
use crate::types::{Expect, Ftype, GGML_MAGIC, GgmlType, HEADER_LEN, Hparams};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

/// Longest tensor name accepted; whisper names are under 64 bytes.
pub const MAX_NAME_LEN: u64 = 256;

/// Number of STFT bins whisper.cpp's mel filters are built for (n_fft 400).
pub const MEL_N_FFT: i32 = 201;

/// How far around a record's computed payload end the parser looks for the
/// next record header when that header is malformed (to name a wrong payload length).
const RESYNC_WINDOW: u64 = 1 << 20;

const CHUNK: usize = 1 << 20;

/// Parse the file at `path` strictly against `expect`.
pub fn inspect(path: &Path, expect: Expect) -> Result<Inventory, ParseError> {
    let io = |e: std::io::Error| ParseError {
        defect: Defect::Io {
            message: e.to_string(),
        },
        offset: 0,
        record: None,
        tensor: None,
    };
    let file = File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    inspect_reader(BufReader::with_capacity(CHUNK, file), len, expect)
}

/// Parse `len` bytes from `reader` (positioned at the file start) strictly
/// against `expect`.
pub fn inspect_reader<R: Read + Seek>(
    reader: R,
    len: u64,
    expect: Expect,
) -> Result<Inventory, ParseError> {
    Parser {
        s: Stream::new(reader, len),
        expect,
    }
    .run()
}

/// Bytes read so far, with the running digests.
struct Stream<R> {
    inner: R,
    offset: u64,
    len: u64,
    file_hash: BackgroundSha256,
    prefix_hash: Option<Sha256>,
    chunk: Vec<u8>,
}

impl<R: Read + Seek> Stream<R> {
    fn new(inner: R, len: u64) -> Self {
        Self {
            inner,
            offset: 0,
            len,
            file_hash: BackgroundSha256::new(),
            prefix_hash: Some(Sha256::new()),
            chunk: Vec::new(),
        }
    }

    fn remaining(&self) -> u64 {
        self.len.saturating_sub(self.offset)
    }

    /// Read exactly `buf.len()` bytes of `section`, or report the truncation.
    fn fill(&mut self, buf: &mut [u8], section: Section) -> Result<(), Defect> {
        self.read_only(buf, section)?;
        self.file_hash.update(buf);
        if let Some(h) = &mut self.prefix_hash {
            h.update(buf);
        }
        Ok(())
    }

    /// [`Self::fill`] without the file digest (the caller feeds it).
    fn read_only(&mut self, buf: &mut [u8], section: Section) -> Result<(), Defect> {
        let needed = buf.len() as u64;
        if needed > self.remaining() {
            return Err(Defect::Truncated {
                section,
                needed,
                available: self.remaining(),
            });
        }
        self.inner.read_exact(buf).map_err(|e| match e.kind() {
            // The file shrank while we read it.
            std::io::ErrorKind::UnexpectedEof => Defect::Truncated {
                section,
                needed,
                available: 0,
            },
            _ => Defect::Io {
                message: e.to_string(),
            },
        })?;
        self.offset += needed;
        Ok(())
    }

    fn i32(&mut self, section: Section) -> Result<i32, Defect> {
        let mut b = [0u8; 4];
        self.fill(&mut b, section)?;
        Ok(i32::from_le_bytes(b))
    }

    /// Stream `n` bytes through the digests (and `also`), in bounded chunks.
    fn skim(&mut self, n: u64, section: Section, also: Option<&mut Sha256>) -> Result<(), Defect> {
        if n > self.remaining() {
            return Err(Defect::Truncated {
                section,
                needed: n,
                available: self.remaining(),
            });
        }
        let mut chunk = std::mem::take(&mut self.chunk);
        let mut also = also;
        let mut left = n;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            let take = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
            chunk.resize(take, 0);
            if let Err(e) = self.read_only(&mut chunk[..take], section) {
                break Err(e);
            }
            if let Some(h) = &mut self.prefix_hash {
                h.update(&chunk);
            }
            if let Some(h) = also.as_deref_mut() {
                h.update(&chunk);
            }
            if take == CHUNK {
                // A full chunk goes to the file-digest thread as it is; a spent one comes back.
                chunk = self.file_hash.update_owned(chunk);
            } else {
                // Small pieces are batched (one message per tensor would ping-pong).
                self.file_hash.update(&chunk);
            }
            left -= take as u64;
        };
        self.chunk = chunk;
        result
    }

    /// The end of the prefix: later bytes no longer feed the prefix digest.
    fn end_prefix(&mut self) -> String {
        self.prefix_hash
            .take()
            .map(|h| hex(&h.finalize()))
            .unwrap_or_default()
    }

    /// Read up to `n` bytes at `at` without touching the digests (error path only).
    fn peek_at(&mut self, at: u64, n: u64) -> Option<Vec<u8>> {
        let n = n.min(self.len.saturating_sub(at));
        self.inner.seek(SeekFrom::Start(at)).ok()?;
        let mut buf = vec![0; usize::try_from(n).ok()?];
        self.inner.read_exact(&mut buf).ok()?;
        Some(buf)
    }
}

struct Parser<R> {
    s: Stream<R>,
    expect: Expect,
}

/// A record header as read, before it is checked against the inventory.
struct RawRecord {
    offset: u64,
    ne: Vec<u64>,
    type_id: i32,
    name: Vec<u8>,
}

fn at(defect: Defect, offset: u64) -> ParseError {
    ParseError {
        defect,
        offset,
        record: None,
        tensor: None,
    }
}

impl<R: Read + Seek> Parser<R> {
    fn run(mut self) -> Result<Inventory, ParseError> {
        let (magic, hparams, ftype, expected) = self.header()?;
        let mel = self.mel(&hparams)?;
        let vocab = self.vocab(&hparams)?;
        let prefix_len = self.s.offset;
        let prefix_sha256 = self.s.end_prefix();
        let tensors = self.records(&expected)?;
        let file_sha256 = std::mem::replace(&mut self.s.file_hash, BackgroundSha256::idle())
            .finish()
            .ok_or_else(|| {
                at(
                    Defect::Io {
                        message: "the hashing thread failed".into(),
                    },
                    0,
                )
            })?;
        let mut type_counts = BTreeMap::new();
        for t in &tensors {
            *type_counts.entry(t.ggml_type).or_insert(0) += 1;
        }
        Ok(Inventory {
            magic,
            hparams,
            ftype,
            family: hparams.family(),
            multilingual: hparams.multilingual(),
            expect: self.expect,
            mel,
            vocab,
            prefix_len,
            prefix_sha256,
            totals: ClassTotals::of(&tensors),
            type_counts,
            tensors,
            file_len: self.s.len,
            file_sha256,
        })
    }

    fn header(&mut self) -> Result<(u32, Hparams, Ftype, ExpectedInventory), ParseError> {
        let mut b = [0u8; HEADER_LEN as usize];
        self.s.fill(&mut b, Section::Header).map_err(|d| at(d, 0))?;
        let word = |i: usize| [b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]];
        let magic = u32::from_le_bytes(word(0));
        if magic != GGML_MAGIC {
            return Err(at(Defect::BadMagic { found: magic }, 0));
        }
        let mut v = [0i32; 11];
        for (i, slot) in v.iter_mut().enumerate() {
            *slot = i32::from_le_bytes(word(i + 1));
        }
        let hparams = Hparams::from_array(v);
        let expected = ExpectedInventory::new(&hparams, self.expect)
            .map_err(|reason| at(Defect::BadHparams { reason }, 4))?;
        let ftype = Ftype::decode(hparams.ftype).ok_or_else(|| {
            at(
                Defect::BadHparams {
                    reason: format!("ftype {}", hparams.ftype),
                },
                44,
            )
        })?;
        Ok((magic, hparams, ftype, expected))
    }

    fn mel(&mut self, h: &Hparams) -> Result<MelInfo, ParseError> {
        let offset = self.s.offset;
        let n_mel = self.s.i32(Section::MelFilters).map_err(|d| at(d, offset))?;
        let n_fft = self.s.i32(Section::MelFilters).map_err(|d| at(d, offset))?;
        if n_mel != h.n_mels || n_fft != MEL_N_FFT {
            return Err(at(
                Defect::BadMelDims {
                    n_mel,
                    n_fft,
                    expected_mel: h.n_mels,
                    expected_fft: MEL_N_FFT,
                },
                offset,
            ));
        }
        // Both are positive and small here (n_mels <= MAX_DIM).
        let data_len = u64::from(n_mel.unsigned_abs()) * u64::from(n_fft.unsigned_abs()) * 4;
        self.s
            .skim(data_len, Section::MelFilters, None)
            .map_err(|d| at(d, offset))?;
        Ok(MelInfo {
            n_mel,
            n_fft,
            offset,
            end: self.s.offset,
        })
    }

    fn vocab(&mut self, h: &Hparams) -> Result<VocabInfo, ParseError> {
        let offset = self.s.offset;
        let count = self.s.i32(Section::Vocab).map_err(|d| at(d, offset))?;
        let bad = |reason: String| {
            at(
                Defect::BadVocabCount {
                    count: i64::from(count),
                    reason,
                },
                offset,
            )
        };
        if count < 0 {
            return Err(bad("negative".into()));
        }
        if count > h.n_vocab {
            return Err(bad(format!("more than n_vocab = {}", h.n_vocab)));
        }
        let count = u64::from(count.unsigned_abs());
        // Each token needs at least its 4-byte length.
        if count * 4 > self.s.remaining() {
            return Err(bad(format!(
                "{} tokens need at least {} bytes, {} left in the file",
                count,
                count * 4,
                self.s.remaining()
            )));
        }
        let mut max_token_len = 0;
        for token in 0..count {
            let len_at = self.s.offset;
            let mut b = [0u8; 4];
            self.s
                .fill(&mut b, Section::Vocab)
                .map_err(|d| at(d, len_at))?;
            let len = u64::from(u32::from_le_bytes(b));
            if len > self.s.remaining() {
                return Err(at(
                    Defect::BadTokenLength {
                        token,
                        len,
                        available: self.s.remaining(),
                    },
                    len_at,
                ));
            }
            self.s
                .skim(len, Section::Vocab, None)
                .map_err(|d| at(d, len_at))?;
            max_token_len = max_token_len.max(len);
        }
        Ok(VocabInfo {
            count,
            offset,
            end: self.s.offset,
            max_token_len,
        })
    }

    fn records(&mut self, expected: &ExpectedInventory) -> Result<Vec<TensorRecord>, ParseError> {
        let mut records: Vec<TensorRecord> = Vec::new();
        let mut seen: Vec<Option<usize>> = vec![None; expected.len()];
        while self.s.remaining() > 0 {
            let index = records.len();
            let all_seen = index >= expected.len() && seen.iter().all(Option::is_some);
            let raw = match self.record_header() {
                Ok(raw) => raw,
                Err(mut e) if !all_seen => {
                    e.record = Some(index);
                    return Err(self.explain_misalignment(e, &records, expected));
                }
                Err(e) if all_seen => {
                    return Err(at(
                        Defect::TrailingBytes {
                            bytes: self.s.len - e.offset,
                        },
                        e.offset,
                    ));
                }
                Err(e) => return Err(e),
            };
            let name = String::from_utf8_lossy(&raw.name).into_owned();
            let fail = |defect| ParseError {
                defect,
                offset: raw.offset,
                record: Some(index),
                tensor: Some(name.clone()),
            };
            let Some(pos) = expected.position(&name) else {
                if all_seen && class_of(&name).is_none() {
                    return Err(at(
                        Defect::TrailingBytes {
                            bytes: self.s.len - raw.offset,
                        },
                        raw.offset,
                    ));
                }
                let e = fail(Defect::UnknownTensor);
                // Garbage names usually mean the previous payload had the wrong length.
                if class_of(&name).is_none() {
                    return Err(self.explain_misalignment(e, &records, expected));
                }
                return Err(e);
            };
            if let Some(first_record) = seen[pos] {
                return Err(fail(Defect::DuplicateTensor { first_record }));
            }
            let want = &expected.tensors[pos];
            if raw.ne != want.ne {
                return Err(fail(Defect::DimsMismatch {
                    expected: want.ne.clone(),
                    found: raw.ne,
                }));
            }
            let found = GgmlType::from_id(raw.type_id).ok_or_else(|| {
                fail(Defect::UnsupportedType {
                    type_id: raw.type_id,
                })
            })?;
            if found != want.ggml_type {
                return Err(fail(Defect::TypeMismatch {
                    expected: want.ggml_type,
                    found,
                }));
            }
            let payload_len = want
                .payload_len()
                .ok_or_else(|| fail(Defect::BadDim { axis: 0, value: 0 }))?;
            let payload_offset = self.s.offset;
            let mut hash = Sha256::new();
            self.s
                .skim(payload_len, Section::Payload, Some(&mut hash))
                .map_err(|defect| ParseError {
                    offset: payload_offset,
                    ..fail(defect)
                })?;
            seen[pos] = Some(index);
            records.push(TensorRecord {
                index,
                name,
                ggml_type: found,
                ne: raw.ne,
                record_offset: raw.offset,
                payload_offset,
                payload_len,
                payload_sha256: hex(&hash.finalize()),
                class: want.class,
            });
        }
        let missing: Vec<String> = seen
            .iter()
            .zip(&expected.tensors)
            .filter(|(s, _)| s.is_none())
            .map(|(_, t)| t.name.clone())
            .collect();
        if !missing.is_empty() {
            return Err(at(Defect::MissingTensors { names: missing }, self.s.len));
        }
        Ok(records)
    }

    /// Read one record header and name; structural checks only.
    fn record_header(&mut self) -> Result<RawRecord, ParseError> {
        let offset = self.s.offset;
        let e = |d| at(d, offset);
        let mut b = [0u8; 12];
        self.s.fill(&mut b, Section::RecordHeader).map_err(e)?;
        let n_dims = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let name_len = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let type_id = i32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        if !(1..=4).contains(&n_dims) {
            return Err(e(Defect::BadDimCount { n_dims }));
        }
        let name_len_ok = u64::try_from(name_len).is_ok_and(|n| (1..=MAX_NAME_LEN).contains(&n));
        if !name_len_ok {
            return Err(e(Defect::BadNameLength {
                name_len,
                max: MAX_NAME_LEN,
            }));
        }
        let mut ne = Vec::with_capacity(4);
        for axis in 0..n_dims.unsigned_abs() as usize {
            let value = self.s.i32(Section::RecordHeader).map_err(e)?;
            if value < 1 {
                return Err(e(Defect::BadDim { axis, value }));
            }
            ne.push(u64::from(value.unsigned_abs()));
        }
        // 1..=MAX_NAME_LEN, checked above.
        let mut name = vec![0u8; name_len.unsigned_abs() as usize];
        self.s.fill(&mut name, Section::TensorName).map_err(e)?;
        Ok(RawRecord {
            offset,
            ne,
            type_id,
            name,
        })
    }

    /// A malformed record right after a good one most often means the good one's
    /// payload is longer or shorter than its type x dims. Look for a valid
    /// record header near the computed payload end; if one is there, report the
    /// payload length of the previous record instead of the garbage.
    fn explain_misalignment(
        &mut self,
        original: ParseError,
        records: &[TensorRecord],
        expected: &ExpectedInventory,
    ) -> ParseError {
        let Some(prev) = records.last() else {
            return original;
        };
        let end = prev.payload_offset + prev.payload_len;
        let start = end.saturating_sub(RESYNC_WINDOW).max(prev.payload_offset);
        let Some(window) = self.s.peek_at(start, end - start + RESYNC_WINDOW + 64) else {
            return original;
        };
        let plausible = |p: usize| -> bool { header_at(&window, p, expected) };
        let mut best: Option<u64> = None;
        for (i, _) in window.iter().enumerate() {
            let pos = start + i as u64;
            if pos == end || !plausible(i) {
                continue;
            }
            if best.is_none_or(|b| pos.abs_diff(end) < b.abs_diff(end)) {
                best = Some(pos);
            }
        }
        // A valid header exactly one unseen record length past `end` means the
        // header at `end` is a damaged record, not a misplaced one.
        let damaged_header = best.is_some_and(|pos| {
            let seen: Vec<&str> = records.iter().map(|r| r.name.as_str()).collect();
            expected.tensors.iter().any(|t| {
                !seen.contains(&t.name.as_str())
                    && t.payload_len().is_some_and(|p| {
                        end + 12 + 4 * t.ne.len() as u64 + t.name.len() as u64 + p == pos
                    })
            })
        });
        if damaged_header {
            return original;
        }
        match best {
            Some(pos) => ParseError {
                defect: Defect::PayloadLength {
                    expected: prev.payload_len,
                    found: pos - prev.payload_offset,
                },
                offset: prev.payload_offset,
                record: Some(prev.index),
                tensor: Some(prev.name.clone()),
            },
            None => original,
        }
    }
}

/// Whether `window[p..]` starts a record header naming an expected tensor with
/// the expected dims and type.
fn header_at(window: &[u8], p: usize, expected: &ExpectedInventory) -> bool {
    let word = |i: usize| -> Option<i32> {
        let s = window.get(p + 4 * i..p + 4 * i + 4)?;
        Some(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    let (Some(n_dims), Some(name_len), Some(type_id)) = (word(0), word(1), word(2)) else {
        return false;
    };
    if !(1..=4).contains(&n_dims) || !(1..=MAX_NAME_LEN as i32).contains(&name_len) {
        return false;
    }
    let n_dims = n_dims as usize;
    let name_start = p + 12 + 4 * n_dims;
    let Some(name) = window.get(name_start..name_start + name_len as usize) else {
        return false;
    };
    let Some(want) = std::str::from_utf8(name).ok().and_then(|n| expected.get(n)) else {
        return false;
    };
    let ne: Option<Vec<u64>> = (0..n_dims)
        .map(|i| word(3 + i).and_then(|v| u64::try_from(v).ok()))
        .collect();
    ne.as_deref() == Some(&want.ne[..]) && type_id == want.ggml_type.id()
}
