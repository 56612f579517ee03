//! Every defect the Core ML glue and the external-encoder callback can hand
//! whisper.cpp, refused by the one header both call; good outputs, contiguous,
//! padded or transposed, copied to exactly the values they hold.

use encoder_output_check::{
    Compiled, Expect, Output, Status, check, check_with, copy, elem, from_ggml_order,
};

/// tiny.en's encoder: 1500 positions of 384 features; small stand-ins keep
/// the copies cheap where the size does not matter.
const TINY: (i64, i64) = (1500, 384);

fn expect(n_ctx: i64, n_state: i64) -> Expect {
    Expect {
        name: Some("output".into()),
        n_ctx,
        n_state,
    }
}

/// What whisper.cpp's Core ML encoder returns: `output`, float32 [1, n_ctx, n_state], contiguous.
fn coreml_output(n_ctx: i64, n_state: i64) -> Output {
    let n = (n_ctx * n_state) as usize;
    Output {
        prediction_status: 0,
        prediction_error: None,
        n_features: 1,
        name: Some("output".into()),
        elem_type: elem::FLOAT32,
        shape: vec![1, n_ctx, n_state],
        strides: vec![n_ctx * n_state, n_state, 1],
        count: n_ctx * n_state,
        data: Some((0..n).map(|i| i as f32).collect()),
    }
}

fn refused(out: &Output, want: &Expect) -> (Status, String) {
    let c = check_with(Compiled::C, out, want).expect_err("refused as C");
    let cpp = check_with(Compiled::Cpp, out, want).expect_err("refused as C++");
    assert_eq!(c, cpp, "the C and C++ compilations disagree");
    (c.status, c.message)
}

#[test]
fn the_output_whisper_cpp_expects_passes_contiguous() {
    let (n_ctx, n_state) = TINY;
    let out = coreml_output(n_ctx, n_state);
    for compiled in [Compiled::C, Compiled::Cpp] {
        let layout = check_with(compiled, &out, &expect(n_ctx, n_state)).unwrap();
        assert_eq!(
            (layout.stride_ctx, layout.stride_state, layout.contiguous),
            (384, 1, 1)
        );
    }
    let copied = copy(&out, &expect(n_ctx, n_state)).unwrap();
    assert_eq!(copied, out.data.unwrap());
}

#[test]
fn a_failed_prediction_is_refused_with_its_error_text() {
    let mut out = coreml_output(4, 3);
    out.prediction_status = -1;
    out.prediction_error = Some(
        "Error Domain=com.apple.CoreML Code=0 \"Failed to evaluate model 0 in pipeline\"".into(),
    );
    let (status, message) = refused(&out, &expect(4, 3));
    assert_eq!(status, Status::PredictionFailed);
    assert_eq!(
        message,
        "the prediction failed (-1): Error Domain=com.apple.CoreML Code=0 \
         \"Failed to evaluate model 0 in pipeline\""
    );
    out.prediction_error = None;
    assert_eq!(
        refused(&out, &expect(4, 3)).1,
        "the prediction failed (-1): no reason given"
    );
}

#[test]
fn more_than_one_output_or_another_name_is_refused() {
    let mut out = coreml_output(4, 3);
    out.n_features = 2;
    assert_eq!(
        refused(&out, &expect(4, 3)),
        (
            Status::Features,
            "the prediction returned 2 outputs, expected exactly one".into()
        )
    );
    let mut out = coreml_output(4, 3);
    out.name = Some("encoder_output_embeds".into());
    assert_eq!(
        refused(&out, &expect(4, 3)),
        (
            Status::Name,
            "the output is named 'encoder_output_embeds', expected 'output'".into()
        )
    );
    // An unnamed expectation accepts any name (the external-encoder ABI has none).
    let any = Expect {
        name: None,
        ..expect(4, 3)
    };
    assert!(check(&out, &any).is_ok());
}

#[test]
fn a_float16_or_integer_output_is_refused_by_its_type() {
    for (t, name) in [
        (elem::FLOAT16, "float16"),
        (elem::FLOAT64, "float64"),
        (elem::INT32, "int32"),
    ] {
        let mut out = coreml_output(4, 3);
        out.elem_type = t;
        assert_eq!(
            refused(&out, &expect(4, 3)),
            (
                Status::Type,
                format!("the output holds {name} (type {t}), expected float32")
            )
        );
    }
    let mut out = coreml_output(4, 3);
    out.elem_type = 7;
    assert_eq!(
        refused(&out, &expect(4, 3)).1,
        "the output holds an unknown type (type 7), expected float32"
    );
}

#[test]
fn a_wrong_rank_is_refused() {
    let mut out = coreml_output(4, 3);
    out.shape = vec![12];
    out.strides = vec![1];
    assert_eq!(
        refused(&out, &expect(4, 3)),
        (
            Status::Rank,
            "the output has rank 1, expected 2 to 8 ([n_ctx 4, n_state 3] after leading 1s)".into()
        )
    );
    out.shape = vec![1; 9];
    out.strides = vec![1; 9];
    assert_eq!(refused(&out, &expect(4, 3)).0, Status::Rank);
}

#[test]
fn a_wrong_shape_is_refused_naming_both() {
    let (n_ctx, n_state) = TINY;
    // Transposed dimensions (what an ANE-layout model [1, n_state, 1, n_ctx] gives).
    let mut out = coreml_output(n_ctx, n_state);
    out.shape = vec![1, n_state, 1, n_ctx];
    out.strides = vec![n_ctx * n_state, n_ctx, n_ctx, 1];
    assert_eq!(
        refused(&out, &expect(n_ctx, n_state)),
        (
            Status::Shape,
            "the output has shape [1, 384, 1, 1500], expected [n_ctx 1500, n_state 384] after leading 1s"
                .into()
        )
    );
    // A package built for the full 1500 positions run on a state bounded to 768.
    let out = coreml_output(n_ctx, n_state);
    assert_eq!(
        refused(&out, &expect(768, n_state)).1,
        "the output has shape [1, 1500, 384], expected [n_ctx 768, n_state 384] after leading 1s"
    );
    // A leading dimension that is not 1 (a batch of two).
    let mut out = coreml_output(n_ctx, n_state);
    out.shape = vec![2, n_ctx, n_state];
    assert_eq!(refused(&out, &expect(n_ctx, n_state)).0, Status::Shape);
    // Another model's width (base: 512).
    let out = coreml_output(n_ctx, 512);
    assert_eq!(refused(&out, &expect(n_ctx, n_state)).0, Status::Shape);
}

#[test]
fn a_count_short_of_the_shape_is_refused() {
    let mut out = coreml_output(4, 3);
    out.count = 11;
    assert_eq!(
        refused(&out, &expect(4, 3)),
        (
            Status::Count,
            "the output holds 11 elements, its shape [4, 3] has 12".into()
        )
    );
}

#[test]
fn no_data_is_refused() {
    let mut out = coreml_output(4, 3);
    out.data = None;
    assert_eq!(
        refused(&out, &expect(4, 3)),
        (Status::NoData, "the output has no data".into())
    );
}

#[test]
fn strides_that_overlap_or_leave_the_buffer_are_refused() {
    let base = coreml_output(4, 3);
    let strides_refused = |strides: Vec<i64>, len: usize| {
        let mut out = base.clone();
        out.strides = strides;
        out.data = Some(vec![0.0; len]);
        refused(&out, &expect(4, 3))
    };
    // Rows overlapping: a row stride of 2 for rows of 3.
    let (status, message) = strides_refused(vec![12, 2, 1], 12);
    assert_eq!(status, Status::Strides);
    assert_eq!(
        message,
        "the output's strides [12, 2, 1] (elements) over 48 bytes do not lay out [4, 3] float32 \
         without overlap inside the buffer (contiguous: [3, 1])"
    );
    // A zero or negative stride.
    assert_eq!(strides_refused(vec![12, 3, 0], 12).0, Status::Strides);
    assert_eq!(strides_refused(vec![12, -3, 1], 12).0, Status::Strides);
    // Padded rows (stride 4) whose last element lies past a 12-float buffer.
    assert_eq!(strides_refused(vec![16, 4, 1], 12).0, Status::Strides);
    // Strides so large the last offset would overflow.
    assert_eq!(
        strides_refused(vec![1, i64::MAX / 2, 1], 12).0,
        Status::Strides
    );
}

#[test]
fn padded_and_transposed_outputs_are_copied_stride_aware() {
    let (n_ctx, n_state) = (4i64, 3i64);
    let want: Vec<f32> = (0..12).map(|i| 100.0 + i as f32).collect();
    // Rows padded to 8 floats (an ANE-aligned layout): values at c*8 + s.
    let mut padded = vec![-1.0f32; 32];
    for c in 0..4 {
        for s in 0..3 {
            padded[c * 8 + s] = want[c * 3 + s];
        }
    }
    let mut out = coreml_output(n_ctx, n_state);
    out.strides = vec![32, 8, 1];
    out.data = Some(padded);
    let layout = check(&out, &expect(n_ctx, n_state)).unwrap();
    assert_eq!(
        (layout.stride_ctx, layout.stride_state, layout.contiguous),
        (8, 1, 0)
    );
    assert_eq!(copy(&out, &expect(n_ctx, n_state)).unwrap(), want);
    // Stored transposed: [n_state][n_ctx] in memory, strides (1, 4).
    let mut transposed = vec![0.0f32; 12];
    for c in 0..4 {
        for s in 0..3 {
            transposed[s * 4 + c] = want[c * 3 + s];
        }
    }
    let mut out = coreml_output(n_ctx, n_state);
    out.strides = vec![12, 1, 4];
    out.data = Some(transposed);
    assert_eq!(copy(&out, &expect(n_ctx, n_state)).unwrap(), want);
}

#[test]
fn an_expectation_that_is_no_shape_is_refused() {
    let out = coreml_output(4, 3);
    assert_eq!(refused(&out, &expect(0, 3)).0, Status::Expectation);
    assert_eq!(refused(&out, &expect(4, -1)).0, Status::Expectation);
    assert_eq!(
        refused(&out, &expect(1 << 40, 3)).1,
        "the expected output [1099511627776, 3] is not a shape"
    );
}

/// The external-encoder ABI's replies, as ggml orders them (innermost
/// first, byte strides): the same cases its process-level tests inject.
mod external_encoder_abi {
    use super::*;

    fn reply(
        ne: [i64; 4],
        nb: [i64; 4],
        n_dims: i32,
        len: usize,
    ) -> Result<Output, (Status, String)> {
        from_ggml_order(0, n_dims, ne, nb, vec![0.5; len]).map_err(|r| (r.status, r.message))
    }

    fn unnamed(n_ctx: i64, n_state: i64) -> Expect {
        Expect {
            name: None,
            n_ctx,
            n_state,
        }
    }

    #[test]
    fn the_good_reply_passes() {
        let (n_ctx, n_state) = TINY;
        let out = reply(
            [n_state, n_ctx, 1, 1],
            [4, 4 * n_state, 4 * n_state * n_ctx, 4 * n_state * n_ctx],
            2,
            (n_ctx * n_state) as usize,
        )
        .unwrap();
        assert_eq!(out.shape, vec![n_ctx, n_state]);
        assert_eq!(out.strides, vec![n_state, 1]);
        assert_eq!(check(&out, &unnamed(n_ctx, n_state)).unwrap().contiguous, 1);
    }

    #[test]
    fn wrong_shape_and_small_tensor_are_refused_by_shape() {
        let (n_ctx, n_state) = TINY;
        // `wrong_shape`: ne = [n_ctx, n_state].
        let out = reply(
            [n_ctx, n_state, 1, 1],
            [4, 4 * n_state, 4 * n_state * n_ctx, 4 * n_state * n_ctx],
            2,
            (n_ctx * n_state) as usize,
        )
        .unwrap();
        let r = check(&out, &unnamed(n_ctx, n_state)).unwrap_err();
        assert_eq!(
            (r.status, r.message.as_str()),
            (
                Status::Shape,
                "the output has shape [384, 1500], expected [n_ctx 1500, n_state 384] after leading 1s"
            )
        );
        // `small_tensor`: one position short.
        let out = reply(
            [n_state, n_ctx - 1, 1, 1],
            [4, 4 * n_state, 4 * n_state * n_ctx, 4 * n_state * n_ctx],
            2,
            (n_state * (n_ctx - 1)) as usize,
        )
        .unwrap();
        let r = check(&out, &unnamed(n_ctx, n_state)).unwrap_err();
        assert_eq!(
            r.message,
            "the output has shape [1499, 384], expected [n_ctx 1500, n_state 384] after leading 1s"
        );
    }

    #[test]
    fn a_byte_stride_that_splits_a_float_or_a_bad_rank_is_refused() {
        assert_eq!(
            reply([3, 4, 1, 1], [4, 14, 48, 48], 2, 12).unwrap_err(),
            (
                Status::Strides,
                "the external encoder's byte stride 14 (dimension 1) is not a whole number of float32"
                    .into()
            )
        );
        assert_eq!(
            reply([3, 4, 1, 1], [4, 12, 48, 48], 5, 12).unwrap_err().0,
            Status::Rank
        );
        assert_eq!(
            reply([3, 4, 1, 1], [4, 12, 48, 48], 0, 12).unwrap_err().0,
            Status::Rank
        );
    }

    #[test]
    fn a_non_float_reply_or_a_short_buffer_is_refused() {
        let out = from_ggml_order(1, 2, [3, 4, 1, 1], [4, 12, 48, 48], vec![0.0; 12]).unwrap();
        assert_eq!(
            check(&out, &unnamed(4, 3)).unwrap_err().status,
            Status::Type
        );
        // Announced [3, 4] but only 11 floats readable.
        let out = reply([3, 4, 1, 1], [4, 12, 48, 48], 2, 11).unwrap();
        assert_eq!(
            check(&out, &unnamed(4, 3)).unwrap_err().status,
            Status::Strides
        );
    }
}
