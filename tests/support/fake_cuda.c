/* A stand-in for libcuda.so.1 on a machine whose driver has no usable GPU: cuInit fails with
 * CUDA_ERROR_NO_DEVICE (100), or with -DZERO_DEVICES succeeds and reports no devices, or with
 * -DONE_DEVICE reports one device ("Fake GPU") that can be listed but never opened: making its
 * context fails with CUDA_ERROR_NOT_SUPPORTED (801), as a GPU taken by another process in
 * exclusive mode would refuse one. */
#include <stddef.h>
#include <string.h>

int cuInit(unsigned int flags) {
    (void)flags;
#if defined(ZERO_DEVICES) || defined(ONE_DEVICE)
    return 0;
#else
    return 100;
#endif
}
int cuDeviceGetCount(int *count) {
#ifdef ONE_DEVICE
    *count = 1;
#else
    *count = 0;
#endif
    return 0;
}
#ifdef ONE_DEVICE
int cuDriverGetVersion(int *version) { *version = 13000; return 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return ordinal == 0 ? 0 : 101; }
int cuDeviceGetName(char *name, int len, int device) {
    (void)device;
    if (len > 0) {
        strncpy(name, "Fake GPU", (size_t)len);
        name[len - 1] = '\0';
    }
    return 0;
}
int cuDeviceTotalMem_v2(size_t *bytes, int device) { (void)device; *bytes = (size_t)1 << 30; return 0; }
int cuDeviceGetAttribute(int *value, int attribute, int device) {
    (void)attribute;
    (void)device;
    *value = 1;
    return 0;
}
int cuDevicePrimaryCtxRetain(void **ctx, int device) { (void)ctx; (void)device; return 801; }
#endif
