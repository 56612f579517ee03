//! The render crate's integration tests, one binary: each module reads the
//! committed runs under `reports/tests/runs/` and the golden page under
//! `reports/render/tests/golden/`, through paths from `CARGO_MANIFEST_DIR`.
//! Run one with `cargo test -p render --test it page`.

mod export;
mod page;
mod trace;
mod verify_cost;
