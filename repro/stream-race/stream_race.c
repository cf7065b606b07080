/*
 * stream_race: a small, self-contained reproducer of the crash gasworks meets when many
 * triangle GAS builds run at once on several CUDA streams through ONE OptiX device context
 * (docs/gas-builds.md, "Known issue"). Written for NVIDIA: one C file, no SDK headers needed,
 * no gasworks code.
 *
 * What it does, exactly as gasworks' build-bench does it in the failing configuration:
 *   - one CUDA context (the device's primary context), one OptiX device context on it;
 *   - N triangle GASes (one build input each: float3 vertices, uint3 indices, one SBT record,
 *     PREFER_FAST_TRACE), their triangle counts read from a file, one per line;
 *   - S streams (CU_STREAM_NON_BLOCKING); build b goes to stream b % S (round-robin) or, with
 *     --assign lpt, to the stream with the least triangles so far, largest build first;
 *   - ONE scratch allocation, cut into S disjoint regions, one per stream (a stream's builds
 *     run one after another on it, so they reuse it); ONE output allocation, a disjoint region
 *     per build;
 *   - the builds enqueued in build order (--order build) or largest first (--order largest),
 *     then every stream synchronised; that is one batch, repeated --repeat times.
 * On the H100 and H200 (driver 580.159.04), with the triangle counts of gasworks' 390-group
 * "sponza-like" scene at 8 streams, round-robin issued largest first crashed (
 * CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_INVALID_ADDRESS_SPACE) or hung; build order passed;
 * so did every order with CUDA_DEVICE_MAX_CONNECTIONS=1, or with an OptiX context per stream
 * (--contexts per-stream here). compute-sanitizer memcheck, racecheck and synccheck were clean.
 *
 * Build:  cc -O2 -o stream_race stream_race.c -ldl
 * Run:    ./stream_race COUNTS.txt [--streams 8] [--order largest|build] [--assign rr|lpt]
 *                       [--repeat 20] [--contexts one|per-stream]
 * Exit 0: every batch completed; 1: a CUDA or OptiX call failed (named on stderr); 2: usage or
 * setup (no GPU, no OptiX). The OptiX library is libnvoptix.so.1, or $GASWORKS_OPTIX_LIBRARY.
 *
 * The declarations below are written from the public ABI facts (function-table order, struct
 * layouts and enum values of OptiX ABI 105, the CUDA driver API's C signatures); gasworks'
 * Rust declarations of the same are checked by its tests (src/optix/sys.rs).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- CUDA driver API, loaded at run time ---------------------------------------------- */
typedef int CUresult;
typedef uint64_t CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
#define CU_STREAM_NON_BLOCKING 1u

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(int *, int);
    CUresult (*primary_ctx_retain)(CUcontext *, int);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*mem_free)(CUdeviceptr);
    CUresult (*memcpy_htod)(CUdeviceptr, const void *, size_t);
    CUresult (*get_error_name)(CUresult, const char **);
} cu;

/* ---- OptiX ABI 105 ------------------------------------------------------------------------ */
typedef int OptixResult;
typedef void *OptixDeviceContext;
typedef uint64_t OptixTraversableHandle;
#define OPTIX_ABI_VERSION 105
#define OPTIX_TABLE_ENTRIES 52 /* entries of the ABI-105 function table */
#define OPTIX_BUILD_INPUT_TYPE_TRIANGLES 0x2141u
#define OPTIX_VERTEX_FORMAT_FLOAT3 0x2121u
#define OPTIX_INDICES_FORMAT_UNSIGNED_INT3 0x2103u
#define OPTIX_GEOMETRY_FLAG_NONE 0u
#define OPTIX_BUILD_FLAG_PREFER_FAST_TRACE (1u << 2)
#define OPTIX_BUILD_OPERATION_BUILD 0x2161u
#define OPTIX_BUFFER_ALIGNMENT 128u /* OptiX's accel buffer byte alignment */

typedef struct {
    void (*log_callback)(unsigned level, const char *tag, const char *message, void *data);
    void *log_data;
    int log_level;
    unsigned validation_mode;
} ContextOptions;

typedef struct {
    const CUdeviceptr *vertex_buffers; /* host array, one per motion key */
    unsigned num_vertices;
    unsigned vertex_format;
    unsigned vertex_stride;
    CUdeviceptr index_buffer;
    unsigned num_index_triplets;
    unsigned index_format;
    unsigned index_stride;
    CUdeviceptr pre_transform;
    const unsigned *flags; /* host array, one per SBT record */
    unsigned num_sbt_records;
    CUdeviceptr sbt_index_offset_buffer;
    unsigned sbt_index_offset_size;
    unsigned sbt_index_offset_stride;
    unsigned primitive_index_offset;
    unsigned transform_format;
    uint64_t opacity_micromap[6];      /* unused: zero */
    uint64_t displacement_micromap[12]; /* unused: zero */
} TriangleArray;

typedef struct {
    unsigned type;
    union {
        TriangleArray triangles;
        uint64_t pad[128]; /* the union is 1024 bytes */
    } u;
} BuildInput;

typedef struct {
    unsigned build_flags;
    unsigned operation;
    struct {
        uint16_t num_keys, flags;
        float time_begin, time_end;
    } motion;
} AccelBuildOptions;

typedef struct {
    size_t output, temp, temp_update;
} AccelBufferSizes;

/* The sizes src/optix/sys.rs's tests assert for the same structs. */
_Static_assert(sizeof(ContextOptions) == 24, "OptixDeviceContextOptions is 24 bytes");
_Static_assert(sizeof(TriangleArray) == 240, "OptixBuildInputTriangleArray is 240 bytes");
_Static_assert(sizeof(BuildInput) == 1032, "OptixBuildInput is 1032 bytes");
_Static_assert(sizeof(AccelBuildOptions) == 20, "OptixAccelBuildOptions is 20 bytes");
_Static_assert(sizeof(AccelBufferSizes) == 24, "OptixAccelBufferSizes is 24 bytes");

typedef OptixResult (*QueryFunctionTable)(int, unsigned, void *, const void **, void *, size_t);
typedef const char *(*FnErrorName)(OptixResult);
typedef OptixResult (*FnContextCreate)(CUcontext, const ContextOptions *, OptixDeviceContext *);
typedef OptixResult (*FnContextDestroy)(OptixDeviceContext);
typedef OptixResult (*FnComputeMemoryUsage)(OptixDeviceContext, const AccelBuildOptions *, const BuildInput *,
                                            unsigned, AccelBufferSizes *);
typedef OptixResult (*FnAccelBuild)(OptixDeviceContext, CUstream, const AccelBuildOptions *, const BuildInput *,
                                    unsigned, CUdeviceptr, size_t, CUdeviceptr, size_t, OptixTraversableHandle *,
                                    const void *, unsigned);

static void *optix_table[OPTIX_TABLE_ENTRIES];
/* Their places in the ABI-105 table. */
#define OPTIX_GET_ERROR_NAME 0
#define OPTIX_DEVICE_CONTEXT_CREATE 2
#define OPTIX_DEVICE_CONTEXT_DESTROY 3
#define OPTIX_ACCEL_COMPUTE_MEMORY_USAGE 24
#define OPTIX_ACCEL_BUILD 25

/* ---- checked calls ----------------------------------------------------------------------- */
static const char *cu_name(CUresult r) {
    const char *name = NULL;
    if (cu.get_error_name && cu.get_error_name(r, &name) == 0 && name) return name;
    return "unknown CUDA error";
}

static const char *optix_name(OptixResult r) {
    FnErrorName f = (FnErrorName)optix_table[OPTIX_GET_ERROR_NAME];
    const char *name = f ? f(r) : NULL;
    return name ? name : "unknown OptiX error";
}

/* A failed call, named with its error's name (`name_of`), ends the program with status 1. */
#define CHECK(call, what, name_of)                                                                 \
    do {                                                                                           \
        int r_ = (call);                                                                           \
        if (r_ != 0) {                                                                             \
            fprintf(stderr, "stream_race: %s failed: %s (%d)\n", what, name_of(r_), r_);           \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CU_CHECK(call, what) CHECK(call, what, cu_name)
#define OPTIX_CHECK(call, what) CHECK(call, what, optix_name)

static void *need_symbol(void *lib, const char *name) {
    void *s = dlsym(lib, name);
    if (!s) {
        fprintf(stderr, "stream_race: no %s in the CUDA driver library\n", name);
        exit(2);
    }
    return s;
}

static void load_cuda(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "stream_race: no CUDA driver (libcuda.so.1): %s\n", dlerror());
        exit(2);
    }
    cu.init = (CUresult(*)(unsigned))need_symbol(lib, "cuInit");
    cu.device_get = (CUresult(*)(int *, int))need_symbol(lib, "cuDeviceGet");
    cu.primary_ctx_retain = (CUresult(*)(CUcontext *, int))need_symbol(lib, "cuDevicePrimaryCtxRetain");
    cu.ctx_set_current = (CUresult(*)(CUcontext))need_symbol(lib, "cuCtxSetCurrent");
    cu.stream_create = (CUresult(*)(CUstream *, unsigned))need_symbol(lib, "cuStreamCreate");
    cu.stream_synchronize = (CUresult(*)(CUstream))need_symbol(lib, "cuStreamSynchronize");
    cu.stream_destroy = (CUresult(*)(CUstream))need_symbol(lib, "cuStreamDestroy_v2");
    cu.mem_alloc = (CUresult(*)(CUdeviceptr *, size_t))need_symbol(lib, "cuMemAlloc_v2");
    cu.mem_free = (CUresult(*)(CUdeviceptr))need_symbol(lib, "cuMemFree_v2");
    cu.memcpy_htod = (CUresult(*)(CUdeviceptr, const void *, size_t))need_symbol(lib, "cuMemcpyHtoD_v2");
    cu.get_error_name = (CUresult(*)(CUresult, const char **))need_symbol(lib, "cuGetErrorName");
}

static void load_optix(void) {
    const char *path = getenv("GASWORKS_OPTIX_LIBRARY");
    if (!path || !*path) path = "libnvoptix.so.1";
    void *lib = dlopen(path, RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "stream_race: no OptiX library (%s): %s\n", path, dlerror());
        exit(2);
    }
    QueryFunctionTable query = (QueryFunctionTable)dlsym(lib, "optixQueryFunctionTable");
    if (!query) {
        fprintf(stderr, "stream_race: no optixQueryFunctionTable in %s\n", path);
        exit(2);
    }
    OptixResult r = query(OPTIX_ABI_VERSION, 0, NULL, NULL, optix_table, sizeof optix_table);
    if (r != 0) {
        fprintf(stderr, "stream_race: optixQueryFunctionTable(ABI %d) failed: %d (a driver older than R570?)\n",
                OPTIX_ABI_VERSION, r);
        exit(2);
    }
}

static void log_callback(unsigned level, const char *tag, const char *message, void *data) {
    (void)data;
    fprintf(stderr, "optix [%u][%s]: %s\n", level, tag, message);
}

/* ---- the batch ---------------------------------------------------------------------------- */
static size_t align_up(size_t n) { return (n + OPTIX_BUFFER_ALIGNMENT - 1) / OPTIX_BUFFER_ALIGNMENT * OPTIX_BUFFER_ALIGNMENT; }

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float next_float(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)(rng_state >> 40) / (float)(1u << 24);
}

static unsigned *counts;
static int by_size_desc(const void *a, const void *b) {
    unsigned x = counts[*(const int *)a], y = counts[*(const int *)b];
    if (x != y) return x < y ? 1 : -1;
    return *(const int *)a - *(const int *)b;
}

static void usage(void) {
    fprintf(stderr, "usage: stream_race COUNTS.txt [--streams S] [--order largest|build] [--assign rr|lpt]\n"
                    "                   [--repeat R] [--contexts one|per-stream]\n"
                    "COUNTS.txt: the triangle count of each GAS, one per line\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *counts_path = argv[1];
    int streams = 8, repeat = 20, largest_first = 1, lpt = 0, per_stream_contexts = 0;
    for (int i = 2; i < argc; ++i) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--streams") && v) streams = atoi(v), ++i;
        else if (!strcmp(argv[i], "--repeat") && v) repeat = atoi(v), ++i;
        else if (!strcmp(argv[i], "--order") && v && (!strcmp(v, "largest") || !strcmp(v, "build")))
            largest_first = !strcmp(v, "largest"), ++i;
        else if (!strcmp(argv[i], "--assign") && v && (!strcmp(v, "rr") || !strcmp(v, "lpt")))
            lpt = !strcmp(v, "lpt"), ++i;
        else if (!strcmp(argv[i], "--contexts") && v && (!strcmp(v, "one") || !strcmp(v, "per-stream")))
            per_stream_contexts = !strcmp(v, "per-stream"), ++i;
        else usage();
    }
    if (streams < 1 || streams > 256 || repeat < 1) usage();

    /* The triangle counts. */
    FILE *f = fopen(counts_path, "r");
    if (!f) {
        fprintf(stderr, "stream_race: %s: cannot open\n", counts_path);
        return 2;
    }
    int n = 0, cap = 0;
    unsigned long c, largest = 0;
    while (fscanf(f, "%lu", &c) == 1) {
        if (c == 0 || c > 100000000ul) {
            fprintf(stderr, "stream_race: %s: a triangle count of %lu\n", counts_path, c);
            return 2;
        }
        if (n == cap) counts = realloc(counts, (cap = cap ? 2 * cap : 256) * sizeof *counts);
        counts[n++] = (unsigned)c;
        if (c > largest) largest = c;
    }
    if (!feof(f) || n == 0) {
        fprintf(stderr, "stream_race: %s: expected one positive triangle count per line\n", counts_path);
        return 2;
    }
    fclose(f);

    load_cuda();
    load_optix();
    int device;
    CUcontext cuda_ctx;
    CU_CHECK(cu.init(0), "cuInit");
    CU_CHECK(cu.device_get(&device, 0), "cuDeviceGet");
    CU_CHECK(cu.primary_ctx_retain(&cuda_ctx, device), "cuDevicePrimaryCtxRetain");
    CU_CHECK(cu.ctx_set_current(cuda_ctx), "cuCtxSetCurrent");
    ContextOptions options = {log_callback, NULL, 3, 0};
    int contexts = per_stream_contexts ? streams : 1;
    OptixDeviceContext *ctx = calloc((size_t)contexts, sizeof *ctx);
    for (int i = 0; i < contexts; ++i)
        OPTIX_CHECK(((FnContextCreate)optix_table[OPTIX_DEVICE_CONTEXT_CREATE])(cuda_ctx, &options, &ctx[i]),
                    "optixDeviceContextCreate");
    CUstream *stream = calloc((size_t)streams, sizeof *stream);
    for (int s = 0; s < streams; ++s) CU_CHECK(cu.stream_create(&stream[s], CU_STREAM_NON_BLOCKING), "cuStreamCreate");

    /* Geometry: every GAS's triangles in one vertex buffer and one index buffer. */
    size_t total = 0;
    for (int b = 0; b < n; ++b) total += counts[b];
    float *vertices = malloc(total * 9 * sizeof(float));
    unsigned *indices = malloc(total * 3 * sizeof(unsigned));
    if (!vertices || !indices) {
        fprintf(stderr, "stream_race: out of host memory for %zu triangles\n", total);
        return 2;
    }
    for (size_t t = 0; t < total; ++t) {
        float cx = next_float() * 100, cy = next_float() * 100, cz = next_float() * 100;
        for (int k = 0; k < 3; ++k) {
            vertices[t * 9 + k * 3 + 0] = cx + next_float();
            vertices[t * 9 + k * 3 + 1] = cy + next_float();
            vertices[t * 9 + k * 3 + 2] = cz + next_float();
        }
    }
    CUdeviceptr d_vertices, d_indices;
    CU_CHECK(cu.mem_alloc(&d_vertices, total * 9 * sizeof(float)), "cuMemAlloc (vertices)");
    CU_CHECK(cu.mem_alloc(&d_indices, total * 3 * sizeof(unsigned)), "cuMemAlloc (indices)");
    CU_CHECK(cu.memcpy_htod(d_vertices, vertices, total * 9 * sizeof(float)), "cuMemcpyHtoD (vertices)");

    /* One build input per GAS; each GAS indexes its own triangles from 0. */
    BuildInput *inputs = calloc((size_t)n, sizeof *inputs);
    CUdeviceptr *vertex_ptr = calloc((size_t)n, sizeof *vertex_ptr);
    static const unsigned geometry_flags = OPTIX_GEOMETRY_FLAG_NONE;
    size_t first = 0;
    for (int b = 0; b < n; ++b) {
        for (unsigned i = 0; i < counts[b] * 3; ++i) indices[first * 3 + i] = i;
        vertex_ptr[b] = d_vertices + first * 9 * sizeof(float);
        TriangleArray *t = &inputs[b].u.triangles;
        inputs[b].type = OPTIX_BUILD_INPUT_TYPE_TRIANGLES;
        t->vertex_buffers = &vertex_ptr[b];
        t->num_vertices = counts[b] * 3;
        t->vertex_format = OPTIX_VERTEX_FORMAT_FLOAT3;
        t->vertex_stride = 3 * sizeof(float);
        t->index_buffer = d_indices + first * 3 * sizeof(unsigned);
        t->num_index_triplets = counts[b];
        t->index_format = OPTIX_INDICES_FORMAT_UNSIGNED_INT3;
        t->index_stride = 3 * sizeof(unsigned);
        t->flags = &geometry_flags;
        t->num_sbt_records = 1;
        first += counts[b];
    }
    CU_CHECK(cu.memcpy_htod(d_indices, indices, total * 3 * sizeof(unsigned)), "cuMemcpyHtoD (indices)");

    /* Streams, issue order, and the disjoint scratch and output regions. */
    AccelBuildOptions build_options;
    memset(&build_options, 0, sizeof build_options);
    build_options.build_flags = OPTIX_BUILD_FLAG_PREFER_FAST_TRACE;
    build_options.operation = OPTIX_BUILD_OPERATION_BUILD;
    AccelBufferSizes *sizes = calloc((size_t)n, sizeof *sizes);
    int *order = calloc((size_t)n, sizeof *order), *stream_of = calloc((size_t)n, sizeof *stream_of);
    size_t *output_at = calloc((size_t)n, sizeof *output_at);
    size_t *scratch_at = calloc((size_t)streams, sizeof *scratch_at);
    size_t *scratch_need = calloc((size_t)streams, sizeof *scratch_need);
    uint64_t *load = calloc((size_t)streams, sizeof *load);
    for (int b = 0; b < n; ++b) order[b] = b;
    qsort(order, (size_t)n, sizeof *order, by_size_desc);
    size_t outputs = 0;
    for (int b = 0; b < n; ++b) {
        OPTIX_CHECK(((FnComputeMemoryUsage)optix_table[OPTIX_ACCEL_COMPUTE_MEMORY_USAGE])(
                        ctx[0], &build_options, &inputs[b], 1, &sizes[b]),
                    "optixAccelComputeMemoryUsage");
        output_at[b] = outputs;
        outputs += align_up(sizes[b].output);
        stream_of[b] = b % streams;
    }
    if (lpt) {
        /* Largest first, each onto the stream with the fewest triangles so far. */
        for (int i = 0; i < n; ++i) {
            int b = order[i], best = 0;
            for (int s = 1; s < streams; ++s)
                if (load[s] < load[best]) best = s;
            stream_of[b] = best;
            load[best] += counts[b];
        }
    }
    if (!largest_first)
        for (int b = 0; b < n; ++b) order[b] = b;
    for (int b = 0; b < n; ++b) {
        size_t need = align_up(sizes[b].temp);
        if (need > scratch_need[stream_of[b]]) scratch_need[stream_of[b]] = need;
    }
    size_t scratch = 0;
    for (int s = 0; s < streams; ++s) scratch_at[s] = scratch, scratch += scratch_need[s];
    CUdeviceptr d_scratch, d_output;
    CU_CHECK(cu.mem_alloc(&d_scratch, scratch ? scratch : OPTIX_BUFFER_ALIGNMENT), "cuMemAlloc (scratch)");
    CU_CHECK(cu.mem_alloc(&d_output, outputs), "cuMemAlloc (outputs)");
    printf("stream_race: %d GASes, %zu triangles (largest %lu), %d streams, %s, issued %s, %d OptiX context%s; "
           "scratch %zu bytes in %d disjoint regions, outputs %zu bytes\n",
           n, total, largest, streams,
           lpt ? "lpt" : "round-robin", largest_first ? "largest first" : "in build order", contexts,
           contexts == 1 ? "" : "s", scratch, streams, outputs);
    fflush(stdout);

    /* The batches. */
    FnAccelBuild build = (FnAccelBuild)optix_table[OPTIX_ACCEL_BUILD];
    OptixTraversableHandle handle;
    for (int r = 1; r <= repeat; ++r) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < n; ++i) {
            int b = order[i], s = stream_of[b];
            char what[96];
            snprintf(what, sizeof what, "optixAccelBuild (batch %d, GAS %d, stream %d)", r, b, s);
            OPTIX_CHECK(build(ctx[per_stream_contexts ? s : 0], stream[s], &build_options, &inputs[b], 1,
                              d_scratch + scratch_at[s], scratch_need[s], d_output + output_at[b],
                              align_up(sizes[b].output), &handle, NULL, 0),
                        what);
        }
        for (int s = 0; s < streams; ++s) {
            char what[64];
            snprintf(what, sizeof what, "cuStreamSynchronize (batch %d, stream %d)", r, s);
            CU_CHECK(cu.stream_synchronize(stream[s]), what);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        printf("batch %d of %d: %.3f ms\n", r, repeat,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6);
        fflush(stdout);
    }
    for (int i = 0; i < contexts; ++i)
        OPTIX_CHECK(((FnContextDestroy)optix_table[OPTIX_DEVICE_CONTEXT_DESTROY])(ctx[i]), "optixDeviceContextDestroy");
    CU_CHECK(cu.mem_free(d_output), "cuMemFree (outputs)");
    CU_CHECK(cu.mem_free(d_scratch), "cuMemFree (scratch)");
    CU_CHECK(cu.mem_free(d_indices), "cuMemFree (indices)");
    CU_CHECK(cu.mem_free(d_vertices), "cuMemFree (vertices)");
    for (int s = 0; s < streams; ++s) CU_CHECK(cu.stream_destroy(stream[s]), "cuStreamDestroy");
    printf("stream_race: every batch completed\n");
    return 0;
}
