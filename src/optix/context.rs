//! The OptiX device context: the loaded function table (our `optixInit`), a context created on
//! a [`Gpu`]'s CUDA context, OptiX's log routed to the `log` crate, and the acceleration-structure
//! calls the batched builder makes, each returning a typed error that names the call.

use std::ffi::{c_char, c_uint, c_void, CStr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use super::cuda::{DeviceSlice, Gpu, Stream};
use super::error::{check, OptixError};
use super::loader::{AbiRequest, Api, OptixLibrary};
use super::sys::{
    self, Abi, OptixAccelBufferSizes, OptixAccelBuildOptions, OptixAccelEmitDesc, OptixBuildInput,
    OptixDeviceContextOptions, OptixDeviceProperty, OptixResult, OptixTraversableHandle,
};

/// How to create a [`DeviceContext`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContextOptions {
    /// Which ABI to ask the driver for (`--optix-abi`).
    pub abi: AbiRequest,
    /// OptiX validation mode (`--validation`): slow, reports API misuse through the log.
    pub validation: bool,
    /// Load this library instead of `$GASWORKS_OPTIX_LIBRARY` / `libnvoptix.so.1`.
    pub library: Option<PathBuf>,
}

impl ContextOptions {
    /// From the CLI's `--optix-abi` and `--validation`.
    pub fn from_cli(optix_abi: Option<u32>, validation: bool) -> Result<Self, OptixError> {
        Ok(ContextOptions {
            abi: AbiRequest::from_option(optix_abi)?,
            validation,
            library: None,
        })
    }
}

/// OptiX's callback levels: 1 fatal, 2 error, 3 warning, 4 print.
fn log_level_for(optix_level: c_uint) -> log::Level {
    match optix_level {
        0..=2 => log::Level::Error,
        3 => log::Level::Warn,
        _ => log::Level::Info,
    }
}

/// The most verbose OptiX level worth producing given the `log` crate's current filter (asking
/// OptiX for messages nobody shows costs time in validation mode).
fn callback_level_for(filter: log::LevelFilter) -> c_uint {
    match filter {
        log::LevelFilter::Off => 0,
        log::LevelFilter::Error => 2,
        log::LevelFilter::Warn => 3,
        _ => 4,
    }
}

unsafe extern "C" fn log_callback(
    level: c_uint,
    tag: *const c_char,
    message: *const c_char,
    _cbdata: *mut c_void,
) {
    let text = |p: *const c_char| {
        if p.is_null() {
            String::new()
        } else {
            // SAFETY: OptiX passes NUL-terminated strings valid for the call.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    let (tag, message) = (text(tag), text(message));
    log::log!(target: "optix", log_level_for(level), "[{}] {}", tag.trim(), message.trim_end());
}

/// An OptiX device context on one GPU. Destroyed on drop; everything built from it holds an
/// `Arc` to it, so it outlives its modules, pipelines and acceleration structures.
pub struct DeviceContext {
    raw: sys::OptixDeviceContext,
    gpu: Gpu,
    validation: bool,
    /// Held across every call that enqueues acceleration-structure work (build, compaction,
    /// emitted property), so that no two such calls on this context overlap: builds enqueued
    /// from several threads at once, on disjoint streams and memory, gave wrong hits or failed
    /// inside OptiX, whatever the programming guide's thread-safety section promises
    /// (docs/gas-builds.md, step 6). Launches are not serialised: the scheduler's GPU workers
    /// launch from several threads, and their images were bit-identical (docs/gpu-checks.md).
    accel_lock: Mutex<()>,
    // Declared last so that it is dropped after the context is destroyed.
    library: Arc<OptixLibrary>,
}

// SAFETY: OptiX device-context functions may be called from any thread (the OptiX programming
// guide documents the host API as thread safe), except that acceleration-structure enqueues are
// serialised here by `accel_lock`, since concurrent builds were measured to break; the handle
// itself is an immutable pointer, and destruction happens once, in Drop, when no other
// reference exists.
unsafe impl Send for DeviceContext {}
unsafe impl Sync for DeviceContext {}

impl std::fmt::Debug for DeviceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceContext")
            .field("gpu", &self.gpu.info().name)
            .field("abi", &self.library.abi())
            .field("validation", &self.validation)
            .finish()
    }
}

impl DeviceContext {
    /// Loads OptiX (see [`ContextOptions`]) and creates a context on `gpu`.
    pub fn new(gpu: &Gpu, options: &ContextOptions) -> Result<Arc<DeviceContext>, OptixError> {
        let library = match &options.library {
            Some(path) => OptixLibrary::load_from(path, options.abi)?,
            None => OptixLibrary::load(options.abi)?,
        };
        Self::with_library(gpu, Arc::new(library), options.validation)
    }

    /// Creates a context with an already loaded library.
    pub fn with_library(
        gpu: &Gpu,
        library: Arc<OptixLibrary>,
        validation: bool,
    ) -> Result<Arc<DeviceContext>, OptixError> {
        gpu.bind_to_thread()?;
        let context_options = OptixDeviceContextOptions {
            log_callback_function: Some(log_callback),
            log_callback_data: std::ptr::null_mut(),
            log_callback_level: callback_level_for(log::max_level()) as i32,
            validation_mode: if validation {
                sys::OPTIX_DEVICE_CONTEXT_VALIDATION_MODE_ALL
            } else {
                sys::OPTIX_DEVICE_CONTEXT_VALIDATION_MODE_OFF
            },
        };
        let mut raw: sys::OptixDeviceContext = std::ptr::null_mut();
        // SAFETY: the CUDA context is alive (held by `gpu`), the options struct lives across the
        // call, and `raw` receives the new handle.
        let code = unsafe {
            (library.api().device_context_create)(gpu.cu_context(), &context_options, &mut raw)
        };
        check("optixDeviceContextCreate", code)?;
        log::info!(
            "OptiX {} context on {}{}",
            library.abi(),
            gpu.info().name,
            if validation { " (validation mode)" } else { "" }
        );
        Ok(Arc::new(DeviceContext {
            raw,
            gpu: gpu.clone(),
            validation,
            accel_lock: Mutex::new(()),
            library,
        }))
    }

    /// Another context on the same GPU, with the same library and validation mode: its own
    /// OptiX-internal state and its own acceleration-structure lock. See
    /// [`BuildContexts::PerStream`](super::accel::BuildContexts::PerStream).
    pub fn sibling(&self) -> Result<Arc<DeviceContext>, OptixError> {
        Self::with_library(&self.gpu, self.library.clone(), self.validation)
    }

    /// The ABI the driver gave us.
    pub fn abi(&self) -> Abi {
        self.library.abi()
    }

    /// The raw function table, for the thin wrappers in the sibling modules.
    pub fn api(&self) -> &Api {
        self.library.api()
    }

    pub fn library(&self) -> &Arc<OptixLibrary> {
        &self.library
    }

    /// The raw handle, for the thin wrappers in the sibling modules.
    pub fn raw(&self) -> sys::OptixDeviceContext {
        self.raw
    }

    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    pub fn validation(&self) -> bool {
        self.validation
    }

    /// The lock every acceleration-structure enqueue holds (see the field). A poisoned lock
    /// guards nothing but the order of calls, so it is taken all the same.
    fn accel_serial(&self) -> MutexGuard<'_, ()> {
        self.accel_lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A 32-bit device property, e.g. `OPTIX_DEVICE_PROPERTY_LIMIT_MAX_PRIMITIVES_PER_GAS`.
    pub fn property_u32(&self, property: OptixDeviceProperty) -> Result<u32, OptixError> {
        let mut value: u32 = 0;
        // SAFETY: `value` is a writable u32 of the size passed.
        let code = unsafe {
            (self.api().device_context_get_property)(
                self.raw,
                property,
                (&mut value as *mut u32).cast(),
                std::mem::size_of::<u32>(),
            )
        };
        check("optixDeviceContextGetProperty", code)?;
        Ok(value)
    }

    /// `optixAccelComputeMemoryUsage`: the output and scratch bytes a build of `inputs` needs.
    ///
    /// # Safety
    /// Every host pointer inside `inputs` (vertex buffer arrays, flag arrays) must be valid for
    /// the duration of the call.
    pub unsafe fn accel_compute_memory_usage(
        &self,
        options: &OptixAccelBuildOptions,
        inputs: &[OptixBuildInput],
    ) -> Result<OptixAccelBufferSizes, OptixError> {
        let mut sizes = OptixAccelBufferSizes::default();
        let count = count_u32(inputs.len(), "build inputs")?;
        // SAFETY: pointers are valid per this function's contract; `sizes` is writable.
        let code = unsafe {
            (self.api().accel_compute_memory_usage)(
                self.raw,
                options,
                inputs.as_ptr(),
                count,
                &mut sizes,
            )
        };
        check("optixAccelComputeMemoryUsage", code)?;
        Ok(sizes)
    }

    /// `optixAccelBuild` on `stream` into `output`, using `temp` as scratch. Returns the handle at
    /// once; the build runs asynchronously.
    ///
    /// # Safety
    /// - Host pointers inside `inputs` must be valid for the call; the device buffers they name
    ///   (vertices, indices, instances) must stay alive and unchanged until the build is done.
    /// - `temp` and `output` must stay alive until the build is done, and no other work that
    ///   may run at the same time may use any byte of them (the build plan's invariant).
    /// - Both must be aligned to `OPTIX_ACCEL_BUFFER_BYTE_ALIGNMENT`, at least as large as
    ///   [`DeviceContext::accel_compute_memory_usage`] says, and `emitted` results must point to
    ///   live, suitably aligned device memory.
    pub unsafe fn accel_build(
        &self,
        stream: &Stream,
        options: &OptixAccelBuildOptions,
        inputs: &[OptixBuildInput],
        temp: DeviceSlice<'_>,
        output: DeviceSlice<'_>,
        emitted: &[OptixAccelEmitDesc],
    ) -> Result<OptixTraversableHandle, OptixError> {
        check_accel_alignment("temp", temp)?;
        check_accel_alignment("output", output)?;
        let count = count_u32(inputs.len(), "build inputs")?;
        let emitted_count = count_u32(emitted.len(), "emitted properties")?;
        let _serial = self.accel_serial();
        stream.bind_to_thread()?;
        let mut handle: OptixTraversableHandle = 0;
        // SAFETY: per this function's contract.
        let code = unsafe {
            (self.api().accel_build)(
                self.raw,
                stream.raw(),
                options,
                inputs.as_ptr(),
                count,
                temp.device_ptr(),
                temp.len_bytes(),
                output.device_ptr(),
                output.len_bytes(),
                &mut handle,
                if emitted.is_empty() {
                    std::ptr::null()
                } else {
                    emitted.as_ptr()
                },
                emitted_count,
            )
        };
        check_build(
            "optixAccelBuild",
            code,
            temp.len_bytes() + output.len_bytes(),
        )?;
        Ok(handle)
    }

    /// `optixAccelCompact`: copies the structure `input` into `output` (at least its compacted
    /// size) on `stream` and returns the new handle.
    ///
    /// # Safety
    /// The structure behind `input` must be built (ordered before this on `stream`) and stay
    /// alive until the compaction is done; `output` must stay alive, 128-byte aligned and
    /// unused by concurrent work.
    pub unsafe fn accel_compact(
        &self,
        stream: &Stream,
        input: OptixTraversableHandle,
        output: DeviceSlice<'_>,
    ) -> Result<OptixTraversableHandle, OptixError> {
        check_accel_alignment("output", output)?;
        let _serial = self.accel_serial();
        stream.bind_to_thread()?;
        let mut handle: OptixTraversableHandle = 0;
        // SAFETY: per this function's contract.
        let code = unsafe {
            (self.api().accel_compact)(
                self.raw,
                stream.raw(),
                input,
                output.device_ptr(),
                output.len_bytes(),
                &mut handle,
            )
        };
        check_build("optixAccelCompact", code, output.len_bytes())?;
        Ok(handle)
    }

    /// `optixAccelEmitProperty`: writes a property of a built structure (e.g. its compacted
    /// size) to device memory on `stream`.
    ///
    /// # Safety
    /// The structure must be built before this on `stream`, and `desc.result` must point to live
    /// device memory, 8-byte aligned, that stays alive until the write is done.
    pub unsafe fn accel_emit_property(
        &self,
        stream: &Stream,
        handle: OptixTraversableHandle,
        desc: &OptixAccelEmitDesc,
    ) -> Result<(), OptixError> {
        let _serial = self.accel_serial();
        stream.bind_to_thread()?;
        // SAFETY: per this function's contract.
        let code =
            unsafe { (self.api().accel_emit_property)(self.raw, stream.raw(), handle, desc) };
        check("optixAccelEmitProperty", code)
    }
}

impl Drop for DeviceContext {
    fn drop(&mut self) {
        // SAFETY: created by optixDeviceContextCreate, destroyed exactly once; every object made
        // from it holds an Arc to this context, so none is left.
        let code = unsafe { (self.library.api().device_context_destroy)(self.raw) };
        if !code.is_success() {
            log::warn!("optixDeviceContextDestroy failed: {code}");
        }
    }
}

fn count_u32(n: usize, what: &str) -> Result<u32, OptixError> {
    u32::try_from(n).map_err(|_| OptixError::InvalidArgument(format!("{n} {what} is too many")))
}

fn check_accel_alignment(what: &str, slice: DeviceSlice<'_>) -> Result<(), OptixError> {
    let align = sys::OPTIX_ACCEL_BUFFER_BYTE_ALIGNMENT as u64;
    if slice.device_ptr() % align != 0 {
        return Err(OptixError::InvalidArgument(format!(
            "acceleration {what} buffer at {:#x} is not {align}-byte aligned",
            slice.device_ptr()
        )));
    }
    Ok(())
}

/// Like [`check`], but an out-of-memory result says how many bytes the call was given.
fn check_build(call: &'static str, code: OptixResult, bytes: usize) -> Result<(), OptixError> {
    if code == OptixResult::ERROR_DEVICE_OUT_OF_MEMORY {
        return Err(OptixError::OutOfMemory {
            call,
            requested: Some(bytes),
        });
    }
    check(call, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optix_log_levels_map_to_log_levels() {
        assert_eq!(log_level_for(1), log::Level::Error);
        assert_eq!(log_level_for(2), log::Level::Error);
        assert_eq!(log_level_for(3), log::Level::Warn);
        assert_eq!(log_level_for(4), log::Level::Info);
        assert_eq!(callback_level_for(log::LevelFilter::Off), 0);
        assert_eq!(callback_level_for(log::LevelFilter::Error), 2);
        assert_eq!(callback_level_for(log::LevelFilter::Warn), 3);
        assert_eq!(callback_level_for(log::LevelFilter::Info), 4);
        assert_eq!(callback_level_for(log::LevelFilter::Trace), 4);
    }

    #[test]
    fn log_callback_accepts_null_strings() {
        // SAFETY: the callback handles null pointers.
        unsafe { log_callback(3, std::ptr::null(), std::ptr::null(), std::ptr::null_mut()) };
        let tag = c"DISKCACHE";
        let msg = c"Opened database\n";
        // SAFETY: valid NUL-terminated strings.
        unsafe { log_callback(4, tag.as_ptr(), msg.as_ptr(), std::ptr::null_mut()) };
    }

    #[test]
    fn cli_options_parse() {
        let o = ContextOptions::from_cli(Some(87), true).unwrap();
        assert_eq!(o.abi, AbiRequest::Exactly(Abi::V87));
        assert!(o.validation);
        assert!(ContextOptions::from_cli(Some(7), false).is_err());
        assert_eq!(
            ContextOptions::from_cli(None, false).unwrap().abi,
            AbiRequest::Newest
        );
    }

    #[test]
    fn build_out_of_memory_names_the_bytes() {
        let e = check_build(
            "optixAccelBuild",
            OptixResult::ERROR_DEVICE_OUT_OF_MEMORY,
            4096,
        )
        .unwrap_err();
        assert!(matches!(
            e,
            OptixError::OutOfMemory {
                call: "optixAccelBuild",
                requested: Some(4096)
            }
        ));
        assert!(e.to_string().contains("4096 bytes"), "{e}");
    }
}
