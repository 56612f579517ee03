//! The host a run measured: hardware model, boot time, thermal state.
//!
//! Read once per run. Each platform module provides `host_identity()`;
//! the decoding of what the kernel returns is here, pure, so it is tested
//! on every platform.

use serde::{Deserialize, Serialize};

/// The host a run measured, read once per run by `host_identity()`; a field that
/// cannot be read is `None` and `notes` says why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostIdentity {
    /// macOS `hw.model` (e.g. `Mac14,2`); Linux DMI product name or device-tree model.
    pub hardware_model: Option<String>,
    /// macOS `kern.boottime`; Linux `btime` of `/proc/stat`. Seconds since the epoch.
    pub boot_time_unix_s: Option<u64>,
    /// The platform's thermal state when it can be read without privileges.
    pub thermal_state: Option<String>,
    /// Why a field is missing.
    pub notes: Vec<String>,
}

/// The text before the first NUL, trimmed; `None` when empty or not UTF-8.
/// (sysctl strings and device-tree properties end in NUL.)
pub fn c_string(bytes: &[u8]) -> Option<String> {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    let text = std::str::from_utf8(&bytes[..end]).ok()?.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// Size of Darwin's 64-bit `struct timeval` (`kern.boottime`): an 8-byte
/// `tv_sec`, a 4-byte `tv_usec` and 4 bytes of padding.
pub const TIMEVAL_SIZE: usize = 16;

/// `tv_sec` of Darwin's `struct timeval`: a signed 64-bit `time_t` first.
pub const TIMEVAL_TV_SEC: crate::darwin_abi::FieldLayout = crate::darwin_abi::FieldLayout {
    offset: 0,
    size: 8,
    signed: true,
};

/// Whole seconds of a native-endian 64-bit `struct timeval`; `None` when the
/// length is wrong or the time is before the epoch.
pub fn timeval_seconds(bytes: &[u8]) -> Option<u64> {
    if bytes.len() != TIMEVAL_SIZE {
        return None;
    }
    let secs = i64::from_ne_bytes(TIMEVAL_TV_SEC.bytes(bytes)?.try_into().ok()?);
    u64::try_from(secs).ok()
}

/// The `btime N` line of `/proc/stat`.
pub fn proc_stat_btime(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_stop_at_the_first_nul() {
        assert_eq!(c_string(b"Mac14,2\0\0\0").as_deref(), Some("Mac14,2"));
        assert_eq!(
            c_string(b"Raspberry Pi 4 Model B Rev 1.4\0").as_deref(),
            Some("Raspberry Pi 4 Model B Rev 1.4")
        );
        assert_eq!(
            c_string(b"Standard PC (Q35)\n").as_deref(),
            Some("Standard PC (Q35)")
        );
        assert_eq!(c_string(b"\0Mac"), None);
        assert_eq!(c_string(b"\xff\xfe\0"), None);
    }

    #[test]
    fn boot_time_comes_from_the_seconds_of_a_timeval() {
        let mut tv = [0u8; TIMEVAL_SIZE];
        tv[..8].copy_from_slice(&1_700_000_000i64.to_ne_bytes());
        tv[8..12].copy_from_slice(&123_456i32.to_ne_bytes());
        assert_eq!(timeval_seconds(&tv), Some(1_700_000_000));
        assert_eq!(timeval_seconds(&tv[..12]), None);
        tv[..8].copy_from_slice(&(-1i64).to_ne_bytes());
        assert_eq!(timeval_seconds(&tv), None);
    }

    #[test]
    fn btime_is_read_from_proc_stat() {
        let stat = "cpu  1 2 3 4\nintr 5\nctxt 6\nbtime 1764400000\nprocesses 7\n";
        assert_eq!(proc_stat_btime(stat), Some(1_764_400_000));
        assert_eq!(proc_stat_btime("cpu 1\n"), None);
    }
}
