// raycast.cu: cast a batch of rays against the scene's IAS and record, per ray, what it hit.
//
// This is the proof that the batched GAS builds are right: the host compares every hit with
// the CPU's brute-force intersection. The layouts below are mirrored by src/optix/raycast.rs,
// whose tests assert the same sizes and offsets as the static_asserts here.
#include "optix_device_min.h"

using namespace optix_min;

// One ray: origin, tmin, direction, tmax (32 bytes).
struct RaycastRay {
    float origin[3];
    float tmin;
    float dir[3];
    float tmax;
};

// What a ray hit (24 bytes). A miss leaves group = RAYCAST_MISS and t = +infinity.
struct RaycastHit {
    unsigned int group;    // scene group id, from the hit SBT record
    unsigned int prim;     // triangle index within the group
    float t;               // distance along the ray, in units of |dir|
    float u, v;            // barycentrics of the 2nd and 3rd vertex
    unsigned int instance; // the IAS instance id (the group id for a GAS of one group)
};

#define RAYCAST_MISS 0xffffffffu

struct RaycastParams {
    OptixTraversableHandle handle; // the IAS
    const RaycastRay* rays;
    RaycastHit* hits;
    unsigned int ray_count;
    unsigned int pad;
};

// The data of each hit-group SBT record: one record per (GAS, build input), so a merged
// GAS's inputs keep the identity of their groups.
struct RaycastHitGroupData {
    unsigned int group;
};

static_assert(sizeof(RaycastRay) == 32, "RaycastRay layout");
static_assert(sizeof(RaycastHit) == 24, "RaycastHit layout");
static_assert(sizeof(RaycastParams) == 32, "RaycastParams layout");

extern "C" {
__constant__ RaycastParams raycast_params;
}

extern "C" __global__ void __raygen__raycast()
{
    const unsigned int i = launch_index_x();
    if (i >= raycast_params.ray_count) {
        return;
    }
    const RaycastRay r = raycast_params.rays[i];
    unsigned int group = RAYCAST_MISS, prim = 0u, t = 0x7f800000u; // +infinity
    unsigned int u = 0u, v = 0u, instance = RAYCAST_MISS;
    trace6(raycast_params.handle, r.origin[0], r.origin[1], r.origin[2], r.dir[0], r.dir[1],
           r.dir[2], r.tmin, r.tmax, 0xffu, RAY_FLAG_DISABLE_ANYHIT, 0u, 1u, 0u, group, prim, t,
           u, v, instance);
    RaycastHit h;
    h.group = group;
    h.prim = prim;
    h.t = __uint_as_float(t);
    h.u = __uint_as_float(u);
    h.v = __uint_as_float(v);
    h.instance = instance;
    raycast_params.hits[i] = h;
}

extern "C" __global__ void __closesthit__raycast()
{
    const RaycastHitGroupData* data = static_cast<const RaycastHitGroupData*>(sbt_data());
    float u, v;
    triangle_barycentrics(u, v);
    set_payload<0>(data->group);
    set_payload<1>(primitive_index());
    set_payload<2>(__float_as_uint(ray_tmax()));
    set_payload<3>(__float_as_uint(u));
    set_payload<4>(__float_as_uint(v));
    set_payload<5>(instance_id());
}

extern "C" __global__ void __miss__raycast()
{
    set_payload<0>(RAYCAST_MISS);
    set_payload<2>(0x7f800000u); // +infinity
    set_payload<5>(RAYCAST_MISS);
}
