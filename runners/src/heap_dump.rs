//! jemalloc heap profiles at every phase marker, for allocation attribution.
//!
//! The harness preloads jemalloc (`LD_PRELOAD`) with profiling on
//! (`MALLOC_CONF=prof:true,…`); this module finds jemalloc's `mallctl` in
//! the process (`dlsym(RTLD_DEFAULT)`), checks that profiling is on at the
//! sampling interval the spec names, and asks for one profile right after
//! each marker (`prof.dump` with a file name). Without `mallctl`, or with
//! profiling off, the arm is not attributable: [`HeapDumper::open`] says
//! why, and the worker refuses the arm as not runnable rather than run it
//! unattributed.

use std::ffi::{CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

/// jemalloc's control entry point (`int mallctl(const char *name, void
/// *oldp, size_t *oldlenp, void *newp, size_t newlen)`).
type Mallctl =
    unsafe extern "C" fn(*const c_char, *mut c_void, *mut usize, *mut c_void, usize) -> c_int;

/// Why a worker cannot attribute its allocations.
#[derive(Debug, thiserror::Error)]
pub enum NotAttributable {
    /// No `mallctl` in the process: jemalloc is not loaded.
    #[error(
        "allocation attribution needs jemalloc in the worker, and there is no `mallctl` in \
         this process: the harness preloads libjemalloc.so.2 (Debian package libjemalloc2); \
         was LD_PRELOAD dropped?"
    )]
    NoMallctl,
    /// jemalloc is loaded, but its profiler is off or was not built in.
    #[error(
        "jemalloc is loaded but its heap profiler is off ({0}): it needs a jemalloc built \
         with profiling (Debian's libjemalloc2 is) and MALLOC_CONF=prof:true"
    )]
    ProfilingOff(String),
    /// jemalloc samples at another interval than the spec says.
    #[error("jemalloc samples every 2^{running} bytes, but the arm asked for 2^{asked}")]
    OtherInterval {
        /// `opt.lg_prof_sample` as jemalloc reports it.
        running: usize,
        /// The spec's `lg_prof_sample`.
        asked: u8,
    },
}

/// The open profiler: `mallctl`, and the folder its profiles go to.
pub struct HeapDumper {
    mallctl: Mallctl,
    dir: PathBuf,
    /// In an overhead block run with `toggles = "attribution"`: the block
    /// length after which the worker switches sampling ([`Self::set_sampling`]).
    pub toggle_every: Option<u32>,
}

impl HeapDumper {
    /// Find `mallctl` and check that jemalloc profiles at `lg_prof_sample`.
    pub fn open(
        dir: &Path,
        lg_prof_sample: u8,
        toggle_every: Option<u32>,
    ) -> Result<HeapDumper, NotAttributable> {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only
        // looks a symbol up; a null result is handled below.
        let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mallctl".as_ptr()) };
        if symbol.is_null() {
            return Err(NotAttributable::NoMallctl);
        }
        // SAFETY: `mallctl` is jemalloc's exported function of exactly
        // this C signature (jemalloc(3)); the pointer is not null.
        let mallctl: Mallctl = unsafe { std::mem::transmute::<*mut c_void, Mallctl>(symbol) };
        let dumper = HeapDumper {
            mallctl,
            dir: dir.to_path_buf(),
            toggle_every,
        };
        let mut on: u8 = 0;
        let code = dumper.read(c"opt.prof", &mut on);
        if code != 0 || on == 0 {
            let why = if code != 0 {
                format!("mallctl(\"opt.prof\") failed with error {code}")
            } else {
                "opt.prof is false".to_string()
            };
            return Err(NotAttributable::ProfilingOff(why));
        }
        let mut lg: usize = 0;
        let code = dumper.read(c"opt.lg_prof_sample", &mut lg);
        if code != 0 || lg != usize::from(lg_prof_sample) {
            return Err(NotAttributable::OtherInterval {
                running: lg,
                asked: lg_prof_sample,
            });
        }
        Ok(dumper)
    }

    /// Read the `mallctl` value `name` into `out`; jemalloc's error code.
    fn read<T: Copy>(&self, name: &std::ffi::CStr, out: &mut T) -> c_int {
        let mut len = std::mem::size_of::<T>();
        // SAFETY: `out` is valid for `len` bytes of writes and `len` is its
        // size; jemalloc writes at most `len` bytes and fails (EINVAL)
        // when the value's size differs; no new value is passed.
        unsafe {
            (self.mallctl)(
                name.as_ptr(),
                (out as *mut T).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        }
    }

    /// Switch jemalloc's sampling on or off (`prof.active`), and read it
    /// back: an overhead block run that believed it switched when it did not
    /// would compare sampled requests with sampled ones.
    pub fn set_sampling(&self, active: bool) -> Result<(), String> {
        let mut new = active;
        // SAFETY: `prof.active` is a `bool` read-write mallctl (jemalloc(3));
        // we pass a pointer to one bool with its size and read nothing.
        let code = unsafe {
            (self.mallctl)(
                c"prof.active".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                (&mut new as *mut bool).cast(),
                std::mem::size_of::<bool>(),
            )
        };
        let mut now = !active;
        match code {
            0 if self.read(c"prof.active", &mut now) == 0 && now == active => Ok(()),
            0 => Err(format!(
                "jemalloc's prof.active reads {now} after it was set to {active}"
            )),
            code => Err(format!(
                "jemalloc refused prof.active = {active} (mallctl error {code}, {})",
                std::io::Error::from_raw_os_error(code)
            )),
        }
    }

    /// Write the heap profile of marker `seq` of `phase`, named by
    /// [`worker_contract::heap_profile_name`]; `Err` says why it is missing
    /// (jemalloc's error code: the folder gone or not writable, say).
    pub fn dump(&self, seq: u64, phase: &str) -> Result<PathBuf, String> {
        let path = self
            .dir
            .join(worker_contract::heap_profile_name(seq, phase));
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| format!("{} holds a NUL byte", path.display()))?;
        let mut name: *const c_char = c_path.as_ptr();
        // SAFETY: `prof.dump` takes a `const char *` as its new value: we
        // pass a pointer to one, with its size; the string outlives the
        // call, and jemalloc copies what it needs before returning.
        let code = unsafe {
            (self.mallctl)(
                c"prof.dump".as_ptr(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                (&mut name as *mut *const c_char).cast(),
                std::mem::size_of::<*const c_char>(),
            )
        };
        match code {
            0 => Ok(path),
            code => Err(format!(
                "jemalloc could not write the heap profile {} (mallctl prof.dump: error {code}, \
                 {})",
                path.display(),
                std::io::Error::from_raw_os_error(code)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_jemalloc_the_arm_is_not_attributable() {
        // The test binary runs on the system allocator: no mallctl.
        let err = HeapDumper::open(Path::new("/nonexistent"), 14, None)
            .err()
            .expect("no mallctl without jemalloc");
        assert!(matches!(err, NotAttributable::NoMallctl), "{err}");
        assert!(err.to_string().contains("libjemalloc2"), "{err}");
    }
}
