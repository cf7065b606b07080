//! Splitting OBJ faces of four or more corners into triangles.
//!
//! The parser splits every face as a fan (corners 0, i, i + 1). That is right for convex faces,
//! which most files hold, and wrong for concave ones: the fan of an L-shaped wall covers the
//! notch and leaves part of the L open, and nothing says so. The parser cannot tell which faces
//! are concave, because their vertices may have been read by another thread (a face may use
//! any vertex defined before it); so it records where each face of 4 or more corners went
//! ([`Polygon`]), and once a block's positions are all in place [`split_concave`] re-splits
//! the concave faces by ear clipping: into the same number of triangles (corners - 2), in the
//! same place, with the face's winding kept, so nothing downstream changes.
//!
//! A face is looked at in the plane it mostly lies in: projected along the largest axis of its
//! area vector (Newell's normal), in f64 around its first corner. Faces whose projection
//! crosses itself have no right split; they stay fans and are tallied for one warning, as are
//! concave faces with more than [`MAX_EAR_CLIPPED_CORNERS`] corners (ear clipping is quadratic).

use glam::{DVec2, DVec3, Vec3};

use super::parse::{ChunkOut, Corner, Polygon};

/// Concave faces with more corners than this stay fans (with a warning): ear clipping takes
/// time quadratic in the corners, and faces this large are rare outside broken exports.
pub const MAX_EAR_CLIPPED_CORNERS: usize = 4096;

/// Relative size (of the cross product, against the product of the two edge lengths) under
/// which a corner counts as straight: neither convex nor reflex.
const STRAIGHT: f64 = 1e-12;

/// Re-splits the concave faces among `out.polygons` in place, and empties that list.
/// `positions` must hold every vertex the faces use.
pub fn split_concave(out: &mut ChunkOut, positions: &[Vec3]) {
    let polygons = std::mem::take(&mut out.polygons);
    let mut splitter = Splitter::default();
    let mut ring: Vec<Corner> = Vec::new();
    let mut points: Vec<Vec3> = Vec::new();
    for &Polygon {
        first,
        corners,
        line,
    } in &polygons
    {
        let Some(fan) = out.corners.get_mut(first..first + 3 * (corners - 2)) else {
            continue;
        };
        // Most faces of 4 or more corners are convex quadrilaterals: checked in place.
        if corners == 4 {
            let quad = [fan[0], fan[1], fan[2], fan[5]].map(|c| positions.get(c.v as usize));
            if let [Some(a), Some(b), Some(c), Some(d)] = quad {
                if quad_fan_is_right([*a, *b, *c, *d]) {
                    continue;
                }
            }
        }
        // The fan (0 1 2) (0 2 3) (0 3 4) ... gives back the corners in order.
        ring.clear();
        ring.extend_from_slice(&fan[..2]);
        ring.extend(fan.chunks_exact(3).map(|t| t[2]));
        points.clear();
        points.extend(ring.iter().map_while(|c| positions.get(c.v as usize)));
        if points.len() != ring.len() {
            continue;
        }
        match splitter.split(&points) {
            Split::Fan => {}
            Split::Clipped => {
                for (triangle, ear) in fan.chunks_exact_mut(3).zip(&splitter.triangles) {
                    for (corner, &at) in triangle.iter_mut().zip(ear) {
                        *corner = ring[at];
                    }
                }
            }
            Split::SelfIntersecting => out.tally.self_intersecting_polygons.note(line),
            Split::TooManyCorners => out.tally.huge_concave_polygons.note(line),
        }
    }
}

/// What [`Splitter::split`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// The fan from the first corner is right: the face is convex, or flat, or has a corner
    /// that is not finite (its triangles are dropped later).
    Fan,
    /// The face is concave; [`Splitter::triangles`] holds its split.
    Clipped,
    /// The face crosses or overlaps itself: no split is right.
    SelfIntersecting,
    /// The face is concave, with more than [`MAX_EAR_CLIPPED_CORNERS`] corners.
    TooManyCorners,
}

/// How a corner turns, walking the face counter-clockwise in its plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Turn {
    /// Left: the corner can tip an ear.
    Convex,
    /// Right.
    Reflex,
    /// On, or within [`STRAIGHT`] of, the line through its neighbours, going on.
    Straight,
    /// On the line through its neighbours, turning back (a zero-width spike).
    Spike,
}

/// Ear clipping with its buffers kept from face to face.
#[derive(Debug, Default)]
pub struct Splitter {
    /// The corners projected into the face's plane, counter-clockwise.
    points: Vec<DVec2>,
    prev: Vec<usize>,
    next: Vec<usize>,
    turn: Vec<Turn>,
    removed: Vec<bool>,
    /// Corners that were not convex when last looked at: the only ones that can lie inside an
    /// ear of a simple polygon (the others are skipped when found convex since).
    not_convex: Vec<usize>,
    /// After [`Split::Clipped`]: corners - 2 triangles, as indices into the face's corners,
    /// each in the face's order (so with its winding).
    pub triangles: Vec<[usize; 3]>,
}

impl Splitter {
    /// Looks at one face (its corner positions in order) and splits it when it is concave.
    pub fn split(&mut self, face: &[Vec3]) -> Split {
        let n = face.len();
        if n < 4 || !face.iter().all(|p| p.is_finite()) {
            return Split::Fan;
        }
        if n == 4 && quad_fan_is_right([face[0], face[1], face[2], face[3]]) {
            return Split::Fan;
        }
        if !self.project(face) {
            return Split::Fan;
        }
        self.prev.clear();
        self.prev.extend((0..n).map(|i| (i + n - 1) % n));
        self.next.clear();
        self.next.extend((0..n).map(|i| (i + 1) % n));
        self.turn.clear();
        for i in 0..n {
            let turn = self.turn_at(i);
            self.turn.push(turn);
        }
        let concave = self
            .turn
            .iter()
            .any(|t| matches!(t, Turn::Reflex | Turn::Spike));
        if !concave {
            // Every corner turns left (or goes straight on): a convex face, unless it winds
            // round more than once, as a pentagram does (a quadrilateral cannot).
            return if n == 4 || self.winds_once() {
                Split::Fan
            } else {
                Split::SelfIntersecting
            };
        }
        if n > MAX_EAR_CLIPPED_CORNERS {
            return Split::TooManyCorners;
        }
        if self.clip() {
            Split::Clipped
        } else {
            Split::SelfIntersecting
        }
    }

    /// Projects the face into the plane of its largest area component, turned so that it runs
    /// counter-clockwise there. False when the face has no area in any plane.
    fn project(&mut self, face: &[Vec3]) -> bool {
        let origin = face[0].as_dvec3();
        let relative = |p: &Vec3| p.as_dvec3() - origin;
        // Twice the face's area vector: the sum of the cross products of consecutive corners.
        let mut area = DVec3::ZERO;
        for (i, p) in face.iter().enumerate() {
            area += relative(p).cross(relative(&face[(i + 1) % face.len()]));
        }
        let size = area.abs();
        let axis = if size.z >= size.x && size.z >= size.y {
            2
        } else if size.x >= size.y {
            0
        } else {
            1
        };
        if !area[axis].is_finite() || area[axis] == 0.0 {
            return false;
        }
        // (y, z), (z, x) and (x, y) keep the sign of the area along x, y and z; swapping the
        // two coordinates turns a clockwise projection counter-clockwise.
        let flip = area[axis] < 0.0;
        self.points.clear();
        self.points.extend(face.iter().map(|p| {
            let d = relative(p);
            let (u, v) = match axis {
                0 => (d.y, d.z),
                1 => (d.z, d.x),
                _ => (d.x, d.y),
            };
            if flip {
                DVec2::new(v, u)
            } else {
                DVec2::new(u, v)
            }
        }));
        true
    }

    /// How corner `i` turns between its nearest current neighbours that are elsewhere (a
    /// corner given twice in a row must not hide a reflex corner).
    fn turn_at(&self, i: usize) -> Turn {
        let b = self.points[i];
        let elsewhere = |step: &[usize]| {
            let mut j = step[i];
            for _ in 0..self.points.len() {
                if self.points[j] != b {
                    break;
                }
                j = step[j];
            }
            self.points[j]
        };
        let (a, c) = (elsewhere(&self.prev), elsewhere(&self.next));
        let (into, out) = (b - a, c - b);
        let cross = into.perp_dot(out);
        let scale = STRAIGHT * into.length() * out.length();
        if cross > scale {
            Turn::Convex
        } else if cross < -scale {
            Turn::Reflex
        } else if into.dot(out) >= 0.0 {
            Turn::Straight
        } else {
            Turn::Spike
        }
    }

    /// Whether a face whose corners all turn left winds round once (turns 2 pi in all).
    fn winds_once(&self) -> bool {
        let n = self.points.len();
        let total: f64 = (0..n)
            .map(|i| {
                let into = self.points[i] - self.points[(i + n - 1) % n];
                let out = self.points[(i + 1) % n] - self.points[i];
                into.perp_dot(out).atan2(into.dot(out))
            })
            .sum();
        // Whole turns only: 2 pi for a simple face, 4 pi or more for a star.
        total < 3.0 * std::f64::consts::PI
    }

    /// Ear clipping: cuts off a convex corner whose triangle holds no other corner, until three
    /// are left. When no such corner is left, a straight corner or a spike is cut (a triangle
    /// of no area, dropped later as degenerate); when none of those either, the face crosses
    /// itself. True when it split the face.
    fn clip(&mut self) -> bool {
        let n = self.points.len();
        self.removed.clear();
        self.removed.resize(n, false);
        self.not_convex.clear();
        self.not_convex
            .extend((0..n).filter(|&i| self.turn[i] != Turn::Convex));
        self.triangles.clear();
        let mut remaining = n;
        let mut at = 0;
        let mut tried = 0;
        let mut flat_ears = false;
        while remaining > 3 {
            let (prev, next) = (self.prev[at], self.next[at]);
            if self.is_ear(prev, at, next, flat_ears) {
                self.triangles.push([prev, at, next]);
                self.removed[at] = true;
                self.next[prev] = next;
                self.prev[next] = prev;
                remaining -= 1;
                for i in [prev, next] {
                    let turn = self.turn_at(i);
                    if turn != Turn::Convex && self.turn[i] == Turn::Convex {
                        self.not_convex.push(i);
                    }
                    self.turn[i] = turn;
                }
                let (removed, turn) = (&self.removed, &self.turn);
                self.not_convex
                    .retain(|&i| !removed[i] && turn[i] != Turn::Convex);
                at = next;
                tried = 0;
                flat_ears = false;
                continue;
            }
            at = next;
            tried += 1;
            if tried > remaining {
                if flat_ears {
                    return false;
                }
                flat_ears = true;
                tried = 0;
            }
        }
        self.triangles.push([self.prev[at], at, self.next[at]]);
        true
    }

    /// Whether the triangle (prev, at, next) can be cut off.
    fn is_ear(&self, prev: usize, at: usize, next: usize, flat_ears: bool) -> bool {
        let (a, b, c) = (self.points[prev], self.points[at], self.points[next]);
        if a == b || b == c {
            // A corner given twice in a row: cutting it leaves the outline as it was.
            return true;
        }
        match self.turn[at] {
            Turn::Convex => {}
            // Cutting a corner of no area leaves the outline's area as it was.
            Turn::Straight | Turn::Spike => return flat_ears,
            Turn::Reflex => return false,
        }
        !self.not_convex.iter().any(|&i| {
            let p = self.points[i];
            i != prev
                && i != next
                && self.turn[i] != Turn::Convex
                // A corner at the same place as one of the ear's (where a face touches itself)
                // does not block it.
                && p != a
                && p != b
                && p != c
                && inside_or_on(p, a, b, c)
        })
    }
}

/// The common case, quickly: a quadrilateral's fan (0 1 2) (0 2 3) is right when its two
/// triangles turn the same way (a reflex corner 1 or 3 folds one over the other; at 0 or 2 the
/// fan's diagonal is the right one). False for non-finite corners.
#[inline]
fn quad_fan_is_right(quad: [Vec3; 4]) -> bool {
    let [a, b, c, d] = quad.map(|p| p.as_dvec3());
    (b - a).cross(c - a).dot((c - a).cross(d - a)) > 0.0
}

/// Whether `p` lies inside the counter-clockwise triangle (a, b, c) or on its edges.
fn inside_or_on(p: DVec2, a: DVec2, b: DVec2, c: DVec2) -> bool {
    (b - a).perp_dot(p - a) >= 0.0
        && (c - b).perp_dot(p - b) >= 0.0
        && (a - c).perp_dot(p - c) >= 0.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn flat(points: &[(f32, f32)]) -> Vec<Vec3> {
        points.iter().map(|&(x, y)| Vec3::new(x, y, 0.0)).collect()
    }

    /// Twice the signed area of a face in the z = 0 plane.
    fn area2(points: &[Vec3]) -> f64 {
        let n = points.len();
        (0..n)
            .map(|i| {
                let (a, b) = (points[i].as_dvec3(), points[(i + 1) % n].as_dvec3());
                a.x * b.y - a.y * b.x
            })
            .sum()
    }

    /// The triangles a face ends up with: the fan, or the clipped split.
    fn triangles_of(face: &[Vec3]) -> (Split, Vec<[usize; 3]>) {
        let mut s = Splitter::default();
        let split = s.split(face);
        let triangles = match split {
            Split::Clipped => s.triangles.clone(),
            _ => (1..face.len() - 1).map(|i| [0, i, i + 1]).collect(),
        };
        (split, triangles)
    }

    /// Even-odd point-in-polygon, the brute-force reference.
    fn inside_polygon(p: DVec2, face: &[Vec3]) -> bool {
        let n = face.len();
        let mut inside = false;
        for i in 0..n {
            let (a, b) = (
                face[i].as_dvec3().truncate(),
                face[(i + 1) % n].as_dvec3().truncate(),
            );
            if (a.y > p.y) != (b.y > p.y) {
                let x = a.x + (p.y - a.y) / (b.y - a.y) * (b.x - a.x);
                if p.x < x {
                    inside = !inside;
                }
            }
        }
        inside
    }

    /// How many of the triangles hold `p` strictly inside (with a margin).
    fn covering(p: DVec2, face: &[Vec3], triangles: &[[usize; 3]]) -> Option<usize> {
        let mut count = 0;
        for t in triangles {
            let [a, b, c] = t.map(|i| face[i].as_dvec3().truncate());
            let area = (b - a).perp_dot(c - a);
            let sides = [
                (b - a).perp_dot(p - a),
                (c - b).perp_dot(p - b),
                (a - c).perp_dot(p - c),
            ];
            let scale = 1e-9 * area.abs().max(1e-30);
            if sides.iter().any(|s| s.abs() <= scale) {
                return None; // too close to an edge to say
            }
            if sides.iter().all(|&s| s > 0.0) || sides.iter().all(|&s| s < 0.0) {
                count += 1;
            }
        }
        Some(count)
    }

    /// Checks a split against the face by brute force: corners - 2 triangles, each turning the
    /// face's way, areas summing to the face's, and every sample point inside the face covered
    /// by exactly one triangle and every point outside by none.
    fn check_split(face: &[Vec3], triangles: &[[usize; 3]]) {
        check_split_within(face, triangles, 1e-9);
    }

    /// [`check_split`], a triangle turning the wrong way by less than `slack` of the face's
    /// area allowed (a sliver that rounding of the face's corners could flip).
    fn check_split_within(face: &[Vec3], triangles: &[[usize; 3]], slack: f64) {
        assert_eq!(triangles.len(), face.len() - 2);
        let total = area2(face);
        let mut sum = 0.0;
        for t in triangles {
            let tri: Vec<Vec3> = t.iter().map(|&i| face[i]).collect();
            let a = area2(&tri);
            assert!(
                a * total >= -slack * total * total,
                "triangle {t:?} turns the wrong way"
            );
            sum += a;
        }
        assert!(
            (sum - total).abs() <= 1e-6 * total.abs(),
            "areas {sum} vs {total}"
        );
        let (lo, hi) = face.iter().fold((Vec3::MAX, Vec3::MIN), |(lo, hi), p| {
            (lo.min(*p), hi.max(*p))
        });
        for i in 0..41 {
            for j in 0..41 {
                let p = DVec2::new(
                    lo.x as f64 + (hi.x - lo.x) as f64 * (i as f64 + 0.5) / 41.0,
                    lo.y as f64 + (hi.y - lo.y) as f64 * (j as f64 + 0.3) / 41.0,
                );
                if let Some(count) = covering(p, face, triangles) {
                    let want = usize::from(inside_polygon(p, face));
                    assert_eq!(count, want, "point {p} covered {count} times");
                }
            }
        }
    }

    #[test]
    fn convex_faces_keep_their_fan() {
        let square = flat(&[(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]);
        assert_eq!(triangles_of(&square).0, Split::Fan);
        let mut reversed = square.clone();
        reversed.reverse();
        assert_eq!(triangles_of(&reversed).0, Split::Fan);
        // A straight corner (a T-junction on an edge) is still convex.
        let with_straight = flat(&[(0.0, 0.0), (0.5, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]);
        assert_eq!(triangles_of(&with_straight).0, Split::Fan);
        let hexagon: Vec<Vec3> = (0..6)
            .map(|i| {
                let a = i as f32 * std::f32::consts::TAU / 6.0;
                Vec3::new(a.cos(), 0.5, a.sin())
            })
            .collect();
        assert_eq!(triangles_of(&hexagon).0, Split::Fan);
    }

    #[test]
    fn a_dart_is_split_from_its_reflex_corner() {
        // Reflex at corner 2: the fan's diagonal 0-2 is right; at corner 1 it is not.
        let dart = flat(&[(0.0, 0.0), (0.5, 0.3), (1.0, 0.0), (0.5, 1.0)]);
        let (split, triangles) = triangles_of(&dart);
        assert_eq!(split, Split::Clipped);
        check_split(&dart, &triangles);
        assert!(triangles.iter().all(|t| t.contains(&1)), "{triangles:?}");
        // Both windings, every rotation of the corners.
        for reverse in [false, true] {
            for shift in 0..4 {
                let mut face = dart.clone();
                if reverse {
                    face.reverse();
                }
                face.rotate_left(shift);
                let (split, triangles) = triangles_of(&face);
                assert_ne!(split, Split::SelfIntersecting);
                check_split(&face, &triangles);
            }
        }
    }

    #[test]
    fn an_l_shaped_wall_is_split_inside_its_outline() {
        let l = flat(&[
            (0.0, 0.0),
            (2.0, 0.0),
            (2.0, 1.0),
            (1.0, 1.0),
            (1.0, 2.0),
            (0.0, 2.0),
        ]);
        for shift in 0..6 {
            let mut face = l.clone();
            face.rotate_left(shift);
            let (split, triangles) = triangles_of(&face);
            // The fan from the reflex corner (1, 1) happens to be right.
            if face[0] != Vec3::new(1.0, 1.0, 0.0) {
                assert_eq!(split, Split::Clipped, "shift {shift}");
            }
            check_split(&face, &triangles);
        }
        // Standing up in the y-z plane, seen from -x: the same split in 3D, the winding kept.
        let wall: Vec<Vec3> = l.iter().map(|p| Vec3::new(3.0, p.y, p.x)).collect();
        let mut s = Splitter::default();
        assert_eq!(s.split(&wall), Split::Clipped);
        let normal = |t: [usize; 3]| (wall[t[1]] - wall[t[0]]).cross(wall[t[2]] - wall[t[0]]);
        for &t in &s.triangles {
            assert!(normal(t).x <= 0.0, "{t:?} flipped");
        }
    }

    #[test]
    fn self_crossing_faces_are_reported() {
        let pentagram: Vec<Vec3> = (0..5)
            .map(|i| {
                let a = (2 * i) as f32 * std::f32::consts::TAU / 5.0;
                Vec3::new(a.cos(), a.sin(), 0.0)
            })
            .collect();
        assert_eq!(triangles_of(&pentagram).0, Split::SelfIntersecting);
        // A bow tie has no area at all: its fan stays (and its triangles keep theirs).
        let bow_tie = flat(&[(0.0, 0.0), (1.0, 1.0), (1.0, 0.0), (0.0, 1.0)]);
        assert_eq!(triangles_of(&bow_tie).0, Split::Fan);
        // A figure eight with lobes of unequal size has area, and crosses itself.
        let eight = flat(&[(0.0, 0.0), (2.0, 2.0), (2.0, 0.0), (0.0, 1.0), (-0.5, 0.5)]);
        assert_eq!(triangles_of(&eight).0, Split::SelfIntersecting);
    }

    #[test]
    fn faces_without_area_or_with_non_finite_corners_keep_their_fan() {
        let line = flat(&[(0.0, 0.0), (1.0, 0.0), (2.0, 0.0), (3.0, 0.0)]);
        assert_eq!(triangles_of(&line).0, Split::Fan);
        let mut nan = flat(&[(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 1.0)]);
        nan[2].x = f32::NAN;
        assert_eq!(triangles_of(&nan).0, Split::Fan);
    }

    #[test]
    fn collinear_and_repeated_corners_in_a_concave_face() {
        // An L with extra corners along its edges, and one corner given twice.
        let face = flat(&[
            (0.0, 0.0),
            (1.0, 0.0),
            (2.0, 0.0),
            (2.0, 1.0),
            (1.5, 1.0),
            (1.0, 1.0),
            (1.0, 1.0),
            (1.0, 1.5),
            (1.0, 2.0),
            (0.0, 2.0),
            (0.0, 1.0),
        ]);
        let (split, triangles) = triangles_of(&face);
        assert_eq!(split, Split::Clipped);
        check_split(&face, &triangles);
    }

    #[test]
    fn a_face_with_a_hole_bridged_to_its_outline() {
        // A square with a square hole, joined by a cut of no width there and back: how
        // exporters write a face with a hole as one outline.
        let keyhole = flat(&[
            (0.0, 0.0),
            (4.0, 0.0),
            (4.0, 4.0),
            (0.0, 4.0),
            (0.0, 2.0),
            (1.0, 2.0),
            (1.0, 3.0),
            (3.0, 3.0),
            (3.0, 1.0),
            (1.0, 1.0),
            (1.0, 2.0),
            (0.0, 2.0),
        ]);
        for shift in 0..keyhole.len() {
            let mut face = keyhole.clone();
            face.rotate_left(shift);
            let (split, triangles) = triangles_of(&face);
            assert_eq!(split, Split::Clipped, "shift {shift}");
            check_split(&face, &triangles);
        }
    }

    #[test]
    fn huge_concave_faces_keep_their_fan() {
        let n = MAX_EAR_CLIPPED_CORNERS + 1;
        let face: Vec<Vec3> = (0..n)
            .map(|i| {
                let a = i as f32 * std::f32::consts::TAU / n as f32;
                let r = if i % 2 == 0 { 1.0 } else { 0.9 };
                Vec3::new(r * a.cos(), r * a.sin(), 0.0)
            })
            .collect();
        assert_eq!(triangles_of(&face).0, Split::TooManyCorners);
        let mut s = Splitter::default();
        assert_eq!(s.split(&face[..n - 1]), Split::Clipped);
        check_split(&face[..n - 1], &s.triangles);
    }

    /// A face in the z = 0 plane with a corner at each distance of `radii` from the origin,
    /// at increasing angles (evenly spaced, each moved on by its `jitter` of a step): simple,
    /// convex or not.
    fn star_shaped(radii: &[f32], jitter: &[f32]) -> Vec<Vec3> {
        let n = radii.len();
        radii
            .iter()
            .zip(jitter)
            .enumerate()
            .map(|(i, (r, j))| {
                let a = (i as f32 + j) * std::f32::consts::TAU / n as f32;
                Vec3::new(r * a.cos(), r * a.sin(), 0.0)
            })
            .collect()
    }

    proptest! {
        /// Star-shaped faces (corners at increasing angles round a centre, at any distance)
        /// are simple, convex or not: every split is checked against brute force.
        #[test]
        fn star_shaped_faces_split_exactly(
            radii in proptest::collection::vec(0.05f32..1.0, 4..40),
            jitter in proptest::collection::vec(0.0f32..0.9, 40),
            reverse: bool,
            shift in 0usize..40,
        ) {
            let n = radii.len();
            let mut face = star_shaped(&radii, &jitter);
            if reverse {
                face.reverse();
            }
            face.rotate_left(shift % n);
            let (split, triangles) = triangles_of(&face);
            prop_assert!(matches!(split, Split::Fan | Split::Clipped), "{split:?}");
            check_split(&face, &triangles);
        }

        /// The same faces turned to any orientation and moved away from the origin: the split
        /// is made in the plane the face mostly lies in, and must still be right for the face.
        #[test]
        fn faces_split_exactly_in_any_orientation(
            radii in proptest::collection::vec(0.05f32..1.0, 4..24),
            jitter in proptest::collection::vec(0.0f32..0.9, 24),
            axis in (-1.0f32..1.0, -1.0f32..1.0, -1.0f32..1.0),
            angle in 0.0f32..std::f32::consts::TAU,
            offset in (-100.0f32..100.0, -100.0f32..100.0, -100.0f32..100.0),
        ) {
            let face = star_shaped(&radii, &jitter);
            let axis = Vec3::new(axis.0, axis.1, axis.2).try_normalize().unwrap_or(Vec3::X);
            let turn = glam::Quat::from_axis_angle(axis, angle);
            let offset = Vec3::new(offset.0, offset.1, offset.2);
            let turned: Vec<Vec3> = face.iter().map(|&p| turn * p + offset).collect();
            let (split, triangles) = triangles_of(&turned);
            prop_assert!(matches!(split, Split::Fan | Split::Clipped), "{split:?}");
            // The turned corners are rounded to f32 (about 1e-5 at 100 units): a corner within
            // that of straight may turn either way, flipping a sliver of that size.
            check_split_within(&face, &triangles, 1e-5);
        }

        /// Skylines (columns of whole-number heights on a base): many reflex corners, straight
        /// corners along equal heights, and diagonals that graze other corners.
        #[test]
        fn skylines_split_exactly(
            heights in proptest::collection::vec(1u8..5, 2..30),
            reverse: bool,
            shift in 0usize..70,
        ) {
            let k = heights.len() as f32;
            let mut face = flat(&[(0.0, 0.0), (k, 0.0)]);
            for (i, &h) in heights.iter().enumerate().rev() {
                face.push(Vec3::new(i as f32 + 1.0, h as f32, 0.0));
                face.push(Vec3::new(i as f32, h as f32, 0.0));
            }
            if reverse {
                face.reverse();
            }
            let n = face.len();
            face.rotate_left(shift % n);
            let (split, triangles) = triangles_of(&face);
            prop_assert!(matches!(split, Split::Fan | Split::Clipped), "{split:?}");
            check_split(&face, &triangles);
        }
    }
}
