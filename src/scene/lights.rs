//! Which way the area lights face, so that a light modelled with the wrong winding is reported
//! rather than rendered black.
//!
//! Only the front face of an area light emits (the side of the winding's normal
//! `(p1 - p0) x (p2 - p0)`; see [`Scene::two_sided_lights`]). A light whose front face looks
//! away from the rest of the scene lights nothing, and one that faces only a surface just
//! behind it (a ceiling lamp wound upwards, 0.5 units under the ceiling) lights a thin gap.
//! Both are detected cheaply, from bounding boxes, never by tracing rays:
//!
//! - the *reach* of an emissive triangle is how far in front of its plane the other surfaces
//!   extend: the largest `n . (c - p0)` over the corners `c` of the bounding boxes of the
//!   non-emissive triangles (one box per group, or one box for the whole scene when there are
//!   too many lights times groups to test each pair). A box over-covers its triangles, so the
//!   reach is an upper bound: a triangle reported as facing away really does;
//! - reach `<= 0`: the triangle *faces away from every other surface*;
//! - reach below [`NEAR_FRACTION`] of the scene's diagonal: it faces only surfaces *just
//!   behind it* (reported, since the light then mostly lights a gap).

use rayon::prelude::*;
use serde::Serialize;

use super::{Bounds, Group, Scene};

/// A triangle whose front faces only surfaces closer to its plane than this fraction of the
/// scene's diagonal is reported as facing a gap.
pub const NEAR_FRACTION: f32 = 0.01;

/// Above this many (emissive triangle, group) pairs the reach is measured against the whole
/// scene's box instead of each group's: linear in the lights, still an upper bound.
const PAIR_BUDGET: usize = 4_000_000;

/// The six directions a normal is binned into: its largest component, with its sign.
pub const AXES: [&str; 6] = ["+X", "-X", "+Y", "-Y", "+Z", "-Z"];

/// The emissive triangles of one (group, material) pair: one light as the OBJ models it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LightFacing {
    pub group: String,
    pub material: String,
    pub triangles: usize,
    /// Total area, in scene units squared.
    pub area: f64,
    /// How many triangles face each way, by the dominant axis of the front normal, in the
    /// order of [`AXES`]: `+X, -X, +Y, -Y, +Z, -Z`.
    pub facing: [usize; 6],
    /// Triangles whose front faces at least one other surface further than the near limit.
    pub toward_scene: usize,
    /// Triangles whose front faces only surfaces within the near limit of their plane.
    pub toward_gap_only: usize,
    /// Triangles whose front faces no other surface at all.
    pub away_from_everything: usize,
}

impl LightFacing {
    /// "2 face -Y", "1 faces +X, 3 face -Z".
    pub fn facing_text(&self) -> String {
        let parts: Vec<String> = AXES
            .iter()
            .zip(self.facing)
            .filter(|(_, n)| *n > 0)
            .map(|(axis, n)| format!("{n} {} {axis}", if n == 1 { "faces" } else { "face" }))
            .collect();
        parts.join(", ")
    }

    /// The dominant facings, for messages: "+Y" or "+Y/-Z".
    fn main_axes(&self) -> String {
        let parts: Vec<&str> = AXES
            .iter()
            .zip(self.facing)
            .filter(|(_, n)| *n > 0)
            .map(|(axis, _)| *axis)
            .collect();
        parts.join("/")
    }
}

/// The index into [`AXES`] of a normal's dominant direction.
pub fn axis_of(n: glam::Vec3) -> usize {
    let a = n.abs();
    let axis = if a.x >= a.y && a.x >= a.z {
        0
    } else if a.y >= a.z {
        1
    } else {
        2
    };
    2 * axis + usize::from(n[axis] < 0.0)
}

/// The largest `n . (c - p)` over the corners `c` of `b` (`-inf` for an empty box).
fn reach_into(b: &Bounds, p: glam::Vec3, n: glam::Vec3) -> f32 {
    if b.is_empty() {
        return f32::NEG_INFINITY;
    }
    let center = b.center();
    let half = b.diagonal() * 0.5;
    n.dot(center - p) + n.abs().dot(half)
}

/// What [`light_facing`] measured: every light and which way it faces, and the box of the
/// whole scene, which the same pass over the triangles yields (callers that also report the
/// scene's extent, like `info`, take it from here instead of measuring the scene again).
#[derive(Clone, Debug, PartialEq)]
pub struct LightSurvey {
    pub lights: Vec<LightFacing>,
    /// [`Scene::bounds`], measured in the same pass.
    pub scene_bounds: Bounds,
}

/// Every light of the scene (its emissive triangles grouped by group and material, in scene
/// order) and which way its triangles face.
pub fn light_facing(scene: &Scene) -> LightSurvey {
    // One pass over each group's triangles (groups in parallel) gives two boxes: all the
    // vertices the triangles use (as `Group::bounds`), and the non-emissive triangles only.
    let (all_boxes, boxes): (Vec<Bounds>, Vec<Bounds>) = scene
        .groups
        .par_iter()
        .map(|g| group_boxes(scene, g))
        .unzip();
    let whole = boxes.iter().fold(Bounds::EMPTY, |a, b| a.union(b));
    let all = all_boxes.iter().fold(Bounds::EMPTY, |a, b| a.union(b));
    let near = if all.is_empty() {
        0.0
    } else {
        NEAR_FRACTION * all.diagonal().length()
    };
    let per_group = scene.lights.len().saturating_mul(boxes.len()) <= PAIR_BUDGET;

    let mut out: Vec<LightFacing> = Vec::new();
    let mut last_key = None;
    for light in &scene.lights {
        let g = &scene.groups[light.group as usize];
        let material = g.face_materials[light.prim as usize];
        let key = (light.group, material);
        if last_key != Some(key) {
            last_key = Some(key);
            out.push(no_triangles_yet(
                g.name.clone(),
                scene.materials[material as usize].name.clone(),
            ));
        }
        let entry = out.last_mut().expect("pushed above");
        let [p0, p1, p2] = g.triangle(light.prim as usize);
        let n = (p1 - p0).cross(p2 - p0).normalize();
        entry.triangles += 1;
        entry.area += f64::from(light.area);
        entry.facing[axis_of(n)] += 1;
        let reach = if per_group {
            boxes
                .iter()
                .map(|b| reach_into(b, p0, n))
                .fold(f32::NEG_INFINITY, f32::max)
        } else {
            reach_into(&whole, p0, n)
        };
        count_reach(entry, reach, near);
    }
    LightSurvey {
        lights: out,
        scene_bounds: all,
    }
}

/// The box of all the vertices a group's triangles use, and that of its non-emissive
/// triangles only.
fn group_boxes(scene: &Scene, g: &Group) -> (Bounds, Bounds) {
    let mut all = Bounds::EMPTY;
    let mut lit = Bounds::EMPTY;
    for (t, tri) in g.indices.iter().enumerate() {
        let emissive = g
            .face_materials
            .get(t)
            .and_then(|&m| scene.materials.get(m as usize))
            .is_some_and(|m| m.is_emissive());
        for &i in tri {
            if let Some(&p) = g.positions.get(i as usize) {
                all.extend(p);
                if !emissive {
                    lit.extend(p);
                }
            }
        }
    }
    (all, lit)
}

/// The entry of a light of `group` and `material`, before its triangles are counted.
fn no_triangles_yet(group: String, material: String) -> LightFacing {
    LightFacing {
        group,
        material,
        triangles: 0,
        area: 0.0,
        facing: [0; 6],
        toward_scene: 0,
        toward_gap_only: 0,
        away_from_everything: 0,
    }
}

/// Counts a light triangle by how far its front reaches into the scene: `reach`, against
/// the near limit `near`.
#[inline]
fn count_reach(entry: &mut LightFacing, reach: f32, near: f32) {
    if reach.is_nan() || reach <= 0.0 {
        entry.away_from_everything += 1;
    } else if reach < near {
        entry.toward_gap_only += 1;
    } else {
        entry.toward_scene += 1;
    }
}

/// The warnings [`light_facing`] gives reason for: lights (or some of their triangles) whose
/// front faces no other surface, or only surfaces just behind them. Empty when every light
/// faces the scene. Meant for one-sided lights; with `--two-sided-lights` both faces emit.
pub fn facing_warnings_of(survey: &LightSurvey) -> Vec<String> {
    let mut out = Vec::new();
    let diagonal = survey.scene_bounds.diagonal().length();
    for l in &survey.lights {
        let name = format!("light '{}' (material '{}')", l.group, l.material);
        let of = |n: usize| {
            if n == l.triangles {
                format!("all {n} of its emissive triangles")
            } else {
                format!("{n} of its {} emissive triangles", l.triangles)
            }
        };
        if l.away_from_everything > 0 {
            out.push(format!(
                "{name}: light faces away from every other surface: {} (front faces {}) face no other surface, and only the front face emits; reverse the winding or render with --two-sided-lights",
                of(l.away_from_everything),
                l.main_axes()
            ));
        }
        if l.toward_gap_only > 0 {
            out.push(format!(
                "{name}: {} (front faces {}) face only surfaces within {:.3} units of their plane (the scene is {diagonal:.3} across), e.g. a ceiling just behind the light; only the front face emits: is the winding reversed?",
                of(l.toward_gap_only),
                l.main_axes(),
                NEAR_FRACTION * diagonal
            ));
        }
    }
    out
}

/// [`facing_warnings_of`] the scene's own lights.
pub fn facing_warnings(scene: &Scene) -> Vec<String> {
    facing_warnings_of(&light_facing(scene))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::{Group, Material};
    use glam::Vec3;

    fn quad(name: &str, p: Vec3, a: Vec3, b: Vec3, material: u32) -> Group {
        Group {
            name: name.into(),
            positions: vec![p, p + a, p + a + b, p + b],
            indices: vec![[0, 1, 2], [0, 2, 3]],
            face_materials: vec![material, material],
            ..Default::default()
        }
    }

    /// A floor at y = 0, a ceiling at y = 10, and a lamp at height `y` wound down (normal
    /// x cross z = -Y) or up.
    fn room(lamp_y: f32, down: bool) -> Scene {
        let mut lamp = Material::diffuse("lamp", Vec3::ZERO);
        lamp.emission = Vec3::ONE;
        let (a, b) = if down {
            (Vec3::X, Vec3::Z)
        } else {
            (Vec3::Z, Vec3::X)
        };
        Scene::new(
            "room",
            vec![
                quad("floor", Vec3::ZERO, 10.0 * Vec3::Z, 10.0 * Vec3::X, 0),
                quad("ceiling", 10.0 * Vec3::Y, 10.0 * Vec3::X, 10.0 * Vec3::Z, 0),
                quad("lamp", Vec3::new(4.0, lamp_y, 4.0), a, b, 1),
            ],
            vec![Material::diffuse("white", Vec3::ONE), lamp],
        )
    }

    #[test]
    fn axes_are_the_dominant_component() {
        assert_eq!(AXES[axis_of(Vec3::new(0.1, -0.9, 0.2))], "-Y");
        assert_eq!(AXES[axis_of(Vec3::new(0.7, 0.1, -0.7))], "+X");
        assert_eq!(AXES[axis_of(Vec3::new(0.0, 0.0, -1.0))], "-Z");
    }

    #[test]
    fn the_survey_measures_the_same_box_as_scene_bounds() {
        for scene in [room(9.0, true), room(9.95, false)] {
            let survey = light_facing(&scene);
            assert_eq!(survey.scene_bounds, scene.bounds());
            assert!(!survey.scene_bounds.is_empty());
        }
        // An unused vertex far away counts in neither (only the vertices triangles use).
        let mut scene = room(9.0, true);
        scene.groups[0].positions.push(Vec3::splat(1e6));
        assert_eq!(light_facing(&scene).scene_bounds, scene.bounds());
        assert!(scene.bounds().max[0] < 1e6);
    }

    #[test]
    fn a_lamp_facing_the_floor_is_fine() {
        let scene = room(9.0, true);
        let f = light_facing(&scene).lights;
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].triangles, f[0].area), (2, 1.0));
        assert_eq!(f[0].facing, [0, 0, 0, 2, 0, 0]);
        assert_eq!(f[0].toward_scene, 2);
        assert_eq!(f[0].facing_text(), "2 face -Y");
        assert!(facing_warnings(&scene).is_empty());
    }

    #[test]
    fn a_lamp_wound_up_under_the_ceiling_faces_a_gap() {
        let scene = room(9.95, false);
        let f = light_facing(&scene).lights;
        assert_eq!(f[0].facing, [0, 0, 2, 0, 0, 0]);
        assert_eq!(f[0].toward_gap_only, 2);
        let w = facing_warnings(&scene);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("face only surfaces within"), "{w:?}");
        assert!(w[0].contains("+Y"), "{w:?}");
    }

    #[test]
    fn a_lamp_wound_up_above_everything_faces_away() {
        // Remove the ceiling: nothing is above the lamp.
        let mut scene = room(9.0, false);
        scene.groups.remove(1);
        scene.finalize();
        let f = light_facing(&scene).lights;
        assert_eq!(f[0].away_from_everything, 2);
        let w = facing_warnings(&scene);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("light faces away from every other surface"),
            "{w:?}"
        );
        assert!(w[0].contains("all 2 of its emissive triangles"), "{w:?}");
    }
}
