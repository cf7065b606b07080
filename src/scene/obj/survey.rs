//! The first reading of a file whose groups are spread over ranks: every group is built,
//! measured and freed, so that each rank can split the scene into domains the same way
//! ([`crate::scene::domains`]) and then read the file again keeping only its own groups
//! ([`super::load_obj_part`]). Its peak memory is the file's vertex pools and the groups of
//! the groups being built, never the whole scene.

use super::assemble::{Assembled, DEFAULT_MATERIAL};
use super::parse::Counts;
use super::{empty_detail, mtl, out_of_scale_note, LoadError};
use crate::scene::domains::GroupExtent;
use crate::scene::Bounds;
use crate::wording::counted;

/// What the whole scene holds, as far as splitting it, naming it and checking it need.
#[derive(Clone, Debug)]
pub struct Survey {
    pub groups: Vec<GroupSurvey>,
    /// The box of every triangle: [`crate::scene::Scene::bounds`] of the whole scene.
    pub bounds: Bounds,
    /// The bytes of the file's `v`, `vt` and `vn` pools, which every reading holds until its
    /// groups are built.
    pub pool_bytes: u64,
    /// The whole scene's warnings about its groups (normals), in group order.
    pub(super) group_warnings: Vec<String>,
    pub(super) non_finite_dropped: usize,
    pub(super) degenerate_dropped: usize,
    pub(super) out_of_scale_dropped: usize,
}

/// One group of the whole scene.
#[derive(Clone, Debug)]
pub struct GroupSurvey {
    pub name: String,
    pub extent: GroupExtent,
    /// Whether a face of it has an emissive material: it holds lights.
    pub emitting: bool,
    /// Its part of the scene's content hash ([`crate::scene::content_hash::group_hash`]).
    pub hash: u64,
    /// The bytes its arrays take, loaded.
    pub bytes: u64,
    pub(super) has_uvs: bool,
    /// The materials its faces use, each once, in the order of first use, before the
    /// degenerate triangles are dropped (as the loader's checks see them).
    pub(super) materials: Vec<u32>,
}

impl Survey {
    /// What [`crate::scene::domains::Domains::split`] needs of each group.
    pub fn extents(&self) -> Vec<GroupExtent> {
        self.groups.iter().map(|g| g.extent).collect()
    }

    /// Which groups hold lights.
    pub fn emitting(&self) -> Vec<bool> {
        self.groups.iter().map(|g| g.emitting).collect()
    }

    pub fn triangle_count(&self) -> u64 {
        self.groups.iter().map(|g| g.extent.triangles).sum()
    }

    /// "8 groups, 32 triangles", as [`crate::scene::Scene::size_text`] says it.
    pub fn size_text(&self) -> String {
        format!(
            "{}, {}",
            counted(self.groups.len(), "group", "groups"),
            counted(self.triangle_count() as usize, "triangle", "triangles")
        )
    }
}

/// The survey of an assembled file ([`super::assemble::Mode::Survey`]), or the error a whole
/// load of it gives when it holds no triangle.
pub(super) fn into_survey(
    path: &std::path::Path,
    assembled: Assembled,
    counts: Counts,
) -> Result<Survey, LoadError> {
    let libraries = &assembled.libraries;
    let emissive: Vec<bool> = libraries
        .materials
        .iter()
        .zip(&libraries.sources)
        .map(|(m, source)| mtl::convert(m, &mut Vec::new(), source).is_emissive())
        .collect();
    // Where the whole load puts the default material, when a face uses it.
    let default_index = emissive.len() as u32;
    let mut survey = Survey {
        groups: Vec::with_capacity(assembled.groups.len()),
        bounds: Bounds::EMPTY,
        pool_bytes: counts.v * 12 + counts.vt * 8 + counts.vn * 12,
        group_warnings: assembled.group_warnings,
        non_finite_dropped: assembled.non_finite_dropped,
        degenerate_dropped: 0,
        out_of_scale_dropped: 0,
    };
    for (group, summary) in assembled.groups.into_iter().zip(assembled.summaries) {
        let resolve = |m: u32| {
            if m == DEFAULT_MATERIAL {
                default_index
            } else {
                m
            }
        };
        // The face materials' field, as `Fnv::field` hashes the resolved array.
        let mut h = summary.head;
        h.bytes(&(summary.triangles * 4).to_le_bytes());
        let mut emitting = false;
        for &(m, n) in &summary.material_runs {
            let m = resolve(m);
            for _ in 0..n {
                h.bytes(&m.to_ne_bytes());
            }
            emitting |= emissive.get(m as usize) == Some(&true);
        }
        survey.bounds = survey.bounds.union(&summary.bounds);
        survey.degenerate_dropped += summary.degenerate_dropped;
        survey.out_of_scale_dropped += summary.out_of_scale_dropped;
        survey.groups.push(GroupSurvey {
            name: group.name,
            extent: GroupExtent {
                bounds: summary.bounds,
                triangles: summary.triangles,
            },
            emitting,
            hash: h.finish(),
            bytes: summary.bytes,
            has_uvs: summary.has_uvs,
            materials: summary.materials_used.iter().map(|&m| resolve(m)).collect(),
        });
    }
    if survey.triangle_count() == 0 {
        return Err(LoadError::Empty {
            path: path.to_path_buf(),
            detail: empty_detail(
                &assembled.tally,
                counts.v,
                assembled.triangles_parsed,
                survey.non_finite_dropped,
                survey.degenerate_dropped,
            ) + &out_of_scale_note(survey.out_of_scale_dropped),
        });
    }
    Ok(survey)
}
