//! The OptiX loader: opens the driver's `libnvoptix.so.1` (or `$GASWORKS_OPTIX_LIBRARY`), asks
//! it for the function table of an ABI declared in [`super::sys`], newest first, and checks
//! every entry gasworks calls. [`Api`] is the one dispatch the safe layers call through.
//!
//! It sits above [`super::sys`] and [`super::error`]: the raw ABI knows no errors, and the
//! loader turns the driver's answers into [`OptixError`]s.

use std::ffi::{c_int, c_void, CStr};
use std::fmt;
use std::path::{Path, PathBuf};

use super::error::OptixError;
use super::sys::{
    Abi, FnAccelBuild, FnAccelCompact, FnAccelComputeMemoryUsage, FnAccelEmitProperty,
    FnDeviceContextCreate, FnDeviceContextDestroy, FnDeviceContextGetProperty,
    FnDeviceContextSetLogCallback, FnGetErrorName, FnLaunch, FnModuleCreate, FnModuleDestroy,
    FnPipelineCreate, FnPipelineDestroy, FnPipelineSetStackSize, FnProgramGroupCreate,
    FnProgramGroupDestroy, FnProgramGroupGetStackSize, FnQueryFunctionTable, FnSbtRecordPackHeader,
    FunctionTableAbi105, FunctionTableAbi87, FunctionTablePrefix, OptixResult,
};

/// Which ABI to ask the driver for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum AbiRequest {
    /// 105, falling back to 87 when the driver is too old for 105.
    #[default]
    Newest,
    /// Exactly this one (`--optix-abi 87` makes a new driver speak the old ABI).
    Exactly(Abi),
}

impl AbiRequest {
    /// From the CLI's `--optix-abi N` (None: the newest the driver has).
    pub fn from_option(abi: Option<u32>) -> Result<Self, OptixError> {
        match abi {
            None => Ok(AbiRequest::Newest),
            Some(n) => Abi::from_number(n)
                .map(AbiRequest::Exactly)
                .ok_or(OptixError::UnsupportedAbiRequest { requested: n }),
        }
    }

    fn candidates(self) -> Vec<Abi> {
        match self {
            AbiRequest::Newest => Abi::ALL.to_vec(),
            AbiRequest::Exactly(abi) => vec![abi],
        }
    }
}

/// The default name of the OptiX library, installed with the NVIDIA driver.
pub const OPTIX_LIBRARY_NAME: &str = "libnvoptix.so.1";
/// Environment variable naming another OptiX library to load instead.
pub const OPTIX_LIBRARY_ENV: &str = "GASWORKS_OPTIX_LIBRARY";

/// The entries gasworks calls, taken out of whichever ABI's table the driver filled, all checked
/// non-null at load time. Calls go through here whatever the ABI: this is the one dispatch.
#[derive(Clone, Copy)]
pub struct Api {
    pub get_error_name: FnGetErrorName,
    pub get_error_string: FnGetErrorName,
    pub device_context_create: FnDeviceContextCreate,
    pub device_context_destroy: FnDeviceContextDestroy,
    pub device_context_get_property: FnDeviceContextGetProperty,
    pub device_context_set_log_callback: FnDeviceContextSetLogCallback,
    pub module_create: FnModuleCreate,
    pub module_destroy: FnModuleDestroy,
    pub program_group_create: FnProgramGroupCreate,
    pub program_group_destroy: FnProgramGroupDestroy,
    pub program_group_get_stack_size: FnProgramGroupGetStackSize,
    pub pipeline_create: FnPipelineCreate,
    pub pipeline_destroy: FnPipelineDestroy,
    pub pipeline_set_stack_size: FnPipelineSetStackSize,
    pub accel_compute_memory_usage: FnAccelComputeMemoryUsage,
    pub accel_build: FnAccelBuild,
    pub accel_compact: FnAccelCompact,
    pub accel_emit_property: FnAccelEmitProperty,
    pub sbt_record_pack_header: FnSbtRecordPackHeader,
    pub launch: FnLaunch,
}

fn required<F>(entry: Option<F>, name: &'static str, abi: Abi) -> Result<F, OptixError> {
    entry.ok_or(OptixError::MissingEntry { name, abi })
}

impl Api {
    fn from_parts(
        p: &FunctionTablePrefix,
        pack: Option<FnSbtRecordPackHeader>,
        launch: Option<FnLaunch>,
        abi: Abi,
    ) -> Result<Api, OptixError> {
        Ok(Api {
            get_error_name: required(p.optix_get_error_name, "optixGetErrorName", abi)?,
            get_error_string: required(p.optix_get_error_string, "optixGetErrorString", abi)?,
            device_context_create: required(
                p.optix_device_context_create,
                "optixDeviceContextCreate",
                abi,
            )?,
            device_context_destroy: required(
                p.optix_device_context_destroy,
                "optixDeviceContextDestroy",
                abi,
            )?,
            device_context_get_property: required(
                p.optix_device_context_get_property,
                "optixDeviceContextGetProperty",
                abi,
            )?,
            device_context_set_log_callback: required(
                p.optix_device_context_set_log_callback,
                "optixDeviceContextSetLogCallback",
                abi,
            )?,
            module_create: required(p.optix_module_create, "optixModuleCreate", abi)?,
            module_destroy: required(p.optix_module_destroy, "optixModuleDestroy", abi)?,
            program_group_create: required(
                p.optix_program_group_create,
                "optixProgramGroupCreate",
                abi,
            )?,
            program_group_destroy: required(
                p.optix_program_group_destroy,
                "optixProgramGroupDestroy",
                abi,
            )?,
            program_group_get_stack_size: required(
                p.optix_program_group_get_stack_size,
                "optixProgramGroupGetStackSize",
                abi,
            )?,
            pipeline_create: required(p.optix_pipeline_create, "optixPipelineCreate", abi)?,
            pipeline_destroy: required(p.optix_pipeline_destroy, "optixPipelineDestroy", abi)?,
            pipeline_set_stack_size: required(
                p.optix_pipeline_set_stack_size,
                "optixPipelineSetStackSize",
                abi,
            )?,
            accel_compute_memory_usage: required(
                p.optix_accel_compute_memory_usage,
                "optixAccelComputeMemoryUsage",
                abi,
            )?,
            accel_build: required(p.optix_accel_build, "optixAccelBuild", abi)?,
            accel_compact: required(p.optix_accel_compact, "optixAccelCompact", abi)?,
            accel_emit_property: required(
                p.optix_accel_emit_property,
                "optixAccelEmitProperty",
                abi,
            )?,
            sbt_record_pack_header: required(pack, "optixSbtRecordPackHeader", abi)?,
            launch: required(launch, "optixLaunch", abi)?,
        })
    }

    /// The driver's name for a result code (falls back to our own table, then the number).
    pub fn error_name(&self, result: OptixResult) -> String {
        if let Some(name) = result.name() {
            return name.to_string();
        }
        // SAFETY: optixGetErrorName accepts any code and returns a static string or null.
        let ptr = unsafe { (self.get_error_name)(result) };
        if ptr.is_null() {
            format!("OptixResult({})", result.0)
        } else {
            // SAFETY: non-null, NUL-terminated static string owned by the driver.
            unsafe { CStr::from_ptr(ptr) }
                .to_string_lossy()
                .into_owned()
        }
    }
}

/// The loaded OptiX library with its function table. Keep it alive as long as any OptiX object
/// exists (the safe layer holds it in an `Arc`).
pub struct OptixLibrary {
    api: Api,
    abi: Abi,
    path: PathBuf,
    // Dropped last: unloading the library invalidates every pointer in `api`.
    _library: libloading::Library,
}

impl fmt::Debug for OptixLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OptixLibrary")
            .field("abi", &self.abi)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl OptixLibrary {
    /// The library to load: `$GASWORKS_OPTIX_LIBRARY` if set, else `libnvoptix.so.1` from the
    /// dynamic loader's search path.
    pub fn default_path() -> PathBuf {
        std::env::var_os(OPTIX_LIBRARY_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(OPTIX_LIBRARY_NAME))
    }

    /// Loads the default library (see [`OptixLibrary::default_path`]).
    pub fn load(request: AbiRequest) -> Result<OptixLibrary, OptixError> {
        Self::load_from(&Self::default_path(), request)
    }

    /// Loads `path` and asks it for a function table: the newest ABI first when `request` is
    /// [`AbiRequest::Newest`], else exactly the one asked for.
    pub fn load_from(path: &Path, request: AbiRequest) -> Result<OptixLibrary, OptixError> {
        // SAFETY: loading a shared library runs its initialisers; libnvoptix is the driver's
        // own library (or one the user named explicitly through the environment).
        let library =
            unsafe { libloading::Library::new(path) }.map_err(|e| OptixError::LibraryNotFound {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?;
        // SAFETY: the symbol has the documented optixQueryFunctionTable signature.
        let query: FnQueryFunctionTable = unsafe {
            library
                .get::<FnQueryFunctionTable>(b"optixQueryFunctionTable\0")
                .map(|symbol| *symbol)
        }
        .map_err(|e| OptixError::LibraryNotFound {
            path: path.display().to_string(),
            reason: format!("no optixQueryFunctionTable symbol: {e}"),
        })?;

        let candidates = request.candidates();
        let mut last_error = None;
        for abi in candidates {
            match query_table(query, abi) {
                Ok(api) => {
                    log::debug!("OptiX: {} from {}", abi, path.display());
                    return Ok(OptixLibrary {
                        api,
                        abi,
                        path: path.to_path_buf(),
                        _library: library,
                    });
                }
                Err(e @ OptixError::DriverTooOld { .. }) => {
                    log::debug!("OptiX: {e}; trying an older ABI if allowed");
                    last_error = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or(OptixError::UnsupportedAbiRequest { requested: 0 }))
    }

    pub fn abi(&self) -> Abi {
        self.abi
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The common dispatch table.
    pub fn api(&self) -> &Api {
        &self.api
    }
}

/// Asks for one ABI's table and turns it into the common [`Api`].
fn query_table(query: FnQueryFunctionTable, abi: Abi) -> Result<Api, OptixError> {
    let call = |table: *mut c_void, size: usize| {
        // SAFETY: `table` points to a zeroed, writable table of exactly `size` bytes laid out
        // as this ABI's OptixFunctionTable; no options are passed.
        unsafe {
            query(
                abi.number() as c_int,
                0,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                table,
                size,
            )
        }
    };
    let (result, api) = match abi {
        Abi::V87 => {
            let mut t = Box::new(FunctionTableAbi87::empty());
            let r = call(
                (&mut *t as *mut FunctionTableAbi87).cast(),
                std::mem::size_of::<FunctionTableAbi87>(),
            );
            let api = r.is_success().then(|| {
                Api::from_parts(
                    &t.prefix,
                    t.optix_sbt_record_pack_header,
                    t.optix_launch,
                    abi,
                )
            });
            (r, api)
        }
        Abi::V105 => {
            let mut t = Box::new(FunctionTableAbi105::empty());
            let r = call(
                (&mut *t as *mut FunctionTableAbi105).cast(),
                std::mem::size_of::<FunctionTableAbi105>(),
            );
            let api = r.is_success().then(|| {
                Api::from_parts(
                    &t.prefix,
                    t.optix_sbt_record_pack_header,
                    t.optix_launch,
                    abi,
                )
            });
            (r, api)
        }
    };
    match (result, api) {
        (_, Some(api)) => api,
        (OptixResult::ERROR_UNSUPPORTED_ABI_VERSION, None) => Err(OptixError::DriverTooOld {
            abi: abi.number(),
            sdk: abi.sdk(),
            minimum_driver: abi.minimum_driver(),
        }),
        (code, None) => Err(OptixError::call("optixQueryFunctionTable", code)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_requests() {
        assert_eq!(AbiRequest::from_option(None).ok(), Some(AbiRequest::Newest));
        assert_eq!(
            AbiRequest::from_option(Some(87)).ok(),
            Some(AbiRequest::Exactly(Abi::V87))
        );
        assert_eq!(
            AbiRequest::from_option(Some(105)).ok(),
            Some(AbiRequest::Exactly(Abi::V105))
        );
        assert!(matches!(
            AbiRequest::from_option(Some(84)),
            Err(OptixError::UnsupportedAbiRequest { requested: 84 })
        ));
        assert_eq!(AbiRequest::Newest.candidates(), vec![Abi::V105, Abi::V87]);
        assert_eq!(AbiRequest::Exactly(Abi::V87).candidates(), vec![Abi::V87]);
    }

    #[test]
    fn missing_library_is_a_typed_error() {
        let err = OptixLibrary::load_from(
            Path::new("/nonexistent/libnvoptix.so.1"),
            AbiRequest::Newest,
        )
        .err();
        match err {
            Some(OptixError::LibraryNotFound { path, .. }) => {
                assert_eq!(path, "/nonexistent/libnvoptix.so.1")
            }
            other => panic!("expected LibraryNotFound, got {other:?}"),
        }
    }
}
