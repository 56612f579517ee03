//! The checks the patched whisper.cpp applies to an encoder's output before it
//! copies a byte (`runners/whisper-patch/whisper-memqual-output.h`), compiled
//! here from that very header, as C and as C++, and exposed to Rust so they are
//! tested on any host. The Core ML glue on a Mac and the external-encoder
//! callback call the same functions; only the numbers they read differ.
//!
//! Contract: [`check`] accepts exactly one float32 output named as declared,
//! shaped `[n_ctx, n_state]` after leading 1s, whose element count matches and
//! whose strides lay it out without overlap inside its buffer; anything else is
//! an [`Refusal`] naming the expected and received values. [`copy`] then
//! writes it row-major, stride-aware.
//!
//! The Core ML placement summary (`whisper-memqual-placement.h`) is
//! compiled and exposed the same way: [`placement`].

use std::ffi::{CString, c_char, c_void};

pub mod placement;

/// `WHISPER_MEMQUAL_OUTPUT_MAX_RANK`.
pub const MAX_RANK: usize = 8;

/// `enum whisper_memqual_elem`: Core ML's `MLMultiArrayDataType` numbers.
pub mod elem {
    /// Float16.
    pub const FLOAT16: i32 = 0x10010;
    /// Float32, the only type accepted.
    pub const FLOAT32: i32 = 0x10020;
    /// Float64 (Core ML's `Double`).
    pub const FLOAT64: i32 = 0x10040;
    /// Int32.
    pub const INT32: i32 = 0x20020;
}

/// `enum whisper_memqual_output_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The producer reported an error.
    PredictionFailed,
    /// Not exactly one output feature.
    Features,
    /// The feature's name is not the declared one.
    Name,
    /// Not float32.
    Type,
    /// Fewer than 2 or more than [`MAX_RANK`] dimensions.
    Rank,
    /// Not `[n_ctx, n_state]` after leading 1s.
    Shape,
    /// The element count disagrees with the shape.
    Count,
    /// Overlapping, non-positive or reaching past the buffer.
    Strides,
    /// No data pointer.
    NoData,
    /// The expectation itself is no shape.
    Expectation,
    /// A status the header does not define (a defect here).
    Unknown(i32),
}

impl Status {
    fn from_code(code: i32) -> Self {
        match code {
            1 => Self::PredictionFailed,
            2 => Self::Features,
            3 => Self::Name,
            4 => Self::Type,
            5 => Self::Rank,
            6 => Self::Shape,
            7 => Self::Count,
            8 => Self::Strides,
            9 => Self::NoData,
            10 => Self::Expectation,
            other => Self::Unknown(other),
        }
    }
}

/// `struct whisper_memqual_output`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct RawOutput {
    pub prediction_status: i32,
    pub prediction_error: *const c_char,
    pub n_features: i32,
    pub name: *const c_char,
    pub elem_type: i32,
    pub rank: i32,
    pub shape: [i64; MAX_RANK],
    pub strides: [i64; MAX_RANK],
    pub count: i64,
    pub data: *const c_void,
    pub buffer_bytes: i64,
}

/// `struct whisper_memqual_output_expect`.
#[repr(C)]
struct RawExpect {
    name: *const c_char,
    n_ctx: i64,
    n_state: i64,
}

/// `struct whisper_memqual_output_layout`: where the two real dimensions step.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Layout {
    /// Elements between positions.
    pub stride_ctx: i64,
    /// Elements between features of one position.
    pub stride_state: i64,
    /// Row-major `[n_ctx, n_state]` without padding (1) or not (0).
    pub contiguous: i32,
}

unsafe extern "C" {
    fn memqual_c_output_check(
        out: *const RawOutput,
        want: *const RawExpect,
        layout: *mut Layout,
        msg: *mut c_char,
        msg_len: usize,
    ) -> i32;
    fn memqual_cpp_output_check(
        out: *const RawOutput,
        want: *const RawExpect,
        layout: *mut Layout,
        msg: *mut c_char,
        msg_len: usize,
    ) -> i32;
    fn memqual_c_output_copy(
        out: *const RawOutput,
        want: *const RawExpect,
        layout: *const Layout,
        dst: *mut f32,
    );
    fn memqual_c_output_from_ggml_order(
        tensor_type: i32,
        n_dims: i32,
        ne: *const i64,
        nb: *const i64,
        data: *const c_void,
        nbytes: usize,
        out: *mut RawOutput,
        msg: *mut c_char,
        msg_len: usize,
    ) -> i32;
}

/// What a producer handed back, owning what the raw form points to.
#[derive(Debug, Clone)]
pub struct Output {
    /// 0, or the producer's failure code.
    pub prediction_status: i32,
    /// The producer's text for that failure.
    pub prediction_error: Option<String>,
    /// Output features the prediction returned.
    pub n_features: i32,
    /// The one feature's name.
    pub name: Option<String>,
    /// [`elem`] number.
    pub elem_type: i32,
    /// Dimensions, outermost first.
    pub shape: Vec<i64>,
    /// Strides in elements, outermost first.
    pub strides: Vec<i64>,
    /// Elements the producer says it holds.
    pub count: i64,
    /// The buffer (its length is the readable bytes; `None`: a null pointer).
    pub data: Option<Vec<f32>>,
}

/// Why an output was refused: the status and the header's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status:?}: {message}")]
pub struct Refusal {
    /// Which check refused it.
    pub status: Status,
    /// What was expected and what came.
    pub message: String,
}

impl Refusal {
    /// A status the header returned, with the message it wrote into `msg`
    /// (up to its NUL; the whole buffer if it wrote none).
    fn from_header(code: i32, msg: &[c_char]) -> Self {
        Refusal {
            status: Status::from_code(code),
            message: header_text(msg),
        }
    }
}

/// The message a header function wrote into `msg`, up to its NUL (the
/// whole buffer if it wrote none).
pub fn header_text(msg: &[c_char]) -> String {
    let bytes: Vec<u8> = msg
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The expected output: the declared feature name (`None` accepts any),
/// encoder positions and state width.
#[derive(Debug, Clone)]
pub struct Expect {
    /// The declared feature name.
    pub name: Option<String>,
    /// Encoder positions.
    pub n_ctx: i64,
    /// Features per position.
    pub n_state: i64,
}

struct Prepared {
    raw: RawOutput,
    want: RawExpect,
    _strings: Vec<CString>,
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', "\u{2400}")).unwrap_or_default()
}

fn prepare(out: &Output, want: &Expect) -> Prepared {
    let mut strings = Vec::new();
    let mut keep = |s: &Option<String>| match s {
        Some(s) => {
            let c = cstring(s);
            let p = c.as_ptr();
            strings.push(c);
            p
        }
        None => std::ptr::null(),
    };
    let prediction_error = keep(&out.prediction_error);
    let name = keep(&out.name);
    let want_name = keep(&want.name);
    let mut shape = [0i64; MAX_RANK];
    let mut strides = [0i64; MAX_RANK];
    for (d, s) in shape.iter_mut().zip(&out.shape) {
        *d = *s;
    }
    for (d, s) in strides.iter_mut().zip(&out.strides) {
        *d = *s;
    }
    let (data, buffer_bytes) = match &out.data {
        Some(v) => (v.as_ptr().cast(), (v.len() * 4) as i64),
        None => (std::ptr::null(), 0),
    };
    Prepared {
        raw: RawOutput {
            prediction_status: out.prediction_status,
            prediction_error,
            n_features: out.n_features,
            name,
            elem_type: out.elem_type,
            // More dimensions than the raw form holds: reported as such, never read past.
            rank: i32::try_from(out.shape.len()).unwrap_or(i32::MAX),
            shape,
            strides,
            count: out.count,
            data,
            buffer_bytes,
        },
        want: RawExpect {
            name: want_name,
            n_ctx: want.n_ctx,
            n_state: want.n_state,
        },
        _strings: strings,
    }
}

/// Which compilation of the header to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compiled {
    /// The header as C.
    C,
    /// The header as C++ (how whisper.cpp includes it).
    Cpp,
}

/// The header's check, through the given compilation.
pub fn check_with(compiled: Compiled, out: &Output, want: &Expect) -> Result<Layout, Refusal> {
    let p = prepare(out, want);
    let mut layout = Layout::default();
    let mut msg = vec![0 as c_char; 512];
    let f = match compiled {
        Compiled::C => memqual_c_output_check,
        Compiled::Cpp => memqual_cpp_output_check,
    };
    // SAFETY: every pointer in `p` points into `p._strings`, `out.data` or is
    // null, all alive for the call; `msg` holds the length passed.
    let code = unsafe { f(&p.raw, &p.want, &mut layout, msg.as_mut_ptr(), msg.len()) };
    if code == 0 {
        return Ok(layout);
    }
    Err(Refusal::from_header(code, &msg))
}

/// The header's check (its C compilation).
pub fn check(out: &Output, want: &Expect) -> Result<Layout, Refusal> {
    check_with(Compiled::C, out, want)
}

/// Check, then copy row-major `[n_ctx, n_state]` as the patch copies it.
pub fn copy(out: &Output, want: &Expect) -> Result<Vec<f32>, Refusal> {
    let layout = check(out, want)?;
    let p = prepare(out, want);
    let n = usize::try_from(want.n_ctx * want.n_state).unwrap_or(0);
    let mut dst = vec![f32::NAN; n];
    // SAFETY: the check passed, so every offset the copy reads lies inside
    // `out.data`'s buffer, and `dst` holds n_ctx*n_state floats.
    unsafe { memqual_c_output_copy(&p.raw, &p.want, &layout, dst.as_mut_ptr()) };
    Ok(dst)
}

/// The external-encoder ABI's tensor (`ne`/`nb` innermost first, byte
/// strides) as the header converts it.
pub fn from_ggml_order(
    tensor_type: i32,
    n_dims: i32,
    ne: [i64; 4],
    nb: [i64; 4],
    data: Vec<f32>,
) -> Result<Output, Refusal> {
    // SAFETY: RawOutput is plain data; all-zero is a valid value (null pointers).
    let mut raw: RawOutput = unsafe { std::mem::zeroed() };
    let mut msg = vec![0 as c_char; 512];
    // SAFETY: ne and nb hold 4 values each; data's pointer and byte length
    // describe one live buffer; msg holds the length passed.
    let code = unsafe {
        memqual_c_output_from_ggml_order(
            tensor_type,
            n_dims,
            ne.as_ptr(),
            nb.as_ptr(),
            data.as_ptr().cast(),
            data.len() * 4,
            &mut raw,
            msg.as_mut_ptr(),
            msg.len(),
        )
    };
    if code != 0 {
        return Err(Refusal::from_header(code, &msg));
    }
    let rank = usize::try_from(raw.rank).unwrap_or(0).min(MAX_RANK);
    Ok(Output {
        prediction_status: 0,
        prediction_error: None,
        n_features: raw.n_features,
        name: None,
        elem_type: raw.elem_type,
        shape: raw.shape[..rank].to_vec(),
        strides: raw.strides[..rank].to_vec(),
        count: raw.count,
        data: (!raw.data.is_null()).then_some(data),
    })
}
