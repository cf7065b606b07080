//! `gasworks render --distribute-geometry`: a whole frame, every rank holding one domain of
//! the scene ([`super::RankScene`]), rank 0 writing the image.

use std::time::{Duration, Instant};

use crate::backend::BackendChoice;
use crate::console::Verbosity;
use crate::render::memory::room;
use crate::render::{Film, RenderSettings};
use crate::scene::domains::Domains;
use crate::scene::obj::Survey;
use crate::sched::Transport;
use crate::session::{Controls, Interrupted, RenderOptions};

use super::gpu::{GpuDomain, RankTests};
use super::memory::{self, PartBytes};
use super::reassign::{reassign, Bounds, CellSize, FrameTraffic};
use super::replicate::{self, Early, WithEarly};
use super::{render_rank_on, GeometryError, Limits, RankScene, RankStats};

/// How long a rank waits in silence before it ends the frame, without `rank_timeout`.
const SILENCE: Duration = Duration::from_secs(60);

/// Renders the frame `options` describe as this process's part of it (alone, or as one rank
/// of an MPI job), or with a camera path each of its frames, the part loaded and its
/// structures built once. Each rank reads the file twice: a survey of every group's box,
/// triangles and lights, from which every rank computes the same domains, then a load that
/// keeps only its domain and the replicated groups, dropping the rest as it parses. A rank
/// whose part cannot fit its memory refuses it before reading it, and again before building
/// its BVH.
///
/// A stop in `controls` (a signal) ends the frame as a silent rank does: rank 0 writes what
/// arrived and the error is [`crate::session::Interrupted`].
pub fn render<T: Transport>(
    options: &RenderOptions,
    transport: &mut T,
    controls: &dyn Controls,
) -> anyhow::Result<()> {
    let frames = crate::session::sequence::frames_of(options)?;
    let rank = transport.rank();
    let on_gpu = wants_gpu(options.backend);
    let part = read_part(&frames[0], transport, on_gpu)?;
    let (bounds, identity) = (part.survey.bounds, part.identity);
    let (settings, render_key) = (part.settings, part.render_key);
    let mut rank_scene = RankScene::of_part(part.scene, part.domains, &bounds, rank, !on_gpu);
    let limits = Limits {
        silence: options.rank_timeout.unwrap_or(SILENCE),
        fault: crate::sched::fault::from_env()?,
        ..Limits::default()
    };
    let frame = (&settings, &limits, controls);
    let mut gpu = match on_gpu {
        true => gpu_or_cpu(options, &mut rank_scene, rank)?,
        false => None,
    };
    let (scene, early) = match options.replicate {
        Some(share) => {
            let hot = (&part.survey, share);
            with_hot_groups(options, (rank_scene, &mut gpu), hot, frame, transport)?
        }
        None => (rank_scene, Early::new()),
    };
    let placement = Placement::new(options, &part.survey, &scene.domains, rank);
    let mut held = Held { scene, gpu, early };
    let mut first = Some((settings, render_key));
    let mut continuing = options.continue_sequence;
    let count = frames.len();
    for (k, opts) in frames.iter().enumerate() {
        let (settings, key) = match first.take() {
            Some(f) => f,
            None => {
                crate::session::part_frame(opts, &held.scene.geometry.scene, &bounds, identity)?
            }
        };
        let n = k + 1;
        if continuing && crate::session::sequence::is_complete(&opts.output, &key) {
            let file = opts.output.display();
            placement
                .out
                .status(format_args!("frame {n}: {file} is complete"));
            continue;
        }
        continuing = false;
        if count > 1 {
            let file = opts.output.display();
            placement
                .out
                .status(format_args!("frame {n} of {count}: {file}"));
        }
        let traffic = held.render_frame(opts, (&settings, &key), &limits, controls, transport)?;
        let cells = placement.after(n, traffic.as_ref(), &held.scene.domains, n < count);
        if n < count {
            let cells = super::next_frame(transport, &mut held.early, limits.silence, cells)?;
            held = held.place(options, &part.survey, cells, transport)?;
        }
    }
    Ok(())
}

/// What a rank holds between a sequence's frames: its scene, its GPU's structures, and what
/// the next frame's faster ranks sent early.
struct Held {
    scene: RankScene,
    gpu: Option<GpuDomain>,
    early: Early,
}

impl Held {
    /// Renders one frame ([`render_one`]); on rank 0, what the ranks counted.
    fn render_frame<T: Transport>(
        &mut self,
        options: &RenderOptions,
        (settings, key): (&RenderSettings, &str),
        limits: &Limits,
        controls: &dyn Controls,
        transport: &mut T,
    ) -> anyhow::Result<Option<FrameTraffic>> {
        let tests = RankTests {
            scene: &self.scene,
            gpu: self.gpu.as_ref(),
        };
        let mut t = WithEarly {
            inner: transport,
            early: std::mem::take(&mut self.early),
        };
        let rank = ((&self.scene, &tests as _), (settings, key), limits);
        let traffic = render_one(options, rank, controls, &mut t);
        self.early = t.early;
        traffic
    }

    /// The cells held as rank 0 said for the next frame (`cells`; none: as they are): the
    /// groups this rank gains read from the file, those it loses dropped
    /// ([`regroup`]).
    fn place<T: Transport>(
        self,
        options: &RenderOptions,
        survey: &Survey,
        cells: Vec<u32>,
        transport: &T,
    ) -> anyhow::Result<Held> {
        let (rank, local_ranks) = (transport.rank(), transport.local_ranks());
        let domains = &self.scene.domains;
        if cells.is_empty() || cells == domains.domain_of_cell() {
            return Ok(self);
        }
        if cells.len() != domains.cells.len()
            || cells.iter().any(|&d| d as usize >= domains.count())
        {
            let reason = format!(
                "ranks for {} cells, of {} ranks; the scene has {} cells",
                cells.len(),
                domains.count(),
                domains.cells.len()
            );
            return Err(GeometryError::Malformed {
                rank,
                from: 0,
                reason,
            }
            .into());
        }
        let moved = domains.with_cells_in(&survey.extents(), cells);
        let Held {
            scene,
            mut gpu,
            early,
        } = self;
        let what = "the groups of the cells it takes";
        let scene = regroup(
            options,
            (scene, &mut gpu),
            survey,
            moved,
            (rank, local_ranks),
            what,
        )?;
        Ok(Held { scene, gpu, early })
    }
}

/// Rank 0's side of temporal domain assignment ([`super::reassign`]): after each frame of a
/// sequence, the frame's figures, and with `--reassign` the cells moved for the next.
struct Placement {
    out: Verbosity,
    /// With `--reassign`: the bounds the moves keep to.
    bounds: Option<Bounds>,
    sizes: Vec<CellSize>,
}

impl Placement {
    fn new(options: &RenderOptions, survey: &Survey, domains: &Domains, rank: usize) -> Placement {
        let out = match rank {
            0 => options.verbosity,
            _ => Verbosity::Quiet,
        };
        let mut sizes = vec![
            CellSize {
                triangles: 0,
                bytes: 0
            };
            domains.cells.len()
        ];
        for (g, group) in survey.groups.iter().enumerate() {
            if !domains.replicated[g] {
                let cell = &mut sizes[domains.cell_of_group[g] as usize];
                cell.triangles += group.extent.triangles;
                cell.bytes += group.bytes;
            }
        }
        let largest = domains.triangles.iter().copied().max().unwrap_or(0);
        let all_bytes: u64 = survey.groups.iter().map(|g| g.bytes).sum();
        let bounds = options.reassign.map(|share| Bounds {
            max_triangles: largest + largest / 10,
            budget: (share * all_bytes as f64) as u64,
        });
        Placement { out, bounds, sizes }
    }

    /// After frame `n` (on rank 0, what its ranks counted): says its figures, and where a
    /// frame comes `next`, returns the cells' ranks for it (none: as they are).
    fn after(
        &self,
        n: usize,
        traffic: Option<&FrameTraffic>,
        domains: &Domains,
        next: bool,
    ) -> Vec<u32> {
        let Some(traffic) = traffic else {
            return Vec::new();
        };
        let now = domains.domain_of_cell();
        let (segments, crossing) = traffic.segments_crossing(&now);
        let share = |c: u64| 100.0 * c as f64 / segments.max(1) as f64;
        self.out.detail(
            false,
            format_args!(
                "frame {n}: {:.3} path messages forwarded a sample; {:.1}% of {segments} segments between cells of different ranks",
                traffic.forwarded_per_sample(),
                share(crossing)
            ),
        );
        let Some(bounds) = self.bounds.filter(|_| next) else {
            return Vec::new();
        };
        let plan = reassign(
            &now,
            domains.count(),
            &traffic.segments,
            &self.sizes,
            bounds,
        );
        self.out.detail(
            false,
            format_args!(
                "frame {n}: moving {} cells ({} bytes of groups) for frame {}: {:.1}% of this frame's segments would have crossed",
                plan.moved.len(),
                plan.bytes,
                n + 1,
                share(plan.crossing_after)
            ),
        );
        plan.domain_of_cell
    }
}

/// One frame of this rank's part (its settings and its image's key): its share rendered,
/// and on rank 0 the image written.
fn render_one<T: Transport>(
    options: &RenderOptions,
    (rank, (settings, render_key), limits): (
        (&RankScene, &dyn super::Intersector),
        (&RenderSettings, &str),
        &Limits,
    ),
    controls: &dyn Controls,
    transport: &mut T,
) -> anyhow::Result<Option<FrameTraffic>> {
    let ranks = transport.size();
    let started = Instant::now();
    controls.frame_starts(ranks, options.verbosity);
    let outcome = render_rank_on(rank, settings, limits, controls, transport);
    controls.frame_ended();
    let outcome = outcome?;
    let seconds = started.elapsed().as_secs_f64();
    say_stats(transport.rank(), &outcome.stats, options.verbosity);
    let Some(pixels) = outcome.image else {
        // A rank other than 0 has sent its pixels; rank 0 ends the job once it has written.
        return outcome
            .cut_short
            .map_or(Ok(None), |e| Err(as_stop(e, String::new())));
    };
    let mut film = Film::new(settings.width, settings.height);
    film.pixels = pixels;
    if let Some(cause) = outcome.cut_short {
        let signal = matches!(cause, GeometryError::Signal { .. });
        let error = write_cut_short(options, &film, render_key, cause);
        // The ranks still waiting (a hung one among them) end with the job; at a signal,
        // mpirun ends them itself.
        if !signal && ranks > 1 {
            transport.abort(&format!("{error:#}"));
        }
        return Err(error);
    }
    crate::session::write_image(options, &film, render_key)?;
    options.verbosity.status(format_args!(
        "rendered in {seconds:.2} s on {ranks} rank(s), the geometry spread over them",
    ));
    Ok(outcome.traffic)
}

/// This rank's part of the scene, refused where it cannot fit the rank's memory: before it is
/// read, and after (with its textures) before its BVH is built (none on a GPU rank).
fn read_part<T: Transport>(
    options: &RenderOptions,
    transport: &T,
    on_gpu: bool,
) -> anyhow::Result<crate::session::ScenePart> {
    let place = (transport.rank(), transport.size(), transport.local_ranks());
    let mut bytes = None;
    let part = crate::session::prepare_scene_part(options, transport, |survey| {
        let (domains, part) = split(survey, place, on_gpu, options.verbosity)?;
        bytes = Some(part);
        Ok(domains)
    })?;
    if let (Some(bytes), false) = (bytes, on_gpu) {
        let what = format!("the BVH of its {} triangles", bytes.triangles);
        memory::check_rank_memory(place.0, &what, bytes.bvh, room(), place.2)?;
    }
    Ok(part)
}

/// Rank 0's error for a frame cut short, after writing the image of what arrived (its key
/// says how many samples its pixels hold): as an image-plane render writes what it has.
fn write_cut_short(
    options: &RenderOptions,
    film: &Film,
    render_key: &str,
    cause: GeometryError,
) -> anyhow::Error {
    let held: f64 = film.pixels.iter().map(|p| f64::from(p[3])).sum();
    let planned = film.pixels.len() as f64 * f64::from(options.spp);
    let written = match crate::session::write_partial_image(options, film, render_key) {
        Ok(()) => format!(
            "{} holds what arrived: {held} of {planned} samples ({:.1}%)",
            options.output.display(),
            100.0 * held / planned.max(1.0)
        ),
        Err(e) => format!("the pixels that arrived could not be written: {e:#}"),
    };
    as_stop(cause, written)
}

/// The error of a frame cut short, with `what` was written: [`Interrupted`] for a signal,
/// so that the command exits as a process that signal ended.
fn as_stop(cause: GeometryError, written: String) -> anyhow::Error {
    match (cause, written.is_empty()) {
        (GeometryError::Signal { by, .. }, _) => Interrupted {
            by,
            message: if written.is_empty() {
                "this rank's pixels went to rank 0".into()
            } else {
                written
            },
        }
        .into(),
        (cause, true) => cause.into(),
        (cause, false) => anyhow::anyhow!("{cause}; {written}"),
    }
}

/// The rank's scene with the hot groups replicated ([`replicate`]): the 1-spp prepass,
/// the groups every rank picks the same, the ones this rank lacks read from the file, and the
/// BVH (or the GPU's structures) built again. Also what the frame's faster ranks sent
/// meanwhile.
fn with_hot_groups<T: Transport>(
    options: &RenderOptions,
    (scene, gpu): (RankScene, &mut Option<GpuDomain>),
    (survey, share): (&Survey, f64),
    (settings, limits, controls): (&RenderSettings, &Limits, &dyn Controls),
    transport: &mut T,
) -> anyhow::Result<(RankScene, Early)> {
    let (rank, local_ranks) = (transport.rank(), transport.local_ranks());
    let tests = RankTests {
        scene: &scene,
        gpu: gpu.as_ref(),
    };
    let (prepass, early) =
        replicate::prepass((&scene, &tests), settings, limits, controls, transport)?;
    let bytes: Vec<u64> = survey.groups.iter().map(|g| g.bytes).collect();
    let (hot, domains) =
        replicate::plan(&prepass, &bytes, &survey.extents(), &scene.domains, share);
    let (k, hot_bytes) = (0..hot.len())
        .filter(|&g| hot[g])
        .fold((0, 0u64), |(k, b), g| (k + 1, b + bytes[g]));
    let out = if rank == 0 {
        options.verbosity
    } else {
        Verbosity::Quiet
    };
    out.status(format_args!(
        "replicating {k} hot groups ({:.1} MiB, {:.1}% of the scene's group bytes); the 1-spp prepass forwarded {:.2} path messages a sample",
        hot_bytes as f64 / f64::from(1u32 << 20),
        100.0 * hot_bytes as f64 / bytes.iter().sum::<u64>().max(1) as f64,
        prepass.forwarded_per_sample()
    ));
    let what = "the hot groups it adds";
    let scene = regroup(
        options,
        (scene, gpu),
        survey,
        domains,
        (rank, local_ranks),
        what,
    )?;
    Ok((scene, early))
}

/// The rank's scene under `domains`: the groups it gains read from the file (a third reading,
/// of those only), the groups it loses dropped, its BVH (or its GPU's structures) built
/// again. Refused where the groups it gains (`what`) and its new BVH cannot fit its memory.
fn regroup(
    options: &RenderOptions,
    (scene, gpu): (RankScene, &mut Option<GpuDomain>),
    survey: &Survey,
    domains: Domains,
    (rank, local_ranks): (usize, usize),
    what: &str,
) -> anyhow::Result<RankScene> {
    let groups = survey.groups.len();
    let gained: Vec<bool> = (0..groups)
        .map(|g| domains.holds(rank, g) && !scene.domains.holds(rank, g))
        .collect();
    let added: u64 = (0..groups)
        .filter(|&g| gained[g])
        .map(|g| survey.groups[g].bytes)
        .sum();
    let after = PartBytes::of(survey, &domains, rank, gpu.is_none());
    let what = format!("{what} ({:.1} MiB) and its BVH", gib(added) * 1024.0);
    let needed = added + after.pools.max(after.bvh);
    memory::check_rank_memory(rank, &what, needed, room(), local_ranks)?;
    let mut part = scene.into_part();
    for (g, group) in part.groups.iter_mut().enumerate() {
        if !domains.holds(rank, g) && group.triangle_count() > 0 {
            let name = std::mem::take(&mut group.name);
            *group = crate::scene::Group {
                name,
                ..Default::default()
            };
        }
    }
    if gained.iter().any(|&g| g) {
        let quiet = crate::scene::obj::LoadOptions { quiet: true };
        let read = crate::scene::obj::load_obj_part(&options.scene, &quiet, survey, &gained)?;
        for (g, group) in read.groups.into_iter().enumerate() {
            if gained[g] {
                part.groups[g] = group;
            }
        }
    }
    let on_gpu = gpu.take().is_some();
    let mut scene = RankScene::of_part(part, domains, &survey.bounds, rank, !on_gpu);
    if on_gpu {
        *gpu = gpu_or_cpu(options, &mut scene, rank)?;
    }
    Ok(scene)
}

/// Whether the ranks test their rays on a GPU: with `--backend optix`, and with `auto` where
/// the driver and a GPU are found.
fn wants_gpu(backend: BackendChoice) -> bool {
    match backend {
        BackendChoice::Cpu => false,
        BackendChoice::Optix => true,
        BackendChoice::Auto => crate::optix::probe().is_ok(),
    }
}

/// The rank's domain built on its GPU. Where that fails, an error naming the rank, or with
/// `--backend auto` the CPU BVH built in its place, and `None`.
fn gpu_or_cpu(
    options: &RenderOptions,
    scene: &mut RankScene,
    rank: usize,
) -> anyhow::Result<Option<GpuDomain>> {
    let part = &scene.geometry.scene;
    let device = options.optix.device;
    match GpuDomain::build(part, &options.optix) {
        Ok(gpu) => {
            if let Some(s) = gpu.stats() {
                options.verbosity.detail(
                    false,
                    format_args!(
                        "rank {rank}: GPU {device}: {} GASes of {} triangles, {} bytes with the IAS",
                        s.gases,
                        s.triangles,
                        s.compacted_bytes.unwrap_or(s.output_bytes) + s.ias_bytes
                    ),
                );
            }
            Ok(Some(gpu))
        }
        Err(e) if options.backend == BackendChoice::Auto => {
            options.verbosity.status(format_args!(
                "rank {rank}: auto: GPU {device} could not be used ({e}); the CPU BVH tests its rays"
            ));
            scene.build_cpu_bvh();
            Ok(None)
        }
        Err(e) => anyhow::bail!(
            "rank {rank}: building its domain's GASes and IAS ({} triangles) on GPU {device}: {e}",
            part.triangle_count()
        ),
    }
}

/// The domains of `survey` over the ranks, and what this rank's part will take, refused
/// where it cannot fit: `(rank, ranks, ranks on its machine)`.
fn split(
    survey: &Survey,
    (rank, ranks, local_ranks): (usize, usize, usize),
    on_gpu: bool,
    verbosity: Verbosity,
) -> anyhow::Result<(Domains, PartBytes)> {
    let domains = Domains::split_replicating(&survey.extents(), ranks, survey.emitting());
    let bytes = PartBytes::of(survey, &domains, rank, !on_gpu);
    verbosity.detail(
        false,
        format_args!(
            "rank {rank}: {} of {} triangles; {} of the scene's {} bytes of groups ({:.2} GiB), \
             {} of them on every rank; their BVH about {:.2} GiB",
            bytes.triangles,
            survey.triangle_count(),
            bytes.groups,
            bytes.all_groups,
            gib(bytes.groups),
            bytes.replicated,
            gib(bytes.bvh)
        ),
    );
    let what = format!(
        "its part of the scene ({} triangles, with their BVH)",
        bytes.triangles
    );
    memory::check_rank_memory(rank, &what, bytes.before_reading(), room(), local_ranks)?;
    Ok((domains, bytes))
}

/// Each rank's counts, with -v: what `scripts/distributed-geometry-bench.sh` reads.
fn say_stats(rank: usize, s: &RankStats, verbosity: Verbosity) {
    verbosity.detail(
        false,
        format_args!(
            "rank {rank}: {} samples of its pixels; sent {} shadow rays, {} segments, {} hits to shade, {} samples, {} bytes; at most {} of its paths out at once",
            s.samples, s.shadow_hops, s.segment_hops, s.shade_hops, s.sample_messages, s.bytes_sent, s.peak_in_flight
        ),
    );
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}
