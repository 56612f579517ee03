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
