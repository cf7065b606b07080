//! A minimal OptiX pipeline that casts a batch of rays against an [`Accel`] and returns, per
//! ray, the group, triangle and distance it hit: the check that the batched GAS builds, the
//! merged GASes' SBT records and the IAS are right, by comparison with the CPU.
//!
//! The device programs are `ptx/raycast.cu`, compiled to `ptx/raycast.ptx` by
//! `scripts/build-ptx.sh` and embedded here. The structs below mirror the device structs byte
//! for byte: `tests/optix_pathtracer_host.rs` compiles `raycast.cu` with the host C++ compiler
//! and asserts every size, field offset and field size against these structs.

use std::sync::Arc;

use bytemuck::{Pod, Zeroable};
use thiserror::Error;

use super::accel::Accel;
use super::context::DeviceContext;
use super::cuda::DeviceBuffer;
use super::error::{CudaError, OptixError};
use super::pipeline::{
    launch_and_wait, Module, ModuleCompileOptions, Pipeline, PipelineCompileOptions, ProgramGroup,
    SbtRecord, ShaderBindingTable,
};
use super::sys::OptixTraversableHandle;

/// The device code, compiled by NVRTC (see `ptx/README.md`).
pub const RAYCAST_PTX: &str = include_str!("../../ptx/raycast.ptx");
/// The launch-parameter variable of the device code.
pub const LAUNCH_PARAMS_NAME: &str = "raycast_params";
pub const RAYGEN: &str = "__raygen__raycast";
pub const MISS: &str = "__miss__raycast";
pub const CLOSEST_HIT: &str = "__closesthit__raycast";
/// Payload registers the programs use: group, prim, t, u, v, instance.
pub const PAYLOAD_VALUES: i32 = 6;

/// `RaycastHit::group` (and `instance`) of a ray that hit nothing.
pub const MISS_GROUP: u32 = u32::MAX;

/// One ray (`RaycastRay` in the device code).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct Ray {
    pub origin: [f32; 3],
    pub tmin: f32,
    pub dir: [f32; 3],
    pub tmax: f32,
}

/// What a ray hit (`RaycastHit` in the device code).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct RayHit {
    /// Scene group, from the hit's SBT record; [`MISS_GROUP`] for a miss.
    pub group: u32,
    /// Triangle index within the group.
    pub prim: u32,
    /// Distance in units of the ray direction's length; +inf for a miss.
    pub t: f32,
    /// Barycentric weights of the 2nd and 3rd vertex.
    pub u: f32,
    pub v: f32,
    /// The IAS instance id ([`MISS_GROUP`] for a miss).
    pub instance: u32,
}

impl RayHit {
    /// A ray that hit nothing, as the device writes it.
    pub fn miss() -> RayHit {
        RayHit {
            group: MISS_GROUP,
            prim: 0,
            t: f32::INFINITY,
            u: 0.0,
            v: 0.0,
            instance: MISS_GROUP,
        }
    }

    pub fn is_miss(&self) -> bool {
        self.group == MISS_GROUP
    }
}

/// `RaycastParams` in the device code.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct LaunchParams {
    pub handle: OptixTraversableHandle,
    pub rays: u64,
    pub hits: u64,
    pub ray_count: u32,
    pub pad: u32,
}

/// The data of each hit-group SBT record (`RaycastHitGroupData`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
pub struct HitGroupData {
    pub group: u32,
}

#[derive(Debug, Error)]
pub enum RaycastError {
    #[error(transparent)]
    Cuda(#[from] CudaError),
    #[error(transparent)]
    Optix(#[from] OptixError),
    #[error("{0} rays in one launch; at most 2^30 are supported")]
    TooManyRays(usize),
}

/// The compiled ray-cast pipeline: module, program groups, pipeline.
pub struct RaycastPipeline {
    ctx: Arc<DeviceContext>,
    raygen: ProgramGroup,
    miss: ProgramGroup,
    hit: ProgramGroup,
    pipeline: Pipeline,
}

impl RaycastPipeline {
    /// Compiles the embedded PTX and links the pipeline (one trace level, IAS over GASes).
    pub fn new(ctx: &Arc<DeviceContext>) -> Result<RaycastPipeline, RaycastError> {
        let options = PipelineCompileOptions {
            num_payload_values: PAYLOAD_VALUES,
            launch_params_variable_name: LAUNCH_PARAMS_NAME.into(),
            ..PipelineCompileOptions::default()
        };
        let module = Module::from_ptx(
            ctx,
            "raycast.ptx",
            RAYCAST_PTX,
            &ModuleCompileOptions::default(),
            &options,
        )?;
        let raygen = ProgramGroup::raygen(ctx, &module, RAYGEN)?;
        let miss = ProgramGroup::miss(ctx, &module, MISS)?;
        let hit = ProgramGroup::closest_hit(ctx, &module, CLOSEST_HIT)?;
        let pipeline = Pipeline::new(
            ctx,
            &options,
            1,
            &[raygen.clone(), miss.clone(), hit.clone()],
        )?;
        Ok(RaycastPipeline {
            ctx: ctx.clone(),
            raygen,
            miss,
            hit,
            pipeline,
        })
    }

    /// Casts `rays` against `accel` and returns one hit per ray, in order. Runs on the accel's
    /// main stream, so it is ordered after the build without a wait.
    pub fn cast(&self, accel: &Accel, rays: &[Ray]) -> Result<Vec<RayHit>, RaycastError> {
        if rays.is_empty() {
            return Ok(Vec::new());
        }
        if rays.len() > 1 << 30 {
            return Err(RaycastError::TooManyRays(rays.len()));
        }
        let gpu = self.ctx.gpu();
        let stream = accel.stream();
        // One hit record per SBT record of the accel: record r names group record_groups[r].
        let hit_records = accel
            .table()
            .record_groups
            .iter()
            .map(|&group| SbtRecord::new(&self.hit, HitGroupData { group }))
            .collect::<Result<Vec<_>, _>>()?;
        let sbt = ShaderBindingTable::builder()
            .raygen(SbtRecord::new(&self.raygen, ())?)?
            .miss(&[SbtRecord::new(&self.miss, ())?])?
            .hitgroup(&hit_records)?
            .build(gpu, stream)?;
        let ray_buffer = gpu.upload(stream, rays)?;
        let hit_buffer: DeviceBuffer = gpu.alloc(rays.len() * std::mem::size_of::<RayHit>())?;
        let params = LaunchParams {
            handle: accel.handle(),
            rays: ray_buffer.device_ptr(),
            hits: hit_buffer.device_ptr(),
            ray_count: rays.len() as u32,
            pad: 0,
        };
        let params_buffer = gpu.upload(stream, &[params])?;
        // SAFETY: the parameters name the live IAS of `accel` (borrowed), and `ray_buffer` and
        // `hit_buffer`, alive until after the wait and sized for `ray_count` rays, the launch's
        // width; the SBT's records hold no addresses.
        unsafe {
            launch_and_wait(
                &self.pipeline,
                stream,
                &params_buffer,
                &sbt,
                rays.len() as u32,
                1,
                1,
            )
        }?;
        Ok(hit_buffer.download::<RayHit>(stream, 0, rays.len())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_device_structs() {
        // The same numbers as the static_asserts of ptx/raycast.cu.
        assert_eq!(size_of::<Ray>(), 32);
        assert_eq!(offset_of!(Ray, tmin), 12);
        assert_eq!(offset_of!(Ray, dir), 16);
        assert_eq!(offset_of!(Ray, tmax), 28);
        assert_eq!(size_of::<RayHit>(), 24);
        assert_eq!(offset_of!(RayHit, t), 8);
        assert_eq!(offset_of!(RayHit, instance), 20);
        assert_eq!(size_of::<LaunchParams>(), 32);
        assert_eq!(offset_of!(LaunchParams, rays), 8);
        assert_eq!(offset_of!(LaunchParams, hits), 16);
        assert_eq!(offset_of!(LaunchParams, ray_count), 24);
        assert_eq!(size_of::<HitGroupData>(), 4);
    }

    #[test]
    fn embedded_ptx_has_the_programs_and_visible_params() {
        for entry in [RAYGEN, MISS, CLOSEST_HIT] {
            assert!(
                RAYCAST_PTX.contains(&format!(".visible .entry {entry}(")),
                "{entry} missing from raycast.ptx"
            );
        }
        assert!(RAYCAST_PTX.contains(&format!(
            ".visible .const .align 8 .b8 {LAUNCH_PARAMS_NAME}[32];"
        )));
        // PTX ISA 8.2 (NVRTC 12.2): what R535 drivers accept.
        assert!(RAYCAST_PTX.contains("\n.version 8.2\n"));
        assert!(RAYCAST_PTX.contains("\n.target sm_75\n"));
        // One trace: the default payload type with the six values the pipeline is compiled
        // for (slots 0-5 are set), every instance visible, no any-hit, and the record of a hit
        // at the instance's SBT offset plus the build input (offset 0, stride 1), the one miss
        // record at index 0.
        let traces = super::super::ptx_calls::trace_calls(RAYCAST_PTX);
        let expected = super::super::ptx_calls::TraceCall {
            payload_type: 0,
            visibility_mask: 0xff,
            // OPTIX_RAY_FLAG_DISABLE_ANYHIT
            ray_flags: 1,
            sbt_offset: 0,
            sbt_stride: 1,
            miss_index: 0,
            payload_count: PAYLOAD_VALUES as u32,
        };
        assert_eq!(traces, [expected]);
    }
}
