//! Allocation attribution on the harness's side: the profiler a worker is
//! started under (Linux: jemalloc preloaded with its heap profiler on;
//! macOS: `MallocStackLogging=lite`), and, once the arm has ended, the
//! profiles' addresses resolved to functions (`heap/symbols.json`) while
//! the binaries that ran are still the ones on disk.

use reports::attribution::heap_profile::{self, HeapProfile};
use reports::attribution::symbols::{Location, SymbolFrame, SymbolTable, key};
use reports::attribution::{HEAP_DIR, SYMBOLS};
use run_dir::{Rel, RunDir};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use worker_contract::{HeapProfiling, LG_PROF_SAMPLE};

/// An environment variable naming the jemalloc library to preload, instead
/// of the one `ldconfig` knows.
pub const JEMALLOC_ENV: &str = "MEMQUAL_JEMALLOC";

/// The library's file name: jemalloc's ABI 2, Debian's `libjemalloc2`.
const LIBRARY: &str = "libjemalloc.so.2";

/// Where Debian, Ubuntu, Fedora and source builds put it, when `ldconfig
/// -p` does not say.
const KNOWN_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
];

/// Why an arm that asked for attribution cannot have it here.
pub fn missing_jemalloc() -> String {
    format!(
        "allocation attribution needs jemalloc's heap profiler: {LIBRARY} was found neither \
         by `ldconfig -p` nor in {}; install Debian's package libjemalloc2 (apt-get install \
         libjemalloc2), or name the library in {JEMALLOC_ENV}",
        KNOWN_DIRS.join(", ")
    )
}

/// The jemalloc library to preload: `MEMQUAL_JEMALLOC` when set (it must
/// be a file), else what `ldconfig -p` lists, else the first of the known
/// folders that has it. `Err` says what is missing and how to get it.
pub fn find_jemalloc() -> Result<PathBuf, String> {
    if let Some(named) = std::env::var_os(JEMALLOC_ENV) {
        let path = PathBuf::from(named);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "{JEMALLOC_ENV}={} is not a file: name libjemalloc.so.2 there, or unset it",
                path.display()
            ))
        };
    }
    let listed = std::process::Command::new("ldconfig")
        .arg("-p")
        .output()
        .ok()
        .and_then(|o| from_ldconfig(&String::from_utf8_lossy(&o.stdout)));
    listed
        .filter(|p| p.is_file())
        .or_else(|| {
            KNOWN_DIRS
                .iter()
                .map(|d| Path::new(d).join(LIBRARY))
                .find(|p| p.is_file())
        })
        .ok_or_else(missing_jemalloc)
}

/// The path `ldconfig -p` gives for `libjemalloc.so.2`, preferring this
/// machine's word size.
fn from_ldconfig(text: &str) -> Option<PathBuf> {
    let paths: Vec<(&str, &str)> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(LIBRARY))
        .filter_map(|l| {
            let (left, path) = l.split_once("=>")?;
            Some((left, path.trim()))
        })
        .collect();
    let native = if cfg!(target_pointer_width = "64") {
        "64"
    } else {
        "libc6)"
    };
    paths
        .iter()
        .find(|(left, _)| left.contains(native))
        .or(paths.first())
        .map(|(_, p)| PathBuf::from(p))
}

/// The `MALLOC_CONF` of a profiled worker: profiling on and active from
/// the start, cumulative counts kept (`prof_accum`, for "allocated within
/// the phase"), one sample per 2^`LG_PROF_SAMPLE` bytes on average, and
/// any profile jemalloc writes on its own kept in `heap_dir`.
pub fn malloc_conf(heap_dir: &Path) -> String {
    format!(
        "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:{LG_PROF_SAMPLE},prof_prefix:{}",
        heap_dir.join("jeprof").display()
    )
}

/// How the worker of an attributed arm is started: the spec's profiling
/// and the environment it runs in.
pub struct Profiled {
    /// Sent to the worker in its spec.
    pub spec: HeapProfiling,
    /// Set in the worker's environment.
    pub env: Vec<(String, String)>,
}

/// The profiler for a worker whose profiles go to `heap_dir` (absolute).
/// `toggle_every`: the worker switches its sampling between ABBA blocks of
/// this many requests (an overhead block run with `toggles =
/// "attribution"`), which only jemalloc can do.
pub fn profiled(heap_dir: &Path, toggle_every: Option<u32>) -> Result<Profiled, String> {
    if cfg!(target_os = "macos") {
        if toggle_every.is_some() {
            return Err(
                "an overhead gate with toggles = \"attribution\" switches jemalloc's \
                        sampling between requests; macOS's malloc stack logging cannot be \
                        switched inside a worker, so this block run cannot measure it"
                    .into(),
            );
        }
        return Ok(Profiled {
            spec: HeapProfiling::MallocStackLogging,
            env: vec![("MallocStackLogging".into(), "lite".into())],
        });
    }
    let library = find_jemalloc()?;
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(more) if !more.is_empty() => format!("{}:{more}", library.display()),
        _ => library.display().to_string(),
    };
    Ok(Profiled {
        spec: HeapProfiling::Jemalloc {
            dir: heap_dir.to_path_buf(),
            lg_prof_sample: LG_PROF_SAMPLE,
            toggle_every,
        },
        env: vec![
            ("LD_PRELOAD".into(), preload),
            ("MALLOC_CONF".into(), malloc_conf(heap_dir)),
        ],
    })
}

/// macOS: take `malloc_history PID -allBySize` right after marker `m` and
/// keep it as `heap/<seq>-<phase>.malloc_history.txt`; a failure is kept
/// as the file's text, for the receipt to report.
#[cfg(target_os = "macos")]
pub fn capture_malloc_history(run: &RunDir, heap: &Rel, pid: u32, m: &sampler::Marker) {
    let out = std::process::Command::new("malloc_history")
        .args([pid.to_string().as_str(), "-allBySize"])
        .stdin(std::process::Stdio::null())
        .output();
    let text = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => format!(
            "malloc_history failed ({}): {}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => format!("malloc_history could not run: {e}"),
    };
    let name = format!("{:04}-{}.malloc_history.txt", m.seq, m.phase.as_str());
    let _ = run.write_bytes(&heap.join(&name), text.as_bytes());
}

/// The arm's `heap/` folder.
pub fn heap_dir(arm: &Rel) -> Rel {
    arm.join(HEAP_DIR)
}

/// Resolve every address of the arm's heap profiles and write
/// `heap/symbols.json`. Profiles that do not parse are left for the
/// receipt to report; objects that cannot be read are listed in the table.
pub fn symbolize(run: &RunDir, arm: &Rel) -> Result<(), run_dir::RunDirError> {
    let heap = heap_dir(arm);
    if !run.has_dir(&heap)? {
        return Ok(());
    }
    let mut profiles: Vec<HeapProfile> = Vec::new();
    for file in run.walk(&heap)?.files {
        if !file.rel.name().is_some_and(|n| n.ends_with(".heap")) {
            continue;
        }
        let Some(bytes) = run
            .read_bytes(&file.rel, run_dir::limits::TEXT)
            .ok()
            .flatten()
        else {
            continue;
        };
        let name = run.display(&file.rel).display().to_string();
        if let Ok(p) = heap_profile::parse(&String::from_utf8_lossy(&bytes), &name) {
            profiles.push(p);
        }
    }
    run.write_json(&heap.join(SYMBOLS), &resolve(&profiles))
}

/// Every address of `profiles`, resolved against the mappings of the
/// profile it appears in.
pub fn resolve(profiles: &[HeapProfile]) -> SymbolTable {
    // object → (address, file offset) to look up, each address once.
    let mut wanted: BTreeMap<String, BTreeSet<(u64, u64)>> = BTreeMap::new();
    let mut table = SymbolTable::default();
    for profile in profiles {
        for stack in &profile.stacks {
            for (i, &address) in stack.frames.iter().enumerate() {
                let k = key(address);
                if table.addresses.contains_key(&k) {
                    continue;
                }
                // A caller's frame holds its return address: look up the
                // call instruction before it, as jeprof does.
                let probe = if i == 0 {
                    address
                } else {
                    address.saturating_sub(1)
                };
                let mapping = profile.mapping(probe);
                let object = mapping.and_then(|m| m.path.clone());
                let offset = mapping.map(|m| probe - m.start + m.offset);
                if let (Some(o), Some(off)) = (&object, offset)
                    && o.starts_with('/')
                {
                    wanted.entry(o.clone()).or_default().insert((address, off));
                }
                table.addresses.insert(
                    k,
                    Location {
                        object,
                        offset,
                        frames: Vec::new(),
                    },
                );
            }
        }
    }
    for (object, addresses) in wanted {
        match ObjectSymbols::open(Path::new(&object)) {
            Ok(symbols) => {
                for (address, offset) in addresses {
                    if let Some(loc) = table.addresses.get_mut(&key(address)) {
                        symbols.fill(offset, loc);
                    }
                }
            }
            Err(e) => table
                .problems
                .push(format!("{object}: not symbolized: {e}")),
        }
    }
    table
}

/// One object file: its segments (file offset → address) and its symbols.
struct ObjectSymbols {
    loader: addr2line::Loader,
    /// (file offset, size in the file, virtual address) per loadable segment.
    segments: Vec<(u64, u64, u64)>,
}

impl ObjectSymbols {
    fn open(path: &Path) -> Result<ObjectSymbols, String> {
        use object::{Object, ObjectSegment};
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        let file = object::File::parse(&*bytes).map_err(|e| e.to_string())?;
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        let loader = addr2line::Loader::new(path).map_err(|e| e.to_string())?;
        Ok(ObjectSymbols { loader, segments })
    }

    /// The address in the object's own address space of file offset `offset`.
    fn address_of(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(start, size, _)| *start <= offset && offset < start + size)
            .map(|(start, _, address)| address + (offset - start))
    }

    /// Fill `loc`'s frames, inlined functions innermost first. Debug
    /// information names a function by its short name; the outermost
    /// frame takes the symbol table's full path instead, where it has one.
    fn fill(&self, offset: u64, loc: &mut Location) {
        let Some(probe) = self.address_of(offset) else {
            return;
        };
        if let Ok(mut frames) = self.loader.find_frames(probe) {
            while let Ok(Some(frame)) = frames.next() {
                let Some(function) = frame.function.as_ref().and_then(|f| f.demangle().ok()) else {
                    continue;
                };
                let source = frame
                    .location
                    .as_ref()
                    .and_then(|l| match (l.file, l.line) {
                        (Some(file), Some(line)) => Some(format!("{file}:{line}")),
                        _ => None,
                    });
                loc.frames.push(SymbolFrame {
                    function: function.into_owned(),
                    source,
                });
            }
        }
        let symbol = self
            .loader
            .find_symbol(probe)
            .map(|name| addr2line::demangle_auto(name.into(), None).into_owned());
        match (loc.frames.last_mut(), symbol) {
            (Some(outer), Some(full))
                if full.ends_with(&outer.function) || !outer.function.contains("::") =>
            {
                outer.function = full;
            }
            (None, Some(full)) => loc.frames.push(SymbolFrame {
                function: full,
                source: None,
            }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldconfig_lines_name_the_library() {
        let text = "3 libs found in cache `/etc/ld.so.cache'\n\
            \tlibjemalloc.so.2 (libc6) => /usr/lib32/libjemalloc.so.2\n\
            \tlibjemalloc.so.2 (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so.2\n\
            \tlibjemalloc.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libjemalloc.so\n";
        assert_eq!(
            from_ldconfig(text),
            Some(PathBuf::from("/lib/x86_64-linux-gnu/libjemalloc.so.2"))
        );
        assert_eq!(from_ldconfig("nothing here\n"), None);
    }

    #[test]
    fn the_malloc_conf_samples_every_16_kib_and_keeps_totals() {
        let conf = malloc_conf(Path::new("/r/arms/a/heap"));
        assert_eq!(
            conf,
            "prof:true,prof_active:true,prof_accum:true,lg_prof_sample:14,prof_prefix:/r/arms/a/heap/jeprof"
        );
    }

    #[test]
    fn a_missing_library_names_the_package() {
        assert!(missing_jemalloc().contains("libjemalloc2"));
    }

    #[test]
    fn this_test_binary_symbolizes_its_own_function() {
        // A profile-shaped stack through this very function, mapped as
        // /proc/self/maps maps it.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let here = this_test_binary_symbolizes_its_own_function as *const () as u64;
        let text = format!(
            "heap_v2/16384\n  t*: 1: 64 [1: 64]\n@ {here:#x}\n  t*: 1: 64 [1: 64]\nMAPPED_LIBRARIES:\n{maps}"
        );
        let profile = heap_profile::parse(&text, "self.heap").unwrap();
        let table = resolve(&[profile]);
        let loc = &table.addresses[&key(here)];
        let outer = loc.frames.last().expect("symbolized");
        assert_eq!(
            outer.function,
            "arm_runner::attribution::tests::this_test_binary_symbolizes_its_own_function",
            "{loc:?} {:?}",
            table.problems
        );
        assert!(
            outer
                .source
                .as_deref()
                .is_some_and(|s| s.contains("harness/arm/src/attribution.rs:")),
            "{loc:?}"
        );
    }
}
