// The header's inline functions, exported for the Rust tests (C build).
#include "../../whisper-patch/whisper-memqual-output.h"

int memqual_c_output_check(const struct whisper_memqual_output * out,
        const struct whisper_memqual_output_expect * want,
        struct whisper_memqual_output_layout * layout, char * msg, size_t msg_len) {
    return whisper_memqual_output_check(out, want, layout, msg, msg_len);
}

void memqual_c_output_copy(const struct whisper_memqual_output * out,
        const struct whisper_memqual_output_expect * want,
        const struct whisper_memqual_output_layout * layout, float * dst) {
    whisper_memqual_output_copy(out, want, layout, dst);
}

int memqual_c_output_from_ggml_order(int32_t tensor_type, int32_t n_dims,
        const int64_t ne[4], const int64_t nb[4], const void * data, size_t nbytes,
        struct whisper_memqual_output * out, char * msg, size_t msg_len) {
    return whisper_memqual_output_from_ggml_order(tensor_type, n_dims, ne, nb, data, nbytes, out, msg, msg_len);
}

// The placement summary (whisper-memqual-placement.h), exported the same way.
#include "../../whisper-patch/whisper-memqual-placement.h"

void memqual_c_placement_init(struct whisper_memqual_placement * p, int32_t structure) {
    whisper_memqual_placement_init(p, structure);
}

int memqual_c_placement_add(struct whisper_memqual_placement * p, const char * op, int has_usage,
        int32_t preferred, uint32_t supported, int has_cost, double cost, char * msg, size_t msg_len) {
    return whisper_memqual_placement_add(p, op, has_usage, preferred, supported, has_cost, cost, msg, msg_len);
}

int memqual_c_placement_finish(const struct whisper_memqual_placement * p, char * msg, size_t msg_len) {
    return whisper_memqual_placement_finish(p, msg, msg_len);
}

// The struct's size and the offsets of its first and last fields, so the Rust
// mirror is checked against what the compiler laid out.
void memqual_c_placement_layout(size_t out[4]) {
    out[0] = sizeof(struct whisper_memqual_placement);
    out[1] = offsetof(struct whisper_memqual_placement, operations);
    out[2] = offsetof(struct whisper_memqual_placement, cost);
    out[3] = offsetof(struct whisper_memqual_placement, kinds);
}
