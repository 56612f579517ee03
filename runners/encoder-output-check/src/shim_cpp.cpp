// The same header compiled as C++, as whisper.cpp and the Core ML glue include it.
#include "../../whisper-patch/whisper-memqual-output.h"

extern "C" int memqual_cpp_output_check(const struct whisper_memqual_output * out,
        const struct whisper_memqual_output_expect * want,
        struct whisper_memqual_output_layout * layout, char * msg, size_t msg_len) {
    return whisper_memqual_output_check(out, want, layout, msg, msg_len);
}

#include "../../whisper-patch/whisper-memqual-placement.h"

extern "C" void memqual_cpp_placement_init(struct whisper_memqual_placement * p, int32_t structure) {
    whisper_memqual_placement_init(p, structure);
}

extern "C" int memqual_cpp_placement_add(struct whisper_memqual_placement * p, const char * op, int has_usage,
        int32_t preferred, uint32_t supported, int has_cost, double cost, char * msg, size_t msg_len) {
    return whisper_memqual_placement_add(p, op, has_usage, preferred, supported, has_cost, cost, msg, msg_len);
}

extern "C" int memqual_cpp_placement_finish(const struct whisper_memqual_placement * p, char * msg, size_t msg_len) {
    return whisper_memqual_placement_finish(p, msg, msg_len);
}
