//! The GAS benchmark: times batches of per-group GAS builds on one GPU as the OptiX forum's
//! program does (CUDA events around the whole batch on the main stream, which every stream
//! forks from and joins into; min, median and max over repeats after warm-up runs), and the
//! single GAS of the whole scene as the reference, in the same run. `gasworks build-bench`
//! prints and writes what it returns.

use std::sync::Arc;

use anyhow::Context;

use super::accel::{
    compacted_layout, concat_mesh, AccelOptions, DeviceGeometry, GasBatch, StreamSet,
};
use super::cuda::Stream;
use super::plan::{group_gases, guard_regions};
use super::{CudaError, DeviceContext};
use crate::bench_report::Stats;
use crate::scene::Scene;

/// What the batch of one configuration measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchTiming {
    /// GPU time of the whole batch, per timed run, in milliseconds.
    pub gpu_ms: Stats,
    /// Host wall time of `GasBatch::enqueue` alone, per timed run, in milliseconds.
    pub enqueue_ms: Stats,
    pub gases: usize,
    pub scratch_bytes: u64,
    pub output_bytes: u64,
    pub compacted_bytes: Option<u64>,
    /// With guard bytes: the guard regions checked after every run (none was written), and
    /// the runs, warm-up included.
    pub guards_checked: Option<(usize, u32)>,
}

/// Times one configuration: `warmup` untimed runs, then `repeat` runs each between two timing
/// events on the main stream. The host's own time in `enqueue` is taken too: the start event
/// fires as soon as it is recorded, so every microsecond the host spends enqueueing is inside
/// the GPU-timed span, and a batch whose enqueue takes about as long as the span is bound by
/// the host, not the GPU.
pub fn time_batch(
    ctx: &Arc<DeviceContext>,
    geometry: &DeviceGeometry,
    group_triangles: &[u64],
    options: &AccelOptions,
    (warmup, repeat): (u32, u32),
) -> anyhow::Result<BatchTiming> {
    let gpu = ctx.gpu();
    let table = group_gases(group_triangles, &options.merge);
    let gases = table.gases.len();
    let mut batch = GasBatch::prepare(ctx, geometry, table, options)?;
    let streams = StreamSet::new(gpu, options.streams)?;
    let (t0, t1) = (gpu.new_event(true)?, gpu.new_event(true)?);
    if options.guard_bytes > 0 {
        batch.arm_guards(streams.main())?;
    }
    for run in 0..warmup {
        batch.enqueue(&streams)?;
        check_guards(&batch, &streams, options, run)?;
    }
    let mut samples = Vec::with_capacity(repeat as usize);
    let mut enqueue_ms = Vec::with_capacity(repeat as usize);
    for _ in 0..repeat {
        t0.record(streams.main())?;
        let host = std::time::Instant::now();
        batch.enqueue(&streams)?;
        enqueue_ms.push(host.elapsed().as_secs_f64() * 1e3);
        t1.record(streams.main())?;
        // A batch that never finishes is an error naming it, not a benchmark blocked for ever.
        batch.wait(&streams)?;
        t1.synchronize()?;
        samples.push(f64::from(t0.elapsed_ms(&t1)?));
        check_guards(&batch, &streams, options, warmup + samples.len() as u32 - 1)?;
    }
    let compacted_bytes = batch
        .read_compacted_sizes(&streams)?
        .map(|sizes| compacted_layout(&sizes).1);
    streams.main().synchronize()?;
    Ok(BatchTiming {
        gpu_ms: Stats::of(&samples).context("no timings")?,
        enqueue_ms: Stats::of(&enqueue_ms).context("no timings")?,
        gases,
        scratch_bytes: batch.scratch_bytes(),
        output_bytes: batch.output_bytes(),
        compacted_bytes,
        guards_checked: (options.guard_bytes > 0)
            .then(|| (guard_regions(batch.plan()).len(), warmup + repeat)),
    })
}

/// With guard bytes: fails, naming the build, if any build so far wrote outside its ranges
/// (checked after every run, outside the timed region, so the first run to do it is named).
fn check_guards(
    batch: &GasBatch,
    streams: &StreamSet,
    options: &AccelOptions,
    run: u32,
) -> anyhow::Result<()> {
    if options.guard_bytes == 0 {
        return Ok(());
    }
    let written = batch.written_guards(streams)?;
    if let Some((g, span)) = written.first() {
        anyhow::bail!(
            "{} guard region(s) written by run {} (counting from 0, warm-up included); first: {}",
            written.len(),
            run,
            batch.describe_guard(g, *span)
        );
    }
    Ok(())
}

/// A scene's groups on one GPU, ready to time: its batches of per-group GASes
/// ([`SceneBench::configurations`]) and its single-GAS reference
/// ([`SceneBench::single_gas`]), each `repeat` times after `warmup` runs.
pub struct SceneBench<'a> {
    ctx: &'a Arc<DeviceContext>,
    scene: &'a Scene,
    group_triangles: Vec<u64>,
    runs: (u32, u32),
    /// The stream the geometry is uploaded on.
    upload: Stream,
}

impl<'a> SceneBench<'a> {
    pub fn new(
        ctx: &'a Arc<DeviceContext>,
        scene: &'a Scene,
        warmup: u32,
        repeat: u32,
    ) -> Result<Self, CudaError> {
        Ok(SceneBench {
            ctx,
            scene,
            group_triangles: scene
                .groups
                .iter()
                .map(|g| g.indices.len() as u64)
                .collect(),
            runs: (warmup, repeat),
            upload: ctx.gpu().new_stream()?,
        })
    }

    /// The scene's triangles.
    pub fn triangles(&self) -> u64 {
        self.group_triangles.iter().sum()
    }

    /// Times each configuration in order, handing each to `each` as it is timed, until one
    /// fails (or `each` does): a crashed batch poisons the CUDA context, so nothing more can
    /// be timed. The groups' geometry is uploaded once, first.
    pub fn configurations(
        &self,
        configs: &[AccelOptions],
        mut each: impl FnMut(&AccelOptions, BatchTiming) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let geometry = DeviceGeometry::upload(self.ctx.gpu(), &self.upload, self.scene)?;
        let time = |o: &AccelOptions| {
            let flags = if o.fast_build {
                "fast-build"
            } else {
                "fast-trace"
            };
            time_batch(self.ctx, &geometry, &self.group_triangles, o, self.runs)
                .with_context(|| format!("{} streams, {flags}", o.streams))
        };
        in_order(configs, time, &mut each)
    }

    /// The reference: the whole scene as one build input of one GAS, on one stream, for each
    /// of `fast_build`'s flag settings (with `compact` as the batches). `Ok(None)` where the
    /// scene has more triangles than one GAS may hold on this device (their number is
    /// returned).
    pub fn single_gas(
        &self,
        fast_build: &[bool],
        compact: bool,
        mut each: impl FnMut(&AccelOptions, BatchTiming) -> anyhow::Result<()>,
    ) -> anyhow::Result<Result<(), u64>> {
        let limit = super::sys::OPTIX_DEVICE_PROPERTY_LIMIT_MAX_PRIMITIVES_PER_GAS;
        let max_primitives = u64::from(self.ctx.property_u32(limit)?);
        let triangles = self.triangles();
        if triangles > max_primitives {
            return Ok(Err(max_primitives));
        }
        let (positions, indices) = concat_mesh(self.scene);
        let meshes = [(positions.as_slice(), indices.as_slice())];
        let single = DeviceGeometry::upload_meshes(self.ctx.gpu(), &self.upload, &meshes)?;
        for &fast_build in fast_build {
            let o = AccelOptions {
                streams: 1,
                fast_build,
                compact,
                ..AccelOptions::default()
            };
            let flags = if fast_build {
                "fast-build"
            } else {
                "fast-trace"
            };
            let timing = time_batch(self.ctx, &single, &[triangles], &o, self.runs)
                .with_context(|| format!("single GAS, {flags}"))?;
            each(&o, timing)?;
        }
        Ok(Ok(()))
    }
}

/// Times `configs` in order with `time`, handing each result to `each` as it comes, until one
/// fails (or `each` does): what was handed on before stays with the caller.
fn in_order<T>(
    configs: &[AccelOptions],
    mut time: impl FnMut(&AccelOptions) -> anyhow::Result<T>,
    mut each: impl FnMut(&AccelOptions, T) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    for o in configs {
        each(o, time(o)?)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_configuration_keeps_what_was_handed_on_before_it() {
        let configs: Vec<AccelOptions> = [1, 2, 4, 8]
            .map(|streams| AccelOptions {
                streams,
                ..AccelOptions::default()
            })
            .to_vec();
        let mut handed = Vec::new();
        let failed = in_order(
            &configs,
            |o| {
                if o.streams == 4 {
                    anyhow::bail!("cuEventQuery failed: CUDA_ERROR_ILLEGAL_ADDRESS")
                }
                Ok(o.streams)
            },
            |_, streams| {
                handed.push(streams);
                Ok(())
            },
        );
        assert_eq!(handed, [1, 2]);
        assert!(format!("{:#}", failed.unwrap_err()).contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
        let mut all = 0;
        in_order(
            &configs,
            |o| Ok(o.streams),
            |_, _| {
                all += 1;
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(all, 4);
    }
}
