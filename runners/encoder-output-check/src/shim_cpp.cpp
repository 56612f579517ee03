// The same header compiled as C++, as whisper.cpp and the Core ML glue include it.
#include "../../whisper-patch/whisper-memqual-output.h"

extern "C" int memqual_cpp_output_check(const struct whisper_memqual_output * out,
        const struct whisper_memqual_output_expect * want,
        struct whisper_memqual_output_layout * layout, char * msg, size_t msg_len) {
    return whisper_memqual_output_check(out, want, layout, msg, msg_len);
}
