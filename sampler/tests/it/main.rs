//! The sampler's integration tests, one binary: the capture parsers on real
//! captured tool outputs (`tests/captures/`), and their properties.

mod captures;
mod captures_props;
mod nvml;
