//! Who measured: the host's identity (OS, kernel, hardware, CPU, RAM, boot)
//! and memqual's own (version, executable digest), for `host.json`.

use reports::host::{HostIdentity, Identity, RuntimeIdentity};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

fn trimmed(text: String) -> Option<String> {
    let t = text.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// A small sysfs/procfs text file, trimmed; `None` when absent or empty.
fn read_text(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().and_then(trimmed)
}

fn hardware_model() -> Option<String> {
    // DMI names the machine on PCs and VMs; the device tree on boards.
    let dmi = [
        read_text("/sys/class/dmi/id/sys_vendor"),
        read_text("/sys/class/dmi/id/product_name"),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    if !dmi.is_empty() {
        return Some(dmi.join(" "));
    }
    read_text("/proc/device-tree/model").map(|m| m.trim_end_matches('\0').to_string())
}

/// SHA-256 of a file, streamed.
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The longest `--host-label`.
pub const MAX_LABEL_LEN: usize = 64;

/// `--host-label` / `MEMQUAL_HOST_LABEL`: 1 to 64 letters, digits and
/// `. _ - : +`, so a label is safe in file names, tables and CI matrices.
pub fn parse_label(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > MAX_LABEL_LEN {
        return Err(format!(
            "a host label has 1 to {MAX_LABEL_LEN} characters, not {}",
            text.len()
        ));
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '+')))
    {
        return Err(format!(
            "`{}` is not allowed in a host label (letters, digits and . _ - : + only)",
            bad.escape_default()
        ));
    }
    Ok(text.to_string())
}

/// This host's physical memory in bytes, `None` when it cannot be read.
pub fn physical_memory_bytes() -> Option<u64> {
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    Some(sys.total_memory()).filter(|b| *b > 0)
}

/// This host; `label` is the name `--host-label` gives it in fleet reports.
pub fn host(label: Option<&str>) -> HostIdentity {
    let mut sys = sysinfo::System::new();
    sys.refresh_memory();
    sys.refresh_cpu_list(sysinfo::CpuRefreshKind::nothing());
    HostIdentity {
        label: label.map(str::to_string),
        hostname: sysinfo::System::host_name(),
        os_name: sysinfo::System::name(),
        os_version: sysinfo::System::long_os_version().or_else(sysinfo::System::os_version),
        kernel: sysinfo::System::kernel_version(),
        arch: sysinfo::System::cpu_arch(),
        hardware_model: hardware_model(),
        cpu_brand: sys
            .cpus()
            .first()
            .map(|c| c.brand().trim().to_string())
            .filter(|b| !b.is_empty()),
        logical_cpus: sys.cpus().len() as u64,
        physical_cores: sysinfo::System::physical_core_count().map(|n| n as u64),
        ram_bytes: sys.total_memory(),
        boot_id: sampler::boot_session_id(),
        boot_time_unix_s: sysinfo::System::boot_time(),
    }
}

/// This memqual: its version, the path of its executable and that file's
/// SHA-256 (`None` when it cannot be read).
pub fn runtime() -> RuntimeIdentity {
    let exe = std::env::current_exe().ok();
    RuntimeIdentity {
        memqual_version: env!("CARGO_PKG_VERSION").to_string(),
        executable: exe
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string()),
        executable_sha256: exe.and_then(|p| file_sha256(&p).ok()),
    }
}

/// The host and memqual identity recorded in `host.json`; `label` is the
/// `--host-label` name for fleet reports.
pub fn identity(label: Option<&str>) -> Identity {
    Identity {
        host: host(label),
        runtime: runtime(),
    }
}

#[cfg(test)]
mod label_tests {
    #[test]
    fn labels_are_short_and_plain() {
        assert_eq!(
            super::parse_label("macos-14:arm64").as_deref(),
            Ok("macos-14:arm64")
        );
        assert!(super::parse_label("").is_err());
        assert!(super::parse_label(&"a".repeat(65)).is_err());
        for bad in ["a b", "a/b", "<script>", "a\nb", "é"] {
            assert!(super::parse_label(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn this_host_is_identified() {
        let h = super::host(Some("lab-1"));
        assert_eq!(h.label.as_deref(), Some("lab-1"));
        assert!(h.ram_bytes > 0);
        assert!(h.logical_cpus >= 1);
        assert!(h.kernel.is_some());
        let boot_id = h.boot_id.expect("Linux has a boot id");
        assert_eq!(boot_id.len(), 36, "{boot_id}");
        assert!(h.boot_time_unix_s > 1_500_000_000);
        let r = super::runtime();
        assert_eq!(r.executable_sha256.unwrap().len(), 64);
    }
}
