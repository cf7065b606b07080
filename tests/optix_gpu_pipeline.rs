//! GPU checks of the pipeline layer with a hand-written PTX ray-generation program that writes
//! each launch index into a buffer (run with `cargo test -- --ignored` on a GPU machine).

use bytemuck::{Pod, Zeroable};
use gasworks::optix::cuda::Gpu;
use gasworks::optix::error::OptixError;
use gasworks::optix::loader::AbiRequest;
use gasworks::optix::pipeline::{
    launch_and_wait, Module, ModuleCompileOptions, Pipeline, PipelineCompileOptions, ProgramGroup,
    ProgramGroupKind, SbtRecord, ShaderBindingTable,
};
use gasworks::optix::sys::{Abi, OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_ANY};
use gasworks::optix::{ContextOptions, DeviceContext};

/// `params` holds one pointer: out[launch_index.x] = launch_index.x.
const WRITE_INDEX_PTX: &str = r#"
.version 7.0
.target sm_60
.address_size 64

.const .align 8 .b8 params[8];

.visible .entry __raygen__write_index()
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<5>;
    call (%r1), _optix_get_launch_index_x, ();
    ld.const.u64 %rd1, [params];
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    st.global.u32 [%rd4], %r1;
    ret;
}
"#;

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Params {
    out: u64,
}

fn run_write_index(abi: Abi) {
    let gpu = Gpu::open(0).expect("this test needs an NVIDIA GPU");
    let options = ContextOptions {
        abi: AbiRequest::Exactly(abi),
        validation: true,
        library: None,
    };
    let ctx = DeviceContext::new(&gpu, &options).expect("context");
    let pipeline_options = PipelineCompileOptions {
        num_payload_values: 0,
        num_attribute_values: 2,
        traversable_graph_flags: OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_ANY,
        ..Default::default()
    };
    let module = Module::from_ptx(
        &ctx,
        "write_index.ptx",
        WRITE_INDEX_PTX,
        &ModuleCompileOptions::default(),
        &pipeline_options,
    )
    .expect("module");
    let raygen = ProgramGroup::raygen(&ctx, &module, "__raygen__write_index").expect("raygen");
    let miss = ProgramGroup::new(&ctx, ProgramGroupKind::Miss(None)).expect("miss");
    let pipeline = Pipeline::new(&ctx, &pipeline_options, 1, &[raygen.clone(), miss.clone()])
        .expect("pipeline");

    let stream = gpu.new_stream().expect("stream");
    let sbt = ShaderBindingTable::builder()
        .raygen(SbtRecord::new(&raygen, 0u32).expect("raygen record"))
        .and_then(|b| b.miss(&[SbtRecord::new(&miss, 0u32).expect("miss record")]))
        .expect("sbt records")
        .build(&gpu, &stream)
        .expect("sbt");

    let n = 1000usize;
    let out = gpu.alloc(n * 4).expect("out");
    let params = gpu
        .upload(
            &stream,
            &[Params {
                out: out.device_ptr(),
            }],
        )
        .expect("params");
    // SAFETY: `out` holds `n` u32s, one per launch index; the records hold plain integers.
    unsafe { launch_and_wait(&pipeline, &stream, &params, &sbt, n as u32, 1, 1) }.expect("launch");
    let got: Vec<u32> = out.download(&stream, 0, n).expect("download");
    assert_eq!(got, (0..n as u32).collect::<Vec<_>>());
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn launch_writes_indices_abi_105() {
    run_write_index(Abi::V105);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn launch_writes_indices_abi_87() {
    run_write_index(Abi::V87);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn bad_ptx_gives_the_compile_log() {
    let gpu = Gpu::open(0).expect("this test needs an NVIDIA GPU");
    let ctx = DeviceContext::new(&gpu, &ContextOptions::default()).expect("context");
    let err = Module::from_ptx(
        &ctx,
        "broken.ptx",
        ".version 7.0\n.target sm_60\nthis is not ptx\n",
        &ModuleCompileOptions::default(),
        &PipelineCompileOptions::default(),
    )
    .expect_err("broken PTX must not compile");
    match &err {
        OptixError::ModuleCompile { module, log, .. } => {
            assert_eq!(module, "broken.ptx");
            assert!(!log.trim().is_empty(), "OptiX gave no log: {err}");
        }
        other => panic!("expected ModuleCompile, got {other:?}"),
    }
}
