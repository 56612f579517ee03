//! Property tests: whatever the bytes, the parser returns (Ok or a typed
//! error) and never panics, and an accepted file is exactly the input.

use ggml_container::synthetic::{SyntheticSpec, to_bytes};
use ggml_container::{Expect, inspect_reader};
use proptest::prelude::*;
use std::io::Cursor;
use std::sync::OnceLock;

fn model() -> &'static [u8] {
    static MODEL: OnceLock<Vec<u8>> = OnceLock::new();
    MODEL.get_or_init(|| to_bytes(&SyntheticSpec::miniature()).unwrap())
}

fn check(bytes: &[u8]) {
    for expect in [Expect::Full, Expect::DecoderOnly, Expect::EncoderOnly] {
        if let Ok(inv) = inspect_reader(Cursor::new(bytes), bytes.len() as u64, expect) {
            assert_eq!(inv.file_len, bytes.len() as u64);
            let records: u64 = inv.tensors.iter().map(|t| t.record_len()).sum();
            assert_eq!(inv.prefix_len + records, inv.file_len);
        }
    }
}

/// One edit of the good model: overwrite, insert, delete or cut.
#[derive(Debug, Clone)]
enum Edit {
    Overwrite(usize, Vec<u8>),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
    /// Put an i32 at a 4-aligned offset (hits lengths and counts).
    Word(usize, i32),
}

fn edit() -> impl Strategy<Value = Edit> {
    let len = model().len();
    let bytes = prop::collection::vec(any::<u8>(), 1..16);
    prop_oneof![
        (0..len, bytes.clone()).prop_map(|(a, b)| Edit::Overwrite(a, b)),
        (0..len, bytes).prop_map(|(a, b)| Edit::Insert(a, b)),
        (0..len, 1..64usize).prop_map(|(a, n)| Edit::Delete(a, n)),
        (0..len).prop_map(Edit::Truncate),
        (
            0..len / 4,
            prop_oneof![
                any::<i32>(),
                Just(i32::MAX),
                Just(i32::MIN),
                Just(-1),
                Just(0)
            ]
        )
            .prop_map(|(w, v)| Edit::Word(w * 4, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
    match edit {
        Edit::Overwrite(at, b) => {
            for (i, v) in b.iter().enumerate() {
                if let Some(slot) = bytes.get_mut(at + i) {
                    *slot = *v;
                }
            }
        }
        Edit::Insert(at, b) => {
            let at = (*at).min(bytes.len());
            bytes.splice(at..at, b.iter().copied());
        }
        Edit::Delete(at, n) => {
            let at = (*at).min(bytes.len());
            let end = (at + n).min(bytes.len());
            bytes.drain(at..end);
        }
        Edit::Truncate(n) => bytes.truncate(*n),
        Edit::Word(at, v) => {
            if let Some(s) = bytes.get_mut(*at..at + 4) {
                s.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn mutated_models_never_panic(edits in prop::collection::vec(edit(), 1..4)) {
        let mut bytes = model().to_vec();
        for e in &edits {
            apply(&mut bytes, e);
        }
        check(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        check(&bytes);
    }

    #[test]
    fn random_bodies_after_a_real_header_never_panic(
        cut in 0usize..4000,
        tail in prop::collection::vec(any::<u8>(), 0..2048),
    ) {
        let mut bytes = model()[..cut.min(model().len())].to_vec();
        bytes.extend_from_slice(&tail);
        check(&bytes);
    }
}

#[test]
fn the_unmodified_model_is_accepted() {
    let bytes = model();
    assert!(inspect_reader(Cursor::new(bytes), bytes.len() as u64, Expect::Full).is_ok());
}
