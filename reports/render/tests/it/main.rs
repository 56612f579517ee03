//! The render crate's integration tests, one binary: each module reads the
//! committed runs under `reports/tests/runs/` and the golden page under
//! `reports/render/tests/golden/`, through paths from `CARGO_MANIFEST_DIR`.
//! Run one with `cargo test -p render --test it page`.

mod export;
mod page;
mod trace;
mod verify_cost;

/// `from` copied into `to`, folders and regular files.
pub(crate) fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}
