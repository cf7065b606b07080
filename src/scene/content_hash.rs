//! A hash of what a scene's files hold that decides its pixels: every group's name and
//! geometry (positions, normals, texture coordinates, triangles, per-triangle materials), the
//! materials and the texels. The environment and the light sidedness, which command-line
//! flags can change, are render settings with their own items in the render key; so the hash
//! `gasworks info` prints for a scene file is the one every render of it carries.
//!
//! Images and resume files carry it ([`crate::render::output::render_key`]), so that a render
//! resumed, or crops merged, after the scene was edited (a colour changed in the MTL file, a
//! vertex moved) is refused instead of mixing samples of two scenes into one silently wrong
//! image; cluster ranks compare it before a frame (`crate::session::fingerprint`).
//!
//! [`crate::fnv`] over the bytes, so the value depends on nothing but the data: it is compared
//! across runs and machines. Groups and textures are hashed in parallel, then combined in
//! order.

use rayon::prelude::*;

use super::{Group, Scene};
use crate::fnv::Fnv;

/// The content hash of `scene` (not of where it was loaded from: the same scene under
/// another file name hashes the same).
pub fn content_hash(scene: &Scene) -> u64 {
    let groups: Vec<u64> = scene.groups.par_iter().map(group_hash).collect();
    content_hash_of_groups(&groups, scene)
}

/// A group's part of the content hash: [`group_head`], then its face materials.
pub fn group_hash(g: &Group) -> u64 {
    let mut h = group_head(g);
    h.field(bytemuck::cast_slice(&g.face_materials));
    h.finish()
}

/// A group's hash up to its face materials, which [`group_hash`] adds last: the loader's
/// first reading of a file for a distributed render learns the default material's index
/// only at the end of the file, and so adds them then.
pub fn group_head(g: &Group) -> Fnv {
    let mut h = Fnv::default();
    h.field(g.name.as_bytes());
    h.field(bytemuck::cast_slice(&g.positions));
    h.field(bytemuck::cast_slice(&g.normals));
    h.field(bytemuck::cast_slice(&g.uvs));
    h.field(bytemuck::cast_slice(&g.indices));
    h
}

/// The content hash of a scene whose groups hash to `groups` ([`group_hash`], in order),
/// with `scene`'s materials and textures: a rank that holds only some of the groups computes
/// the whole scene's hash from the hashes of all.
pub fn content_hash_of_groups(groups: &[u64], scene: &Scene) -> u64 {
    let textures: Vec<u64> = scene
        .textures
        .par_iter()
        .map(|t| {
            let mut h = Fnv::default();
            h.field(&[t.width.to_le_bytes(), t.height.to_le_bytes()].concat());
            h.field(bytemuck::cast_slice(&t.mapping.to_array()));
            h.field(bytemuck::cast_slice(&t.texels));
            h.finish()
        })
        .collect();
    let mut h = Fnv::default();
    h.field(&(groups.len() as u64).to_le_bytes());
    for g in groups {
        h.field(&g.to_le_bytes());
    }
    for m in &scene.materials {
        h.field(format!("{m:?}").as_bytes());
    }
    h.field(&(textures.len() as u64).to_le_bytes());
    for t in textures {
        h.field(&t.to_le_bytes());
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::gen::cornell;

    #[test]
    fn any_change_that_decides_pixels_changes_the_hash() {
        let base = cornell();
        let h0 = content_hash(&base);
        assert_eq!(content_hash(&base.clone()), h0, "deterministic");
        let mut renamed = base.clone();
        renamed.source = "elsewhere.obj".into();
        assert_eq!(content_hash(&renamed), h0, "the file name is not content");
        let mut flags = base.clone();
        flags.two_sided_lights = !flags.two_sided_lights;
        flags.environment = Some(crate::scene::Environment {
            radiance: glam::Vec3::splat(0.5),
        });
        assert_eq!(content_hash(&flags), h0, "render settings are not content");

        let mut changes: Vec<(&str, Scene)> = Vec::new();
        let mut s = base.clone();
        s.groups[1].positions[0].x += 1e-3;
        changes.push(("a vertex moved", s));
        let mut s = base.clone();
        s.materials[0].diffuse.x *= 0.5;
        changes.push(("a material's colour", s));
        let mut s = base.clone();
        s.groups[2].face_materials[0] ^= 1;
        changes.push(("a triangle's material", s));
        let mut s = base.clone();
        s.groups[0].name.push('x');
        changes.push(("a group's name", s));
        let mut s = base.clone();
        s.groups.swap(0, 1);
        changes.push(("the group order", s));
        for (what, scene) in changes {
            assert_ne!(content_hash(&scene), h0, "{what}");
        }
    }
}
