//! The messages of a distributed-geometry frame, as bytes: little-endian, fixed layouts, one
//! tag byte first. docs/distributed-geometry.md lists them with their sizes.

use glam::Vec3;

use crate::cpu::bvh::Hit;
use crate::cpu::integrator::{PathState, PendingLight, ShadowRay};
use crate::render::Sampler;
use crate::sched::wire::{DecodeError, Reader, Writer};

/// Where a path's current ray stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Query {
    /// Its shadow ray, started at rank `start`: `next` is the position, in the list of domains
    /// the ray enters less `start`, of the next domain to test it.
    Shadow { start: u32, next: u32 },
    /// Its next segment, started at rank `start`, with the closest hit found so far.
    Segment {
        start: u32,
        next: u32,
        best: Option<Hit>,
    },
    /// Its next segment's closest hit, to be shaded by the rank that holds its group.
    Shade { hit: Hit },
}

/// A path on its way: which sample it is, its state, and its ray's query.
#[derive(Clone, Copy, Debug)]
pub struct PathMessage {
    pub pixel: (u32, u32),
    pub sample: u32,
    /// The group of the vertex its segment leaves ([`FROM_CAMERA`] for a camera ray): with
    /// the hit's group, the cells the segment joins ([`super::reassign`]).
    pub left: u32,
    pub state: PathState,
    pub query: Query,
}

/// [`PathMessage::left`] of a camera ray.
pub const FROM_CAMERA: u32 = u32::MAX;

/// A pixel and its sums: red, green, blue, samples.
pub type PixelSums = ((u32, u32), [f32; 4]);

/// What ranks send each other.
#[derive(Clone, Debug)]
pub enum Message {
    Path(Box<PathMessage>),
    /// A finished sample's radiance, for the rank that owns its pixel.
    Sample {
        pixel: (u32, u32),
        sample: u32,
        radiance: Vec3,
    },
    /// The sender's pixels are all finished: it sends nothing more but its film.
    Done,
    /// The sender's pixels' sums (x, y, rgb, count) for the image, sent to rank 0 once.
    Film(Vec<PixelSums>),
    /// From rank 0, after a rank fell silent or failed: the frame is over; send your film as
    /// it stands.
    Stop,
    /// After a prepass, to every rank: the sender's own samples, the path messages it sent,
    /// and per group how often a ray had to travel for it ([`super::replicate`]).
    Uses {
        samples: u64,
        hops: u64,
        uses: Vec<u64>,
    },
    /// From rank 0 between a sequence's frames, once it holds every rank's film: the next
    /// frame may start, with its cells held by these domains (none: as they were).
    Next {
        cells: Vec<u32>,
    },
    /// To rank 0 after a sequence's frame, before the sender's film: its samples, the path
    /// messages it sent, and the segments it shaded by the cells they joined (from, to,
    /// count; [`super::reassign`]).
    Traffic {
        samples: u64,
        hops: u64,
        segments: Vec<(u32, u32, u64)>,
    },
}

const PATH: u8 = 1;
const SAMPLE: u8 = 2;
const DONE: u8 = 3;
const FILM: u8 = 4;
const STOP: u8 = 5;
const USES: u8 = 6;
pub(super) const NEXT: u8 = 7;
const TRAFFIC: u8 = 8;

/// Whether `bytes` are a [`Message::Uses`] (by its tag alone).
pub fn is_uses(bytes: &[u8]) -> bool {
    bytes.first() == Some(&USES)
}

impl Message {
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(160));
        match self {
            Message::Path(p) => {
                w.u8(PATH);
                w.path(p);
            }
            Message::Sample {
                pixel,
                sample,
                radiance,
            } => {
                w.u8(SAMPLE);
                w.u32(pixel.0);
                w.u32(pixel.1);
                w.u32(*sample);
                w.vec3(*radiance);
            }
            Message::Done => w.u8(DONE),
            Message::Stop => w.u8(STOP),
            Message::Next { cells } => {
                w.u8(NEXT);
                w.len(cells.len());
                cells.iter().for_each(|&c| w.u32(c));
            }
            Message::Traffic {
                samples,
                hops,
                segments,
            } => {
                w.u8(TRAFFIC);
                w.u64(*samples);
                w.u64(*hops);
                w.len(segments.len());
                for &(from, to, count) in segments {
                    w.u32(from);
                    w.u32(to);
                    w.u64(count);
                }
            }
            Message::Uses {
                samples,
                hops,
                uses,
            } => {
                w.u8(USES);
                w.u64(*samples);
                w.u64(*hops);
                w.len(uses.len());
                uses.iter().for_each(|&u| w.u64(u));
            }
            Message::Film(pixels) => {
                w.u8(FILM);
                w.len(pixels.len());
                for ((x, y), sums) in pixels {
                    w.u32(*x);
                    w.u32(*y);
                    sums.iter().for_each(|&v| w.f32(v));
                }
            }
        }
        w.0
    }

    /// The message of `bytes`, whose sampler positions resume in a render of `spp` samples
    /// per pixel with seed `seed`.
    pub fn decode(bytes: &[u8], spp: u32, seed: u64) -> Result<Message, DecodeError> {
        let mut r = Reader::new(bytes);
        let message = match r.u8()? {
            PATH => Message::Path(Box::new(r.path(spp, seed)?)),
            SAMPLE => Message::Sample {
                pixel: (r.u32()?, r.u32()?),
                sample: r.u32()?,
                radiance: r.vec3()?,
            },
            DONE => Message::Done,
            STOP => Message::Stop,
            NEXT => {
                let n = r.len(4)?;
                let cells = (0..n).map(|_| r.u32()).collect::<Result<_, _>>()?;
                Message::Next { cells }
            }
            TRAFFIC => {
                let (samples, hops) = (r.u64()?, r.u64()?);
                let n = r.len(16)?;
                let mut segments = Vec::with_capacity(n);
                for _ in 0..n {
                    segments.push((r.u32()?, r.u32()?, r.u64()?));
                }
                Message::Traffic {
                    samples,
                    hops,
                    segments,
                }
            }
            USES => {
                let (samples, hops) = (r.u64()?, r.u64()?);
                let n = r.len(8)?;
                let uses = (0..n).map(|_| r.u64()).collect::<Result<Vec<u64>, _>>()?;
                Message::Uses {
                    samples,
                    hops,
                    uses,
                }
            }
            FILM => {
                let n = r.len(24)?;
                let mut pixels = Vec::with_capacity(n);
                for _ in 0..n {
                    let pixel = (r.u32()?, r.u32()?);
                    pixels.push((pixel, [r.f32()?, r.f32()?, r.f32()?, r.f32()?]));
                }
                Message::Film(pixels)
            }
            tag => return Err(DecodeError::UnknownTag(tag)),
        };
        r.finish()?;
        Ok(message)
    }
}

// The payloads of these messages, on the ranks' shared byte writer and reader.

impl Writer {
    fn vec3(&mut self, v: Vec3) {
        v.to_array().iter().for_each(|&c| self.f32(c));
    }

    fn hit(&mut self, h: &Hit) {
        self.u32(h.group);
        self.u32(h.prim);
        [h.t, h.u, h.v].iter().for_each(|&v| self.f32(v));
    }

    fn path(&mut self, p: &PathMessage) {
        self.u32(p.pixel.0);
        self.u32(p.pixel.1);
        self.u32(p.sample);
        self.u32(p.left);
        let s = &p.state;
        self.u64(s.rng.position());
        self.u32(s.depth);
        self.vec3(s.throughput);
        self.vec3(s.radiance);
        self.f32(s.prev_pdf);
        self.u8(u8::from(s.prev_delta));
        match s.ray {
            Some((o, d)) => {
                self.u8(1);
                self.vec3(o);
                self.vec3(d);
            }
            None => self.u8(0),
        }
        match &s.shadow {
            Some(l) => {
                self.u8(1);
                self.vec3(l.ray.origin);
                self.vec3(l.ray.dir);
                self.f32(l.ray.tmax);
                self.vec3(l.arrives);
                self.vec3(l.blocked);
            }
            None => self.u8(0),
        }
        match p.query {
            Query::Shadow { start, next } => {
                self.u8(0);
                self.u32(start);
                self.u32(next);
            }
            Query::Segment { start, next, best } => {
                self.u8(1);
                self.u32(start);
                self.u32(next);
                match best {
                    Some(h) => {
                        self.u8(1);
                        self.hit(&h);
                    }
                    None => self.u8(0),
                }
            }
            Query::Shade { hit } => {
                self.u8(2);
                self.hit(&hit);
            }
        }
    }
}

impl Reader<'_> {
    fn vec3(&mut self) -> Result<Vec3, DecodeError> {
        Ok(Vec3::new(self.f32()?, self.f32()?, self.f32()?))
    }

    fn hit(&mut self) -> Result<Hit, DecodeError> {
        Ok(Hit {
            group: self.u32()?,
            prim: self.u32()?,
            t: self.f32()?,
            u: self.f32()?,
            v: self.f32()?,
        })
    }

    fn path(&mut self, spp: u32, seed: u64) -> Result<PathMessage, DecodeError> {
        let pixel = (self.u32()?, self.u32()?);
        let sample = self.u32()?;
        let left = self.u32()?;
        let position = self.u64()?;
        let rng = Sampler::resumed(pixel.0, pixel.1, sample, spp, seed, position);
        let depth = self.u32()?;
        let (throughput, radiance) = (self.vec3()?, self.vec3()?);
        let (prev_pdf, prev_delta) = (self.f32()?, self.flag()?);
        let ray = if self.flag()? {
            Some((self.vec3()?, self.vec3()?))
        } else {
            None
        };
        let shadow = if self.flag()? {
            let ray = ShadowRay {
                origin: self.vec3()?,
                dir: self.vec3()?,
                tmax: self.f32()?,
            };
            Some(PendingLight {
                ray,
                arrives: self.vec3()?,
                blocked: self.vec3()?,
            })
        } else {
            None
        };
        let query = match self.u8()? {
            0 => Query::Shadow {
                start: self.u32()?,
                next: self.u32()?,
            },
            1 => Query::Segment {
                start: self.u32()?,
                next: self.u32()?,
                best: if self.flag()? {
                    Some(self.hit()?)
                } else {
                    None
                },
            },
            2 => Query::Shade { hit: self.hit()? },
            q => return Err(DecodeError::UnknownTag(q)),
        };
        let state = PathState {
            rng,
            ray,
            depth,
            throughput,
            radiance,
            prev_pdf,
            prev_delta,
            shadow,
        };
        Ok(PathMessage {
            pixel,
            sample,
            left,
            state,
            query,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(v: Vec3) -> [u32; 3] {
        v.to_array().map(f32::to_bits)
    }

    fn path(query: Query, shadow: bool) -> PathMessage {
        let mut rng = Sampler::new(3, 4, 5, 8, 99);
        rng.next_2d();
        PathMessage {
            pixel: (3, 4),
            sample: 5,
            left: 11,
            state: PathState {
                rng,
                ray: Some((Vec3::new(1.0, -2.0, 3.5), Vec3::new(0.0, -0.0, 1.0))),
                depth: 4,
                throughput: Vec3::new(0.5, f32::NAN, f32::INFINITY),
                radiance: Vec3::new(1e-30, 2.0, 3.0),
                prev_pdf: 0.25,
                prev_delta: false,
                shadow: shadow.then_some(PendingLight {
                    ray: ShadowRay {
                        origin: Vec3::ONE,
                        dir: Vec3::X,
                        tmax: 1.0,
                    },
                    arrives: Vec3::splat(0.125),
                    blocked: Vec3::splat(-0.0),
                }),
            },
            query,
        }
    }

    /// Every field of every message comes back bit for bit (NaN, infinity and -0 included),
    /// and the sampler goes on drawing the same numbers.
    #[test]
    fn messages_round_trip_bit_for_bit() {
        let hit = Hit {
            group: 7,
            prim: 9,
            t: 0.5,
            u: 0.25,
            v: 0.125,
        };
        let queries = [
            Query::Shadow { start: 1, next: 2 },
            Query::Segment {
                start: 3,
                next: 0,
                best: None,
            },
            Query::Segment {
                start: 0,
                next: 5,
                best: Some(hit),
            },
            Query::Shade { hit },
        ];
        for (query, shadow) in queries.iter().flat_map(|&q| [(q, false), (q, true)]) {
            let sent = path(query, shadow);
            let bytes = Message::Path(Box::new(sent)).encode();
            let Ok(Message::Path(got)) = Message::decode(&bytes, 8, 99) else {
                panic!("{query:?}");
            };
            assert_eq!(
                (got.pixel, got.sample, got.left, got.query),
                (sent.pixel, sent.sample, sent.left, query)
            );
            let (a, b) = (&got.state, &sent.state);
            assert_eq!(
                (a.depth, a.prev_delta, a.ray),
                (b.depth, b.prev_delta, b.ray)
            );
            assert_eq!(bits(a.throughput), bits(b.throughput));
            assert_eq!(bits(a.radiance), bits(b.radiance));
            assert_eq!(a.prev_pdf.to_bits(), b.prev_pdf.to_bits());
            let light_bits =
                |l: &Option<PendingLight>| l.map(|l| (bits(l.arrives), bits(l.blocked), l.ray));
            assert_eq!(light_bits(&a.shadow), light_bits(&b.shadow));
            let (mut ra, mut rb) = (a.rng, b.rng);
            assert_eq!(ra.next_2d(), rb.next_2d());
        }
        let sample = Message::Sample {
            pixel: (1, 2),
            sample: 3,
            radiance: Vec3::new(f32::NAN, 1.0, -0.0),
        };
        let Ok(Message::Sample { radiance, .. }) = Message::decode(&sample.encode(), 8, 1) else {
            panic!("sample");
        };
        assert_eq!(bits(radiance), bits(Vec3::new(f32::NAN, 1.0, -0.0)));
        let film = Message::Film(vec![((1, 2), [1.0, 2.0, 3.0, 4.0]), ((0, 0), [0.0; 4])]);
        let Ok(Message::Film(pixels)) = Message::decode(&film.encode(), 8, 1) else {
            panic!("film");
        };
        assert_eq!(pixels.len(), 2);
        assert!(matches!(
            Message::decode(&Message::Done.encode(), 8, 1),
            Ok(Message::Done)
        ));
        assert!(matches!(
            Message::decode(&Message::Stop.encode(), 8, 1),
            Ok(Message::Stop)
        ));
        let next = Message::Next { cells: vec![2, 0] };
        let Ok(Message::Next { cells }) = Message::decode(&next.encode(), 8, 1) else {
            panic!("next");
        };
        assert_eq!(cells, [2, 0]);
        let traffic = Message::Traffic {
            samples: 4,
            hops: 5,
            segments: vec![(1, 2, 3), (0, 7, u64::MAX)],
        };
        let Ok(Message::Traffic {
            samples: 4,
            hops: 5,
            segments,
        }) = Message::decode(&traffic.encode(), 8, 1)
        else {
            panic!("traffic");
        };
        assert_eq!(segments, [(1, 2, 3), (0, 7, u64::MAX)]);
        let uses = Message::Uses {
            samples: 7,
            hops: 9,
            uses: vec![0, 3, u64::MAX],
        };
        let Ok(Message::Uses {
            samples: 7,
            hops: 9,
            uses,
        }) = Message::decode(&uses.encode(), 8, 1)
        else {
            panic!("uses");
        };
        assert_eq!(uses, [0, 3, u64::MAX]);
    }

    /// A message cut short, with bytes left over, or with an unknown type is an error saying
    /// which, never a panic or a wrong message.
    #[test]
    fn malformed_messages_are_errors() {
        let bytes =
            Message::Path(Box::new(path(Query::Shadow { start: 0, next: 0 }, true))).encode();
        for cut in 0..bytes.len() {
            assert!(
                Message::decode(&bytes[..cut], 8, 1).is_err(),
                "cut at {cut}"
            );
        }
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            Message::decode(&long, 8, 1).unwrap_err(),
            DecodeError::Trailing(1)
        );
        assert_eq!(
            Message::decode(&[9], 8, 1).unwrap_err(),
            DecodeError::UnknownTag(9)
        );
        let mut film = vec![FILM];
        film.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            Message::decode(&film, 8, 1),
            Err(DecodeError::Truncated { .. })
        ));
    }
}
