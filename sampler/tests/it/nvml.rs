//! The NVML reduction on a real capture from an NVIDIA H200, checked against
//! what `nvidia-smi` printed at the same moment.

use sampler::device::{DeviceMemory, summarise};
use std::path::Path;

const MIB: u64 = 1 << 20;

fn capture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/captures/nvml")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `nvidia-smi --format=csv,noheader,nounits` rows as numbers.
fn smi(name: &str) -> Vec<Vec<u64>> {
    capture(name)
        .lines()
        .map(|l| l.split(',').map(|v| v.trim().parse().unwrap()).collect())
        .collect()
}

#[test]
fn the_h200_capture_reduces_to_what_nvidia_smi_printed() {
    let devices: Vec<DeviceMemory> =
        serde_json::from_str(&capture("h200-torch-3gib.json")).unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].name, "NVIDIA H200");
    let apps = smi("h200-torch-3gib.nvidia-smi-apps.csv");
    let gpu = smi("h200-torch-3gib.nvidia-smi-gpu.csv");
    let (pid, app_mib) = (apps[0][0] as u32, apps[0][1]);
    let r = summarise(pid, &devices);
    // The holder's own device memory, exactly nvidia-smi's MiB.
    assert_eq!(r.worker_bytes, Some(app_mib * MIB));
    assert_eq!(r.worker_bytes, Some(3_860_856_832));
    // Device used and total, to nvidia-smi's rounding.
    assert_eq!((r.used_bytes + MIB / 2) / MIB, gpu[0][0]);
    assert_eq!(r.total_bytes / MIB, gpu[0][1]);
    assert_eq!(r.others_bytes, 0);
    // Seen from another pid, the holder is the "others".
    let other = summarise(1, &devices);
    assert_eq!(other.worker_bytes, Some(0));
    assert_eq!(other.others_bytes, 3_860_856_832);
}
