//! The Core ML placement summary (`runners/whisper-patch/whisper-memqual-placement.h`):
//! its struct as Rust reads it back from the patched library, a [`Builder`]
//! over the header's own functions (C or C++), and [`Summary::read`], which
//! refuses a struct whose numbers do not add up before anything trusts them.

use crate::{Compiled, header_text};
use std::ffi::{CString, c_char};

/// `WHISPER_MEMQUAL_DEVICES`: unknown, CPU, GPU, Neural Engine.
pub const DEVICES: usize = 4;
/// `WHISPER_MEMQUAL_PLACEMENT_KINDS`.
pub const KINDS: usize = 32;
/// `WHISPER_MEMQUAL_PLACEMENT_NAME`: an operator name's bytes with its NUL.
pub const NAME: usize = 64;

/// `enum whisper_memqual_device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Device {
    /// A device class the header does not know.
    Unknown = 0,
    /// The CPU.
    Cpu = 1,
    /// The GPU.
    Gpu = 2,
    /// The Neural Engine.
    NeuralEngine = 3,
}

impl Device {
    /// `WHISPER_MEMQUAL_DEVICE_BIT`.
    pub fn bit(self) -> u32 {
        1 << self as u32
    }
}

/// `enum whisper_memqual_structure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Structure {
    /// An ML program: operations with cost estimates.
    Program = 1,
    /// A neural network: layers, without cost estimates.
    NeuralNetwork = 2,
}

/// `struct whisper_memqual_placement_kind`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawKind {
    /// NUL-terminated, cut to fit.
    pub op: [c_char; NAME],
    /// Operations of this kind by preferred device.
    pub preferred: [i64; DEVICES],
}

/// `struct whisper_memqual_placement`, as the library fills it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawPlacement {
    /// [`Structure`] number.
    pub structure: i32,
    /// Every operation or layer visited.
    pub operations: i64,
    /// Operations without a device usage.
    pub without_usage: i64,
    /// Operations by preferred device.
    pub preferred: [i64; DEVICES],
    /// Operations each device could run.
    pub supported: [i64; DEVICES],
    /// Operations with an estimated cost.
    pub costed: i64,
    /// Estimated cost shares by preferred device.
    pub cost: [f64; DEVICES],
    /// Entries of `kinds` in use.
    pub n_kinds: i32,
    /// Operations of kinds past the table.
    pub kinds_dropped: i64,
    /// The kinds, first seen first.
    pub kinds: [RawKind; KINDS],
}

impl RawPlacement {
    /// All zero: what the library writes into.
    pub fn zeroed() -> Self {
        // SAFETY: plain integers, floats and byte arrays; all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

unsafe extern "C" {
    fn memqual_c_placement_init(p: *mut RawPlacement, structure: i32);
    fn memqual_cpp_placement_init(p: *mut RawPlacement, structure: i32);
    fn memqual_c_placement_add(
        p: *mut RawPlacement,
        op: *const c_char,
        has_usage: i32,
        preferred: i32,
        supported: u32,
        has_cost: i32,
        cost: f64,
        msg: *mut c_char,
        msg_len: usize,
    ) -> i32;
    fn memqual_cpp_placement_add(
        p: *mut RawPlacement,
        op: *const c_char,
        has_usage: i32,
        preferred: i32,
        supported: u32,
        has_cost: i32,
        cost: f64,
        msg: *mut c_char,
        msg_len: usize,
    ) -> i32;
    fn memqual_c_placement_finish(p: *const RawPlacement, msg: *mut c_char, msg_len: usize) -> i32;
    fn memqual_cpp_placement_finish(
        p: *const RawPlacement,
        msg: *mut c_char,
        msg_len: usize,
    ) -> i32;
    fn memqual_c_placement_layout(out: *mut usize);
}

/// The C compiler's size of the struct and offsets of `operations`, `cost`
/// and `kinds`, for checking [`RawPlacement`] against it.
pub fn c_layout() -> [usize; 4] {
    let mut out = [0usize; 4];
    // SAFETY: the function writes exactly four values.
    unsafe { memqual_c_placement_layout(out.as_mut_ptr()) };
    out
}

/// `enum whisper_memqual_placement_status`, past `OK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlacementStatus {
    /// A device number outside the enum.
    Device,
    /// Unknown supported bits, or the preferred device not among them.
    Supported,
    /// A cost that is not a share in [0, 1].
    Cost,
    /// The costs add up past the whole.
    Total,
    /// No operation, or no known structure.
    Empty,
    /// A status the header does not define (a defect here).
    Unknown(i32),
}

/// Why the header refused an operation or a summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status:?}: {message}")]
pub struct PlacementRefusal {
    /// Which rule refused it.
    pub status: PlacementStatus,
    /// The operation and the values.
    pub message: String,
}

impl PlacementRefusal {
    fn from_header(code: i32, msg: &[c_char]) -> Self {
        let status = match code {
            1 => PlacementStatus::Device,
            2 => PlacementStatus::Supported,
            3 => PlacementStatus::Cost,
            4 => PlacementStatus::Total,
            5 => PlacementStatus::Empty,
            other => PlacementStatus::Unknown(other),
        };
        PlacementRefusal {
            status,
            message: header_text(msg),
        }
    }
}

/// Builds a summary one operation at a time through the header, as the
/// Core ML glue does, from either compilation.
pub struct Builder {
    compiled: Compiled,
    raw: Box<RawPlacement>,
}

/// One operation's device usage: the preferred device and a mask of
/// [`Device::bit`]s it could run on (`preferred` as a raw number, so tests
/// can hand the header numbers outside the enum).
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    /// Raw device number.
    pub preferred: i32,
    /// Supported devices.
    pub supported: u32,
}

impl Builder {
    /// An empty summary of `structure` (a raw number, as the glue passes it).
    pub fn new(compiled: Compiled, structure: i32) -> Self {
        let mut raw = Box::new(RawPlacement::zeroed());
        let init = match compiled {
            Compiled::C => memqual_c_placement_init,
            Compiled::Cpp => memqual_cpp_placement_init,
        };
        // SAFETY: `raw` is a live, writable struct of the header's layout.
        unsafe { init(&mut *raw, structure) };
        Builder { compiled, raw }
    }

    /// One operation: its name, device usage (`None`: no device, a
    /// constant) and estimated cost share.
    pub fn add(
        &mut self,
        op: &str,
        usage: Option<Usage>,
        cost: Option<f64>,
    ) -> Result<(), PlacementRefusal> {
        let name = CString::new(op.replace('\0', "\u{2400}")).unwrap_or_default();
        let mut msg = vec![0 as c_char; 512];
        let add = match self.compiled {
            Compiled::C => memqual_c_placement_add,
            Compiled::Cpp => memqual_cpp_placement_add,
        };
        let (has_usage, preferred, supported) = match usage {
            Some(u) => (1, u.preferred, u.supported),
            None => (0, 0, 0),
        };
        // SAFETY: `raw` is live; `name` is NUL-terminated and outlives the
        // call; `msg` holds the length passed.
        let code = unsafe {
            add(
                &mut *self.raw,
                name.as_ptr(),
                has_usage,
                preferred,
                supported,
                i32::from(cost.is_some()),
                cost.unwrap_or(0.0),
                msg.as_mut_ptr(),
                msg.len(),
            )
        };
        if code == 0 {
            Ok(())
        } else {
            Err(PlacementRefusal::from_header(code, &msg))
        }
    }

    /// The header's closing check; the struct as the library would return it.
    pub fn finish(self) -> Result<RawPlacement, PlacementRefusal> {
        let mut msg = vec![0 as c_char; 512];
        let finish = match self.compiled {
            Compiled::C => memqual_c_placement_finish,
            Compiled::Cpp => memqual_cpp_placement_finish,
        };
        // SAFETY: `raw` is live; `msg` holds the length passed.
        let code = unsafe { finish(&*self.raw, msg.as_mut_ptr(), msg.len()) };
        if code == 0 {
            Ok(*self.raw)
        } else {
            Err(PlacementRefusal::from_header(code, &msg))
        }
    }
}

/// One operator and its operations by preferred device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// The operator's name as the header kept it.
    pub op: String,
    /// Operations by device: unknown, CPU, GPU, Neural Engine.
    pub preferred: [u64; DEVICES],
}

/// A summary read back and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// What the plan describes.
    pub structure: Structure,
    /// Every operation or layer.
    pub operations: u64,
    /// Operations without a device usage.
    pub without_usage: u64,
    /// Operations by preferred device (unknown, CPU, GPU, Neural Engine).
    pub preferred: [u64; DEVICES],
    /// Operations each device could run.
    pub supported: [u64; DEVICES],
    /// Operations with an estimated cost.
    pub costed: u64,
    /// Estimated cost shares by preferred device.
    pub cost: [f64; DEVICES],
    /// The kinds, first seen first.
    pub kinds: Vec<Kind>,
    /// Operations of kinds past the table.
    pub kinds_dropped: u64,
}

/// Why a struct from the library is not a summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the Core ML placement summary does not add up: {0}")]
pub struct Inconsistent(pub String);

fn count(v: i64, what: &str) -> Result<u64, Inconsistent> {
    u64::try_from(v).map_err(|_| Inconsistent(format!("{what} is {v}")))
}

fn counts(v: &[i64; DEVICES], what: &str) -> Result<[u64; DEVICES], Inconsistent> {
    let mut out = [0u64; DEVICES];
    for (o, x) in out.iter_mut().zip(v) {
        *o = count(*x, what)?;
    }
    Ok(out)
}

impl Summary {
    /// Read `raw` as the library filled it, refusing numbers that contradict
    /// each other: every operation is counted once by device or as without a
    /// usage, once by kind or as dropped, no device supports more operations
    /// than there are, and the cost shares lie in [0, 1].
    pub fn read(raw: &RawPlacement) -> Result<Self, Inconsistent> {
        let structure = match raw.structure {
            1 => Structure::Program,
            2 => Structure::NeuralNetwork,
            other => return Err(Inconsistent(format!("structure {other}"))),
        };
        let operations = count(raw.operations, "operations")?;
        let without_usage = count(raw.without_usage, "without_usage")?;
        let preferred = counts(&raw.preferred, "a preferred count")?;
        let supported = counts(&raw.supported, "a supported count")?;
        let costed = count(raw.costed, "costed")?;
        let kinds_dropped = count(raw.kinds_dropped, "kinds_dropped")?;
        let n_kinds = usize::try_from(raw.n_kinds)
            .ok()
            .filter(|n| *n <= KINDS)
            .ok_or_else(|| Inconsistent(format!("{} kinds in a table of {KINDS}", raw.n_kinds)))?;
        let mut kinds = Vec::with_capacity(n_kinds);
        for k in &raw.kinds[..n_kinds] {
            let end =
                k.op.iter()
                    .position(|&c| c == 0)
                    .ok_or_else(|| Inconsistent("an operator name without its NUL".into()))?;
            let bytes: Vec<u8> = k.op[..end].iter().map(|&c| c as u8).collect();
            kinds.push(Kind {
                op: String::from_utf8_lossy(&bytes).into_owned(),
                preferred: counts(&k.preferred, "a kind's count")?,
            });
        }
        let with_usage: u64 = preferred.iter().sum();
        if with_usage.checked_add(without_usage) != Some(operations) {
            return Err(Inconsistent(format!(
                "{with_usage} operations by device and {without_usage} without a usage, of {operations}"
            )));
        }
        let by_kind: u64 = kinds.iter().flat_map(|k| k.preferred).sum();
        if by_kind.checked_add(kinds_dropped) != Some(with_usage) {
            return Err(Inconsistent(format!(
                "{by_kind} operations by kind and {kinds_dropped} dropped, of {with_usage} with a usage"
            )));
        }
        if let Some(d) = supported.iter().position(|s| *s > with_usage) {
            return Err(Inconsistent(format!(
                "device {d} supports {} of {with_usage} operations",
                supported[d]
            )));
        }
        if costed > with_usage {
            return Err(Inconsistent(format!(
                "{costed} costed of {with_usage} operations"
            )));
        }
        let total: f64 = raw.cost.iter().sum();
        // NaN fails both ranges, as a negative share or an excess would.
        let in_range =
            raw.cost.iter().all(|c| (0.0..=1.0).contains(c)) && (0.0..=1.0 + 1e-6).contains(&total);
        if !in_range {
            return Err(Inconsistent(format!("cost shares {:?}", raw.cost)));
        }
        Ok(Summary {
            structure,
            operations,
            without_usage,
            preferred,
            supported,
            costed,
            cost: raw.cost,
            kinds,
            kinds_dropped,
        })
    }
}
