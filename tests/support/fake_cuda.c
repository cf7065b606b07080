/* A stand-in for libcuda.so.1 on a machine whose driver has no usable GPU: cuInit fails with
 * CUDA_ERROR_NO_DEVICE (100), or with -DZERO_DEVICES succeeds and reports no devices. */
int cuInit(unsigned int flags) {
    (void)flags;
#ifdef ZERO_DEVICES
    return 0;
#else
    return 100;
#endif
}
int cuDeviceGetCount(int *count) { *count = 0; return 0; }
