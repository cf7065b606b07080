//! A rank's setup before the frame: the scene loaded (with its environment), the camera and
//! its lens, the environment map's share of light samples, the backend set up (the cost map
//! rasterized beside a GPU's setup), and the checks that refuse a frame before its work.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;

use super::options::{EnvShare, RenderOptions};
use crate::console::Verbosity;
use crate::render::RenderSettings;
#[cfg(doc)]
use crate::scene::camera::CameraChoice;
use crate::scene::camera::CameraFrame;
use crate::scene::{obj, Camera, Environment, EnvironmentMap, Scene};

/// Refuses a frame whose film and outputs cannot fit in memory, before anything is loaded
/// (a failed allocation would abort the process and lose the render).
pub(super) fn check_frame_memory(width: u32, height: u32) -> anyhow::Result<()> {
    use crate::render::memory;
    memory::check_fits(
        &format!("a {width}x{height} image"),
        memory::frame_bytes(width, height),
        memory::room(),
    )
    .map_err(|e| {
        anyhow::anyhow!(
            "{e}: render it in crops (--pixelbounds, one process each) and join them with gasworks merge"
        )
    })
}

/// A camera as the flags that give it, for messages.
fn camera_flags(camera: &Camera) -> String {
    let v = |v: glam::Vec3| format!("{},{},{}", v.x, v.y, v.z);
    format!(
        "--eye {} --look-at {} --up {} --fov {}",
        v(camera.eye),
        v(camera.look_at),
        v(camera.up),
        camera.fov_y_deg
    )
}

/// Refuses an output or `--stats` file that is one of the scene's textures (known once it is
/// loaded): the render would overwrite what it read.
pub(super) fn check_outputs_against_textures(
    a: &RenderOptions,
    scene: &Scene,
) -> anyhow::Result<()> {
    let mut written = vec![("-o", a.output.clone())];
    if let Some(stats) = &a.stats {
        let (tiles, map) = crate::sched::report::sibling_paths(stats);
        written.extend([
            ("--stats", stats.clone()),
            ("--stats", tiles),
            ("--stats", map),
        ]);
    }
    for (flag, path) in &written {
        if let Some(t) = scene
            .textures
            .iter()
            .find(|t| crate::render::paths::same_file(path, Path::new(&t.path)))
        {
            anyhow::bail!(
                "{flag} {} is a texture of the scene ({}): writing there would overwrite it",
                path.display(),
                t.path
            );
        }
        if let Some(map) = &a.environment.map {
            if crate::render::paths::same_file(path, map) {
                anyhow::bail!(
                    "{flag} {} is the environment map (--env-map): writing there would \
                     overwrite it",
                    path.display()
                );
            }
        }
    }
    Ok(())
}

/// Sets [`Scene::environment_share`] for the render (`--env-share`): measured by
/// [`crate::cpu::environment_share::probe`] through the render's camera for `auto`, where the
/// scene has both a map and area lights (it builds a CPU BVH for that, on every backend), or
/// the number given. Says which with -v. Returns the BVH the probe built, for the CPU
/// backend to trace rather than build another ([`set_up_backend`]).
pub(super) fn choose_environment_share(
    a: &RenderOptions,
    scene: &mut Scene,
    settings: &RenderSettings,
    out: Verbosity,
) -> Option<std::sync::Arc<crate::cpu::SceneBvh>> {
    use crate::scene::light_power::fixed_environment_share;
    scene.environment_map.as_ref()?;
    if let Some(share) = fixed_environment_share(scene) {
        if let EnvShare::Fixed(p) = a.environment.share {
            if p != share {
                out.warn(format_args!(
                    "--env-share {p} has no effect: {}",
                    if share == 1.0 {
                        "the scene has no area lights, so every light sample goes to the map"
                    } else {
                        "the environment map is black"
                    }
                ));
            }
        }
        return None;
    }
    match a.environment.share {
        EnvShare::Fixed(p) => {
            scene.environment_share = Some(p);
            out.detail(
                false,
                format_args!("environment share: {p} of the light samples (--env-share)"),
            );
            None
        }
        EnvShare::Auto => {
            let bvh = crate::cpu::SceneBvh::build(scene);
            let t0 = Instant::now();
            let probe = crate::cpu::environment_share::probe(
                scene,
                &bvh,
                &settings.camera,
                settings.max_depth,
            );
            scene.environment_share = Some(probe.share);
            let total = probe.environment + probe.area_lights;
            let part = |x: f64| if total > 0.0 { 100.0 * x / total } else { 0.0 };
            out.detail(
                false,
                format_args!(
                    "environment share: {} of the light samples (auto: over {} probe paths, \
                     {} vertices, the map brought {:.1}% of the sampled light, the area \
                     lights {:.1}%; {:.2} s, after {:.2} s building the CPU BVH it traces, \
                     the CPU backend's too when there is one)",
                    probe.share,
                    probe.paths,
                    probe.vertices,
                    part(probe.environment),
                    part(probe.area_lights),
                    t0.elapsed().as_secs_f64(),
                    bvh.stats().seconds,
                ),
            );
            Some(std::sync::Arc::new(bvh))
        }
    }
}

/// Refuses `--env-share auto` on a rank that holds only part of the scene, where it would
/// measure: the probe traces the whole scene.
pub(super) fn refuse_measured_share(a: &RenderOptions, scene: &Scene) -> anyhow::Result<()> {
    let measured = scene.environment_map.is_some()
        && crate::scene::light_power::fixed_environment_share(scene).is_none()
        && matches!(a.environment.share, EnvShare::Auto);
    if measured {
        anyhow::bail!(
            "{}: with --distribute-geometry, an environment map beside area lights needs its share given (--env-share 0.5, for example): measuring it (auto) traces the whole scene, which no rank holds",
            a.scene.display()
        );
    }
    Ok(())
}

/// Loads the scene (with `--env` or `--env-map`, and `--two-sided-lights` applied) and says
/// how long it took.
pub(super) fn load_scene(a: &RenderOptions) -> anyhow::Result<(Scene, f64)> {
    load_scene_with(a, obj::load_obj)
}

/// [`load_scene`] with the loader given: the whole scene's, or a rank's part of it.
pub(super) fn load_scene_with(
    a: &RenderOptions,
    loader: impl FnOnce(&std::path::Path, &obj::LoadOptions) -> Result<Scene, obj::LoadError>,
) -> anyhow::Result<(Scene, f64)> {
    let t0 = Instant::now();
    let quiet = a.verbosity.is_quiet();
    let mut scene = loader(&a.scene, &obj::LoadOptions { quiet })?;
    let env = &a.environment;
    if let Some(radiance) = env.radiance {
        scene.set_environment(Environment { radiance });
    }
    if let Some(path) = &env.map {
        let map = EnvironmentMap::open(path, env.rotate_deg)?.scaled(env.scale)?;
        scene.set_environment_map(std::sync::Arc::new(map));
    }
    scene.two_sided_lights = a.two_sided_lights;
    Ok((scene, t0.elapsed().as_secs_f64()))
}

/// The loader's warnings, lights that face away from everything (where `whole`: the check
/// traces the whole scene), dropped triangles.
pub(super) fn print_load_warnings(a: &RenderOptions, scene: &Scene, whole: bool, out: Verbosity) {
    for w in &scene.report.warnings {
        out.warn(w);
    }
    if whole && !scene.two_sided_lights {
        for w in crate::scene::lights::facing_warnings(scene) {
            out.warn(format_args!("{}: {w}", a.scene.display()));
        }
    }
    if scene.report.degenerate_dropped > 0 {
        out.warn(format_args!(
            "{}: dropped {} degenerate triangles{}",
            a.scene.display(),
            scene.report.degenerate_dropped,
            crate::scene::obj::out_of_scale_note(scene.report.out_of_scale_dropped)
        ));
    }
}

/// The settings of the render: the image, the samples and the camera (printed with -v, as the
/// flags that reproduce it; the camera frames `scene_bounds` where none is given). The camera
/// and its lens fall back to the scene's own (its
/// `# gasworks camera:` comment: [`CameraChoice::scene_hint_with_lens`]).
pub(super) fn render_settings(
    a: &RenderOptions,
    scene_bounds: &crate::scene::Bounds,
    out: Verbosity,
) -> anyhow::Result<RenderSettings> {
    let hint = a.camera.scene_hint_with_lens(&a.scene, |w| out.warn(w))?;
    let camera = a
        .camera
        .camera(scene_bounds, hint.map(|h| h.camera), a.width, a.height);
    // The look-at point's distance, in f64: the f32 square of a far one overflows.
    let look_at_distance = (camera.look_at.as_dvec3() - camera.eye.as_dvec3()).length() as f32;
    let origin = a.camera.origin(hint.is_some());
    out.detail(
        false,
        format_args!("camera: {} ({origin})", camera_flags(&camera)),
    );
    let mut frame = camera.frame(a.width, a.height).with_context(|| {
        format!(
            "{}: bad camera (from {origin}; {})",
            a.scene.display(),
            camera_flags(&camera)
        )
    })?;
    frame.filter = a.filter;
    // The lens: the options' (a radius of 0 is a pinhole), else the scene's camera comment's,
    // unless the options give the whole camera (the comment is then not used).
    let hint_lens = hint
        .and_then(|h| h.lens)
        .filter(|_| !a.camera.overrides_all());
    let lens = match (a.lens.radius, hint_lens) {
        (Some(radius), _) => Some((radius, a.lens.focus_distance, a.lens.focus_on, false)),
        (None, Some(l)) => Some((l.radius, l.focus_distance, None, true)),
        (None, None) => None,
    };
    if let Some(lens) = lens {
        set_lens(a, &mut frame, lens, look_at_distance, out)?;
    }
    Ok(RenderSettings {
        width: a.width,
        height: a.height,
        spp: a.spp,
        max_depth: a.max_depth,
        seed: a.seed,
        camera: frame,
    })
}

/// Sets the thin lens `(radius, focus distance, focus point, from the scene's hint)` on
/// `camera`: focused at the distance given, on the plane through the point given, or at the
/// look-at point's distance.
fn set_lens(
    a: &RenderOptions,
    camera: &mut CameraFrame,
    (radius, focus_distance, focus_on, from_hint): (f32, Option<f32>, Option<glam::Vec3>, bool),
    look_at_distance: f32,
    out: Verbosity,
) -> anyhow::Result<()> {
    const HINT: &str = "the scene's camera hint";
    let (focus, from) = match (focus_distance, focus_on) {
        (Some(d), _) => (d, from_hint.then(|| HINT.to_string())),
        // The point's distance along the view direction, in f64 as above.
        (None, Some(p)) => (
            (p.as_dvec3() - camera.eye.as_dvec3()).dot(camera.w.as_dvec3()) as f32,
            Some(format!("from --focus-on {},{},{}", p.x, p.y, p.z)),
        ),
        (None, None) => (
            look_at_distance,
            Some(if from_hint {
                format!("{HINT}, at the look-at point's distance")
            } else {
                "the look-at point's distance".to_string()
            }),
        ),
    };
    camera.set_thin_lens(radius, focus).with_context(|| {
        if from_hint {
            format!(
                "{}: bad lens (lens_radius {radius} focus_distance {focus}, from {})",
                a.scene.display(),
                from.as_deref().unwrap_or(HINT)
            )
        } else {
            format!(
                "{}: bad lens (--lens-radius {radius} --focus-distance {focus}{})",
                a.scene.display(),
                from.as_ref().map_or(String::new(), |f| format!(", {f}"))
            )
        }
    })?;
    if radius > 0.0 {
        out.detail(
            false,
            format_args!(
                "lens: radius {radius}, focused at {focus} along the view direction{}",
                from.as_ref().map_or(String::new(), |f| format!(" ({f})"))
            ),
        );
    }
    Ok(())
}

/// The backend `--backend` names (with the CPU backend for `--devices ... cpu` workers beside a
/// GPU, [`crate::backend::select_beside`]), and, when `estimate_too` and a GPU is tried, the
/// frame's cost map, rasterized on another thread meanwhile: it needs only the scene and the
/// camera, and the GPU's setup mostly waits for the driver and the device. Beside the CPU
/// backend's own BVH build the two would only share the cores: there the frame estimates it.
/// A failed or panicked estimate is `None`: the frame makes it again, and reports it.
/// `cpu_bvh`: the scene's CPU BVH, shared with the environment-share probe
/// ([`choose_environment_share`], which built it before) and the `--aov` layers, which a CPU
/// backend traces rather than building another. `known`: the GPU backends of a camera path's
/// last frame, already set for this one; GPU 0's is taken rather than built.
pub(super) fn set_up_backend(
    a: &RenderOptions,
    scene: &std::sync::Arc<Scene>,
    settings: &RenderSettings,
    schedule: &crate::sched::SchedConfig,
    estimate_too: bool,
    (cpu_bvh, known): (crate::cpu::SharedBvh, &crate::backend::KeptGpus),
) -> anyhow::Result<(
    crate::backend::Backend,
    Option<crate::sched::PreparedEstimate>,
)> {
    let choice = a.backend;
    let cpu_too = a.devices.is_some() && crate::sched::workers::has_cpu(&schedule.devices);
    let gpu0 = known.iter().find(|(device, _)| *device == 0);
    if let (Some((_, gpu)), false) = (gpu0, choice == crate::backend::BackendChoice::Cpu) {
        let again = crate::backend::select_again(gpu, scene, settings, cpu_too, cpu_bvh)?;
        return Ok((again, None));
    }
    // GPUs that --devices names are checked before any backend is set up: on a machine
    // without one, `--devices gpu0` printed "backend: cpu (... auto: no NVIDIA GPU found)"
    // first and failed only when the frame asked for its GPU worker.
    let named_gpus: Vec<u32> = match &a.devices {
        Some(_) => schedule
            .devices
            .iter()
            .filter_map(|d| match d {
                crate::sched::DeviceSpec::Gpu { device, .. } => Some(*device),
                crate::sched::DeviceSpec::Cpu { .. } => None,
            })
            .collect(),
        None => Vec::new(),
    };
    if let (crate::backend::BackendChoice::Cpu, Some(gpu)) = (choice, named_gpus.first()) {
        // Else the GPU worker would set the OptiX backend up anyway and render on the GPU.
        anyhow::bail!(
            "--backend cpu with --devices gpu{gpu}: the CPU backend has no GPU workers; give \
             --devices cpu (or cpu:N), or leave --backend out"
        );
    }
    let probed = (choice != crate::backend::BackendChoice::Cpu).then(crate::optix::probe);
    check_named_gpus(
        &named_gpus,
        probed.as_ref().map(|p| p.as_ref().map(Vec::len)),
    )?;
    let gpu_tried = choice != crate::backend::BackendChoice::Cpu && matches!(probed, Some(Ok(_)));
    let (backend, prepared) = std::thread::scope(|scope| {
        let estimate = (estimate_too && gpu_tried).then(|| {
            scope.spawn(|| crate::sched::PreparedEstimate::new(scene, settings, schedule))
        });
        let backend =
            crate::backend::select_beside(choice, scene, settings, &a.optix, cpu_too, cpu_bvh);
        (
            backend,
            estimate.and_then(|h| h.join().ok()).and_then(Result::ok),
        )
    });
    Ok((backend?, prepared))
}

/// The error for a `--devices gpuD` this machine cannot serve, given the probe's GPU count (when
/// it ran): no GPU at all (the probe's reason), or fewer GPUs than `D + 1`.
fn check_named_gpus(
    named: &[u32],
    gpu_count: Option<Result<usize, &crate::optix::CudaError>>,
) -> anyhow::Result<()> {
    let (Some(&first), Some(gpu_count)) = (named.first(), gpu_count) else {
        return Ok(());
    };
    match gpu_count {
        Err(e) => Err(anyhow::anyhow!("{e}").context(format!(
            "--devices gpu{first}: cannot set up the OptiX backend"
        ))),
        Ok(count) => match named.iter().find(|&&d| d as usize >= count) {
            Some(d) => anyhow::bail!(
                "--devices gpu{d}: this machine has {}",
                crate::optix::cuda::gpus_text(count, |i| format!("gpu{i}"))
            ),
            None => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_named_by_devices_must_exist_before_anything_is_set_up() {
        // Nothing named, or no probe (the CPU backend and no GPU named): nothing to check.
        assert!(check_named_gpus(&[], Some(Ok(0))).is_ok());
        assert!(check_named_gpus(&[0], None).is_ok());
        assert!(check_named_gpus(&[0, 1], Some(Ok(2))).is_ok());
        let no_gpu = crate::optix::CudaError::NoDevice {
            reason: "libcuda.so.1 not loadable".into(),
        };
        let e = check_named_gpus(&[0], Some(Err(&no_gpu))).unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "--devices gpu0: cannot set up the OptiX backend: no NVIDIA GPU found (libcuda.so.1 not loadable)"
        );
        let e = check_named_gpus(&[0, 9, 12], Some(Ok(1))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--devices gpu9: this machine has 1 NVIDIA GPU (gpu0)"
        );
        let e = check_named_gpus(&[3], Some(Ok(2))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--devices gpu3: this machine has 2 NVIDIA GPUs (gpu0 to gpu1)"
        );
    }
}
