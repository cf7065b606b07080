//! The CUDA driver API, loaded at run time through cudarc, behind RAII types that name the
//! failing call in their errors.
//!
//! - [`probe`] and [`Gpu::open`] check FIRST that libcuda can be loaded: cudarc panics when it
//!   is missing, and a machine without a GPU must get [`CudaError::NoDevice`], not a panic.
//! - Contexts, streams and events are cudarc's safe types ([`CudaContext`], [`CudaStream`],
//!   [`CudaEvent`]) wrapped so their errors carry the call name.
//! - [`DeviceBuffer`] is our own untyped allocation (`cuMemAlloc`/`cuMemFree` through cudarc's
//!   `result` layer) rather than cudarc's `CudaSlice`: the batched GAS builds hand raw
//!   sub-ranges of one allocation to OptiX on many streams at once, ordered by our own events,
//!   and `CudaSlice`'s automatic per-slice event tracking would either serialise those streams
//!   or be bypassed anyway. Whoever enqueues work on a buffer keeps the buffer alive until that
//!   work is done (the owners sync their streams before dropping).

use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Arc;

use bytemuck::Pod;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags, CUresult};
use cudarc::driver::{result, CudaContext, CudaEvent, CudaStream, DriverError};

use super::error::{cuda_error_name, log_release_failure, CudaError, CudaResultExt};
use super::sys::{CUcontext, CUdeviceptr, CUstream};

/// The CUDA driver library every NVIDIA driver installs.
pub const CUDA_LIBRARY_NAME: &str = "libcuda.so.1";

/// The kernel of [`Stream::fault_on_purpose`]: one thread storing to address 0. Written by hand
/// (the PTX version and target of the shipped path tracer's, which the GPUs checked load),
/// NUL-terminated for `cuModuleLoadData`.
const FAULT_PTX: &str = "\
.version 8.2
.target sm_75
.address_size 64

.visible .entry gasworks_fault()
{
	.reg .b64 %rd<2>;
	.reg .b32 %r<2>;
	mov.u64 %rd1, 0;
	mov.u32 %r1, 1;
	st.volatile.global.u32 [%rd1], %r1;
	ret;
}
\0";
const FAULT_ENTRY: &std::ffi::CStr = c"gasworks_fault";

/// What the CLI and the benchmarks say about one GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub ordinal: usize,
    pub name: String,
    /// (major, minor), e.g. (9, 0) for an H100.
    pub compute_capability: (i32, i32),
    pub total_memory: usize,
    /// `cuDriverGetVersion`: the newest CUDA API the driver supports, e.g. 12080 for 12.8.
    pub cuda_driver_version: i32,
    /// The NVIDIA driver release (e.g. "580.65.06") when the kernel module says it.
    pub driver_release: Option<String>,
    /// Streaming multiprocessors (`CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`): 132 on an H100.
    pub multiprocessors: u32,
    /// Threads one multiprocessor keeps resident (`..._MAX_THREADS_PER_MULTIPROCESSOR`).
    pub max_threads_per_multiprocessor: u32,
}

impl GpuInfo {
    /// "12.8" for 12080.
    pub fn cuda_version_string(&self) -> String {
        cuda_version_string(self.cuda_driver_version)
    }
}

impl std::fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GPU {}: {} (sm_{}{}, {:.1} GiB), driver {} (CUDA {})",
            self.ordinal,
            self.name,
            self.compute_capability.0,
            self.compute_capability.1,
            self.total_memory as f64 / (1u64 << 30) as f64,
            self.driver_release.as_deref().unwrap_or("unknown"),
            self.cuda_version_string()
        )
    }
}

/// "12.8" for 12080, "13.0" for 13000.
pub fn cuda_version_string(version: i32) -> String {
    format!("{}.{}", version / 1000, (version % 1000) / 10)
}

/// The NVIDIA driver release from `/proc/driver/nvidia/version`, e.g. "580.65.06".
pub fn driver_release() -> Option<String> {
    let text = std::fs::read_to_string("/proc/driver/nvidia/version").ok()?;
    parse_driver_release(&text)
}

/// Finds the release number in the kernel module's version line ("... Kernel Module  580.65.06
/// Sun Jul 27 ...", or "... Kernel Module for x86_64  580.65.06 ...").
fn parse_driver_release(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.contains("Kernel Module"))?;
    line.split_whitespace()
        .find(|w| {
            let parts: Vec<&str> = w.split('.').collect();
            parts.len() >= 2
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        })
        .map(str::to_string)
}

/// The environment variable that sets how many hardware work queues a CUDA context gets.
pub const MAX_CONNECTIONS_VAR: &str = "CUDA_DEVICE_MAX_CONNECTIONS";

/// The most hardware work queues CUDA gives one context.
pub const MAX_CONNECTIONS: u32 = 32;

/// Asks CUDA for enough hardware work queues for `streams` streams to run side by side. A
/// context gets 8 unless [`MAX_CONNECTIONS_VAR`] says otherwise, and streams beyond that share
/// queues with the first 8, which serialises their work (docs/gas-builds.md, "Streams past
/// 8", has the figures). Sets the variable to `min(streams, 32)` when
/// `streams` is above 8 and the user has not set it; returns the value set, `None` when it
/// left the environment alone. CUDA reads it when it creates a context: call this before any
/// CUDA call, while the process has one thread.
pub fn request_work_queues(streams: u32) -> Option<u32> {
    let n = work_queues_to_request(streams, std::env::var_os(MAX_CONNECTIONS_VAR).is_some())?;
    std::env::set_var(MAX_CONNECTIONS_VAR, n.to_string());
    Some(n)
}

/// What [`request_work_queues`] sets, given whether the user set the variable. Pure.
pub fn work_queues_to_request(streams: u32, user_set: bool) -> Option<u32> {
    (streams > 8 && !user_set).then(|| streams.min(MAX_CONNECTIONS))
}

/// The work queues CUDA will give a context, as the environment sets them (8 when unset or
/// unreadable).
pub fn work_queues() -> u32 {
    std::env::var(MAX_CONNECTIONS_VAR)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(8)
}

/// Whether the CUDA driver library can be loaded. Everything else in this module asks this
/// first, because cudarc panics when the library is missing.
pub fn cuda_library_present() -> bool {
    // SAFETY: only tries to dlopen the same names cudarc would load, then drops the handle.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Starts the driver, turning "no library / no device" into [`CudaError::NoDevice`].
fn init_driver() -> Result<(), CudaError> {
    if !cuda_library_present() {
        return Err(CudaError::NoDevice {
            reason: format!("{CUDA_LIBRARY_NAME} not loadable"),
        });
    }
    // Any cuInit failure (no device, a stub library, a driver/kernel-module mismatch...) means
    // this machine cannot run CUDA work: the caller falls back to the CPU backend.
    result::init().map_err(|e| CudaError::NoDevice {
        reason: format!("cuInit: {}", cuda_error_name(&e)),
    })
}

/// The driver's CUDA API version (`cuDriverGetVersion`), e.g. 12080.
pub fn cuda_driver_version() -> Result<i32, CudaError> {
    init_driver()?;
    let mut version = 0;
    // SAFETY: writes one int.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) }
        .result()
        .during("cuDriverGetVersion")?;
    Ok(version)
}

/// "1 NVIDIA GPU (gpu0)", "4 NVIDIA GPUs (gpu0 to gpu3)": how many GPUs a machine has, as the
/// messages about a GPU it lacks say it, each ordinal named by `name` (`gpu3` for `--devices`,
/// `--gpu 3` for build-bench).
pub fn gpus_text(count: usize, name: impl Fn(usize) -> String) -> String {
    match count {
        0 => "0 NVIDIA GPUs".into(),
        1 => format!("1 NVIDIA GPU ({})", name(0)),
        n => format!("{n} NVIDIA GPUs ({} to {})", name(0), name(n - 1)),
    }
}

/// Lists the GPUs without creating contexts. On a machine without an NVIDIA GPU this returns
/// `Err(CudaError::NoDevice)` (e.g. "no NVIDIA GPU found (libcuda.so.1 not loadable)") and never
/// panics.
pub fn probe() -> Result<Vec<GpuInfo>, CudaError> {
    init_driver()?;
    let count = result::device::get_count().during("cuDeviceGetCount")?;
    if count <= 0 {
        return Err(CudaError::NoDevice {
            reason: "cuDeviceGetCount reports 0 devices".into(),
        });
    }
    let version = cuda_driver_version()?;
    let release = driver_release();
    (0..count as usize)
        .map(|ordinal| device_info(ordinal, version, release.clone()))
        .collect()
}

fn device_info(
    ordinal: usize,
    cuda_driver_version: i32,
    driver_release: Option<String>,
) -> Result<GpuInfo, CudaError> {
    let dev = result::device::get(ordinal as i32).during("cuDeviceGet")?;
    let name = result::device::get_name(dev).during("cuDeviceGetName")?;
    // SAFETY: `dev` is a valid device handle from cuDeviceGet.
    let total_memory = unsafe { result::device::total_mem(dev) }.during("cuDeviceTotalMem")?;
    let attr = |a| {
        // SAFETY: as above.
        unsafe { result::device::get_attribute(dev, a) }.during("cuDeviceGetAttribute")
    };
    let major = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let multiprocessors = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    let threads = attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?;
    Ok(GpuInfo {
        ordinal,
        name,
        compute_capability: (major, minor),
        total_memory,
        cuda_driver_version,
        driver_release,
        multiprocessors: multiprocessors.max(1) as u32,
        max_threads_per_multiprocessor: threads.max(1) as u32,
    })
}

/// One GPU with its (primary) CUDA context, current on every thread that uses it through
/// these types.
#[derive(Clone, Debug)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    info: GpuInfo,
}

impl Gpu {
    /// Opens GPU `ordinal`. `Err(NoDevice)` when there is no usable NVIDIA GPU.
    pub fn open(ordinal: usize) -> Result<Gpu, CudaError> {
        init_driver()?;
        let count = result::device::get_count().during("cuDeviceGetCount")?;
        if ordinal >= count.max(0) as usize {
            return Err(CudaError::NoDevice {
                reason: format!("GPU {ordinal} asked for, {count} present"),
            });
        }
        let version = cuda_driver_version()?;
        let info = device_info(ordinal, version, driver_release())?;
        let ctx = CudaContext::new(ordinal).during("cuDevicePrimaryCtxRetain")?;
        Ok(Gpu { ctx, info })
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    pub fn ordinal(&self) -> usize {
        self.info.ordinal
    }

    /// cudarc's context, for code that wants cudarc's own safe API.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The raw `CUcontext`, for `optixDeviceContextCreate`.
    pub fn cu_context(&self) -> CUcontext {
        self.ctx.cu_ctx().cast()
    }

    /// Makes this GPU's context current on the calling thread.
    pub fn bind_to_thread(&self) -> Result<(), CudaError> {
        self.ctx.bind_to_thread().during("cuCtxSetCurrent")
    }

    /// (free, total) device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize), CudaError> {
        self.bind_to_thread()?;
        result::mem_get_info().during("cuMemGetInfo")
    }

    /// Waits for all work on this GPU.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.ctx.synchronize().during("cuCtxSynchronize")
    }

    /// A new non-blocking stream.
    pub fn new_stream(&self) -> Result<Stream, CudaError> {
        Ok(Stream {
            inner: self.ctx.new_stream().during("cuStreamCreate")?,
        })
    }

    /// `n` new streams.
    pub fn new_streams(&self, n: usize) -> Result<Vec<Stream>, CudaError> {
        (0..n).map(|_| self.new_stream()).collect()
    }

    /// A new event; `timing` events can measure elapsed time, others are cheaper for ordering.
    pub fn new_event(&self, timing: bool) -> Result<Event, CudaError> {
        let flags = if timing {
            CUevent_flags::CU_EVENT_DEFAULT
        } else {
            CUevent_flags::CU_EVENT_DISABLE_TIMING
        };
        Ok(Event {
            inner: self.ctx.new_event(Some(flags)).during("cuEventCreate")?,
        })
    }

    /// An uninitialised device allocation of `bytes` bytes.
    pub fn alloc(&self, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        DeviceBuffer::alloc(self, bytes)
    }

    /// A device allocation holding a copy of `data`.
    pub fn upload<T: Pod>(&self, stream: &Stream, data: &[T]) -> Result<DeviceBuffer, CudaError> {
        let mut buffer = DeviceBuffer::alloc(self, std::mem::size_of_val(data))?;
        buffer.upload(stream, 0, data)?;
        Ok(buffer)
    }
}

/// A CUDA stream (non-blocking with respect to the legacy default stream). Cloning shares it.
#[derive(Clone, Debug)]
pub struct Stream {
    inner: Arc<CudaStream>,
}

impl Stream {
    /// The raw `CUstream`, for OptiX calls.
    pub fn raw(&self) -> CUstream {
        self.inner.cu_stream().cast()
    }

    /// cudarc's stream, for code that wants cudarc's own safe API.
    pub fn cudarc(&self) -> &Arc<CudaStream> {
        &self.inner
    }

    /// Makes the stream's context current on the calling thread.
    pub fn bind_to_thread(&self) -> Result<(), CudaError> {
        self.inner
            .context()
            .bind_to_thread()
            .during("cuCtxSetCurrent")
    }

    /// Blocks until all work enqueued so far on this stream is done.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.inner.synchronize().during("cuStreamSynchronize")
    }

    /// Whether everything enqueued on this stream is done (`cuStreamQuery`), without waiting.
    /// After a sticky error in the context it returns that error: a cheap probe of whether
    /// the context is still usable.
    pub fn query(&self) -> Result<bool, CudaError> {
        self.bind_to_thread()?;
        // SAFETY: the stream is alive (we hold it); cuStreamQuery only reads its state.
        match unsafe { cudarc::driver::sys::cuStreamQuery(self.inner.cu_stream()) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            code => Err(CudaError::call("cuStreamQuery", DriverError(code))),
        }
    }

    /// Runs, on this stream, a one-thread kernel that stores to address 0, and waits for it:
    /// the context is left with the sticky `CUDA_ERROR_ILLEGAL_ADDRESS` (or, should the
    /// compiler turn the store into a trap, `CUDA_ERROR_LAUNCH_FAILED`), which the wait
    /// returns. A fault on purpose, for the test hook `GASWORKS_FAULT_AT_TILE`
    /// ([`crate::fault_injection::GpuTileFault`]): what a kernel's illegal address does to a
    /// render can then be checked on a real GPU.
    pub fn fault_on_purpose(&self) -> Result<(), CudaError> {
        self.bind_to_thread()?;
        // SAFETY: FAULT_PTX is NUL-terminated PTX text; the module is unloaded below, after
        // the wait for the only launch of its kernel.
        let module = unsafe { result::module::load_data(FAULT_PTX.as_ptr().cast()) }
            .during("cuModuleLoadData")?;
        let faulted = (|| {
            // SAFETY: `module` is loaded and names this entry; the kernel takes no parameters.
            let kernel = unsafe { result::module::get_function(module, FAULT_ENTRY.to_owned()) }
                .during("cuModuleGetFunction")?;
            // SAFETY: as above; one block of one thread on this stream.
            unsafe {
                result::launch_kernel(
                    kernel,
                    (1, 1, 1),
                    (1, 1, 1),
                    0,
                    self.inner.cu_stream(),
                    &mut [],
                )
            }
            .during("cuLaunchKernel")?;
            self.synchronize()
        })();
        // SAFETY: loaded above, unloaded once. In a context the fault left unusable this fails
        // too; the context takes the module with it.
        let _ = unsafe { result::module::unload(module) };
        faulted
    }

    /// Records `event` at the current end of this stream.
    pub fn record(&self, event: &Event) -> Result<(), CudaError> {
        event.record(self)
    }

    /// Makes later work on this stream wait for `event` (no host wait).
    pub fn wait(&self, event: &Event) -> Result<(), CudaError> {
        self.inner.wait(&event.inner).during("cuStreamWaitEvent")
    }

    /// Runs `f`, which enqueues asynchronous copies (through the [`StreamScope`]) and other
    /// work on this stream, then waits for the stream ONCE, also when `f` fails or panics. The
    /// host memory a copy reads or writes is borrowed for the scope's lifetime `'s`, which
    /// lasts until that wait, so it can be neither freed nor touched while a copy may still
    /// use it (the pattern of `std::thread::scope`). Returns `f`'s error first, else the
    /// wait's.
    pub fn scope<'env, R, E>(
        &self,
        f: impl for<'s> FnOnce(&'s StreamScope<'s, 'env>) -> Result<R, E>,
    ) -> Result<R, E>
    where
        E: From<CudaError>,
    {
        /// Waits for the stream if `f` panics, so no copy outlives the borrows.
        struct WaitOnUnwind<'a>(&'a Stream);
        impl Drop for WaitOnUnwind<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    let _ = self.0.synchronize();
                }
            }
        }
        let _guard = WaitOnUnwind(self);
        let scope = StreamScope {
            stream: self,
            _scope: PhantomData,
            _env: PhantomData,
        };
        let result = f(&scope);
        let waited = self.synchronize();
        let value = result?;
        waited?;
        Ok(value)
    }
}

/// Asynchronous work on one stream whose host memory is borrowed until the stream is waited
/// for (see [`Stream::scope`]).
pub struct StreamScope<'s, 'env: 's> {
    stream: &'s Stream,
    _scope: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'s> StreamScope<'s, '_> {
    /// The stream the scope enqueues on.
    pub fn stream(&self) -> &'s Stream {
        self.stream
    }

    /// Enqueues copying `data` to byte `offset` of `dst` (does not wait). The device buffer
    /// and the host data are borrowed until the scope's wait.
    pub fn upload<T: Pod>(
        &self,
        dst: &'s DeviceBuffer,
        offset: usize,
        data: &'s [T],
    ) -> Result<(), CudaError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let range = byte_range(offset, bytes.len(), dst.bytes)?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.stream.bind_to_thread()?;
        // SAFETY: the destination range lies inside the live allocation `dst` (checked above),
        // which like the source is borrowed until Stream::scope has waited for the stream.
        unsafe {
            result::memcpy_htod_async(
                dst.ptr + range.start as u64,
                bytes,
                self.stream.raw().cast(),
            )
        }
        .during("cuMemcpyHtoDAsync")
    }

    /// Enqueues copying from byte `offset` of `src` into `out` (does not wait; `out` holds the
    /// data once the scope has waited).
    pub fn download<T: Pod>(
        &self,
        src: &'s DeviceBuffer,
        offset: usize,
        out: &'s mut [T],
    ) -> Result<(), CudaError> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        let range = byte_range(offset, bytes.len(), src.bytes)?;
        if bytes.is_empty() {
            return Ok(());
        }
        self.stream.bind_to_thread()?;
        // SAFETY: the source range lies inside the live allocation `src`; `out` is borrowed
        // mutably until Stream::scope has waited for the stream.
        unsafe {
            result::memcpy_dtoh_async(
                bytes,
                src.ptr + range.start as u64,
                self.stream.raw().cast(),
            )
        }
        .during("cuMemcpyDtoHAsync")
    }
}

/// A CUDA event: a point in a stream to wait on or to time.
#[derive(Debug)]
pub struct Event {
    inner: CudaEvent,
}

impl Event {
    /// Records the current end of `stream` into this event.
    pub fn record(&self, stream: &Stream) -> Result<(), CudaError> {
        self.inner.record(&stream.inner).during("cuEventRecord")
    }

    /// Blocks until the recorded work is done.
    pub fn synchronize(&self) -> Result<(), CudaError> {
        self.inner.synchronize().during("cuEventSynchronize")
    }

    /// Milliseconds from `self` to `end` (waits for both). Both need `timing` events.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32, CudaError> {
        self.inner
            .elapsed_ms(&end.inner)
            .during("cuEventElapsedTime")
    }

    /// Whether the recorded work is done, without waiting.
    pub fn is_complete(&self) -> Result<bool, CudaError> {
        self.inner.try_is_complete().during("cuEventQuery")
    }

    /// Waits for the recorded work, at most `limit`: `Ok(false)` when it is still not done
    /// then. A watchdog for work that should take a fraction of that (the acceleration
    /// builds): where `synchronize` would block for ever on a GPU that never finishes, this
    /// lets the caller say what hung. Polls, sleeping between queries, rather than blocking in the driver.
    pub fn wait_within(&self, limit: std::time::Duration) -> Result<bool, CudaError> {
        poll_until(limit, || self.is_complete())
    }
}

/// Calls `done` until it says true or fails, for at most `limit` (one more call after it):
/// `Ok(false)` when `done` never said true. Sleeps between calls, from 20 µs doubling to 1
/// ms, so that short waits stay short and long ones cost the host little.
pub fn poll_until<E>(
    limit: std::time::Duration,
    mut done: impl FnMut() -> Result<bool, E>,
) -> Result<bool, E> {
    let start = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(20);
    loop {
        if done()? {
            return Ok(true);
        }
        if start.elapsed() >= limit {
            return Ok(false);
        }
        std::thread::sleep(pause.min(limit.saturating_sub(start.elapsed())));
        pause = (pause * 2).min(std::time::Duration::from_millis(1));
    }
}

/// Checks that `[offset, offset + len)` lies within `size` and returns it as a range.
fn byte_range(offset: usize, len: usize, size: usize) -> Result<Range<usize>, CudaError> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(offset..end),
        _ => Err(CudaError::InvalidArgument(format!(
            "device range {offset}+{len} bytes exceeds the {size}-byte buffer"
        ))),
    }
}

/// A device allocation, freed on drop. Untyped: the batched builds carve one allocation into
/// many aligned sub-ranges (see [`DeviceBuffer::slice`]).
#[derive(Debug)]
pub struct DeviceBuffer {
    ptr: CUdeviceptr,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    /// Allocates `bytes` bytes (256-byte aligned, as cuMemAlloc guarantees). A zero-byte buffer
    /// has device pointer 0 and allocates nothing. Out of memory gives
    /// [`CudaError::OutOfMemory`] with the bytes asked for and the free memory.
    pub fn alloc(gpu: &Gpu, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let ctx = gpu.ctx.clone();
        if bytes == 0 {
            return Ok(DeviceBuffer { ptr: 0, bytes, ctx });
        }
        ctx.bind_to_thread().during("cuCtxSetCurrent")?;
        // SAFETY: plain allocation; the memory is uninitialised but only ever read as bytes
        // (Pod) by the methods below.
        match unsafe { result::malloc_sync(bytes) } {
            Ok(ptr) => Ok(DeviceBuffer { ptr, bytes, ctx }),
            Err(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)) => {
                let (free, total) = match result::mem_get_info() {
                    Ok((f, t)) => (Some(f), Some(t)),
                    Err(_) => (None, None),
                };
                Err(CudaError::OutOfMemory {
                    call: "cuMemAlloc",
                    requested: bytes,
                    free,
                    total,
                })
            }
            Err(e) => Err(CudaError::call("cuMemAlloc", e)),
        }
    }

    /// Allocates `bytes` bytes set to zero (waits for the memset).
    pub fn zeroed(gpu: &Gpu, stream: &Stream, bytes: usize) -> Result<DeviceBuffer, CudaError> {
        let mut buffer = Self::alloc(gpu, bytes)?;
        buffer.zero(stream)?;
        stream.synchronize()?;
        Ok(buffer)
    }

    /// The device address of the first byte (0 for an empty buffer).
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Copies `data` to byte `offset` of this buffer on `stream` and waits until it is there.
    pub fn upload<T: Pod>(
        &mut self,
        stream: &Stream,
        offset: usize,
        data: &[T],
    ) -> Result<(), CudaError> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let range = byte_range(offset, bytes.len(), self.bytes)?;
        if bytes.is_empty() {
            return Ok(());
        }
        stream.bind_to_thread()?;
        // SAFETY: the destination range lies inside this live allocation (checked above); the
        // source slice outlives the copy because we wait for the stream before returning.
        unsafe {
            result::memcpy_htod_async(self.ptr + range.start as u64, bytes, stream.raw().cast())
        }
        .during("cuMemcpyHtoDAsync")?;
        stream.synchronize()
    }

    /// Copies `count` values of `T` from byte `offset` to the host, on `stream`, and waits.
    pub fn download<T: Pod>(
        &self,
        stream: &Stream,
        offset: usize,
        count: usize,
    ) -> Result<Vec<T>, CudaError> {
        let mut out = vec![T::zeroed(); count];
        self.download_into(stream, offset, &mut out)?;
        Ok(out)
    }

    /// Copies into `out` from byte `offset`, on `stream`, and waits.
    pub fn download_into<T: Pod>(
        &self,
        stream: &Stream,
        offset: usize,
        out: &mut [T],
    ) -> Result<(), CudaError> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        let range = byte_range(offset, bytes.len(), self.bytes)?;
        if bytes.is_empty() {
            return Ok(());
        }
        stream.bind_to_thread()?;
        // SAFETY: the source range lies inside this live allocation; `out` is borrowed
        // mutably until we have waited for the stream.
        unsafe {
            result::memcpy_dtoh_async(bytes, self.ptr + range.start as u64, stream.raw().cast())
        }
        .during("cuMemcpyDtoHAsync")?;
        stream.synchronize()
    }

    /// Enqueues setting every byte to zero on `stream` (does not wait).
    pub fn zero(&mut self, stream: &Stream) -> Result<(), CudaError> {
        self.fill(stream, 0)
    }

    /// Enqueues setting every byte to `value` on `stream` (does not wait).
    pub fn fill(&mut self, stream: &Stream, value: u8) -> Result<(), CudaError> {
        if self.bytes == 0 {
            return Ok(());
        }
        stream.bind_to_thread()?;
        // SAFETY: the whole range is this live allocation.
        unsafe { result::memset_d8_async(self.ptr, value, self.bytes, stream.raw().cast()) }
            .during("cuMemsetD8Async")
    }

    /// The sub-range `[offset, offset + len)`, borrowed from this buffer so it cannot outlive it.
    pub fn slice(&self, offset: usize, len: usize) -> Result<DeviceSlice<'_>, CudaError> {
        let range = byte_range(offset, len, self.bytes)?;
        Ok(DeviceSlice {
            ptr: self.ptr + range.start as u64,
            bytes: len,
            _buffer: PhantomData,
        })
    }

    /// The whole buffer as a slice.
    pub fn as_slice(&self) -> DeviceSlice<'_> {
        DeviceSlice {
            ptr: self.ptr,
            bytes: self.bytes,
            _buffer: PhantomData,
        }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        // Errors cannot be returned from drop. They are logged here, by name, rather than
        // recorded in the shared context (`record_err`), where the next `bind_to_thread` of
        // any worker would return them as its own `cuCtxSetCurrent` failure.
        if let Err(e) = self.ctx.bind_to_thread() {
            log_release_failure(
                format_args!("before freeing {} device bytes", self.bytes),
                &CudaError::call("cuCtxSetCurrent", e),
            );
            return;
        }
        // SAFETY: `ptr` came from cuMemAlloc and is freed exactly once, here.
        if let Err(e) = unsafe { result::free_sync(self.ptr) } {
            log_release_failure(
                format_args!("freeing {} device bytes", self.bytes),
                &CudaError::call("cuMemFree", e),
            );
        }
    }
}

/// A borrowed byte range of a [`DeviceBuffer`]: a device address that cannot outlive its
/// allocation.
#[derive(Clone, Copy, Debug)]
pub struct DeviceSlice<'a> {
    ptr: CUdeviceptr,
    bytes: usize,
    _buffer: PhantomData<&'a DeviceBuffer>,
}

impl<'a> DeviceSlice<'a> {
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.ptr
    }

    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// A sub-range of this slice.
    pub fn slice(&self, offset: usize, len: usize) -> Result<DeviceSlice<'a>, CudaError> {
        let range = byte_range(offset, len, self.bytes)?;
        Ok(DeviceSlice {
            ptr: self.ptr + range.start as u64,
            bytes: len,
            _buffer: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_counts_name_the_ordinals_there_are() {
        let devices = |i| format!("gpu{i}");
        assert_eq!(gpus_text(1, devices), "1 NVIDIA GPU (gpu0)");
        assert_eq!(gpus_text(4, devices), "4 NVIDIA GPUs (gpu0 to gpu3)");
        assert_eq!(gpus_text(0, devices), "0 NVIDIA GPUs");
        assert_eq!(
            gpus_text(2, |i| format!("--gpu {i}")),
            "2 NVIDIA GPUs (--gpu 0 to --gpu 1)"
        );
    }

    #[test]
    fn polling_stops_when_done_or_past_the_limit() {
        use std::time::Duration;
        // Done on the fifth query.
        let mut calls = 0;
        let r: Result<bool, ()> = poll_until(Duration::from_secs(5), || {
            calls += 1;
            Ok(calls == 5)
        });
        assert_eq!((r, calls), (Ok(true), 5));
        // Never done: false once the limit has passed, having queried more than once.
        let mut calls = 0;
        let start = std::time::Instant::now();
        let r: Result<bool, ()> = poll_until(Duration::from_millis(30), || {
            calls += 1;
            Ok(false)
        });
        assert_eq!(r, Ok(false));
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert!(calls > 1);
        // An error ends the wait at once, passed on.
        let r: Result<bool, &str> = poll_until(Duration::from_secs(5), || Err("cuEventQuery"));
        assert_eq!(r, Err("cuEventQuery"));
        // A limit of zero still asks once.
        let r: Result<bool, ()> = poll_until(Duration::ZERO, || Ok(true));
        assert_eq!(r, Ok(true));
    }

    #[test]
    fn work_queues_follow_streams_past_eight_unless_the_user_chose() {
        assert_eq!(work_queues_to_request(1, false), None);
        assert_eq!(work_queues_to_request(8, false), None);
        assert_eq!(work_queues_to_request(9, false), Some(9));
        assert_eq!(work_queues_to_request(16, false), Some(16));
        assert_eq!(work_queues_to_request(100, false), Some(MAX_CONNECTIONS));
        assert_eq!(work_queues_to_request(16, true), None);
    }

    /// On a machine without an NVIDIA GPU (this one, CI) probing must say so, not panic; on a
    /// GPU machine it must list at least one GPU.
    #[test]
    fn probe_reports_no_device_without_panicking() {
        match probe() {
            Ok(gpus) => {
                assert!(!gpus.is_empty());
                assert!(gpus
                    .iter()
                    .all(|g| !g.name.is_empty() && g.total_memory > 0));
            }
            Err(CudaError::NoDevice { reason }) => {
                if !cuda_library_present() {
                    assert_eq!(reason, "libcuda.so.1 not loadable");
                }
                let message = CudaError::NoDevice { reason }.to_string();
                assert!(message.starts_with("no NVIDIA GPU found ("), "{message}");
            }
            Err(other) => panic!("probe failed with something other than NoDevice: {other}"),
        }
        if !cuda_library_present() {
            assert!(matches!(Gpu::open(0), Err(CudaError::NoDevice { .. })));
            assert!(matches!(
                cuda_driver_version(),
                Err(CudaError::NoDevice { .. })
            ));
        }
    }

    #[test]
    fn byte_ranges_are_checked() {
        assert_eq!(byte_range(0, 10, 10).ok(), Some(0..10));
        assert_eq!(byte_range(4, 0, 4).ok(), Some(4..4));
        assert!(byte_range(4, 7, 10).is_err());
        assert!(byte_range(11, 0, 10).is_err());
        assert!(byte_range(usize::MAX, 2, 10).is_err());
    }

    #[test]
    fn cuda_versions_print_as_major_minor() {
        assert_eq!(cuda_version_string(12080), "12.8");
        assert_eq!(cuda_version_string(13000), "13.0");
        assert_eq!(cuda_version_string(12020), "12.2");
    }

    #[test]
    fn driver_release_is_parsed_from_the_kernel_module_line() {
        let text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16-I3-B03-4-3)  Sun Jul 27 07:09:04 UTC 2025\nGCC version:  gcc version 12.2.0\n";
        assert_eq!(parse_driver_release(text).as_deref(), Some("580.65.06"));
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n";
        assert_eq!(parse_driver_release(text).as_deref(), Some("535.183.01"));
        assert_eq!(parse_driver_release("nothing here"), None);
    }
}
