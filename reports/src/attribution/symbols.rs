//! What the harness resolved the profiles' addresses to (`heap/symbols.json`),
//! and which frame of a stack is its allocation *site*.
//!
//! The harness symbolizes while the worker's binaries are the ones that
//! ran (right after the arm), so a report rebuilt later from the run
//! directory alone names the same functions.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `heap/symbols.json`: every address of the arm's heap profiles, resolved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SymbolTable {
    /// By address (`0x…`, lower-case hexadecimal, as the profile wrote it).
    pub addresses: BTreeMap<String, Location>,
    /// Objects that could not be read or had no symbols, and why.
    #[serde(default)]
    pub problems: Vec<String>,
}

/// One return address: the object it lies in and the functions there,
/// innermost (inlined) first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Location {
    /// The mapped file (`/proc/self/maps`); `None` outside any file.
    pub object: Option<String>,
    /// The offset in that file that was looked up.
    pub offset: Option<u64>,
    /// The functions at the address, innermost inlined frame first; empty
    /// when the object has no symbols for it.
    pub frames: Vec<SymbolFrame>,
}

/// One function frame at an address.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SymbolFrame {
    /// The function, demangled (the symbol table's full path where debug
    /// information gives only the short name).
    pub function: String,
    /// `file:line`, when debug information says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// Source files of the standard libraries (Rust's `alloc`, `core`, `std`
/// and C++'s headers): frames there carry an allocation for their caller.
const STANDARD_SOURCES: &[&str] = &[
    "/library/alloc/",
    "/library/core/",
    "/library/std/",
    "/include/c++/",
    "/hashbrown-",
];

/// The address as symbols.json keys it.
pub fn key(address: u64) -> String {
    format!("{address:#x}")
}

/// C and Rust allocator entry points, matched whole.
const ALLOCATOR_FUNCTIONS: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "mallocx",
    "rallocx",
    "__rust_alloc",
    "__rust_realloc",
    "__rust_alloc_zeroed",
];

/// Namespaces that only carry an allocation to the allocator (standard
/// containers, the Rust allocator shims, C++'s `operator new`): matched as
/// prefixes of demangled names. The site is the first frame below them.
const ALLOCATOR_PREFIXES: &[&str] = &[
    "operator new",
    "__rdl_",
    "__rg_",
    "__libc_",
    "alloc::",
    "<alloc::",
    "std::",
    "<std::",
    "core::",
    "<core::",
    "hashbrown::",
    "<hashbrown::",
];

/// Whether `function` (demangled) is the allocator's or a standard
/// container's, not user code.
pub fn allocator_function(function: &str) -> bool {
    let base = function.split('(').next().unwrap_or(function).trim();
    ALLOCATOR_FUNCTIONS.contains(&base)
        || ALLOCATOR_PREFIXES.iter().any(|p| function.starts_with(p))
        || (function.starts_with('<')
            && [" as alloc::", " as core::", " as std::"]
                .iter()
                .any(|t| function.contains(t)))
}

/// Objects whose every frame is the allocator's or the C library's.
pub const ALLOCATOR_OBJECTS: &[&str] = &[
    "libjemalloc",
    "libc.so",
    "libc-",
    "libstdc++",
    "libsystem_malloc",
    "libc++abi",
    "libc++.",
];

/// One frame of a symbolized stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The function, or `object+0xoffset` when unsymbolized.
    pub name: String,
    /// The object's file name (its last path component).
    pub object: Option<String>,
    /// Whether the frame is the allocator's (skipped when choosing the site).
    pub allocator: bool,
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The frames of one return address, inlined functions innermost first.
pub fn frames_of(location: Option<&Location>, address: u64) -> Vec<Frame> {
    let Some(loc) = location else {
        return vec![Frame {
            name: key(address),
            object: None,
            allocator: false,
        }];
    };
    let object = loc.object.as_deref().map(file_name);
    let in_allocator_object =
        object.is_some_and(|o| ALLOCATOR_OBJECTS.iter().any(|a| o.starts_with(a)));
    if loc.frames.is_empty() {
        let name = match (object, loc.offset) {
            (Some(o), Some(off)) => format!("{o}+{off:#x}"),
            _ => key(address),
        };
        return vec![Frame {
            name,
            object: object.map(str::to_string),
            allocator: in_allocator_object,
        }];
    }
    loc.frames
        .iter()
        .map(|f| Frame {
            name: f.function.clone(),
            object: object.map(str::to_string),
            allocator: in_allocator_object
                || allocator_function(&f.function)
                || f.source
                    .as_deref()
                    .is_some_and(|s| STANDARD_SOURCES.iter().any(|d| s.contains(d))),
        })
        .collect()
}

/// The index of the site in `frames`: the first frame that is not the
/// allocator's; the last frame when every one is.
pub fn site_index(frames: &[Frame]) -> usize {
    frames
        .iter()
        .position(|f| !f.allocator)
        .unwrap_or(frames.len().saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(object: &str, functions: &[&str]) -> Location {
        Location {
            object: Some(object.into()),
            offset: Some(0x10),
            frames: functions
                .iter()
                .map(|f| SymbolFrame {
                    function: f.to_string(),
                    source: None,
                })
                .collect(),
        }
    }

    #[test]
    fn the_site_is_the_first_frame_in_user_code() {
        let stack: Vec<Frame> = [
            (loc("/lib/x86_64-linux-gnu/libjemalloc.so.2", &[]), 1),
            (
                loc("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2", &["malloc"]),
                2,
            ),
            (
                loc(
                    "/w/target/debug/memqual-calibrate",
                    &[
                        "alloc::raw_vec::RawVecInner<A>::try_reserve_exact",
                        "alloc::vec::Vec<T,A>::try_reserve_exact",
                        "runners::calibrate::calibration_heap_plateau",
                    ],
                ),
                3,
            ),
            (
                loc(
                    "/w/target/debug/memqual-calibrate",
                    &["runners::calibrate::run"],
                ),
                4,
            ),
        ]
        .iter()
        .flat_map(|(l, a)| frames_of(Some(l), *a))
        .collect();
        let site = site_index(&stack);
        assert_eq!(
            stack[site].name,
            "runners::calibrate::calibration_heap_plateau"
        );
        assert_eq!(stack[site].object.as_deref(), Some("memqual-calibrate"));
        assert_eq!(stack[0].name, "libjemalloc.so.2+0x10");
        assert!(stack[0].allocator);
        // An unresolved address keeps its number.
        assert_eq!(frames_of(None, 0xabc)[0].name, "0xabc");
        // All allocator: the last frame stands for the site.
        let only = frames_of(Some(&loc("/lib/libc.so.6", &["malloc"])), 1);
        assert_eq!(site_index(&only), 0);
        assert_eq!(site_index(&[]), 0);
        assert!(allocator_function(
            "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem"
        ));
        assert!(allocator_function("operator new(unsigned long)"));
        assert!(allocator_function(
            "std::vector<float, std::allocator<float> >::_M_default_append(unsigned long)"
        ));
        assert!(!allocator_function("freeze_model"));
        assert!(!allocator_function("whisper_init_state"));
        // Debug information's short names are known by their source file.
        let mut inlined = loc(
            "/w/memqual-calibrate",
            &["grow_exact<alloc::alloc::Global>"],
        );
        inlined.frames[0].source =
            Some("/rustc/0123abcd/library/alloc/src/raw_vec/mod.rs:700".into());
        assert!(frames_of(Some(&inlined), 1)[0].allocator);
    }

    #[test]
    fn the_table_reads_back() {
        let mut t = SymbolTable::default();
        t.addresses.insert(key(0x7f00), loc("/x", &["f"]));
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains("\"0x7f00\""), "{json}");
        assert_eq!(serde_json::from_str::<SymbolTable>(&json).unwrap(), t);
    }
}
