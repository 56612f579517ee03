// memqual: the checks an encoder's output passes before the patched whisper.cpp
// copies it into the encoder-output tensor. Plain C over plain numbers, so the
// Core ML glue (src/coreml/whisper-encoder.mm, which only reads the numbers
// off its MLMultiArray) and the external-encoder callback share one set of
// rules, and runners/encoder-output-check tests them on any host.
//
// The logical output is [n_ctx, n_state] float32 (positions outermost), as
// whisper.cpp's encoder tensor embd_enc holds it. A producer may add leading
// dimensions of size 1, pad rows (a stride larger than the row) or store it
// transposed; anything else is refused, naming the expected and received values.
//
// The apply step (apply.cmake) copies this file into whisper.cpp's src/.
#ifndef WHISPER_MEMQUAL_OUTPUT_H
#define WHISPER_MEMQUAL_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define WHISPER_MEMQUAL_OUTPUT_MAX_RANK 8

// Element types, numbered as Core ML's MLMultiArrayDataType numbers them
// (0x10000 | bits for floats, 0x20000 | bits for integers), so the glue
// passes `dataType` through unchanged.
enum whisper_memqual_elem {
    WHISPER_MEMQUAL_ELEM_FLOAT16 = 0x10010,
    WHISPER_MEMQUAL_ELEM_FLOAT32 = 0x10020,
    WHISPER_MEMQUAL_ELEM_FLOAT64 = 0x10040,
    WHISPER_MEMQUAL_ELEM_INT32   = 0x20020,
};

enum whisper_memqual_output_status {
    WHISPER_MEMQUAL_OUTPUT_OK                = 0,
    WHISPER_MEMQUAL_OUTPUT_PREDICTION_FAILED = 1,  // the producer reported an error
    WHISPER_MEMQUAL_OUTPUT_FEATURES          = 2,  // not exactly one output
    WHISPER_MEMQUAL_OUTPUT_NAME              = 3,
    WHISPER_MEMQUAL_OUTPUT_TYPE              = 4,
    WHISPER_MEMQUAL_OUTPUT_RANK              = 5,
    WHISPER_MEMQUAL_OUTPUT_SHAPE             = 6,
    WHISPER_MEMQUAL_OUTPUT_COUNT             = 7,  // element count disagrees with the shape
    WHISPER_MEMQUAL_OUTPUT_STRIDES           = 8,  // overlapping, non-positive, or past the buffer
    WHISPER_MEMQUAL_OUTPUT_NO_DATA           = 9,
    WHISPER_MEMQUAL_OUTPUT_EXPECTATION       = 10, // the caller's expectation itself is invalid
};

// What the producer handed back, as numbers.
struct whisper_memqual_output {
    int32_t      prediction_status; // 0, or the producer's failure code
    const char * prediction_error;  // the producer's text for it (may be NULL)
    int32_t      n_features;        // output features the prediction returned
    const char * name;              // the one feature's name (NULL: unnamed)
    int32_t      elem_type;         // enum whisper_memqual_elem
    int32_t      rank;
    int64_t      shape[WHISPER_MEMQUAL_OUTPUT_MAX_RANK];   // outermost first
    int64_t      strides[WHISPER_MEMQUAL_OUTPUT_MAX_RANK]; // in elements, outermost first
    int64_t      count;             // elements the producer says it holds
    const void * data;
    int64_t      buffer_bytes;      // bytes readable from data
};

struct whisper_memqual_output_expect {
    const char * name;    // the declared feature name; NULL accepts any
    int64_t      n_ctx;   // encoder positions: n_audio_ctx, or a state's bound
    int64_t      n_state; // n_audio_state
};

// Where each of the two real dimensions steps, once the checks passed.
struct whisper_memqual_output_layout {
    int64_t stride_ctx;   // elements between positions
    int64_t stride_state; // elements between features of one position
    int     contiguous;   // exactly [n_ctx, n_state] row-major, no padding
};

static inline const char * whisper_memqual_elem_name(int32_t type) {
    switch (type) {
        case WHISPER_MEMQUAL_ELEM_FLOAT16: return "float16";
        case WHISPER_MEMQUAL_ELEM_FLOAT32: return "float32";
        case WHISPER_MEMQUAL_ELEM_FLOAT64: return "float64";
        case WHISPER_MEMQUAL_ELEM_INT32:   return "int32";
        default:                           return "an unknown type";
    }
}

// "[a, b, c]" into buf; never writes past len.
static inline void whisper_memqual_dims_text(const int64_t * v, int32_t n, char * buf, size_t len) {
    if (len == 0) {
        return;
    }
    buf[0] = '\0';
    size_t used = 0;
    for (int32_t i = 0; i <= n && used + 1 < len; ++i) {
        const int w = i == n
            ? snprintf(buf + used, len - used, "]")
            : snprintf(buf + used, len - used, "%s%lld", i == 0 ? "[" : ", ", (long long) v[i]);
        if (w < 0) {
            return;
        }
        used += (size_t) w;
    }
}

// Checks *out against *want. Returns an enum whisper_memqual_output_status;
// on anything but OK, msg (msg_len bytes, may be 0) says what was expected
// and what came, and *layout is untouched.
static inline int whisper_memqual_output_check(
        const struct whisper_memqual_output        * out,
        const struct whisper_memqual_output_expect * want,
        struct whisper_memqual_output_layout       * layout,
        char * msg, size_t msg_len) {
    char got[256];
    if (msg_len > 0) {
        msg[0] = '\0';
    }
    if (want->n_ctx <= 0 || want->n_state <= 0 || want->n_ctx > INT32_MAX || want->n_state > INT32_MAX) {
        snprintf(msg, msg_len, "the expected output [%lld, %lld] is not a shape",
                (long long) want->n_ctx, (long long) want->n_state);
        return WHISPER_MEMQUAL_OUTPUT_EXPECTATION;
    }
    if (out->prediction_status != 0) {
        snprintf(msg, msg_len, "the prediction failed (%d): %s", out->prediction_status,
                out->prediction_error != NULL && out->prediction_error[0] != '\0' ? out->prediction_error : "no reason given");
        return WHISPER_MEMQUAL_OUTPUT_PREDICTION_FAILED;
    }
    if (out->n_features != 1) {
        snprintf(msg, msg_len, "the prediction returned %d outputs, expected exactly one", out->n_features);
        return WHISPER_MEMQUAL_OUTPUT_FEATURES;
    }
    if (want->name != NULL && (out->name == NULL || strcmp(out->name, want->name) != 0)) {
        snprintf(msg, msg_len, "the output is named '%s', expected '%s'",
                out->name != NULL ? out->name : "(unnamed)", want->name);
        return WHISPER_MEMQUAL_OUTPUT_NAME;
    }
    if (out->elem_type != WHISPER_MEMQUAL_ELEM_FLOAT32) {
        snprintf(msg, msg_len, "the output holds %s (type %d), expected float32",
                whisper_memqual_elem_name(out->elem_type), out->elem_type);
        return WHISPER_MEMQUAL_OUTPUT_TYPE;
    }
    if (out->rank < 2 || out->rank > WHISPER_MEMQUAL_OUTPUT_MAX_RANK) {
        snprintf(msg, msg_len, "the output has rank %d, expected 2 to %d ([n_ctx %lld, n_state %lld] after leading 1s)",
                out->rank, WHISPER_MEMQUAL_OUTPUT_MAX_RANK, (long long) want->n_ctx, (long long) want->n_state);
        return WHISPER_MEMQUAL_OUTPUT_RANK;
    }
    const int32_t r = out->rank;
    int leading_ones = 1;
    for (int32_t i = 0; i + 2 < r; ++i) {
        leading_ones = leading_ones && out->shape[i] == 1;
    }
    if (!leading_ones || out->shape[r - 2] != want->n_ctx || out->shape[r - 1] != want->n_state) {
        whisper_memqual_dims_text(out->shape, r, got, sizeof(got));
        snprintf(msg, msg_len, "the output has shape %s, expected [n_ctx %lld, n_state %lld] after leading 1s",
                got, (long long) want->n_ctx, (long long) want->n_state);
        return WHISPER_MEMQUAL_OUTPUT_SHAPE;
    }
    const int64_t n_elements = want->n_ctx * want->n_state; // both <= INT32_MAX: no overflow
    if (out->count != n_elements) {
        snprintf(msg, msg_len, "the output holds %lld elements, its shape [%lld, %lld] has %lld",
                (long long) out->count, (long long) want->n_ctx, (long long) want->n_state, (long long) n_elements);
        return WHISPER_MEMQUAL_OUTPUT_COUNT;
    }
    if (out->data == NULL) {
        snprintf(msg, msg_len, "the output has no data");
        return WHISPER_MEMQUAL_OUTPUT_NO_DATA;
    }
    const int64_t s_ctx   = out->strides[r - 2];
    const int64_t s_state = out->strides[r - 1];
    // Rows padded (s_ctx >= n_state*s_state) or the transpose; never two elements on one address.
    const int row_major  = s_state >= 1 && s_ctx >= 1 && s_ctx / want->n_state >= s_state;
    const int col_major  = s_state >= 1 && s_ctx >= 1 && s_state / want->n_ctx >= s_ctx;
    // The last element's offset, checked against the buffer (strides are at most INT64_MAX/INT32_MAX here).
    int fits = 0;
    if (row_major || col_major) {
        const int64_t limit = INT64_MAX / (2 * (int64_t) INT32_MAX);
        if (s_ctx <= limit && s_state <= limit) {
            const int64_t last = (want->n_ctx - 1) * s_ctx + (want->n_state - 1) * s_state;
            fits = out->buffer_bytes >= 0 && last < out->buffer_bytes / (int64_t) sizeof(float);
        }
    }
    if (!fits) {
        whisper_memqual_dims_text(out->strides, r, got, sizeof(got));
        snprintf(msg, msg_len, "the output's strides %s (elements) over %lld bytes do not lay out [%lld, %lld] float32 "
                "without overlap inside the buffer (contiguous: [%lld, 1])",
                got, (long long) out->buffer_bytes, (long long) want->n_ctx, (long long) want->n_state,
                (long long) want->n_state);
        return WHISPER_MEMQUAL_OUTPUT_STRIDES;
    }
    layout->stride_ctx   = s_ctx;
    layout->stride_state = s_state;
    layout->contiguous   = s_state == 1 && s_ctx == want->n_state;
    return WHISPER_MEMQUAL_OUTPUT_OK;
}

// Copies a checked output into dst, [n_ctx, n_state] row-major, stride-aware.
static inline void whisper_memqual_output_copy(
        const struct whisper_memqual_output        * out,
        const struct whisper_memqual_output_expect * want,
        const struct whisper_memqual_output_layout * layout,
        float * dst) {
    const float * src = (const float *) out->data;
    if (layout->contiguous) {
        memcpy(dst, src, (size_t) (want->n_ctx * want->n_state) * sizeof(float));
        return;
    }
    for (int64_t c = 0; c < want->n_ctx; ++c) {
        for (int64_t s = 0; s < want->n_state; ++s) {
            dst[c * want->n_state + s] = src[c * layout->stride_ctx + s * layout->stride_state];
        }
    }
}

// The external-encoder ABI's tensor (innermost first, byte strides) seen as an
// output: one unnamed feature; tensor_type 0 is WHISPER_MEMQUAL_TENSOR_F32.
// Returns 0, or WHISPER_MEMQUAL_OUTPUT_STRIDES (with msg) when a byte stride
// is not a whole number of elements, or WHISPER_MEMQUAL_OUTPUT_RANK when
// n_dims is outside 1..4.
static inline int whisper_memqual_output_from_ggml_order(
        int32_t tensor_type, int32_t n_dims, const int64_t ne[4], const int64_t nb[4],
        const void * data, size_t nbytes,
        struct whisper_memqual_output * out, char * msg, size_t msg_len) {
    memset(out, 0, sizeof(*out));
    out->n_features   = 1;
    out->elem_type    = tensor_type == 0 ? WHISPER_MEMQUAL_ELEM_FLOAT32 : tensor_type;
    out->data         = data;
    out->buffer_bytes = nbytes > (size_t) INT64_MAX ? INT64_MAX : (int64_t) nbytes;
    if (n_dims < 1 || n_dims > 4) {
        snprintf(msg, msg_len, "the external encoder's tensor has %d dimensions, expected 1 to 4", n_dims);
        return WHISPER_MEMQUAL_OUTPUT_RANK;
    }
    // Rank at least 2: a 1-D tensor is [1, ne0].
    out->rank = n_dims < 2 ? 2 : n_dims;
    int64_t count = 1;
    for (int32_t i = 0; i < out->rank; ++i) {
        const int32_t g = out->rank - 1 - i; // ggml index of this dimension
        out->shape[i] = g < n_dims ? ne[g] : 1;
        const int64_t bytes = g < n_dims ? nb[g] : (int64_t) sizeof(float);
        if (bytes % (int64_t) sizeof(float) != 0) {
            snprintf(msg, msg_len, "the external encoder's byte stride %lld (dimension %d) is not a whole number of float32",
                    (long long) bytes, g);
            return WHISPER_MEMQUAL_OUTPUT_STRIDES;
        }
        out->strides[i] = bytes / (int64_t) sizeof(float);
        if (out->shape[i] < 0 || (out->shape[i] > 0 && count > INT64_MAX / out->shape[i])) {
            count = -1;
        } else if (count >= 0) {
            count *= out->shape[i];
        }
    }
    out->count = count;
    return WHISPER_MEMQUAL_OUTPUT_OK;
}

#endif
