//! The cluster protocol, run in one process: ranks are threads joined by the channel
//! transport, rendering with mock renderers whose sums would change in their low bits if any
//! sample were added twice, missed, or added in another order. The same node code runs over
//! MPI in tests/mpi_cluster.rs (feature `mpi`).
//!
//! - the film of N ranks is bit-identical to one process's, under every strategy, with
//!   stealing on and off, in one pass and in several, with uneven ranks;
//! - every tile is rendered exactly once per pass, and every pixel gets every sample once;
//! - tiles do move across ranks when one rank is slower (and never with stealing off);
//! - a rank that cannot get ready gives every rank the same error; ranks that would render
//!   different images refuse to start;
//! - a rank that falls silent, or whose every worker fails, ends the job with an error naming
//!   it; a worker that fails beside working ones is retired and its rank-mates render its
//!   tiles, the film still one process's;
//! - rank 0's film at each pass boundary (what a checkpoint holds) is one process's at that
//!   many samples, and a cluster resumed from it finishes one process's film, bit for bit;
//! - a time limit ends the frame whole at a pass boundary, on every rank;
//! - a stop signal on any rank ends the frame on rank 0 with what has arrived, every rank
//!   ends cleanly, and the film of the complete passes resumes into one process's film;
//! - adaptive sampling over ranks gives one process's film, resumed from inside a pass too;
//!   ranks whose workers want big tiles get tiles that skip the stopped blocks, the film the
//!   same.

mod cli_support;
mod sched_support;

use cli_support::gasworks_command;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gasworks::render::{Film, RenderSettings, Tile, TileRenderer};
use gasworks::scene::{MaterialKind, Scene};
use gasworks::sched::adaptive_sampling::AdaptiveSampling;
use gasworks::sched::fault::{FaultHook, FaultKind};
use gasworks::sched::protocol::Msg;
use gasworks::sched::ranks::StopRequest;
use gasworks::sched::workers::build_workers;
use gasworks::sched::{
    estimate_costmap, render_frame, CpuOnlyFactory, DeviceSpec, Frame, PartialPass,
    RendererFactory, Resume, SchedConfig, Stopped, Strategy,
};
use gasworks::sched::{
    run_rank, ChannelTransport, Discard, FrameError, FrameJob, FrameSink, PlanInputs, RankSetup,
    Timing, Transport, TransportError,
};
use sched_support::{
    assert_no_cpu_ran_a_gpu_tile, room, room_settings, without_pieces, ColumnNoise, MockFactory,
    MockRenderer,
};

/// The stop flag of a rank that no signal reaches.
static NO_STOP: AtomicU8 = AtomicU8::new(0);

const W: u32 = 37;
const H: u32 = 23;
const SPP: u32 = 6;
const SEED: u64 = 11;

fn bits(f: &Film) -> Vec<[u32; 4]> {
    f.pixels.iter().map(|p| p.map(f32::to_bits)).collect()
}

fn config(strategy: Strategy, steal: bool, pass_spp: Option<u32>) -> SchedConfig {
    SchedConfig {
        strategy,
        tiles: Some(24),
        steal,
        devices: vec![DeviceSpec::Cpu { workers: Some(1) }],
        pass_spp,
        ..SchedConfig::default()
    }
}

fn test_timing() -> Timing {
    Timing {
        poll: Duration::from_micros(100),
        heartbeat: Duration::from_millis(50),
        dead_after: Duration::from_secs(30),
    }
}

/// One rank of a test cluster: its worker count, its mock's extra sleep per tile, and what
/// it brings to the handshake.
#[derive(Clone)]
struct RankSpec {
    workers: usize,
    sleep_us: u64,
    /// Its CPU mock's busy loop per pixel sample (thread CPU time, which calibration reads).
    cpu_spin: u32,
    /// What its CPU mock says it runs on (`TileRenderer::hardware`; empty: not known).
    hardware: &'static str,
    /// Its `--devices` (default: `cpu:workers`).
    devices: Option<Vec<DeviceSpec>>,
    /// `Some(reason)`: this rank could not get ready.
    broken: Option<String>,
    fingerprint: u64,
    renderer: Option<Arc<dyn TileRenderer>>,
    /// Rank 0: the film to go on from.
    resume: Option<Resume>,
    /// Rank 0: where the films at pass boundaries are kept (samples per pixel, film bits),
    /// and those after every tile that arrived inside a pass.
    boundaries: Option<Boundaries>,
    within: Option<Boundaries>,
    /// Rank 0: the whole films (the odd-pass plane too) after every tile inside a pass.
    within_films: Option<Films>,
    /// Rank 0: the time limit.
    deadline: Option<Instant>,
    /// This rank's stop requests (what a signal sets).
    stop: Option<&'static AtomicU8>,
    /// (device, stream, attempt): that GPU stream's mock fails from that attempt on.
    failing_gpus: Vec<(u32, u32, usize)>,
    /// GPUs whose mocks' failure loses the device (`MockFactory::with_sticky_gpu`).
    sticky_gpus: Vec<u32>,
}

type Boundaries = Arc<Mutex<Vec<(u32, Vec<[u32; 4]>)>>>;
type Films = Arc<Mutex<Vec<(u32, Film)>>>;

/// Rank 0's sink in a test: keeps the film of every pass boundary, and, when asked, of every
/// moment a tile arrived inside a pass (as bits, or whole).
struct Keep(Boundaries, Option<Boundaries>, Option<Films>);

impl FrameSink for Keep {
    fn between_passes(&mut self, film: &Film, spp_done: u32) {
        self.0.lock().unwrap().push((spp_done, bits(film)));
    }
    fn within_pass(&mut self, spp_done: u32, film: &dyn Fn() -> Film) {
        if let Some(within) = &self.1 {
            within.lock().unwrap().push((spp_done, bits(&film())));
        }
        if let Some(films) = &self.2 {
            films.lock().unwrap().push((spp_done, film()));
        }
    }
    /// The ranks hold the film: it is gathered whenever the test keeps it.
    fn film_wanted(&mut self, within_pass: bool) -> bool {
        !within_pass || self.1.is_some() || self.2.is_some()
    }
    fn finish(&mut self, _: &Frame) -> anyhow::Result<()> {
        Ok(())
    }
    /// What a silent rank's abort adds: whether tiles had arrived, and whose pixels were lost.
    fn keep(&mut self, frame: &Frame) -> Option<String> {
        let stopped = frame.stopped.as_ref()?;
        let lost = stopped.lost.as_ref().map(|l| &l.ranks);
        Some(format!(
            "; kept: tiles arrived {}, lost {lost:?}, resumable {}",
            stopped.rendered_any(),
            frame.resume_film().is_some()
        ))
    }
}

impl RankSpec {
    fn new(workers: usize, sleep_us: u64) -> RankSpec {
        RankSpec {
            workers,
            sleep_us,
            cpu_spin: 0,
            hardware: "",
            devices: None,
            broken: None,
            fingerprint: 42,
            renderer: None,
            resume: None,
            boundaries: None,
            within: None,
            within_films: None,
            deadline: None,
            stop: None,
            failing_gpus: Vec::new(),
            sticky_gpus: Vec::new(),
        }
    }
}

/// What each rank's `run_rank` returned, and every render call each rank made.
type RankOutcome = (Result<Option<Frame>, FrameError>, Vec<(Tile, Range<u32>)>);

fn run_cluster(
    ranks: &[RankSpec],
    config: &SchedConfig,
    timing: Timing,
    fault: Option<FaultHook>,
) -> Vec<RankOutcome> {
    let transports = ChannelTransport::create(ranks.len())
        .into_iter()
        .map(|t| LateRoster::new(t, None))
        .collect();
    run_cluster_over(transports, ranks, config, timing, fault)
}

/// A channel transport that, on one chosen rank, holds back every message from rank 0
/// until a message from another rank has come in: that rank's roster is overtaken by a
/// peer's message, as happens under MPI, where order holds only per pair of ranks.
struct LateRoster {
    inner: ChannelTransport,
    /// `Some`: hold rank 0's messages until a peer's arrives, or until this deadline
    /// (a guard against a hang, should no peer ever write).
    hold_until: Option<Instant>,
    held: VecDeque<(usize, Vec<u8>)>,
    overtaken: Arc<AtomicBool>,
    /// Bytes sent and received through this rank's transport, by message kind.
    counts: Option<ByteCounts>,
}

type ByteCounts = Arc<Mutex<HashMap<&'static str, u64>>>;

impl LateRoster {
    fn count(&self, bytes: &[u8]) {
        if let (Some(counts), Ok(msg)) = (&self.counts, Msg::decode(bytes)) {
            *counts.lock().unwrap().entry(msg.name()).or_insert(0) += bytes.len() as u64;
        }
    }
}

impl LateRoster {
    fn new(inner: ChannelTransport, overtaken: Option<Arc<AtomicBool>>) -> LateRoster {
        LateRoster {
            inner,
            hold_until: overtaken
                .is_some()
                .then(|| Instant::now() + Duration::from_secs(10)),
            held: VecDeque::new(),
            overtaken: overtaken.unwrap_or_default(),
            counts: None,
        }
    }
}

impl Transport for LateRoster {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn send(&mut self, to: usize, bytes: Vec<u8>) -> Result<(), TransportError> {
        self.count(&bytes);
        self.inner.send(to, bytes)
    }
    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        let Some(deadline) = self.hold_until else {
            if let Some(m) = self.held.pop_front() {
                return Ok(Some(m));
            }
            let got = self.inner.poll()?;
            if let Some((_, bytes)) = &got {
                self.count(bytes);
            }
            return Ok(got);
        };
        while let Some((from, bytes)) = self.inner.poll()? {
            if from == 0 {
                self.held.push_back((from, bytes));
            } else {
                // A peer got here first: let it through, then rank 0's messages in order.
                self.overtaken.store(true, Ordering::SeqCst);
                self.hold_until = None;
                return Ok(Some((from, bytes)));
            }
        }
        if Instant::now() >= deadline {
            self.hold_until = None;
        }
        Ok(None)
    }
    fn flush(&mut self, timeout: Duration) -> Result<(), TransportError> {
        self.inner.flush(timeout)
    }
    fn abort(&mut self, message: &str) {
        self.inner.abort(message)
    }
}

fn run_cluster_over(
    transports: Vec<LateRoster>,
    ranks: &[RankSpec],
    config: &SchedConfig,
    timing: Timing,
    fault: Option<FaultHook>,
) -> Vec<RankOutcome> {
    let scene: Scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings: RenderSettings = room_settings(W, H, SPP, SEED);
    std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .into_iter()
            .zip(ranks)
            .enumerate()
            .map(|(r, (mut t, spec))| {
                let (scene, settings, config) = (&scene, settings, config.clone());
                s.spawn(move || {
                    let spin = spec.cpu_spin;
                    let mut factory = MockFactory::new(
                        MockRenderer::new(W, SEED)
                            .with_sleep(spec.sleep_us)
                            .with_spin(move |_, _| spin)
                            .on_hardware(spec.hardware),
                    );
                    for &(device, stream, attempt) in &spec.failing_gpus {
                        factory = factory.with_failing_gpu(device, stream, attempt);
                    }
                    for &device in &spec.sticky_gpus {
                        factory = factory.with_sticky_gpu(device);
                    }
                    let devices = spec.devices.clone().unwrap_or_else(|| {
                        vec![DeviceSpec::Cpu {
                            workers: Some(spec.workers),
                        }]
                    });
                    let setup = match &spec.broken {
                        Some(reason) => Err(reason.clone()),
                        None => {
                            let workers = match &spec.renderer {
                                Some(renderer) => {
                                    build_workers(&devices, &Fixed(renderer.clone())).unwrap()
                                }
                                None => build_workers(&devices, &factory).unwrap(),
                            };
                            let plan = (r == 0).then(|| {
                                let (estimate, raster, estimate_stats) = estimate_costmap(
                                    scene,
                                    &settings,
                                    &config,
                                    Tile::whole(settings.width, settings.height),
                                );
                                PlanInputs {
                                    estimate,
                                    raster,
                                    estimate_stats,
                                    resume: spec.resume.clone(),
                                    estimated_before: false,
                                }
                            });
                            Ok(RankSetup::new(
                                workers,
                                format!("host{r}"),
                                "mock".into(),
                                spec.fingerprint,
                                plan,
                            ))
                        }
                    };
                    let job = FrameJob {
                        settings,
                        config,
                        quiet: true,
                        timing,
                        fault,
                        deadline: spec.deadline,
                        stop: spec.stop.unwrap_or(&NO_STOP),
                    };
                    let result = match &spec.boundaries {
                        Some(b) => run_rank(
                            &mut t,
                            setup,
                            &job,
                            &mut Keep(b.clone(), spec.within.clone(), spec.within_films.clone()),
                        ),
                        None => run_rank(&mut t, setup, &job, &mut Discard),
                    };
                    (result, factory.all_calls())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a rank thread panicked"))
            .collect()
    })
}

/// A factory that hands out one given renderer, for CPU and GPU workers alike.
struct Fixed(Arc<dyn TileRenderer>);

impl RendererFactory for Fixed {
    fn cpu(&self) -> anyhow::Result<Arc<dyn TileRenderer>> {
        Ok(self.0.clone())
    }
    fn gpu(&self, _: u32, _: u32) -> anyhow::Result<Arc<dyn TileRenderer>> {
        Ok(self.0.clone())
    }
}

/// Rank 0's frame of a job in which every rank succeeded (and only rank 0 returned a frame),
/// and every render call of every rank.
fn frame_and_calls(outcomes: Vec<RankOutcome>, what: &str) -> (Frame, Vec<(Tile, Range<u32>)>) {
    let mut calls = Vec::new();
    let mut frame = None;
    for (r, (result, c)) in outcomes.into_iter().enumerate() {
        let f = result.unwrap_or_else(|e| panic!("{what}: rank {r}: {e}"));
        assert_eq!(f.is_some(), r == 0, "{what}: only rank 0 has the frame");
        frame = frame.or(f);
        calls.extend(c);
    }
    (frame.expect("rank 0's frame"), calls)
}

/// The film whose pixels' bits are `film_bits` (as [`bits`] gives them).
fn film_of_bits(film_bits: &[[u32; 4]]) -> Film {
    let mut film = Film::new(W, H);
    for (p, b) in film.pixels.iter_mut().zip(film_bits) {
        *p = b.map(f32::from_bits);
    }
    film
}

fn reference(config: &SchedConfig) -> Vec<[u32; 4]> {
    reference_at(config, SPP)
}

/// One process's film after `spp` samples per pixel, in `config`'s passes.
fn reference_at(config: &SchedConfig, spp: u32) -> Vec<[u32; 4]> {
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(W, H, spp, SEED);
    let factory = MockFactory::new(MockRenderer::new(W, SEED));
    bits(
        &render_frame(&scene, &settings, config, &factory, true)
            .unwrap()
            .film,
    )
}

/// Per pixel, the sample ranges received over all ranks are disjoint, in order, and cover
/// `0..SPP`.
fn check_every_sample_once(mut calls: Vec<(Tile, Range<u32>)>) {
    let mut next = vec![0u32; (W * H) as usize];
    calls.sort_by_key(|(t, s)| (s.start, t.y, t.x));
    for (tile, samples) in &calls {
        for y in tile.y..tile.y + tile.h {
            for x in tile.x..tile.x + tile.w {
                let p = (y * W + x) as usize;
                assert_eq!(next[p], samples.start, "pixel ({x},{y}) got {samples:?}");
                next[p] = samples.end;
            }
        }
    }
    assert!(next.iter().all(|&n| n == SPP), "some pixel missed samples");
}

#[test]
fn films_are_bit_identical_to_one_process_and_every_tile_runs_once() {
    // Uneven ranks, one of them slow, so that stealing within and across ranks happens.
    let clusters = [
        vec![RankSpec::new(1, 0), RankSpec::new(2, 1500)],
        vec![
            RankSpec::new(2, 300),
            RankSpec::new(1, 2000),
            RankSpec::new(3, 0),
        ],
    ];
    let mut moved_with_steal = 0;
    for pass_spp in [None, Some(4)] {
        for strategy in Strategy::ALL {
            for steal in [false, true] {
                let config = config(strategy, steal, pass_spp);
                let expected = reference(&config);
                for ranks in &clusters {
                    let what = format!(
                        "{strategy:?}, steal {steal}, passes {pass_spp:?}, {} ranks",
                        ranks.len()
                    );
                    let outcomes = run_cluster(ranks, &config, test_timing(), None);
                    let (frame, calls) = frame_and_calls(outcomes, &what);
                    assert!(bits(&frame.film) == expected, "{what}: film differs");
                    check_every_sample_once(calls);
                    let report = &frame.report;
                    let cluster = report.cluster.as_ref().unwrap();
                    let workers: usize = ranks.iter().map(|r| r.workers).sum();
                    assert_eq!(report.workers.len(), workers, "{what}");
                    for (p, pass) in report.passes.iter().enumerate() {
                        let mut tasks: Vec<usize> = pass.records.iter().map(|r| r.task).collect();
                        tasks.sort();
                        assert_eq!(tasks, (0..pass.tiles.len()).collect::<Vec<_>>(), "{what}");
                        // The initial plan gives each rank a contiguous run of tiles.
                        let mut start = 0;
                        for r in 0..ranks.len() {
                            let mine: Vec<usize> = pass
                                .initial_deques
                                .iter()
                                .enumerate()
                                .filter(|(w, _)| cluster.worker_rank[*w] == r)
                                .flat_map(|(_, d)| d.iter().copied())
                                .collect();
                            let mut sorted = mine.clone();
                            sorted.sort();
                            assert_eq!(
                                sorted,
                                (start..start + mine.len()).collect::<Vec<_>>(),
                                "{what}: pass {p}: rank {r}'s share is not contiguous"
                            );
                            start += mine.len();
                        }
                        let moved: u32 = cluster.counters[p].iter().map(|c| c.tiles_in).sum();
                        let given: u32 = cluster.counters[p].iter().map(|c| c.tiles_out).sum();
                        assert_eq!(moved, given, "{what}: tiles in and out differ");
                        if steal {
                            moved_with_steal += moved;
                        } else {
                            assert_eq!(moved, 0, "{what}: tiles moved with stealing off");
                            assert!(pass.records.iter().all(|r| r.stolen_from.is_none()));
                        }
                    }
                    let totals = cluster.rank_totals(report);
                    let tiles: usize = totals.iter().map(|t| t.tiles).sum();
                    let expected_tiles: usize = report.passes.iter().map(|p| p.tiles.len()).sum();
                    assert_eq!(tiles, expected_tiles, "{what}");
                }
            }
        }
    }
    assert!(
        moved_with_steal > 0,
        "no tile ever moved across ranks: the test does not exercise cross-rank steals"
    );
}

#[test]
fn mixed_devices_calibrate_the_first_pass_and_change_no_bit() {
    // Rank 0: two CPU threads whose mock spins per sample; rank 1: one GPU, two fast streams.
    let mut cpu = RankSpec::new(2, 0);
    cpu.cpu_spin = 3000;
    let mut gpu = RankSpec::new(2, 0);
    gpu.devices = Some(DeviceSpec::parse_list("gpu0x2").unwrap());
    for calibrate in [false, true] {
        let config = SchedConfig {
            calibrate,
            ..config(Strategy::Sorted, true, None)
        };
        let what = format!("calibrate {calibrate}");
        let expected = reference(&config);
        let outcomes = run_cluster(&[cpu.clone(), gpu.clone()], &config, test_timing(), None);
        let (frame, calls) = frame_and_calls(outcomes, &what);
        assert!(bits(&frame.film) == expected, "{what}: film differs");
        let cal = &frame.report.calibration;
        if !calibrate {
            assert!(cal.is_empty(), "{cal:?}");
            check_every_sample_once(calls);
            continue;
        }
        assert_eq!(cal.iter().map(|c| c.group).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(
            (cal[0].worker.as_str(), cal[1].worker.as_str()),
            ("r0/cpu#0", "r1/gpu0/s0")
        );
        assert!(cal[1].speed > 20.0 * cal[0].speed, "{cal:?}");
        // Each rank rendered its piece exactly twice beyond the frame's own tiles.
        check_every_sample_once(without_pieces(calls, cal));
        // The first pass's shares follow the speeds: the CPU rank's run holds less than a
        // tenth of the GPU rank's estimated cost.
        let p = &frame.report.passes[0];
        let cost = |d: &Vec<usize>| d.iter().map(|&t| p.predicted[t]).sum::<f64>();
        let on_cpu: f64 = p.initial_deques[..2].iter().map(cost).sum();
        let on_gpu: f64 = p.initial_deques[2..].iter().map(cost).sum();
        assert!(
            on_cpu < 0.1 * on_gpu,
            "CPU runs {on_cpu}, GPU runs {on_gpu}"
        );
        // And the GPU rank, which finishes its 24 small tiles long before a CPU thread would
        // finish one of them, gave none to the CPU rank (the cross-rank steal guard).
        let cluster = frame.report.cluster.as_ref().unwrap();
        assert_eq!(cluster.counters[0][0].tiles_in, 0, "{:?}", cluster.counters);
        assert!(
            p.records
                .iter()
                .filter(|r| r.worker < 2)
                .all(|r| r.stolen_from.is_none_or(|v| v < 2)),
            "a CPU thread ran a GPU worker's tile"
        );
        let summary = frame.report.summary();
        assert!(summary.contains("calibration: r0/cpu#0 "), "{summary}");
    }
}

/// Ranks that say they run on one CPU model are one speed class: their tiles are measured as
/// one and every worker of both plans at one speed. Rank 0 is slowed here (its mock spins per
/// sample: another job on its node, or the noise that made two alike ranks time 2x apart);
/// measured apart, it would plan at a fraction of rank 1's speed, as it does when the ranks'
/// hardware is not known.
#[test]
fn alike_ranks_plan_at_one_pooled_speed() {
    let config = config(Strategy::Sorted, true, Some(2));
    let expected = reference(&config);
    for (hardware, pooled) in [("cpu: Fast 9000", true), ("", false)] {
        let mut slow = RankSpec::new(2, 0);
        slow.cpu_spin = 3000;
        slow.hardware = hardware;
        // One thread beside the slow rank's two: CPU threads are alike whatever their count.
        let mut fast = RankSpec::new(1, 0);
        fast.hardware = hardware;
        let what = format!("two ranks on {hardware:?}");
        let outcomes = run_cluster(&[slow, fast], &config, test_timing(), None);
        let (frame, _) = frame_and_calls(outcomes, &what);
        assert!(bits(&frame.film) == expected, "{what}: film differs");
        let report = &frame.report;
        assert!(report.calibration.is_empty(), "{what}: calibrated");
        assert!(
            report.passes.len() >= 2,
            "{what}: {} passes",
            report.passes.len()
        );
        let speeds = &report.passes[1].speeds;
        assert_eq!(speeds.len(), 3, "{what}");
        let summary = report.summary();
        let line = "one speed for alike devices (one kind and hardware, GPUs with as many streams): r0/cpu, r1/cpu";
        if pooled {
            assert_eq!(report.speed_classes, [0, 0, 0], "{what}");
            assert!(speeds.iter().all(|&s| s == speeds[0]), "{what}: {speeds:?}");
            assert!(summary.contains(line), "{what}: {summary}");
        } else {
            assert_eq!(report.speed_classes, [0, 0, 1], "{what}");
            assert!(
                speeds[2] > 2.0 * speeds[0],
                "{what}: not measured apart: {speeds:?}"
            );
            assert!(
                !summary.contains("one speed for alike"),
                "{what}: {summary}"
            );
        }
    }
}

#[test]
fn cpu_ranks_on_unlike_machines_calibrate_and_alike_ones_do_not() {
    // Every worker is "cpu", but rank 0's machine is slow (its mock spins per sample): the
    // device names cannot tell the ranks apart, their CPUs' names can.
    let ranks = |slow: &'static str, fast: &'static str| {
        let mut a = RankSpec::new(2, 0);
        a.cpu_spin = 3000;
        a.hardware = slow;
        let mut b = RankSpec::new(2, 0);
        b.hardware = fast;
        [a, b]
    };
    let config = config(Strategy::Sorted, true, None);
    let expected = reference(&config);
    for (slow, fast, unlike) in [
        ("cpu: Slow 1000", "cpu: Fast 9000", true),
        ("cpu: Fast 9000", "cpu: Fast 9000", false),
        ("", "", false),
    ] {
        let what = format!("{slow:?} beside {fast:?}");
        let outcomes = run_cluster(&ranks(slow, fast), &config, test_timing(), None);
        let (frame, _) = frame_and_calls(outcomes, &what);
        assert!(bits(&frame.film) == expected, "{what}: film differs");
        let cal = &frame.report.calibration;
        let summary = frame
            .report
            .cluster
            .as_ref()
            .unwrap()
            .summary(&frame.report);
        if !unlike {
            assert!(cal.is_empty(), "{what}: {cal:?}");
            assert!(summary.contains("[mock]") == slow.is_empty(), "{summary}");
            continue;
        }
        assert_eq!(
            cal.iter().map(|c| c.worker.as_str()).collect::<Vec<_>>(),
            ["r0/cpu#0", "r1/cpu#0"],
            "{what}"
        );
        assert!(cal[1].speed > 5.0 * cal[0].speed, "{what}: {cal:?}");
        // The first pass is shared by those speeds: the slow rank's run holds less than a
        // third of the fast rank's estimated cost (by worker counts it would be about equal).
        let p = &frame.report.passes[0];
        let cost = |d: &Vec<usize>| d.iter().map(|&t| p.predicted[t]).sum::<f64>();
        let on_slow: f64 = p.initial_deques[..2].iter().map(cost).sum();
        let on_fast: f64 = p.initial_deques[2..].iter().map(cost).sum();
        assert!(
            on_slow < on_fast / 3.0,
            "{what}: {on_slow} against {on_fast}"
        );
        // The summary says what each rank runs on.
        assert!(summary.contains("[mock; cpu: Slow 1000]"), "{summary}");
        assert!(summary.contains("[mock; cpu: Fast 9000]"), "{summary}");
    }
}

#[test]
fn cpu_threads_beside_a_gpu_leave_it_its_tiles_in_every_rank() {
    // Two ranks, each a CPU thread (spinning per sample) beside two fast GPU streams: after
    // the calibration, the guard within each rank and across ranks keeps the GPU-sized tiles
    // off the CPU threads, in every pass.
    let mut mixed = RankSpec::new(3, 0);
    mixed.cpu_spin = 3000;
    mixed.devices = Some(DeviceSpec::parse_list("cpu:1,gpu0x2").unwrap());
    let config = config(Strategy::Sorted, true, Some(2));
    let expected = reference(&config);
    let outcomes = run_cluster(&[mixed.clone(), mixed], &config, test_timing(), None);
    let (frame, _) = frame_and_calls(outcomes, "mixed ranks");
    assert!(bits(&frame.film) == expected, "film differs");
    assert_eq!(
        frame.report.calibration.len(),
        4,
        "{:?}",
        frame.report.calibration
    );
    let cpu = |w: usize| w % 3 == 0;
    assert_no_cpu_ran_a_gpu_tile(&frame.report.passes, cpu);
}

#[test]
fn a_peer_message_that_overtakes_the_roster_waits_for_the_frame() {
    // Rank 2's roster is held back until rank 0 or 1, out of tiles, asks rank 2 for some:
    // the request must wait for the frame to start, not end the job.
    let ranks = vec![
        RankSpec::new(1, 0),
        RankSpec::new(1, 0),
        RankSpec::new(2, 0),
    ];
    let config = config(Strategy::Sorted, true, None);
    let overtaken = Arc::new(AtomicBool::new(false));
    let transports = ChannelTransport::create(ranks.len())
        .into_iter()
        .enumerate()
        .map(|(r, t)| LateRoster::new(t, (r == 2).then(|| overtaken.clone())))
        .collect();
    let outcomes = run_cluster_over(transports, &ranks, &config, test_timing(), None);
    assert!(
        overtaken.load(Ordering::SeqCst),
        "no peer message reached rank 2 before its roster: the test did not exercise the race"
    );
    let (frame, calls) = frame_and_calls(outcomes, "overtaken roster");
    assert!(bits(&frame.film) == reference(&config));
    check_every_sample_once(calls);
}

#[test]
fn a_rank_that_cannot_get_ready_gives_every_rank_the_same_error() {
    let mut broken = RankSpec::new(1, 0);
    broken.broken = Some("host1: /shared/scene.obj: cannot open: No such file".into());
    let ranks = vec![RankSpec::new(2, 0), broken, RankSpec::new(1, 0)];
    let start = Instant::now();
    let outcomes = run_cluster(
        &ranks,
        &config(Strategy::Sorted, true, None),
        test_timing(),
        None,
    );
    let texts: Vec<String> = outcomes
        .into_iter()
        .map(|(r, calls)| {
            assert!(calls.is_empty(), "a tile was rendered");
            match r {
                Err(e @ FrameError::Setup(_)) => e.to_string(),
                other => panic!("expected a setup error, got {:?}", other.map(|_| ())),
            }
        })
        .collect();
    assert!(texts.iter().all(|t| t == &texts[0]), "{texts:#?}");
    assert!(texts[0].contains("rank 1 of 3"), "{}", texts[0]);
    assert!(texts[0].contains("No such file"), "{}", texts[0]);
    // Not a timing assertion: a generous bound that tells a hang from an answer.
    assert!(start.elapsed() < Duration::from_secs(20));
}

#[test]
fn ranks_that_would_render_different_images_refuse_to_start() {
    let mut odd = RankSpec::new(1, 0);
    odd.fingerprint = 7;
    let outcomes = run_cluster(
        &[RankSpec::new(1, 0), RankSpec::new(1, 0), odd],
        &config(Strategy::Sorted, true, None),
        test_timing(),
        None,
    );
    for (r, _) in outcomes {
        let e = r.err().expect("the job started").to_string();
        assert!(e.contains("rank 2 (host2)"), "{e}");
        assert!(e.contains("would not render the same image"), "{e}");
    }
}

/// A rank fallen silent is named and the job ends; rank 0 first keeps what the other ranks
/// hold. The pixels the silent rank held are lost: in the first pass they hold nothing, which
/// is still a point to resume from; in a later pass they hold the film gathered at the last
/// boundary (a checkpoint's), which is one too.
#[test]
fn a_silent_rank_is_named_and_the_job_ends() {
    let timing = Timing {
        dead_after: Duration::from_secs(2),
        ..test_timing()
    };
    for (pass_spp, after_tiles) in [(None, 2), (Some(2), 12)] {
        let fault = FaultHook {
            rank: 1,
            after_tiles,
            kind: FaultKind::Silence,
        };
        let mut ranks = vec![
            RankSpec::new(1, 2000),
            RankSpec::new(1, 2000),
            RankSpec::new(1, 2000),
        ];
        // Rank 0's sink is `Keep`, which says what it kept, and gathers the film at every
        // pass boundary.
        ranks[0].boundaries = Some(Default::default());
        let config = config(Strategy::Sorted, true, pass_spp);
        let outcomes = run_cluster(&ranks, &config, timing, Some(fault));
        match &outcomes[0].0 {
            Err(FrameError::Silent { rank: 1, .. }) => {}
            other => panic!(
                "rank 0: expected rank 1 to be named, got {:?}",
                other.as_ref().map(|_| ())
            ),
        }
        let text = outcomes[0].0.as_ref().err().map(|e| e.to_string());
        assert!(
            text.as_deref()
                .is_some_and(|t| t.contains("rank 1 has sent nothing")),
            "{text:?}"
        );
        // Rank 2 learns of the abort from rank 0.
        match &outcomes[2].0 {
            Err(FrameError::Transport(TransportError::Aborted { rank: 0, message })) => {
                assert!(message.contains("rank 1"), "{message}");
                assert!(
                    message.ends_with("; kept: tiles arrived true, lost Some([1]), resumable true"),
                    "{message}"
                );
            }
            other => panic!(
                "rank 2: expected the abort, got {:?}",
                other.as_ref().map(|_| ())
            ),
        }
    }
}

/// A renderer that fails on one tile.
struct FailsAt(Tile);

impl TileRenderer for FailsAt {
    fn name(&self) -> String {
        "fails-at".into()
    }
    fn render_tile(&self, tile: Tile, _: Range<u32>, _: &mut [[f32; 4]]) -> anyhow::Result<()> {
        if tile == self.0 {
            anyhow::bail!("device lost");
        }
        Ok(())
    }
}

/// A renderer that fails on every tile.
struct AlwaysFails;

impl TileRenderer for AlwaysFails {
    fn name(&self) -> String {
        "always-fails".into()
    }
    fn render_tile(&self, _: Tile, _: Range<u32>, _: &mut [[f32; 4]]) -> anyhow::Result<()> {
        anyhow::bail!("device lost")
    }
}

/// The text of `rank`'s own failure (`RankFailed` naming itself); any other outcome fails
/// the test.
fn own_failure<T>(rank: usize, outcome: &Result<T, FrameError>) -> String {
    match outcome {
        Err(e @ FrameError::RankFailed { rank: r, .. }) if *r == rank => e.to_string(),
        other => panic!(
            "rank {rank}: expected its failure, got {:?}",
            other.as_ref().map(|_| ())
        ),
    }
}

#[test]
fn a_rank_whose_calibration_fails_ends_the_job_with_its_rank_named() {
    // Rank 1's GPU fails on its first launch, which is its calibration piece.
    let mut bad = RankSpec::new(1, 0);
    bad.devices = Some(DeviceSpec::parse_list("gpu0").unwrap());
    bad.renderer = Some(Arc::new(AlwaysFails));
    let config = config(Strategy::Sorted, true, None);
    let outcomes = run_cluster(&[RankSpec::new(1, 0), bad], &config, test_timing(), None);
    let text = own_failure(1, &outcomes[1].0);
    assert!(
        text.contains("device lost") && text.contains("calibrating worker gpu0/s0"),
        "{text}"
    );
    // Rank 0 hears it as rank 1's calibration answer or as its abort, whichever comes first.
    match &outcomes[0].0 {
        Err(FrameError::Transport(TransportError::Aborted { rank: 1, message }))
        | Err(FrameError::RankFailed {
            rank: 1, message, ..
        }) => {
            assert!(message.contains("device lost"), "{message}")
        }
        other => panic!(
            "rank 0: expected rank 1's failure, got {:?}",
            other.as_ref().map(|_| ())
        ),
    }
}

#[test]
fn a_failing_worker_ends_the_job_with_its_rank_named() {
    // Every tile of rank 1's share fails; whichever rank renders one of them fails.
    let config = config(Strategy::Regular, false, None);
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let settings = room_settings(W, H, SPP, SEED);
    let (map, ..) = estimate_costmap(
        &scene,
        &settings,
        &config,
        Tile::whole(settings.width, settings.height),
    );
    let scale = gasworks::sched::sat::MapScale::between((W, H), (map.width, map.height));
    let tiles =
        gasworks::sched::tiles::layout(config.strategy, W, H, config.tiles, &map.sat(), scale);
    let mut bad = RankSpec::new(1, 0);
    bad.renderer = Some(Arc::new(FailsAt(tiles[tiles.len() - 1])));
    let outcomes = run_cluster(&[RankSpec::new(1, 0), bad], &config, test_timing(), None);
    let text = own_failure(1, &outcomes[1].0);
    assert!(
        text.contains("device lost") && text.contains("fails-at"),
        "{text}"
    );
    match &outcomes[0].0 {
        Err(FrameError::Transport(TransportError::Aborted { rank: 1, message })) => {
            assert!(message.contains("device lost"), "{message}")
        }
        other => panic!(
            "rank 0: expected the abort, got {:?}",
            other.as_ref().map(|_| ())
        ),
    }
}

/// Rank 1's second GPU stream fails on its first tile: it is retired (`--on-worker-error
/// retire`, the default), its rank-mate renders its tiles, rank 0's report names it, and later
/// passes give it nothing; the film is one process's, every sample once. Stealing is off, so
/// the failing stream's tiles are its own until it fails (it is sure to try one).
#[test]
fn a_failing_worker_beside_working_ones_is_retired_and_the_film_is_one_process_s() {
    let mut gpu = RankSpec::new(2, 0);
    gpu.devices = Some(DeviceSpec::parse_list("gpu0x2").unwrap());
    gpu.failing_gpus = vec![(0, 1, 1)];
    let config = SchedConfig {
        calibrate: false,
        ..config(Strategy::Regular, false, Some(2))
    };
    let outcomes = run_cluster(&[RankSpec::new(1, 0), gpu], &config, test_timing(), None);
    let (frame, calls) = frame_and_calls(outcomes, "retired");
    assert!(bits(&frame.film) == reference(&config), "film differs");
    check_every_sample_once(calls);
    let r = &frame.report.retirements;
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(
        (r[0].worker, r[0].label.as_str(), r[0].pass),
        (2, "r1/gpu0/s1", 0)
    );
    assert!(r[0].error.contains("out of memory"), "{}", r[0].error);
    for (i, p) in frame.report.passes.iter().enumerate() {
        let counted: usize = p.workers.iter().map(|s| s.tiles).sum();
        assert_eq!(counted, p.tiles.len(), "pass {i}");
        if i > 0 {
            assert_eq!(p.workers[2].tiles, 0, "pass {i}: {:?}", p.workers);
            assert_eq!(p.speeds[2], 0.0, "pass {i} planned it at {:?}", p.speeds);
        }
    }
    assert!(frame
        .report
        .summary()
        .contains("worker r1/gpu0/s1 retired in pass 1"));
}

/// A failure that loses rank 1's first GPU retires both of its streams at once, within the
/// rank: rank 0 hears of both (one `Retired` each) and plans them at speed 0; the rank's other
/// GPU renders their tiles, and the film is one process's, every sample once.
#[test]
fn a_lost_device_retires_every_stream_of_it_on_its_rank() {
    let mut gpu = RankSpec::new(3, 0);
    gpu.devices = Some(DeviceSpec::parse_list("gpu0x2,gpu1").unwrap());
    gpu.failing_gpus = vec![(0, 1, 1)];
    gpu.sticky_gpus = vec![0];
    let config = SchedConfig {
        calibrate: false,
        ..config(Strategy::Regular, false, Some(2))
    };
    let outcomes = run_cluster(&[RankSpec::new(1, 0), gpu], &config, test_timing(), None);
    let (frame, calls) = frame_and_calls(outcomes, "device lost");
    assert!(bits(&frame.film) == reference(&config), "film differs");
    check_every_sample_once(calls);
    let r = &frame.report.retirements;
    let mut who: Vec<(usize, &str, usize)> = r
        .iter()
        .map(|r| (r.worker, r.label.as_str(), r.pass))
        .collect();
    who.sort();
    assert_eq!(who, [(1, "r1/gpu0/s0", 0), (2, "r1/gpu0/s1", 0)], "{r:?}");
    // The first to fail is named in the other's error.
    let first = r[0].label.trim_start_matches("r1/");
    assert!(
        r[1].error
            .starts_with(&format!("gpu0 was lost when {first} failed: ")),
        "{}",
        r[1].error
    );
    for (i, p) in frame.report.passes.iter().enumerate().skip(1) {
        assert_eq!(p.workers[1].tiles + p.workers[2].tiles, 0, "pass {i}");
        assert_eq!(&p.speeds[1..3], [0.0, 0.0], "pass {i}: {:?}", p.speeds);
    }
}

/// A failure that loses rank 1's first GPU in its calibration (the piece of its first stream)
/// retires both of its streams on the rank before the first pass: rank 0 hears of both before
/// the rank's timings, records them "before pass 1", plans them at speed 0 from the first pass
/// on, and uses the timings that came (the CPU rank's and the rank's other GPU's). No tile is
/// theirs, and the film is one process's, every sample once.
#[test]
fn a_device_lost_in_its_calibration_is_retired_on_its_rank_before_the_first_pass() {
    let mut gpu = RankSpec::new(3, 0);
    gpu.devices = Some(DeviceSpec::parse_list("gpu0x2,gpu1").unwrap());
    gpu.failing_gpus = vec![(0, 0, 1)];
    gpu.sticky_gpus = vec![0];
    let config = config(Strategy::Regular, true, Some(2));
    assert!(config.calibrate);
    // The GPU rank as rank 1, then as rank 0 (which tells itself).
    for gpu_rank in [1usize, 0] {
        let what = format!("device lost in calibration on rank {gpu_rank}");
        let ranks = if gpu_rank == 1 {
            [RankSpec::new(1, 0), gpu.clone()]
        } else {
            [gpu.clone(), RankSpec::new(1, 0)]
        };
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let (frame, calls) = frame_and_calls(outcomes, &what);
        assert!(
            bits(&frame.film) == reference(&config),
            "{what}: film differs"
        );
        let cal = &frame.report.calibration;
        let mut timed: Vec<String> = cal.iter().map(|c| c.worker.clone()).collect();
        timed.sort();
        let (cpu_rank, first_gpu) = if gpu_rank == 1 { (0, 1) } else { (1, 0) };
        let mut expected = vec![format!("r{gpu_rank}/gpu1/s0"), format!("r{cpu_rank}/cpu#0")];
        expected.sort();
        assert_eq!(timed, expected, "{what}: {cal:?}");
        check_every_sample_once(without_pieces(calls, cal));
        let r = &frame.report.retirements;
        let who: Vec<(usize, String, usize, bool)> = r
            .iter()
            .map(|r| (r.worker, r.label.clone(), r.pass, r.before_tiles))
            .collect();
        assert_eq!(
            who,
            [
                (first_gpu, format!("r{gpu_rank}/gpu0/s0"), 0, true),
                (first_gpu + 1, format!("r{gpu_rank}/gpu0/s1"), 0, true)
            ],
            "{what}: {r:?}"
        );
        sched_support::check_lost_in_calibration([&r[0].error, &r[1].error]);
        let lost = first_gpu..first_gpu + 2;
        for (i, p) in frame.report.passes.iter().enumerate() {
            let tiles: usize = p.workers[lost.clone()].iter().map(|w| w.tiles).sum();
            assert_eq!(tiles, 0, "{what}, pass {i}");
            assert_eq!(
                &p.speeds[lost.clone()],
                [0.0, 0.0],
                "{what}, pass {i}: {:?}",
                p.speeds
            );
        }
        let summary = frame.report.summary();
        assert!(
            summary.contains(&format!("worker r{gpu_rank}/gpu0/s0 retired before pass 1")),
            "{what}: {summary}"
        );
    }
}

/// A calibration failure that keeps the device (not sticky) retires the calibrating stream
/// alone, before the first pass; the GPU's other stream is timed in its place and renders at
/// that speed, and the film is one process's, every sample once.
#[test]
fn a_calibration_failure_that_keeps_the_device_retires_only_its_stream_on_its_rank() {
    let mut gpu = RankSpec::new(2, 0);
    gpu.devices = Some(DeviceSpec::parse_list("gpu0x2").unwrap());
    gpu.failing_gpus = vec![(0, 0, 1)];
    let config = config(Strategy::Regular, true, Some(2));
    let outcomes = run_cluster(&[RankSpec::new(1, 0), gpu], &config, test_timing(), None);
    let (frame, calls) = frame_and_calls(outcomes, "calibration failure, device kept");
    assert!(bits(&frame.film) == reference(&config), "film differs");
    let cal = &frame.report.calibration;
    let timed: Vec<&str> = cal.iter().map(|c| c.worker.as_str()).collect();
    assert_eq!(timed, ["r0/cpu#0", "r1/gpu0/s1"], "{cal:?}");
    check_every_sample_once(without_pieces(calls, cal));
    let r = &frame.report.retirements;
    let who: Vec<(usize, &str, usize, bool)> = r
        .iter()
        .map(|r| (r.worker, r.label.as_str(), r.pass, r.before_tiles))
        .collect();
    assert_eq!(who, [(1, "r1/gpu0/s0", 0, true)], "{r:?}");
    let p = &frame.report.passes[0];
    assert_eq!(p.speeds[1], 0.0, "{:?}", p.speeds);
    assert_eq!(p.speeds[2], cal[1].speed, "{:?}", p.speeds);
    assert!(cal[1].speed > 0.0);
    assert_eq!(p.workers[1].tiles, 0);
}

/// Both of rank 1's workers fail: nobody on the rank is left to render its tiles, and the job
/// ends with the rank named, as before retirement.
/// (So does one failure that loses the rank's only device.)
#[test]
fn a_rank_whose_every_worker_fails_ends_the_job() {
    for sticky in [false, true] {
        let mut gpu = RankSpec::new(2, 0);
        gpu.devices = Some(DeviceSpec::parse_list("gpu0x2").unwrap());
        if sticky {
            gpu.failing_gpus = vec![(0, 1, 1)];
            gpu.sticky_gpus = vec![0];
        } else {
            gpu.failing_gpus = vec![(0, 0, 1), (0, 1, 1)];
        }
        let config = SchedConfig {
            calibrate: false,
            ..config(Strategy::Regular, false, None)
        };
        let outcomes = run_cluster(&[RankSpec::new(1, 0), gpu], &config, test_timing(), None);
        let text = own_failure(1, &outcomes[1].0);
        assert!(
            text.contains("out of memory") || text.contains("lost earlier"),
            "sticky {sticky}: {text}"
        );
        assert!(outcomes[0].0.is_err(), "rank 0 went on without rank 1");
    }
}

#[test]
fn fault_hooks_parse() {
    assert_eq!(
        FaultHook::parse("rank=1,after=3,kind=exit").unwrap(),
        FaultHook {
            rank: 1,
            after_tiles: 3,
            kind: FaultKind::Exit
        }
    );
    assert!(FaultHook::parse("after=3").is_err());
    assert!(FaultHook::parse("rank=1,kind=explode").is_err());
}

#[test]
fn schedule_sim_models_ranks_as_one_table() {
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(W, H, 2, SEED);
    let mock =
        MockRenderer::new(W, SEED).with_spin(|x, y| if x < W / 2 && y > H / 2 { 300 } else { 30 });
    let config = SchedConfig {
        tiles: Some(64),
        devices: vec![DeviceSpec::Cpu { workers: Some(2) }],
        ..SchedConfig::default()
    };
    let frame = render_frame(&scene, &settings, &config, &MockFactory::new(mock), true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("run.csv");
    gasworks::sched::report::write_stats(&frame.report, &stats).unwrap();
    let sim = |extra: &[&str]| {
        gasworks_command()
            .args(["schedule-sim", stats.to_str().unwrap(), "--seeds", "3"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = sim(&[
        "--ranks",
        "1,3",
        "--workers",
        "2",
        "--rank-steal-latency-ms",
        "0,5",
        "--tiles-per-worker",
        "4",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One row per (ranks, latency): ranks, workers, tiles (4 per worker), latency.
    for row in [
        "    1       2      8      0 ms |",
        "    3       6     24      5 ms |",
    ] {
        assert!(stdout.contains(row), "{row:?} missing from:\n{stdout}");
    }
    let table: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains(" ms |") && !l.contains("bytes"))
        .collect();
    assert_eq!(
        table.len(),
        4 + 4,
        "efficiency and moved-tiles rows:\n{stdout}"
    );
    // Rank 0's link: one row per rank count (ranks, tiles, then bytes and milliseconds a
    // pass, now and before); one rank alone sends itself nothing, three send far fewer
    // bytes than the funnel did.
    let link: Vec<Vec<f64>> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("rank 0's link a pass"))
        .skip(2)
        .map(|l| l.split(['|', ' ']).filter_map(|c| c.parse().ok()).collect())
        .collect();
    assert_eq!(link.len(), 2, "{stdout}");
    assert_eq!(link[0][..4], [1.0, 8.0, 0.0, 0.0], "{stdout}");
    assert_eq!(link[1][..2], [3.0, 24.0], "{stdout}");
    assert!(
        link[1][2] > 0.0 && link[1][2] < link[1][4] / 4.0,
        "{stdout}"
    );
    // Every efficiency is a percentage in (0, 100].
    for line in &table[..4] {
        for cell in line.split('|').nth(1).unwrap().split_whitespace() {
            let v: f64 = cell.trim_end_matches('%').parse().unwrap();
            assert!(v > 0.0 && v <= 100.0, "{line}");
        }
    }
    // Bad cluster arguments are refused.
    assert!(!sim(&["--ranks", "0"]).status.success());
    assert!(!sim(&["--ranks", "2", "--workers", "1,2"]).status.success());
    assert!(!sim(&["--ranks", "2", "--rank-steal-latency-ms", "-1"])
        .status
        .success());
    assert!(!sim(&["--ranks", "2", "--bandwidth-gbit", "0"])
        .status
        .success());
}

/// A checkpoint inside a pass: rank 0's film after any tile arrived (the complete passes and
/// the arrived tiles) is a point from which a cluster finishes one process's film, bit for
/// bit, rendering the interrupted pass only where it is missing.
#[test]
fn a_cluster_resumed_from_inside_a_pass_finishes_one_process_film() {
    let config = config(Strategy::Sorted, true, Some(2));
    let expected = reference(&config);
    let within: Boundaries = Default::default();
    let mut ranks = vec![RankSpec::new(2, 200), RankSpec::new(1, 0)];
    ranks[0].boundaries = Some(Default::default());
    ranks[0].within = Some(within.clone());
    let outcomes = run_cluster(&ranks, &config, test_timing(), None);
    let (frame, _) = frame_and_calls(outcomes, "checkpointed inside passes");
    assert!(bits(&frame.film) == expected);
    let within = within.lock().unwrap().clone();
    let tiles: usize = frame.report.passes.iter().map(|p| p.tiles.len()).sum();
    assert_eq!(within.len(), tiles, "one film after every tile");
    // The first tile, the first pass's last (every pixel has that pass: the resume starts at
    // the next), one in the middle, the last pass's last but one, and the very last (the
    // film is complete, the job ended before the ranks' statistics: it is given back).
    let end_of_first = within.iter().position(|w| w.0 != within[0].0).unwrap() - 1;
    let last = within.len() - 1;
    for i in [0, end_of_first, within.len() / 2 + 1, last - 1, last] {
        let (spp_done, film_bits) = within[i].clone();
        let film = film_of_bits(&film_bits);
        let carried: u64 = film
            .pixels
            .iter()
            .filter(|p| p[3] as u32 > spp_done)
            .count() as u64;
        let mut ranks = vec![RankSpec::new(1, 0), RankSpec::new(2, 300)];
        ranks[0].resume = Some(Resume { film, spp_done });
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let (resumed, calls) = frame_and_calls(outcomes, &format!("from tile {i}"));
        assert!(bits(&resumed.film) == expected, "resumed from tile {i}");
        // The interrupted pass only where it was missing (the last point has it everywhere:
        // the next pass is where that resume starts).
        let pass: u64 = calls
            .iter()
            .filter(|(_, s)| s.start == spp_done)
            .map(|(t, _)| t.pixel_count() as u64)
            .sum();
        if carried < u64::from(W * H) {
            assert_eq!(pass, u64::from(W * H) - carried, "from tile {i}");
        } else {
            assert_eq!(pass, 0, "from tile {i}");
        }
        if i == last {
            assert!(calls.is_empty(), "nothing rendered: {calls:?}");
            assert!(resumed.report.passes.is_empty());
            assert!(resumed.stopped.is_none());
        }
    }
}

/// Adaptive sampling over ranks: rank 0 judges the blocks at each pass boundary from its film
/// and plans only those still sampling, so the film (and its odd-pass plane) is one
/// process's, bit for bit; and a cluster resumed from rank 0's film inside any pass (what a
/// checkpoint holds) finishes it.
#[test]
fn adaptive_sampling_over_ranks_gives_one_process_film() {
    // Flat left of x = 16 (a column of two blocks), strong noise beyond.
    let renderer: Arc<dyn TileRenderer> = Arc::new(ColumnNoise::new(16, 16));
    let mut config = config(Strategy::Sorted, true, Some(2));
    config.adaptive_sampling = Some(AdaptiveSampling {
        threshold: 0.01,
        tone: Default::default(),
        min_spp: 0,
    });
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    let one = render_frame(
        &scene,
        &room_settings(W, H, SPP, SEED),
        &config,
        &CpuOnlyFactory(renderer.clone()),
        true,
    )
    .unwrap();
    assert_eq!(
        one.report.adaptive.as_ref().unwrap().active_per_pass,
        [6, 6, 4]
    );
    let whole = |f: &Film| {
        (
            bits(f),
            f.odd_luma.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        )
    };
    let expected = whole(&one.film);
    let films: Films = Default::default();
    for (n, ranks) in [
        vec![RankSpec::new(2, 200), RankSpec::new(1, 0)],
        vec![
            RankSpec::new(1, 0),
            RankSpec::new(2, 300),
            RankSpec::new(1, 100),
        ],
    ]
    .into_iter()
    .enumerate()
    {
        let mut ranks: Vec<RankSpec> = ranks
            .into_iter()
            .map(|mut r| {
                r.renderer = Some(renderer.clone());
                r
            })
            .collect();
        if n == 0 {
            ranks[0].boundaries = Some(Default::default());
            ranks[0].within_films = Some(films.clone());
        }
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let (frame, _) = frame_and_calls(outcomes, &format!("{} ranks", ranks.len()));
        assert!(whole(&frame.film) == expected, "{} ranks", ranks.len());
        assert_eq!(
            frame.report.adaptive.as_ref().unwrap().active_per_pass,
            [6, 6, 4]
        );
        // Rank 0 records the blocks (`OUT.blocks.csv`) as one process does.
        assert_eq!(
            frame.report.adaptive.as_ref().unwrap().block_passes,
            one.report.adaptive.as_ref().unwrap().block_passes
        );
        // The last pass left the flat blocks out.
        let last = frame.report.passes.last().unwrap();
        assert!(last.tiles.iter().all(|t| t.x >= 16), "{:?}", last.tiles);
    }
    let films = films.lock().unwrap().clone();
    assert!(films.len() > 6, "{} films", films.len());
    for (i, (spp_done, film)) in films.into_iter().enumerate().step_by(3) {
        let mut ranks = vec![RankSpec::new(1, 0), RankSpec::new(2, 300)];
        for r in &mut ranks {
            r.renderer = Some(renderer.clone());
        }
        ranks[0].resume = Some(Resume { film, spp_done });
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let (resumed, _) = frame_and_calls(outcomes, &format!("from tile {i}"));
        assert!(whole(&resumed.film) == expected, "resumed from tile {i}");
    }
}

/// What a cluster checkpoint holds: rank 0's film at each pass boundary is one process's
/// film after that many samples. A cluster resumed from it (`--resume` under mpirun) renders
/// only the passes after it and finishes one process's film, bit for bit.
#[test]
fn a_cluster_resumed_from_a_pass_boundary_finishes_one_process_film() {
    let config = config(Strategy::Adaptive, true, Some(2));
    let expected = reference(&config);
    let kept: Boundaries = Default::default();
    let mut ranks = vec![RankSpec::new(2, 200), RankSpec::new(1, 0)];
    ranks[0].boundaries = Some(kept.clone());
    let outcomes = run_cluster(&ranks, &config, test_timing(), None);
    let (frame, _) = frame_and_calls(outcomes, "checkpointed");
    assert!(bits(&frame.film) == expected);
    let kept = kept.lock().unwrap().clone();
    // Every boundary but the end (passes of 2 of 6 samples).
    assert_eq!(kept.iter().map(|k| k.0).collect::<Vec<_>>(), [2, 4]);
    for (spp_done, film_bits) in kept {
        assert!(
            film_bits == reference_at(&config, spp_done),
            "the film at {spp_done} spp"
        );
        let film = film_of_bits(&film_bits);
        let later: Boundaries = Default::default();
        let mut ranks = vec![RankSpec::new(1, 0), RankSpec::new(2, 300)];
        ranks[0].resume = Some(Resume { film, spp_done });
        ranks[0].boundaries = Some(later.clone());
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let (frame, calls) = frame_and_calls(outcomes, &format!("from {spp_done}"));
        assert!(bits(&frame.film) == expected, "resumed from {spp_done}");
        // Only the passes after the resume point ran, and the report holds only those.
        assert!(
            calls.iter().all(|(_, s)| s.start >= spp_done),
            "from {spp_done}"
        );
        assert_eq!(
            frame.report.passes.len() as u32,
            (SPP - spp_done) / 2,
            "from {spp_done}"
        );
        let later: Vec<u32> = later.lock().unwrap().iter().map(|k| k.0).collect();
        let expected_later: Vec<u32> = [4].into_iter().filter(|s| *s > spp_done).collect();
        assert_eq!(later, expected_later, "from {spp_done}");
    }
}

/// A time limit already past when the first pass ends: rank 0 plans no second pass, every
/// rank ends cleanly, and the frame is one process's film after the first pass, marked as
/// stopped at the time limit (the CLI writes it and a resume file).
#[test]
fn a_time_limit_ends_the_cluster_frame_whole_at_a_pass_boundary() {
    let config = config(Strategy::Sorted, true, Some(2));
    let mut ranks = vec![RankSpec::new(1, 0), RankSpec::new(2, 0)];
    ranks[0].deadline = Some(Instant::now());
    let outcomes = run_cluster(&ranks, &config, test_timing(), None);
    let (frame, calls) = frame_and_calls(outcomes, "time limit");
    let stopped = frame.stopped.clone().expect("stopped");
    assert!(stopped.at_time_limit);
    assert_eq!((stopped.spp_complete, stopped.partial.clone()), (2, None));
    assert!(bits(&frame.film) == reference_at(&config, 2));
    assert!(calls.iter().all(|(_, s)| s.end <= 2), "no later pass ran");
    assert_eq!(frame.report.passes.len(), 1);
    assert_eq!(frame.resume_point().map(|p| p.spp_done), Some(2));
}

/// A mock renderer that takes `delay` more per tile once any of `flags` is set. After a stop
/// signal the rest of the frame then takes far longer than rank 0 needs to see the stop, however
/// busy the machine: with the mock's sub-millisecond tiles alone, the other ranks could finish
/// the frame first on a loaded machine (seen once, with a build running beside the tests).
struct SlowOnceSignalled {
    inner: MockRenderer,
    flags: Vec<&'static AtomicU8>,
    delay: Duration,
}

impl TileRenderer for SlowOnceSignalled {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn hardware(&self) -> String {
        self.inner.hardware()
    }
    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        if self.flags.iter().any(|f| f.load(Ordering::SeqCst) != 0) {
            std::thread::sleep(self.delay);
        }
        self.inner.render_tile(tile, samples, accum)
    }
}

/// The mock renderer, which stores `signal` in a rank's stop flag once it has rendered
/// `tiles` tiles of the pass starting at `pass_start`: a signal arriving mid-pass.
struct SignalAfter {
    inner: SlowOnceSignalled,
    pass_start: u32,
    tiles: usize,
    seen: AtomicUsize,
    signal: u8,
    flag: &'static AtomicU8,
}

impl TileRenderer for SignalAfter {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn hardware(&self) -> String {
        self.inner.hardware()
    }
    fn render_tile(
        &self,
        tile: Tile,
        samples: Range<u32>,
        accum: &mut [[f32; 4]],
    ) -> anyhow::Result<()> {
        let start = samples.start;
        self.inner.render_tile(tile, samples, accum)?;
        if start == self.pass_start && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.tiles {
            self.flag.store(self.signal, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// A stop signal (SIGTERM under mpirun, or any signal sent to one rank) while the second of
/// three passes renders, on rank 0 or on another rank: rank 0 ends the frame at once with
/// the tiles that have arrived, every rank ends without an error, and no later pass runs.
/// Each pixel holds the samples of the first pass or of the first two; the resume point is
/// the film of the first pass, and a cluster resumed from it finishes one process's film.
///
/// Rank 0's worker must render three tiles of the second pass for the signal to come. With
/// steals, on a loaded machine, rank 1's two workers once took 5 of its 7 (it rendered 2):
/// the frame ran to its end. So nothing is stolen here, and the ranks say they run on one
/// CPU: one speed class, planned at one speed, so that rank 0's share of the second pass is a
/// third of the tiles however its first-pass tiles were timed.
#[test]
fn a_stop_signal_on_any_rank_ends_the_frame_with_what_arrived_and_it_resumes() {
    let config = config(Strategy::Sorted, false, Some(2));
    let (after_one, after_two) = (reference_at(&config, 2), reference_at(&config, 4));
    for (signalled, signal) in [(0usize, 15u8), (1, 1)] {
        let what = format!("signal {signal} on rank {signalled}");
        let flags: Vec<&'static AtomicU8> = (0..2)
            .map(|_| &*Box::leak(Box::new(AtomicU8::new(0))))
            .collect();
        let mut ranks = vec![RankSpec::new(1, 300), RankSpec::new(2, 300)];
        for (spec, flag) in ranks.iter_mut().zip(&flags) {
            spec.stop = Some(*flag);
        }
        let slow_once_signalled = || SlowOnceSignalled {
            inner: MockRenderer::new(W, SEED)
                .with_sleep(300)
                .on_hardware("cpu: Mock 100"),
            flags: flags.clone(),
            delay: Duration::from_millis(100),
        };
        ranks[1].renderer = Some(Arc::new(slow_once_signalled()));
        // Rank 0's worker renders three tiles of the second pass, then the signal comes.
        ranks[0].renderer = Some(Arc::new(SignalAfter {
            inner: slow_once_signalled(),
            pass_start: 2,
            tiles: 3,
            seen: AtomicUsize::new(0),
            signal,
            flag: flags[signalled],
        }));
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let (frame, calls) = frame_and_calls(outcomes, &what);
        assert_eq!(frame.report.speed_classes, [0, 0, 0], "{what}");
        let stopped = frame.stopped.clone().expect("stopped");
        let tiles = stopped.partial.as_ref().map_or(0, |p| p.tiles);
        let done = stopped.partial.as_ref().map_or(0, |p| p.tiles_done);
        assert_eq!(
            stopped,
            Stopped {
                spp_complete: 2,
                partial: Some(PartialPass {
                    samples: 2..4,
                    tiles_done: done,
                    tiles,
                    carried_pixels: 0,
                }),
                at_time_limit: false,
                stopped_blocks: None,
                lost: None,
            },
            "{what}"
        );
        assert!(tiles > 0 && done <= tiles, "{what}");
        assert_eq!(
            frame.report.cluster.as_ref().and_then(|c| c.stop),
            Some(StopRequest {
                rank: signalled,
                signal
            }),
            "{what}"
        );
        assert!(
            calls.iter().all(|(_, s)| s.end <= 4),
            "{what}: a later pass ran"
        );
        assert_eq!(frame.report.passes.len(), 1, "{what}");
        // Every pixel has one pass or two, and the film is the first pass's only if no tile of
        // the second arrived.
        let film = bits(&frame.film);
        let mut with_two = 0;
        for (i, p) in film.iter().enumerate() {
            if *p == after_two[i] && after_two[i] != after_one[i] {
                with_two += 1;
            } else {
                assert!(*p == after_one[i], "{what}: pixel {i} holds neither");
            }
        }
        // The first two tiles were in rank 0's channel before the signal was raised, and rank
        // 0 drains its own workers' finished tiles when it stops; the third may still be in
        // its worker's hands.
        assert!(done >= 2, "{what}: {done} tiles arrived");
        assert!(with_two > 0, "{what}");

        // The resume point keeps the arrived tiles of the interrupted pass: its film is the
        // image's, and the resumed run renders the second pass only where it is missing.
        let point = frame.resume_point().expect("a resume point");
        assert_eq!(point.spp_done, 2, "{what}");
        assert!(bits(&point.film) == film, "{what}: the resume film");
        let mut ranks = vec![RankSpec::new(2, 0), RankSpec::new(1, 0)];
        ranks[0].resume = Some(point);
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let (resumed, calls) = frame_and_calls(outcomes, &format!("{what}, resumed"));
        assert!(resumed.stopped.is_none());
        // The second pass went only to the pixels without it: once each.
        let second: u64 = calls
            .iter()
            .filter(|(_, s)| *s == (2..4))
            .map(|(t, _)| t.pixel_count() as u64)
            .sum();
        assert_eq!(second, (film.len() - with_two) as u64, "{what}");
        assert!(
            bits(&resumed.film) == reference(&config),
            "{what}: the resumed film"
        );
    }
}

/// Workers that want big tiles (GPUs) on the ranks: rank 0 counts the tiles from the work as
/// one process does (the workers' `min_tile_work` comes in their ranks' `Hello`), and in the
/// passes after adaptive sampling's first decision lays them out over the blocks still
/// sampling and sends them with their skip masks, which travel with stolen tiles too; the
/// film is one process's, bit for bit, whose workers take the pieces between the stopped
/// blocks instead.
#[test]
fn ranks_whose_workers_want_big_tiles_get_tiles_that_skip_the_stopped_blocks() {
    let mut config = config(Strategy::Sorted, true, Some(2));
    config.tiles = None;
    // No pieces for slower ranks (`tiles::cut_for_slow_workers`), whose count would follow
    // the ranks' measured speeds: the tiles are then the same in every run.
    config.slow_worker_pieces = 0;
    config.adaptive_sampling = Some(AdaptiveSampling {
        threshold: 0.01,
        tone: Default::default(),
        min_spp: 0,
    });
    let scene = room(MaterialKind::Mirror, MaterialKind::Glass);
    // Strong noise in a checkerboard of the 3 x 2 blocks, flat in the others.
    let pieces: Arc<dyn TileRenderer> = Arc::new(ColumnNoise::checkered(0));
    let one = render_frame(
        &scene,
        &room_settings(W, H, SPP, SEED),
        &config,
        &CpuOnlyFactory(pieces),
        true,
    )
    .unwrap();
    assert_eq!(
        one.report.adaptive.as_ref().unwrap().active_per_pass,
        [6, 6, 3]
    );
    let cut = one.report.passes.last().unwrap();
    assert!(cut.tiles.len() >= 3, "{:?}", cut.tiles);
    assert_eq!(cut.skipped_pixels, 0);
    let want = bits(&one.film);
    for specs in [
        vec![RankSpec::new(2, 200), RankSpec::new(1, 0)],
        vec![
            RankSpec::new(1, 0),
            RankSpec::new(2, 300),
            RankSpec::new(1, 100),
        ],
    ] {
        let gpu_like = Arc::new(ColumnNoise::checkered(0).wanting_tiles_of(1000));
        let ranks: Vec<RankSpec> = specs
            .into_iter()
            .map(|mut r| {
                r.renderer = Some(gpu_like.clone());
                r
            })
            .collect();
        let outcomes = run_cluster(&ranks, &config, test_timing(), None);
        let what = format!("{} ranks", ranks.len());
        let (frame, _) = frame_and_calls(outcomes, &what);
        assert!(bits(&frame.film) == want, "{what}: the film differs");
        let last = frame.report.passes.last().unwrap();
        assert!(
            last.tiles.len() < cut.tiles.len(),
            "{what}: {:?}",
            last.tiles
        );
        assert!(last.skipped_pixels > 0, "{what}: {:?}", last.tiles);
        assert_eq!(last.pixel_samples(), cut.pixel_samples(), "{what}");
        assert!(
            gpu_like
                .skipping_calls
                .load(std::sync::atomic::Ordering::SeqCst)
                > 0,
            "{what}"
        );
    }
}

/// Two GPU-like ranks, one far slower (its mock spins 20,000 hash rounds per sample, some
/// 20 ms a pass, which no scheduling hiccup of the fast rank outweighs): rank 0
/// measures the ranks' speeds after the first pass, and as in one process
/// (`tiles::cut_for_slow_workers`) would cut the slow rank's share into pieces, but not below
/// its workers' launch work, which the ranks' `Hello` carries (`tiles::piece_floors`). These
/// tiles hold less than two launches' work: every pass keeps its two tiles, and the film is
/// one process's.
#[test]
fn a_slow_gpu_rank_keeps_tiles_of_its_launch_work() {
    // Two tiles a pass, one per rank, and no steals: each rank times its own every pass.
    let mut config = config(Strategy::Sorted, false, Some(2));
    config.tiles = Some(2);
    let work = 1000;
    let gpu_like = |spin: u32| -> Arc<dyn TileRenderer> {
        Arc::new(
            MockRenderer::new(W, SEED)
                .with_min_tile_work(Some(work))
                .with_spin(move |_, _| spin),
        )
    };
    let mut fast = RankSpec::new(1, 0);
    fast.renderer = Some(gpu_like(0));
    let mut slow = RankSpec::new(1, 0);
    slow.renderer = Some(gpu_like(20_000));
    let outcomes = run_cluster(&[fast, slow], &config, test_timing(), None);
    let (frame, _) = frame_and_calls(outcomes, "a fast and a slow rank");
    assert!(bits(&frame.film) == reference(&config), "the film differs");
    // 37 x 23 pixels in 2 tiles of about 425 pixels, less than twice the floor of 500 (2
    // samples a pass).
    let count = 2;
    let passes = &frame.report.passes;
    assert_eq!(passes.len(), 3);
    let speeds = &passes[1].speeds;
    assert!(speeds[0] > 2.0 * speeds[1], "not measured slow: {speeds:?}");
    for (i, pass) in passes.iter().enumerate() {
        assert_eq!(
            pass.tiles.len(),
            count as usize,
            "pass {i}: {:?}",
            pass.tiles
        );
    }
}

/// Rank 0 is no funnel: the ranks keep the sums of the tiles they render, and what passes
/// through rank 0's master role each pass (the plans out, the tiles' news and the
/// statistics in) grows with the tiles, not with the pixels. The film reaches rank 0 once,
/// at the end, whatever the number of passes; the image is still one process's.
#[test]
fn rank_0s_bytes_a_pass_grow_with_the_tiles_not_the_pixels() {
    let ranks = vec![
        RankSpec::new(1, 100),
        RankSpec::new(2, 0),
        RankSpec::new(1, 300),
    ];
    let run = |pass_spp: u32| {
        let config = config(Strategy::Sorted, true, Some(pass_spp));
        let counts = ByteCounts::default();
        let transports = ChannelTransport::create(ranks.len())
            .into_iter()
            .map(|t| {
                let mut t = LateRoster::new(t, None);
                if t.rank() == 0 {
                    t.counts = Some(counts.clone());
                }
                t
            })
            .collect();
        let outcomes = run_cluster_over(transports, &ranks, &config, test_timing(), None);
        let (frame, _) = frame_and_calls(outcomes, &format!("passes of {pass_spp}"));
        assert!(
            bits(&frame.film) == reference(&config),
            "passes of {pass_spp}"
        );
        let counts = counts.lock().unwrap().clone();
        counts
    };
    // Six passes against two, of 24 tiles each.
    let (two, six) = (run(3), run(1));
    let bytes = |c: &HashMap<&str, u64>, kinds: &[&str]| -> u64 {
        kinds.iter().map(|k| c.get(k).copied().unwrap_or(0)).sum()
    };
    let master = ["Plan", "TileDone", "PassEnd", "PassStats"];
    let per_pass = (bytes(&six, &master) - bytes(&two, &master)) / 4;
    let film = u64::from(W * H) * 16;
    // A tile's share: its entry in a plan (46 bytes, and a piece to send) and its news (38
    // bytes), where its pixels would be 16 bytes each twice over.
    assert!(
        per_pass <= 24 * 200 + 3 * 100 && per_pass < film / 2,
        "{per_pass} bytes a pass through rank 0, for a film of {film}: {six:?}"
    );
    let gathered = |c: &HashMap<&str, u64>| bytes(c, &["Collected"]);
    assert!(
        gathered(&six) < film + film / 2 && gathered(&two) < film + film / 2,
        "the film gathered more than once: {} and {} bytes, for a film of {film}",
        gathered(&two),
        gathered(&six)
    );
}
