//! The OptiX loader against a fake `libnvoptix` (tests/support/fake_optix.c), so that ABI
//! selection, the fallback from 105 to 87, `--optix-abi 87` on a new driver, the table sizes and
//! the per-ABI entry positions are all checked on a machine without a GPU.

mod support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use gasworks::optix::error::OptixError;
use gasworks::optix::loader::{AbiRequest, OptixLibrary, OPTIX_LIBRARY_ENV};
use gasworks::optix::sys::{
    Abi, OptixAccelBufferSizes, OptixBuildInput, OptixBuildInputInstanceArray,
    OptixBuildInputTriangleArray, OptixResult,
};

struct Fakes {
    driver_105: PathBuf,
    driver_87: PathBuf,
    wrong_size: PathBuf,
    null_launch: PathBuf,
    no_symbol: PathBuf,
}

/// Builds the fake drivers once per test binary, in Cargo's scratch directory for tests.
fn fakes() -> Option<&'static Fakes> {
    static FAKES: OnceLock<Option<Fakes>> = OnceLock::new();
    FAKES
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("optix_abi_loader");
            std::fs::create_dir_all(&dir).expect("scratch dir");
            let build = |name: &str, defines: &[&str]| {
                support::build_shared_library("fake_optix.c", &dir, name, defines)
            };
            Some(Fakes {
                driver_105: build("libfake105.so", &["MAX_ABI=105"])?,
                driver_87: build("libfake87.so", &["MAX_ABI=87"])?,
                wrong_size: build("libfakesize.so", &["WRONG_SIZE"])?,
                null_launch: build("libfakenull.so", &["NULL_LAUNCH"])?,
                no_symbol: support::build_shared_library(
                    "nvtx_recorder.c",
                    &dir,
                    "libnosym.so",
                    &[],
                )?,
            })
        })
        .as_ref()
}

fn load(path: &Path, request: AbiRequest) -> Result<OptixLibrary, OptixError> {
    OptixLibrary::load_from(path, request)
}

/// Which ABI's slots the table really dispatches to: the fake's pack-header stub writes its
/// ABI into the header, and its launch stub returns the ABI number.
fn dispatched_abi(lib: &OptixLibrary) -> (String, i32) {
    let api = lib.api();
    let mut header = [0u8; 32];
    // SAFETY: the fake's stub ignores the group and writes at most 7 bytes into `header`.
    let r =
        unsafe { (api.sbt_record_pack_header)(std::ptr::null_mut(), header.as_mut_ptr().cast()) };
    assert_eq!(r, OptixResult::SUCCESS);
    let end = header.iter().position(|&b| b == 0).unwrap_or(32);
    let tag = String::from_utf8_lossy(&header[..end]).into_owned();
    // SAFETY: the fake's launch stub ignores its arguments.
    let launched = unsafe {
        (api.launch)(
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            0,
            std::ptr::null(),
            1,
            1,
            1,
        )
    };
    (tag, launched.0)
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn newest_abi_is_chosen_when_the_driver_has_it() {
    let Some(f) = fakes() else { return };
    let lib = load(&f.driver_105, AbiRequest::Newest).expect("load ABI 105");
    assert_eq!(lib.abi(), Abi::V105);
    assert_eq!(dispatched_abi(&lib), ("abi105".to_string(), 105));
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn abi_87_can_be_forced_on_a_new_driver() {
    let Some(f) = fakes() else { return };
    let lib = load(&f.driver_105, AbiRequest::Exactly(Abi::V87)).expect("load ABI 87");
    assert_eq!(lib.abi(), Abi::V87);
    assert_eq!(dispatched_abi(&lib), ("abi87".to_string(), 87));
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn old_driver_falls_back_to_abi_87() {
    let Some(f) = fakes() else { return };
    let lib = load(&f.driver_87, AbiRequest::Newest).expect("fall back to 87");
    assert_eq!(lib.abi(), Abi::V87);
    assert_eq!(dispatched_abi(&lib), ("abi87".to_string(), 87));
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn old_driver_asked_for_105_names_the_minimum_driver() {
    let Some(f) = fakes() else { return };
    match load(&f.driver_87, AbiRequest::Exactly(Abi::V105)) {
        Err(
            e @ OptixError::DriverTooOld {
                abi: 105,
                minimum_driver: "R570",
                ..
            },
        ) => {
            assert!(e.to_string().contains("R570 or newer"), "{e}");
        }
        other => panic!("expected DriverTooOld for ABI 105, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn table_size_mismatch_is_reported_with_its_name() {
    let Some(f) = fakes() else { return };
    match load(&f.wrong_size, AbiRequest::Newest) {
        Err(OptixError::Call { call, name, .. }) => {
            assert_eq!(call, "optixQueryFunctionTable");
            assert_eq!(name, "OPTIX_ERROR_FUNCTION_TABLE_SIZE_MISMATCH");
        }
        other => panic!("expected a size mismatch, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn empty_entry_is_reported_by_name() {
    let Some(f) = fakes() else { return };
    match load(&f.null_launch, AbiRequest::Newest) {
        Err(OptixError::MissingEntry { name, abi }) => {
            assert_eq!(name, "optixLaunch");
            assert_eq!(abi, Abi::V105);
        }
        other => panic!("expected MissingEntry, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn library_without_the_query_symbol_is_not_optix() {
    let Some(f) = fakes() else { return };
    match load(&f.no_symbol, AbiRequest::Newest) {
        Err(OptixError::LibraryNotFound { reason, .. }) => {
            assert!(reason.contains("optixQueryFunctionTable"), "{reason}")
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
fn missing_library_is_a_typed_error() {
    match load(
        Path::new("/nonexistent/libnvoptix.so.1"),
        AbiRequest::Newest,
    ) {
        Err(e @ OptixError::LibraryNotFound { .. }) => {
            assert!(
                e.to_string().contains("/nonexistent/libnvoptix.so.1"),
                "{e}"
            )
        }
        other => panic!("expected LibraryNotFound, got {other:?}"),
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn build_inputs_cross_the_abi_with_their_c_stride() {
    let Some(f) = fakes() else { return };
    for request in [
        AbiRequest::Exactly(Abi::V105),
        AbiRequest::Exactly(Abi::V87),
    ] {
        let lib = load(&f.driver_105, request).expect("load");
        let inputs = [
            OptixBuildInput::triangles(OptixBuildInputTriangleArray {
                num_index_triplets: 5,
                ..Default::default()
            }),
            OptixBuildInput::instances(OptixBuildInputInstanceArray {
                instances: 0,
                num_instances: 7,
                instance_stride: 0,
            }),
            OptixBuildInput::triangles(OptixBuildInputTriangleArray {
                num_index_triplets: 1000,
                ..Default::default()
            }),
        ];
        let mut sizes = OptixAccelBufferSizes::default();
        // SAFETY: the fake only reads the inputs and writes `sizes`.
        let r = unsafe {
            (lib.api().accel_compute_memory_usage)(
                std::ptr::null_mut(),
                std::ptr::null(),
                inputs.as_ptr(),
                inputs.len() as u32,
                &mut sizes,
            )
        };
        assert_eq!(r, OptixResult::SUCCESS);
        assert_eq!(sizes.output_size_in_bytes, 1012);
        assert_eq!(sizes.temp_size_in_bytes, 128);
    }
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn error_names_come_from_our_table_then_the_driver() {
    let Some(f) = fakes() else { return };
    let lib = load(&f.driver_105, AbiRequest::Newest).expect("load");
    assert_eq!(
        lib.api().error_name(OptixResult(7001)),
        "OPTIX_ERROR_INVALID_VALUE"
    );
    assert_eq!(lib.api().error_name(OptixResult(4242)), "FAKE_UNKNOWN_CODE");
}

#[test]
#[cfg_attr(
    gasworks_no_cc,
    ignore = "no C compiler when the tests were built (see build.rs)"
)]
fn environment_names_the_library_to_load() {
    let Some(f) = fakes() else { return };
    // Only this test in this binary reads the variable (the others name their path).
    std::env::set_var(OPTIX_LIBRARY_ENV, &f.driver_87);
    let default = OptixLibrary::default_path();
    let loaded = OptixLibrary::load(AbiRequest::Newest);
    std::env::remove_var(OPTIX_LIBRARY_ENV);
    assert_eq!(default, f.driver_87);
    assert_eq!(loaded.expect("load from the environment").abi(), Abi::V87);
    assert_eq!(
        OptixLibrary::default_path(),
        PathBuf::from("libnvoptix.so.1")
    );
}
