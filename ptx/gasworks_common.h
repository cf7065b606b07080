// gasworks_common.h: the device-side port of what the GPU path tracer shares with the CPU
// reference: vectors, the random-number scheme, the sampling helpers, texture lookups and the
// four materials.
//
// Every function here mirrors one in the Rust sources, named in its comment, line by line and
// in the same order of float operations (only FMA contraction, which NVRTC does by default,
// and the last ulp of sqrtf/powf/cosf may differ). Change one side, change the other:
//   src/render/sampler.rs   -> Sampler (Owen-scrambled Sobol' keyed on (pixel, sample, spp, seed))
//   src/cpu/sampling.rs     -> bases, hemisphere and lobe sampling, power heuristic
//   src/cpu/material.rs     -> ShadingFrame, Bsdf (eval / sample / glass), Fresnel
//   src/scene/mod.rs        -> Texture::sample (bilinear with wrap), Texture::height_gradient
//   src/scene/bump.rs       -> uv_tangents, bent_normal (bump and normal maps)
//   src/cpu/integrator.rs   -> offset_ray_origin
#pragma once

#define GW_INLINE static __device__ __forceinline__

// offsetof for the layout static_asserts: NVRTC has neither <cstddef> nor __builtin_offsetof,
// and its front end folds this classic form to a constant. (A host build of this code, as in
// tests/optix_pathtracer_host.rs, defines it as the standard offsetof first.)
#ifndef GW_OFFSETOF
#define GW_OFFSETOF(T, m) ((unsigned long long)(&(((T*)0)->m)))
#endif

// ---------------------------------------------------------------------------------------------
// Vectors (glam's Vec3, scalar: the same operations in the same order)
// ---------------------------------------------------------------------------------------------

struct V3 {
    float x, y, z;
};

GW_INLINE V3 v3(float x, float y, float z)
{
    V3 r;
    r.x = x;
    r.y = y;
    r.z = z;
    return r;
}
GW_INLINE V3 v3s(float s) { return v3(s, s, s); }
GW_INLINE V3 v3_load(const float* p) { return v3(p[0], p[1], p[2]); }
GW_INLINE V3 operator+(V3 a, V3 b) { return v3(a.x + b.x, a.y + b.y, a.z + b.z); }
GW_INLINE V3 operator-(V3 a, V3 b) { return v3(a.x - b.x, a.y - b.y, a.z - b.z); }
GW_INLINE V3 operator-(V3 a) { return v3(-a.x, -a.y, -a.z); }
GW_INLINE V3 operator*(V3 a, V3 b) { return v3(a.x * b.x, a.y * b.y, a.z * b.z); }
GW_INLINE V3 operator*(V3 a, float s) { return v3(a.x * s, a.y * s, a.z * s); }
GW_INLINE V3 operator*(float s, V3 a) { return v3(s * a.x, s * a.y, s * a.z); }
// glam divides each component (not a multiplication by the reciprocal).
GW_INLINE V3 operator/(V3 a, float s) { return v3(a.x / s, a.y / s, a.z / s); }
GW_INLINE V3& operator+=(V3& a, V3 b)
{
    a = a + b;
    return a;
}
GW_INLINE V3& operator*=(V3& a, V3 b)
{
    a = a * b;
    return a;
}
GW_INLINE bool operator==(V3 a, V3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }
GW_INLINE float dot(V3 a, V3 b) { return (a.x * b.x) + (a.y * b.y) + (a.z * b.z); }
GW_INLINE V3 cross(V3 a, V3 b)
{
    return v3(a.y * b.z - b.y * a.z, a.z * b.x - b.z * a.x, a.x * b.y - b.x * a.y);
}
GW_INLINE float length(V3 a) { return sqrtf(dot(a, a)); }
GW_INLINE float length_squared(V3 a) { return dot(a, a); }
// glam: self * (1 / length): NaN or infinite for a zero vector, as on the CPU.
GW_INLINE V3 normalize(V3 a) { return a * (1.0f / length(a)); }
GW_INLINE float max_element(V3 a) { return fmaxf(a.x, fmaxf(a.y, a.z)); }
GW_INLINE bool is_finite(float f) { return isfinite(f); }
GW_INLINE bool is_finite(V3 a) { return is_finite(a.x) && is_finite(a.y) && is_finite(a.z); }
// glam's lerp: self * (1 - s) + rhs * s.
GW_INLINE V3 lerp(V3 a, V3 b, float s) { return a * (1.0f - s) + b * s; }
// Rust's f32::clamp: NaN stays NaN (unlike fminf/fmaxf).
GW_INLINE float clampf(float x, float lo, float hi) { return x < lo ? lo : (x > hi ? hi : x); }

GW_INLINE float luminance(V3 c) { return 0.2126f * c.x + 0.7152f * c.y + 0.0722f * c.z; }

#define GW_PI 3.14159265358979323846f
#define GW_INV_PI (1.0f / GW_PI)

// ---------------------------------------------------------------------------------------------
// Random numbers: src/render/sampler.rs
// ---------------------------------------------------------------------------------------------

#define GW_GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

// mix64: the SplitMix64 finalizer.
GW_INLINE unsigned long long mix64(unsigned long long z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Sampler: the random numbers of one sample of one pixel: Owen-scrambled Sobol' points,
// padded, pixels in Z order (sampler.rs says why). Each draw is a slot: a 1D slot is the first
// Sobol' dimension (van der Corput), a 2D slot the first two, of the sample's index in the
// frame (the pixel's Morton index << sample_bits, plus the sample) shuffled by a nested
// uniform scramble, then Owen-scrambled; the shuffles and scrambles are hashes of (the
// index's region of 2^24, seed, slot) (Burley 2020; Ahmed and Wonka 2020).
struct Sampler {
    unsigned long long region_key;
    unsigned int index_reversed;
    unsigned long long slot;
};

// sampler::laine_karras_permutation (Burley's variant): bit k changes only through bits 0..k.
GW_INLINE unsigned int laine_karras_permutation(unsigned int x, unsigned int seed)
{
    x ^= x * 0x3d20adeau;
    x += seed;
    x *= (seed >> 16) | 1u;
    x ^= x * 0x05526c56u;
    x ^= x * 0x53a22864u;
    return x;
}

// sampler::superset_parity: bit k is the parity of the bits of x at positions b with b & k == k
// (the Sobol' second dimension's point, bit-reversed).
GW_INLINE unsigned int superset_parity(unsigned int x)
{
    x ^= (x >> 1) & 0x55555555u;
    x ^= (x >> 2) & 0x33333333u;
    x ^= (x >> 4) & 0x0F0F0F0Fu;
    x ^= (x >> 8) & 0x00FF00FFu;
    x ^= (x >> 16) & 0x0000FFFFu;
    return x;
}

// sampler::unit_f32: the top 24 bits of a 32-bit fraction (exact in f32).
GW_INLINE float unit_f32(unsigned int bits) { return (float)(bits >> 8) * (1.0f / 16777216.0f); }

// sampler::spread_bits: bit i of v to bit 2i.
GW_INLINE unsigned long long spread_bits(unsigned int v)
{
    unsigned long long w = v;
    w = (w | (w << 16)) & 0x0000FFFF0000FFFFull;
    w = (w | (w << 8)) & 0x00FF00FF00FF00FFull;
    w = (w | (w << 4)) & 0x0F0F0F0F0F0F0F0Full;
    w = (w | (w << 2)) & 0x3333333333333333ull;
    return (w | (w << 1)) & 0x5555555555555555ull;
}

// Sampler::new: sample `sample` of pixel (x, y) of a render whose samples per pixel, rounded
// up to a power of two, are 2^sample_bits (sampler::sample_bits; GwLaunchParams.sample_bits).
GW_INLINE Sampler sampler_new(unsigned int x, unsigned int y, unsigned int sample,
                              unsigned int sample_bits, unsigned long long seed)
{
    const unsigned long long index =
        ((spread_bits(x) | (spread_bits(y) << 1)) << sample_bits) + (unsigned long long)sample;
    Sampler s;
    s.region_key = mix64((index >> 24) ^ mix64(seed ^ GW_GOLDEN_GAMMA));
    s.index_reversed = __brev((unsigned int)index & 0xFFFFFFu);
    s.slot = 0;
    return s;
}

// Sampler::next_slot: the 64 bits the slot's shuffle and scrambles come from.
GW_INLINE unsigned long long next_slot(Sampler& s)
{
    s.slot += 1;
    return mix64(s.region_key + s.slot * GW_GOLDEN_GAMMA);
}

// Sampler::next_1d
GW_INLINE float next_1d(Sampler& s)
{
    const unsigned long long h = next_slot(s);
    const unsigned int shuffled = __brev(laine_karras_permutation(s.index_reversed, (unsigned int)h));
    return unit_f32(__brev(laine_karras_permutation(shuffled, (unsigned int)(h >> 32))));
}

// Sampler::next_2d
GW_INLINE void next_2d(Sampler& s, float& u1, float& u2)
{
    const unsigned long long h = next_slot(s);
    const unsigned int scramble_y = (unsigned int)((h * GW_GOLDEN_GAMMA) >> 32);
    const unsigned int shuffled = __brev(laine_karras_permutation(s.index_reversed, (unsigned int)h));
    u1 = unit_f32(__brev(laine_karras_permutation(shuffled, (unsigned int)(h >> 32))));
    u2 = unit_f32(__brev(laine_karras_permutation(superset_parity(shuffled), scramble_y)));
}

// PixelFilter codes (src/optix/pathtracer/layout.rs: pixel_filter_code).
#define GW_FILTER_BOX 0u
#define GW_FILTER_TENT 1u

// camera::tent_offset: the inverse of the tent's distribution function on [-1, 1].
GW_INLINE float tent_offset(float u)
{
    if (u < 0.5f) {
        return sqrtf(2.0f * u) - 1.0f;
    }
    return 1.0f - sqrtf(2.0f * (1.0f - u));
}

// PixelFilter::place: the image-plane point of the sample of pixel (x, y) with numbers (u1, u2).
GW_INLINE void pixel_filter_place(unsigned int filter, unsigned int x, unsigned int y, float u1,
                                  float u2, float& px, float& py)
{
    if (filter == GW_FILTER_TENT) {
        px = (float)x + 0.5f + tent_offset(u1);
        py = (float)y + 0.5f + tent_offset(u2);
    } else {
        px = (float)x + u1;
        py = (float)y + u2;
    }
}

// camera::concentric_disk: Shirley and Chiu's concentric map of [0, 1)^2 to the unit disk.
GW_INLINE void concentric_disk(float u1, float u2, float& a, float& b)
{
    const float ox = 2.0f * u1 - 1.0f;
    const float oy = 2.0f * u2 - 1.0f;
    if (ox == 0.0f && oy == 0.0f) {
        a = 0.0f;
        b = 0.0f;
        return;
    }
    float r, theta;
    if (fabsf(ox) > fabsf(oy)) {
        r = ox;
        theta = (GW_PI / 4.0f) * (oy / ox);
    } else {
        r = oy;
        theta = (GW_PI / 2.0f) - (GW_PI / 4.0f) * (ox / oy);
    }
    a = r * cosf(theta);
    b = r * sinf(theta);
}

// scene::dissolve_number: the random number in [0, 1) of a hit at barycentrics (u, v) of
// triangle prim of group group, which a see-through material compares with its opacity.
GW_INLINE float dissolve_number(unsigned int group, unsigned int prim, float u, float v)
{
    const unsigned long long triangle =
        mix64((((unsigned long long)group) << 32 | (unsigned long long)prim) ^ GW_GOLDEN_GAMMA);
    const unsigned long long bits = ((unsigned long long)__float_as_uint(u)) << 32 |
                                    (unsigned long long)__float_as_uint(v);
    return (float)(unsigned int)(mix64(bits ^ triangle) >> 40) * (1.0f / 16777216.0f);
}

// ---------------------------------------------------------------------------------------------
// Sampling helpers: src/cpu/sampling.rs
// ---------------------------------------------------------------------------------------------

// orthonormal_basis: Duff et al. 2017; (t, b) with t x b = n.
GW_INLINE void orthonormal_basis(V3 n, V3& t, V3& b)
{
    const float s = copysignf(1.0f, n.z);
    const float a = -1.0f / (s + n.z);
    const float k = n.x * n.y * a;
    t = v3(1.0f + s * n.x * n.x * a, s * k, -s * n.x);
    b = v3(k, s + n.y * n.y * a, -n.y);
}

GW_INLINE V3 local_to_world(V3 l, V3 t, V3 b, V3 n) { return l.x * t + l.y * b + l.z * n; }

GW_INLINE V3 cosine_hemisphere(float u1, float u2)
{
    const float r = sqrtf(u1);
    const float phi = 2.0f * GW_PI * u2;
    return v3(r * cosf(phi), r * sinf(phi), sqrtf(fmaxf(1.0f - u1, 0.0f)));
}

GW_INLINE float cosine_hemisphere_pdf(float c) { return fmaxf(c, 0.0f) * GW_INV_PI; }

GW_INLINE V3 phong_lobe(float n, float u1, float u2)
{
    const float cos_a = powf(u1, 1.0f / (n + 1.0f));
    const float sin_a = sqrtf(fmaxf(1.0f - cos_a * cos_a, 0.0f));
    const float phi = 2.0f * GW_PI * u2;
    return v3(sin_a * cosf(phi), sin_a * sinf(phi), cos_a);
}

GW_INLINE float phong_lobe_pdf(float n, float cos_alpha)
{
    if (cos_alpha <= 0.0f) {
        return 0.0f;
    }
    return (n + 1.0f) * (0.5f * GW_INV_PI) * powf(cos_alpha, n);
}

// uniform_triangle: barycentrics (b1, b2) of vertices 1 and 2.
GW_INLINE void uniform_triangle(float u1, float u2, float& b1, float& b2)
{
    const float s = sqrtf(u1);
    b1 = s * (1.0f - u2);
    b2 = s * u2;
}

GW_INLINE float power_heuristic(float a, float b)
{
    if (isinf(a)) {
        return 1.0f;
    }
    const float a2 = a * a;
    const float b2 = b * b;
    return (a2 + b2 > 0.0f) ? a2 / (a2 + b2) : 0.0f;
}

GW_INLINE V3 reflect(V3 w, V3 n) { return 2.0f * dot(w, n) * n - w; }

// ---------------------------------------------------------------------------------------------
// Scene data as the device sees it (mirrored by src/optix/pathtracer/layout.rs)
// ---------------------------------------------------------------------------------------------

// MaterialKind, in the order of the Rust enum.
enum : unsigned int {
    GW_DIFFUSE = 0u,
    GW_GLOSSY = 1u,
    GW_MIRROR = 2u,
    GW_GLASS = 3u,
};

// One scene::Material (96 bytes).
struct GwMaterial {
    float diffuse[3];
    unsigned int kind;
    float specular[3];
    float shininess;
    float transmittance[3];
    float ior;
    float emission[3];
    int texture;         // index into the texture table, or -1 (no map_Kd)
    int opacity_texture; // index into the texture table of the map_d mask, or -1 (no cut-out)
    int emission_texture; // index into the texture table of the map_Ke map, or -1 (none)
    int bump_texture;     // index into the texture table of the bump or normal map, or -1
    unsigned int bump_kind; // GW_BUMP_HEIGHT or GW_BUMP_NORMAL (0 without a map)
    float bump_scale;     // the map's -bm multiplier
    float opacity;        // Material::opacity where the material dissolves, else 1
    int specular_texture; // index into the texture table of the map_Ks map, or -1 (none)
    unsigned int pad;
};

// layout::bump_kind_code.
enum : unsigned int {
    GW_BUMP_NONE = 0u,
    GW_BUMP_HEIGHT = 1u,
    GW_BUMP_NORMAL = 2u,
};

// One scene::Texture's place in the texel array, and its UvMapping (32 bytes).
struct GwTexture {
    unsigned long long first_texel; // index of its first texel (3 floats each)
    unsigned int width;
    unsigned int height;
    float uv_scale[2];
    float uv_offset[2];
};

static_assert(sizeof(GwMaterial) == 96, "GwMaterial layout");
static_assert(GW_OFFSETOF(GwMaterial, kind) == 12, "GwMaterial.kind");
static_assert(GW_OFFSETOF(GwMaterial, shininess) == 28, "GwMaterial.shininess");
static_assert(GW_OFFSETOF(GwMaterial, ior) == 44, "GwMaterial.ior");
static_assert(GW_OFFSETOF(GwMaterial, emission) == 48, "GwMaterial.emission");
static_assert(GW_OFFSETOF(GwMaterial, texture) == 60, "GwMaterial.texture");
static_assert(GW_OFFSETOF(GwMaterial, opacity_texture) == 64, "GwMaterial.opacity_texture");
static_assert(GW_OFFSETOF(GwMaterial, emission_texture) == 68, "GwMaterial.emission_texture");
static_assert(GW_OFFSETOF(GwMaterial, bump_texture) == 72, "GwMaterial.bump_texture");
static_assert(GW_OFFSETOF(GwMaterial, bump_kind) == 76, "GwMaterial.bump_kind");
static_assert(GW_OFFSETOF(GwMaterial, bump_scale) == 80, "GwMaterial.bump_scale");
static_assert(GW_OFFSETOF(GwMaterial, opacity) == 84, "GwMaterial.opacity");
static_assert(GW_OFFSETOF(GwMaterial, specular_texture) == 88, "GwMaterial.specular_texture");
static_assert(sizeof(GwTexture) == 32, "GwTexture layout");
static_assert(GW_OFFSETOF(GwTexture, width) == 8, "GwTexture.width");
static_assert(GW_OFFSETOF(GwTexture, uv_scale) == 16, "GwTexture.uv_scale");
static_assert(GW_OFFSETOF(GwTexture, uv_offset) == 24, "GwTexture.uv_offset");

GW_INLINE bool is_emissive(const GwMaterial& m) { return max_element(v3_load(m.emission)) > 0.0f; }

// Rust's f32::rem_euclid(1.0).
GW_INLINE float rem_euclid1(float x)
{
    const float r = fmodf(x, 1.0f);
    return r < 0.0f ? r + 1.0f : r;
}

GW_INLINE long long rem_euclid_i(long long a, long long m)
{
    const long long r = a % m;
    return r < 0 ? r + m : r;
}

// Texture::bilinear_cell: the top-left texel (not yet wrapped) of the cell the bilinear lookup
// at (u_in, v_in) blends, and the weights of the texels right of and below it; at the
// coordinates UvMapping::apply gives (uv * scale + offset); texel rows top (v = 1) first.
GW_INLINE void texture_cell(const GwTexture& t, float u_in, float v_in, long long& xi,
                            long long& yi, float& fx, float& fy)
{
    const float u = u_in * t.uv_scale[0] + t.uv_offset[0];
    const float v = v_in * t.uv_scale[1] + t.uv_offset[1];
    const float x = rem_euclid1(u) * (float)t.width - 0.5f;
    const float y = (1.0f - rem_euclid1(v)) * (float)t.height - 0.5f;
    const float x0 = floorf(x);
    const float y0 = floorf(y);
    xi = (long long)x0;
    yi = (long long)y0;
    fx = x - x0;
    fy = y - y0;
}

// Texture::texel_wrapped: the first of the three floats of texel (xi, yi), both wrapped.
GW_INLINE const float* texel_wrapped(const GwTexture& t, const float* texels, long long xi,
                                     long long yi)
{
    const long long w = (long long)t.width;
    const long long h = (long long)t.height;
    return texels + 3ull * t.first_texel + 3ll * (rem_euclid_i(yi, h) * w + rem_euclid_i(xi, w));
}

// Texture::sample: bilinear with wrapping.
GW_INLINE V3 texture_sample(const GwTexture& t, const float* texels, float u_in, float v_in)
{
    long long xi, yi;
    float fx, fy;
    texture_cell(t, u_in, v_in, xi, yi, fx, fy);
#define GW_TEXEL(X, Y) v3_load(texel_wrapped(t, texels, (X), (Y)))
    const V3 top = lerp(GW_TEXEL(xi, yi), GW_TEXEL(xi + 1, yi), fx);
    const V3 bottom = lerp(GW_TEXEL(xi, yi + 1), GW_TEXEL(xi + 1, yi + 1), fx);
#undef GW_TEXEL
    return lerp(top, bottom, fy);
}

// Texture::height_gradient: the derivatives of texture_sample's first channel per texel, x
// along the rows (towards +u), y down the columns (towards -v); exact for the bilinear lookup.
GW_INLINE void texture_height_gradient(const GwTexture& t, const float* texels, float u_in,
                                       float v_in, float& d_dx, float& d_dy)
{
    long long xi, yi;
    float fx, fy;
    texture_cell(t, u_in, v_in, xi, yi, fx, fy);
    const float t00 = *texel_wrapped(t, texels, xi, yi);
    const float t10 = *texel_wrapped(t, texels, xi + 1, yi);
    const float t01 = *texel_wrapped(t, texels, xi, yi + 1);
    const float t11 = *texel_wrapped(t, texels, xi + 1, yi + 1);
    d_dx = (t10 - t00) * (1.0f - fy) + (t11 - t01) * fy;
    d_dy = (t01 - t00) * (1.0f - fx) + (t11 - t10) * fx;
}

// ---------------------------------------------------------------------------------------------
// Bump and normal maps: src/scene/bump.rs
// ---------------------------------------------------------------------------------------------

// direction: -1, 0 or 1.
GW_INLINE float bump_direction(float s) { return s > 0.0f ? 1.0f : (s < 0.0f ? -1.0f : 0.0f); }

// uv_tangents: (dp/du, dp/dv) up to a positive factor; false where the UVs are degenerate.
GW_INLINE bool uv_tangents(V3 p0, V3 p1, V3 p2, float u0, float v0, float u1, float v1, float u2,
                           float v2, V3& dpdu, V3& dpdv)
{
    const V3 dp1 = p1 - p0;
    const V3 dp2 = p2 - p0;
    const float du1 = u1 - u0;
    const float dv1 = v1 - v0;
    const float du2 = u2 - u0;
    const float dv2 = v2 - v0;
    const float det = du1 * dv2 - dv1 * du2;
    if (!(det != 0.0f && is_finite(det))) {
        return false;
    }
    const float s = bump_direction(det);
    dpdu = (dp1 * dv2 - dp2 * dv1) * s;
    dpdv = (dp2 * du1 - dp1 * du2) * s;
    return true;
}

GW_INLINE V3 tangent_in_plane(V3 v, V3 n) { return normalize(v - n * dot(n, v)); }

// bent_normal: the unit shading normal n bent by the material's map at (u, v); n itself where
// the map leaves it or the result is not finite.
GW_INLINE V3 bent_normal(const GwMaterial& m, const GwTexture* textures, const float* texels,
                         V3 n, V3 dpdu, V3 dpdv, float u, float v)
{
    const GwTexture& map = textures[m.bump_texture];
    const float scale = m.bump_scale;
    V3 bent;
    if (m.bump_kind == GW_BUMP_HEIGHT) {
        float dh_dx, dh_dy;
        texture_height_gradient(map, texels, u, v, dh_dx, dh_dy);
        const float a = scale * (dh_dx * bump_direction(map.uv_scale[0]));
        const float b = scale * (-dh_dy * bump_direction(map.uv_scale[1]));
        if (a == 0.0f && b == 0.0f) {
            return n;
        }
        const V3 t = tangent_in_plane(dpdu, n);
        const V3 bt = tangent_in_plane(dpdv, n);
        V3 c = cross(t + n * a, bt + n * b);
        if (dot(c, n) < 0.0f) {
            c = -c;
        }
        bent = normalize(c);
    } else if (m.bump_kind == GW_BUMP_NORMAL) {
        const V3 c = texture_sample(map, texels, u, v);
        const V3 t = tangent_in_plane(dpdu, n) * bump_direction(map.uv_scale[0]);
        const float handed = (dot(cross(n, t), dpdv) < 0.0f) ? -1.0f : 1.0f;
        const V3 bt = cross(n, t) * (handed * bump_direction(map.uv_scale[1]));
        bent = normalize(t * (scale * c.x) + bt * (scale * c.y) + n * c.z);
    } else {
        return n;
    }
    return is_finite(bent) ? bent : n;
}

// ---------------------------------------------------------------------------------------------
// Materials: src/cpu/material.rs
// ---------------------------------------------------------------------------------------------

struct ShadingFrame {
    V3 n_geo; // geometric normal on wo's side
    V3 n;     // shading normal on the same side
    V3 t, b;
    bool front; // wo on the winding's front side (glass: entering)
};

GW_INLINE ShadingFrame shading_frame(V3 n_geo_raw, V3 n_shade_raw, V3 wo)
{
    ShadingFrame f;
    f.front = dot(wo, n_geo_raw) >= 0.0f;
    const float side = f.front ? 1.0f : -1.0f;
    f.n_geo = side * n_geo_raw;
    V3 n = (dot(n_shade_raw, n_geo_raw) < 0.0f) ? (-side) * n_shade_raw : side * n_shade_raw;
    if (!(dot(wo, n) > 0.0f)) {
        n = f.n_geo;
    }
    f.n = n;
    orthonormal_basis(n, f.t, f.b);
    return f;
}

struct BsdfEval {
    V3 f_cos;
    float pdf;
};

struct BsdfSample {
    V3 wi;
    V3 weight;
    float pdf;
    bool delta;
};

struct Bsdf {
    unsigned int kind;
    V3 kd, ks;
    float shininess;
    float ior;
    V3 transmittance;
    ShadingFrame frame;
};

// Bsdf::new: kd = Kd * texture(uv) when the material has a map_Kd, ks = Ks * map(uv) when it
// has a map_Ks (and the mesh has UVs).
GW_INLINE Bsdf bsdf_new(const GwMaterial& m, const GwTexture* textures, unsigned int texture_count,
                        const float* texels, bool has_uv, float u, float v, ShadingFrame frame)
{
    V3 texel = v3s(1.0f);
    if (m.texture >= 0 && has_uv && (unsigned int)m.texture < texture_count) {
        texel = texture_sample(textures[m.texture], texels, u, v);
    }
    Bsdf b;
    b.kind = m.kind;
    b.kd = v3_load(m.diffuse) * texel;
    b.ks = v3_load(m.specular);
    if (m.specular_texture >= 0) {
        V3 specular = v3s(1.0f);
        if (has_uv && (unsigned int)m.specular_texture < texture_count) {
            specular = texture_sample(textures[m.specular_texture], texels, u, v);
        }
        b.ks = b.ks * specular;
    }
    b.shininess = fmaxf(m.shininess, 0.0f);
    b.ior = m.ior;
    b.transmittance = v3_load(m.transmittance);
    b.frame = frame;
    return b;
}

GW_INLINE bool bsdf_is_delta(const Bsdf& b) { return b.kind == GW_MIRROR || b.kind == GW_GLASS; }

GW_INLINE float diffuse_lobe_probability(const Bsdf& b)
{
    switch (b.kind) {
    case GW_DIFFUSE:
        return 1.0f;
    case GW_GLOSSY: {
        const float d = fmaxf(luminance(b.kd), 0.0f);
        const float s = fmaxf(luminance(b.ks), 0.0f);
        return (d + s > 0.0f) ? d / (d + s) : 1.0f;
    }
    default:
        return 0.0f;
    }
}

GW_INLINE BsdfEval bsdf_eval(const Bsdf& b, V3 wo, V3 wi)
{
    BsdfEval zero;
    zero.f_cos = v3s(0.0f);
    zero.pdf = 0.0f;
    const ShadingFrame& fr = b.frame;
    const float cos_i = dot(wi, fr.n);
    if (!(dot(wo, fr.n_geo) > 0.0f && dot(wi, fr.n_geo) > 0.0f && cos_i > 0.0f)) {
        return zero;
    }
    BsdfEval e;
    if (b.kind == GW_DIFFUSE) {
        e.f_cos = b.kd * (GW_INV_PI * cos_i);
        e.pdf = cosine_hemisphere_pdf(cos_i);
        return e;
    }
    if (b.kind == GW_GLOSSY) {
        const float n_exp = b.shininess;
        const float cos_a = fmaxf(dot(wi, reflect(wo, fr.n)), 0.0f);
        const float lobe = powf(cos_a, n_exp);
        const V3 f = b.kd * GW_INV_PI + b.ks * ((n_exp + 2.0f) * 0.5f * GW_INV_PI * lobe);
        const float p_d = diffuse_lobe_probability(b);
        e.f_cos = f * cos_i;
        e.pdf = p_d * cosine_hemisphere_pdf(cos_i) + (1.0f - p_d) * phong_lobe_pdf(n_exp, cos_a);
        return e;
    }
    return zero;
}

// fresnel_dielectric: exact unpolarised Fresnel reflectance (1 under total internal reflection).
GW_INLINE float fresnel_dielectric(float cos_i, float eta_i, float eta_t)
{
    cos_i = clampf(cos_i, 0.0f, 1.0f);
    const float ratio = eta_i / eta_t;
    const float sin2_t = ratio * ratio * (1.0f - cos_i * cos_i);
    if (sin2_t >= 1.0f) {
        return 1.0f;
    }
    const float cos_t = sqrtf(1.0f - sin2_t);
    const float r_s = (eta_i * cos_i - eta_t * cos_t) / (eta_i * cos_i + eta_t * cos_t);
    const float r_p = (eta_t * cos_i - eta_i * cos_t) / (eta_t * cos_i + eta_i * cos_t);
    const float f = 0.5f * (r_s * r_s + r_p * r_p);
    return is_finite(f) ? clampf(f, 0.0f, 1.0f) : 1.0f;
}

// Bsdf::sample_glass. Returns false when the path ends.
GW_INLINE bool bsdf_sample_glass(const Bsdf& b, V3 wo, float u_lobe, BsdfSample& out)
{
    const ShadingFrame& fr = b.frame;
    const float eta_i = fr.front ? 1.0f : b.ior;
    const float eta_t = fr.front ? b.ior : 1.0f;
    const float cos_i = clampf(dot(wo, fr.n), 0.0f, 1.0f);
    const float f = fresnel_dielectric(cos_i, eta_i, eta_t);
    out.pdf = 0.0f;
    out.delta = true;
    if (u_lobe < f) {
        const V3 wi = reflect(wo, fr.n);
        if (!(dot(wi, fr.n_geo) > 0.0f)) {
            return false;
        }
        out.wi = wi;
        out.weight = v3s(1.0f);
        return true;
    }
    const float eta = eta_i / eta_t;
    const float sin2_t = eta * eta * (1.0f - cos_i * cos_i);
    const float cos_t = sqrtf(fmaxf(1.0f - sin2_t, 0.0f));
    const V3 wi = normalize(-eta * wo + (eta * cos_i - cos_t) * fr.n);
    if (!(dot(wi, fr.n_geo) < 0.0f)) {
        return false;
    }
    out.wi = wi;
    out.weight = b.transmittance * (eta * eta);
    return true;
}

// Bsdf::sample: consumes (u_lobe, u1, u2) whatever the material. Returns false when the path
// ends (direction on the wrong side of the geometric normal, or zero pdf).
GW_INLINE bool bsdf_sample(const Bsdf& b, V3 wo, float u_lobe, float u1, float u2, BsdfSample& out)
{
    const ShadingFrame& fr = b.frame;
    if (!(dot(wo, fr.n_geo) > 0.0f)) {
        return false;
    }
    switch (b.kind) {
    case GW_DIFFUSE: {
        const V3 wi = local_to_world(cosine_hemisphere(u1, u2), fr.t, fr.b, fr.n);
        const float cos_i = dot(wi, fr.n);
        if (!(dot(wi, fr.n_geo) > 0.0f && cos_i > 0.0f)) {
            return false;
        }
        out.wi = wi;
        out.weight = b.kd;
        out.pdf = cosine_hemisphere_pdf(cos_i);
        out.delta = false;
        return true;
    }
    case GW_GLOSSY: {
        V3 wi;
        if (u_lobe < diffuse_lobe_probability(b)) {
            wi = local_to_world(cosine_hemisphere(u1, u2), fr.t, fr.b, fr.n);
        } else {
            const V3 r = reflect(wo, fr.n);
            V3 rt, rb;
            orthonormal_basis(r, rt, rb);
            wi = local_to_world(phong_lobe(b.shininess, u1, u2), rt, rb, r);
        }
        const BsdfEval e = bsdf_eval(b, wo, wi);
        if (!(e.pdf > 0.0f)) {
            return false;
        }
        out.wi = wi;
        out.weight = e.f_cos / e.pdf;
        out.pdf = e.pdf;
        out.delta = false;
        return true;
    }
    case GW_MIRROR: {
        const V3 wi = reflect(wo, fr.n);
        if (!(dot(wi, fr.n_geo) > 0.0f)) {
            return false;
        }
        out.wi = wi;
        out.weight = b.ks;
        out.pdf = 0.0f;
        out.delta = true;
        return true;
    }
    case GW_GLASS:
        return bsdf_sample_glass(b, wo, u_lobe, out);
    default:
        return false;
    }
}

// ---------------------------------------------------------------------------------------------
// Rays: src/cpu/integrator.rs
// ---------------------------------------------------------------------------------------------

// offset_ray_origin: p + n * max(scale / 32768, 1 / 65536), scale being the largest coordinate
// magnitude of the triangle the point lies on (triangle_scale). See the Rust comment for why
// the triangle's scale and not the point's own coordinates.
GW_INLINE float offset_distance(float scale)
{
    return fmaxf(scale * (1.0f / 32768.0f), 1.0f / 65536.0f);
}

GW_INLINE V3 offset_ray_origin(V3 p, V3 n, float scale)
{
    return p + n * offset_distance(scale);
}

// triangle_scale: the largest coordinate magnitude of the three corners.
GW_INLINE float triangle_scale(V3 a, V3 b, V3 c)
{
    const float x = fmaxf(fmaxf(fabsf(a.x), fabsf(b.x)), fabsf(c.x));
    const float y = fmaxf(fmaxf(fabsf(a.y), fabsf(b.y)), fabsf(c.y));
    const float z = fmaxf(fmaxf(fabsf(a.z), fabsf(b.z)), fabsf(c.z));
    return fmaxf(fmaxf(x, y), z);
}
