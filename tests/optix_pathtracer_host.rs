//! The device path tracer's code, checked on the host against the CPU reference, bit for bit.
//!
//! `ptx/pathtrace.cu` and `ptx/gasworks_common.h` are compiled here by the host's C++ compiler
//! (no GPU, no CUDA), with a stand-in for the few OptiX intrinsics they call: `optixTrace`
//! becomes a brute-force loop over the hit records' triangles using the CPU's own watertight
//! triangle test and (t, group, prim) tie order, which is exactly what the CPU BVH returns.
//! The scene blob, the hit records and the launch parameters are the ones the Rust host code
//! packs for the GPU (`optix::pathtracer::{pack, launch}`), relocated to host memory. The
//! stand-in runs the ray-generation program once per launch index, as a launch would.
//!
//! With floating-point contraction off on both sides (Rust never contracts; the harness is built
//! with `-ffp-contract=off`) and the same libm, every sample must then come out with the same
//! bits as `CpuBackend::render_tile`: the port of the sampler, the draw order, the materials,
//! textures, NEE with MIS, Russian roulette and the accumulation order is exact, not merely
//! statistically right. What this cannot check is OptiX itself (the SBT, the payload plumbing,
//! the hardware's own triangle test): that is the job of the GPU tests in `optix_pathtracer.rs`.
//!
//! The same compiler also checks the layout of every struct the host hands the device code
//! (`layout.rs`, `raycast.rs`): sizes, offsets and field sizes, asserted in C++ from the Rust
//! `offset_of!` values, so that a field that differs fails to compile (the NVRTC build only
//! evaluates the `static_assert`s the `.cu` files happen to contain).
//!
//! The tests need a C++17 compiler (`$CXX`, else `c++`): see `tests/support/mod.rs` for what
//! happens without one (ignored when none was found at build time, a failure on CI).

mod cpu_common;
mod support;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use cpu_common::*;
use gasworks::cpu::CpuBackend;
use gasworks::optix::pathtracer::launch::{
    frame_params, launch_work, plan_launches, step_params, DeviceShape, LaunchMode, LaunchStep,
    WorkerBuffers, MAX_SAMPLE_SLOTS,
};
use gasworks::optix::pathtracer::pack::{hit_group_data, pack_scene};
use gasworks::render::{RenderSettings, Tile, TileRenderer};
use gasworks::scene::{Material, MaterialKind, PixelFilter, Scene, Texture};
use glam::{Vec2, Vec3};

const PATHTRACE_CU: &str = include_str!("../ptx/pathtrace.cu");
const GASWORKS_COMMON_H: &str = include_str!("../ptx/gasworks_common.h");

/// Where the blob pretends to live on the device; the harness relocates pointers from it.
const FAKE_BASE: u64 = 0x7f00_0000_0000;

const PRELUDE: &str = r#"
// Host stand-ins for the CUDA built-ins the device code uses.
#include <cmath>
#include <cstddef>
#include <cstring>
#include <math.h>
#define __device__
#define __forceinline__ inline
#define __global__
#define __constant__
#define GW_OFFSETOF(T, m) offsetof(T, m)
using std::isfinite;
using std::isinf;
static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
static inline unsigned int __float_as_uint(float f) { unsigned int i; std::memcpy(&i, &f, 4); return i; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline unsigned int __brev(unsigned int x) { unsigned int r = 0; for (int i = 0; i < 32; ++i) { r = (r << 1) | (x & 1u); x >>= 1; } return r; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned long long atomicAdd(unsigned long long* a, unsigned long long v) { unsigned long long o = *a; *a += v; return o; }
"#;

const OPTIX_SHIM: &str = r#"
// Host stand-in for optix_device_min.h: a launch index set by the harness, and a trace that the
// harness implements by brute force.
#pragma once
typedef unsigned long long OptixTraversableHandle;
namespace optix_min {
enum : unsigned int { RAY_FLAG_NONE = 0u, RAY_FLAG_DISABLE_ANYHIT = 1u, PAYLOAD_TYPE_DEFAULT = 0u };
extern unsigned int g_launch_index;
inline unsigned int launch_index_x() { return g_launch_index; }
void trace6(OptixTraversableHandle handle, float ox, float oy, float oz, float dx, float dy,
            float dz, float tmin, float tmax, unsigned int visibility_mask, unsigned int ray_flags,
            unsigned int sbt_offset, unsigned int sbt_stride, unsigned int miss_index,
            unsigned int& p0, unsigned int& p1, unsigned int& p2, unsigned int& p3,
            unsigned int& p4, unsigned int& p5);
// The candidate hit the harness's trace hands the any-hit program, and what it decided. (The
// closest-hit and miss programs also read these, but the harness never runs them: its trace
// writes their payload itself.)
struct CandidateHit { const void* record; unsigned int prim; float t, u, v; bool ignored; };
extern CandidateHit g_candidate;
inline unsigned int primitive_index() { return g_candidate.prim; }
inline unsigned int instance_id() { return 0u; }
inline float ray_tmax() { return g_candidate.t; }
inline void triangle_barycentrics(float& u, float& v) { u = g_candidate.u; v = g_candidate.v; }
inline const void* sbt_data() { return g_candidate.record; }
inline void ignore_intersection() { g_candidate.ignored = true; }
template <unsigned int Slot> inline void set_payload(unsigned int) {}
}
"#;

const HARNESS: &str = r#"
#include "pathtrace.cu"
#include <cstdio>
#include <cstdlib>
#include <vector>

unsigned int optix_min::g_launch_index = 0;
optix_min::CandidateHit optix_min::g_candidate = {nullptr, 0u, 0.0f, 0.0f, 0.0f, false};
static std::vector<GwHitGroupData> g_records;

// The CPU's RayData and intersect_triangle (src/cpu/bvh.rs): Woop, Benthin, Wald's watertight
// test with the double-precision fallback for edge functions that round to zero.
struct HostRay { float o[3], d[3]; int kx, ky, kz; float sx, sy, sz; };

static HostRay make_ray(const float* o, const float* d) {
    HostRay r;
    for (int i = 0; i < 3; ++i) { r.o[i] = o[i]; r.d[i] = d[i]; }
    const float ax = fabsf(d[0]), ay = fabsf(d[1]), az = fabsf(d[2]);
    r.kz = ax > ay ? (ax > az ? 0 : 2) : (ay > az ? 1 : 2);
    r.kx = (r.kz + 1) % 3;
    r.ky = (r.kx + 1) % 3;
    r.sx = -d[r.kx] / d[r.kz];
    r.sy = -d[r.ky] / d[r.kz];
    r.sz = 1.0f / d[r.kz];
    return r;
}

static bool intersect(const HostRay& r, const float* p0, const float* p1, const float* p2,
                      float tmin, float tmax, float& t, float& u, float& v) {
    float a[3], b[3], c[3];
    for (int i = 0; i < 3; ++i) { a[i] = p0[i] - r.o[i]; b[i] = p1[i] - r.o[i]; c[i] = p2[i] - r.o[i]; }
    const float ax = a[r.kx] + r.sx * a[r.kz], ay = a[r.ky] + r.sy * a[r.kz];
    const float bx = b[r.kx] + r.sx * b[r.kz], by = b[r.ky] + r.sy * b[r.kz];
    const float cx = c[r.kx] + r.sx * c[r.kz], cy = c[r.ky] + r.sy * c[r.kz];
    float e0 = bx * cy - by * cx, e1 = cx * ay - cy * ax, e2 = ax * by - ay * bx;
    if (e0 == 0.0f || e1 == 0.0f || e2 == 0.0f) {
        e0 = (float)((double)bx * (double)cy - (double)by * (double)cx);
        e1 = (float)((double)cx * (double)ay - (double)cy * (double)ax);
        e2 = (float)((double)ax * (double)by - (double)ay * (double)bx);
    }
    if ((e0 < 0.0f || e1 < 0.0f || e2 < 0.0f) && (e0 > 0.0f || e1 > 0.0f || e2 > 0.0f)) return false;
    const float det = e0 + e1 + e2;
    if (det == 0.0f) return false;
    const float az = r.sz * a[r.kz], bz = r.sz * b[r.kz], cz = r.sz * c[r.kz];
    const float tt = (e0 * az + e1 * bz + e2 * cz) / det;
    if (!(tt > tmin && tt < tmax)) return false;
    t = tt; u = e1 / det; v = e2 / det;
    return true;
}

// optixTrace by brute force over every record's triangles, in (group, prim) order, keeping the
// first of equally close hits: the CPU BVH's (t, group, prim) order. Unless the ray disables
// any-hit programs, a candidate that would be kept is first offered to __anyhit__pathtrace,
// which may ignore it (a cut-out's hole), as OptiX does for a build input whose any-hit is
// enabled; the program decides nothing for the other groups, so offering it every candidate is
// the same as OptiX running it only on groups with cut-outs. A miss runs the miss program's
// writes; a hit runs the closest-hit program's, unless the ray disables it.
void optix_min::trace6(OptixTraversableHandle, float ox, float oy, float oz, float dx, float dy,
                       float dz, float tmin, float tmax, unsigned int, unsigned int ray_flags,
                       unsigned int, unsigned int, unsigned int, unsigned int& p0,
                       unsigned int& p1, unsigned int& p2, unsigned int& p3, unsigned int& p4,
                       unsigned int& p5) {
    const float o[3] = {ox, oy, oz}, d[3] = {dx, dy, dz};
    const HostRay r = make_ray(o, d);
    const bool any = (ray_flags & GW_RAY_FLAG_TERMINATE_ON_FIRST_HIT) != 0u;
    const GwHitGroupData* best = nullptr;
    float bt = tmax, bu = 0.0f, bv = 0.0f;
    unsigned int bprim = 0u;
    for (const GwHitGroupData& g : g_records) {
        for (unsigned int prim = 0; prim < g.triangle_count; ++prim) {
            const unsigned int* tri = g.indices + 3u * prim;
            float t, u, v;
            if (intersect(r, g.positions + 3u * tri[0], g.positions + 3u * tri[1],
                          g.positions + 3u * tri[2], tmin, tmax, t, u, v)
                && (best == nullptr || t < bt)) {
                if ((ray_flags & optix_min::RAY_FLAG_DISABLE_ANYHIT) == 0u) {
                    optix_min::g_candidate = {&g, prim, t, u, v, false};
                    __anyhit__pathtrace();
                    if (optix_min::g_candidate.ignored) continue;
                }
                best = &g; bt = t; bu = u; bv = v; bprim = prim;
                if (any) break;
            }
        }
        if (any && best != nullptr) break;
    }
    if (best == nullptr) { p0 = 0u; p1 = 0u; return; }
    // No closest-hit program for this ray: the payload stays as the caller set it.
    if ((ray_flags & GW_RAY_FLAG_DISABLE_CLOSESTHIT) != 0u) return;
    const unsigned long long ptr = reinterpret_cast<unsigned long long>(best);
    p0 = (unsigned int)ptr; p1 = (unsigned int)(ptr >> 32);
    p2 = bprim; p3 = __float_as_uint(bt); p4 = __float_as_uint(bu); p5 = __float_as_uint(bv);
}

static void read_exact(FILE* f, void* p, size_t n) {
    if (n != 0 && fread(p, 1, n, f) != n) { fprintf(stderr, "short input\n"); exit(2); }
}

// Input: fake base, blob, records, the tile's launches (params and width each), initial
// accumulation, skip bytes (a length, 0 or one per pixel, then the bytes). Output: accumulation, then the two counters. The launches run one after
// another, as on one stream, sharing the accumulation, the samples buffer and the counters.
int main(int argc, char** argv) {
    if (argc != 3) { fprintf(stderr, "usage: harness IN OUT\n"); return 2; }
    FILE* in = fopen(argv[1], "rb");
    if (!in) { perror("input"); return 2; }
    unsigned long long base = 0, blob_len = 0, records = 0, launches = 0;
    read_exact(in, &base, 8);
    read_exact(in, &blob_len, 8);
    std::vector<unsigned char> blob(blob_len + 16);
    read_exact(in, blob.data(), blob_len);
    read_exact(in, &records, 8);
    g_records.resize(records);
    read_exact(in, g_records.data(), records * sizeof(GwHitGroupData));
    read_exact(in, &launches, 8);
    std::vector<GwLaunchParams> params(launches);
    std::vector<unsigned int> widths(launches);
    size_t slots = 0;
    for (unsigned long long k = 0; k < launches; ++k) {
        unsigned int width_pad[2];
        read_exact(in, &params[k], sizeof(GwLaunchParams));
        read_exact(in, width_pad, 8);
        widths[k] = width_pad[0];
        if (params[k].mode == GW_LAUNCH_SAMPLES && widths[k] > slots) slots = widths[k];
    }
    if (launches == 0) { fprintf(stderr, "no launches\n"); return 2; }
    const size_t pixels = (size_t)params[0].tile_w * params[0].tile_h;
    std::vector<float> accum(4 * pixels);
    read_exact(in, accum.data(), accum.size() * sizeof(float));
    // The skip bytes, one per pixel, where the launches' parameters point at some.
    unsigned long long skip_len = 0;
    read_exact(in, &skip_len, 8);
    std::vector<unsigned char> skip(skip_len);
    read_exact(in, skip.data(), skip_len);
    fclose(in);
    std::vector<GwSample> samples(slots + 1);

    auto reloc = [&](unsigned long long p) -> unsigned long long {
        return p == 0 ? 0 : reinterpret_cast<unsigned long long>(blob.data()) + (p - base);
    };
    for (GwHitGroupData& g : g_records) {
        g.positions = reinterpret_cast<const float*>(reloc((unsigned long long)g.positions));
        g.indices = reinterpret_cast<const unsigned int*>(reloc((unsigned long long)g.indices));
        g.normals = reinterpret_cast<const float*>(reloc((unsigned long long)g.normals));
        g.uvs = reinterpret_cast<const float*>(reloc((unsigned long long)g.uvs));
        g.face_materials = reinterpret_cast<const unsigned int*>(reloc((unsigned long long)g.face_materials));
        g.light_index = reinterpret_cast<const unsigned int*>(reloc((unsigned long long)g.light_index));
    }
    unsigned long long counters[2] = {0, 0};
    for (unsigned long long k = 0; k < launches; ++k) {
        GwLaunchParams p = params[k];
        p.materials = reinterpret_cast<const GwMaterial*>(reloc((unsigned long long)p.materials));
        p.textures = reinterpret_cast<const GwTexture*>(reloc((unsigned long long)p.textures));
        p.texels = reinterpret_cast<const float*>(reloc((unsigned long long)p.texels));
        p.lights = reinterpret_cast<const GwLight*>(reloc((unsigned long long)p.lights));
        p.light_cdf = reinterpret_cast<const float*>(reloc((unsigned long long)p.light_cdf));
        p.env_texels = reinterpret_cast<const float*>(reloc((unsigned long long)p.env_texels));
        p.env_row_cdf = reinterpret_cast<const float*>(reloc((unsigned long long)p.env_row_cdf));
        p.env_col_cdf = reinterpret_cast<const float*>(reloc((unsigned long long)p.env_col_cdf));
        p.env_uv_pdf = reinterpret_cast<const float*>(reloc((unsigned long long)p.env_uv_pdf));
        p.accum = accum.data();
        p.counters = counters;
        p.samples = p.mode == GW_LAUNCH_ACCUMULATE ? nullptr : samples.data();
        if (p.skip != nullptr && skip_len != pixels) { fprintf(stderr, "skip bytes: %llu for %zu pixels\n", skip_len, pixels); return 2; }
        p.skip = p.skip == nullptr ? nullptr : skip.data();
        pathtrace_params = p;
        for (unsigned int i = 0; i < widths[k]; ++i) {
            optix_min::g_launch_index = i;
            __raygen__pathtrace();
        }
    }
    FILE* out = fopen(argv[2], "wb");
    if (!out) { perror("output"); return 2; }
    fwrite(accum.data(), sizeof(float), accum.size(), out);
    fwrite(counters, 8, 2, out);
    fclose(out);
    return 0;
}
"#;

/// The harness binary, compiled once per version of its sources; `None` where a missing C++
/// compiler may be skipped (see `support::compiler`).
///
/// It lives in the system's temporary folder under a name that carries a hash of every source
/// and of the compiler's name, so a test run reuses the binary an earlier run built from the
/// same sources and the folder does not grow by one copy per run. It is built in a private
/// folder and renamed into place, so two test processes that build it at once never run a
/// half-written binary: the loser of the rename uses the winner's.
fn harness() -> Option<&'static Path> {
    static HARNESS_BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    HARNESS_BIN
        .get_or_init(|| {
            let cxx = support::compiler("CXX", "c++", "the host harness of the device code")?;
            // The sources are embedded, so the test binary runs anywhere (a GPU host too).
            let sources = [
                ("pathtrace.cu", PATHTRACE_CU),
                ("gasworks_common.h", GASWORKS_COMMON_H),
                ("prelude.h", PRELUDE),
                ("optix_device_min.h", OPTIX_SHIM),
                ("harness.cpp", HARNESS),
            ];
            let mut hash = gasworks::fnv::Fnv::default();
            hash.field(cxx.as_bytes());
            for (name, text) in sources {
                hash.field(name.as_bytes());
                hash.field(text.as_bytes());
            }
            let tmp = std::env::temp_dir();
            let cached = tmp.join(format!("gasworks-device-harness-{:016x}", hash.finish()));
            let bin = cached.join("harness");
            if bin.is_file() {
                return Some(bin);
            }
            let dir = tempfile::Builder::new()
                .prefix("gasworks-device-port")
                .tempdir_in(&tmp)
                .unwrap();
            for (name, text) in sources {
                std::fs::write(dir.path().join(name), text).unwrap();
            }
            let out = Command::new(&cxx)
                .current_dir(dir.path())
                .args([
                    "-std=c++17",
                    "-O2",
                    "-ffp-contract=off",
                    "-fno-fast-math",
                    "-include",
                    "prelude.h",
                    "harness.cpp",
                    "-o",
                    "harness",
                ])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "the device code does not compile on the host:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // Another process may have renamed its build into place meanwhile: then ours is
            // removed and theirs, built from the same sources, is used.
            let built = dir.keep();
            if std::fs::rename(&built, &cached).is_err() {
                let _ = std::fs::remove_dir_all(&built);
            }
            assert!(bin.is_file(), "{} was not built", bin.display());
            Some(bin)
        })
        .as_deref()
}

/// Runs the device code over `tile` with the launches of `plan`, starting from `accum`, and
/// returns the accumulation and the counters [rays, non-finite samples].
fn run_device_code(
    bin: &Path,
    scene: &Scene,
    settings: &RenderSettings,
    tile: Tile,
    plan: &[LaunchStep],
    accum: &[[f32; 4]],
) -> (Vec<[f32; 4]>, [u64; 2]) {
    run_device_code_skipping(bin, scene, settings, tile, plan, accum, None)
}

/// [`run_device_code`] with the launches' skip bytes (`GwLaunchParams::skip`) pointing at
/// `skip` (one per pixel of the tile, true: the pixel renders nothing), where given.
fn run_device_code_skipping(
    bin: &Path,
    scene: &Scene,
    settings: &RenderSettings,
    tile: Tile,
    plan: &[LaunchStep],
    accum: &[[f32; 4]],
    skip: Option<&[bool]>,
) -> (Vec<[f32; 4]>, [u64; 2]) {
    let packed = pack_scene(scene).unwrap();
    // One record per group, in group order (the brute-force trace's tie order).
    let groups: Vec<u32> = (0..scene.groups.len() as u32).collect();
    let records = hit_group_data(&packed, FAKE_BASE, &groups).unwrap();
    let frame = frame_params(
        settings,
        &packed,
        FAKE_BASE,
        0,
        scene.environment_radiance().to_array(),
    );
    // The harness puts in its own buffers; non-zero placeholders say which a launch reads.
    let buffers = WorkerBuffers {
        accum: 1,
        counters: 1,
        samples: 1,
        skip: u64::from(skip.is_some()),
    };
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("in.bin"), dir.path().join("out.bin"));
    let mut f = std::fs::File::create(&input).unwrap();
    f.write_all(&FAKE_BASE.to_le_bytes()).unwrap();
    f.write_all(&(packed.bytes.len() as u64).to_le_bytes())
        .unwrap();
    f.write_all(&packed.bytes).unwrap();
    f.write_all(&(records.len() as u64).to_le_bytes()).unwrap();
    f.write_all(bytemuck::cast_slice(&records)).unwrap();
    f.write_all(&(plan.len() as u64).to_le_bytes()).unwrap();
    for step in plan {
        let params = step_params(&frame, tile, step, buffers);
        f.write_all(bytemuck::bytes_of(&params)).unwrap();
        f.write_all(&step.threads.to_le_bytes()).unwrap();
        f.write_all(&0u32.to_le_bytes()).unwrap();
    }
    f.write_all(bytemuck::cast_slice(accum)).unwrap();
    let skip_bytes: Vec<u8> = skip.unwrap_or(&[]).iter().map(|&s| u8::from(s)).collect();
    f.write_all(&(skip_bytes.len() as u64).to_le_bytes())
        .unwrap();
    f.write_all(&skip_bytes).unwrap();
    drop(f);
    let status = Command::new(bin).arg(&input).arg(&output).status().unwrap();
    assert!(status.success(), "harness failed: {status}");
    let bytes = std::fs::read(&output).unwrap();
    let n = tile.pixel_count() * 16;
    assert_eq!(bytes.len(), n + 16);
    let acc: Vec<[f32; 4]> = bytemuck::pod_collect_to_vec(&bytes[..n]);
    let counters: Vec<u64> = bytemuck::pod_collect_to_vec(&bytes[n..]);
    (acc, [counters[0], counters[1]])
}

/// The launch plans the device code is checked under, for a tile of `pixels` pixels and the
/// sample range `samples`: one thread per pixel (ACCUMULATE), SAMPLES + REDUCE pairs of two
/// samples each, and the plan of an H100 (132 SMs x 2048 threads: one SAMPLES launch of all
/// the samples here).
fn plans(pixels: u32, samples: std::ops::Range<u32>) -> Vec<(&'static str, Vec<LaunchStep>)> {
    let h100 = launch_work(DeviceShape {
        multiprocessors: 132,
        max_threads_per_multiprocessor: 2048,
    });
    let two = 2 * u64::from(pixels);
    let plans = vec![
        (
            "accumulate",
            plan_launches(pixels, samples.clone(), 1, MAX_SAMPLE_SLOTS),
        ),
        (
            "samples + reduce, 2 samples per launch",
            plan_launches(pixels, samples.clone(), two, two),
        ),
        (
            "an H100's plan",
            plan_launches(pixels, samples, h100, MAX_SAMPLE_SLOTS),
        ),
    ];
    assert!(plans[0].1.iter().all(|s| s.mode == LaunchMode::Accumulate));
    assert!(plans[1].1.iter().any(|s| s.mode == LaunchMode::Reduce));
    plans
}

/// Renders `tile` with the CPU backend in two passes and with the device code (second pass
/// started from the CPU's first), and asserts the same bits for every pixel.
fn assert_device_code_matches_cpu(scene: &Scene, settings: &RenderSettings, tile: Tile) {
    let Some(bin) = harness() else { return };
    let cpu = CpuBackend::new(scene, settings).unwrap();
    let split = settings.spp / 2;
    let mut first = vec![[0.0f32; 4]; tile.pixel_count()];
    cpu.render_tile(tile, 0..split, &mut first).unwrap();
    let dropped_before = cpu.dropped_samples();
    let mut both = first.clone();
    cpu.render_tile(tile, split..settings.spp, &mut both)
        .unwrap();
    let dropped = cpu.dropped_samples() - dropped_before;

    for (name, plan) in plans(tile.w * tile.h, split..settings.spp) {
        let (device, counters) = run_device_code(bin, scene, settings, tile, &plan, &first);
        let mut mismatches = 0;
        for (i, (c, d)) in both.iter().zip(&device).enumerate() {
            if c.map(f32::to_bits) != d.map(f32::to_bits) {
                if mismatches < 5 {
                    eprintln!(
                        "{name}: pixel {:?}: cpu {c:?} device {d:?}",
                        (tile.x + i as u32 % tile.w, tile.y + i as u32 / tile.w)
                    );
                }
                mismatches += 1;
            }
        }
        assert_eq!(
            mismatches,
            0,
            "{name}: {} of {} pixels differ",
            mismatches,
            device.len()
        );
        let samples = tile.pixel_count() as u64 * u64::from(settings.spp - split);
        assert!(
            counters[0] >= samples,
            "{name}: rays {} < samples {samples}",
            counters[0]
        );
        assert_eq!(counters[1], dropped, "{name}: non-finite samples");
        // Something was rendered.
        assert!(device.iter().any(|p| p[0] > 0.0));
        eprintln!(
            "{}, {name} ({} launches): {} pixels x {} spp bit-identical; {} rays",
            scene.source,
            plan.len(),
            device.len(),
            settings.spp,
            counters[0]
        );
    }
}

/// A 4x4 checker texture with colours, so a wrong texel, wrap or filter shows; placed with
/// a scale and offset (MTL `-s 2 3 -o 0.25 -0.5`), so a wrong mapping shows too.
fn checker() -> Texture {
    let mut texels = Vec::new();
    for y in 0..4 {
        for x in 0..4 {
            texels.push(if (x + y) % 2 == 0 {
                [0.9, 0.2, 0.1]
            } else {
                [0.1, 0.3, 0.8]
            });
        }
    }
    Texture {
        path: "checker".into(),
        width: 4,
        height: 4,
        texels,
        mapping: gasworks::scene::UvMapping {
            scale: glam::Vec2::new(2.0, 3.0),
            offset: glam::Vec2::new(0.25, -0.5),
        },
    }
}

/// The Cornell-like box of the CPU tests (every material kind, an area light) with a textured
/// floor whose UVs run past [0, 1] (wrapping).
fn textured_cornell() -> Scene {
    let mut scene = cornell_like();
    let floor = scene.groups.iter().position(|g| g.name == "floor").unwrap();
    let mut tex = Material::diffuse("checker", Vec3::splat(0.9));
    tex.diffuse_texture = Some(0);
    scene.materials.push(tex);
    let m = scene.materials.len() as u32 - 1;
    let g = &mut scene.groups[floor];
    g.uvs = vec![
        Vec2::new(-0.3, -0.2),
        Vec2::new(2.7, -0.2),
        Vec2::new(2.7, 1.9),
        Vec2::new(-0.3, 1.9),
    ];
    g.face_materials = vec![m; g.indices.len()];
    scene.textures = vec![checker()];
    scene.finalize();
    scene
}

/// An opacity mask: a 6x6 checker of 0 and 1 with a row of greys around the cutoff 0.5,
/// placed with a scale and offset.
fn checker_mask() -> Texture {
    let mut texels = Vec::new();
    for y in 0..6 {
        for x in 0..6 {
            let value = if y == 2 {
                0.4 + 0.04 * x as f32
            } else if (x + y) % 2 == 0 {
                1.0
            } else {
                0.0
            };
            texels.push([value; 3]);
        }
    }
    Texture {
        path: "checker-mask".into(),
        width: 6,
        height: 6,
        texels,
        mapping: gasworks::scene::UvMapping {
            scale: glam::Vec2::new(1.5, 1.0),
            offset: glam::Vec2::new(0.1, 0.3),
        },
    }
}

/// The textured Cornell-like box behind a cut-out fence (the camera's rays and every bounce
/// pass its holes), with a cut-out screen under the light (shadow rays pass its holes, so the
/// shadows are patterned), both using one mask. `masked: false` gives the same scene with the
/// masks left off, to show that they change the image.
fn cut_out_cornell(masked: bool) -> Scene {
    let mut scene = textured_cornell();
    let mut fence = Material::diffuse("fence", Vec3::new(0.6, 0.4, 0.2));
    fence.opacity_texture = masked.then_some(1);
    scene.materials.push(fence);
    let m = scene.materials.len() as u32 - 1;
    let uvs = vec![
        Vec2::new(0.0, 0.0),
        Vec2::new(1.0, 0.0),
        Vec2::new(1.0, 1.0),
        Vec2::new(0.0, 1.0),
    ];
    let mut front = quad(
        "fence",
        Vec3::new(0.1, 0.05, 0.05),
        Vec3::new(0.0, 0.85, 0.0),
        Vec3::new(0.8, 0.0, 0.0),
        m,
    );
    front.uvs = uvs.clone();
    let mut screen = quad(
        "screen",
        Vec3::new(0.3, 0.95, 0.3),
        Vec3::new(0.4, 0.0, 0.0),
        Vec3::new(0.0, 0.0, 0.4),
        m,
    );
    screen.uvs = uvs;
    scene.groups.push(front);
    scene.groups.push(screen);
    scene.textures.push(checker_mask());
    scene.source = format!("cut-out-cornell (masked: {masked})");
    scene.finalize();
    scene.validate().unwrap();
    scene
}

/// The textured Cornell-like box whose lamp has UVs and, as asked, the checker mask as its
/// opacity mask (a cut-out: the camera sees the ceiling through its holes, and next-event
/// estimation must find no light at the light points it picks in them) and the colour checker
/// as its emission map (a lamp of coloured squares).
fn mapped_lamp_cornell(masked: bool, emission_mapped: bool) -> Scene {
    let mut scene = textured_cornell();
    let lamp = scene.groups.iter().position(|g| g.name == "light").unwrap();
    scene.groups[lamp].uvs = vec![
        Vec2::new(0.0, 0.0),
        Vec2::new(1.0, 0.0),
        Vec2::new(1.0, 1.0),
        Vec2::new(0.0, 1.0),
    ];
    let m = scene.groups[lamp].face_materials[0] as usize;
    assert!(scene.materials[m].is_emissive());
    scene.materials[m].opacity_texture = masked.then_some(1);
    scene.materials[m].emission_texture = emission_mapped.then_some(0);
    scene.textures.push(checker_mask());
    scene.source = format!("mapped-lamp-cornell (mask: {masked}, emission map: {emission_mapped})");
    scene.finalize();
    scene.validate().unwrap();
    scene
}

/// A floor and a ceiling with two lamps between them, one wound down and one tilted and wound
/// up, seen from a camera that looks at both faces of both: with one-sided lights the backs are
/// dark and light only the side they face; with two-sided lights both faces emit.
fn lamps_seen_from_both_sides() -> Scene {
    let mut down = Material::diffuse("down", Vec3::splat(0.4));
    down.emission = Vec3::new(4.0, 3.0, 2.0);
    let mut up = Material::diffuse("up", Vec3::splat(0.2));
    up.emission = Vec3::new(1.0, 2.0, 5.0);
    let mut glossy = material("glossy", MaterialKind::Glossy);
    glossy.diffuse = Vec3::splat(0.3);
    glossy.specular = Vec3::splat(0.4);
    glossy.shininess = 20.0;
    Scene::new(
        "lamps-seen-from-both-sides",
        vec![
            quad(
                "floor",
                Vec3::new(-3.0, 0.0, -3.0),
                Vec3::new(0.0, 0.0, 6.0),
                Vec3::new(6.0, 0.0, 0.0),
                0,
            ),
            quad(
                "ceiling",
                Vec3::new(-3.0, 2.5, -3.0),
                Vec3::new(6.0, 0.0, 0.0),
                Vec3::new(0.0, 0.0, 6.0),
                3,
            ),
            // Normal x cross z = -Y: emits down.
            quad(
                "lamp-down",
                Vec3::new(-1.2, 1.2, -0.4),
                Vec3::new(0.8, 0.0, 0.0),
                Vec3::new(0.0, 0.0, 0.8),
                1,
            ),
            // Tilted: normal (0, 0, 0.7) x (0.6, 0.3, 0) = (-0.21, 0.42, 0), emits up and to -x.
            quad(
                "lamp-up",
                Vec3::new(0.6, 0.9, -0.3),
                Vec3::new(0.0, 0.0, 0.7),
                Vec3::new(0.6, 0.3, 0.0),
                2,
            ),
        ],
        vec![
            Material::diffuse("white", Vec3::splat(0.7)),
            down,
            up,
            glossy,
        ],
    )
}

/// [`look_fov`] at the 45 degrees these tests use.
fn settings(
    eye: Vec3,
    at: Vec3,
    w: u32,
    h: u32,
    spp: u32,
    max_depth: u32,
    seed: u64,
) -> RenderSettings {
    look_fov(eye, at, 45.0, w, h, spp, max_depth, seed)
}

#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_a_textured_cornell_box() {
    let s = cornell_settings(40, 32, 6, 8, 5);
    let tile = tile_at(3, 2, 33, 28);
    assert_device_code_matches_cpu(&textured_cornell(), &s, tile);
}

/// The CPU renders of `tile` differ between `a` and `b` in more than half its pixels: what a
/// test of a feature checks first, so that agreement on it proves something.
fn assert_most_of_the_tile_differs(a: &Scene, b: &Scene, s: &RenderSettings, tile: Tile) {
    let render = |scene: &Scene| {
        let mut film = vec![[0.0f32; 4]; tile.pixel_count()];
        CpuBackend::new(scene, s)
            .unwrap()
            .render_tile(tile, 0..s.spp, &mut film)
            .unwrap();
        film
    };
    let (fa, fb) = (render(a), render(b));
    let differ = fa.iter().zip(&fb).filter(|(x, y)| x != y).count();
    assert!(
        differ > fa.len() / 2,
        "{} and {} differ in {differ} of {} pixels",
        a.source,
        b.source,
        fa.len()
    );
}

/// The textured box with bump maps: heights on the floor (looked up mirrored in u, with an
/// offset), a normal map on the back wall, and the same normal map, tilted the other way
/// (`-bm -0.7`), on the glossy block's front, whose UVs are mirrored (the other handedness).
/// `bumped == false` leaves the same scene without the maps.
fn bumpy_cornell(bumped: bool) -> Scene {
    use gasworks::scene::BumpMap;
    let mut scene = textured_cornell();
    let mut heights = Vec::new();
    for y in 0..5 {
        for x in 0..6 {
            let h = 0.5 + 0.4 * (x as f32 * 1.3).sin() * (y as f32 * 0.9).cos();
            heights.push([h; 3]);
        }
    }
    let mut normals = Vec::new();
    for y in 0..4 {
        for x in 0..5 {
            let n = Vec3::new(
                (x as f32 * 2.1 + y as f32).sin() * 0.6,
                (y as f32 * 1.7 - x as f32).cos() * 0.5,
                1.0,
            )
            .normalize();
            normals.push(n.to_array());
        }
    }
    let mapping = |su: f32, sv: f32, ou: f32, ov: f32| gasworks::scene::UvMapping {
        scale: Vec2::new(su, sv),
        offset: Vec2::new(ou, ov),
    };
    let texture = |name: &str, w, h, texels, mapping| Texture {
        path: name.into(),
        width: w,
        height: h,
        texels,
        mapping,
    };
    scene.textures.push(texture(
        "heights",
        6,
        5,
        heights,
        mapping(-1.5, 2.0, 0.1, 0.3),
    ));
    scene.textures.push(texture(
        "normals",
        5,
        4,
        normals,
        mapping(1.0, 1.0, 0.0, 0.0),
    ));
    let floor = scene.materials.len() - 1;
    scene.materials[floor].bump = Some(BumpMap::Height {
        texture: 1,
        scale: 6.0,
    });
    let mut wall = Material::diffuse("normal-mapped", Vec3::splat(0.73));
    wall.bump = Some(BumpMap::Normal {
        texture: 2,
        scale: 1.3,
    });
    let glossy = scene
        .materials
        .iter()
        .position(|m| m.name == "glossy")
        .unwrap();
    let mut block = scene.materials[glossy].clone();
    block.name = "bumpy-glossy".into();
    block.bump = Some(BumpMap::Normal {
        texture: 2,
        scale: -0.7,
    });
    let uvs = [
        Vec2::new(0.0, 0.0),
        Vec2::new(1.7, 0.1),
        Vec2::new(1.9, 1.3),
        Vec2::new(0.2, 1.2),
    ];
    let mirrored = uvs.map(|uv| Vec2::new(uv.x, 1.0 - uv.y));
    for (group, material, uvs) in [("back", wall, uvs), ("block-front", block, mirrored)] {
        scene.materials.push(material);
        let m = scene.materials.len() as u32 - 1;
        let g = scene.groups.iter_mut().find(|g| g.name == group).unwrap();
        g.uvs = uvs.to_vec();
        g.face_materials = vec![m; g.indices.len()];
    }
    if !bumped {
        for m in &mut scene.materials {
            m.bump = None;
        }
    }
    scene.finalize();
    scene
}

/// Bump and normal maps: the device's bent shading normals (its UV tangents, the bilinear
/// height gradient, the normal map's frame) must be the CPU's bit for bit. The maps change
/// most of the tile.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_bump_and_normal_maps() {
    let s = cornell_settings(40, 32, 6, 8, 13);
    let tile = tile_at(1, 2, 37, 29);
    let (bumpy, smooth) = (bumpy_cornell(true), bumpy_cornell(false));
    assert_most_of_the_tile_differs(&bumpy, &smooth, &s, tile);
    assert_device_code_matches_cpu(&bumpy, &s, tile);
}

/// Specular maps: the glossy block (its top and front given UVs), the textured floor made
/// glossy, and mirror back and right walls, whose Ks is multiplied by the checker (`map_Ks`);
/// `mapped == false` leaves the same scene without the maps.
fn specular_mapped_cornell(mapped: bool) -> Scene {
    let mut scene = textured_cornell();
    let glossy = scene
        .materials
        .iter()
        .position(|m| m.name == "glossy")
        .unwrap();
    let mut mirror = Material {
        name: "mapped-mirror".into(),
        kind: MaterialKind::Mirror,
        specular: Vec3::new(0.9, 0.85, 0.8),
        ..Material::default_diffuse()
    };
    // The textured floor turns glossy too.
    let floor = scene.materials.len() - 1;
    let f = &mut scene.materials[floor];
    f.kind = MaterialKind::Glossy;
    f.diffuse = Vec3::splat(0.5);
    f.specular = Vec3::splat(0.4);
    f.shininess = 30.0;
    if mapped {
        for m in [glossy, floor] {
            scene.materials[m].specular_texture = Some(0);
        }
        mirror.specular_texture = Some(0);
    }
    scene.materials.push(mirror);
    let mirror = scene.materials.len() as u32 - 1;
    for g in scene.groups.iter_mut() {
        if ["block-top", "block-front", "back", "right"].contains(&g.name.as_str()) {
            g.uvs = vec![
                Vec2::new(0.1, 0.0),
                Vec2::new(1.3, 0.2),
                Vec2::new(1.1, 1.4),
                Vec2::new(-0.2, 0.9),
            ];
        }
        if g.name == "back" || g.name == "right" {
            g.face_materials = vec![mirror; g.indices.len()];
        }
    }
    scene.finalize();
    scene
}

#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_specular_maps() {
    let s = cornell_settings(40, 32, 6, 8, 19);
    let tile = tile_at(1, 1, 38, 30);
    let (mapped, plain) = (
        specular_mapped_cornell(true),
        specular_mapped_cornell(false),
    );
    assert_most_of_the_tile_differs(&mapped, &plain, &s, tile);
    assert_device_code_matches_cpu(&mapped, &s, tile);
}

/// See-through materials: the any-hit program's dissolve test (`Scene::is_dissolved`, a pure
/// function of the hit) must let through exactly the hits the CPU lets through, for camera,
/// bounce and shadow rays: the glossy block at opacity 0.45 and the red wall at 0.7 (the
/// light is opaque whatever its material says). They change most of the tile.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_see_through_materials() {
    let s = cornell_settings(40, 32, 6, 8, 17);
    let tile = tile_at(2, 1, 36, 30);
    let solid = cornell_like();
    let mut see_through = cornell_like();
    for (name, opacity) in [("glossy", 0.45), ("red", 0.7), ("light", 0.2)] {
        let m = see_through
            .materials
            .iter_mut()
            .find(|m| m.name == name)
            .unwrap();
        m.opacity = opacity;
    }
    see_through.finalize();
    let dissolving = see_through.cutout_groups();
    assert_eq!(
        dissolving.iter().filter(|&&d| d).count(),
        3,
        "{dissolving:?}"
    );
    assert_most_of_the_tile_differs(&see_through, &solid, &s, tile);
    assert_device_code_matches_cpu(&see_through, &s, tile);
}

/// Cut-outs: the any-hit program's alpha test, run by the harness's trace as OptiX runs it,
/// must skip exactly the hits the CPU skips, for camera, bounce and shadow rays. The masks
/// change most of the tile (else the test would prove nothing).
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_cut_outs() {
    let s = cornell_settings(40, 32, 6, 8, 11);
    let tile = tile_at(2, 3, 34, 27);
    let (cut, solid) = (cut_out_cornell(true), cut_out_cornell(false));
    assert_eq!(cut.cutout_groups().iter().filter(|&&c| c).count(), 2);
    assert_most_of_the_tile_differs(&cut, &solid, &s, tile);
    assert_device_code_matches_cpu(&cut, &s, tile);
}

/// A cut-out lamp: the device's light-point test (the mask and corner UVs packed into
/// `GwLight`) must drop exactly the light points the CPU drops, and the any-hit test the same
/// camera and bounce hits. The mask changes most of the tile.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_a_cut_out_lamp() {
    let s = cornell_settings(40, 32, 6, 8, 23);
    let tile = tile_at(4, 0, 31, 30);
    let (cut, solid) = (
        mapped_lamp_cornell(true, false),
        mapped_lamp_cornell(false, false),
    );
    assert_most_of_the_tile_differs(&cut, &solid, &s, tile);
    let packed = gasworks::optix::pathtracer::pack::pack_lights(&cut);
    assert!(packed.iter().all(|l| l.opacity_texture == 1));
    assert_device_code_matches_cpu(&cut, &s, tile);
}

/// A lamp with an emission map, alone and on a cut-out: the device reads the map where the
/// camera and bounce rays hit the lamp (the material's map) and at the light points (the map
/// and corner UVs packed into `GwLight`), and picks lights by the same weights (the uploaded
/// CDF); the map changes most of the tile.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_an_emission_mapped_lamp() {
    let s = cornell_settings(40, 32, 6, 8, 29);
    let tile = tile_at(0, 1, 36, 30);
    for masked in [false, true] {
        let mapped = mapped_lamp_cornell(masked, true);
        assert_most_of_the_tile_differs(&mapped, &mapped_lamp_cornell(masked, false), &s, tile);
        let packed = gasworks::optix::pathtracer::pack::pack_lights(&mapped);
        assert!(packed.iter().all(|l| l.emission_texture == 0));
        assert_device_code_matches_cpu(&mapped, &s, tile);
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_on_glass_and_mirror_spheres_in_an_environment() {
    let s = settings(Vec3::new(0.3, 0.6, 3.0), Vec3::ZERO, 36, 24, 6, 10, 77);
    let tile = tile_of(36, 24);
    // Glass, mirror and glossy spheres under a coloured environment, no area light: the escape
    // path and the environment term.
    assert_device_code_matches_cpu(&spheres_under_a_sky(), &s, tile);
}

/// Environment maps: the spheres under a map with a sun (no area light: every next event
/// samples the map), turned; the same with a lamp (next events split between the map and the
/// lamp); and under a black map (nothing to sample, nothing to see). Glass and mirror see the
/// map through Dirac lobes, the floor through MIS at its escapes.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_under_environment_maps() {
    let s = settings(Vec3::new(0.3, 0.6, 3.0), Vec3::ZERO, 24, 16, 6, 5, 41);
    let tile = tile_of(24, 16);
    let mut sky = spheres_under_a_sky();
    sky.set_environment_map(sun_map(35.0));
    assert_device_code_matches_cpu(&sky, &s, tile);

    let mut sky = with_lamp(sky);
    assert_eq!(sky.lights.len(), 2);
    assert_device_code_matches_cpu(&sky, &s, tile);
    // The share of next events chosen for a render (`--env-share`, or the probe's), the
    // extremes included: 0 never samples the map, 1 never the lamp.
    for share in [0.0625, 0.875, 0.0, 1.0] {
        sky.environment_share = Some(share);
        assert_device_code_matches_cpu(&sky, &s, tile);
    }

    let mut black = spheres_under_a_sky();
    let map = gasworks::scene::EnvironmentMap::from_texels("black", 4, 2, vec![Vec3::ZERO; 8], 0.0)
        .unwrap();
    black.set_environment_map(std::sync::Arc::new(map));
    assert_device_code_matches_cpu(&with_lamp(black), &s, tile);
}

#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_at_depth_one_and_two() {
    // Depth 1: emitters seen directly only; depth 2: one bounce, no Russian roulette. Both
    // pixel filters (the tent's samples land in the neighbours' squares too), a pinhole and
    // a thin lens (whose samples draw one more slot, the lens point).
    for depth in [1, 2] {
        for filter in [PixelFilter::Box, PixelFilter::Tent] {
            for lens_radius in [0.0, 0.05] {
                let mut s = cornell_settings(16, 16, 4, depth, 9);
                s.camera.filter = filter;
                s.camera.set_thin_lens(lens_radius, 1.9).unwrap();
                assert_device_code_matches_cpu(&textured_cornell(), &s, tile_of(16, 16));
            }
        }
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_with_one_and_two_sided_lights() {
    let s = settings(
        Vec3::new(2.2, 1.9, -2.8),
        Vec3::new(-0.2, 0.9, 0.0),
        32,
        24,
        6,
        6,
        21,
    );
    let tile = tile_of(32, 24);
    let mut films = Vec::new();
    for two_sided in [false, true] {
        let mut scene = lamps_seen_from_both_sides();
        scene.two_sided_lights = two_sided;
        assert_device_code_matches_cpu(&scene, &s, tile);
        let mut cornell = textured_cornell();
        cornell.two_sided_lights = two_sided;
        assert_device_code_matches_cpu(
            &cornell,
            &cornell_settings(24, 20, 4, 6, 13),
            tile_of(24, 20),
        );
        let cpu = CpuBackend::new(&scene, &s).unwrap();
        let mut acc = vec![[0.0f32; 4]; tile.pixel_count()];
        cpu.render_tile(tile, 0..s.spp, &mut acc).unwrap();
        films.push(acc);
    }
    // The two modes differ (so both were exercised): the backs of the lamps emit only in one.
    let differing = films[0]
        .iter()
        .zip(&films[1])
        .filter(|(a, b)| a != b)
        .count();
    assert!(differing > films[0].len() / 2, "{differing} pixels differ");
}

fn tile_of(w: u32, h: u32) -> Tile {
    tile_at(0, 0, w, h)
}

/// The `w x h` tile whose top-left pixel is `(x, y)`.
fn tile_at(x: u32, y: u32, w: u32, h: u32) -> Tile {
    Tile { x, y, w, h }
}

/// The Cornell-like box with five more lamps of different colours and powers on the ceiling
/// (each facing down into the box): light selection by power among many lights.
fn many_lights() -> Scene {
    let mut scene = cornell_like();
    let first = scene.materials.len() as u32;
    for (i, le) in [
        Vec3::new(2.0, 0.5, 0.5),
        Vec3::new(0.2, 3.0, 0.4),
        Vec3::new(0.1, 0.2, 8.0),
        Vec3::new(1.0, 1.0, 1.0),
        Vec3::new(25.0, 20.0, 10.0),
    ]
    .into_iter()
    .enumerate()
    {
        let mut m = Material::diffuse(&format!("lamp{i}"), Vec3::ZERO);
        m.emission = le;
        scene.materials.push(m);
        let size = 0.05 + 0.03 * i as f32;
        scene.groups.push(quad(
            &format!("lamp{i}"),
            Vec3::new(0.1 + 0.17 * i as f32, 0.998, 0.15 + 0.12 * i as f32),
            size * Vec3::X,
            size * Vec3::Z,
            first + i as u32,
        ));
    }
    scene.finalize();
    assert_eq!(scene.lights.len(), 12);
    scene
}

#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_matches_the_cpu_with_many_lights_of_different_power() {
    let s = cornell_settings(24, 20, 6, 6, 13);
    let tile = tile_of(24, 20);
    assert_device_code_matches_cpu(&many_lights(), &s, tile);
}

/// A whole frame rendered tile by tile through the device code, with 16-pixel tiles under an
/// H100's plan and 7-pixel tiles under two samples per launch, gives the CPU's film bit for
/// bit: the image does not depend on the tile size or on how a tile's samples are split into
/// launches.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_frames_are_bit_identical_across_tile_sizes_and_launch_plans() {
    let Some(bin) = harness() else { return };
    let scene = textured_cornell();
    let s = cornell_settings(40, 30, 6, 6, 31);
    let cpu = CpuBackend::new(&scene, &s).unwrap();
    let reference = render_film(&cpu, &s, &Tile::grid(40, 30, 8), &[6], 1);
    for (size, plan_name) in [
        (16, "an H100's plan"),
        (7, "samples + reduce, 2 samples per launch"),
    ] {
        let mut film = gasworks::render::Film::new(40, 30);
        // Two passes, so the second launches start from a non-zero accumulation.
        for pass in [0..2, 2..6] {
            for tile in Tile::grid(40, 30, size) {
                let plan = plans(tile.w * tile.h, pass.clone())
                    .into_iter()
                    .find(|(name, _)| *name == plan_name)
                    .unwrap()
                    .1;
                let (acc, _) = run_device_code(bin, &scene, &s, tile, &plan, &film.read_tile(tile));
                film.write_tile(tile, &acc);
            }
        }
        let differ = film
            .pixels
            .iter()
            .zip(&reference.pixels)
            .filter(|(a, b)| a.map(f32::to_bits) != b.map(f32::to_bits))
            .count();
        assert_eq!(
            differ, 0,
            "{size}-pixel tiles, {plan_name}: {differ} pixels differ"
        );
    }
}

/// A tile with pixels skipped (adaptive sampling's stopped blocks, `GwLaunchParams::skip`):
/// under every launch plan the device code leaves a skipped pixel's sums exactly as they came
/// and gives every other pixel the CPU's bits, as `CpuBackend::render_tile_skipping` does; the
/// rays it counts are the rendered pixels' alone.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn device_code_skips_the_pixels_it_is_told_to_and_renders_the_others_bit_for_bit() {
    let Some(bin) = harness() else { return };
    let scene = textured_cornell();
    let s = cornell_settings(24, 20, 6, 6, 5);
    let tile = tile_at(3, 2, 19, 13);
    let cpu = CpuBackend::new(&scene, &s).unwrap();
    let mut first = vec![[0.0f32; 4]; tile.pixel_count()];
    cpu.render_tile(tile, 0..2, &mut first).unwrap();
    // A block of skipped pixels, a skipped column and a scattering of single ones.
    let skip: Vec<bool> = (0..tile.pixel_count())
        .map(|i| {
            let (x, y) = (i as u32 % tile.w, i as u32 / tile.w);
            (x < 8 && y < 6) || x == 12 || i % 7 == 3
        })
        .collect();
    let skipped = skip.iter().filter(|&&k| k).count();
    assert!(skipped > 0 && skipped < skip.len());
    let mut expected = first.clone();
    cpu.render_tile_skipping(tile, 2..6, &mut expected, &skip)
        .unwrap();
    let mut all = first.clone();
    cpu.render_tile(tile, 2..6, &mut all).unwrap();
    for (i, &k) in skip.iter().enumerate() {
        if k {
            assert_eq!(expected[i].map(f32::to_bits), first[i].map(f32::to_bits));
        } else {
            assert_eq!(expected[i].map(f32::to_bits), all[i].map(f32::to_bits));
        }
    }
    let (_, all_rays) = run_device_code(
        bin,
        &scene,
        &s,
        tile,
        &plans(tile.w * tile.h, 2..6)[0].1,
        &first,
    );
    for (name, plan) in plans(tile.w * tile.h, 2..6) {
        let (device, counters) =
            run_device_code_skipping(bin, &scene, &s, tile, &plan, &first, Some(&skip));
        let differ = device
            .iter()
            .zip(&expected)
            .filter(|(a, b)| a.map(f32::to_bits) != b.map(f32::to_bits))
            .count();
        assert_eq!(
            differ,
            0,
            "{name}: {differ} of {} pixels differ",
            device.len()
        );
        assert!(
            counters[0] < all_rays[0],
            "{name}: {} rays with {skipped} pixels skipped, {} with none",
            counters[0],
            all_rays[0]
        );
    }
}

/// `static_assert`s of `T`'s size and of every field's offset and size, in C++, from the Rust
/// struct's own `size_of`/`offset_of!`.
macro_rules! layout_asserts {
    ($rust:ty, $cpp:literal, [$($field:ident),* $(,)?]) => {{
        fn field_size<T, F>(_: fn(&T) -> &F) -> usize {
            std::mem::size_of::<F>()
        }
        let mut lines = vec![format!(
            "static_assert(sizeof({}) == {}, \"sizeof({}) is not the Rust struct's\");",
            $cpp,
            std::mem::size_of::<$rust>(),
            $cpp
        )];
        $(
            let field = stringify!($field);
            lines.push(format!(
                "static_assert(offsetof({cpp}, {field}) == {}, \"{cpp}.{field}: offset differs from Rust\");",
                std::mem::offset_of!($rust, $field),
                cpp = $cpp
            ));
            lines.push(format!(
                "static_assert(sizeof((({cpp}*)nullptr)->{field}) == {}, \"{cpp}.{field}: size differs from Rust\");",
                field_size(|p: &$rust| &p.$field),
                cpp = $cpp
            ));
        )*
        lines
    }};
}

/// Compiles `main` (which includes a `.cu` file) with the host C++ compiler, syntax only: its
/// `static_assert`s, and the `.cu` file's own, are evaluated.
fn assert_compiles(name: &str, files: &[(&str, &str)], asserts: &[String]) {
    let Some(cxx) = support::compiler("CXX", "c++", "the device structs' layout check") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in files {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    std::fs::write(dir.path().join("prelude.h"), PRELUDE).unwrap();
    std::fs::write(dir.path().join("optix_device_min.h"), OPTIX_SHIM).unwrap();
    let main = format!(
        "#include \"{}\"\n#include <cstddef>\n{}\n",
        files[0].0,
        asserts.join("\n")
    );
    std::fs::write(dir.path().join("layout.cpp"), main).unwrap();
    let out = Command::new(&cxx)
        .current_dir(dir.path())
        .args([
            "-std=c++17",
            "-fsyntax-only",
            "-include",
            "prelude.h",
            "layout.cpp",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: the device structs differ from the Rust ones:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{name}: {} layout assertions hold", asserts.len());
}

/// Every struct the host uploads for `pathtrace.cu` has the Rust layout, field by field.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn path_tracer_structs_have_the_rust_layout_on_the_device_side() {
    use gasworks::optix::pathtracer::layout::{
        GwHitGroupData, GwLaunchParams, GwLight, GwMaterial, GwSample, GwTexture,
    };
    let mut asserts = layout_asserts!(
        GwMaterial,
        "GwMaterial",
        [
            diffuse,
            kind,
            specular,
            shininess,
            transmittance,
            ior,
            emission,
            texture,
            opacity_texture,
            emission_texture,
            bump_texture,
            bump_kind,
            bump_scale,
            opacity,
            specular_texture,
            pad
        ]
    );
    asserts.extend(layout_asserts!(
        GwTexture,
        "GwTexture",
        [first_texel, width, height, uv_scale, uv_offset]
    ));
    asserts.extend(layout_asserts!(
        GwLight,
        "GwLight",
        [
            p0,
            area,
            p1,
            group,
            p2,
            prim,
            emission,
            opacity_texture,
            uv0,
            uv1,
            uv2,
            emission_texture,
            pad
        ]
    ));
    asserts.extend(layout_asserts!(
        GwHitGroupData,
        "GwHitGroupData",
        [
            positions,
            indices,
            normals,
            uvs,
            face_materials,
            light_index,
            group,
            triangle_count,
            pad
        ]
    ));
    asserts.extend(layout_asserts!(
        GwLaunchParams,
        "GwLaunchParams",
        [
            handle,
            accum,
            materials,
            textures,
            texels,
            lights,
            light_cdf,
            counters,
            seed,
            eye,
            cam_u,
            cam_v,
            cam_w,
            environment,
            image_width,
            image_height,
            tile_x,
            tile_y,
            tile_w,
            tile_h,
            sample_begin,
            sample_end,
            max_depth,
            light_count,
            material_count,
            texture_count,
            two_sided_lights,
            mode,
            sample_bits,
            samples,
            pixel_filter,
            lens_radius,
            lens_u,
            lens_v,
            focus_distance,
            env_width,
            env_texels,
            env_row_cdf,
            env_col_cdf,
            env_uv_pdf,
            env_height,
            env_rotation_turns,
            env_share,
            env_compensation,
            skip
        ]
    ));
    asserts.extend(layout_asserts!(GwSample, "GwSample", [radiance, rays]));
    // The codes the device code switches on, and its "not a light" index.
    use gasworks::optix::pathtracer::layout::{material_kind_code, NO_LIGHT};
    for (name, kind) in [
        ("GW_DIFFUSE", MaterialKind::Diffuse),
        ("GW_GLOSSY", MaterialKind::Glossy),
        ("GW_MIRROR", MaterialKind::Mirror),
        ("GW_GLASS", MaterialKind::Glass),
    ] {
        asserts.push(format!(
            "static_assert({name} == {}u, \"{name} differs from material_kind_code\");",
            material_kind_code(kind)
        ));
    }
    asserts.push(format!(
        "static_assert(GW_NO_LIGHT == {NO_LIGHT}u, \"GW_NO_LIGHT differs from NO_LIGHT\");"
    ));
    for (name, mode) in [
        ("GW_LAUNCH_ACCUMULATE", LaunchMode::Accumulate),
        ("GW_LAUNCH_SAMPLES", LaunchMode::Samples),
        ("GW_LAUNCH_REDUCE", LaunchMode::Reduce),
    ] {
        asserts.push(format!(
            "static_assert({name} == {}u, \"{name} differs from LaunchMode\");",
            mode as u32
        ));
    }
    assert_compiles(
        "pathtrace.cu",
        &[
            ("pathtrace.cu", PATHTRACE_CU),
            ("gasworks_common.h", GASWORKS_COMMON_H),
        ],
        &asserts,
    );
}

/// The same for `raycast.cu` and `optix::raycast`.
#[test]
#[cfg_attr(
    gasworks_no_cxx,
    ignore = "no C++ compiler when the tests were built (see build.rs)"
)]
fn raycast_structs_have_the_rust_layout_on_the_device_side() {
    use gasworks::optix::raycast::{HitGroupData, LaunchParams, Ray, RayHit};
    let mut asserts = layout_asserts!(Ray, "RaycastRay", [origin, tmin, dir, tmax]);
    asserts.extend(layout_asserts!(
        RayHit,
        "RaycastHit",
        [group, prim, t, u, v, instance]
    ));
    asserts.extend(layout_asserts!(
        LaunchParams,
        "RaycastParams",
        [handle, rays, hits, ray_count, pad]
    ));
    asserts.extend(layout_asserts!(
        HitGroupData,
        "RaycastHitGroupData",
        [group]
    ));
    assert_compiles(
        "raycast.cu",
        &[("raycast.cu", include_str!("../ptx/raycast.cu"))],
        &asserts,
    );
}
