//! What the system holds outside every process's own accounting, and how
//! each phase and each arm changed it: wired and compressor pages on macOS
//! (`host_statistics64`), `Unevictable`, `Mlocked` and zswap on Linux
//! (`/proc/meminfo`). A count the platform lacks is "unavailable" with the
//! reason, never a zero that reads as "nothing changed".

use sampler::SystemLevels;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A change in bytes, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum Figure {
    /// The change, in bytes (negative: released).
    Bytes(i64),
    /// `unavailable: <reason>`.
    Unavailable(String),
}

impl Default for Figure {
    fn default() -> Self {
        Figure::Unavailable(
            "unavailable: not recorded by the memqual that made this receipt".into(),
        )
    }
}

impl Figure {
    /// The change, when there is one.
    pub fn bytes(&self) -> Option<i64> {
        match self {
            Figure::Bytes(b) => Some(*b),
            Figure::Unavailable(_) => None,
        }
    }
}

/// The arm's change in each held-memory count, first series row to last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HeldMemoryDeltas {
    /// macOS wired memory (`wire_count`).
    pub wired_bytes: Figure,
    /// macOS memory the compressor occupies (`compressor_page_count`).
    pub compressor_bytes: Figure,
    /// macOS memory the compressor holds, uncompressed (`total_uncompressed_pages_in_compressor`).
    pub compressor_stored_bytes: Figure,
    /// Linux `Unevictable`.
    pub unevictable_bytes: Figure,
    /// Linux `Mlocked`.
    pub mlocked_bytes: Figure,
    /// Linux `Zswap`: the compressed pool's size.
    pub zswap_bytes: Figure,
    /// Linux `Zswapped`: what the pool holds, uncompressed.
    pub zswapped_bytes: Figure,
}

/// One phase's change since the marker before it, in bytes. A count is
/// absent where either marker lacks it; the arm's `series.system.held` says
/// why. The first marker has none (nothing before it to compare with).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PhaseHeldDeltas {
    /// macOS wired memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wired_bytes: Option<i64>,
    /// macOS memory the compressor occupies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressor_bytes: Option<i64>,
    /// macOS memory the compressor holds, uncompressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compressor_stored_bytes: Option<i64>,
    /// Linux `Unevictable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unevictable_bytes: Option<i64>,
    /// Linux `Mlocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlocked_bytes: Option<i64>,
    /// Linux `Zswap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zswap_bytes: Option<i64>,
    /// Linux `Zswapped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zswapped_bytes: Option<i64>,
}

/// Which platform's counts a set of levels holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Platform {
    Linux,
    Macos,
}

fn platform_of(levels: &SystemLevels) -> Option<Platform> {
    if levels.unevictable_bytes.is_some() || levels.mlocked_bytes.is_some() {
        Some(Platform::Linux)
    } else if levels.wired_bytes.is_some() {
        Some(Platform::Macos)
    } else {
        None
    }
}

fn change(before: Option<u64>, after: Option<u64>) -> Option<i64> {
    let (b, a) = (before?, after?);
    Some(i64::try_from(a).ok()? - i64::try_from(b).ok()?)
}

/// The count named `field` (its platform `home`) between two levels, or why not.
fn figure(
    field: &str,
    home: Platform,
    platform: Option<Platform>,
    before: Option<u64>,
    after: Option<u64>,
) -> Figure {
    if let Some(d) = change(before, after) {
        return Figure::Bytes(d);
    }
    let reason = match (platform, home) {
        (None, _) => "the series recorded no held-memory counts".to_string(),
        (Some(Platform::Linux), Platform::Macos) => {
            format!("Linux keeps no {field} count (macOS host_statistics64 only)")
        }
        (Some(Platform::Macos), Platform::Linux) => {
            format!("macOS keeps no {field} count (Linux /proc/meminfo only)")
        }
        (Some(Platform::Linux), Platform::Linux) if before.is_none() && after.is_none() => {
            format!("this kernel's /proc/meminfo has no {field} line")
        }
        (Some(Platform::Macos), Platform::Macos) if before.is_none() && after.is_none() => {
            format!("host_statistics64 returned no {field} (revision 0 only)")
        }
        _ => format!("{field} was read at one end of the arm only"),
    };
    Figure::Unavailable(format!("unavailable: {reason}"))
}

impl HeldMemoryDeltas {
    /// The change from `first` to `last` (the arm's first and last series rows).
    pub fn between(first: &SystemLevels, last: &SystemLevels) -> Self {
        let platform = platform_of(last).or_else(|| platform_of(first));
        let f = |name, home, get: fn(&SystemLevels) -> Option<u64>| {
            figure(name, home, platform, get(first), get(last))
        };
        use Platform::{Linux, Macos};
        HeldMemoryDeltas {
            wired_bytes: f("wired", Macos, |l| l.wired_bytes),
            compressor_bytes: f("compressor", Macos, |l| l.compressor_bytes),
            compressor_stored_bytes: f("compressor-stored", Macos, |l| l.compressor_stored_bytes),
            unevictable_bytes: f("Unevictable", Linux, |l| l.unevictable_bytes),
            mlocked_bytes: f("Mlocked", Linux, |l| l.mlocked_bytes),
            zswap_bytes: f("Zswap", Linux, |l| l.zswap_bytes),
            zswapped_bytes: f("Zswapped", Linux, |l| l.zswapped_bytes),
        }
    }
}

impl PhaseHeldDeltas {
    /// The change from the marker before to this one; `None` when the two
    /// have no count in common.
    pub fn between(before: &SystemLevels, after: &SystemLevels) -> Option<Self> {
        let d = PhaseHeldDeltas {
            wired_bytes: change(before.wired_bytes, after.wired_bytes),
            compressor_bytes: change(before.compressor_bytes, after.compressor_bytes),
            compressor_stored_bytes: change(
                before.compressor_stored_bytes,
                after.compressor_stored_bytes,
            ),
            unevictable_bytes: change(before.unevictable_bytes, after.unevictable_bytes),
            mlocked_bytes: change(before.mlocked_bytes, after.mlocked_bytes),
            zswap_bytes: change(before.zswap_bytes, after.zswap_bytes),
            zswapped_bytes: change(before.zswapped_bytes, after.zswapped_bytes),
        };
        (d != PhaseHeldDeltas::default()).then_some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linux(mlocked: u64, zswap: Option<u64>) -> SystemLevels {
        SystemLevels {
            unevictable_bytes: Some(mlocked + 4096),
            mlocked_bytes: Some(mlocked),
            zswap_bytes: zswap,
            zswapped_bytes: zswap.map(|z| z * 3),
            ..SystemLevels::default()
        }
    }

    #[test]
    fn linux_counts_change_and_macos_counts_say_why_they_are_missing() {
        let d = HeldMemoryDeltas::between(&linux(1 << 20, None), &linux(9 << 20, None));
        assert_eq!(d.mlocked_bytes, Figure::Bytes(8 << 20));
        assert_eq!(d.unevictable_bytes, Figure::Bytes(8 << 20));
        assert_eq!(
            d.wired_bytes,
            Figure::Unavailable(
                "unavailable: Linux keeps no wired count (macOS host_statistics64 only)".into()
            )
        );
        assert_eq!(
            d.zswap_bytes,
            Figure::Unavailable(
                "unavailable: this kernel's /proc/meminfo has no Zswap line".into()
            )
        );
        // A zero change where the kernel has zswap is a real zero.
        let d = HeldMemoryDeltas::between(&linux(0, Some(0)), &linux(0, Some(0)));
        assert_eq!(d.zswap_bytes, Figure::Bytes(0));
        // Serialized: a number, or the reason as a string.
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["zswapped_bytes"], 0);
        assert!(
            json["compressor_bytes"]
                .as_str()
                .unwrap()
                .starts_with("unavailable: ")
        );
    }

    #[test]
    fn macos_counts_change_and_linux_counts_say_why_they_are_missing() {
        let mac = |wired: u64, compressor: Option<u64>| SystemLevels {
            wired_bytes: Some(wired),
            compressor_bytes: compressor,
            compressor_stored_bytes: compressor.map(|c| c * 4),
            ..SystemLevels::default()
        };
        let d = HeldMemoryDeltas::between(
            &mac(100 << 20, Some(10 << 20)),
            &mac(90 << 20, Some(30 << 20)),
        );
        assert_eq!(d.wired_bytes, Figure::Bytes(-(10 << 20)));
        assert_eq!(d.compressor_bytes, Figure::Bytes(20 << 20));
        assert_eq!(d.compressor_stored_bytes, Figure::Bytes(80 << 20));
        assert_eq!(
            d.mlocked_bytes,
            Figure::Unavailable(
                "unavailable: macOS keeps no Mlocked count (Linux /proc/meminfo only)".into()
            )
        );
        let d = HeldMemoryDeltas::between(&mac(1, None), &mac(2, None));
        assert!(matches!(&d.compressor_bytes, Figure::Unavailable(r) if r.contains("revision 0")));
        // Nothing recorded at all (an imported or old series).
        let d = HeldMemoryDeltas::between(&SystemLevels::default(), &SystemLevels::default());
        assert!(matches!(&d.wired_bytes, Figure::Unavailable(r) if r.contains("no held-memory")));
    }

    #[test]
    fn a_phase_keeps_only_the_counts_both_markers_have() {
        let d = PhaseHeldDeltas::between(&linux(0, None), &linux(32 << 20, None)).unwrap();
        assert_eq!(d.mlocked_bytes, Some(32 << 20));
        assert_eq!((d.wired_bytes, d.zswap_bytes), (None, None));
        assert_eq!(
            PhaseHeldDeltas::between(&SystemLevels::default(), &linux(1, None)),
            None
        );
    }
}
