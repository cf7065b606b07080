/* A stand-in for libnvoptix.so.1 that "builds" acceleration structures in host memory, beside
 * fake_gpu_cuda.c (whose device pointers are host pointers). It checks what a driver would
 * reject or silently get wrong, and logs every call, so that gasworks' batched GAS builds can
 * be tested end to end on a machine without a GPU:
 * - a build's temp and output buffers must be 128-byte aligned and at least the sizes
 *   optixAccelComputeMemoryUsage gives for the same inputs (else OPTIX_ERROR_INVALID_VALUE);
 * - triangle inputs are read where the device would read them: every index below the vertex
 *   count, every vertex coordinate finite;
 * - the build writes exactly those sizes (a pattern, and a header at the start of the output
 *   naming the GAS), so a plan whose ranges overlap shows as a corrupted header or guard band;
 * - the compacted-size property is written where the emit descriptor points; compaction reads
 *   the header back, so it must be given a GAS that was built and is still there;
 * - an instance build reads every instance's handle and requires a GAS header there.
 * Environment: FAKE_GPU_LOG=FILE appends one line per call ("build ctx=2 stream=0x... temp=...");
 * FAKE_OPTIX_HANG_AT_BUILD=K makes the K-th optixAccelBuild of the process never return (a
 * hung driver); FAKE_OPTIX_ABORT_AT_CONTEXT=N aborts the process on a build through the N-th
 * context created or a later one (a crash inside the driver).
 * Declarations are written from the ABI facts (function-table order, struct offsets). */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int optix_result;
typedef void (*entry)(void);
typedef unsigned long long devptr;

enum {
    SUCCESS = 0,
    INVALID_VALUE = 7001,
    UNSUPPORTED_ABI = 7801,
    TABLE_SIZE_MISMATCH = 7802,
    NOT_SUPPORTED = 7800,
};
#define ALIGN 128
#define TYPE_TRIANGLES 0x2141
#define TYPE_INSTANCES 0x2143
#define PROPERTY_COMPACTED_SIZE 0x2181
#define INPUT_STRIDE 1032
#define INSTANCE_STRIDE 80
static const char GAS_MAGIC[8] = "FAKEGAS";

/* The header at the start of every GAS this library builds. */
typedef struct {
    char magic[8];
    uint64_t compacted_size;
    uint64_t context;
    uint64_t primitives;
} gas_header;

typedef struct { uint64_t id; } context;

static uint64_t contexts_created;
static uint64_t builds_started;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    const char *path = getenv("FAKE_GPU_LOG");
    if (!path) return;
    char line[512];
    va_list args;
    va_start(args, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, args);
    va_end(args);
    if (n < 0) return;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    pthread_mutex_lock(&log_lock);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        ssize_t w = write(fd, line, (size_t)n);
        (void)w;
        close(fd);
    }
    pthread_mutex_unlock(&log_lock);
}

static uint64_t env_u64(const char *name) {
    const char *v = getenv(name);
    return v ? strtoull(v, NULL, 10) : 0;
}

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static const char *error_name(optix_result r) {
    switch (r) {
    case SUCCESS: return "OPTIX_SUCCESS";
    case INVALID_VALUE: return "OPTIX_ERROR_INVALID_VALUE";
    case NOT_SUPPORTED: return "OPTIX_ERROR_NOT_SUPPORTED";
    default: return "OPTIX_ERROR_UNKNOWN";
    }
}
static const char *error_string(optix_result r) { return error_name(r); }
static optix_result not_supported(void) { return NOT_SUPPORTED; }

static optix_result context_create(void *cu_context, const void *options, context **out) {
    (void)cu_context; (void)options;
    context *c = malloc(sizeof *c);
    if (!c) return INVALID_VALUE;
    c->id = __atomic_add_fetch(&contexts_created, 1, __ATOMIC_SEQ_CST);
    *out = c;
    log_line("context create id=%llu", (unsigned long long)c->id);
    return SUCCESS;
}
static optix_result context_destroy(context *c) {
    log_line("context destroy id=%llu", (unsigned long long)c->id);
    free(c);
    return SUCCESS;
}
static optix_result context_get_property(context *c, int property, void *value, size_t size) {
    (void)c;
    uint32_t v;
    switch (property) {
    case 0x2001: v = 31; break;                 /* MAX_TRACE_DEPTH */
    case 0x2002: v = 31; break;                 /* MAX_TRAVERSABLE_GRAPH_DEPTH */
    case 0x2003: v = 1u << 29; break;           /* MAX_PRIMITIVES_PER_GAS */
    case 0x2004: v = 1u << 24; break;           /* MAX_INSTANCES_PER_IAS */
    case 0x2005: v = 100; break;                /* RTCORE_VERSION */
    case 0x2006: v = (1u << 28) - 1; break;     /* MAX_INSTANCE_ID */
    case 0x2007: v = 8; break;                  /* NUM_BITS_INSTANCE_VISIBILITY_MASK */
    case 0x2008: v = 1u << 24; break;           /* MAX_SBT_RECORDS_PER_GAS */
    case 0x2009: v = (1u << 28) - 1; break;     /* MAX_SBT_OFFSET */
    default: return INVALID_VALUE;
    }
    if (size != sizeof v) return INVALID_VALUE;
    memcpy(value, &v, sizeof v);
    return SUCCESS;
}
static optix_result context_set_log_callback(context *c, void *fn, void *data, unsigned level) {
    (void)c; (void)fn; (void)data; (void)level;
    return SUCCESS;
}

/* What a set of build inputs needs: primitives, output and temp bytes. Triangle inputs are
 * checked where the device would read them. */
typedef struct { uint64_t primitives; size_t output, temp; int instances; } needs;

static optix_result measure(const unsigned char *inputs, unsigned count, needs *n, int check_data) {
    memset(n, 0, sizeof *n);
    if (count == 0) return INVALID_VALUE;
    for (unsigned i = 0; i < count; ++i) {
        const unsigned char *in = inputs + (size_t)i * INPUT_STRIDE;
        uint32_t type;
        memcpy(&type, in, 4);
        const unsigned char *u = in + 8;
        if (type == TYPE_TRIANGLES) {
            const devptr *vertex_buffers;
            uint32_t vertices, triangles, vertex_stride, index_stride;
            devptr index_buffer;
            memcpy(&vertex_buffers, u + 0, 8);
            memcpy(&vertices, u + 8, 4);
            memcpy(&vertex_stride, u + 16, 4);
            memcpy(&index_buffer, u + 24, 8);
            memcpy(&triangles, u + 32, 4);
            memcpy(&index_stride, u + 40, 4);
            if (n->instances || vertices == 0 || !vertex_buffers) return INVALID_VALUE;
            if (vertex_stride == 0) vertex_stride = 12;
            if (index_stride == 0) index_stride = 12;
            uint64_t prims = index_buffer ? triangles : vertices / 3;
            if (check_data) {
                const unsigned char *v = (const unsigned char *)(uintptr_t)vertex_buffers[0];
                for (uint32_t k = 0; k < vertices; ++k) {
                    float p[3];
                    memcpy(p, v + (size_t)k * vertex_stride, sizeof p);
                    if (!isfinite(p[0]) || !isfinite(p[1]) || !isfinite(p[2])) return INVALID_VALUE;
                }
                const unsigned char *ix = (const unsigned char *)(uintptr_t)index_buffer;
                for (uint32_t t = 0; ix && t < triangles; ++t) {
                    uint32_t tri[3];
                    memcpy(tri, ix + (size_t)t * index_stride, sizeof tri);
                    if (tri[0] >= vertices || tri[1] >= vertices || tri[2] >= vertices) return INVALID_VALUE;
                }
            }
            n->primitives += prims;
        } else if (type == TYPE_INSTANCES) {
            uint32_t instances;
            memcpy(&instances, u + 8, 4);
            if (count != 1) return INVALID_VALUE;
            n->instances = 1;
            n->primitives += instances;
        } else {
            return INVALID_VALUE;
        }
    }
    n->output = round_up(sizeof(gas_header) + 64 * n->primitives + 64 * count);
    n->temp = round_up(256 + 48 * n->primitives);
    return SUCCESS;
}

typedef struct { size_t output, temp, temp_update; } buffer_sizes;

static optix_result compute_memory_usage(context *c, const void *options, const unsigned char *inputs,
                                         unsigned count, buffer_sizes *sizes) {
    (void)c; (void)options;
    needs n;
    optix_result r = measure(inputs, count, &n, 0);
    if (r) return r;
    sizes->output = n.output;
    sizes->temp = n.temp;
    sizes->temp_update = 0;
    return SUCCESS;
}

static int is_gas(devptr handle) {
    return handle && handle % ALIGN == 0 && memcmp((const void *)(uintptr_t)handle, GAS_MAGIC, 8) == 0;
}

static optix_result accel_build(context *c, void *stream, const void *options, const unsigned char *inputs,
                                unsigned count, devptr temp, size_t temp_size, devptr output,
                                size_t output_size, devptr *handle, const unsigned char *emitted,
                                unsigned emitted_count) {
    (void)options;
    uint64_t k = __atomic_add_fetch(&builds_started, 1, __ATOMIC_SEQ_CST);
    if (env_u64("FAKE_OPTIX_HANG_AT_BUILD") == k) {
        log_line("build %llu hangs (FAKE_OPTIX_HANG_AT_BUILD)", (unsigned long long)k);
        for (;;) pause();
    }
    uint64_t abort_at = env_u64("FAKE_OPTIX_ABORT_AT_CONTEXT");
    if (abort_at && c->id >= abort_at) {
        log_line("build %llu through context %llu aborts (FAKE_OPTIX_ABORT_AT_CONTEXT)",
                 (unsigned long long)k, (unsigned long long)c->id);
        abort();
    }
    needs n;
    optix_result r = measure(inputs, count, &n, 1);
    if (r == SUCCESS && (temp % ALIGN || output % ALIGN || !temp || !output)) r = INVALID_VALUE;
    if (r == SUCCESS && (temp_size < n.temp || output_size < n.output)) r = INVALID_VALUE;
    if (r == SUCCESS && n.instances) {
        const unsigned char *u = inputs + 8;
        devptr instances;
        memcpy(&instances, u, 8);
        for (uint64_t i = 0; i < n.primitives; ++i) {
            devptr gas;
            memcpy(&gas, (const unsigned char *)(uintptr_t)instances + i * INSTANCE_STRIDE + 64, 8);
            if (!is_gas(gas)) {
                log_line("ias ctx=%llu instance %llu: handle 0x%llx is no GAS", (unsigned long long)c->id,
                         (unsigned long long)i, gas);
                r = INVALID_VALUE;
                break;
            }
        }
    }
    log_line("%s ctx=%llu stream=%p inputs=%u prims=%llu temp=0x%llx+%zu output=0x%llx+%zu result=%d",
             n.instances ? "ias" : "build", (unsigned long long)c->id, stream, count,
             (unsigned long long)n.primitives, temp, n.temp, output, n.output, r);
    if (r) return r;
    memset((void *)(uintptr_t)temp, 0xA5, n.temp);
    memset((void *)(uintptr_t)output, 0x5A, n.output);
    gas_header h;
    memcpy(h.magic, n.instances ? "FAKEIAS" : GAS_MAGIC, 8);
    h.compacted_size = round_up(n.output / 2 > sizeof h ? n.output / 2 : sizeof h);
    h.context = c->id;
    h.primitives = n.primitives;
    memcpy((void *)(uintptr_t)output, &h, sizeof h);
    *handle = output;
    for (unsigned e = 0; e < emitted_count; ++e) {
        devptr result;
        uint32_t type;
        memcpy(&result, emitted + (size_t)e * 16, 8);
        memcpy(&type, emitted + (size_t)e * 16 + 8, 4);
        if (type != PROPERTY_COMPACTED_SIZE || !result || result % 8) return INVALID_VALUE;
        memcpy((void *)(uintptr_t)result, &h.compacted_size, 8);
    }
    return SUCCESS;
}

static optix_result accel_compact(context *c, void *stream, devptr handle, devptr output, size_t output_size,
                                  devptr *compacted) {
    if (!is_gas(handle)) {
        log_line("compact ctx=%llu stream=%p from=0x%llx: no GAS there", (unsigned long long)c->id, stream, handle);
        return INVALID_VALUE;
    }
    gas_header h;
    memcpy(&h, (const void *)(uintptr_t)handle, sizeof h);
    optix_result r = SUCCESS;
    if (!output || output % ALIGN || output_size < h.compacted_size) r = INVALID_VALUE;
    log_line("compact ctx=%llu built_by=%llu stream=%p from=0x%llx output=0x%llx+%llu result=%d",
             (unsigned long long)c->id, (unsigned long long)h.context, stream, handle, output,
             (unsigned long long)h.compacted_size, r);
    if (r) return r;
    memmove((void *)(uintptr_t)output, (const void *)(uintptr_t)handle, h.compacted_size);
    *compacted = output;
    return SUCCESS;
}

optix_result optixQueryFunctionTable(int abi, unsigned int num_options, void *keys, const void **values,
                                     void *table, size_t size) {
    (void)num_options; (void)keys; (void)values;
    if (abi != 87 && abi != 105) return UNSUPPORTED_ABI;
    size_t entries = abi == 87 ? 48 : 52;
    if (size != entries * sizeof(void *)) return TABLE_SIZE_MISMATCH;
    entry *t = (entry *)table;
    for (size_t i = 0; i < entries; ++i) t[i] = (entry)not_supported;
    t[0] = (entry)error_name;
    t[1] = (entry)error_string;
    t[2] = (entry)context_create;
    t[3] = (entry)context_destroy;
    t[4] = (entry)context_get_property;
    t[5] = (entry)context_set_log_callback;
    t[24] = (entry)compute_memory_usage;
    t[25] = (entry)accel_build;
    t[29] = (entry)accel_compact;
    return SUCCESS;
}
