//! GPU checks of the CUDA and OptiX context layers (run with `cargo test -- --ignored` on a
//! machine with an NVIDIA GPU and driver R570+; ABI 87 needs R535+).

use gasworks::optix::cuda::{DeviceBuffer, Gpu};
use gasworks::optix::error::{CudaError, OptixError};
use gasworks::optix::loader::AbiRequest;
use gasworks::optix::sys::{
    Abi, OPTIX_DEVICE_PROPERTY_LIMIT_MAX_PRIMITIVES_PER_GAS,
    OPTIX_DEVICE_PROPERTY_LIMIT_MAX_SBT_RECORDS_PER_GAS, OPTIX_DEVICE_PROPERTY_RTCORE_VERSION,
};
use gasworks::optix::{ContextOptions, DeviceContext};

fn gpu() -> Gpu {
    Gpu::open(0).expect("this test needs an NVIDIA GPU")
}

fn context_with(abi: Abi, validation: bool) {
    let gpu = gpu();
    let options = ContextOptions {
        abi: AbiRequest::Exactly(abi),
        validation,
        library: None,
    };
    let ctx = DeviceContext::new(&gpu, &options).expect("OptiX context");
    assert_eq!(ctx.abi(), abi);
    assert_eq!(ctx.validation(), validation);
    // OptiX documents 2^29 primitives per GAS on current GPUs; any positive value proves the
    // property call went through the table.
    let max_prims = ctx
        .property_u32(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_PRIMITIVES_PER_GAS)
        .expect("property");
    assert!(max_prims >= 1 << 20, "max primitives per GAS {max_prims}");
    // A merged GAS has up to DEFAULT_MERGED_GAS_INPUTS build inputs, one SBT record each: the
    // default must be one every device takes.
    let max_records = ctx
        .property_u32(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_SBT_RECORDS_PER_GAS)
        .expect("property");
    assert!(
        u64::from(max_records) >= gasworks::optix::plan::DEFAULT_MERGED_GAS_INPUTS as u64,
        "max SBT records per GAS {max_records}"
    );
    let rtcore = ctx
        .property_u32(OPTIX_DEVICE_PROPERTY_RTCORE_VERSION)
        .expect("property");
    eprintln!(
        "{}: {} (RT core version {rtcore}, {max_prims} primitives and {max_records} SBT records per GAS)",
        gpu.info(),
        ctx.abi()
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn context_with_abi_105() {
    context_with(Abi::V105, false);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn context_with_abi_87() {
    context_with(Abi::V87, false);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn context_in_validation_mode() {
    context_with(Abi::V105, true);
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn newest_abi_is_105_on_a_recent_driver() {
    let gpu = gpu();
    let ctx = DeviceContext::new(&gpu, &ContextOptions::default()).expect("OptiX context");
    assert_eq!(
        ctx.abi(),
        Abi::V105,
        "driver R570+ expected on the test machine"
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn missing_optix_library_is_a_typed_error() {
    let gpu = gpu();
    let options = ContextOptions {
        library: Some("/nonexistent/libnvoptix.so.1".into()),
        ..Default::default()
    };
    match DeviceContext::new(&gpu, &options) {
        Err(OptixError::LibraryNotFound { path, .. }) => {
            assert_eq!(path, "/nonexistent/libnvoptix.so.1")
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn probe_lists_the_gpu() {
    let gpus = gasworks::optix::probe().expect("probe");
    assert!(!gpus.is_empty());
    let g = &gpus[0];
    assert!(
        g.total_memory > 1 << 30 && g.compute_capability.0 >= 5,
        "{g}"
    );
    assert!(g.cuda_driver_version >= 12000, "{g}");
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn buffers_round_trip_and_slice() {
    let gpu = gpu();
    let stream = gpu.new_stream().expect("stream");
    let data: Vec<u32> = (0..10_000u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let mut buffer = gpu.upload(&stream, &data).expect("upload");
    assert_eq!(buffer.len_bytes(), 40_000);
    assert_eq!(
        buffer.device_ptr() % 256,
        0,
        "cuMemAlloc is 256-byte aligned"
    );
    let back: Vec<u32> = buffer.download(&stream, 0, data.len()).expect("download");
    assert_eq!(back, data);

    // Overwrite a middle part, read a sub-range back.
    buffer
        .upload(&stream, 400, &[7u32; 10])
        .expect("partial upload");
    let mid: Vec<u32> = buffer.download(&stream, 396, 12).expect("partial download");
    assert_eq!(mid[0], data[99]);
    assert_eq!(&mid[1..11], &[7u32; 10]);
    assert_eq!(mid[11], data[110]);

    let slice = buffer.slice(128, 256).expect("slice");
    assert_eq!(slice.device_ptr(), buffer.device_ptr() + 128);
    assert!(buffer.slice(39_999, 2).is_err());
    assert!(buffer.download::<u32>(&stream, 39_998, 1).is_err());

    buffer.zero(&stream).expect("zero");
    let zeros: Vec<u32> = buffer.download(&stream, 0, data.len()).expect("download");
    assert!(zeros.iter().all(|&v| v == 0));

    let empty = DeviceBuffer::alloc(&gpu, 0).expect("empty");
    assert_eq!((empty.device_ptr(), empty.len_bytes()), (0, 0));
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn out_of_memory_names_the_bytes_asked_for() {
    let gpu = gpu();
    let (_, total) = gpu.memory_info().expect("memory info");
    let asked = total * 4;
    match DeviceBuffer::alloc(&gpu, asked) {
        Err(e @ CudaError::OutOfMemory { requested, .. }) => {
            assert_eq!(requested, asked);
            assert!(e.to_string().contains(&asked.to_string()), "{e}");
        }
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU"]
fn events_time_and_order_streams() {
    let gpu = gpu();
    let a = gpu.new_stream().expect("stream a");
    let b = gpu.new_stream().expect("stream b");
    let start = gpu.new_event(true).expect("event");
    let end = gpu.new_event(true).expect("event");
    let mut big = DeviceBuffer::alloc(&gpu, 256 << 20).expect("alloc");
    start.record(&a).expect("record");
    big.zero(&a).expect("memset");
    end.record(&a).expect("record");
    let ms = start.elapsed_ms(&end).expect("elapsed");
    // The events bracket a 256 MiB memset, which takes far longer than the events' resolution
    // (about half a microsecond): a timing that measured nothing (or the wrong pair) reads 0.
    // This is a check that the events time the work between them, not a speed claim.
    assert!(ms.is_finite() && ms > 0.0, "elapsed {ms}");

    // Stream b waits for a's upload before reading: the download on b sees the data.
    let mut buf = DeviceBuffer::alloc(&gpu, 4096).expect("alloc");
    let ready = gpu.new_event(false).expect("event");
    buf.upload(&a, 0, &[42u8; 4096]).expect("upload");
    ready.record(&a).expect("record");
    b.wait(&ready).expect("wait");
    let back: Vec<u8> = buf.download(&b, 0, 4096).expect("download");
    assert!(back.iter().all(|&v| v == 42));
    assert!(ready.is_complete().expect("query"));
    gpu.context().check_err().expect("no deferred CUDA errors");
}
