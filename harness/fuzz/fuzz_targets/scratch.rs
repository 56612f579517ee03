//! Scratch run directories for the targets that make real ones.

use std::path::Path;

/// A temporary folder, in memory when the machine has /dev/shm (thousands of
/// run directories a minute would otherwise wear the disk and slow the run).
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let builder = tempfile::Builder::new().prefix("memqual-fuzz-").to_owned();
    let made = if shm.is_dir() {
        builder.tempdir_in(shm)
    } else {
        builder.tempdir()
    };
    made.unwrap_or_else(|e| panic!("cannot make a temporary directory: {e}"))
}
