// pathtrace.cu: the GPU path tracer, the same estimator as src/cpu/integrator.rs.
//
// Design: the whole path is traced in the ray-generation program (an iterative loop, trace
// depth 1), like the CPU's `PathTracer::radiance`. The closest-hit program only reports the
// hit (its SBT record's data pointer, triangle, distance, barycentrics) through the payload;
// the miss program reports "no hit". Shadow rays are the same trace with
// TERMINATE_ON_FIRST_HIT and DISABLE_CLOSESTHIT: the payload starts as "hit" and only the miss
// program clears it, so the first hit found ends the ray with no closest-hit call (no SBT data
// read, no payload writes). So one hit group, one miss
// program and a ray-type stride of 1 serve both ray types, which keeps the SBT exactly one
// record per (GAS, build input), as the IAS of src/optix/accel.rs expects.
//
// Cut-outs (materials with a map_d opacity mask) and see-through materials (a dissolve d below
// 1): the hit group's any-hit program ignores candidate hits in the mask's holes
// (Scene::is_cut_out) and those a see-through surface lets through (Scene::is_dissolved, a
// pure function of the hit), for both ray types (Scene::passes_through). It runs only on the
// build inputs of groups that have either: the others are built with
// OPTIX_GEOMETRY_FLAG_DISABLE_ANYHIT (src/optix/accel.rs), so they trace as before.
//
// A launch covers one tile, in one of three modes (GwLaunchParams::mode; the host plans them in
// src/optix/pathtracer/launch.rs, plan_launches):
// - ACCUMULATE: one thread per pixel (launch width = tile pixels, 1D, row-major within the
//   tile); each thread adds the samples [sample_begin, sample_end) of its pixel, in order, to
//   the tile's float4 accumulation buffer: exactly what CpuBackend::render_tile does.
// - SAMPLES: one thread per (pixel, sample) of [sample_begin, sample_end), sample-major
//   (thread i: pixel i % pixels, sample sample_begin + i / pixels), each writing its sample to
//   the samples buffer, so that a small tile still fills the GPU;
// - REDUCE: one thread per pixel, adding the samples a SAMPLES launch wrote, in sample order, to
//   the accumulation: the same additions in the same order as ACCUMULATE, so the bits are the
//   same however the samples were split into launches.
//
// Area lights emit from the front face only (the winding's normal side) unless the launch
// parameters say two_sided_lights, as the CPU does for Scene::two_sided_lights. An emitter
// with an emission map (map_Ke) emits Ke times the map at the point, hit or sampled
// (Material::emission_at, Scene::light_emission_at).
//
// Random numbers: Sampler(x, y, sample, sample_bits, seed), drawn in the CPU's order and
// slots: jitter (2D), the lens point (2D, a thin lens only: lens_radius > 0), then at every vertex where the path may continue exactly 5 slots: light
// choice (1D), point on the light (2D), lobe (1D), direction (2D), Russian roulette (1D).
//
// The structs below are mirrored by src/optix/pathtracer/layout.rs; its tests assert the same
// sizes and offsets as the static_asserts here.
#include "optix_device_min.h"
#include "gasworks_common.h"

using namespace optix_min;

// Ray flags (OptixRayFlags) that optix_device_min.h does not name.
enum : unsigned int {
    GW_RAY_FLAG_TERMINATE_ON_FIRST_HIT = 1u << 2,
    GW_RAY_FLAG_DISABLE_CLOSESTHIT = 1u << 3,
};

// One emissive triangle: its vertices (world space), area, emission, its material's opacity
// mask and emission map (or -1), and, when it has either, the UVs of its corners (96 bytes).
struct GwLight {
    float p0[3];
    float area;
    float p1[3];
    unsigned int group;
    float p2[3];
    unsigned int prim;
    float emission[3];
    int opacity_texture;
    float uv0[2];
    float uv1[2];
    float uv2[2];
    int emission_texture;
    unsigned int pad;
};

// The data of a hit-group SBT record: one per (GAS, build input), i.e. per scene group
// (64 bytes). Pointers are null when the group has no normals / UVs / lights.
struct GwHitGroupData {
    const float* positions;          // float3 per vertex
    const unsigned int* indices;     // uint3 per triangle
    const float* normals;            // float3 per vertex, or null
    const float* uvs;                // float2 per vertex, or null
    const unsigned int* face_materials; // per triangle, into the material table
    const unsigned int* light_index; // per triangle: index into the lights, or ~0u; or null
    unsigned int group;
    unsigned int triangle_count;
    unsigned int pad[2];
};

// One sample written by a SAMPLES launch for the REDUCE launch after it (16 bytes): its radiance
// (non-finite values kept, so REDUCE drops them as ACCUMULATE would) and the rays it traced.
struct GwSample {
    float radiance[3];
    unsigned int rays;
};

// Launch modes (see the top of this file).
enum : unsigned int {
    GW_LAUNCH_ACCUMULATE = 0u,
    GW_LAUNCH_SAMPLES = 1u,
    GW_LAUNCH_REDUCE = 2u,
};

// The launch parameters (296 bytes).
struct GwLaunchParams {
    OptixTraversableHandle handle; // the IAS
    float* accum;                  // tile_w * tile_h float4 [r, g, b, n], row-major in the tile
    const GwMaterial* materials;
    const GwTexture* textures;
    const float* texels; // every texture's texels, 3 floats each
    const GwLight* lights;
    const float* light_cdf;         // cdf[i] = P(light index <= i); the last is 1
    unsigned long long* counters;   // [rays traced, non-finite samples], added to atomically
    unsigned long long seed;
    float eye[3];
    float cam_u[3];
    float cam_v[3];
    float cam_w[3];
    float environment[3]; // radiance of escaped rays (black when the scene has none)
    unsigned int image_width;
    unsigned int image_height;
    unsigned int tile_x;
    unsigned int tile_y;
    unsigned int tile_w;
    unsigned int tile_h;
    unsigned int sample_begin;
    unsigned int sample_end;
    unsigned int max_depth;
    unsigned int light_count;
    unsigned int material_count;
    unsigned int texture_count;
    unsigned int two_sided_lights; // 0: lights emit from the front face only; 1: both faces
    unsigned int mode;  // GW_LAUNCH_ACCUMULATE, GW_LAUNCH_SAMPLES or GW_LAUNCH_REDUCE
    unsigned int sample_bits; // the render's samples per pixel, rounded up to 2^sample_bits
    GwSample* samples;  // SAMPLES / REDUCE: (sample_end - sample_begin) x tile pixels, sample-major
    unsigned int pixel_filter; // GW_FILTER_BOX or GW_FILTER_TENT
    float lens_radius;         // 0: a pinhole (no lens numbers drawn); else a thin lens
    float lens_u[3];           // the lens disk's axes: cam_u and cam_v normalized, times the radius
    float lens_v[3];
    float focus_distance;      // the plane in focus, along cam_w
    unsigned int env_width;    // the environment map's width in texels; 0: no map
    const float* env_texels;   // 3 floats per texel, rows top (up, +Y) to bottom
    const float* env_row_cdf;  // env_height + 1 patch rows; null for a black map
    const float* env_col_cdf;  // per patch row, env_width entries
    const float* env_uv_pdf;   // per patch, the factor of its density over the (u, v) square
    unsigned int env_height;
    float env_rotation_turns;  // --env-rotate / 360
    float env_share;           // P(env): the probability NEE samples the map
    float env_compensation;    // the luminance the sampling takes off each texel's
    // One byte per tile pixel, row-major: non-zero where the launch renders nothing (blocks
    // adaptive sampling stopped); null where it renders every pixel.
    const unsigned char* skip;
};

static_assert(sizeof(GwLight) == 96, "GwLight layout");
static_assert(GW_OFFSETOF(GwLight, group) == 28, "GwLight.group");
static_assert(GW_OFFSETOF(GwLight, prim) == 44, "GwLight.prim");
static_assert(GW_OFFSETOF(GwLight, emission) == 48, "GwLight.emission");
static_assert(GW_OFFSETOF(GwLight, opacity_texture) == 60, "GwLight.opacity_texture");
static_assert(GW_OFFSETOF(GwLight, uv0) == 64, "GwLight.uv0");
static_assert(GW_OFFSETOF(GwLight, emission_texture) == 88, "GwLight.emission_texture");
static_assert(sizeof(GwHitGroupData) == 64, "GwHitGroupData layout");
static_assert(GW_OFFSETOF(GwHitGroupData, light_index) == 40, "GwHitGroupData.light_index");
static_assert(GW_OFFSETOF(GwHitGroupData, group) == 48, "GwHitGroupData.group");
static_assert(sizeof(GwSample) == 16, "GwSample layout");
static_assert(sizeof(GwLaunchParams) == 296, "GwLaunchParams layout");
static_assert(GW_OFFSETOF(GwLaunchParams, counters) == 56, "GwLaunchParams.counters");
static_assert(GW_OFFSETOF(GwLaunchParams, seed) == 64, "GwLaunchParams.seed");
static_assert(GW_OFFSETOF(GwLaunchParams, eye) == 72, "GwLaunchParams.eye");
static_assert(GW_OFFSETOF(GwLaunchParams, environment) == 120, "GwLaunchParams.environment");
static_assert(GW_OFFSETOF(GwLaunchParams, image_width) == 132, "GwLaunchParams.image_width");
static_assert(GW_OFFSETOF(GwLaunchParams, tile_x) == 140, "GwLaunchParams.tile_x");
static_assert(GW_OFFSETOF(GwLaunchParams, sample_begin) == 156, "GwLaunchParams.sample_begin");
static_assert(GW_OFFSETOF(GwLaunchParams, max_depth) == 164, "GwLaunchParams.max_depth");
static_assert(GW_OFFSETOF(GwLaunchParams, texture_count) == 176, "GwLaunchParams.texture_count");
static_assert(GW_OFFSETOF(GwLaunchParams, two_sided_lights) == 180, "GwLaunchParams.two_sided_lights");
static_assert(GW_OFFSETOF(GwLaunchParams, mode) == 184, "GwLaunchParams.mode");
static_assert(GW_OFFSETOF(GwLaunchParams, sample_bits) == 188, "GwLaunchParams.sample_bits");
static_assert(GW_OFFSETOF(GwLaunchParams, samples) == 192, "GwLaunchParams.samples");
static_assert(GW_OFFSETOF(GwLaunchParams, pixel_filter) == 200, "GwLaunchParams.pixel_filter");
static_assert(GW_OFFSETOF(GwLaunchParams, lens_radius) == 204, "GwLaunchParams.lens_radius");
static_assert(GW_OFFSETOF(GwLaunchParams, lens_u) == 208, "GwLaunchParams.lens_u");
static_assert(GW_OFFSETOF(GwLaunchParams, lens_v) == 220, "GwLaunchParams.lens_v");
static_assert(GW_OFFSETOF(GwLaunchParams, focus_distance) == 232, "GwLaunchParams.focus_distance");
static_assert(GW_OFFSETOF(GwLaunchParams, env_width) == 236, "GwLaunchParams.env_width");
static_assert(GW_OFFSETOF(GwLaunchParams, env_texels) == 240, "GwLaunchParams.env_texels");
static_assert(GW_OFFSETOF(GwLaunchParams, env_height) == 272, "GwLaunchParams.env_height");
static_assert(GW_OFFSETOF(GwLaunchParams, env_share) == 280, "GwLaunchParams.env_share");
static_assert(GW_OFFSETOF(GwLaunchParams, env_compensation) == 284, "GwLaunchParams.env_compensation");
static_assert(GW_OFFSETOF(GwLaunchParams, skip) == 288, "GwLaunchParams.skip");

#define GW_NO_LIGHT 0xffffffffu

extern "C" {
__constant__ GwLaunchParams pathtrace_params;
}

// ---------------------------------------------------------------------------------------------
// Tracing
// ---------------------------------------------------------------------------------------------

struct Hit {
    const GwHitGroupData* data; // null: the ray escaped
    unsigned int prim;
    float t, u, v;
};

// RayData::new's conditions: a finite origin and a finite, non-zero direction.
GW_INLINE bool ray_is_valid(V3 o, V3 d) { return is_finite(o) && is_finite(d) && !(d == v3s(0.0f)); }

GW_INLINE Hit trace_closest(V3 o, V3 d, unsigned long long& rays)
{
    unsigned int p0 = 0u, p1 = 0u, prim = 0u, t = 0u, u = 0u, v = 0u;
    // tmin 0 and tmax infinity, as the CPU's intersect_ray(ray, 0, INFINITY).
    trace6(pathtrace_params.handle, o.x, o.y, o.z, d.x, d.y, d.z, 0.0f, __int_as_float(0x7f800000),
           0xffu, RAY_FLAG_NONE, 0u, 1u, 0u, p0, p1, prim, t, u, v);
    rays += 1;
    Hit h;
    h.data = reinterpret_cast<const GwHitGroupData*>(((unsigned long long)p1 << 32) | p0);
    h.prim = prim;
    h.t = __uint_as_float(t);
    h.u = __uint_as_float(u);
    h.v = __uint_as_float(v);
    return h;
}

// Whether anything lies on the segment o + s d, 0 < s < 1 (the CPU's occluded_ray(ray, 0, 1)).
GW_INLINE bool occluded(V3 o, V3 d, float tmax, unsigned long long& rays)
{
    // "Occluded" unless the miss program runs: no closest-hit program runs for this ray.
    unsigned int p0 = 1u, p1 = 0u, prim = 0u, t = 0u, u = 0u, v = 0u;
    trace6(pathtrace_params.handle, o.x, o.y, o.z, d.x, d.y, d.z, 0.0f, tmax, 0xffu,
           GW_RAY_FLAG_TERMINATE_ON_FIRST_HIT | GW_RAY_FLAG_DISABLE_CLOSESTHIT, 0u, 1u, 0u, p0,
           p1, prim, t, u, v);
    rays += 1;
    return (p0 | p1) != 0u;
}

// ---------------------------------------------------------------------------------------------
// The integrator: src/cpu/integrator.rs
// ---------------------------------------------------------------------------------------------

struct SurfacePoint {
    V3 p;
    V3 n_geo;   // unit geometric normal as the winding gives it
    V3 n_shade; // unit interpolated normal, or n_geo
    bool has_uv;
    float uv_u, uv_v;
    unsigned int material;
    float scale; // triangle_scale of the hit triangle
};

// Group::uv_at: w uv0 + u uv1 + v uv2 with w = 1 - u - v (the group has UVs).
GW_INLINE void uv_at(const GwHitGroupData& g, unsigned int prim, float u, float v, float& uv_u,
                     float& uv_v)
{
    const float w = 1.0f - u - v;
    const float* a = g.uvs + 2ull * g.indices[3u * prim];
    const float* b = g.uvs + 2ull * g.indices[3u * prim + 1u];
    const float* c = g.uvs + 2ull * g.indices[3u * prim + 2u];
    uv_u = w * a[0] + u * b[0] + v * c[0];
    uv_v = w * a[1] + u * b[1] + v * c[1];
}

// Whether texture index t names a texture of the table (pack.rs packs an index outside it as
// -1; this guards the table all the same).
GW_INLINE bool is_texture(int t) { return t >= 0 && (unsigned int)t < pathtrace_params.texture_count; }

// Scene::is_cut_out: the triangle's material has an opacity mask, the group has UVs, and the
// mask there is below ALPHA_CUTOFF (scene::ALPHA_CUTOFF, 0.5). Indices out of range mean no
// mask, as pack_material packs them.
GW_INLINE bool is_cut_out(const GwHitGroupData& g, unsigned int prim, float u, float v)
{
    const GwLaunchParams& P = pathtrace_params;
    if (g.uvs == nullptr || g.face_materials == nullptr) {
        return false;
    }
    const unsigned int m = g.face_materials[prim];
    if (m >= P.material_count) {
        return false;
    }
    const int t = P.materials[m].opacity_texture;
    if (!is_texture(t)) {
        return false;
    }
    float uv_u, uv_v;
    uv_at(g, prim, u, v, uv_u, uv_v);
    return texture_sample(P.textures[t], P.texels, uv_u, uv_v).x < 0.5f;
}

// Scene::is_dissolved: the triangle's material is see-through (an opacity below 1, not an
// emitter) and the hit's own number is at or above the opacity.
GW_INLINE bool is_dissolved(const GwHitGroupData& g, unsigned int prim, float u, float v)
{
    const GwLaunchParams& P = pathtrace_params;
    if (g.face_materials == nullptr) {
        return false;
    }
    const unsigned int m = g.face_materials[prim];
    if (m >= P.material_count) {
        return false;
    }
    const GwMaterial& mat = P.materials[m];
    return mat.opacity < 1.0f && !is_emissive(mat) &&
           dissolve_number(g.group, prim, u, v) >= mat.opacity;
}

// SurfacePoint::new.
GW_INLINE SurfacePoint surface_point(const Hit& h)
{
    const GwHitGroupData& g = *h.data;
    const unsigned int i0 = g.indices[3u * h.prim];
    const unsigned int i1 = g.indices[3u * h.prim + 1u];
    const unsigned int i2 = g.indices[3u * h.prim + 2u];
    const float u = h.u, v = h.v;
    const float w = 1.0f - u - v;
    const V3 p0 = v3_load(g.positions + 3ull * i0);
    const V3 p1 = v3_load(g.positions + 3ull * i1);
    const V3 p2 = v3_load(g.positions + 3ull * i2);
    SurfacePoint sp;
    sp.p = w * p0 + u * p1 + v * p2;
    sp.n_geo = normalize(cross(p1 - p0, p2 - p0));
    sp.n_shade = sp.n_geo;
    sp.scale = triangle_scale(p0, p1, p2);
    if (g.normals != nullptr) {
        const V3 n = normalize(w * v3_load(g.normals + 3ull * i0) + u * v3_load(g.normals + 3ull * i1) +
                               v * v3_load(g.normals + 3ull * i2));
        if (is_finite(n)) {
            sp.n_shade = n;
        }
    }
    sp.has_uv = g.uvs != nullptr;
    sp.uv_u = 0.0f;
    sp.uv_v = 0.0f;
    if (sp.has_uv) {
        uv_at(g, h.prim, u, v, sp.uv_u, sp.uv_v);
    }
    sp.material = g.face_materials[h.prim];
    // The material's bump or normal map bends the shading normal (bump::bent_normal).
    const GwLaunchParams& P = pathtrace_params;
    if (sp.has_uv && sp.material < P.material_count) {
        const GwMaterial& m = P.materials[sp.material];
        if (is_texture(m.bump_texture)) {
            const float* t0 = g.uvs + 2ull * i0;
            const float* t1 = g.uvs + 2ull * i1;
            const float* t2 = g.uvs + 2ull * i2;
            V3 dpdu, dpdv;
            if (uv_tangents(p0, p1, p2, t0[0], t0[1], t1[0], t1[1], t2[0], t2[1], dpdu, dpdv)) {
                sp.n_shade = bent_normal(m, P.textures, P.texels, sp.n_shade, dpdu, dpdv, sp.uv_u,
                                         sp.uv_v);
            }
        }
    }
    return sp;
}

// Material::emission_at: Ke, times the emission map at the point when there is one and the
// mesh has UVs.
GW_INLINE V3 emission_at(const GwMaterial& m, const SurfacePoint& sp)
{
    const V3 ke = v3_load(m.emission);
    if (!is_texture(m.emission_texture) || !sp.has_uv) {
        return ke;
    }
    return ke * texture_sample(pathtrace_params.textures[m.emission_texture], pathtrace_params.texels,
                               sp.uv_u, sp.uv_v);
}

// Rust's `cdf.partition_point(|&c| c <= u).min(n - 1)`: the first k with u < cdf[k], clamped
// to the last entry (n >= 1).
GW_INLINE unsigned int cdf_search(const float* cdf, unsigned int n, float u)
{
    unsigned int lo = 0u, hi = n;
    while (lo < hi) {
        const unsigned int mid = lo + (hi - lo) / 2u;
        if (cdf[mid] <= u) {
            lo = mid + 1u;
        } else {
            hi = mid;
        }
    }
    return min(lo, n - 1u);
}

// LightSampler::pick: the first i with u < cdf[i] (clamped to the last light).
GW_INLINE unsigned int pick_light(float u)
{
    return cdf_search(pathtrace_params.light_cdf, pathtrace_params.light_count, u);
}

// LightSampler::probability: (cdf[i] - cdf[i - 1]) (1 - P(env)).
GW_INLINE float light_probability(unsigned int i)
{
    const float* cdf = pathtrace_params.light_cdf;
    const float lo = (i == 0u) ? 0.0f : cdf[i - 1u];
    return (cdf[i] - lo) * (1.0f - pathtrace_params.env_share);
}

// LightSampler::choose: true for the environment map; else the area light in `li`.
GW_INLINE bool choose_environment(float u, unsigned int& li)
{
    const GwLaunchParams& P = pathtrace_params;
    if (P.env_share > 0.0f) {
        if (u < P.env_share || P.light_count == 0u) {
            return true;
        }
        const float rest = (u - P.env_share) / (1.0f - P.env_share);
        // min(rest, 1 - EPSILON / 2): the largest float below 1.
        li = pick_light(fminf(rest, __int_as_float(0x3f7fffff)));
        return false;
    }
    li = pick_light(u);
    return false;
}

// ---------------------------------------------------------------------------------------------
// The environment map: src/scene/environment_map.rs
// ---------------------------------------------------------------------------------------------

// Rust's `x as usize` for x below 2^32: NaN and negatives give 0, the rest truncates.
GW_INLINE unsigned int float_to_index(float x) { return x >= 1.0f ? (unsigned int)x : 0u; }

// EnvironmentMap::uv_of.
GW_INLINE void env_uv_of(V3 d, float& u, float& v)
{
    const float theta = acosf(clampf(d.y, -1.0f, 1.0f));
    const float phi = atan2f(d.x, -d.z);
    float uu = 0.5f + phi / (2.0f * GW_PI) - pathtrace_params.env_rotation_turns;
    uu = uu - floorf(uu);
    u = uu < 1.0f ? uu : 0.0f;
    v = theta / GW_PI;
}

// environment_map.rs `Footprint`: the four texels around a point, its offsets from the first,
// and its patch of the sampling tables.
struct EnvFootprint {
    unsigned int i0, i1, j0, j1;
    float fx, fy;
    unsigned int patch;
};

// EnvironmentMap::footprint: columns wrapped round the seam, rows clamped at the poles.
GW_INLINE EnvFootprint env_footprint(float u, float v)
{
    const GwLaunchParams& P = pathtrace_params;
    const unsigned int w = P.env_width, h = P.env_height;
    const float x = u * (float)w - 0.5f;
    const float y = v * (float)h - 0.5f;
    const float x0 = floorf(x), y0 = floorf(y);
    EnvFootprint f;
    f.i0 = x0 < 0.0f ? w - 1u : min(float_to_index(x0), w - 1u);
    f.i1 = f.i0 + 1u >= w ? 0u : f.i0 + 1u;
    f.j0 = y0 < 0.0f ? 0u : min(float_to_index(y0), h - 1u);
    f.j1 = y0 < 0.0f ? 0u : min(f.j0 + 1u, h - 1u);
    f.fx = x - x0;
    f.fy = y - y0;
    f.patch = (y0 < 0.0f ? 0u : f.j0 + 1u) * w + f.i0;
    return f;
}

GW_INLINE V3 env_texel(unsigned int i, unsigned int j)
{
    const float* t = pathtrace_params.env_texels + 3ull * (j * pathtrace_params.env_width + i);
    return v3(t[0], t[1], t[2]);
}

// environment_map.rs `compensated` of texel (i, j): its luminance less the compensation.
GW_INLINE float env_weight(unsigned int i, unsigned int j)
{
    return fmaxf(luminance(env_texel(i, j)) - pathtrace_params.env_compensation, 0.0f);
}

// a + (b - a) f, per channel, as the Rust side writes it.
GW_INLINE V3 env_lerp(V3 a, V3 b, float f)
{
    return v3(a.x + (b.x - a.x) * f, a.y + (b.y - a.y) * f, a.z + (b.z - a.z) * f);
}

// EnvironmentMap::lookup: the radiance from d, interpolated between the four nearest texel
// centres, and the density of d, its (u, v) found once.
GW_INLINE V3 env_lookup(V3 d, float& pdf)
{
    float u, v;
    env_uv_of(d, u, v);
    const EnvFootprint f = env_footprint(u, v);
    const V3 top = env_lerp(env_texel(f.i0, f.j0), env_texel(f.i1, f.j0), f.fx);
    const V3 bottom = env_lerp(env_texel(f.i0, f.j1), env_texel(f.i1, f.j1), f.fx);
    const V3 radiance = env_lerp(top, bottom, f.fy);
    pdf = 0.0f;
    if (pathtrace_params.env_row_cdf == nullptr) {
        return radiance;
    }
    // From x and z, not sqrtf(1 - y^2): near a pole y rounds to +-1.
    const float sin_theta = sqrtf(d.x * d.x + d.z * d.z);
    if (!(sin_theta > 0.0f)) {
        return radiance;
    }
    const float w00 = env_weight(f.i0, f.j0), w10 = env_weight(f.i1, f.j0);
    const float w01 = env_weight(f.i0, f.j1), w11 = env_weight(f.i1, f.j1);
    const float w_top = w00 + (w10 - w00) * f.fx;
    const float w_bottom = w01 + (w11 - w01) * f.fx;
    const float w = w_top + (w_bottom - w_top) * f.fy;
    const float pdf_uv = pathtrace_params.env_uv_pdf[f.patch] * w;
    pdf = pdf_uv / (2.0f * GW_PI * GW_PI * sin_theta);
    return radiance;
}

// environment_map.rs `sample_linear`: a number in [0, 1) with density a (1 - x) + b x.
GW_INLINE float env_sample_linear(float u, float a, float b)
{
    if (!(a + b > 0.0f)) {
        return u;
    }
    if (u == 0.0f && a == 0.0f) {
        return 0.0f;
    }
    const float x = u * (a + b) / (a + sqrtf((1.0f - u) * a * a + u * b * b));
    return fminf(x, __int_as_float(0x3f7fffff));
}

// environment_map.rs `pick`: the first k with u < cdf[k] (clamped to the last), and where u
// lies in that entry's interval, in [0, 1).
GW_INLINE unsigned int env_pick(const float* cdf, unsigned int n, float u, float& f)
{
    const unsigned int k = cdf_search(cdf, n, u);
    const float below = (k == 0u) ? 0.0f : cdf[k - 1u];
    const float width = cdf[k] - below;
    const float x = width > 0.0f ? (u - below) / width : 0.5f;
    f = clampf(x, 0.0f, __int_as_float(0x3f7fffff));
    return k;
}

// EnvironmentMap::direction_of.
GW_INLINE V3 env_direction_of(float u, float v)
{
    const float phi = 2.0f * GW_PI * (u - 0.5f + pathtrace_params.env_rotation_turns);
    const float theta = GW_PI * v;
    const float st = sinf(theta), ct = cosf(theta);
    const float sp = sinf(phi), cp = cosf(phi);
    return v3(st * sp, ct, -st * cp);
}

// EnvironmentMap::sample: a patch by the tables, then a point of its bilinear patch.
// Returns false for a black map.
GW_INLINE bool env_sample(float u1, float u2, V3& d)
{
    const GwLaunchParams& P = pathtrace_params;
    if (P.env_row_cdf == nullptr) {
        return false;
    }
    const unsigned int w = P.env_width, h = P.env_height;
    float fv, fu;
    const unsigned int r = env_pick(P.env_row_cdf, h + 1u, u1, fv);
    const unsigned int c = env_pick(P.env_col_cdf + (unsigned long long)r * w, w, u2, fu);
    const unsigned int j0 = r == 0u ? 0u : r - 1u;
    const unsigned int j1 = min(r, h - 1u);
    const unsigned int i1 = c + 1u >= w ? 0u : c + 1u;
    const float w00 = env_weight(c, j0), w10 = env_weight(i1, j0);
    const float w01 = env_weight(c, j1), w11 = env_weight(i1, j1);
    const float t = env_sample_linear(fv, w00 + w10, w01 + w11);
    const float s = env_sample_linear(fu, w00 + (w01 - w00) * t, w10 + (w11 - w10) * t);
    float x = (float)c + 0.5f + s;
    x = x >= (float)w ? x - (float)w : x;
    const float y = r == 0u   ? 0.5f * t
                    : r == h ? (float)h - 0.5f + 0.5f * t
                             : (float)r - 0.5f + t;
    d = env_direction_of(x / (float)w, y / (float)h);
    return true;
}

// PathTracer::emits_towards: whether a light of unit normal n_light emits towards w (pointing
// away from it): always with two-sided lights, else when n_light . w > 0.
GW_INLINE bool emits_towards(V3 n_light, V3 w)
{
    return pathtrace_params.two_sided_lights != 0u || dot(n_light, w) > 0.0f;
}

// PathTracer::light_pdf. Returns false where the CPU returns None.
GW_INLINE bool light_pdf(const Hit& h, const SurfacePoint& sp, V3 dir, float& pdf)
{
    if (h.data->light_index == nullptr) {
        return false;
    }
    const unsigned int li = h.data->light_index[h.prim];
    if (li == GW_NO_LIGHT) {
        return false;
    }
    const float cos_l = fabsf(dot(sp.n_geo, dir));
    if (!(cos_l > 0.0f)) {
        return false;
    }
    pdf = light_probability(li) / pathtrace_params.lights[li].area * h.t * h.t / cos_l;
    return true;
}

// A next event's shadow ray, and what it adds (throughput not included) unless occluded.
// Both kinds of next event fill one, so that the PTX holds one shadow-ray trace.
struct ShadowRay {
    V3 origin, dir;
    float tmax;
    V3 value;
};

// PathTracer::next_event: one light point; false where the CPU returns zero before its shadow
// ray.
GW_INLINE bool next_event(const SurfacePoint& sp, const Bsdf& bsdf, V3 wo, unsigned int li,
                          float u1, float u2, ShadowRay& shadow)
{
    const V3 zero = v3s(0.0f);
    const float p_pick = light_probability(li);
    if (!(p_pick > 0.0f)) {
        return false;
    }
    const GwLight& light = pathtrace_params.lights[li];
    const V3 q0 = v3_load(light.p0), q1 = v3_load(light.p1), q2 = v3_load(light.p2);
    float b1, b2;
    uniform_triangle(u1, u2, b1, b2);
    // The light point's UVs (Group::uv_at's arithmetic), when a map needs them.
    const bool masked = is_texture(light.opacity_texture);
    const bool mapped = is_texture(light.emission_texture);
    float uv_u = 0.0f, uv_v = 0.0f;
    if (masked || mapped) {
        const float w = 1.0f - b1 - b2;
        uv_u = w * light.uv0[0] + b1 * light.uv1[0] + b2 * light.uv2[0];
        uv_v = w * light.uv0[1] + b1 * light.uv1[1] + b2 * light.uv2[1];
    }
    // A point in a hole of a cut-out emitter emits nothing (Scene::is_cut_out at the light
    // point).
    if (masked) {
        const GwTexture& mask = pathtrace_params.textures[light.opacity_texture];
        if (texture_sample(mask, pathtrace_params.texels, uv_u, uv_v).x < 0.5f) {
            return false;
        }
    }
    // Scene::light_emission_at.
    V3 le = v3_load(light.emission);
    if (mapped) {
        le = le * texture_sample(pathtrace_params.textures[light.emission_texture],
                                 pathtrace_params.texels, uv_u, uv_v);
    }
    const V3 q = (1.0f - b1 - b2) * q0 + b1 * q1 + b2 * q2;
    const V3 n_light = normalize(cross(q1 - q0, q2 - q0));
    const V3 to_light = q - sp.p;
    const float dist2 = length_squared(to_light);
    if (!(dist2 > 0.0f)) {
        return false;
    }
    const V3 wi = to_light / sqrtf(dist2);
    const float cos_l = fabsf(dot(n_light, wi));
    if (!(cos_l > 0.0f)) {
        return false;
    }
    // A light point seen from behind emits nothing towards the shading point: no shadow ray.
    if (!(pathtrace_params.two_sided_lights != 0u || dot(n_light, wi) < 0.0f)) {
        return false;
    }
    const BsdfEval e = bsdf_eval(bsdf, wo, wi);
    if (e.f_cos == zero) {
        return false;
    }
    const float p_light = p_pick / light.area * dist2 / cos_l;
    const float side = dot(wi, sp.n_geo) >= 0.0f ? 1.0f : -1.0f;
    const V3 origin = offset_ray_origin(sp.p, side * sp.n_geo, sp.scale);
    const float light_side = dot(n_light, wi) < 0.0f ? 1.0f : -1.0f;
    const V3 target = offset_ray_origin(q, light_side * n_light, triangle_scale(q0, q1, q2));
    const V3 d = target - origin;
    if (!ray_is_valid(origin, d)) {
        return false;
    }
    shadow.origin = origin;
    shadow.dir = d;
    shadow.tmax = 1.0f;
    shadow.value = e.f_cos * le * (power_heuristic(p_light, e.pdf) / p_light);
    return true;
}

// PathTracer::next_event_environment: one direction drawn from the map, its shadow ray to
// infinity; false where the CPU returns zero before its shadow ray.
GW_INLINE bool next_event_environment(const SurfacePoint& sp, const Bsdf& bsdf, V3 wo, float u1,
                                      float u2, ShadowRay& shadow)
{
    const V3 zero = v3s(0.0f);
    V3 wi;
    if (!env_sample(u1, u2, wi)) {
        return false;
    }
    float pdf;
    const V3 le = env_lookup(wi, pdf);
    const float p_env = pathtrace_params.env_share * pdf;
    if (!(p_env > 0.0f)) {
        return false;
    }
    const BsdfEval e = bsdf_eval(bsdf, wo, wi);
    if (e.f_cos == zero) {
        return false;
    }
    const float side = dot(wi, sp.n_geo) >= 0.0f ? 1.0f : -1.0f;
    const V3 origin = offset_ray_origin(sp.p, side * sp.n_geo, sp.scale);
    if (!ray_is_valid(origin, wi)) {
        return false;
    }
    shadow.origin = origin;
    shadow.dir = wi;
    shadow.tmax = __int_as_float(0x7f800000);
    shadow.value = e.f_cos * le * (power_heuristic(p_env, e.pdf) / p_env);
    return true;
}

// PathTracer::radiance.
GW_INLINE V3 radiance(V3 origin, V3 dir, Sampler& rng, unsigned long long& rays)
{
    const GwLaunchParams& P = pathtrace_params;
    const V3 env = v3_load(P.environment);
    V3 ray_o = origin;
    V3 ray_d = dir;
    V3 throughput = v3s(1.0f);
    V3 result = v3s(0.0f);
    float prev_pdf = 0.0f;
    bool prev_delta = true;
    for (unsigned int depth = 1u; depth <= P.max_depth; ++depth) {
        if (!ray_is_valid(ray_o, ray_d)) {
            break;
        }
        const Hit hit = trace_closest(ray_o, ray_d, rays);
        if (hit.data == nullptr) {
            result += throughput * env;
            if (P.env_width != 0u) {
                float pdf;
                const V3 le = env_lookup(ray_d, pdf);
                const float share = P.env_share;
                float w = 1.0f;
                if (!(prev_delta || share == 0.0f)) {
                    w = power_heuristic(prev_pdf, share * pdf);
                }
                result += throughput * le * w;
            }
            break;
        }
        const SurfacePoint sp = surface_point(hit);
        const GwMaterial& material = P.materials[sp.material];
        const V3 wo = -ray_d;
        if (is_emissive(material) && emits_towards(sp.n_geo, wo)) {
            float w = 1.0f;
            float p_light;
            if (!prev_delta && light_pdf(hit, sp, ray_d, p_light)) {
                w = power_heuristic(prev_pdf, p_light);
            }
            result += throughput * emission_at(material, sp) * w;
        }
        if (depth == P.max_depth) {
            break;
        }
        const float u_light = next_1d(rng);
        float u_l1, u_l2;
        next_2d(rng, u_l1, u_l2);
        const float u_lobe = next_1d(rng);
        float u_b1, u_b2;
        next_2d(rng, u_b1, u_b2);
        const float u_rr = next_1d(rng);

        const ShadingFrame frame = shading_frame(sp.n_geo, sp.n_shade, wo);
        const Bsdf bsdf = bsdf_new(material, P.textures, P.texture_count, P.texels, sp.has_uv,
                                   sp.uv_u, sp.uv_v, frame);
        if (!bsdf_is_delta(bsdf) && (P.light_count > 0u || P.env_share > 0.0f)) {
            unsigned int li = 0u;
            ShadowRay shadow;
            const bool cast = choose_environment(u_light, li)
                                  ? P.env_width != 0u &&
                                        next_event_environment(sp, bsdf, wo, u_l1, u_l2, shadow)
                                  : next_event(sp, bsdf, wo, li, u_l1, u_l2, shadow);
            // The CPU adds throughput x zero where nothing arrives: so does this.
            V3 arrives = v3s(0.0f);
            if (cast && !occluded(shadow.origin, shadow.dir, shadow.tmax, rays)) {
                arrives = shadow.value;
            }
            result += throughput * arrives;
        }
        BsdfSample bs;
        if (!bsdf_sample(bsdf, wo, u_lobe, u_b1, u_b2, bs)) {
            break;
        }
        throughput *= bs.weight;
        if (throughput == v3s(0.0f)) {
            break;
        }
        if (depth >= 3u) {
            const float q = fminf(max_element(throughput), 0.95f);
            if (u_rr >= q) {
                break;
            }
            throughput = throughput / q;
        }
        prev_pdf = bs.pdf;
        prev_delta = bs.delta;
        const float side = dot(bs.wi, sp.n_geo) >= 0.0f ? 1.0f : -1.0f;
        ray_o = offset_ray_origin(sp.p, side * sp.n_geo, sp.scale);
        ray_d = bs.wi;
    }
    return result;
}

// PathTracer::sample: the primary ray through the filter's point (CameraFrame::direction), or
// a thin lens's through it (CameraFrame::thin_lens_ray), its lens numbers drawn only then.
GW_INLINE V3 sample_pixel(unsigned int x, unsigned int y, unsigned int sample, unsigned long long& rays)
{
    const GwLaunchParams& P = pathtrace_params;
    Sampler rng = sampler_new(x, y, sample, P.sample_bits, P.seed);
    float jx, jy;
    next_2d(rng, jx, jy);
    float px, py;
    pixel_filter_place(P.pixel_filter, x, y, jx, jy, px, py);
    const float sx = 2.0f * px / (float)P.image_width - 1.0f;
    const float sy = 1.0f - 2.0f * py / (float)P.image_height;
    // The image-plane point at distance 1 (CameraFrame::image_plane_point).
    const V3 plane = v3_load(P.cam_w) + sx * v3_load(P.cam_u) + sy * v3_load(P.cam_v);
    V3 origin = v3_load(P.eye);
    V3 dir;
    if (P.lens_radius == 0.0f) {
        dir = normalize(plane);
    } else {
        float l1, l2;
        next_2d(rng, l1, l2);
        float a, b;
        concentric_disk(l1, l2, a, b);
        const V3 offset = a * v3_load(P.lens_u) + b * v3_load(P.lens_v);
        const V3 focus = plane * P.focus_distance;
        origin = origin + offset;
        dir = normalize(focus - offset);
    }
    // One call of the path tracer, so that the PTX holds one copy of it.
    return radiance(origin, dir, rng, rays);
}

// ---------------------------------------------------------------------------------------------
// Programs
// ---------------------------------------------------------------------------------------------

// CpuBackend::render_tile's accumulation of one sample: a non-finite sample adds nothing but
// still counts.
GW_INLINE void accumulate(const V3 l, float& r, float& g, float& b, float& n,
                          unsigned long long& dropped)
{
    if (is_finite(l)) {
        r += l.x;
        g += l.y;
        b += l.z;
    } else {
        dropped += 1ull;
    }
    n += 1.0f;
}

extern "C" __global__ void __raygen__pathtrace()
{
    const GwLaunchParams& P = pathtrace_params;
    const unsigned int i = launch_index_x();
    // At most 2^30 threads per launch (the host checks), so these products fit 32 bits.
    const unsigned int pixels = P.tile_w * P.tile_h;
    const unsigned int count = P.sample_end - P.sample_begin;
    const bool write_samples = P.mode == GW_LAUNCH_SAMPLES;
    if (pixels == 0u || i >= (write_samples ? pixels * count : pixels)) {
        return;
    }
    // The pixel, row-major within the tile (src/optix/pathtracer/launch.rs: `tile_pixel`, and
    // for SAMPLES launches `sample_thread`, sample-major), and the samples this thread renders.
    const unsigned int p = i % pixels;
    // A skipped pixel's threads render, write and add nothing: its accumulation keeps the
    // sums it came with (CpuBackend::render_tile_skipping).
    if (P.skip != nullptr && P.skip[p] != 0u) {
        return;
    }
    const unsigned int x = P.tile_x + p % P.tile_w;
    const unsigned int y = P.tile_y + p / P.tile_w;
    unsigned int first = P.sample_begin, end = P.sample_end;
    if (write_samples) {
        first = P.sample_begin + i / pixels;
        end = first + 1u;
    } else if (P.mode == GW_LAUNCH_REDUCE) {
        end = first; // renders nothing: adds what a SAMPLES launch wrote
    }
    float r = 0.0f, g = 0.0f, b = 0.0f, n = 0.0f;
    float* acc = P.accum + 4ull * p;
    if (!write_samples) {
        r = acc[0];
        g = acc[1];
        b = acc[2];
        n = acc[3];
    }
    unsigned long long rays = 0ull, dropped = 0ull;
    // One call site of the path tracer, so the PTX holds one copy of it.
    for (unsigned int s = first; s < end; ++s) {
        const V3 l = sample_pixel(x, y, s, rays);
        if (write_samples) {
            GwSample& out = P.samples[i];
            out.radiance[0] = l.x;
            out.radiance[1] = l.y;
            out.radiance[2] = l.z;
            out.rays = (unsigned int)rays;
            return;
        }
        accumulate(l, r, g, b, n, dropped);
    }
    if (P.mode == GW_LAUNCH_REDUCE) {
        for (unsigned int k = 0u; k < count; ++k) {
            const GwSample& smp = P.samples[(unsigned long long)k * pixels + p];
            accumulate(v3(smp.radiance[0], smp.radiance[1], smp.radiance[2]), r, g, b, n,
                       dropped);
            rays += smp.rays;
        }
    }
    acc[0] = r;
    acc[1] = g;
    acc[2] = b;
    acc[3] = n;
    if (P.counters != nullptr) {
        atomicAdd(&P.counters[0], rays);
        if (dropped != 0ull) {
            atomicAdd(&P.counters[1], dropped);
        }
    }
}

// Reports the hit: the SBT record's data pointer (payload 0-1), triangle, distance, barycentrics.
extern "C" __global__ void __closesthit__pathtrace()
{
    const unsigned long long data = reinterpret_cast<unsigned long long>(sbt_data());
    float u, v;
    triangle_barycentrics(u, v);
    set_payload<0>((unsigned int)data);
    set_payload<1>((unsigned int)(data >> 32));
    set_payload<2>(primitive_index());
    set_payload<3>(__float_as_uint(ray_tmax()));
    set_payload<4>(__float_as_uint(u));
    set_payload<5>(__float_as_uint(v));
}

// Cut-outs and see-through materials: a candidate hit in a hole of its material's opacity mask,
// or let through by its dissolve, is no hit (see the top of this file; only groups with
// cut-outs or see-through materials run this).
extern "C" __global__ void __anyhit__pathtrace()
{
    const GwHitGroupData& g = *reinterpret_cast<const GwHitGroupData*>(sbt_data());
    float u, v;
    triangle_barycentrics(u, v);
    // Scene::passes_through.
    const unsigned int prim = primitive_index();
    if (is_cut_out(g, prim, u, v) || is_dissolved(g, prim, u, v)) {
        ignore_intersection();
    }
}

// Reports "no hit": a null data pointer.
extern "C" __global__ void __miss__pathtrace()
{
    set_payload<0>(0u);
    set_payload<1>(0u);
}
