//! Hot groups replicated (after the multi-GPU data distribution seed: the data most used is
//! kept everywhere, the rest where it lies). A 1-spp prepass of the frame counts, on every
//! rank and per group, how often a ray had to travel for it: a segment forwarded to the rank
//! that found its hit in the group, a hit sent to the group's owner to be shaded. The ranks
//! exchange their counts, and every rank picks the same groups: the most used per byte,
//! while their bytes fit the budget (a share of the scene's group bytes). Those groups are
//! then held by every rank, and the domains' boxes no longer hold them.
//!
//! The image does not change: every split, replicated or not, gives the one-process image
//! bit for bit ([`crate::cpu::domains`]).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::message::{is_uses, Message};
use super::{render_rank, run_prepass, GeometryError, Intersector, Limits, RankScene, RankStats};
use crate::render::RenderSettings;
use crate::scene::domains::{Domains, GroupExtent};
use crate::scene::Scene;
use crate::sched::transport::{ChannelTransport, Transport, TransportError};
use crate::session::{Controls, NoControls};

/// What the prepass counted, summed over the ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Prepass {
    /// Per group: how often a ray traveled for it.
    pub uses: Vec<u64>,
    pub samples: u64,
    /// Path messages sent between ranks.
    pub hops: u64,
}

impl Prepass {
    pub fn forwarded_per_sample(&self) -> f64 {
        self.hops as f64 / self.samples.max(1) as f64
    }
}

/// Messages that arrived before their frame started, taken first.
pub type Early = VecDeque<(usize, Vec<u8>)>;

/// Runs the 1-spp prepass of `settings` on this rank, then sends its counts to every rank and
/// gathers theirs. Also returns what the next frame's faster ranks sent meanwhile.
pub fn prepass<T: Transport>(
    rank: (&RankScene, &dyn Intersector),
    settings: &RenderSettings,
    limits: &Limits,
    controls: &dyn Controls,
    transport: &mut T,
) -> Result<(Prepass, Early), GeometryError> {
    let one = RenderSettings {
        spp: 1,
        ..*settings
    };
    let (stats, uses, arrived) = run_prepass(rank, &one, limits, controls, transport)?;
    let mine = Prepass {
        uses,
        samples: stats.samples,
        hops: stats.shadow_hops + stats.segment_hops + stats.shade_hops,
    };
    exchange(mine, limits.silence, arrived, transport)
}

/// Sends `mine` to every other rank and adds up theirs, the counts that `arrived` during the
/// prepass first.
fn exchange<T: Transport>(
    mine: Prepass,
    silence: Duration,
    mut arrived: Early,
    transport: &mut T,
) -> Result<(Prepass, Early), GeometryError> {
    let (me, size) = (transport.rank(), transport.size());
    let failed = |source: TransportError| GeometryError::Transport { rank: me, source };
    let message = Message::Uses {
        samples: mine.samples,
        hops: mine.hops,
        uses: mine.uses.clone(),
    }
    .encode();
    for to in (0..size).filter(|&r| r != me) {
        transport.send(to, message.clone()).map_err(failed)?;
    }
    let mut from_rank = vec![false; size];
    from_rank[me] = true;
    let (mut sum, mut early, mut heard) = (mine, Early::new(), Instant::now());
    while from_rank.iter().any(|&got| !got) {
        let polled = match arrived.pop_front() {
            Some(m) => Some(m),
            None => transport.poll().map_err(failed)?,
        };
        let Some((from, bytes)) = polled else {
            if heard.elapsed() > silence {
                return Err(GeometryError::Silent {
                    rank: me,
                    seconds: heard.elapsed().as_secs_f64(),
                    waiting: (0..size).filter(|&r| !from_rank[r]).collect(),
                    finished: sum.samples,
                    owned: sum.samples,
                });
            }
            std::thread::sleep(Duration::from_micros(50));
            continue;
        };
        heard = Instant::now();
        if !is_uses(&bytes) || from >= size || from_rank[from] {
            early.push_back((from, bytes));
            continue;
        }
        let malformed = |reason: String| GeometryError::Malformed {
            rank: me,
            from,
            reason,
        };
        match Message::decode(&bytes, 1, 0) {
            Ok(Message::Uses {
                samples,
                hops,
                uses,
            }) if uses.len() == sum.uses.len() => {
                sum.samples += samples;
                sum.hops += hops;
                sum.uses.iter_mut().zip(uses).for_each(|(s, u)| *s += u);
                from_rank[from] = true;
            }
            Ok(_) => return Err(malformed("group uses for another scene".into())),
            Err(e) => return Err(malformed(e.to_string())),
        }
    }
    Ok((sum, early))
}

/// The groups to replicate: of those not replicated already, the most used per byte (ties
/// by index), each taken while the bytes taken stay within `budget`.
pub fn hot_groups(uses: &[u64], bytes: &[u64], replicated: &[bool], budget: u64) -> Vec<bool> {
    let mut candidates: Vec<usize> = (0..uses.len())
        .filter(|&g| !replicated[g] && uses[g] > 0)
        .collect();
    // uses[a] / bytes[a] > uses[b] / bytes[b], without division (a group of 0 bytes first).
    candidates.sort_by(|&a, &b| {
        let left = u128::from(uses[a]) * u128::from(bytes[b]);
        let right = u128::from(uses[b]) * u128::from(bytes[a]);
        right.cmp(&left).then(a.cmp(&b))
    });
    let mut hot = vec![false; uses.len()];
    let mut taken = 0u64;
    for g in candidates {
        if taken + bytes[g] <= budget {
            taken += bytes[g];
            hot[g] = true;
        }
    }
    hot
}

/// What the prepass decides: the hot groups, within `share` of the groups' `bytes`, and
/// `domains` with them replicated. Every rank computes the same from the same counts.
pub fn plan(
    prepass: &Prepass,
    bytes: &[u64],
    groups: &[GroupExtent],
    domains: &Domains,
    share: f64,
) -> (Vec<bool>, Domains) {
    let budget = (share * bytes.iter().sum::<u64>() as f64) as u64;
    let hot = hot_groups(&prepass.uses, bytes, &domains.replicated, budget);
    let replicated = replicating(domains, groups, &hot);
    (hot, replicated)
}

/// `domains` with the `hot` groups replicated too: each other group stays where it was.
pub fn replicating(domains: &Domains, groups: &[GroupExtent], hot: &[bool]) -> Domains {
    let replicated = (0..groups.len())
        .map(|g| domains.replicated[g] || hot[g])
        .collect();
    let cells = (domains.cell_of_group.clone(), domains.domain_of_cell());
    Domains::in_cells(groups, cells, replicated, domains.count())
}

/// What [`render_in_process_replicating`] gives: the image's sums, each rank's counts of
/// the frame, and the prepass's.
pub type Replicated = (Vec<[f32; 4]>, Vec<RankStats>, Prepass);

/// [`super::render_in_process`] with the hot groups replicated after the prepass, up to
/// `share` of the scene's group bytes: the steps of a render under mpirun, each rank taking
/// its groups from `whole`. Returns the image's sums, each rank's counts of the frame, and
/// the prepass's.
pub fn render_in_process_replicating(
    whole: &Scene,
    settings: &RenderSettings,
    ranks: usize,
    limits: &Limits,
    share: f64,
) -> Result<Replicated, GeometryError> {
    let bytes: Vec<u64> = whole.groups.iter().map(|g| g.heap_bytes()).collect();
    let extents = Domains::extents_of(whole);
    let rank = |r: usize, mut t: ChannelTransport| {
        let first = RankScene::of(whole, ranks, r);
        let (prepass, early) = prepass(
            (&first, &first.geometry),
            settings,
            limits,
            &NoControls::default(),
            &mut t,
        )?;
        let (_, domains) = plan(&prepass, &bytes, &extents, &first.domains, share);
        drop(first);
        let scene = RankScene::with_domains(whole, domains, r);
        let mut t = WithEarly {
            inner: &mut t,
            early,
        };
        let outcome = render_rank(&scene, settings, limits, &NoControls::default(), &mut t)?;
        match outcome.cut_short {
            Some(e) => Err(e),
            None => Ok((outcome, prepass)),
        }
    };
    let transports = ChannelTransport::create(ranks);
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = transports
            .into_iter()
            .enumerate()
            .map(|(r, t)| s.spawn(move || rank(r, t)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let (mut image, mut stats, mut first) = (None, Vec::new(), Prepass::default());
    for result in results {
        let (outcome, prepass) = result?;
        image = image.or(outcome.image);
        stats.push(outcome.stats);
        first = prepass;
    }
    Ok((image.unwrap_or_default(), stats, first))
}

/// A transport whose first messages are those that came early ([`prepass`]).
pub struct WithEarly<'a, T: Transport> {
    pub inner: &'a mut T,
    pub early: Early,
}

impl<T: Transport> Transport for WithEarly<'_, T> {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn host(&self) -> String {
        self.inner.host()
    }
    fn local_ranks(&self) -> usize {
        self.inner.local_ranks()
    }
    fn send(&mut self, to: usize, bytes: Vec<u8>) -> Result<(), TransportError> {
        self.inner.send(to, bytes)
    }
    fn poll(&mut self) -> Result<Option<(usize, Vec<u8>)>, TransportError> {
        match self.early.pop_front() {
            Some(m) => Ok(Some(m)),
            None => self.inner.poll(),
        }
    }
    fn flush(&mut self, timeout: Duration) -> Result<(), TransportError> {
        self.inner.flush(timeout)
    }
    fn abort(&mut self, message: &str) {
        self.inner.abort(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_groups_are_the_most_used_per_byte_within_the_budget() {
        let uses = [10, 0, 50, 30, 30, 5];
        let bytes = [100, 10, 100, 300, 60, 1];
        let replicated = [false, false, false, false, false, true];
        // 1 is unused, 5 replicated already.
        // Per byte 2 and 4 tie (0.5; by index), then 0 and 3 (0.1).
        let hot = hot_groups(&uses, &bytes, &replicated, 260);
        assert_eq!(hot, [true, false, true, false, true, false]);
        let hot = hot_groups(&uses, &bytes, &replicated, 200);
        assert_eq!(hot, [false, false, true, false, true, false]);
        // A group that does not fit is passed over for a smaller one after it.
        let hot = hot_groups(&uses, &bytes, &replicated, 110);
        assert_eq!(hot, [false, false, true, false, false, false]);
        let hot = hot_groups(&uses, &bytes, &replicated, 70);
        assert_eq!(hot, [false, false, false, false, true, false]);
        assert!(hot_groups(&uses, &bytes, &replicated, 0)
            .iter()
            .all(|&h| !h));
        // Never over the budget, whatever it is, and never a group nobody used.
        for budget in 0..700 {
            let hot = hot_groups(&uses, &bytes, &replicated, budget);
            let taken: u64 = (0..6).filter(|&g| hot[g]).map(|g| bytes[g]).sum();
            assert!(taken <= budget);
            assert!(!hot[1] && !hot[5]);
        }
    }
}
