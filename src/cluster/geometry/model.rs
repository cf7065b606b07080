//! A model of a frame's time on a cluster, for the rank counts and networks no test machine
//! has: image-plane work (every rank holds the scene, pixels are split) against domain
//! forwarding (the geometry is split, rays travel). `gasworks forwarding-sim` prints it.
//!
//! The traffic is measured, not guessed: the scene is rendered at a small size with `ranks`
//! ranks as threads over channels, which counts every message the real protocol sends, for
//! any rank count. The times come from that traffic and three figures of the machines:
//! - image-plane: `samples x sample cost / (ranks x workers)`, plus the film's 16 bytes a
//!   pixel through rank 0's link;
//! - forwarding: the slowest of three bounds, plus the film's 24 bytes a pixel to rank 0:
//!   compute (the busiest rank's samples and messages), bandwidth (its bytes through its
//!   link) and latency (Little's law: a rank keeps at most [`super::Limits::in_flight`]
//!   paths out, each waiting one latency a hop).
//!
//! What it leaves out: contention in the network's core, the BVH work a forwarded query
//! repeats (each domain's top levels), and the extra rays replication saves.

use super::{render_in_process, GeometryError, Limits};
use crate::render::RenderSettings;
use crate::scene::Scene;

/// What a frame's rays cost the network, per sample, at one rank count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Traffic {
    pub ranks: usize,
    /// Messages a sample sends: path messages (shadow rays, segments, hits to shade) and
    /// samples sent to their pixel's owner.
    pub messages: f64,
    pub bytes: f64,
    /// The busiest rank's work (its samples plus its messages) over the mean rank's: 1 when
    /// the ranks share it evenly.
    pub imbalance: f64,
}

impl Traffic {
    /// The traffic of `settings` on `whole` split over `ranks` ranks, measured by rendering
    /// it with the ranks as threads of this process.
    pub fn measure(
        whole: &Scene,
        settings: &RenderSettings,
        ranks: usize,
    ) -> Result<Traffic, GeometryError> {
        let (_, stats) = render_in_process(whole, settings, ranks, &Limits::default())?;
        let samples: u64 = stats.iter().map(|s| s.samples).sum();
        let messages = |s: &super::RankStats| {
            s.shadow_hops + s.segment_hops + s.shade_hops + s.sample_messages
        };
        let work: Vec<f64> = stats
            .iter()
            .map(|s| (s.samples + messages(s)) as f64)
            .collect();
        let mean = work.iter().sum::<f64>() / work.len().max(1) as f64;
        let per_sample = |n: u64| n as f64 / samples.max(1) as f64;
        Ok(Traffic {
            ranks,
            messages: per_sample(stats.iter().map(messages).sum()),
            bytes: per_sample(stats.iter().map(|s| s.bytes_sent).sum()),
            imbalance: if mean > 0.0 {
                work.iter().cloned().fold(0.0, f64::max) / mean
            } else {
                1.0
            },
        })
    }
}

/// A network: one link per rank.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Network {
    /// One message's latency, in seconds.
    pub latency: f64,
    /// A rank's link, in bytes a second.
    pub bandwidth: f64,
}

/// What the machines do.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Machines {
    /// Seconds one worker takes for one sample of the whole scene.
    pub sample: f64,
    /// Workers per rank.
    pub workers: usize,
    /// Seconds of a worker's time to send or receive one message.
    pub message: f64,
    /// Paths a rank keeps out at once ([`Limits::in_flight`]).
    pub in_flight: usize,
}

/// What bounds a forwarded frame's time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Compute,
    Bandwidth,
    Latency,
}

/// A frame's modelled times, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameTimes {
    pub image_plane: f64,
    pub forwarding: f64,
    pub bound: Bound,
}

/// The times of a frame of `pixels` pixels at `spp` samples under `traffic`'s rank count.
pub fn frame_times(
    traffic: &Traffic,
    (pixels, spp): (u64, u32),
    network: &Network,
    machines: &Machines,
) -> FrameTimes {
    let ranks = traffic.ranks.max(1) as f64;
    let workers = machines.workers.max(1) as f64;
    let samples = pixels as f64 * f64::from(spp);
    let per_rank = samples / ranks;
    let gather =
        |bytes_a_pixel: f64| network.latency + pixels as f64 * bytes_a_pixel / network.bandwidth;
    let image_plane = per_rank * machines.sample / workers + gather(16.0);
    let busiest = per_rank * traffic.imbalance;
    let bounds = [
        (
            busiest * (machines.sample + traffic.messages * machines.message) / workers,
            Bound::Compute,
        ),
        (
            busiest * traffic.bytes / network.bandwidth,
            Bound::Bandwidth,
        ),
        (
            busiest * traffic.messages * network.latency / machines.in_flight.max(1) as f64,
            Bound::Latency,
        ),
    ];
    let (slowest, bound) =
        bounds
            .into_iter()
            .fold((0.0, Bound::Compute), |a, b| if b.0 > a.0 { b } else { a });
    FrameTimes {
        image_plane,
        forwarding: slowest + gather(24.0),
        bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traffic(messages: f64) -> Traffic {
        Traffic {
            ranks: 16,
            messages,
            bytes: messages * 120.0,
            imbalance: 1.25,
        }
    }

    const MACHINES: Machines = Machines {
        sample: 1e-6,
        workers: 16,
        message: 2e-7,
        in_flight: 4096,
    };

    #[test]
    fn each_bound_takes_over_where_its_resource_runs_out() {
        let frame = (1920 * 1080, 64);
        let fast = Network {
            latency: 1e-6,
            bandwidth: 12.5e9,
        };
        let t = frame_times(&traffic(5.0), frame, &fast, &MACHINES);
        assert_eq!(t.bound, Bound::Compute);
        // Without messages, forwarding is image-plane work slowed by the imbalance alone (and
        // its bigger film).
        let none = frame_times(&traffic(0.0), frame, &fast, &MACHINES);
        let compute = 1920.0 * 1080.0 * 64.0 / 16.0 * 1e-6 / 16.0;
        assert!((none.image_plane - compute - 1e-6 - 1920.0 * 1080.0 * 16.0 / 12.5e9).abs() < 1e-9);
        assert!(none.forwarding > none.image_plane && none.forwarding < 1.3 * none.image_plane);
        let slow_link = Network {
            bandwidth: 1.25e8,
            ..fast
        };
        assert_eq!(
            frame_times(&traffic(5.0), frame, &slow_link, &MACHINES).bound,
            Bound::Bandwidth
        );
        let far = Network {
            latency: 1e-3,
            ..fast
        };
        let t_far = frame_times(&traffic(5.0), frame, &far, &MACHINES);
        assert_eq!(t_far.bound, Bound::Latency);
        assert!(t_far.forwarding > t.forwarding && t_far.image_plane > t.image_plane);
        // More traffic never makes forwarding faster.
        for net in [fast, slow_link, far] {
            let a = frame_times(&traffic(2.0), frame, &net, &MACHINES).forwarding;
            let b = frame_times(&traffic(8.0), frame, &net, &MACHINES).forwarding;
            assert!(b >= a);
        }
    }

    #[test]
    fn measured_traffic_counts_every_message_of_the_frame() {
        use crate::scene::gen::{cornell, cornell_camera};
        let scene = cornell();
        let settings = RenderSettings {
            width: 24,
            height: 16,
            spp: 2,
            max_depth: 4,
            seed: 1,
            camera: cornell_camera().frame(24, 16).unwrap(),
        };
        let one = Traffic::measure(&scene, &settings, 1).unwrap();
        assert_eq!((one.messages, one.bytes, one.imbalance), (0.0, 0.0, 1.0));
        let three = Traffic::measure(&scene, &settings, 3).unwrap();
        let (_, stats) = render_in_process(&scene, &settings, 3, &Limits::default()).unwrap();
        let bytes: u64 = stats.iter().map(|s| s.bytes_sent).sum();
        assert_eq!(three.bytes, bytes as f64 / (24.0 * 16.0 * 2.0));
        assert!(three.messages > 0.0 && three.imbalance >= 1.0);
    }
}
