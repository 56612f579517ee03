//! Throughput of the strict parse plus all digests (file, prefix, per
//! payload) on a model in the page cache. Target: >= 1 GB/s on the dev box.
//! Uses the cached tiny.en (`memqual fixtures model tiny.en`) when present,
//! else a synthetic model of tiny.en's shape.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ggml_container::synthetic::{SyntheticSpec, write_file};
use ggml_container::{Expect, GgmlType, inspect};
use std::path::PathBuf;

fn model() -> (PathBuf, Option<tempfile::TempDir>) {
    if let Some(path) = ggml_container::cache::cached_model("tiny.en") {
        return (path, None);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-shaped.bin");
    let spec = SyntheticSpec {
        n_state: 384,
        n_head: 6,
        n_audio_layer: 4,
        n_text_layer: 4,
        weight_type: GgmlType::F16,
        ..SyntheticSpec::loadable()
    };
    write_file(&spec, &path).unwrap();
    (path, Some(dir))
}

fn bench(c: &mut Criterion) {
    let (path, _keep) = model();
    let len = std::fs::metadata(&path).unwrap().len();
    // Warm the page cache.
    inspect(&path, Expect::Full).unwrap();
    let mut group = c.benchmark_group("inspect");
    group.throughput(Throughput::Bytes(len));
    group.sample_size(20);
    group.bench_function(path.file_name().unwrap().to_string_lossy().as_ref(), |b| {
        b.iter(|| inspect(&path, Expect::Full).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
