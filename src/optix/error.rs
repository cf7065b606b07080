//! Typed errors of the GPU layers. Every error names the failing call and the driver's error
//! name (`OPTIX_ERROR_INVALID_VALUE`, `CUDA_ERROR_OUT_OF_MEMORY`), so a user's report says what
//! went wrong without a debugger. Nothing in the GPU layers panics on a driver result.

use cudarc::driver::DriverError;
use thiserror::Error;

use super::sys::OptixResult;

/// Formats a byte count for people: exact bytes and MiB.
pub fn format_bytes(bytes: usize) -> String {
    format!(
        "{bytes} bytes ({:.1} MiB)",
        bytes as f64 / (1024.0 * 1024.0)
    )
}

/// Errors of the CUDA driver layer (`optix::cuda`).
#[derive(Debug, Error)]
pub enum CudaError {
    /// No usable NVIDIA GPU: libcuda missing, no device, or the driver refused to start.
    #[error("no NVIDIA GPU found ({reason})")]
    NoDevice { reason: String },

    /// A driver call failed.
    #[error("{call} failed: {name}")]
    Call {
        call: &'static str,
        /// The CUDA error name, e.g. `CUDA_ERROR_INVALID_VALUE`.
        name: String,
    },

    /// A device allocation failed for lack of memory.
    #[error("GPU out of memory: {call} asked for {}{}", format_bytes(*.requested), free_of_total(*.free, *.total))]
    OutOfMemory {
        call: &'static str,
        requested: usize,
        free: Option<usize>,
        total: Option<usize>,
    },

    /// A request the safe layer refuses before reaching the driver (a slice out of range, a
    /// size mismatch...).
    #[error("{0}")]
    InvalidArgument(String),
}

fn free_of_total(free: Option<usize>, total: Option<usize>) -> String {
    match (free, total) {
        (Some(f), Some(t)) => format!(" with {} free of {}", format_bytes(f), format_bytes(t)),
        _ => String::new(),
    }
}

/// The name of a CUDA driver error, as in the CUDA headers.
pub fn cuda_error_name(error: &DriverError) -> String {
    format!("{:?}", error.0)
}

/// The CUDA errors after which the context is unusable: the driver documents each as leaving
/// "the process in an inconsistent state", every later call in the context returning the same
/// error until the process ends. They come from device code (a kernel's illegal address or
/// instruction, a trap, an assert, a hardware stack overflow, a watchdog timeout) or from the
/// context being gone. Any other error (out of memory, an invalid value) concerns only the
/// call that returned it.
pub const STICKY_CUDA_ERRORS: [&str; 10] = [
    "CUDA_ERROR_ILLEGAL_ADDRESS",
    "CUDA_ERROR_LAUNCH_TIMEOUT",
    "CUDA_ERROR_CONTEXT_IS_DESTROYED",
    "CUDA_ERROR_ASSERT",
    "CUDA_ERROR_HARDWARE_STACK_ERROR",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION",
    "CUDA_ERROR_MISALIGNED_ADDRESS",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE",
    "CUDA_ERROR_INVALID_PC",
    "CUDA_ERROR_LAUNCH_FAILED",
];

impl CudaError {
    /// Wraps a driver error with the name of the call that returned it.
    pub fn call(call: &'static str, error: DriverError) -> CudaError {
        CudaError::Call {
            call,
            name: cuda_error_name(&error),
        }
    }

    /// Whether the error leaves the CUDA context unusable ([`STICKY_CUDA_ERRORS`]).
    pub fn is_sticky(&self) -> bool {
        matches!(self, CudaError::Call { name, .. } if STICKY_CUDA_ERRORS.contains(&name.as_str()))
    }
}

/// Logs an error met while releasing a GPU resource (in a `Drop`, where it cannot be
/// returned). After a sticky error every release in the context fails with it; that loss was
/// reported where it happened, and the driver frees the context's memory with the context, so
/// those failures are logged at debug level: a render that lost its GPU and finished on the
/// other workers does not end in a screenful of them.
pub fn log_release_failure(what: std::fmt::Arguments, error: &CudaError) {
    if error.is_sticky() {
        log::debug!("{what}: {error} (the context is lost; its memory goes with it)");
    } else {
        log::warn!("{what}: {error}");
    }
}

/// Adds the failing call's name to a cudarc result.
pub trait CudaResultExt<T> {
    fn during(self, call: &'static str) -> Result<T, CudaError>;
}

impl<T> CudaResultExt<T> for Result<T, DriverError> {
    fn during(self, call: &'static str) -> Result<T, CudaError> {
        self.map_err(|e| CudaError::call(call, e))
    }
}

/// Errors of the OptiX layers (`optix::loader`, `optix::context`, `optix::pipeline`...).
#[derive(Debug, Error)]
pub enum OptixError {
    /// `libnvoptix.so.1` (or `$GASWORKS_OPTIX_LIBRARY`) could not be loaded: no NVIDIA driver.
    #[error(
        "the OptiX library {path} could not be loaded ({reason}); OptiX comes with the NVIDIA \
         driver (R535 or newer), set GASWORKS_OPTIX_LIBRARY to use another copy"
    )]
    LibraryNotFound { path: String, reason: String },

    /// The driver does not know the ABI asked for.
    #[error(
        "the NVIDIA driver does not support OptiX ABI {abi} ({sdk}): it needs driver \
         {minimum_driver} or newer"
    )]
    DriverTooOld {
        abi: u32,
        sdk: &'static str,
        minimum_driver: &'static str,
    },

    /// `--optix-abi N` with an N gasworks does not speak.
    #[error("OptiX ABI {requested} is not supported: use 105 (OptiX 9.0) or 87 (OptiX 8.0)")]
    UnsupportedAbiRequest { requested: u32 },

    /// The driver's function table lacks an entry gasworks calls.
    #[error("the OptiX function table (ABI {}) has no {name}", .abi.number())]
    MissingEntry {
        name: &'static str,
        abi: super::sys::Abi,
    },

    /// An OptiX call failed.
    #[error("{call} failed: {name}{}", log_suffix(.log))]
    Call {
        call: &'static str,
        /// The OptiX error name, e.g. `OPTIX_ERROR_INVALID_VALUE`.
        name: String,
        /// What OptiX wrote to the call's log string, if it has one.
        log: String,
    },

    /// `optixModuleCreate` rejected the PTX; `log` is OptiX's compile log.
    #[error("OptiX module {module} failed to compile ({name}):\n{log}")]
    ModuleCompile {
        module: String,
        name: String,
        log: String,
    },

    /// OptiX ran out of device memory.
    #[error("GPU out of memory in {call} (OPTIX_ERROR_DEVICE_OUT_OF_MEMORY){}", .requested.map(|r| format!(": asked for {}", format_bytes(r))).unwrap_or_default())]
    OutOfMemory {
        call: &'static str,
        requested: Option<usize>,
    },

    /// A request the safe layer refuses before reaching the driver.
    #[error("{0}")]
    InvalidArgument(String),

    #[error(transparent)]
    Cuda(#[from] CudaError),
}

impl OptixError {
    /// Whether the error is a CUDA error that leaves the context unusable
    /// ([`CudaError::is_sticky`]). An OptiX call's own error names no CUDA error, so it is not
    /// taken for one: OPTIX_ERROR_CUDA_ERROR and OPTIX_ERROR_LAUNCH_FAILURE may follow a
    /// sticky error, and then the next CUDA call on the stream names it.
    pub fn is_sticky(&self) -> bool {
        matches!(self, OptixError::Cuda(e) if e.is_sticky())
    }
}

fn log_suffix(log: &str) -> String {
    let log = log.trim();
    if log.is_empty() {
        String::new()
    } else {
        format!("; OptiX log:\n{log}")
    }
}

impl OptixError {
    /// The error of a failed call that has no log string.
    pub fn call(call: &'static str, code: OptixResult) -> OptixError {
        Self::call_with_log(call, code, String::new())
    }

    /// The error of a failed call, with what OptiX wrote to its log string.
    pub fn call_with_log(call: &'static str, code: OptixResult, log: String) -> OptixError {
        if code == OptixResult::ERROR_DEVICE_OUT_OF_MEMORY {
            return OptixError::OutOfMemory {
                call,
                requested: None,
            };
        }
        OptixError::Call {
            call,
            name: code
                .name()
                .map(str::to_string)
                .unwrap_or_else(|| format!("OptixResult({})", code.0)),
            log,
        }
    }
}

/// `Ok(())` on `OPTIX_SUCCESS`, else the error naming `call`.
pub fn check(call: &'static str, code: OptixResult) -> Result<(), OptixError> {
    if code.is_success() {
        Ok(())
    } else {
        Err(OptixError::call(call, code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cudarc::driver::sys::CUresult;

    #[test]
    fn cuda_errors_name_the_call_and_the_code() {
        let e = CudaError::call(
            "cuMemAlloc",
            DriverError(CUresult::CUDA_ERROR_INVALID_VALUE),
        );
        assert_eq!(e.to_string(), "cuMemAlloc failed: CUDA_ERROR_INVALID_VALUE");
        let r: Result<(), DriverError> = Err(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        let e = r.during("cuCtxSynchronize").unwrap_err();
        assert!(e.to_string().contains("CUDA_ERROR_OUT_OF_MEMORY"));
        assert!(e.to_string().starts_with("cuCtxSynchronize failed"));
    }

    /// The sticky errors are named as cudarc names them (a misspelt name would never match),
    /// and errors of one call are not sticky.
    #[test]
    fn sticky_errors_are_the_ones_that_leave_the_context_unusable() {
        use CUresult::*;
        for code in [
            CUDA_ERROR_ILLEGAL_ADDRESS,
            CUDA_ERROR_LAUNCH_TIMEOUT,
            CUDA_ERROR_CONTEXT_IS_DESTROYED,
            CUDA_ERROR_ASSERT,
            CUDA_ERROR_HARDWARE_STACK_ERROR,
            CUDA_ERROR_ILLEGAL_INSTRUCTION,
            CUDA_ERROR_MISALIGNED_ADDRESS,
            CUDA_ERROR_INVALID_ADDRESS_SPACE,
            CUDA_ERROR_INVALID_PC,
            CUDA_ERROR_LAUNCH_FAILED,
        ] {
            let e = CudaError::call("cuStreamSynchronize", DriverError(code));
            assert!(e.is_sticky(), "{e}");
        }
        for code in [
            CUDA_ERROR_OUT_OF_MEMORY,
            CUDA_ERROR_INVALID_VALUE,
            CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
            CUDA_ERROR_NOT_READY,
        ] {
            let e = CudaError::call("cuLaunchKernel", DriverError(code));
            assert!(!e.is_sticky(), "{e}");
        }
        let oom = CudaError::OutOfMemory {
            call: "cuMemAlloc",
            requested: 1,
            free: None,
            total: None,
        };
        assert!(!oom.is_sticky());
    }

    #[test]
    fn out_of_memory_says_the_bytes_asked_for() {
        let e = CudaError::OutOfMemory {
            call: "cuMemAlloc",
            requested: 3 << 30,
            free: Some(1 << 30),
            total: Some(80 << 30),
        };
        let s = e.to_string();
        assert!(s.contains("3221225472 bytes (3072.0 MiB)"), "{s}");
        assert!(s.contains("1073741824 bytes (1024.0 MiB) free"), "{s}");
        let e = CudaError::OutOfMemory {
            call: "cuMemAlloc",
            requested: 10,
            free: None,
            total: None,
        };
        assert_eq!(
            e.to_string(),
            "GPU out of memory: cuMemAlloc asked for 10 bytes (0.0 MiB)"
        );
    }

    #[test]
    fn optix_errors_name_the_call_and_the_code() {
        let e = OptixError::call("optixAccelBuild", OptixResult::ERROR_INVALID_VALUE);
        assert_eq!(
            e.to_string(),
            "optixAccelBuild failed: OPTIX_ERROR_INVALID_VALUE"
        );
        let e = OptixError::call_with_log(
            "optixPipelineCreate",
            OptixResult::ERROR_PIPELINE_LINK_ERROR,
            "missing __raygen__rg\n".into(),
        );
        assert_eq!(
            e.to_string(),
            "optixPipelineCreate failed: OPTIX_ERROR_PIPELINE_LINK_ERROR; OptiX log:\nmissing __raygen__rg"
        );
        let e = OptixError::call("optixLaunch", OptixResult(4242));
        assert_eq!(e.to_string(), "optixLaunch failed: OptixResult(4242)");
        assert!(check("optixLaunch", OptixResult::SUCCESS).is_ok());
        assert!(matches!(
            check("optixAccelBuild", OptixResult::ERROR_DEVICE_OUT_OF_MEMORY),
            Err(OptixError::OutOfMemory {
                call: "optixAccelBuild",
                ..
            })
        ));
    }

    #[test]
    fn driver_too_old_names_the_minimum_driver() {
        let e = OptixError::DriverTooOld {
            abi: 105,
            sdk: "OptiX 9.0",
            minimum_driver: "R570",
        };
        assert!(e.to_string().contains("R570 or newer"), "{e}");
        let e = OptixError::DriverTooOld {
            abi: 87,
            sdk: "OptiX 8.0",
            minimum_driver: "R535",
        };
        assert!(e.to_string().contains("R535 or newer"), "{e}");
    }

    #[test]
    fn module_compile_error_carries_the_log() {
        let e = OptixError::ModuleCompile {
            module: "raycast.ptx".into(),
            name: "OPTIX_ERROR_INVALID_PTX".into(),
            log: "line 3: syntax error".into(),
        };
        let s = e.to_string();
        assert!(
            s.contains("raycast.ptx") && s.contains("line 3: syntax error"),
            "{s}"
        );
    }
}
