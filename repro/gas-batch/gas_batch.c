/*
 * gas_batch: the OptiX forum's loop for batching triangle GAS builds, in plain C, as the
 * baseline gasworks' `build-bench` is measured against on the same GPU (issue 71). No gasworks
 * code, no SDK headers.
 *
 * What it times, as the forum's program does ("Proper way of batching multiple GAS builds"):
 *   - one CUDA context (the device's primary context), one OptiX device context on it;
 *   - one triangle GAS per line of COUNTS.txt (its triangle count; gasworks writes them with
 *     `gasworks info SCENE --groups`), one build input each (float3 vertices, uint3 indices,
 *     one SBT record), built in file order, round-robin over S non-blocking streams;
 *   - one scratch slice per build: disjoint offsets in ONE scratch allocation, so that no two
 *     builds share a scratch byte; one output region per build in one output allocation;
 *   - a batch: a CUDA event recorded on stream 0, every build enqueued, every stream
 *     synchronised, a second event on stream 0; its time is the events' elapsed time;
 *   - min, median and max over --repeat batches after --warmup untimed ones, for each stream
 *     count of --streams and each flag of --flags (PREFER_FAST_TRACE, PREFER_FAST_BUILD;
 *     compaction off, as build-bench's headline runs), and the host's wall time of the
 *     enqueue loop per optixAccelBuild call (median over the repeats).
 * It also answers whether the device supports OptiX 9's cluster acceleration structures
 * (OPTIX_DEVICE_PROPERTY_CLUSTER_ACCEL); `--probe` answers that alone.
 *
 * Build:  cc -O2 -o gas_batch gas_batch.c -ldl
 * Run:    ./gas_batch COUNTS.txt [--streams 1,2,4,8,16] [--flags fast-trace,fast-build]
 *                     [--repeat 100] [--warmup 3]
 *         ./gas_batch --probe
 * Exit 0: done; 1: a CUDA or OptiX call failed (named on stderr); 2: usage or setup (no GPU,
 * no OptiX). The OptiX library is libnvoptix.so.1, or $GASWORKS_OPTIX_LIBRARY.
 *
 * The declarations are written from public ABI facts (function-table order, struct layouts and
 * enum values of OptiX ABI 105, the CUDA driver API's C signatures), as in
 * repro/stream-race/stream_race.c; gasworks' Rust declarations of the same are checked by its
 * tests (src/optix/sys.rs).
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
typedef void *CUevent;
#define CU_STREAM_NON_BLOCKING 1u
#define CU_EVENT_DEFAULT 0u

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(int *, int);
    CUresult (*device_get_name)(char *, int, int);
    CUresult (*primary_ctx_retain)(CUcontext *, int);
    CUresult (*ctx_set_current)(CUcontext);
    CUresult (*stream_create)(CUstream *, unsigned);
    CUresult (*stream_synchronize)(CUstream);
    CUresult (*stream_destroy)(CUstream);
    CUresult (*event_create)(CUevent *, unsigned);
    CUresult (*event_record)(CUevent, CUstream);
    CUresult (*event_synchronize)(CUevent);
    CUresult (*event_elapsed)(float *, CUevent, CUevent);
    CUresult (*event_destroy)(CUevent);
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
#define OPTIX_GEOMETRY_FLAG_DISABLE_ANYHIT 1u /* gasworks' flag for groups without cut-outs */
#define OPTIX_BUILD_FLAG_PREFER_FAST_TRACE (1u << 2)
#define OPTIX_BUILD_FLAG_PREFER_FAST_BUILD (1u << 3)
#define OPTIX_BUILD_OPERATION_BUILD 0x2161u
#define OPTIX_BUFFER_ALIGNMENT 128u /* OptiX's accel buffer byte alignment */
/* optixDeviceContextGetProperty's property for cluster acceleration structure builds (a
 * 4-byte value: 0 none, bit 0 OPTIX_DEVICE_PROPERTY_CLUSTER_ACCEL_FLAG_STANDARD). */
#define OPTIX_DEVICE_PROPERTY_CLUSTER_ACCEL 0x2020

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
typedef OptixResult (*FnContextGetProperty)(OptixDeviceContext, int, void *, size_t);
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
#define OPTIX_DEVICE_CONTEXT_GET_PROPERTY 4
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
            fprintf(stderr, "gas_batch: %s failed: %s (%d)\n", what, name_of(r_), r_);             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CU_CHECK(call, what) CHECK(call, what, cu_name)
#define OPTIX_CHECK(call, what) CHECK(call, what, optix_name)

/* A symbol of the CUDA driver library: the first of `names` (NULL-terminated) it has. */
static void *need_symbol(void *lib, const char *const *names) {
    for (; *names; ++names) {
        void *s = dlsym(lib, *names);
        if (s) return s;
    }
    fprintf(stderr, "gas_batch: no %s in the CUDA driver library\n", names[-1]);
    exit(2);
}
#define SYM(...) need_symbol(lib, (const char *const[]){__VA_ARGS__, NULL})

static void load_cuda(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "gas_batch: no CUDA driver (libcuda.so.1): %s\n", dlerror());
        exit(2);
    }
    *(void **)&cu.init = SYM("cuInit");
    *(void **)&cu.device_get = SYM("cuDeviceGet");
    *(void **)&cu.device_get_name = SYM("cuDeviceGetName");
    *(void **)&cu.primary_ctx_retain = SYM("cuDevicePrimaryCtxRetain");
    *(void **)&cu.ctx_set_current = SYM("cuCtxSetCurrent");
    *(void **)&cu.stream_create = SYM("cuStreamCreate");
    *(void **)&cu.stream_synchronize = SYM("cuStreamSynchronize");
    *(void **)&cu.stream_destroy = SYM("cuStreamDestroy_v2");
    *(void **)&cu.event_create = SYM("cuEventCreate");
    *(void **)&cu.event_record = SYM("cuEventRecord");
    *(void **)&cu.event_synchronize = SYM("cuEventSynchronize");
    /* CUDA 13's name first; older drivers have only the first version (same signature). */
    *(void **)&cu.event_elapsed = SYM("cuEventElapsedTime_v2", "cuEventElapsedTime");
    *(void **)&cu.event_destroy = SYM("cuEventDestroy_v2");
    *(void **)&cu.mem_alloc = SYM("cuMemAlloc_v2");
    *(void **)&cu.mem_free = SYM("cuMemFree_v2");
    *(void **)&cu.memcpy_htod = SYM("cuMemcpyHtoD_v2");
    *(void **)&cu.get_error_name = SYM("cuGetErrorName");
}

static void load_optix(void) {
    const char *path = getenv("GASWORKS_OPTIX_LIBRARY");
    if (!path || !*path) path = "libnvoptix.so.1";
    void *lib = dlopen(path, RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "gas_batch: no OptiX library (%s): %s\n", path, dlerror());
        exit(2);
    }
    QueryFunctionTable query = (QueryFunctionTable)dlsym(lib, "optixQueryFunctionTable");
    if (!query) {
        fprintf(stderr, "gas_batch: no optixQueryFunctionTable in %s\n", path);
        exit(2);
    }
    OptixResult r = query(OPTIX_ABI_VERSION, 0, NULL, NULL, optix_table, sizeof optix_table);
    if (r != 0) {
        fprintf(stderr, "gas_batch: optixQueryFunctionTable(ABI %d) failed: %d (a driver older than R570?)\n",
                OPTIX_ABI_VERSION, r);
        exit(2);
    }
}

static void log_callback(unsigned level, const char *tag, const char *message, void *data) {
    (void)data;
    fprintf(stderr, "optix [%u][%s]: %s\n", level, tag, message);
}

/* ---- setup --------------------------------------------------------------------------------- */
static CUcontext cuda_ctx;
static OptixDeviceContext optix_ctx;

/* The CUDA context, the OptiX context on it, and the device's name. */
static void open_device(char *name, int len) {
    int device;
    load_cuda();
    load_optix();
    CU_CHECK(cu.init(0), "cuInit");
    CU_CHECK(cu.device_get(&device, 0), "cuDeviceGet");
    CU_CHECK(cu.device_get_name(name, len, device), "cuDeviceGetName");
    CU_CHECK(cu.primary_ctx_retain(&cuda_ctx, device), "cuDevicePrimaryCtxRetain");
    CU_CHECK(cu.ctx_set_current(cuda_ctx), "cuCtxSetCurrent");
    ContextOptions options = {log_callback, NULL, 3, 0};
    OPTIX_CHECK(((FnContextCreate)optix_table[OPTIX_DEVICE_CONTEXT_CREATE])(cuda_ctx, &options, &optix_ctx),
                "optixDeviceContextCreate");
}

/* One line: does the device build cluster acceleration structures? A driver that does not
 * know the property (older than OptiX 9) says so by refusing it. */
static void probe_clusters(const char *device) {
    unsigned value = 0;
    OptixResult r = ((FnContextGetProperty)optix_table[OPTIX_DEVICE_CONTEXT_GET_PROPERTY])(
        optix_ctx, OPTIX_DEVICE_PROPERTY_CLUSTER_ACCEL, &value, sizeof value);
    if (r != 0)
        printf("cluster acceleration structures on %s: unknown (optixDeviceContextGetProperty("
               "OPTIX_DEVICE_PROPERTY_CLUSTER_ACCEL) failed: %s)\n",
               device, optix_name(r));
    else
        printf("cluster acceleration structures on %s: %s (OPTIX_DEVICE_PROPERTY_CLUSTER_ACCEL = %#x)\n", device,
               (value & 1u) ? "supported" : "not supported", value);
    fflush(stdout);
}

/* The triangle counts, one positive number per line; their number. */
static unsigned *read_counts(const char *path, int *n_out) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gas_batch: %s: cannot open\n", path);
        exit(2);
    }
    unsigned *counts = NULL;
    int n = 0, cap = 0;
    unsigned long c;
    while (fscanf(f, "%lu", &c) == 1) {
        if (c == 0 || c > 100000000ul) {
            fprintf(stderr, "gas_batch: %s: a triangle count of %lu\n", path, c);
            exit(2);
        }
        if (n == cap) counts = realloc(counts, (size_t)(cap = cap ? 2 * cap : 256) * sizeof *counts);
        counts[n++] = (unsigned)c;
    }
    if (!feof(f) || n == 0) {
        fprintf(stderr, "gas_batch: %s: expected one positive triangle count per line\n", path);
        exit(2);
    }
    fclose(f);
    *n_out = n;
    return counts;
}

/* ---- geometry ------------------------------------------------------------------------------ */
/* Build b's mesh: a grid of quads, two triangles each, `w` quads wide, with shared vertices,
 * as a modelled surface has them (about half a vertex per triangle), at height b. */
typedef struct {
    unsigned w, vertices;
} Grid;

static Grid grid_of(unsigned triangles) {
    unsigned quads = (triangles + 1) / 2, w = 1;
    while ((unsigned long)w * w < quads) ++w;
    unsigned rows = (quads + w - 1) / w;
    Grid g = {w, (w + 1) * (rows + 1)};
    return g;
}

static void fill_grid(unsigned triangles, int b, float *v, unsigned *idx) {
    Grid g = grid_of(triangles);
    for (unsigned i = 0; i < g.vertices; ++i) {
        v[3 * i + 0] = (float)(i % (g.w + 1));
        v[3 * i + 1] = (float)(i / (g.w + 1));
        v[3 * i + 2] = (float)b + 0.25f * (float)((i * 2654435761u) >> 28) / 16.0f;
    }
    for (unsigned t = 0; t < triangles; ++t) {
        unsigned q = t / 2, x = q % g.w, y = q / g.w;
        unsigned a = y * (g.w + 1) + x, c = a + g.w + 1;
        unsigned tri[2][3] = {{a, a + 1, c}, {a + 1, c + 1, c}};
        memcpy(&idx[3 * t], tri[t % 2], sizeof tri[0]);
    }
}

static CUdeviceptr geometry[2]; /* the vertex and index buffers */

/* Every build's vertices and indices uploaded into two device buffers, and one build input per
 * build pointing into them. */
static BuildInput *upload_inputs(const unsigned *counts, int n) {
    static const unsigned geometry_flags = OPTIX_GEOMETRY_FLAG_DISABLE_ANYHIT;
    size_t vertices = 0, triangles = 0;
    for (int b = 0; b < n; ++b) vertices += grid_of(counts[b]).vertices, triangles += counts[b];
    float *v = malloc(vertices * 3 * sizeof *v);
    unsigned *idx = malloc(triangles * 3 * sizeof *idx);
    BuildInput *inputs = calloc((size_t)n, sizeof *inputs);
    CUdeviceptr *vertex_ptr = calloc((size_t)n, sizeof *vertex_ptr), d_v, d_idx;
    if (!v || !idx || !inputs || !vertex_ptr) {
        fprintf(stderr, "gas_batch: out of host memory for %zu triangles\n", triangles);
        exit(2);
    }
    CU_CHECK(cu.mem_alloc(&d_v, vertices * 3 * sizeof *v), "cuMemAlloc (vertices)");
    CU_CHECK(cu.mem_alloc(&d_idx, triangles * 3 * sizeof *idx), "cuMemAlloc (indices)");
    size_t v0 = 0, t0 = 0;
    for (int b = 0; b < n; ++b) {
        Grid g = grid_of(counts[b]);
        fill_grid(counts[b], b, &v[3 * v0], &idx[3 * t0]);
        vertex_ptr[b] = d_v + v0 * 3 * sizeof *v;
        TriangleArray *t = &inputs[b].u.triangles;
        inputs[b].type = OPTIX_BUILD_INPUT_TYPE_TRIANGLES;
        t->vertex_buffers = &vertex_ptr[b];
        t->num_vertices = g.vertices;
        t->vertex_format = OPTIX_VERTEX_FORMAT_FLOAT3;
        t->vertex_stride = 3 * sizeof(float);
        t->index_buffer = d_idx + t0 * 3 * sizeof *idx;
        t->num_index_triplets = counts[b];
        t->index_format = OPTIX_INDICES_FORMAT_UNSIGNED_INT3;
        t->index_stride = 3 * sizeof(unsigned);
        t->flags = &geometry_flags;
        t->num_sbt_records = 1;
        v0 += g.vertices, t0 += counts[b];
    }
    CU_CHECK(cu.memcpy_htod(d_v, v, vertices * 3 * sizeof *v), "cuMemcpyHtoD (vertices)");
    CU_CHECK(cu.memcpy_htod(d_idx, idx, triangles * 3 * sizeof *idx), "cuMemcpyHtoD (indices)");
    free(v);
    free(idx);
    geometry[0] = d_v, geometry[1] = d_idx;
    return inputs;
}

/* ---- the batches --------------------------------------------------------------------------- */
static size_t align_up(size_t n) { return (n + OPTIX_BUFFER_ALIGNMENT - 1) / OPTIX_BUFFER_ALIGNMENT * OPTIX_BUFFER_ALIGNMENT; }

/* Every build's scratch slice and output region, disjoint, in one allocation each. */
typedef struct {
    int n;
    const BuildInput *inputs;
    AccelBuildOptions options;
    size_t *scratch_at, *scratch_len, *output_at, *output_len;
    size_t scratch_bytes, output_bytes;
    CUdeviceptr scratch, output;
} Layout;

static Layout lay_out(const BuildInput *inputs, int n, unsigned build_flags) {
    Layout l = {.n = n, .inputs = inputs};
    l.options.build_flags = build_flags;
    l.options.operation = OPTIX_BUILD_OPERATION_BUILD;
    l.scratch_at = calloc((size_t)n, sizeof(size_t)), l.scratch_len = calloc((size_t)n, sizeof(size_t));
    l.output_at = calloc((size_t)n, sizeof(size_t)), l.output_len = calloc((size_t)n, sizeof(size_t));
    for (int b = 0; b < n; ++b) {
        AccelBufferSizes s;
        OPTIX_CHECK(((FnComputeMemoryUsage)optix_table[OPTIX_ACCEL_COMPUTE_MEMORY_USAGE])(optix_ctx, &l.options,
                                                                                        &inputs[b], 1, &s),
                    "optixAccelComputeMemoryUsage");
        l.scratch_at[b] = l.scratch_bytes, l.scratch_len[b] = align_up(s.temp), l.scratch_bytes += l.scratch_len[b];
        l.output_at[b] = l.output_bytes, l.output_len[b] = align_up(s.output), l.output_bytes += l.output_len[b];
    }
    CU_CHECK(cu.mem_alloc(&l.scratch, l.scratch_bytes), "cuMemAlloc (scratch)");
    CU_CHECK(cu.mem_alloc(&l.output, l.output_bytes), "cuMemAlloc (outputs)");
    return l;
}

static void free_layout(Layout *l) {
    CU_CHECK(cu.mem_free(l->scratch), "cuMemFree (scratch)");
    CU_CHECK(cu.mem_free(l->output), "cuMemFree (outputs)");
    free(l->scratch_at), free(l->scratch_len), free(l->output_at), free(l->output_len);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* One batch as the forum times it: an event on stream 0, the builds round-robin from stream
 * 0, every stream synchronised, an event on stream 0. Its GPU time; the host's time in the
 * enqueue loop into *host_ms. */
static float one_batch(const Layout *l, CUstream *stream, int streams, CUevent ev[2], double *host_ms) {
    FnAccelBuild build = (FnAccelBuild)optix_table[OPTIX_ACCEL_BUILD];
    OptixTraversableHandle handle;
    char what[96];
    CU_CHECK(cu.event_record(ev[0], stream[0]), "cuEventRecord (start)");
    double t0 = now_ms();
    for (int b = 0, s = 0; b < l->n; ++b, s = (s + 1) % streams) {
        snprintf(what, sizeof what, "optixAccelBuild (GAS %d, stream %d)", b, s);
        OPTIX_CHECK(build(optix_ctx, stream[s], &l->options, &l->inputs[b], 1, l->scratch + l->scratch_at[b],
                          l->scratch_len[b], l->output + l->output_at[b], l->output_len[b], &handle, NULL, 0),
                    what);
    }
    *host_ms = now_ms() - t0;
    for (int s = 0; s < streams; ++s) CU_CHECK(cu.stream_synchronize(stream[s]), "cuStreamSynchronize");
    CU_CHECK(cu.event_record(ev[1], stream[0]), "cuEventRecord (stop)");
    CU_CHECK(cu.event_synchronize(ev[1]), "cuEventSynchronize");
    float ms = 0;
    CU_CHECK(cu.event_elapsed(&ms, ev[0], ev[1]), "cuEventElapsedTime");
    return ms;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One configuration: `warmup` untimed batches, then `repeat` timed ones; one line. */
static void time_config(const Layout *l, const char *flags, int streams, int warmup, int repeat) {
    CUstream *stream = calloc((size_t)streams, sizeof *stream);
    CUevent ev[2];
    for (int s = 0; s < streams; ++s) CU_CHECK(cu.stream_create(&stream[s], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    for (int i = 0; i < 2; ++i) CU_CHECK(cu.event_create(&ev[i], CU_EVENT_DEFAULT), "cuEventCreate");
    double *gpu = calloc((size_t)repeat, sizeof *gpu), *host = calloc((size_t)repeat, sizeof *host), ignored;
    for (int r = 0; r < warmup; ++r) one_batch(l, stream, streams, ev, &ignored);
    for (int r = 0; r < repeat; ++r) gpu[r] = one_batch(l, stream, streams, ev, &host[r]);
    double host_median = median(host, repeat), gpu_median = median(gpu, repeat);
    printf("%2d streams | %s | %d GASes | min %.3f median %.3f max %.3f ms | host enqueue median %.3f ms (%.1f us per "
           "optixAccelBuild) | scratch %.2f MiB, output %.2f MiB\n",
           streams, flags, l->n, gpu[0], gpu_median, gpu[repeat - 1], host_median, 1e3 * host_median / l->n,
           (double)l->scratch_bytes / 1048576.0, (double)l->output_bytes / 1048576.0);
    fflush(stdout);
    for (int i = 0; i < 2; ++i) CU_CHECK(cu.event_destroy(ev[i]), "cuEventDestroy");
    for (int s = 0; s < streams; ++s) CU_CHECK(cu.stream_destroy(stream[s]), "cuStreamDestroy");
    free(stream), free(gpu), free(host);
}

/* ---- the command line ---------------------------------------------------------------------- */
static void usage(void) {
    fprintf(stderr, "usage: gas_batch COUNTS.txt [--streams 1,2,4,8,16] [--flags fast-trace,fast-build]\n"
                    "                 [--repeat 100] [--warmup 3]\n"
                    "       gas_batch --probe\n"
                    "COUNTS.txt: the triangle count of each GAS, one per line\n");
    exit(2);
}

typedef struct {
    const char *counts;
    int streams[16], n_streams, fast_trace, fast_build, repeat, warmup, probe;
} Args;

/* A comma-separated list of stream counts, each 1 to 256. */
static int parse_streams(const char *v, int *out) {
    int n = 0;
    for (const char *p = v; *p && n < 16; ++n) {
        char *end;
        long s = strtol(p, &end, 10);
        if (end == p || s < 1 || s > 256 || (*end && *end != ',')) return 0;
        out[n] = (int)s;
        p = *end ? end + 1 : end;
    }
    return n;
}

static Args parse_args(int argc, char **argv) {
    Args a = {.streams = {1, 2, 4, 8, 16}, .n_streams = 5, .fast_trace = 1, .fast_build = 1, .repeat = 100,
              .warmup = 3};
    for (int i = 1; i < argc; ++i) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--probe")) a.probe = 1;
        else if (!strcmp(argv[i], "--streams") && v && (a.n_streams = parse_streams(v, a.streams)) > 0) ++i;
        else if (!strcmp(argv[i], "--repeat") && v) a.repeat = atoi(v), ++i;
        else if (!strcmp(argv[i], "--warmup") && v) a.warmup = atoi(v), ++i;
        else if (!strcmp(argv[i], "--flags") && v) {
            a.fast_trace = strstr(v, "fast-trace") != NULL, a.fast_build = strstr(v, "fast-build") != NULL, ++i;
            if (!a.fast_trace && !a.fast_build) usage();
        } else if (argv[i][0] != '-' && !a.counts) a.counts = argv[i];
        else usage();
    }
    if ((!a.counts && !a.probe) || a.repeat < 1 || a.warmup < 0) usage();
    return a;
}

/* Every configuration of `a`, each flag's builds laid out once. */
static void run_batches(const Args *a, const unsigned *counts, int n, const char *device) {
    unsigned long long total = 0, largest = 0;
    for (int b = 0; b < n; ++b) total += counts[b], largest = counts[b] > largest ? counts[b] : largest;
    const char *connections = getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    printf("gas_batch: %d GASes, %llu triangles (largest %llu), round-robin in file order, a scratch slice per "
           "build; %s; %d repeats after %d warm-up; CUDA_DEVICE_MAX_CONNECTIONS=%s\n",
           n, total, largest, device, a->repeat, a->warmup, connections ? connections : "unset");
    fflush(stdout);
    BuildInput *inputs = upload_inputs(counts, n);
    const char *names[2] = {"fast-trace", "fast-build"};
    const unsigned flags[2] = {OPTIX_BUILD_FLAG_PREFER_FAST_TRACE, OPTIX_BUILD_FLAG_PREFER_FAST_BUILD};
    const int wanted[2] = {a->fast_trace, a->fast_build};
    for (int f = 0; f < 2; ++f) {
        if (!wanted[f]) continue;
        Layout l = lay_out(inputs, n, flags[f]);
        for (int i = 0; i < a->n_streams; ++i) time_config(&l, names[f], a->streams[i], a->warmup, a->repeat);
        free_layout(&l);
    }
    for (int i = 0; i < 2; ++i) CU_CHECK(cu.mem_free(geometry[i]), "cuMemFree (geometry)");
    free(inputs);
}

int main(int argc, char **argv) {
    Args a = parse_args(argc, argv);
    int n = 0;
    unsigned *counts = a.counts ? read_counts(a.counts, &n) : NULL;
    char device[256] = "";
    open_device(device, sizeof device);
    probe_clusters(device);
    if (counts) run_batches(&a, counts, n, device);
    OPTIX_CHECK(((FnContextDestroy)optix_table[OPTIX_DEVICE_CONTEXT_DESTROY])(optix_ctx), "optixDeviceContextDestroy");
    return 0;
}
