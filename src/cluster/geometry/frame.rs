//! `gasworks render --distribute-geometry`: a whole frame, every rank holding one domain of
//! the scene ([`super::RankScene`]), rank 0 writing the image.

use std::time::{Duration, Instant};

use crate::backend::BackendChoice;
use crate::render::Film;
use crate::scene::domains::Domains;
use crate::sched::Transport;
use crate::session::RenderOptions;

use super::memory::{self, PartBytes};
use super::{render_rank, Limits, RankScene};
use crate::render::memory::room;

/// How long a rank waits in silence before it ends the frame, without `rank_timeout`.
const SILENCE: Duration = Duration::from_secs(60);

/// Renders the frame `options` describe as this process's part of it (alone, or as one rank
/// of an MPI job). Each rank reads the file twice: a survey of every group's box, triangles
/// and lights, from which every rank computes the same domains, then a load that keeps only
/// its domain and the replicated groups, dropping the rest as it parses.
pub fn render<T: Transport>(options: &RenderOptions, transport: &mut T) -> anyhow::Result<()> {
    if options.backend == BackendChoice::Optix {
        anyhow::bail!(
            "--distribute-geometry renders on the CPU backend for now: leave out --backend optix"
        );
    }
    let (rank, ranks, local_ranks) = (transport.rank(), transport.size(), transport.local_ranks());
    let verbosity = options.verbosity;
    let mut part_bytes = None;
    let part = crate::session::prepare_scene_part(options, transport, |survey| {
        let domains = Domains::split_replicating(&survey.extents(), ranks, survey.emitting());
        let bytes = PartBytes::of(survey, &domains, rank);
        verbosity.detail(
            false,
            format_args!(
                "rank {rank}: {} of {} triangles, {:.2} GiB of groups, their BVH about {:.2} GiB",
                bytes.triangles,
                survey.triangle_count(),
                gib(bytes.groups),
                gib(bytes.bvh)
            ),
        );
        let what = format!(
            "its part of the scene ({} triangles, with their BVH)",
            bytes.triangles
        );
        memory::check_rank_memory(rank, &what, bytes.before_reading(), room(), local_ranks)?;
        part_bytes = Some(bytes);
        Ok(domains)
    })?;
    // Read now, with its textures: what is still to come is the BVH.
    if let Some(bytes) = part_bytes {
        let what = format!("the BVH of its {} triangles", bytes.triangles);
        memory::check_rank_memory(rank, &what, bytes.bvh, room(), local_ranks)?;
    }
    let (settings, render_key) = (part.settings, part.render_key);
    let rank_scene = RankScene::of_part(part.scene, part.domains, &part.survey.bounds, rank);
    let limits = Limits {
        silence: options.rank_timeout.unwrap_or(SILENCE),
        ..Limits::default()
    };
    let started = Instant::now();
    let outcome = render_rank(&rank_scene, &settings, &limits, transport)?;
    let Some(pixels) = outcome.image else {
        return Ok(());
    };
    let mut film = Film::new(settings.width, settings.height);
    film.pixels = pixels;
    crate::session::write_image(options, &film, &render_key)?;
    options.verbosity.status(format_args!(
        "rendered in {:.2} s on {ranks} rank(s), the geometry spread over them",
        started.elapsed().as_secs_f64(),
    ));
    Ok(())
}

fn gib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 30)
}
