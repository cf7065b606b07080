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
 * - an instance build reads every instance's handle and requires a GAS header there;
 * - a module keeps its PTX: program groups must name entry functions it defines (".entry
 *   NAME("), the pipeline's launch-parameter variable must be declared in it (".const ... NAME[N]"),
 *   and a launch must pass exactly N bytes of parameters and a shader binding table whose
 *   records are aligned, carry headers packed here, and have the right kinds.
 * Environment: FAKE_GPU_LOG=FILE appends one line per call ("build ctx=2 stream=0x... temp=...")
 * and, at a normal exit, what is still alive ("exit: live contexts=0 modules=0 ...");
 * FAKE_OPTIX_HANG_AT_BUILD=K makes the K-th optixAccelBuild of the process never return (a
 * hung driver); FAKE_OPTIX_ABORT_AT_CONTEXT=N aborts the process on a build through the N-th
 * context created or a later one (a crash inside the driver); FAKE_OPTIX_HANG_AT_LAUNCH=K makes
 * the K-th optixLaunch never return; FAKE_OPTIX_FAIL_LAUNCHES_FROM=K makes the K-th optixLaunch
 * and every later one fail with OPTIX_ERROR_LAUNCH_FAILURE (a launch the driver refuses);
 * FAKE_OPTIX_FAULT_AT_LAUNCH=K makes the K-th optixLaunch fault as a kernel with an illegal
 * address does: the launch itself returns success, and the fake libcuda's context has the sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS from then on (fake_cuda_fault), every later launch failing with
 * OPTIX_ERROR_CUDA_ERROR. A launch runs no device code: the buffers it would write keep what
 * they held, unless FAKE_OPTIX_RENDER_NOISE=1 (see fake_render), but a ray cast's rays all miss
 * (fake_raycast). It reads gasworks' skip bytes
 * where the launch parameters point at some, and logs how many pixels they skip ("skipped=N").
 * Declarations are written from the ABI facts (function-table order, struct offsets). */
#define _GNU_SOURCE /* memmem */
#include <dlfcn.h>
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
    LAUNCH_FAILURE = 7050,
    CUDA_ERROR = 7900,
};
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
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
/* What is alive; appended to FAKE_GPU_LOG at a normal exit, so that a test finds leaks. */
static long live_contexts, live_modules, live_groups, live_pipelines;
static void add_live(long *n, int delta) { __atomic_add_fetch(n, delta, __ATOMIC_SEQ_CST); }
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

__attribute__((destructor)) static void report_live(void) {
    log_line("exit: live contexts=%ld modules=%ld program_groups=%ld pipelines=%ld", live_contexts, live_modules,
             live_groups, live_pipelines);
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
    case LAUNCH_FAILURE: return "OPTIX_ERROR_LAUNCH_FAILURE";
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
    add_live(&live_contexts, 1);
    *out = c;
    log_line("context create id=%llu", (unsigned long long)c->id);
    return SUCCESS;
}
static optix_result context_destroy(context *c) {
    log_line("context destroy id=%llu", (unsigned long long)c->id);
    add_live(&live_contexts, -1);
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
    case 0x2020: v = 0; break;                  /* CLUSTER_ACCEL: no cluster builds */
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

/* Modules, program groups and pipelines. */
typedef struct { char *ptx; size_t size; } module;
typedef struct { uint32_t kind; const module *m; } program_group;
typedef struct { size_t params_size; } pipeline;

#define KIND_RAYGEN 0x2421
#define KIND_MISS 0x2422
#define KIND_HITGROUP 0x2424
#define SBT_HEADER_SIZE 32
#define SBT_ALIGN 16
static const char SBT_MAGIC[8] = "FAKESBT";
static uint64_t launches_started;

/* Writes `text` into a driver log buffer (logString, logStringSize in/out). */
static void write_log(char *log, size_t *size, const char *text) {
    if (!size) return;
    size_t n = strlen(text) + 1;
    if (log && *size > 0) {
        size_t k = n < *size ? n : *size;
        memcpy(log, text, k);
        log[k - 1] = '\0';
    }
    *size = n;
}

/* Whether the PTX defines entry function `name` (".entry NAME("). */
static int defines_entry(const module *m, const char *name) {
    if (!m || !name) return 0;
    char needle[256];
    int n = snprintf(needle, sizeof needle, ".entry %s(", name);
    return n > 0 && n < (int)sizeof needle && memmem(m->ptx, m->size, needle, (size_t)n) != NULL;
}

/* The size N of ".const .align A .b8 NAME[N]" in the PTX, or 0 where NAME is not declared. */
static size_t declared_params_size(const module *m, const char *name) {
    char needle[256];
    int n = snprintf(needle, sizeof needle, " %s[", name);
    if (n <= 0 || n >= (int)sizeof needle) return 0;
    const char *at = memmem(m->ptx, m->size, needle, (size_t)n);
    if (!at) return 0;
    const char *line = at;
    while (line > m->ptx && line[-1] != '\n') --line;
    if (!memmem(line, (size_t)(at - line), ".const", 6)) return 0;
    return strtoull(at + n, NULL, 10);
}

static optix_result module_create(context *c, const void *module_options, const unsigned char *pipeline_options,
                                  const char *ptx, size_t size, char *log, size_t *log_size, module **out) {
    (void)c; (void)module_options; (void)pipeline_options;
    if (!ptx || size == 0 || !memmem(ptx, size, ".version", 8)) {
        write_log(log, log_size, "fake OptiX: the input is not PTX");
        return INVALID_VALUE;
    }
    module *m = malloc(sizeof *m);
    if (!m || !(m->ptx = malloc(size))) { free(m); return INVALID_VALUE; }
    memcpy(m->ptx, ptx, size);
    m->size = size;
    *out = m;
    add_live(&live_modules, 1);
    write_log(log, log_size, "");
    log_line("module create ctx=%llu bytes=%zu", (unsigned long long)c->id, size);
    return SUCCESS;
}
static optix_result module_destroy(module *m) {
    add_live(&live_modules, -1);
    free(m->ptx);
    free(m);
    return SUCCESS;
}

static optix_result program_group_create(context *c, const unsigned char *descs, unsigned count,
                                         const void *options, char *log, size_t *log_size,
                                         program_group **out) {
    (void)options;
    for (unsigned i = 0; i < count; ++i) {
        const unsigned char *d = descs + (size_t)i * 56; /* kind, flags, then a 48-byte union */
        uint32_t kind;
        memcpy(&kind, d, 4);
        const module *mods[3] = {0};
        const char *names[3] = {0};
        int entries = kind == KIND_HITGROUP ? 3 : 1;
        if (kind != KIND_RAYGEN && kind != KIND_MISS && kind != KIND_HITGROUP) {
            write_log(log, log_size, "fake OptiX: a program group kind this stand-in does not know");
            return INVALID_VALUE;
        }
        for (int e = 0; e < entries; ++e) {
            memcpy(&mods[e], d + 8 + 16 * e, 8);
            memcpy(&names[e], d + 16 + 16 * e, 8);
            /* A hit group may leave any of its three programs out; raygen and miss may not. */
            int given = mods[e] || names[e] || kind != KIND_HITGROUP;
            if (given && !defines_entry(mods[e], names[e])) {
                char text[300];
                snprintf(text, sizeof text, "fake OptiX: no entry function %s in the module",
                         names[e] ? names[e] : "(null)");
                write_log(log, log_size, text);
                return INVALID_VALUE;
            }
        }
        program_group *g = malloc(sizeof *g);
        if (!g) return INVALID_VALUE;
        g->kind = kind;
        g->m = mods[0] ? mods[0] : mods[1] ? mods[1] : mods[2];
        out[i] = g;
        add_live(&live_groups, 1);
        log_line("program group ctx=%llu kind=0x%x entries=%s,%s,%s", (unsigned long long)c->id, kind,
                 names[0] ? names[0] : "-", names[1] ? names[1] : "-", names[2] ? names[2] : "-");
    }
    write_log(log, log_size, "");
    return SUCCESS;
}
static optix_result program_group_destroy(program_group *g) {
    add_live(&live_groups, -1);
    free(g);
    return SUCCESS;
}
static optix_result program_group_get_stack_size(program_group *g, uint32_t *sizes, void *pipeline) {
    (void)pipeline;
    memset(sizes, 0, 7 * sizeof *sizes);
    sizes[0] = g->kind == KIND_RAYGEN ? 512 : 0; /* cssRG */
    sizes[1] = g->kind == KIND_MISS ? 64 : 0;    /* cssMS */
    sizes[2] = g->kind == KIND_HITGROUP ? 128 : 0; /* cssCH */
    sizes[3] = g->kind == KIND_HITGROUP ? 32 : 0;  /* cssAH */
    return SUCCESS;
}

static optix_result pipeline_create(context *c, const unsigned char *compile_options, const void *link_options,
                                    program_group *const *groups, unsigned count, char *log, size_t *log_size,
                                    pipeline **out) {
    (void)link_options;
    const char *name;
    memcpy(&name, compile_options + 24, 8); /* pipelineLaunchParamsVariableName */
    size_t size = 0;
    for (unsigned i = 0; name && i < count; ++i) {
        size_t s = groups[i]->m ? declared_params_size(groups[i]->m, name) : 0;
        if (s && size && s != size) {
            write_log(log, log_size, "fake OptiX: the modules declare the launch parameters with two sizes");
            return INVALID_VALUE;
        }
        if (s) size = s;
    }
    if (!size) {
        char text[300];
        snprintf(text, sizeof text, "fake OptiX: launch parameter variable %s is declared in no module",
                 name ? name : "(null)");
        write_log(log, log_size, text);
        return INVALID_VALUE;
    }
    pipeline *p = malloc(sizeof *p);
    if (!p) return INVALID_VALUE;
    p->params_size = size;
    *out = p;
    add_live(&live_pipelines, 1);
    write_log(log, log_size, "");
    log_line("pipeline create ctx=%llu groups=%u params=%s[%zu]", (unsigned long long)c->id, count, name, size);
    return SUCCESS;
}
static optix_result pipeline_destroy(pipeline *p) {
    add_live(&live_pipelines, -1);
    free(p);
    return SUCCESS;
}
static optix_result pipeline_set_stack_size(pipeline *p, unsigned dc_traversal, unsigned dc_state,
                                            unsigned continuation, unsigned graph_depth) {
    (void)p;
    log_line("stack size direct=%u/%u continuation=%u graph_depth=%u", dc_traversal, dc_state, continuation,
             graph_depth);
    return graph_depth >= 1 && graph_depth <= 31 ? SUCCESS : INVALID_VALUE;
}
static optix_result sbt_record_pack_header(const program_group *g, unsigned char *header) {
    memset(header, 0, SBT_HEADER_SIZE);
    memcpy(header, SBT_MAGIC, 8);
    memcpy(header + 8, &g->kind, 4);
    return SUCCESS;
}

/* Whether `count` records of `stride` bytes from `base` are aligned and carry headers of `kind`. */
static int records_ok(devptr base, unsigned stride, unsigned count, uint32_t kind) {
    if (!base || base % SBT_ALIGN || count == 0) return 0;
    if (count > 1 && (stride < SBT_HEADER_SIZE || stride % SBT_ALIGN)) return 0;
    for (unsigned i = 0; i < count; ++i) {
        const unsigned char *r = (const unsigned char *)(uintptr_t)(base + (devptr)i * stride);
        uint32_t k;
        memcpy(&k, r + 8, 4);
        if (memcmp(r, SBT_MAGIC, 8) != 0 || k != kind) return 0;
    }
    return 1;
}

static uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A launch of gasworks' path tracer (GwLaunchParams: accum at 8, tile_x/y/w/h at 140..152,
 * sample_begin/end at 156 and 160, mode at 184, the skip bytes' pointer at 288, one byte per
 * tile pixel). The skip bytes are read as the device reads them; the count of skipped pixels
 * is returned (logged as "skipped=N"). With FAKE_OPTIX_RENDER_NOISE=1 the launch renders as
 * a device would write the accumulation: ACCUMULATE and REDUCE launches add each sample of
 * every pixel not skipped, SAMPLES launches nothing (their REDUCE adds them), a sample being
 * grey 0.3 plus 0.8 x a uniform number in [-0.5, 0.5) from (x, y, sample), but 0.3 exactly
 * in the column 16 <= x < 32: an image whose second column of blocks adaptive sampling stops. */
static unsigned long long fake_render(devptr params) {
    devptr accum = 0, skip = 0;
    unsigned tile[4], samples[2], mode = 0;
    memcpy(&accum, (const void *)(uintptr_t)(params + 8), 8);
    memcpy(tile, (const void *)(uintptr_t)(params + 140), 16);
    memcpy(samples, (const void *)(uintptr_t)(params + 156), 8);
    memcpy(&mode, (const void *)(uintptr_t)(params + 184), 4);
    memcpy(&skip, (const void *)(uintptr_t)(params + 288), 8);
    const unsigned char *skips = (const unsigned char *)(uintptr_t)skip;
    const int render = env_u64("FAKE_OPTIX_RENDER_NOISE") == 1 && accum && mode != 1;
    unsigned long long skipped = 0;
    for (uint64_t i = 0; i < (uint64_t)tile[2] * tile[3]; ++i) {
        if (skips && skips[i]) {
            ++skipped;
            continue;
        }
        if (!render) continue;
        const uint32_t x = tile[0] + (uint32_t)(i % tile[2]), y = tile[1] + (uint32_t)(i / tile[2]);
        float *a = (float *)(uintptr_t)accum + 4 * i;
        for (uint32_t s = samples[0]; s < samples[1]; ++s) {
            const uint64_t h = mix64((uint64_t)(y * 10000u + x) << 32 | s);
            const float u = (float)(h >> 40) / (float)(1u << 24);
            const float v = x >= 16 && x < 32 ? 0.3f : 0.3f + 0.8f * (u - 0.5f);
            a[0] += v;
            a[1] += v;
            a[2] += v;
            a[3] += 1.0f;
        }
    }
    return skipped;
}

/* A launch of gasworks' ray cast (RaycastParams, 32 bytes: the hits' pointer at 16, the ray
 * count at 24): every ray misses, as a device writes a miss (RaycastHit: group and instance
 * 0xffffffff, t +inf), so that a GPU rank's walk goes on from a well-formed answer. */
static void fake_raycast(devptr params) {
    devptr hits = 0;
    uint32_t count = 0;
    memcpy(&hits, (const void *)(uintptr_t)(params + 16), 8);
    memcpy(&count, (const void *)(uintptr_t)(params + 24), 4);
    const uint32_t miss[6] = {0xffffffffu, 0, 0x7f800000u, 0, 0, 0xffffffffu};
    for (uint32_t i = 0; hits && i < count; ++i) memcpy((void *)(uintptr_t)(hits + 24ull * i), miss, sizeof miss);
}

static optix_result launch(pipeline *p, void *stream, devptr params, size_t params_size,
                           const unsigned char *sbt, unsigned w, unsigned h, unsigned d) {
    uint64_t k = __atomic_add_fetch(&launches_started, 1, __ATOMIC_SEQ_CST);
    if (env_u64("FAKE_OPTIX_HANG_AT_LAUNCH") == k) {
        log_line("launch %llu hangs (FAKE_OPTIX_HANG_AT_LAUNCH)", (unsigned long long)k);
        for (;;) pause();
    }
    uint64_t fault_at = env_u64("FAKE_OPTIX_FAULT_AT_LAUNCH");
    if (fault_at && k > fault_at) {
        log_line("launch %llu after the fault (FAKE_OPTIX_FAULT_AT_LAUNCH) result=%d", (unsigned long long)k,
                 CUDA_ERROR);
        return CUDA_ERROR;
    }
    if (fault_at == k) {
        /* The fake libcuda the process loaded: the tests put one copy under each name cudarc
         * and gasworks' probe may open, so every loaded copy gets the error. */
        int faulted = 0;
        const char *names[] = {"libcuda.so", "libcuda.so.1"};
        for (unsigned i = 0; i < sizeof names / sizeof *names; ++i) {
            void *cuda = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
            if (!cuda) continue;
            void (*fault)(int) = (void (*)(int))dlsym(cuda, "fake_cuda_fault");
            if (fault) fault(CUDA_ERROR_ILLEGAL_ADDRESS), faulted = 1;
            dlclose(cuda);
        }
        if (!faulted) {
            log_line("launch %llu cannot fault: no fake libcuda loaded", (unsigned long long)k);
            return INVALID_VALUE;
        }
        log_line("launch %llu faults (FAKE_OPTIX_FAULT_AT_LAUNCH): the context's sticky error is "
                 "CUDA_ERROR_ILLEGAL_ADDRESS", (unsigned long long)k);
        return SUCCESS;
    }
    uint64_t fail_from = env_u64("FAKE_OPTIX_FAIL_LAUNCHES_FROM");
    if (fail_from && k >= fail_from) {
        log_line("launch %llu fails (FAKE_OPTIX_FAIL_LAUNCHES_FROM) result=%d", (unsigned long long)k,
                 LAUNCH_FAILURE);
        return LAUNCH_FAILURE;
    }
    devptr raygen, miss, hit;
    unsigned miss_stride, miss_count, hit_stride, hit_count;
    memcpy(&raygen, sbt + 0, 8);
    memcpy(&miss, sbt + 16, 8);
    memcpy(&miss_stride, sbt + 24, 4);
    memcpy(&miss_count, sbt + 28, 4);
    memcpy(&hit, sbt + 32, 8);
    memcpy(&hit_stride, sbt + 40, 4);
    memcpy(&hit_count, sbt + 44, 4);
    optix_result r = SUCCESS;
    const char *why = "";
    if (!params || params_size != p->params_size) r = INVALID_VALUE, why = " (launch parameter size)";
    else if (!records_ok(raygen, 0, 1, KIND_RAYGEN)) r = INVALID_VALUE, why = " (raygen record)";
    else if (!records_ok(miss, miss_stride, miss_count, KIND_MISS)) r = INVALID_VALUE, why = " (miss records)";
    else if (!records_ok(hit, hit_stride, hit_count, KIND_HITGROUP)) r = INVALID_VALUE, why = " (hit group records)";
    else if (w == 0 || h == 0 || d == 0 || (uint64_t)w * h * d > (1ull << 30)) r = INVALID_VALUE, why = " (dimensions)";
    unsigned long long skipped = r == SUCCESS && params_size >= 296 ? fake_render(params) : 0;
    if (r == SUCCESS && params_size == 32) fake_raycast(params);
    log_line("launch stream=%p w=%u h=%u d=%u params=%zu skipped=%llu result=%d%s", stream, w, h, d, params_size,
             skipped, r, why);
    return r;
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
    t[12] = (entry)module_create;
    t[15] = (entry)module_destroy;
    t[18] = (entry)program_group_create;
    t[19] = (entry)program_group_destroy;
    t[20] = (entry)program_group_get_stack_size;
    t[21] = (entry)pipeline_create;
    t[22] = (entry)pipeline_destroy;
    t[23] = (entry)pipeline_set_stack_size;
    size_t pack = abi == 87 ? 38 : 40; /* ABI 105 put two cluster entries before it */
    t[pack] = (entry)sbt_record_pack_header;
    t[pack + 1] = (entry)launch;
    return SUCCESS;
}
