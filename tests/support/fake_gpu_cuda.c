/* A stand-in for libcuda.so.1 with one working "GPU" (or more, below) whose memory is host memory, for running
 * gasworks' GPU host code (GAS batches, build-bench, the watchdog) on a machine without a GPU;
 * its partner is fake_gpu_optix.c. Every call completes at once: a stream is a name, an event
 * a time stamp taken when it is recorded, a copy a memcpy. Device pointers are host pointers,
 * so the OptiX stand-in can write where a build's buffers lie and read what others wrote.
 * FAKE_CUDA_MEMORY=BYTES makes the device that small (allocations past it fail with
 * CUDA_ERROR_OUT_OF_MEMORY). fake_cuda_fault(CODE), which the OptiX stand-in calls for
 * FAKE_OPTIX_FAULT_AT_LAUNCH, gives the context a sticky error, as a kernel's illegal address
 * does: from then on every call that works in the context returns CODE (frees and destroys
 * still release what they name, so that the counts at exit stay true, but return it too).
 * FAKE_CUDA_DEVICES=N (1 to 8; default 1) makes N alike "GPUs", each with its own primary
 * context, for the host's multi-GPU paths; they share the one host memory (FAKE_CUDA_MEMORY
 * counts them together); a fault's sticky error is the faulting thread's current device's.
 * Declarations are written from the CUDA driver API's documented signatures. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum { OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_DEVICE = 101, ILLEGAL_ADDRESS = 700 };


/* The memory the "GPU" reports (cuMemGetInfo, cuDeviceTotalMem). */
#define TOTAL_MEMORY ((size_t)16 << 30)

/* Each device's primary context: its address is the context handle. */
#define MAX_DEVICES 8
static int primary_contexts[MAX_DEVICES];

/* FAKE_CUDA_DEVICES, clamped to 1..MAX_DEVICES. */
static int device_count(void) {
    const char *text = getenv("FAKE_CUDA_DEVICES");
    int n = text ? atoi(text) : 1;
    return n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : n;
}

static __thread void *current;

/* The device of the calling thread's current context (0 without one). */
static int current_device(void) {
    int *ctx = current;
    return ctx >= primary_contexts && ctx < primary_contexts + MAX_DEVICES
               ? (int)(ctx - primary_contexts)
               : 0;
}

/* Each device's context's sticky error (0: none); see fake_cuda_fault. A call sees the one of
 * the device whose context is current on its thread, as gasworks binds a GPU's context to
 * every thread that works on it. */
static int sticky[MAX_DEVICES];

__attribute__((visibility("default"))) void fake_cuda_fault(int code) {
    __atomic_store_n(&sticky[current_device()], code, __ATOMIC_SEQ_CST);
}

/* Returns the sticky error from the calling function, when there is one. */
#define RETURN_IF_STICKY()                                                          \
    do {                                                                            \
        int sticky_ = __atomic_load_n(&sticky[current_device()], __ATOMIC_SEQ_CST); \
        if (sticky_) return sticky_;                                                \
    } while (0)
#define STICKY_OR_OK() (__atomic_load_n(&sticky[current_device()], __ATOMIC_SEQ_CST))
/* What is alive: allocations, streams, events. At exit (a normal one: _exit skips this) the
 * counts are appended to FAKE_GPU_LOG, so that a test can find what the host never freed. */
static long live_allocations, live_streams, live_events;
static long long live_bytes;

static void count(long *n, int delta) { __atomic_add_fetch(n, delta, __ATOMIC_SEQ_CST); }

__attribute__((destructor)) static void report_live(void) {
    const char *path = getenv("FAKE_GPU_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "exit: live allocations=%ld bytes=%lld streams=%ld events=%ld\n", live_allocations,
            live_bytes, live_streams, live_events);
    fclose(f);
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

CUresult cuInit(unsigned int flags) { (void)flags; return OK; }
CUresult cuDriverGetVersion(int *version) { *version = 13000; return OK; }
CUresult cuDeviceGetCount(int *count) { *count = device_count(); return OK; }
CUresult cuDeviceGet(int *device, int ordinal) {
    *device = ordinal;
    return ordinal >= 0 && ordinal < device_count() ? OK : INVALID_DEVICE;
}
CUresult cuDeviceGetName(char *name, int len, int device) {
    (void)device;
    if (len > 0) {
        strncpy(name, "Fake GPU (host memory)", (size_t)len);
        name[len - 1] = '\0';
    }
    return OK;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int device) { (void)device; *bytes = TOTAL_MEMORY; return OK; }
CUresult cuDeviceGetAttribute(int *value, int attribute, int device) {
    (void)device;
    switch (attribute) {
    case 75: *value = 9; break;    /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *value = 0; break;    /* COMPUTE_CAPABILITY_MINOR */
    case 16: *value = 4; break;    /* MULTIPROCESSOR_COUNT */
    case 39: *value = 2048; break; /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 115: *value = 0; break;   /* MEMORY_POOLS_SUPPORTED: no stream-ordered allocations */
    default: *value = 1; break;
    }
    return OK;
}

CUresult cuDevicePrimaryCtxRetain(void **ctx, int device) {
    if (device < 0 || device >= device_count()) return INVALID_DEVICE;
    *ctx = &primary_contexts[device];
    return OK;
}
CUresult cuDevicePrimaryCtxRelease_v2(int device) { (void)device; return OK; }
CUresult cuCtxSetCurrent(void *ctx) { current = ctx; return OK; }
CUresult cuCtxGetCurrent(void **ctx) { *ctx = current; return OK; }
CUresult cuCtxPushCurrent_v2(void *ctx) { current = ctx; return OK; }
CUresult cuCtxPopCurrent_v2(void **ctx) { if (ctx) *ctx = current; return OK; }
CUresult cuCtxGetDevice(int *device) { *device = current_device(); return OK; }
CUresult cuCtxSynchronize(void) { return STICKY_OR_OK(); }

CUresult cuGetErrorName(CUresult error, const char **name) {
    switch (error) {
    case OK: *name = "CUDA_SUCCESS"; break;
    case INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case OUT_OF_MEMORY: *name = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case ILLEGAL_ADDRESS: *name = "CUDA_ERROR_ILLEGAL_ADDRESS"; break;
    default: *name = "CUDA_ERROR_UNKNOWN"; break;
    }
    return OK;
}
CUresult cuGetErrorString(CUresult error, const char **text) { return cuGetErrorName(error, text); }

/* The device's size (FAKE_CUDA_MEMORY, else TOTAL_MEMORY). */
static long long memory_size(void) {
    const char *text = getenv("FAKE_CUDA_MEMORY");
    return text ? atoll(text) : (long long)TOTAL_MEMORY;
}
/* Memory: 256-byte aligned, as cuMemAlloc's is at least. */
CUresult cuMemAlloc_v2(CUdeviceptr *ptr, size_t bytes) {
    void *p = NULL;
    RETURN_IF_STICKY();
    if (bytes == 0) return INVALID_VALUE;
    /* FAKE_CUDA_MEMORY=BYTES: a smaller GPU, whose allocations fail past it. */
    if ((long long)bytes > memory_size() - __atomic_load_n(&live_bytes, __ATOMIC_SEQ_CST)) return OUT_OF_MEMORY;
    /* A size word before the block, so that cuMemFree can count the bytes freed. */
    if (posix_memalign(&p, 256, ((bytes + 255) & ~(size_t)255) + 256) != 0) return OUT_OF_MEMORY;
    *(size_t *)p = bytes;
    *ptr = (CUdeviceptr)(uintptr_t)p + 256;
    count(&live_allocations, 1);
    __atomic_add_fetch(&live_bytes, (long long)bytes, __ATOMIC_SEQ_CST);
    return OK;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) {
    if (!ptr) return INVALID_VALUE;
    void *p = (void *)(uintptr_t)(ptr - 256);
    count(&live_allocations, -1);
    __atomic_sub_fetch(&live_bytes, (long long)*(size_t *)p, __ATOMIC_SEQ_CST);
    free(p);
    return STICKY_OR_OK();
}
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    long long size = memory_size();
    long long used = __atomic_load_n(&live_bytes, __ATOMIC_SEQ_CST);
    *free_bytes = (size_t)(size > used ? size - used : 0);
    *total = (size_t)size;
    return OK;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *stream) {
    (void)stream;
    RETURN_IF_STICKY();
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *stream) {
    (void)stream;
    RETURN_IF_STICKY();
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *stream) {
    (void)stream;
    RETURN_IF_STICKY();
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { return cuMemcpyHtoDAsync_v2(dst, src, n, 0); }
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { return cuMemcpyDtoHAsync_v2(dst, src, n, 0); }
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, void *stream) {
    (void)stream;
    RETURN_IF_STICKY();
    memset((void *)(uintptr_t)dst, value, n);
    return OK;
}
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t n) { return cuMemsetD8Async(dst, value, n, 0); }

/* Streams: everything on them is done when it is enqueued. */
CUresult cuStreamCreate(void **stream, unsigned int flags) {
    (void)flags;
    RETURN_IF_STICKY();
    *stream = malloc(1);
    if (!*stream) return OUT_OF_MEMORY;
    count(&live_streams, 1);
    return OK;
}
CUresult cuStreamCreateWithPriority(void **stream, unsigned int flags, int priority) {
    (void)priority;
    return cuStreamCreate(stream, flags);
}
CUresult cuStreamDestroy_v2(void *stream) { count(&live_streams, -1); free(stream); return STICKY_OR_OK(); }
CUresult cuStreamSynchronize(void *stream) { (void)stream; return STICKY_OR_OK(); }
CUresult cuStreamQuery(void *stream) { (void)stream; return STICKY_OR_OK(); }
CUresult cuStreamWaitEvent(void *stream, void *event, unsigned int flags) {
    (void)stream; (void)event; (void)flags;
    return STICKY_OR_OK();
}

/* Events: the time they were recorded. */
CUresult cuEventCreate(void **event, unsigned int flags) {
    (void)flags;
    RETURN_IF_STICKY();
    double *e = malloc(sizeof *e);
    if (!e) return OUT_OF_MEMORY;
    *e = now_ms();
    *event = e;
    count(&live_events, 1);
    return OK;
}
CUresult cuEventDestroy_v2(void *event) { count(&live_events, -1); free(event); return STICKY_OR_OK(); }
CUresult cuEventRecord(void *event, void *stream) {
    (void)stream;
    RETURN_IF_STICKY();
    *(double *)event = now_ms();
    return OK;
}
CUresult cuEventRecordWithFlags(void *event, void *stream, unsigned int flags) {
    (void)flags;
    return cuEventRecord(event, stream);
}
CUresult cuEventQuery(void *event) { (void)event; return STICKY_OR_OK(); }
CUresult cuEventSynchronize(void *event) { (void)event; return STICKY_OR_OK(); }
CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
    *ms = (float)(*(double *)end - *(double *)start);
    return OK;
}
CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) { return cuEventElapsedTime(ms, start, end); }

/* Modules and kernels: only gasworks' fault on purpose (GASWORKS_FAULT_AT_TILE), a kernel named
 * gasworks_fault that stores to address 0. Its launch gives the context the sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS (returned by the next call, as the device's fault would be); any
 * other module or kernel is refused. */
enum { INVALID_IMAGE = 200, NOT_FOUND = 500 };
static char fault_kernel; /* its address is the kernel handle */
static int fault_module;  /* its address is the module handle */
CUresult cuModuleLoadData(void **module, const void *image) {
    RETURN_IF_STICKY();
    if (!image || !strstr((const char *)image, ".entry gasworks_fault(")) return INVALID_IMAGE;
    *module = &fault_module;
    return OK;
}
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
    RETURN_IF_STICKY();
    if (module != &fault_module || strcmp(name, "gasworks_fault") != 0) return NOT_FOUND;
    *function = &fault_kernel;
    return OK;
}
CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared_bytes, void *stream, void **params, void **extra) {
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared_bytes; (void)stream;
    (void)params; (void)extra;
    RETURN_IF_STICKY();
    if (f != &fault_kernel) return INVALID_VALUE;
    fake_cuda_fault(ILLEGAL_ADDRESS);
    return OK;
}
CUresult cuModuleUnload(void *module) { (void)module; return STICKY_OR_OK(); }
