//! macOS readers: `task_info(TASK_VM_INFO)` for the calling process,
//! `proc_pid_rusage(RUSAGE_INFO_V4)` for another process, and
//! `host_statistics64(HOST_VM_INFO64)` plus sysctls for the system.
//!
//! Only the system calls live here; which fields are trusted at which
//! structure revision is decided in [`crate::darwin`], which is tested on
//! every platform.

use crate::darwin::{self, RusageMemory, TaskVm, VmStats, XswUsage};
use crate::darwin_abi::{self, Fact, Facts};
use crate::{SamplerError, SeriesRow, TaskMemory};
use libc::{rusage_info_v4, vm_statistics64};
use mach2::kern_return::{KERN_SUCCESS, kern_return_t};
use mach2::message::mach_msg_type_number_t;
use mach2::port::mach_port_t;
use mach2::task_info::{TASK_VM_INFO, task_vm_info};
use mach2::vm_types::{integer_t, natural_t, vm_size_t};
use std::ffi::CStr;
use std::mem;

/// Platform name written into records (`PLATFORM`).
pub const NAME: &str = "macos";

/// mach2 0.7 has no `TASK_VM_INFO_COUNT`; this is the header's definition.
const TASK_VM_INFO_COUNT: mach_msg_type_number_t =
    (size_of::<task_vm_info>() / size_of::<natural_t>()) as mach_msg_type_number_t;

/// What this module takes from `libc` and `mach2`, evaluated by the compiler
/// for the target: the struct layouts it passes to the kernel and reads
/// back, the flavors, counts and return codes.
const FFI_FACTS: Facts = &[
    &[
        Fact::number("type.natural_t.size", size_of::<natural_t>() as u64),
        Fact::number("type.integer_t.size", size_of::<integer_t>() as u64),
        Fact::number(
            "type.mach_msg_type_number_t.size",
            size_of::<mach_msg_type_number_t>() as u64,
        ),
        Fact::number("type.kern_return_t.size", size_of::<kern_return_t>() as u64),
        Fact::number("type.mach_port_t.size", size_of::<mach_port_t>() as u64),
        // `vm_kernel_page_size`'s type.
        Fact::number("type.vm_size_t.size", size_of::<vm_size_t>() as u64),
        Fact::number("const.KERN_SUCCESS", KERN_SUCCESS as u64),
    ],
    &[
        Fact::number("const.TASK_VM_INFO", TASK_VM_INFO as u64),
        Fact::number("const.TASK_VM_INFO_COUNT", TASK_VM_INFO_COUNT as u64),
        Fact::number("task_vm_info.size", size_of::<task_vm_info>() as u64),
    ],
    crate::darwin_abi_struct_field!(task_vm_info, virtual_size),
    crate::darwin_abi_struct_field!(task_vm_info, resident_size),
    crate::darwin_abi_struct_field!(task_vm_info, resident_size_peak),
    crate::darwin_abi_struct_field!(task_vm_info, compressed),
    crate::darwin_abi_struct_field!(task_vm_info, phys_footprint),
    crate::darwin_abi_struct_field!(task_vm_info, ledger_phys_footprint_peak),
    &[
        Fact::number("const.RUSAGE_INFO_V4", libc::RUSAGE_INFO_V4 as u64),
        Fact::number("rusage_info_v4.size", size_of::<rusage_info_v4>() as u64),
        Fact::number("const.ESRCH", libc::ESRCH as u64),
    ],
    crate::darwin_abi_struct_field!(rusage_info_v4, ri_wired_size),
    crate::darwin_abi_struct_field!(rusage_info_v4, ri_resident_size),
    crate::darwin_abi_struct_field!(rusage_info_v4, ri_phys_footprint),
    crate::darwin_abi_struct_field!(rusage_info_v4, ri_lifetime_max_phys_footprint),
    &[
        Fact::number("const.HOST_VM_INFO64", libc::HOST_VM_INFO64 as u64),
        Fact::number(
            "const.HOST_VM_INFO64_COUNT",
            libc::HOST_VM_INFO64_COUNT as u64,
        ),
        Fact::number("vm_statistics64.size", size_of::<vm_statistics64>() as u64),
    ],
    crate::darwin_abi_struct_field!(vm_statistics64, free_count),
    crate::darwin_abi_struct_field!(vm_statistics64, wire_count),
    crate::darwin_abi_struct_field!(vm_statistics64, pageins),
    crate::darwin_abi_struct_field!(vm_statistics64, pageouts),
    crate::darwin_abi_struct_field!(vm_statistics64, speculative_count),
    crate::darwin_abi_struct_field!(vm_statistics64, swapins),
    crate::darwin_abi_struct_field!(vm_statistics64, swapouts),
    crate::darwin_abi_struct_field!(vm_statistics64, compressor_page_count),
    crate::darwin_abi_struct_field!(vm_statistics64, total_uncompressed_pages_in_compressor),
];

// Every fact Apple's headers state is checked, and agrees (see darwin_abi);
// a build for macOS fails naming the first one that does not.
const _: () = darwin_abi::assert_agrees(&[FFI_FACTS, darwin::ABI_FACTS], true);

/// Read the calling process's memory with `task_info(TASK_VM_INFO)` (peaks are lifetime
/// values, never reset). Fails when the call fails or the kernel fills less than
/// revision 1 (no `phys_footprint`).
pub fn snapshot_self() -> Result<TaskMemory, SamplerError> {
    let mut info = task_vm_info::default();
    let mut count = TASK_VM_INFO_COUNT;
    // SAFETY: `info` is a `task_vm_info` of `TASK_VM_INFO_COUNT` natural_t
    // words and `count` says so; the kernel writes at most that many words and
    // stores the count it filled. `mach_task_self()` only reads a global.
    let kr = unsafe {
        mach2::task::task_info(
            mach2::traps::mach_task_self(),
            TASK_VM_INFO,
            (&raw mut info).cast(),
            &mut count,
        )
    };
    if kr != KERN_SUCCESS {
        return Err(SamplerError::Os {
            call: "task_info(TASK_VM_INFO)",
            reason: format!("kern_return_t {kr}"),
        });
    }
    // Packed struct: fields are copied out by value.
    TaskVm {
        count,
        virtual_size: info.virtual_size,
        resident_size: info.resident_size,
        resident_size_peak: info.resident_size_peak,
        compressed: info.compressed,
        phys_footprint: info.phys_footprint,
        ledger_phys_footprint_peak: info.ledger_phys_footprint_peak,
    }
    .task_memory()
}

/// macOS peaks are lifetime values; memqual does not reset them.
pub fn reset_peak_self() -> Option<bool> {
    None
}

/// Reads one process's memory each tick with `proc_pid_rusage`, which needs
/// the same effective uid as the target (or root).
pub struct ProcessProbe {
    pid: i32,
}

impl ProcessProbe {
    /// A probe for `pid`, checked with one read: `ProcessGone` when the process does not
    /// exist or has exited, `Os` when `proc_pid_rusage` fails otherwise (e.g. another user's
    /// process without root).
    pub fn new(pid: i32) -> Result<Self, SamplerError> {
        let probe = ProcessProbe { pid };
        if probe.read()?.exited() {
            return Err(SamplerError::ProcessGone { pid });
        }
        Ok(probe)
    }

    /// Fill footprint, resident, lifetime footprint peak and wired bytes.
    /// A process that is gone, or has exited and is a zombie (footprint 0),
    /// leaves the fields `None` and returns `ProcessGone`.
    pub fn sample(&mut self, row: &mut SeriesRow) -> Result<(), SamplerError> {
        self.read()?.fill(self.pid, row)
    }

    fn read(&self) -> Result<RusageMemory, SamplerError> {
        // SAFETY: `rusage_info_v4` holds only integers and a byte array, so
        // all-zero bytes are a valid value.
        let mut ri: rusage_info_v4 = unsafe { mem::zeroed() };
        // SAFETY: for RUSAGE_INFO_V4 the kernel copies out exactly
        // sizeof(rusage_info_v4) bytes into the buffer. libc declares the
        // buffer as C's `rusage_info_t *`, hence the pointer cast.
        let rc = unsafe {
            libc::proc_pid_rusage(
                self.pid,
                libc::RUSAGE_INFO_V4,
                (&raw mut ri).cast::<libc::rusage_info_t>(),
            )
        };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return Err(if err.raw_os_error() == Some(libc::ESRCH) {
                SamplerError::ProcessGone { pid: self.pid }
            } else {
                SamplerError::Os {
                    call: "proc_pid_rusage",
                    reason: err.to_string(),
                }
            });
        }
        Ok(RusageMemory {
            phys_footprint: ri.ri_phys_footprint,
            resident_size: ri.ri_resident_size,
            wired_size: ri.ri_wired_size,
            lifetime_max_phys_footprint: ri.ri_lifetime_max_phys_footprint,
        })
    }
}

/// Reads system-wide memory each tick.
///
/// Staleness: XNU hands callers that are not platform binaries a cached
/// `vm_statistics64` for most calls within each second, so polling faster
/// than about 1 Hz repeats old numbers. The probe therefore calls
/// `host_statistics64` at most once per second and fills the ticks in
/// between from the last value; those ticks, and any call the kernel answers
/// byte-identically, count as cached repeats and stamp the row's
/// `sys_vm_sampled_ns` with the time of the last fresh read, so no reader
/// mistakes cached values for the tick's resolution. The sysctl fields in
/// the same row are always fresh.
pub struct SystemProbe {
    /// Send right from `mach_host_self()`, taken once (each call adds a user reference).
    host: mach_port_t,
    /// Kernel page size, the unit of the `vm_statistics64` page counts.
    page: u64,
    /// `host_statistics64`, called at most once per XNU refresh interval;
    /// its `freshness` holds the effective sample times and the cached
    /// repeats (reused values and byte-identical kernel-cached reads).
    pub vm: darwin::RateLimited<(vm_statistics64, u32)>,
}

impl Default for SystemProbe {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SystemProbe {
    fn drop(&mut self) {
        // SAFETY: `mach_host_self()` in `new` added one user reference to
        // the host port name; this releases exactly that one, once.
        unsafe {
            mach2::mach_port::mach_port_deallocate(mach2::traps::mach_task_self(), self.host);
        }
    }
}

impl SystemProbe {
    /// Take the host port and the kernel page size once; cannot fail (a failing read is
    /// reported by each `sample`).
    pub fn new() -> Self {
        // SAFETY: `mach_host_self` has no preconditions; `vm_kernel_page_size`
        // is a libSystem global set before `main` and never written after.
        let (host, page) = unsafe {
            (
                mach2::mach_init::mach_host_self(),
                mach2::vm_page_size::vm_kernel_page_size,
            )
        };
        SystemProbe {
            host,
            page: page as u64,
            vm: darwin::RateLimited::new(darwin::HOST_STATISTICS_REFRESH_NS),
        }
    }

    /// Fill the system fields of `row`. A read that fails leaves its fields
    /// `None` and is reported in the error; the other reads still happen.
    pub fn sample(&mut self, row: &mut SeriesRow) -> Result<(), SamplerError> {
        let mut first_err = None;
        let host = self.host;
        let read = self.vm.read(
            row.t_ns,
            || vm_statistics(host),
            |a, b| a.1 == b.1 && raw_bytes(&a.0) == raw_bytes(&b.0),
        );
        match read {
            Ok(((stats, count), sampled_ns)) => {
                let vm = VmStats {
                    count,
                    free_count: stats.free_count,
                    speculative_count: stats.speculative_count,
                    wire_count: stats.wire_count,
                    pageins: stats.pageins,
                    pageouts: stats.pageouts,
                    compressor_page_count: stats.compressor_page_count,
                    swapins: stats.swapins,
                    swapouts: stats.swapouts,
                    total_uncompressed_pages_in_compressor: stats
                        .total_uncompressed_pages_in_compressor,
                };
                if let Err(e) = vm.fill(self.page, row) {
                    first_err = first_err.or(Some(e));
                }
                row.sys_vm_sampled_ns = Some(sampled_ns);
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
        match sysctl::<{ darwin::HW_MEMSIZE_SIZE }>(darwin::SYSCTL_HW_MEMSIZE) {
            Ok(b) => row.sys_total_bytes = Some(u64::from_ne_bytes(b)),
            Err(e) => first_err = first_err.or(Some(e)),
        }
        match sysctl::<{ darwin::XSW_USAGE_SIZE }>(darwin::SYSCTL_VM_SWAPUSAGE) {
            Ok(b) => {
                if let Some(x) = XswUsage::from_bytes(&b) {
                    row.sys_swap_total_bytes = Some(x.total);
                    row.sys_swap_used_bytes = Some(x.used);
                }
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
        match sysctl::<{ darwin::PRESSURE_LEVEL_SIZE }>(darwin::SYSCTL_PRESSURE_LEVEL) {
            Ok(b) => {
                let level = i32::from_ne_bytes(b);
                row.sys_pressure_level = Some(level);
                if darwin::PressureLevel::from_sysctl(level).is_none() {
                    first_err = first_err.or(Some(SamplerError::Os {
                        call: "sysctlbyname",
                        reason: format!(
                            "kern.memorystatus_vm_pressure_level: unknown level {level}"
                        ),
                    }));
                }
            }
            Err(e) => first_err = first_err.or(Some(e)),
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// The raw statistics and the count (revision) the kernel filled.
fn vm_statistics(host: mach_port_t) -> Result<(vm_statistics64, u32), SamplerError> {
    // SAFETY: `vm_statistics64` holds only integers, so all-zero bytes are
    // a valid value; words the kernel does not fill stay zero.
    let mut stats: vm_statistics64 = unsafe { mem::zeroed() };
    let mut count = libc::HOST_VM_INFO64_COUNT;
    // SAFETY: `stats` is `HOST_VM_INFO64_COUNT` integer_t words and `count`
    // says so; the kernel writes at most that many and stores the count
    // it filled. `host` is a live host send right.
    let kr = unsafe {
        libc::host_statistics64(
            host,
            libc::HOST_VM_INFO64,
            (&raw mut stats).cast(),
            &mut count,
        )
    };
    if kr != KERN_SUCCESS {
        return Err(SamplerError::Os {
            call: "host_statistics64(HOST_VM_INFO64)",
            reason: format!("kern_return_t {kr}"),
        });
    }
    Ok((stats, count))
}

/// The bytes of a statistics snapshot, for the cached-repeat comparison.
fn raw_bytes(v: &vm_statistics64) -> &[u8] {
    // SAFETY: `vm_statistics64` is `repr(C, packed(8))` and made only of
    // u32 pairs and u64s, so it has no padding; every byte was initialised
    // (zeroed, then written by the kernel). The slice borrows `v`.
    unsafe {
        std::slice::from_raw_parts(
            (v as *const vm_statistics64).cast::<u8>(),
            size_of::<vm_statistics64>(),
        )
    }
}

/// Read sysctl `name` into `buf`; returns the length the kernel stored. An
/// empty `buf` asks only for the value's length.
fn sysctl_read(name: &CStr, buf: &mut [u8]) -> Result<usize, SamplerError> {
    let mut len: libc::size_t = buf.len();
    let out: *mut libc::c_void = if buf.is_empty() {
        std::ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    // SAFETY: `name` is NUL-terminated; `out` is null (length query) or
    // writable for `len` bytes, and the kernel writes at most that many,
    // storing the length it wrote (or would write); no new value is set
    // (null, 0).
    let rc = unsafe { libc::sysctlbyname(name.as_ptr(), out, &mut len, std::ptr::null_mut(), 0) };
    if rc != 0 {
        return Err(SamplerError::Os {
            call: "sysctlbyname",
            reason: format!(
                "{}: {}",
                name.to_string_lossy(),
                std::io::Error::last_os_error()
            ),
        });
    }
    Ok(len)
}

/// Read a sysctl whose value is exactly `N` bytes.
fn sysctl<const N: usize>(name: &CStr) -> Result<[u8; N], SamplerError> {
    let mut buf = [0u8; N];
    let len = sysctl_read(name, &mut buf)?;
    if len != N {
        return Err(SamplerError::Os {
            call: "sysctlbyname",
            reason: format!(
                "{}: returned {len} bytes, expected {N}",
                name.to_string_lossy()
            ),
        });
    }
    Ok(buf)
}

/// Read a sysctl of variable length (a string such as `hw.model`).
fn sysctl_vec(name: &CStr) -> Result<Vec<u8>, SamplerError> {
    let mut buf = vec![0u8; sysctl_read(name, &mut [])?];
    let len = sysctl_read(name, &mut buf)?;
    buf.truncate(len);
    Ok(buf)
}

// libnotify, part of libSystem (notify.h); every call returns a
// NOTIFY_STATUS_* code, 0 being NOTIFY_STATUS_OK.
unsafe extern "C" {
    fn notify_register_check(name: *const libc::c_char, out_token: *mut libc::c_int) -> u32;
    fn notify_get_state(token: libc::c_int, state64: *mut u64) -> u32;
    fn notify_cancel(token: libc::c_int) -> u32;
}

const NOTIFY_STATUS_OK: u32 = 0;

/// The raw thermal pressure level (decode with
/// [`darwin::ThermalPressure::describe`]): the state of the notify(3) name
/// [`darwin::THERMAL_PRESSURE_NOTIFICATION`]. No privileges needed.
pub fn thermal_pressure_state() -> Result<u64, SamplerError> {
    let fail = |what: &str, status: u32| SamplerError::Os {
        call: "notify(3)",
        reason: format!(
            "{what} {}: status {status}",
            darwin::THERMAL_PRESSURE_NOTIFICATION
        ),
    };
    let name = c"com.apple.system.thermalpressurelevel";
    debug_assert_eq!(
        name.to_bytes(),
        darwin::THERMAL_PRESSURE_NOTIFICATION.as_bytes()
    );
    let mut token: libc::c_int = 0;
    // SAFETY: `name` is NUL-terminated and outlives the call; `token` is a
    // valid place for the int the call writes.
    let status = unsafe { notify_register_check(name.as_ptr(), &mut token) };
    if status != NOTIFY_STATUS_OK {
        return Err(fail("notify_register_check", status));
    }
    let mut state: u64 = 0;
    // SAFETY: `token` was just registered and is not cancelled yet; `state`
    // is a valid place for the u64 the call writes.
    let got = unsafe { notify_get_state(token, &mut state) };
    // SAFETY: `token` came from the successful registration above and is
    // cancelled exactly once; it is not used afterwards.
    unsafe {
        notify_cancel(token);
    }
    if got != NOTIFY_STATUS_OK {
        return Err(fail("notify_get_state", got));
    }
    Ok(state)
}

/// This boot's identity: `kern.bootsessionuuid`, new on every boot.
pub fn boot_session_id() -> Option<String> {
    sysctl_vec(darwin::SYSCTL_BOOT_SESSION)
        .ok()
        .and_then(|b| crate::host::c_string(&b))
}

/// `hw.model`, `kern.boottime` and the thermal pressure level (libnotify).
pub fn host_identity() -> crate::host::HostIdentity {
    use crate::host;
    let mut notes = Vec::new();
    let hardware_model = sysctl_vec(darwin::SYSCTL_HW_MODEL)
        .map_err(|e| notes.push(e.to_string()))
        .ok()
        .and_then(|b| host::c_string(&b));
    let boot_time_unix_s = sysctl::<{ host::TIMEVAL_SIZE }>(darwin::SYSCTL_KERN_BOOTTIME)
        .map_err(|e| notes.push(e.to_string()))
        .ok()
        .and_then(|b| host::timeval_seconds(&b));
    let thermal_state = thermal_pressure_state()
        .map_err(|e| notes.push(format!("thermal state: {e}")))
        .ok()
        .map(|v| {
            format!(
                "{} (thermal pressure level {v})",
                darwin::ThermalPressure::describe(v)
            )
        });
    host::HostIdentity {
        hardware_model,
        boot_time_unix_s,
        thermal_state,
        notes,
    }
}
