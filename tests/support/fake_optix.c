/* A stand-in for the driver's libnvoptix.so.1 for gasworks' loader tests (no GPU needed).
 * It exports optixQueryFunctionTable, accepts ABIs up to MAX_ABI, checks the table size the
 * caller passes, and fills the entries gasworks calls with stubs that reveal which slot was
 * called. Build flags: -DMAX_ABI=87|105, -DWRONG_SIZE (expect another table size),
 * -DNULL_LAUNCH (leave optixLaunch empty). Declarations are written from the ABI facts. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef MAX_ABI
#define MAX_ABI 105
#endif

typedef int optix_result;
typedef void (*entry)(void);

static const char *get_error_name(optix_result r) { (void)r; return "FAKE_UNKNOWN_CODE"; }
static const char *get_error_string(optix_result r) { (void)r; return "fake error string"; }
static optix_result not_supported(void) { return 7800; }

/* optixAccelComputeMemoryUsage: sums what each build input holds, reading the inputs at the
 * 1032-byte stride and union offset 8 of OptixBuildInput, so a layout mismatch shows. */
typedef struct { size_t output, temp, temp_update; } buffer_sizes;
static optix_result compute_memory_usage(void *ctx, const void *options, const unsigned char *inputs,
                                         unsigned int count, buffer_sizes *sizes) {
    (void)ctx; (void)options;
    size_t total = 0;
    for (unsigned int i = 0; i < count; ++i) {
        const unsigned char *in = inputs + (size_t)i * 1032;
        uint32_t type;
        memcpy(&type, in, 4);
        uint32_t n;
        if (type == 0x2141) memcpy(&n, in + 8 + 32, 4);      /* triangleArray.numIndexTriplets */
        else if (type == 0x2143) memcpy(&n, in + 8 + 8, 4);  /* instanceArray.numInstances */
        else return 7001;
        total += n;
    }
    sizes->output = total;
    sizes->temp = 128;
    sizes->temp_update = 0;
    return 0;
}

static optix_result pack_header_87(void *group, void *header) { (void)group; memcpy(header, "abi87", 6); return 0; }
static optix_result pack_header_105(void *group, void *header) { (void)group; memcpy(header, "abi105", 7); return 0; }
static optix_result launch_87(void) { return 87; }
static optix_result launch_105(void) { return 105; }

optix_result optixQueryFunctionTable(int abi, unsigned int num_options, void *keys, const void **values,
                                     void *table, size_t size) {
    (void)num_options; (void)keys; (void)values;
    if (abi != 87 && abi != 105) return 7801;
    if (abi > MAX_ABI) return 7801; /* OPTIX_ERROR_UNSUPPORTED_ABI_VERSION */
    size_t entries = abi == 87 ? 48 : 52;
#ifdef WRONG_SIZE
    entries += 1;
#endif
    if (size != entries * sizeof(void *)) return 7802; /* OPTIX_ERROR_FUNCTION_TABLE_SIZE_MISMATCH */
    entry *t = (entry *)table;
    for (size_t i = 0; i < entries; ++i) t[i] = (entry)not_supported;
    t[0] = (entry)get_error_name;
    t[1] = (entry)get_error_string;
    t[24] = (entry)compute_memory_usage;
    size_t pack = abi == 87 ? 38 : 40;
    t[pack] = abi == 87 ? (entry)pack_header_87 : (entry)pack_header_105;
    t[pack + 1] = abi == 87 ? (entry)launch_87 : (entry)launch_105;
#ifdef NULL_LAUNCH
    t[pack + 1] = 0;
#endif
    return 0;
}
