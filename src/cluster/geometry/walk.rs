//! A path taken as far as one rank can take it ([`Walker::follow`]): its shadow ray and
//! segments tested against what the rank holds, its hits shaded where the rank may shade
//! them, until it must travel to another rank or ends. It reads the rank's scene only, so a
//! rank walks many paths at once on its threads.

use crate::cpu::bvh::{Hit, RayData};
use crate::cpu::domains::TopLevel;
use crate::cpu::integrator::PathTracer;

use super::message::{PathMessage, Query};
use super::{GeometryError, RankScene};

/// Where a walk left a path.
pub enum Walked {
    /// To rank `.0`, to go on there.
    Send(usize, PathMessage),
    /// Its radiance is final.
    Ended(PathMessage),
}

/// What a rank needs to walk paths: its scene and the path tracer over it.
pub struct Walker<'a> {
    pub me: usize,
    pub scene: &'a RankScene,
    pub tracer: PathTracer<'a>,
}

impl Walker<'_> {
    /// What a path does next from this rank: its shadow ray, its next segment, or nothing
    /// (a segment query without a ray: [`Walker::follow`] ends the path).
    pub fn next_query(&self, state: &crate::cpu::integrator::PathState) -> Query {
        let start = self.me as u32;
        if state.shadow.is_some() {
            Query::Shadow { start, next: 0 }
        } else {
            Query::Segment {
                start,
                next: 0,
                best: None,
            }
        }
    }

    /// Takes a path (from rank `from`) as far as this rank can: until it must go to another
    /// rank, or ends. Also the groups rays traveled for on the way ([`super::replicate`]).
    pub fn follow(
        &self,
        mut path: PathMessage,
        from: usize,
    ) -> Result<(Walked, Vec<u32>), GeometryError> {
        let mut uses = Vec::new();
        loop {
            let hit = match path.query {
                Query::Shadow { start, next } => {
                    let Some(to) = self.test_shadow(&mut path, start, next)? else {
                        path.query = self.next_query(&path.state);
                        continue;
                    };
                    return Ok((Walked::Send(to, path), uses));
                }
                Query::Segment { start, next, best } => {
                    let Some((o, d)) = path.state.ray else {
                        return Ok((Walked::Ended(path), uses));
                    };
                    let Some(ray) = RayData::new(o, d) else {
                        path.state.ray = None;
                        return Ok((Walked::Ended(path), uses));
                    };
                    match self.test_segment(&ray, start, next, best, &mut uses) {
                        Ok(hit) => hit,
                        Err((to, query)) => {
                            path.query = query;
                            return Ok((Walked::Send(to, path), uses));
                        }
                    }
                }
                Query::Shade { hit } => Some(hit),
            };
            if let Some(hit) = hit {
                match self.owner_of(&hit, from)? {
                    Some(owner) if owner != self.me => {
                        uses.push(hit.group);
                        path.query = Query::Shade { hit };
                        return Ok((Walked::Send(owner, path), uses));
                    }
                    _ => self.check_held(&hit, from)?,
                }
            }
            self.tracer.advance(&mut path.state, hit);
            path.query = self.next_query(&path.state);
        }
    }

    /// The rank that shades hits on `hit`'s group (`None`: any); an error for a group the
    /// scene does not have (a message from `from` that went wrong).
    fn owner_of(&self, hit: &Hit, from: usize) -> Result<Option<usize>, GeometryError> {
        let g = hit.group as usize;
        if g >= self.scene.domains.of_group.len() {
            return Err(self.malformed(from, format!("a hit on group {g}, which is not there")));
        }
        Ok(self.scene.domains.owner(g))
    }

    /// An error unless this rank holds `hit`'s triangle, to shade it.
    fn check_held(&self, hit: &Hit, from: usize) -> Result<(), GeometryError> {
        let groups = &self.scene.geometry.scene.groups;
        let held = groups
            .get(hit.group as usize)
            .is_some_and(|g| (hit.prim as usize) < g.triangle_count());
        if held {
            return Ok(());
        }
        let reason = format!(
            "a hit on triangle {} of group {} to shade, which this rank does not hold",
            hit.prim, hit.group
        );
        Err(self.malformed(from, reason))
    }

    /// Tests the path's shadow ray here: where it is blocked, or no other domain is left to
    /// test it, settles it and returns `None`; else the rank to test it next.
    fn test_shadow(
        &self,
        path: &mut PathMessage,
        start: u32,
        next: u32,
    ) -> Result<Option<usize>, GeometryError> {
        let Some(pending) = path.state.shadow else {
            return Err(self.malformed(self.me, "a shadow query without a shadow ray".into()));
        };
        let r = pending.ray;
        let Some(ray) = RayData::new(r.origin, r.dir) else {
            path.state.settle_shadow(true);
            return Ok(None);
        };
        let blocked = self.scene.geometry.occluded(&ray, 0.0, r.tmax);
        if !blocked {
            if let Some((i, to)) = self.next_visit(&ray, (0.0, r.tmax), start, next, None) {
                path.query = Query::Shadow {
                    start,
                    next: i as u32 + 1,
                };
                return Ok(Some(to));
            }
        }
        path.state.settle_shadow(blocked);
        Ok(None)
    }

    /// Tests a segment here, given the best hit so far: `Ok` with the closest hit of the
    /// whole scene when no other domain can beat it, else the rank to go to and the query.
    fn test_segment(
        &self,
        ray: &RayData,
        start: u32,
        next: u32,
        best: Option<Hit>,
        uses: &mut Vec<u32>,
    ) -> Result<Option<Hit>, (usize, Query)> {
        let found = self.scene.geometry.closest(ray, 0.0, best);
        if start as usize != self.me && found != best {
            uses.extend(found.map(|h| h.group));
        }
        let best = found;
        match self.next_visit(ray, (0.0, f32::INFINITY), start, next, best.as_ref()) {
            Some((i, to)) => Err((
                to,
                Query::Segment {
                    start,
                    next: i as u32 + 1,
                    best,
                },
            )),
            None => Ok(best),
        }
    }

    /// The next domain (its position in the visit list, and its rank) that the ray enters
    /// and that may beat `best`, from position `next` of the domains it enters less `start`.
    fn next_visit(
        &self,
        ray: &RayData,
        (tmin, tmax): (f32, f32),
        start: u32,
        next: u32,
        best: Option<&Hit>,
    ) -> Option<(usize, usize)> {
        self.scene
            .top
            .visits(ray, tmin, tmax)
            .into_iter()
            .filter(|&(_, d)| d != start)
            .enumerate()
            .skip(next as usize)
            .find(|&(_, (entry, _))| TopLevel::may_beat(entry, best))
            .map(|(i, (_, d))| (i, d as usize))
    }

    fn malformed(&self, from: usize, reason: String) -> GeometryError {
        GeometryError::Malformed {
            rank: self.me,
            from,
            reason,
        }
    }
}
