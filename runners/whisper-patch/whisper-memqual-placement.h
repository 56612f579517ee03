// memqual: a summary of where Core ML plans to run a model's operations, built
// one operation at a time from MLComputePlan (macOS 14.4, iOS 17.4). Plain C
// over plain numbers: the Objective-C++ glue (src/coreml/whisper-encoder.mm)
// only reads each operation's name, preferred device, supported devices and
// estimated cost off Core ML's objects and hands them here, so every rule is
// tested on any host by runners/encoder-output-check.
//
// A plan that contradicts itself (a device number this header does not know,
// a preferred device that is not among the supported ones, a cost that is not
// a share in [0, 1], costs that add up past the whole) is refused, naming the
// operation and the values, rather than summarised.
//
// The apply step (apply.cmake) copies this file into whisper.cpp's src/.
#ifndef WHISPER_MEMQUAL_PLACEMENT_H
#define WHISPER_MEMQUAL_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

// Compute devices, as the glue classifies Core ML's device objects.
enum whisper_memqual_device {
    WHISPER_MEMQUAL_DEVICE_UNKNOWN       = 0, // a device class this header does not know
    WHISPER_MEMQUAL_DEVICE_CPU           = 1,
    WHISPER_MEMQUAL_DEVICE_GPU           = 2,
    WHISPER_MEMQUAL_DEVICE_NEURAL_ENGINE = 3,
};
#define WHISPER_MEMQUAL_DEVICES 4
#define WHISPER_MEMQUAL_DEVICE_BIT(d) (1u << (unsigned) (d))

// What the compute plan describes.
enum whisper_memqual_structure {
    WHISPER_MEMQUAL_STRUCTURE_UNKNOWN        = 0,
    WHISPER_MEMQUAL_STRUCTURE_PROGRAM        = 1, // an ML program: operations
    WHISPER_MEMQUAL_STRUCTURE_NEURAL_NETWORK = 2, // a neural network: layers, no cost estimates
};

enum whisper_memqual_placement_status {
    WHISPER_MEMQUAL_PLACEMENT_OK        = 0,
    WHISPER_MEMQUAL_PLACEMENT_DEVICE    = 1, // a device number outside the enum
    WHISPER_MEMQUAL_PLACEMENT_SUPPORTED = 2, // unknown bits, or the preferred device not among them
    WHISPER_MEMQUAL_PLACEMENT_COST      = 3, // a cost that is not a share in [0, 1]
    WHISPER_MEMQUAL_PLACEMENT_TOTAL     = 4, // the costs add up past the whole
    WHISPER_MEMQUAL_PLACEMENT_EMPTY     = 5, // no operation at all, or no known structure
};

#define WHISPER_MEMQUAL_PLACEMENT_KINDS 32
#define WHISPER_MEMQUAL_PLACEMENT_NAME  64

// One operator (ML program) or layer type (neural network).
struct whisper_memqual_placement_kind {
    char    op[WHISPER_MEMQUAL_PLACEMENT_NAME];       // NUL-terminated, cut to fit
    int64_t preferred[WHISPER_MEMQUAL_DEVICES];       // its operations by preferred device
};

struct whisper_memqual_placement {
    int32_t structure;                                // enum whisper_memqual_structure
    int64_t operations;                               // every operation or layer visited
    int64_t without_usage;                            // no device usage (constants, folded at load)
    int64_t preferred[WHISPER_MEMQUAL_DEVICES];       // operations by preferred device
    int64_t supported[WHISPER_MEMQUAL_DEVICES];       // operations each device could run
    int64_t costed;                                   // operations with an estimated cost
    double  cost[WHISPER_MEMQUAL_DEVICES];            // estimated cost shares by preferred device
    int32_t n_kinds;
    int64_t kinds_dropped;                            // operations of kinds past the table
    struct whisper_memqual_placement_kind kinds[WHISPER_MEMQUAL_PLACEMENT_KINDS]; // first seen first
};

static inline const char * whisper_memqual_device_name(int32_t device) {
    switch (device) {
        case WHISPER_MEMQUAL_DEVICE_UNKNOWN:       return "unknown";
        case WHISPER_MEMQUAL_DEVICE_CPU:           return "cpu";
        case WHISPER_MEMQUAL_DEVICE_GPU:           return "gpu";
        case WHISPER_MEMQUAL_DEVICE_NEURAL_ENGINE: return "neural_engine";
        default:                                   return "invalid";
    }
}

static inline void whisper_memqual_placement_init(struct whisper_memqual_placement * p, int32_t structure) {
    memset(p, 0, sizeof(*p));
    p->structure = structure;
}

// The kind named op (its first WHISPER_MEMQUAL_PLACEMENT_NAME - 1 bytes, never
// cutting a UTF-8 sequence), added when the table has room; NULL when it is full.
static inline struct whisper_memqual_placement_kind * whisper_memqual_placement_kind_of(
        struct whisper_memqual_placement * p, const char * op) {
    char name[WHISPER_MEMQUAL_PLACEMENT_NAME];
    size_t n = op != NULL ? strlen(op) : 0;
    if (n > WHISPER_MEMQUAL_PLACEMENT_NAME - 1) {
        n = WHISPER_MEMQUAL_PLACEMENT_NAME - 1;
        while (n > 0 && (((unsigned char) op[n]) & 0xC0u) == 0x80u) {
            --n; // op[n] continues a sequence: cut before the sequence's lead byte
        }
    }
    if (n > 0) {
        memcpy(name, op, n);
    }
    name[n] = '\0';
    for (int32_t i = 0; i < p->n_kinds; ++i) {
        if (strcmp(p->kinds[i].op, name) == 0) {
            return &p->kinds[i];
        }
    }
    if (p->n_kinds >= WHISPER_MEMQUAL_PLACEMENT_KINDS) {
        return NULL;
    }
    struct whisper_memqual_placement_kind * kind = &p->kinds[p->n_kinds++];
    memcpy(kind->op, name, n + 1);
    return kind;
}

// One operation: has_usage is 0 for an operation Core ML plans no device for
// (a constant); supported is a mask of WHISPER_MEMQUAL_DEVICE_BIT; cost is its
// estimated share of the model's cost, read only when has_cost is non-zero.
static inline int whisper_memqual_placement_add(struct whisper_memqual_placement * p, const char * op,
        int has_usage, int32_t preferred, uint32_t supported, int has_cost, double cost,
        char * msg, size_t msg_len) {
    const char * name = op != NULL ? op : "(unnamed)";
    if (!has_usage) {
        p->operations += 1;
        p->without_usage += 1;
        return WHISPER_MEMQUAL_PLACEMENT_OK;
    }
    if (preferred < 0 || preferred >= WHISPER_MEMQUAL_DEVICES) {
        snprintf(msg, msg_len, "operation %s: preferred device %d is not one of unknown, cpu, gpu, neural_engine",
                name, (int) preferred);
        return WHISPER_MEMQUAL_PLACEMENT_DEVICE;
    }
    const uint32_t known = WHISPER_MEMQUAL_DEVICE_BIT(WHISPER_MEMQUAL_DEVICES) - 1u;
    if ((supported & ~known) != 0u || (supported & WHISPER_MEMQUAL_DEVICE_BIT(preferred)) == 0u) {
        snprintf(msg, msg_len, "operation %s: prefers %s, but its supported devices are mask 0x%x "
                "(bit 1 cpu, 2 gpu, 3 neural_engine, 0 unknown)",
                name, whisper_memqual_device_name(preferred), (unsigned) supported);
        return WHISPER_MEMQUAL_PLACEMENT_SUPPORTED;
    }
    // Written so that NaN fails too.
    if (has_cost && !(cost >= 0.0 && cost <= 1.0)) {
        snprintf(msg, msg_len, "operation %s: estimated cost %g is not a share between 0 and 1", name, cost);
        return WHISPER_MEMQUAL_PLACEMENT_COST;
    }
    p->operations += 1;
    p->preferred[preferred] += 1;
    for (int32_t d = 0; d < WHISPER_MEMQUAL_DEVICES; ++d) {
        if ((supported & WHISPER_MEMQUAL_DEVICE_BIT(d)) != 0u) {
            p->supported[d] += 1;
        }
    }
    if (has_cost) {
        p->costed += 1;
        p->cost[preferred] += cost;
    }
    struct whisper_memqual_placement_kind * kind = whisper_memqual_placement_kind_of(p, op);
    if (kind != NULL) {
        kind->preferred[preferred] += 1;
    } else {
        p->kinds_dropped += 1;
    }
    return WHISPER_MEMQUAL_PLACEMENT_OK;
}

// After the last operation: refuses an empty plan and costs past the whole
// (Core ML's shares add up to 1; a rounding margin of 1e-6 is allowed).
static inline int whisper_memqual_placement_finish(const struct whisper_memqual_placement * p,
        char * msg, size_t msg_len) {
    if (p->structure != WHISPER_MEMQUAL_STRUCTURE_PROGRAM && p->structure != WHISPER_MEMQUAL_STRUCTURE_NEURAL_NETWORK) {
        snprintf(msg, msg_len, "the compute plan describes structure %d, neither an ML program nor a neural network",
                (int) p->structure);
        return WHISPER_MEMQUAL_PLACEMENT_EMPTY;
    }
    if (p->operations == 0) {
        snprintf(msg, msg_len, "the compute plan lists no operation");
        return WHISPER_MEMQUAL_PLACEMENT_EMPTY;
    }
    double total = 0.0;
    for (int32_t d = 0; d < WHISPER_MEMQUAL_DEVICES; ++d) {
        total += p->cost[d];
    }
    if (total > 1.0 + 1e-6) {
        snprintf(msg, msg_len, "the estimated costs of %lld operations add up to %.6f, past the whole (1)",
                (long long) p->costed, total);
        return WHISPER_MEMQUAL_PLACEMENT_TOTAL;
    }
    return WHISPER_MEMQUAL_PLACEMENT_OK;
}

#endif
