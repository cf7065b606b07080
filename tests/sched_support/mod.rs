//! Test support for the scheduler tests: deterministic mock renderers and small in-memory
//! scenes. Not every test file uses every item.
#![allow(dead_code)]

use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gasworks::render::{RenderSettings, Tile, TileRenderer};
use gasworks::scene::{Camera, Group, Material, MaterialKind, Scene};
use gasworks::sched::RendererFactory;
use gasworks::splitmix::mix64;
use glam::Vec3;

/// A renderer whose radiance is a hash of (pixel, sample, seed), spread over many orders of
/// magnitude so that adding the same samples in another order, or in other groups, would
/// change the low bits of the sums. Its cost per pixel sample is `spin(x, y)` rounds of a
/// hash. It records every call.
pub struct MockRenderer {
    pub width: u32,
    pub seed: u64,
    pub spin: Arc<dyn Fn(u32, u32) -> u32 + Send + Sync>,
    /// Extra random sleep per tile, up to this many microseconds (0: none).
    pub max_sleep_us: u64,
    pub calls: Mutex<Vec<(Tile, Range<u32>)>>,
    pub name: String,
    /// What `min_tile_work` answers (a GPU worker's launch of work).
    pub min_work: Option<u64>,
    /// What `hardware` answers (empty: not known, as the trait's default).
    pub hardware: String,
    /// Sink for the spin loop so that it is not optimized away.
    sink: AtomicU64,
    /// Sets the flag during the call that makes this many calls (a Ctrl-C mid-frame).
    pub stop_after: Option<(usize, Arc<AtomicU8>)>,
    /// From this attempt on (1-based), every call fails, as a GPU that ran out of memory or
    /// lost its context does. Failed calls are not in `calls`.
    pub fail_from: Option<usize>,
    attempts: AtomicUsize,
    /// Fails only tiles whose samples start here or later (a failure in a later pass).
    pub fail_from_sample: u32,
    /// A gate: a failing mock opens it when it fails; any other mock waits at it (for at most
    /// 10 s) before each tile whose samples start at `fail_from_sample` or later, so that the
    /// failure comes before the others run dry.
    pub gate: Option<Arc<AtomicBool>>,
    /// The device's lost flag, shared by the mocks of one GPU: a failing mock sets it (a
    /// sticky error that takes the whole context), and from then on every mock sharing it
    /// fails at once and answers `device_lost`.
    pub lost: Option<Arc<AtomicBool>>,
}

impl MockRenderer {
    pub fn new(width: u32, seed: u64) -> MockRenderer {
        MockRenderer {
            width,
            seed,
            spin: Arc::new(|_, _| 0),
            max_sleep_us: 0,
            calls: Mutex::new(Vec::new()),
            name: "mock".into(),
            min_work: None,
            hardware: String::new(),
            sink: AtomicU64::new(0),
            stop_after: None,
            fail_from: None,
            attempts: AtomicUsize::new(0),
            fail_from_sample: 0,
            gate: None,
            lost: None,
        }
    }

    /// Shares `lost` with the other mocks of its device (see [`MockRenderer::lost`]).
    pub fn with_lost_flag(mut self, lost: Arc<AtomicBool>) -> Self {
        self.lost = Some(lost);
        self
    }

    fn is_lost(&self) -> bool {
        self.lost.as_ref().is_some_and(|l| l.load(Ordering::SeqCst))
    }

    /// Fails (and gates) only tiles whose samples start at `sample` or later.
    pub fn failing_at_samples_from(mut self, sample: u32) -> Self {
        self.fail_from_sample = sample;
        self
    }

    /// Opens `gate` on failing (a failing mock) or waits for it before each tile (any other).
    pub fn with_gate(mut self, gate: Arc<AtomicBool>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// Fails every call from the `attempt`-th on (1-based).
    pub fn failing_from(mut self, attempt: usize) -> Self {
        self.fail_from = Some(attempt);
        self
    }

    /// Calls that failed (counting attempts from `fail_from_sample` on).
    pub fn failures(&self) -> usize {
        let attempts = self.attempts.load(Ordering::SeqCst);
        self.fail_from
            .map_or(0, |from| attempts.saturating_sub(from - 1))
    }

    /// Sets `flag` during the `calls`-th call to `render_tile`.
    pub fn with_stop_after(mut self, calls: usize, flag: Arc<AtomicU8>) -> Self {
        self.stop_after = Some((calls, flag));
        self
    }

    pub fn with_spin(mut self, f: impl Fn(u32, u32) -> u32 + Send + Sync + 'static) -> Self {
        self.spin = Arc::new(f);
        self
    }

    pub fn with_sleep(mut self, max_us: u64) -> Self {
        self.max_sleep_us = max_us;
        self
    }

    pub fn named(mut self, name: &str) -> Self {
        self.name = name.into();
        self
    }

    /// Asks for tiles of at least `work` pixel-samples, as a GPU worker does.
    pub fn with_min_tile_work(mut self, work: Option<u64>) -> Self {
        self.min_work = work;
        self
    }

    /// Says it runs on `hardware` (a machine's CPU or GPU model).
    pub fn on_hardware(mut self, hardware: &str) -> Self {
        self.hardware = hardware.into();
        self
    }

    pub fn calls(&self) -> Vec<(Tile, Range<u32>)> {
        self.calls.lock().unwrap().clone()
    }
}

/// The mock's radiance of one sample: three values from 2^-20 to 2^20.
pub fn mock_radiance(pixel: u32, sample: u32, seed: u64) -> [f32; 3] {
    let h = mix64((pixel as u64) << 32 | sample as u64 ^ mix64(seed));
    [0, 21, 42].map(|shift| {
        let bits = (h >> shift) & 0x1F_FFFF;
        let exponent = (bits % 41) as i32 - 20;
        let mantissa = 1.0 + (bits >> 6) as f32 / (1 << 15) as f32;
        mantissa * 2f32.powi(exponent)
    })
}

impl TileRenderer for MockRenderer {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn min_tile_work(&self) -> Option<u64> {
        self.min_work
    }

    fn hardware(&self) -> String {
        self.hardware.clone()
    }

    fn device_lost(&self) -> Option<String> {
        self.is_lost().then(|| "a mock's device, lost".to_string())
    }

    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        assert_eq!(accum.len(), tile.pixel_count());
        let later = samples.start >= self.fail_from_sample;
        let attempt = if later {
            self.attempts.fetch_add(1, Ordering::SeqCst) + 1
        } else {
            0
        };
        let failing = later && self.fail_from.is_some_and(|from| attempt >= from);
        if failing {
            // Lost before the gate opens: the mocks it lets go find the device lost.
            if let Some(lost) = &self.lost {
                lost.store(true, Ordering::SeqCst);
            }
        }
        if let Some(gate) = self.gate.as_ref().filter(|_| later) {
            if failing {
                gate.store(true, Ordering::SeqCst);
            } else if self.fail_from.is_none() {
                let t0 = std::time::Instant::now();
                while !gate.load(Ordering::SeqCst) && t0.elapsed().as_secs() < 10 {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
            }
        }
        if !failing && self.is_lost() {
            anyhow::bail!("{}: the device was lost earlier (a mock)", self.name);
        }
        if failing {
            // Half the tile written first: a failed tile's sums must not reach the film.
            for acc in accum.iter_mut().take(tile.pixel_count() / 2) {
                acc[0] = f32::NAN;
            }
            anyhow::bail!(
                "{}: out of memory (a mock failure, attempt {attempt})",
                self.name
            );
        }
        let calls = {
            let mut all = self.calls.lock().unwrap();
            all.push((tile, samples.clone()));
            all.len()
        };
        if let Some((after, flag)) = &self.stop_after {
            if calls == *after {
                // As SIGINT would.
                flag.store(2, Ordering::SeqCst);
            }
        }
        if self.max_sleep_us > 0 {
            let h = mix64(
                (tile.x as u64) << 40 ^ (tile.y as u64) << 20 ^ samples.start as u64 ^ self.seed,
            );
            std::thread::sleep(std::time::Duration::from_micros(h % self.max_sleep_us));
        }
        let mut sink = 0u64;
        for (j, y) in (tile.y..tile.y + tile.h).enumerate() {
            for (i, x) in (tile.x..tile.x + tile.w).enumerate() {
                let pixel = y * self.width + x;
                let acc = &mut accum[j * tile.w as usize + i];
                let spin = (self.spin)(x, y);
                for s in samples.clone() {
                    let c = mock_radiance(pixel, s, self.seed);
                    acc[0] += c[0];
                    acc[1] += c[1];
                    acc[2] += c[2];
                    acc[3] += 1.0;
                    let mut z = s as u64;
                    for _ in 0..spin {
                        z = mix64(z);
                    }
                    sink ^= z;
                }
            }
        }
        self.sink.fetch_xor(sink, Ordering::Relaxed);
        Ok(())
    }
}

/// A factory over mocks: the CPU one, and one per GPU stream (named "gpuD/sS"), all of the
/// same image.
pub struct MockFactory {
    pub cpu: Arc<MockRenderer>,
    pub gpus: Mutex<Vec<Arc<MockRenderer>>>,
    /// What the GPU mocks answer to `min_tile_work`.
    pub gpu_min_work: Option<u64>,
    /// The GPU mocks' `max_sleep_us` (0: none).
    pub gpu_sleep_us: u64,
    /// ((device, stream), attempt): that stream's mock fails from that attempt on.
    pub failing: Vec<((u32, u32), usize)>,
    /// Given to every GPU mock ([`MockRenderer::with_gate`]); give the CPU mock the same.
    pub gate: Option<Arc<AtomicBool>>,
    /// Every GPU mock's [`MockRenderer::failing_at_samples_from`].
    pub from_sample: u32,
    /// GPUs whose failure is sticky: the mocks of each share a lost flag
    /// ([`MockRenderer::with_lost_flag`]).
    pub sticky: Vec<(u32, Arc<AtomicBool>)>,
}

impl MockFactory {
    pub fn new(cpu: MockRenderer) -> MockFactory {
        MockFactory {
            cpu: Arc::new(cpu),
            gpus: Mutex::new(Vec::new()),
            gpu_min_work: None,
            gpu_sleep_us: 0,
            failing: Vec::new(),
            gate: None,
            from_sample: 0,
            sticky: Vec::new(),
        }
    }

    /// Makes a failure on GPU `device` take every stream of it (a lost CUDA context).
    pub fn with_sticky_gpu(mut self, device: u32) -> Self {
        self.sticky.push((device, Arc::new(AtomicBool::new(false))));
        self
    }

    /// Makes GPU `device`'s stream `stream` fail from its `attempt`-th call on.
    pub fn with_failing_gpu(mut self, device: u32, stream: u32, attempt: usize) -> Self {
        self.failing.push(((device, stream), attempt));
        self
    }

    /// Every call to every renderer of this factory.
    pub fn all_calls(&self) -> Vec<(Tile, Range<u32>)> {
        let mut calls = self.cpu.calls();
        for g in self.gpus.lock().unwrap().iter() {
            calls.extend(g.calls());
        }
        calls
    }
}

impl RendererFactory for MockFactory {
    fn cpu(&self) -> anyhow::Result<Arc<dyn TileRenderer>> {
        Ok(self.cpu.clone())
    }

    fn gpu(&self, device: u32, stream: u32) -> anyhow::Result<Arc<dyn TileRenderer>> {
        let mut mock = MockRenderer::new(self.cpu.width, self.cpu.seed)
            .named(&format!("gpu{device}/s{stream}"))
            .with_min_tile_work(self.gpu_min_work)
            .with_sleep(self.gpu_sleep_us);
        if let Some(&(_, attempt)) = self.failing.iter().find(|(ds, _)| *ds == (device, stream)) {
            mock = mock.failing_from(attempt);
        }
        if let Some(gate) = &self.gate {
            mock = mock.with_gate(gate.clone());
        }
        mock = mock.failing_at_samples_from(self.from_sample);
        if let Some((_, lost)) = self.sticky.iter().find(|(d, _)| *d == device) {
            mock = mock.with_lost_flag(lost.clone());
        }
        let r = Arc::new(mock);
        self.gpus.lock().unwrap().push(r.clone());
        Ok(r)
    }
}

/// An axis-aligned quad as two triangles, corners in order around it.
pub fn quad(name: &str, corners: [Vec3; 4], material: u32) -> Group {
    Group {
        name: name.into(),
        positions: corners.to_vec(),
        normals: vec![],
        uvs: vec![],
        indices: vec![[0, 1, 2], [0, 2, 3]],
        face_materials: vec![material; 2],
    }
}

pub fn material(name: &str, kind: MaterialKind) -> Material {
    let mut m = Material::diffuse(name, Vec3::splat(0.7));
    m.kind = kind;
    if kind != MaterialKind::Diffuse {
        m.specular = Vec3::splat(0.9);
        m.shininess = 50.0;
    }
    m
}

/// A stage: a floor from x in [-1, 1], z in [-2, 0] at y = -1, split into a left and a right
/// half of the given materials (indices 1 and 2), and a diffuse back wall (material 0) at
/// z = -2 up to y = 0.5. Nothing else: rays that miss these leave to the sky, so a mirror half
/// (whose reflections all hit the back wall) is more expensive to path trace than a diffuse
/// half (whose bounces partly escape).
pub fn room(left_floor: MaterialKind, right_floor: MaterialKind) -> Scene {
    let v = Vec3::new;
    let groups = vec![
        quad(
            "floor_left",
            [
                v(-1.0, -1.0, 0.0),
                v(0.0, -1.0, 0.0),
                v(0.0, -1.0, -2.0),
                v(-1.0, -1.0, -2.0),
            ],
            1,
        ),
        quad(
            "floor_right",
            [
                v(0.0, -1.0, 0.0),
                v(1.0, -1.0, 0.0),
                v(1.0, -1.0, -2.0),
                v(0.0, -1.0, -2.0),
            ],
            2,
        ),
        quad(
            "back",
            [
                v(-1.0, -1.0, -2.0),
                v(1.0, -1.0, -2.0),
                v(1.0, 0.5, -2.0),
                v(-1.0, 0.5, -2.0),
            ],
            0,
        ),
    ];
    let materials = vec![
        material("wall", MaterialKind::Diffuse),
        material("left_floor", left_floor),
        material("right_floor", right_floor),
    ];
    Scene::new("stage", groups, materials)
}

/// Settings for a `width` x `height` image of the room, seen from its open front.
pub fn room_settings(width: u32, height: u32, spp: u32, seed: u64) -> RenderSettings {
    let camera = Camera {
        eye: Vec3::new(0.0, 0.0, 2.2),
        look_at: Vec3::new(0.0, -0.3, -1.0),
        up: Vec3::Y,
        fov_y_deg: 50.0,
    }
    .frame(width, height)
    .expect("a valid camera");
    RenderSettings {
        width,
        height,
        spp,
        max_depth: 5,
        seed,
        camera,
    }
}

/// Fails, naming the pass and tile, if a worker for which `cpu(w)` holds ran a tile stolen
/// from one for which it does not: what the steal guard exists to prevent.
pub fn assert_no_cpu_ran_a_gpu_tile(
    passes: &[gasworks::sched::report::PassReport],
    cpu: impl Fn(usize) -> bool,
) {
    for (i, p) in passes.iter().enumerate() {
        for r in p.records.iter().filter(|r| cpu(r.worker)) {
            assert!(
                r.stolen_from.is_none_or(&cpu),
                "pass {i}: CPU worker {} ran tile {} of GPU worker {:?}",
                r.worker,
                r.task,
                r.stolen_from
            );
        }
    }
}

/// `calls` less the calibration's pieces: each was rendered [`calibrate::RUNS`] times beside
/// the frame's own tiles, and no more is taken away (a frame tile may be the same rectangle
/// and samples).
///
/// [`calibrate::RUNS`]: gasworks::sched::calibrate::RUNS
pub fn without_pieces(
    mut calls: Vec<(Tile, Range<u32>)>,
    calibration: &[gasworks::sched::calibrate::Calibration],
) -> Vec<(Tile, Range<u32>)> {
    for c in calibration {
        for _ in 0..gasworks::sched::calibrate::RUNS {
            let i = calls
                .iter()
                .position(|(t, s)| *t == c.piece && *s == c.samples)
                .unwrap_or_else(|| panic!("{c:?} was not rendered twice"));
            calls.remove(i);
        }
    }
    calls
}

/// Checks the calls of a render: per pixel, the sample ranges received are disjoint, in
/// increasing order, and together are exactly `0..spp`; and per pass each tile once.
pub fn check_calls(calls: &[(Tile, Range<u32>)], width: u32, height: u32, spp: u32) {
    let mut next = vec![0u32; (width * height) as usize];
    // Calls of one pass may interleave across threads; sort by the pass (sample start).
    let mut calls = calls.to_vec();
    calls.sort_by_key(|(t, s)| (s.start, t.y, t.x));
    for (tile, samples) in &calls {
        assert!(
            tile.x + tile.w <= width && tile.y + tile.h <= height,
            "{tile:?}"
        );
        for y in tile.y..tile.y + tile.h {
            for x in tile.x..tile.x + tile.w {
                let p = (y * width + x) as usize;
                assert_eq!(
                    next[p], samples.start,
                    "pixel ({x},{y}) got samples {samples:?} after {}",
                    next[p]
                );
                next[p] = samples.end;
            }
        }
    }
    assert!(next.iter().all(|&n| n == spp), "some pixel missed samples");
}

/// Checks the errors of the two streams of GPU 0 retired when the first one's calibration
/// piece lost the device: the first names its piece and the mock's failure, the second the
/// first.
pub fn check_lost_in_calibration(errors: [&str; 2]) {
    assert!(
        errors[0].starts_with("calibrating worker gpu0/s0") && errors[0].contains("out of memory"),
        "{}",
        errors[0]
    );
    assert!(
        errors[1].starts_with("gpu0 was lost when gpu0/s0 failed: calibrating worker gpu0/s0"),
        "{}",
        errors[1]
    );
}

/// A renderer whose noise is known column by column, for adaptive sampling: grey 0.3 plus,
/// per sample, an amplitude times a uniform number in [-0.5, 0.5), the amplitude 0 (flat)
/// left of `flat_until`, 0.02 (faint: below a threshold of 0.01 after 8 samples) left of
/// `faint_until`, 0.8 (strong: above it through hundreds) beyond. Sample values depend on
/// (x, y, sample) alone.
pub struct ColumnNoise {
    pub flat_until: u32,
    pub faint_until: u32,
    calls: AtomicUsize,
    /// Sets the flag during the call that makes this many calls (a Ctrl-C mid-frame).
    pub stop_after: Option<(usize, Arc<AtomicU8>)>,
    /// Noise in a checkerboard of 16x16 blocks: right of `flat_until`, the blocks whose
    /// column and row (x / 16 + y / 16) add up to an odd number are strong, the others flat.
    pub checker: bool,
    /// The pixel-samples it asks its tiles to carry (a GPU's `min_tile_work`), if any.
    pub min_work: Option<u64>,
    /// Calls of `render_tile_skipping`, and the pixels they skipped.
    pub skipping_calls: AtomicUsize,
    pub skipped: AtomicUsize,
}

impl ColumnNoise {
    pub fn new(flat_until: u32, faint_until: u32) -> ColumnNoise {
        ColumnNoise {
            flat_until,
            faint_until,
            calls: AtomicUsize::new(0),
            stop_after: None,
            checker: false,
            min_work: None,
            skipping_calls: AtomicUsize::new(0),
            skipped: AtomicUsize::new(0),
        }
    }

    /// Strong noise in a checkerboard of blocks right of `flat_until`, flat elsewhere.
    pub fn checkered(flat_until: u32) -> ColumnNoise {
        ColumnNoise {
            checker: true,
            ..ColumnNoise::new(flat_until, flat_until)
        }
    }

    /// Asks for tiles of `work` pixel-samples, as a GPU worker does.
    pub fn wanting_tiles_of(mut self, work: u64) -> ColumnNoise {
        self.min_work = Some(work);
        self
    }

    pub fn stopping_after(mut self, calls: usize, flag: Arc<AtomicU8>) -> ColumnNoise {
        self.stop_after = Some((calls, flag));
        self
    }

    pub fn amplitude_at(&self, x: u32, y: u32) -> f32 {
        if !self.checker {
            return self.amplitude(x);
        }
        if x >= self.flat_until && (x / 16 + y / 16) % 2 == 1 {
            0.8
        } else {
            0.0
        }
    }

    pub fn amplitude(&self, x: u32) -> f32 {
        if x < self.flat_until {
            0.0
        } else if x < self.faint_until {
            0.02
        } else {
            0.8
        }
    }
}

impl TileRenderer for ColumnNoise {
    fn name(&self) -> String {
        "column-noise".into()
    }

    fn min_tile_work(&self) -> Option<u64> {
        self.min_work
    }

    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        self.render_pixels(tile, samples, accum, None)
    }

    fn render_tile_skipping(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: &[bool],
    ) -> anyhow::Result<()> {
        assert_eq!(skip.len(), accum.len());
        self.skipping_calls.fetch_add(1, Ordering::SeqCst);
        self.skipped
            .fetch_add(skip.iter().filter(|&&k| k).count(), Ordering::SeqCst);
        self.render_pixels(tile, samples, accum, Some(skip))
    }
}

impl ColumnNoise {
    fn render_pixels(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
        skip: Option<&[bool]>,
    ) -> anyhow::Result<()> {
        let calls = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some((after, flag)) = &self.stop_after {
            if calls == *after {
                // As SIGINT would.
                flag.store(2, Ordering::SeqCst);
            }
        }
        for (j, y) in (tile.y..tile.y + tile.h).enumerate() {
            for (i, x) in (tile.x..tile.x + tile.w).enumerate() {
                let k = j * tile.w as usize + i;
                if skip.is_some_and(|s| s[k]) {
                    continue;
                }
                let acc = &mut accum[k];
                for s in samples.clone() {
                    let h = mix64(u64::from(y * 10_000 + x) << 32 | u64::from(s));
                    let u = (h >> 40) as f32 / (1u64 << 24) as f32;
                    let v = 0.3 + self.amplitude_at(x, y) * (u - 0.5);
                    acc[0] += v;
                    acc[1] += v;
                    acc[2] += v;
                    acc[3] += 1.0;
                }
            }
        }
        Ok(())
    }
}
