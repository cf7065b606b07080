//! A frame whose geometry is spread over ranks (FlexRender's design): each rank holds one
//! domain of the scene's groups ([`crate::scene::domains`]), the groups every rank holds (the
//! lights' now), and the top level of domain boxes; rays travel to the geometry, and no rank
//! waits on another's answer.
//!
//! - Each rank owns the pixels of every `size`-th tile of 16x16 and starts their samples,
//!   pixel after pixel, while fewer than [`Limits::in_flight`] of its paths are out.
//! - A path travels as a [`message::PathMessage`]: its whole state
//!   ([`crate::cpu::integrator::PathState`]), and where its current ray stands. A ray is
//!   tested first where the path is, against all that rank holds, then by the other domains
//!   its interval enters, nearest entry first, each given the closest hit so far; a
//!   segment's hit is shaded by the rank that owns its group (any rank for a replicated
//!   group or an escape). A shadow ray travels the same way, before the segment it belongs
//!   to, and stops at the first rank that finds it blocked.
//! - A finished sample's radiance goes to its pixel's owner, which adds the samples of a pixel
//!   in their order; at the end every rank sends its pixels' sums to rank 0, once.
//!
//! Each hit is the whole scene's closest hit, bit for bit ([`crate::cpu::domains`]), and the
//! path's sums happen in the same order ([`crate::cpu::integrator`]), so the image is the one
//! a single process renders, bit for bit, for any number of ranks and any split. A GPU rank
//! ([`gpu`]) tests its rays on its GPU instead, within noise of that image.
//! docs/distributed-geometry.md has the protocol and its bytes.

pub mod frame;
pub mod gpu;
pub mod memory;
pub mod message;
pub mod model;
pub mod reassign;
pub mod replicate;
mod walk;

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use glam::Vec3;

use crate::cpu::domains::{magnitude_of, DomainGeometry, TopLevel};
use crate::cpu::integrator::{pixel_ray, LightSampler, PathTracer};
use crate::render::{RenderSettings, Sampler};
use crate::scene::domains::Domains;
use crate::scene::{Bounds, Scene};
use crate::sched::transport::{Transport, TransportError};
use crate::session::{Controls, NoControls, StopSignal};
use message::{is_uses, Message, PathMessage, PixelSums, Query, FROM_CAMERA};
use reassign::{FrameTraffic, Traffic};
pub use walk::{Answer, Intersector, Test};
use walk::{Walked, Walker};

/// The side of the square tiles whose pixels the ranks own in turn.
pub const TILE: u32 = 16;

/// The most paths a rank walks at once, spread over its threads.
const BATCH: usize = 256;

/// What one rank holds of the scene.
pub struct RankScene {
    pub domains: Domains,
    pub top: TopLevel,
    pub geometry: DomainGeometry,
    pub lights: LightSampler,
}

impl RankScene {
    /// Rank `rank`'s part of `whole` split among `ranks` ranks, the groups that hold an
    /// emitter replicated (next-event estimation samples every light from every rank).
    pub fn of(whole: &Scene, ranks: usize, rank: usize) -> RankScene {
        let extents = Domains::extents_of(whole);
        let domains = Domains::split_replicating(&extents, ranks, emitting_groups(whole));
        RankScene::with_domains(whole, domains, rank)
    }

    /// Rank `rank`'s part of `whole` under the split `domains`, which must replicate every
    /// group that holds an emitter ([`emitting_groups`]).
    pub fn with_domains(whole: &Scene, domains: Domains, rank: usize) -> RankScene {
        let part = whole.keeping_groups(|g| domains.holds(rank, g));
        RankScene::of_part(part, domains, &whole.bounds(), rank, true)
    }

    /// Builds the CPU BVH a rank made without one (its GPU could not be used).
    pub fn build_cpu_bvh(&mut self) {
        self.geometry.build_bvh(&self.top);
    }

    /// The scene it holds, everything built on it (the BVH, the top level) freed.
    pub fn into_part(self) -> Scene {
        let RankScene { geometry, .. } = self;
        let DomainGeometry { scene, .. } = geometry;
        scene
    }

    /// Rank `rank`'s scene from `part`, which holds exactly the groups `domains` gives it
    /// (the others empty), in a scene whose box is `scene_bounds`; its CPU BVH built where
    /// `cpu_bvh` (not on a GPU rank, whose [`gpu::GpuDomain`] tests its rays).
    pub fn of_part(
        part: Scene,
        domains: Domains,
        scene_bounds: &Bounds,
        rank: usize,
        cpu_bvh: bool,
    ) -> RankScene {
        let emitting = emitting_groups(&part);
        assert!(
            (0..emitting.len()).all(|g| !emitting[g] || domains.replicated[g]),
            "every group with an emitter is replicated"
        );
        debug_assert!((0..part.groups.len())
            .all(|g| domains.holds(rank, g) || part.groups[g].triangle_count() == 0));
        let top = TopLevel::new(&domains, magnitude_of(scene_bounds));
        let mut geometry = DomainGeometry::without_bvh(part);
        if cpu_bvh {
            geometry.build_bvh(&top);
        }
        let lights = LightSampler::new(&geometry.scene);
        RankScene {
            domains,
            top,
            geometry,
            lights,
        }
    }
}

/// Which of the scene's groups hold an emitter: those every rank must hold, to sample their
/// lights.
pub fn emitting_groups(scene: &Scene) -> Vec<bool> {
    let mut emitting = vec![false; scene.groups.len()];
    for light in &scene.lights {
        emitting[light.group as usize] = true;
    }
    emitting
}

/// The bounds a rank keeps to.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The most of its own paths a rank has out at once; so the messages in flight anywhere
    /// are at most this many per rank.
    pub in_flight: usize,
    /// How long a rank waits without hearing from the ranks it waits for before it ends the
    /// frame with an error naming them.
    pub silence: Duration,
    /// A test hook: the rank that fails on purpose, after finishing that many samples of its
    /// own pixels (set only with the cargo feature `fault-injection`).
    pub fault: Option<crate::sched::fault::FaultHook>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            in_flight: 4096,
            silence: Duration::from_secs(60),
            fault: None,
        }
    }
}

/// What a rank counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RankStats {
    /// Samples of its own pixels finished.
    pub samples: u64,
    /// Path messages sent: shadow rays, segments and hits to shade, forwarded to other ranks.
    pub shadow_hops: u64,
    pub segment_hops: u64,
    pub shade_hops: u64,
    /// Samples sent to their pixel's owner.
    pub sample_messages: u64,
    pub bytes_sent: u64,
    /// The most of its own paths it had out at once.
    pub peak_in_flight: usize,
}

/// Why a rank could not finish its part of a frame.
#[derive(Debug, thiserror::Error)]
pub enum GeometryError {
    #[error("rank {rank}: {source}")]
    Transport { rank: usize, source: TransportError },
    #[error("rank {rank}: rank {from} sent a malformed message: {reason}")]
    Malformed {
        rank: usize,
        from: usize,
        reason: String,
    },
    #[error("rank {rank}: testing rays against its domain failed: {reason}")]
    Tests { rank: usize, reason: String },
    #[error("rank {rank}: stopped by {by}")]
    Signal { rank: usize, by: StopSignal },
    #[error("rank {rank}: rank 0 ended the frame (another rank fell silent or failed); {finished} of its {owned} samples were finished")]
    Stopped {
        rank: usize,
        finished: u64,
        owned: u64,
    },
    #[error("rank {rank} heard nothing for {seconds:.1} s while waiting for rank(s) {waiting:?} to finish; {finished} of its {owned} samples were finished")]
    Silent {
        rank: usize,
        seconds: f64,
        waiting: Vec<usize>,
        finished: u64,
        owned: u64,
    },
}

/// What a rank's part of a frame gave.
#[derive(Debug)]
pub struct RankOutcome {
    /// On rank 0, the image's sums (rgb, samples per pixel, row by row); `None` elsewhere.
    /// Where the frame was cut short, the sums that arrived: each pixel holds its first
    /// samples, in order, as many as its count says.
    pub image: Option<Vec<[f32; 4]>>,
    pub stats: RankStats,
    /// On rank 0, every rank's counts added up, where the frame finished.
    pub traffic: Option<FrameTraffic>,
    /// Why the frame was cut short: a rank fell silent, failed or sent nonsense.
    pub cut_short: Option<GeometryError>,
}

/// Renders this rank's part of the frame on the CPU: [`render_rank_on`] its BVH.
pub fn render_rank<T: Transport>(
    scene: &RankScene,
    settings: &RenderSettings,
    limits: &Limits,
    controls: &dyn Controls,
    transport: &mut T,
) -> Result<RankOutcome, GeometryError> {
    render_rank_on(
        (scene, &scene.geometry),
        settings,
        limits,
        controls,
        transport,
    )
}

/// Renders this rank's part of the frame, its rays tested by `domain`; a stop in `controls`
/// (a signal) cuts it short. Where the frame cannot finish, the ranks still alive send rank 0
/// their pixels as they stand ([`RankOutcome::cut_short`]).
pub fn render_rank_on<T: Transport>(
    (scene, domain): (&RankScene, &dyn Intersector),
    settings: &RenderSettings,
    limits: &Limits,
    controls: &dyn Controls,
    transport: &mut T,
) -> Result<RankOutcome, GeometryError> {
    let mut rank = Rank::new((scene, domain), settings, limits, transport);
    rank.controls = Some(controls);
    let (image, cut_short) = match rank.run() {
        Ok(()) => (rank.gather()?, None),
        Err(e) => (rank.salvage(&e), Some(e)),
    };
    let traffic = image.is_some() && cut_short.is_none();
    Ok(RankOutcome {
        image,
        traffic: traffic.then(|| std::mem::take(&mut rank.traffic)),
        stats: rank.stats,
        cut_short,
    })
}

/// Renders this rank's part of a prepass: every path, no film. Returns its counts and, per
/// group, how often a ray traveled for it ([`replicate`]).
fn run_prepass<T: Transport>(
    (scene, domain): (&RankScene, &dyn Intersector),
    settings: &RenderSettings,
    limits: &Limits,
    controls: &dyn Controls,
    transport: &mut T,
) -> Result<(RankStats, Vec<u64>, replicate::Early), GeometryError> {
    let mut rank = Rank::new((scene, domain), settings, limits, transport);
    rank.controls = Some(controls);
    rank.uses_early = Some(replicate::Early::new());
    rank.run()?;
    let early = rank.uses_early.take().unwrap_or_default();
    Ok((rank.stats, std::mem::take(&mut rank.uses), early))
}

/// One rank's frame: its pixels, its paths out, its film.
struct Rank<'a, T: Transport> {
    me: usize,
    walker: Walker<'a>,
    settings: &'a RenderSettings,
    limits: &'a Limits,
    controls: Option<&'a dyn Controls>,
    transport: &'a mut T,
    /// Its pixels, in the order their samples start, and the next (pixel, sample) to start.
    pixels: Vec<(u32, u32)>,
    next: (usize, u32),
    in_flight: usize,
    /// Per pixel with samples out: the next sample to add, and those that came early.
    order: HashMap<(u32, u32), (u32, BTreeMap<u32, Vec3>)>,
    film: Vec<[f32; 4]>,
    done_from: Vec<bool>,
    /// The films that arrived, by sender.
    films: Vec<Option<Vec<PixelSums>>>,
    heard: Instant,
    stats: RankStats,
    /// Per group: segments forwarded here that found their hit in it, and hits on it sent
    /// to their owner to shade (what replicating it would have kept local).
    uses: Vec<u64>,
    /// Segments shaded here by the cells they joined; on rank 0 at the end, every rank's.
    segments: Traffic,
    /// On rank 0, every rank's counts, once gathered.
    traffic: FrameTraffic,
    /// In a prepass: the counts of faster ranks, which finished theirs while this rank still
    /// walks paths (their exchange follows, [`replicate`]); `None` in a frame.
    uses_early: Option<replicate::Early>,
}

impl<'a, T: Transport> Rank<'a, T> {
    fn new(
        (scene, domain): (&'a RankScene, &'a dyn Intersector),
        settings: &'a RenderSettings,
        limits: &'a Limits,
        transport: &'a mut T,
    ) -> Rank<'a, T> {
        let (me, size) = (transport.rank(), transport.size());
        Rank {
            me,
            walker: Walker {
                me,
                scene,
                tracer: PathTracer {
                    scene: &scene.geometry.scene,
                    bvh: &scene.geometry.bvh,
                    lights: &scene.lights,
                    max_depth: settings.max_depth,
                },
                domain,
            },
            settings,
            limits,
            controls: None,
            transport,
            pixels: owned_pixels(settings.width, settings.height, size, me),
            next: (0, 0),
            in_flight: 0,
            order: HashMap::new(),
            film: vec![[0.0; 4]; settings.width as usize * settings.height as usize],
            done_from: vec![false; size],
            films: vec![None; size],
            heard: Instant::now(),
            stats: RankStats::default(),
            uses: vec![0; scene.domains.of_group.len()],
            segments: Traffic::new(),
            traffic: FrameTraffic::default(),
            uses_early: None,
        }
    }

    fn owned(&self) -> u64 {
        self.pixels.len() as u64 * u64::from(self.settings.spp)
    }

    /// Until every rank has finished its pixels: answers what arrives, starts samples while
    /// the bound allows, and says when its own are done. The paths that arrive and those it
    /// starts are walked [`BATCH`] at a time on the rank's threads, then sent on in order.
    fn run(&mut self) -> Result<(), GeometryError> {
        let mut said_done = false;
        loop {
            let mut batch = Vec::new();
            let mut busy = false;
            // Once every rank is done, what comes next is the next step's (films, a
            // prepass's counts): left for it.
            while batch.len() < BATCH && !self.done_from.iter().all(|&d| d) {
                let Some((from, bytes)) = self.poll()? else {
                    break;
                };
                busy = true;
                if let Some(early) = self.uses_early.as_mut().filter(|_| is_uses(&bytes)) {
                    early.push_back((from, bytes));
                    continue;
                }
                match self.decode(from, &bytes)? {
                    Message::Path(path) => batch.push((from, *path)),
                    other => self.receive_message(from, other)?,
                }
            }
            while batch.len() < BATCH {
                let Some(path) = self.start_sample() else {
                    break;
                };
                batch.push((self.me, path));
            }
            busy |= !batch.is_empty();
            self.walk(batch)?;
            if !said_done && self.stats.samples == self.owned() {
                said_done = true;
                self.done_from[self.me] = true;
                self.broadcast(&Message::Done)?;
            }
            if self.done_from.iter().all(|&d| d) {
                return Ok(());
            }
            self.check_stop()?;
            if !busy {
                self.wait_quietly()?;
            }
        }
    }

    /// Walks the paths ([`Walker::walk`]), then sends each on (or finishes it) in the batch's
    /// order.
    fn walk(&mut self, batch: Vec<(usize, PathMessage)>) -> Result<(), GeometryError> {
        for (walked, counted) in self.walker.walk(batch)? {
            for g in counted.uses {
                self.uses[g as usize] += 1;
            }
            let domains = &self.walker.scene.domains;
            let cell = |g: u32| {
                let g = g as usize;
                (!domains.replicated[g]).then(|| domains.cell_of_group[g])
            };
            for (left, hit) in counted.segments {
                if let (Some(a), Some(b)) = (cell(left), cell(hit)) {
                    *self.segments.entry((a, b)).or_default() += 1;
                }
            }
            match walked {
                Walked::Send(to, path) => self.send_path(to, path)?,
                Walked::Ended(path) => self.finish(path)?,
            }
        }
        Ok(())
    }

    /// A stop (a signal), or the test hook's fault once its samples are finished.
    fn check_stop(&self) -> Result<(), GeometryError> {
        if let Some(by) = self.controls.and_then(|c| c.stopped_by()) {
            return Err(GeometryError::Signal { rank: self.me, by });
        }
        let fault = self.limits.fault.filter(|f| f.rank == self.me);
        if fault.is_some_and(|f| self.stats.samples >= f.after_tiles as u64 && f.land()) {
            // Silence: alive and mute until the job is ended.
            crate::sched::fault::hold_if_silenced();
        }
        Ok(())
    }

    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, GeometryError> {
        let me = self.me;
        let got = self
            .transport
            .poll()
            .map_err(|source| GeometryError::Transport { rank: me, source })?;
        if got.is_some() {
            self.heard = Instant::now();
        }
        Ok(got)
    }

    /// Nothing to do: a short sleep, or the error of a silence longer than the limit.
    fn wait_quietly(&mut self) -> Result<(), GeometryError> {
        let silent = self.heard.elapsed();
        if silent > self.limits.silence {
            return Err(GeometryError::Silent {
                rank: self.me,
                seconds: silent.as_secs_f64(),
                waiting: (0..self.done_from.len())
                    .filter(|&r| !self.done_from[r])
                    .collect(),
                finished: self.stats.samples,
                owned: self.owned(),
            });
        }
        std::thread::sleep(Duration::from_micros(50));
        Ok(())
    }

    fn decode(&self, from: usize, bytes: &[u8]) -> Result<Message, GeometryError> {
        Message::decode(bytes, self.settings.spp, self.settings.seed)
            .map_err(|e| self.malformed(from, e.to_string()))
    }

    fn receive(&mut self, from: usize, bytes: &[u8]) -> Result<(), GeometryError> {
        match self.decode(from, bytes)? {
            Message::Path(path) => self.walk(vec![(from, *path)]),
            other => self.receive_message(from, other),
        }
    }

    /// A message other than a path.
    fn receive_message(&mut self, from: usize, message: Message) -> Result<(), GeometryError> {
        match message {
            Message::Path(path) => self.walk(vec![(from, *path)]),
            Message::Sample {
                pixel,
                sample,
                radiance,
            } => self.add_sample(from, pixel, sample, radiance),
            Message::Done => {
                self.done_from[from] = true;
                Ok(())
            }
            Message::Film(pixels) => {
                self.films[from] = Some(pixels);
                Ok(())
            }
            Message::Traffic {
                samples,
                hops,
                segments,
            } if self.me == 0 => {
                self.traffic.add(samples, hops, &segments);
                Ok(())
            }
            Message::Traffic { .. } => {
                Err(self.malformed(from, "a frame's traffic, sent to a rank but 0".into()))
            }
            Message::Stop => Err(GeometryError::Stopped {
                rank: self.me,
                finished: self.stats.samples,
                owned: self.owned(),
            }),
            Message::Uses { .. } => Err(self.malformed(from, "group uses in a frame".into())),
            Message::Next { .. } => {
                Err(self.malformed(from, "the next frame's start in a frame".into()))
            }
        }
    }

    fn malformed(&self, from: usize, reason: String) -> GeometryError {
        GeometryError::Malformed {
            rank: self.me,
            from,
            reason,
        }
    }

    /// The next sample of its pixels, as a path about to trace its camera ray, while the
    /// bound on paths out allows.
    fn start_sample(&mut self) -> Option<PathMessage> {
        if self.in_flight >= self.limits.in_flight || self.next.0 >= self.pixels.len() {
            return None;
        }
        let (pixel, sample) = (self.pixels[self.next.0], self.next.1);
        self.next.1 += 1;
        if self.next.1 == self.settings.spp {
            self.next = (self.next.0 + 1, 0);
        }
        self.in_flight += 1;
        self.stats.peak_in_flight = self.stats.peak_in_flight.max(self.in_flight);
        let s = self.settings;
        let mut rng = Sampler::new(pixel.0, pixel.1, sample, s.spp, s.seed);
        let (origin, dir) = pixel_ray(&s.camera, pixel, &mut rng);
        let state = self.walker.tracer.start(origin, dir, rng);
        let query = self.walker.next_query(&state);
        Some(PathMessage {
            pixel,
            sample,
            left: FROM_CAMERA,
            state,
            query,
        })
    }

    fn send_path(&mut self, to: usize, path: PathMessage) -> Result<(), GeometryError> {
        match path.query {
            Query::Shadow { .. } => self.stats.shadow_hops += 1,
            Query::Segment { .. } => self.stats.segment_hops += 1,
            Query::Shade { .. } => self.stats.shade_hops += 1,
        }
        self.send(to, &Message::Path(Box::new(path)))
    }

    fn send(&mut self, to: usize, message: &Message) -> Result<(), GeometryError> {
        let bytes = message.encode();
        self.stats.bytes_sent += bytes.len() as u64;
        let me = self.me;
        self.transport
            .send(to, bytes)
            .map_err(|source| GeometryError::Transport { rank: me, source })
    }

    fn broadcast(&mut self, message: &Message) -> Result<(), GeometryError> {
        let me = self.me;
        for to in (0..self.done_from.len()).filter(|&r| r != me) {
            self.send(to, message)?;
        }
        Ok(())
    }

    /// A path that has ended: its radiance goes to its pixel's owner.
    fn finish(&mut self, path: PathMessage) -> Result<(), GeometryError> {
        let owner = pixel_owner(path.pixel, self.settings.width, self.done_from.len());
        let radiance = path.state.radiance;
        if owner == self.me {
            return self.add_sample(self.me, path.pixel, path.sample, radiance);
        }
        self.stats.sample_messages += 1;
        let message = Message::Sample {
            pixel: path.pixel,
            sample: path.sample,
            radiance,
        };
        self.send(owner, &message)
    }

    /// Adds a finished sample to its pixel, in the order of the pixel's samples (a sample
    /// that comes early waits for those before it), as one process adds them.
    fn add_sample(
        &mut self,
        from: usize,
        pixel: (u32, u32),
        sample: u32,
        radiance: Vec3,
    ) -> Result<(), GeometryError> {
        let (w, h) = (self.settings.width, self.settings.height);
        let mine =
            pixel.0 < w && pixel.1 < h && pixel_owner(pixel, w, self.done_from.len()) == self.me;
        if !mine || sample >= self.settings.spp {
            let reason = format!("sample {sample} of pixel {pixel:?}, which is not this rank's");
            return Err(self.malformed(from, reason));
        }
        // Without a sample out, or past a pixel's last, no sample can be due.
        let complete = self.in_flight == 0
            || self.film[(pixel.1 * w + pixel.0) as usize][3] >= self.settings.spp as f32;
        let (next, early) = self.order.entry(pixel).or_default();
        if complete || sample < *next || early.insert(sample, radiance).is_some() {
            let reason = format!("sample {sample} of pixel {pixel:?} a second time");
            return Err(self.malformed(from, reason));
        }
        let px = &mut self.film[(pixel.1 * w + pixel.0) as usize];
        while let Some(l) = early.remove(next) {
            if l.is_finite() {
                px[0] += l.x;
                px[1] += l.y;
                px[2] += l.z;
            }
            px[3] += 1.0;
            *next += 1;
            self.in_flight -= 1;
            self.stats.samples += 1;
        }
        if *next == self.settings.spp {
            self.order.remove(&pixel);
        }
        Ok(())
    }

    /// Rank 0 gathers every rank's pixels into the image, and their counts; the others send
    /// theirs.
    fn gather(&mut self) -> Result<Option<Vec<[f32; 4]>>, GeometryError> {
        let segments: Vec<(u32, u32, u64)> = std::mem::take(&mut self.segments)
            .into_iter()
            .map(|((a, b), n)| (a, b, n))
            .collect();
        let s = self.stats;
        let hops = s.shadow_hops + s.segment_hops + s.shade_hops;
        if self.me != 0 {
            let traffic = Message::Traffic {
                samples: s.samples,
                hops,
                segments,
            };
            self.send(0, &traffic)?;
            self.send(0, &Message::Film(self.own_film()))?;
            let me = self.me;
            self.transport
                .flush(self.limits.silence)
                .map_err(|source| GeometryError::Transport { rank: me, source })?;
            return Ok(None);
        }
        self.traffic.add(s.samples, hops, &segments);
        self.heard = Instant::now();
        while self.films.iter().skip(1).any(Option::is_none) {
            match self.poll()? {
                Some((from, bytes)) => self.receive(from, &bytes)?,
                None => self.wait_quietly()?,
            }
        }
        Ok(Some(self.image()))
    }

    /// A frame cut short: rank 0 tells the others to stop and keeps the films that arrive
    /// within [`SALVAGE`] (a rank that died sends none); the others send theirs as it stands.
    /// Nothing here can fail the frame further: a send that fails is a rank gone.
    fn salvage(&mut self, cause: &GeometryError) -> Option<Vec<[f32; 4]>> {
        // A signal's stop reaches every rank at once (mpirun passes it on): the films come
        // at once or not at all, and the launcher's patience is short.
        let wait = match cause {
            GeometryError::Signal { .. } => SALVAGE_AT_A_SIGNAL,
            _ => SALVAGE,
        }
        .min(self.limits.silence);
        if self.me != 0 {
            let film = Message::Film(self.own_film());
            if self.send(0, &film).is_ok() {
                let _ = self.transport.flush(wait);
            }
            return None;
        }
        let _ = self.broadcast(&Message::Stop);
        let started = Instant::now();
        while self.films.iter().skip(1).any(Option::is_none) && started.elapsed() < wait {
            match self.transport.poll() {
                Ok(Some((from, bytes))) => {
                    if let Ok(Message::Film(pixels)) =
                        Message::decode(&bytes, self.settings.spp, self.settings.seed)
                    {
                        self.films[from] = Some(pixels);
                    }
                }
                Ok(None) => std::thread::sleep(Duration::from_micros(50)),
                Err(_) => break,
            }
        }
        Some(self.image())
    }

    /// Its own pixels' sums, for rank 0.
    fn own_film(&self) -> Vec<PixelSums> {
        let w = self.settings.width;
        self.pixels
            .iter()
            .map(|&(x, y)| ((x, y), self.film[(y * w + x) as usize]))
            .collect()
    }

    /// Rank 0's film with the others' pixels that arrived.
    fn image(&mut self) -> Vec<[f32; 4]> {
        let (w, h) = (self.settings.width, self.settings.height);
        for (pixel, sums) in self.films.iter_mut().filter_map(Option::take).flatten() {
            if pixel.0 < w && pixel.1 < h {
                self.film[(pixel.1 * w + pixel.0) as usize] = sums;
            }
        }
        std::mem::take(&mut self.film)
    }
}

/// Between two frames of a sequence: rank 0, which holds every rank's film, lets the ranks go
/// on ([`Message::Next`]) with the domain of each cell for the next frame (`cells`; none: as
/// they are), which every rank returns. Every other rank waits for that, keeping in `early`
/// what faster ranks of the next frame send meanwhile. So no message of the next frame reaches
/// a rank still in this one.
pub fn next_frame<T: Transport>(
    transport: &mut T,
    early: &mut replicate::Early,
    silence: Duration,
    cells: Vec<u32>,
) -> Result<Vec<u32>, GeometryError> {
    let (me, size) = (transport.rank(), transport.size());
    let failed = |source| GeometryError::Transport { rank: me, source };
    if me == 0 {
        let next = Message::Next {
            cells: cells.clone(),
        }
        .encode();
        for to in 1..size {
            transport.send(to, next.clone()).map_err(failed)?;
        }
        return Ok(cells);
    }
    let heard = Instant::now();
    loop {
        match transport.poll().map_err(failed)? {
            Some((0, bytes)) if bytes.first() == Some(&message::NEXT) => {
                return match Message::decode(&bytes, 1, 0) {
                    Ok(Message::Next { cells }) => Ok(cells),
                    _ => Err(GeometryError::Malformed {
                        rank: me,
                        from: 0,
                        reason: "a next frame's start cut short".into(),
                    }),
                };
            }
            Some(other) => early.push_back(other),
            None if heard.elapsed() > silence => {
                return Err(GeometryError::Silent {
                    rank: me,
                    seconds: heard.elapsed().as_secs_f64(),
                    waiting: vec![0],
                    finished: 0,
                    owned: 0,
                })
            }
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
}

/// How long rank 0 waits for the films of the ranks still alive once a frame is cut short
/// (at most the silence limit), and once a signal stopped it.
const SALVAGE: Duration = Duration::from_secs(10);
const SALVAGE_AT_A_SIGNAL: Duration = Duration::from_secs(1);

/// The rank that owns pixel `(x, y)`: tiles of [`TILE`] pixels square, in rows, dealt to the
/// ranks in turn.
pub fn pixel_owner((x, y): (u32, u32), width: u32, ranks: usize) -> usize {
    let tiles_across = width.div_ceil(TILE) as usize;
    ((y / TILE) as usize * tiles_across + (x / TILE) as usize) % ranks
}

/// Rank `rank`'s pixels, tile by tile, row by row within a tile.
fn owned_pixels(width: u32, height: u32, ranks: usize, rank: usize) -> Vec<(u32, u32)> {
    let mut pixels = Vec::new();
    for ty in (0..height).step_by(TILE as usize) {
        for tx in (0..width).step_by(TILE as usize) {
            if pixel_owner((tx, ty), width, ranks) != rank {
                continue;
            }
            for y in ty..(ty + TILE).min(height) {
                pixels.extend((tx..(tx + TILE).min(width)).map(|x| (x, y)));
            }
        }
    }
    pixels
}

/// Renders a frame with `ranks` ranks as threads of this process, over channels: the same
/// protocol as under `mpirun`. Returns the image's sums and each rank's counts.
pub fn render_in_process(
    whole: &Scene,
    settings: &RenderSettings,
    ranks: usize,
    limits: &Limits,
) -> Result<(Vec<[f32; 4]>, Vec<RankStats>), GeometryError> {
    let scenes: Vec<RankScene> = (0..ranks).map(|r| RankScene::of(whole, ranks, r)).collect();
    render_in_process_with(&scenes, settings, limits)
}

/// [`render_in_process`] over ranks' scenes already split.
pub fn render_in_process_with(
    scenes: &[RankScene],
    settings: &RenderSettings,
    limits: &Limits,
) -> Result<(Vec<[f32; 4]>, Vec<RankStats>), GeometryError> {
    let ranks: Vec<(&RankScene, &dyn Intersector)> =
        scenes.iter().map(|s| (s, &s.geometry as _)).collect();
    render_in_process_on(&ranks, settings, limits)
}

/// [`render_in_process`] over ranks' scenes already split, each rank's rays tested by its
/// own [`Intersector`] (a GPU's).
pub fn render_in_process_on(
    scenes: &[(&RankScene, &dyn Intersector)],
    settings: &RenderSettings,
    limits: &Limits,
) -> Result<(Vec<[f32; 4]>, Vec<RankStats>), GeometryError> {
    let transports = crate::sched::transport::ChannelTransport::create(scenes.len());
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = scenes
            .iter()
            .zip(transports)
            .map(|(&rank, mut t)| {
                s.spawn(move || {
                    render_rank_on(rank, settings, limits, &NoControls::default(), &mut t)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut image = None;
    let mut stats = Vec::new();
    for result in results {
        let outcome = result?;
        if let Some(e) = outcome.cut_short {
            return Err(e);
        }
        image = image.or(outcome.image);
        stats.push(outcome.stats);
    }
    let image = image.unwrap_or_default();
    Ok((image, stats))
}
