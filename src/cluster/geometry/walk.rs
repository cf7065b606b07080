//! Paths taken as far as one rank can take them ([`Walker::walk`]): their shadow rays and
//! segments tested against what the rank holds, their hits shaded where the rank may shade
//! them, until each must travel to another rank or ends. A batch of paths goes step by step:
//! every path up to its next test, then all those tests at once ([`Intersector`]: the CPU BVH
//! on the rank's threads, or one launch on a GPU), then every path on from its answer.

use rayon::prelude::*;

use crate::cpu::bvh::{Hit, RayData};
use crate::cpu::domains::{DomainGeometry, TopLevel};
use crate::cpu::integrator::PathTracer;

use super::message::{PathMessage, Query, FROM_CAMERA};
use super::{GeometryError, RankScene};

/// Where a walk left a path.
pub enum Walked {
    /// To rank `.0`, to go on there.
    Send(usize, PathMessage),
    /// Its radiance is final.
    Ended(PathMessage),
}

/// A ray to test against what a rank holds, from `t = 0`.
#[derive(Clone, Copy, Debug)]
pub enum Test {
    /// The closest hit with `0 < t` that precedes `best` ([`Hit::precedes`]), or `best`.
    Closest { ray: RayData, best: Option<Hit> },
    /// Whether anything lies on the ray with `0 < t < tmax`.
    Occluded { ray: RayData, tmax: f32 },
}

/// A [`Test`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answer {
    Closest(Option<Hit>),
    Occluded(bool),
}

/// What answers a rank's tests: its domain's acceleration structure.
pub trait Intersector: Sync {
    /// One answer per test, in order; an error names what failed (a GPU's launch).
    fn answer(&self, tests: &[Test]) -> Result<Vec<Answer>, String>;

    /// The CPU BVH, where it answers: then the walk takes each path on its own thread from
    /// test to test, which on a CPU is faster than gathering each step's tests.
    fn cpu(&self) -> Option<&DomainGeometry> {
        None
    }
}

/// The CPU BVH: the tests in parallel on the rank's threads.
impl Intersector for DomainGeometry {
    fn answer(&self, tests: &[Test]) -> Result<Vec<Answer>, String> {
        Ok(tests
            .par_iter()
            .map(|test| answer_on_cpu(self, test))
            .collect())
    }

    fn cpu(&self) -> Option<&DomainGeometry> {
        Some(self)
    }
}

fn answer_on_cpu(geometry: &DomainGeometry, test: &Test) -> Answer {
    match *test {
        Test::Closest { ray, best } => Answer::Closest(geometry.closest(&ray, 0.0, best)),
        Test::Occluded { ray, tmax } => Answer::Occluded(geometry.occluded(&ray, 0.0, tmax)),
    }
}

/// What a walk counted of a path.
#[derive(Debug, Default)]
pub struct Counted {
    /// The groups rays traveled for ([`super::replicate`]).
    pub uses: Vec<u32>,
    /// The segments shaded here: the group each left and the group it hit
    /// ([`super::reassign`]).
    pub segments: Vec<(u32, u32)>,
}

/// A path on its way through this rank: where it came from, and what the walk counted.
struct Walking {
    path: PathMessage,
    from: usize,
    counted: Counted,
    /// The rank it must go to, once an answer said so.
    to: Option<usize>,
}

impl Walking {
    fn new((from, path): (usize, PathMessage)) -> Walking {
        Walking {
            path,
            from,
            counted: Counted::default(),
            to: None,
        }
    }

    /// Where the walk left it: sent to `to`, or ended.
    fn left(self, to: Option<usize>) -> (Walked, Counted) {
        let path = match to {
            Some(to) => Walked::Send(to, self.path),
            None => Walked::Ended(self.path),
        };
        (path, self.counted)
    }
}

/// What a path needs next on this rank.
enum Step {
    Test(Test),
    Send(usize),
    Ended,
}

/// What a rank needs to walk paths: its scene, the path tracer over it, and what answers its
/// tests.
pub struct Walker<'a> {
    pub me: usize,
    pub scene: &'a RankScene,
    pub tracer: PathTracer<'a>,
    pub domain: &'a dyn Intersector,
}

impl Walker<'_> {
    /// What a path does next from this rank: its shadow ray, its next segment, or nothing
    /// (a segment query without a ray: the walk ends the path).
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

    /// Takes each `(from, path)` as far as this rank can: until it must go to another rank,
    /// or ends. Returns, in the batch's order, where each was left and the groups rays
    /// traveled for on the way. On the CPU each path goes alone on the rank's threads; else
    /// the batch goes step by step, each step's tests answered together.
    pub fn walk(
        &self,
        batch: Vec<(usize, PathMessage)>,
    ) -> Result<Vec<(Walked, Counted)>, GeometryError> {
        if let Some(cpu) = self.domain.cpu() {
            return batch
                .into_par_iter()
                .map(|path| self.follow(cpu, Walking::new(path)))
                .collect();
        }
        let mut walking: Vec<Option<Walking>> =
            batch.into_iter().map(|p| Some(Walking::new(p))).collect();
        let mut walked: Vec<Option<(Walked, Counted)>> = walking.iter().map(|_| None).collect();
        loop {
            let steps: Vec<Option<Step>> = walking
                .par_iter_mut()
                .map(|w| w.as_mut().map(|w| self.step(w)).transpose())
                .collect::<Result<_, _>>()?;
            let mut tests = Vec::new();
            for (i, step) in steps.into_iter().enumerate() {
                let to = match step {
                    None => continue,
                    Some(Step::Test(test)) => {
                        tests.push((i, test));
                        continue;
                    }
                    Some(Step::Send(to)) => Some(to),
                    Some(Step::Ended) => None,
                };
                walked[i] = walking[i].take().map(|w| w.left(to));
            }
            if tests.is_empty() {
                return Ok(walked.into_iter().flatten().collect());
            }
            self.answer(&mut walking, &tests)?;
        }
    }

    /// One path from test to test, each answered by the CPU BVH at once.
    fn follow(
        &self,
        cpu: &DomainGeometry,
        mut w: Walking,
    ) -> Result<(Walked, Counted), GeometryError> {
        loop {
            match self.step(&mut w)? {
                Step::Test(test) => self.answered(&mut w, test, answer_on_cpu(cpu, &test))?,
                Step::Send(to) => return Ok(w.left(Some(to))),
                Step::Ended => return Ok(w.left(None)),
            }
        }
    }

    /// Answers `tests` (path index, test) together and takes each path on from its answer.
    fn answer(
        &self,
        walking: &mut [Option<Walking>],
        tests: &[(usize, Test)],
    ) -> Result<(), GeometryError> {
        let only: Vec<Test> = tests.iter().map(|&(_, t)| t).collect();
        let answers = self
            .domain
            .answer(&only)
            .map_err(|reason| GeometryError::Tests {
                rank: self.me,
                reason,
            })?;
        if answers.len() != tests.len() {
            let reason = format!("{} answers to {} tests", answers.len(), tests.len());
            return Err(GeometryError::Tests {
                rank: self.me,
                reason,
            });
        }
        let mut due: Vec<Option<(Test, Answer)>> = vec![None; walking.len()];
        for (&(i, test), answer) in tests.iter().zip(answers) {
            due[i] = Some((test, answer));
        }
        walking
            .par_iter_mut()
            .zip(due)
            .try_for_each(|(w, due)| match (w.as_mut(), due) {
                (Some(w), Some((test, answer))) => self.answered(w, test, answer),
                _ => Ok(()),
            })
    }

    /// Takes the path up to its next test here, or out: sent on, or ended.
    fn step(&self, w: &mut Walking) -> Result<Step, GeometryError> {
        if let Some(to) = w.to {
            return Ok(Step::Send(to));
        }
        loop {
            match w.path.query {
                Query::Shadow { .. } => {
                    let Some(pending) = w.path.state.shadow else {
                        let reason = "a shadow query without a shadow ray".into();
                        return Err(self.malformed(self.me, reason));
                    };
                    let r = pending.ray;
                    if let Some(ray) = RayData::new(r.origin, r.dir) {
                        return Ok(Step::Test(Test::Occluded { ray, tmax: r.tmax }));
                    }
                    w.path.state.settle_shadow(true);
                    w.path.query = self.next_query(&w.path.state);
                }
                Query::Segment { best, .. } => {
                    let Some((o, d)) = w.path.state.ray else {
                        return Ok(Step::Ended);
                    };
                    let Some(ray) = RayData::new(o, d) else {
                        w.path.state.ray = None;
                        return Ok(Step::Ended);
                    };
                    return Ok(Step::Test(Test::Closest { ray, best }));
                }
                Query::Shade { hit } => {
                    if let Some(to) = self.shade(w, Some(hit))? {
                        return Ok(Step::Send(to));
                    }
                }
            }
        }
    }

    /// Takes the path on from this rank's answer to its test: its shadow ray settled, or due
    /// at the next domain it enters; its segment's best hit due at the next domain that may
    /// beat it, or shaded here (or due at the rank that shades it).
    fn answered(&self, w: &mut Walking, test: Test, answer: Answer) -> Result<(), GeometryError> {
        w.to = match (w.path.query, test, answer) {
            (Query::Shadow { start, next }, Test::Occluded { ray, tmax }, Answer::Occluded(b)) => {
                self.after_shadow(&mut w.path, &ray, (start, next, tmax), b)
            }
            (
                Query::Segment { start, next, best },
                Test::Closest { ray, .. },
                Answer::Closest(found),
            ) => {
                if start as usize != self.me && found != best {
                    w.counted.uses.extend(found.map(|h| h.group));
                }
                match self.next_visit(&ray, (0.0, f32::INFINITY), start, next, found.as_ref()) {
                    Some((i, to)) => {
                        let next = i as u32 + 1;
                        w.path.query = Query::Segment {
                            start,
                            next,
                            best: found,
                        };
                        Some(to)
                    }
                    None => self.shade(w, found)?,
                }
            }
            _ => {
                let reason = format!("the answer {answer:?} to a query of another kind");
                return Err(GeometryError::Tests {
                    rank: self.me,
                    reason,
                });
            }
        };
        Ok(())
    }

    /// A shadow ray this rank found blocked or not: settled, or the rank to test it next.
    fn after_shadow(
        &self,
        path: &mut PathMessage,
        ray: &RayData,
        (start, next, tmax): (u32, u32, f32),
        blocked: bool,
    ) -> Option<usize> {
        if !blocked {
            if let Some((i, to)) = self.next_visit(ray, (0.0, tmax), start, next, None) {
                let next = i as u32 + 1;
                path.query = Query::Shadow { start, next };
                return Some(to);
            }
        }
        path.state.settle_shadow(blocked);
        path.query = self.next_query(&path.state);
        None
    }

    /// Shades the path's segment's closest hit (`None`: it escaped) here, or returns the rank
    /// that owns the hit's group, to shade it there.
    fn shade(&self, w: &mut Walking, hit: Option<Hit>) -> Result<Option<usize>, GeometryError> {
        if let Some(hit) = hit {
            match self.owner_of(&hit, w.from)? {
                Some(owner) if owner != self.me => {
                    w.counted.uses.push(hit.group);
                    w.path.query = Query::Shade { hit };
                    return Ok(Some(owner));
                }
                _ => self.check_held(&hit, w.from)?,
            }
            let left = w.path.left;
            if left != FROM_CAMERA {
                if left as usize >= self.scene.domains.of_group.len() {
                    let reason = format!("a segment from group {left}, which is not there");
                    return Err(self.malformed(w.from, reason));
                }
                w.counted.segments.push((left, hit.group));
            }
            w.path.left = hit.group;
        }
        self.tracer.advance(&mut w.path.state, hit);
        w.path.query = self.next_query(&w.path.state);
        Ok(None)
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
