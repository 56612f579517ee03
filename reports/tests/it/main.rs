//! The reports crate's integration tests, one binary (as every other crate
//! has): each module reads the committed runs under `reports/tests/runs/`
//! and the golden page under `reports/tests/golden/`, through paths from
//! `CARGO_MANIFEST_DIR`. Run one with `cargo test -p reports --test it page`.

mod h200;
mod page;
mod trace;
mod verify_cost;
