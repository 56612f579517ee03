//! The reports crate's integration tests, one binary (as every other crate
//! has): each module reads the committed runs under `reports/tests/runs/`
//! through paths from `CARGO_MANIFEST_DIR`. Run one with
//! `cargo test -p reports --test it h200`.

mod h200;
