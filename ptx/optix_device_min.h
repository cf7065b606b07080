// optix_device_min.h: the few OptiX device intrinsics gasworks' device code uses.
//
// Written for gasworks from the documented device ABI (no SDK header is used or copied):
// every OptiX device function is a PTX `call` to an `_optix_*` pseudo-function that OptiX
// replaces when it compiles a module. Only the calls used by the programs under ptx/ are
// declared here; each wrapper says which one it stands for.
#pragma once

// Forced inline: an outlined wrapper would be a .func around the `_optix_*` call.
#define GW_DEVICE static __device__ __forceinline__

typedef unsigned long long OptixTraversableHandle;

namespace optix_min {

// Values of OptixRayFlags and OptixPayloadTypeID (optix_types.h).
// (An enum, not constexpr variables, which would become global variables in the PTX.)
enum : unsigned int {
    RAY_FLAG_NONE = 0u,
    RAY_FLAG_DISABLE_ANYHIT = 1u << 0,
    PAYLOAD_TYPE_DEFAULT = 0u,
};

// --- Launch ----------------------------------------------------------------------------------

// optixGetLaunchIndex().x
GW_DEVICE unsigned int launch_index_x()
{
    unsigned int v;
    asm("call (%0), _optix_get_launch_index_x, ();" : "=r"(v) :);
    return v;
}

// --- Hit attributes (closest-hit programs) ---------------------------------------------------

// optixGetPrimitiveIndex(): the triangle's index within its build input.
GW_DEVICE unsigned int primitive_index()
{
    unsigned int v;
    asm("call (%0), _optix_read_primitive_idx, ();" : "=r"(v) :);
    return v;
}

// optixGetSbtGASIndex(): the build input's SBT record index within its GAS.
GW_DEVICE unsigned int sbt_gas_index()
{
    unsigned int v;
    asm("call (%0), _optix_read_sbt_gas_idx, ();" : "=r"(v) :);
    return v;
}

// optixGetInstanceId(): the user id of the instance that was hit.
GW_DEVICE unsigned int instance_id()
{
    unsigned int v;
    asm("call (%0), _optix_read_instance_id, ();" : "=r"(v) :);
    return v;
}

// optixGetRayTmax(): in closest hit, the distance to the hit.
GW_DEVICE float ray_tmax()
{
    float v;
    asm("call (%0), _optix_get_ray_tmax, ();" : "=f"(v) :);
    return v;
}

// optixGetTriangleBarycentrics(): (u, v) of the hit, weights of the 2nd and 3rd vertex.
GW_DEVICE void triangle_barycentrics(float& u, float& v)
{
    asm("call (%0, %1), _optix_get_triangle_barycentrics, ();" : "=f"(u), "=f"(v) :);
}

// optixIgnoreIntersection(): in any hit, the candidate hit is no hit and traversal goes on.
// It does not return.
GW_DEVICE void ignore_intersection()
{
    asm volatile("call _optix_ignore_intersection, ();");
}

// optixGetSbtDataPointer(): the data following the 32-byte header of the current SBT record.
GW_DEVICE const void* sbt_data()
{
    unsigned long long p;
    asm("call (%0), _optix_get_sbt_data_ptr_64, ();" : "=l"(p) :);
    return reinterpret_cast<const void*>(p);
}

// --- Payload ---------------------------------------------------------------------------------

// optixSetPayload_<slot>(value). The slot must be a compile-time constant.
template <unsigned int Slot>
GW_DEVICE void set_payload(unsigned int value)
{
    static_assert(Slot < 32, "OptiX has 32 payload slots");
    asm volatile("call _optix_set_payload, (%0, %1);" : : "r"(Slot), "r"(value) :);
}

// --- Tracing ---------------------------------------------------------------------------------

// optixTrace with six payload values (in and out), the default payload type, ray time 0.
//
// The pseudo-function always takes 32 payload registers in and returns 32; the count of
// meaningful ones is passed separately, so the unused ones are zeros that OptiX ignores.
// Operands: %0-%31 payload out; %32 payload type; %33 handle; %34-%39 origin and direction;
// %40 tmin; %41 tmax; %42 ray time; %43 visibility mask; %44 ray flags; %45 SBT offset;
// %46 SBT stride; %47 miss index; %48 payload count; %49-%80 payload in.
GW_DEVICE void trace6(OptixTraversableHandle handle,
                      float ox, float oy, float oz,
                      float dx, float dy, float dz,
                      float tmin, float tmax,
                      unsigned int visibility_mask, unsigned int ray_flags,
                      unsigned int sbt_offset, unsigned int sbt_stride, unsigned int miss_index,
                      unsigned int& p0, unsigned int& p1, unsigned int& p2,
                      unsigned int& p3, unsigned int& p4, unsigned int& p5)
{
    unsigned int r[32];
    const unsigned int z = 0u;
    const float ray_time = 0.0f;
    const unsigned int count = 6u;
    asm volatile(
        "call (%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31), "
        "_optix_trace_typed_32, "
        "(%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, "
        "%49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, "
        "%65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80);"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
          "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]),
          "=r"(r[13]), "=r"(r[14]), "=r"(r[15]), "=r"(r[16]), "=r"(r[17]), "=r"(r[18]),
          "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]),
          "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]),
          "=r"(r[31])
        : "r"(PAYLOAD_TYPE_DEFAULT), "l"(handle), "f"(ox), "f"(oy), "f"(oz), "f"(dx), "f"(dy),
          "f"(dz), "f"(tmin), "f"(tmax), "f"(ray_time), "r"(visibility_mask), "r"(ray_flags),
          "r"(sbt_offset), "r"(sbt_stride), "r"(miss_index), "r"(count),
          "r"(p0), "r"(p1), "r"(p2), "r"(p3), "r"(p4), "r"(p5), "r"(z), "r"(z), "r"(z), "r"(z),
          "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z),
          "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z), "r"(z)
        :);
    p0 = r[0];
    p1 = r[1];
    p2 = r[2];
    p3 = r[3];
    p4 = r[4];
    p5 = r[5];
}

} // namespace optix_min
