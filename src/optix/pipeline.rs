//! Safe wrappers for what a launch needs: modules compiled from PTX text, program groups,
//! pipelines with their stack sizes, a typed shader binding table, and [`launch_and_wait`].
//!
//! Ownership follows OptiX's rules structurally: a [`ProgramGroup`] holds its [`Module`]s, a
//! [`Pipeline`] its program groups, and all hold the [`DeviceContext`]; the SBT owns the device
//! buffers its raw table points into, and hands that table out only by reference.

use std::ffi::{c_char, CString};
use std::sync::Arc;

use bytemuck::Pod;

use super::context::DeviceContext;
use super::cuda::{DeviceBuffer, Gpu, Stream};
use super::error::{check, OptixError};
use super::sys::{
    self, Abi, OptixModuleCompileOptions, OptixPipelineCompileOptions, OptixPipelineLinkOptions,
    OptixProgramGroupDesc, OptixProgramGroupDescUnion, OptixProgramGroupHitgroup,
    OptixProgramGroupOptions, OptixProgramGroupSingleModule, OptixResult, OptixShaderBindingTable,
    OptixStackSizes, OPTIX_SBT_RECORD_ALIGNMENT, OPTIX_SBT_RECORD_HEADER_SIZE,
};

/// Size of the log buffers handed to OptiX's create calls.
const LOG_CAPACITY: usize = 16 * 1024;

/// Calls `f(log_ptr, &mut log_len)` with a log buffer and returns the result with the text.
fn with_log(f: impl FnOnce(*mut c_char, *mut usize) -> OptixResult) -> (OptixResult, String) {
    let mut log = vec![0u8; LOG_CAPACITY];
    let mut len = log.len();
    let code = f(log.as_mut_ptr().cast(), &mut len);
    (code, log_text(&log, len))
}

/// The text OptiX wrote: `len` is the size it WANTED (may exceed the buffer), and the text is
/// NUL-terminated within the buffer.
fn log_text(buffer: &[u8], len: usize) -> String {
    let shown = &buffer[..len.min(buffer.len())];
    let end = shown.iter().position(|&b| b == 0).unwrap_or(shown.len());
    let mut text = String::from_utf8_lossy(&shown[..end]).into_owned();
    if len > buffer.len() {
        text.push_str(&format!("\n[log truncated: {len} bytes]"));
    }
    text
}

fn c_string(what: &str, s: &str) -> Result<CString, OptixError> {
    CString::new(s)
        .map_err(|_| OptixError::InvalidArgument(format!("{what} {s:?} contains a NUL byte")))
}

// ---------------------------------------------------------------------------------------------
// Compile options
// ---------------------------------------------------------------------------------------------

/// Options that must be identical for every module of a pipeline and the pipeline itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineCompileOptions {
    /// 32-bit payload registers used by `optixTrace` calls.
    pub num_payload_values: i32,
    /// 32-bit attribute registers (2 for built-in triangles' barycentrics).
    pub num_attribute_values: i32,
    /// Name of the `extern "C" __constant__` launch-parameter variable in the device code.
    pub launch_params_variable_name: String,
    /// `OPTIX_TRAVERSABLE_GRAPH_FLAG_*`.
    pub traversable_graph_flags: u32,
    /// `OPTIX_EXCEPTION_FLAG_*`.
    pub exception_flags: u32,
    /// `OPTIX_PRIMITIVE_TYPE_FLAGS_*`.
    pub uses_primitive_type_flags: u32,
}

impl Default for PipelineCompileOptions {
    /// Triangles under one level of instancing (gasworks' IAS over GASes), 2 payload and 2
    /// attribute registers, launch parameters named `params`.
    fn default() -> Self {
        PipelineCompileOptions {
            num_payload_values: 2,
            num_attribute_values: 2,
            launch_params_variable_name: "params".into(),
            traversable_graph_flags:
                sys::OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_SINGLE_LEVEL_INSTANCING,
            exception_flags: sys::OPTIX_EXCEPTION_FLAG_NONE,
            uses_primitive_type_flags: sys::OPTIX_PRIMITIVE_TYPE_FLAGS_TRIANGLE,
        }
    }
}

/// The raw struct with the C string it points to kept alive beside it.
struct RawPipelineCompileOptions {
    raw: OptixPipelineCompileOptions,
    _name: CString,
}

impl PipelineCompileOptions {
    fn to_raw(&self, abi: Abi) -> Result<RawPipelineCompileOptions, OptixError> {
        let name = c_string("launch parameter name", &self.launch_params_variable_name)?;
        // Every byte zero first, padding included (a struct literal leaves padding unspecified),
        // then the fields: the driver sees the same bytes for the same options.
        // SAFETY: the struct is integers and a nullable pointer, for which all-zero is valid.
        let mut raw: OptixPipelineCompileOptions = unsafe { std::mem::zeroed() };
        raw.uses_motion_blur = 0;
        raw.traversable_graph_flags = self.traversable_graph_flags;
        raw.num_payload_values = self.num_payload_values;
        raw.num_attribute_values = self.num_attribute_values;
        raw.exception_flags = self.exception_flags;
        raw.pipeline_launch_params_variable_name = name.as_ptr();
        raw.uses_primitive_type_flags = self.uses_primitive_type_flags;
        raw.allow_opacity_micromaps = 0;
        // The ABI-87 struct ends before this field; 0 keeps both ABIs reading the same thing.
        raw.allow_clustered_geometry = 0;
        debug_assert!(abi == Abi::V105 || raw.allow_clustered_geometry == 0);
        Ok(RawPipelineCompileOptions { raw, _name: name })
    }
}

/// Per-module compile options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ModuleCompileOptions {
    /// 0: let OptiX choose.
    pub max_register_count: i32,
    /// `OPTIX_COMPILE_OPTIMIZATION_*`.
    pub opt_level: u32,
    /// `OPTIX_COMPILE_DEBUG_LEVEL_*`.
    pub debug_level: u32,
}

impl Default for ModuleCompileOptions {
    fn default() -> Self {
        ModuleCompileOptions {
            max_register_count: 0,
            opt_level: sys::OPTIX_COMPILE_OPTIMIZATION_DEFAULT,
            debug_level: sys::OPTIX_COMPILE_DEBUG_LEVEL_MINIMAL,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Modules
// ---------------------------------------------------------------------------------------------

struct ModuleInner {
    raw: sys::OptixModule,
    name: String,
    ctx: Arc<DeviceContext>,
}

impl Drop for ModuleInner {
    fn drop(&mut self) {
        // SAFETY: created by optixModuleCreate, destroyed once; program groups using it hold
        // this Arc, so none is left.
        let code = unsafe { (self.ctx.api().module_destroy)(self.raw) };
        if !code.is_success() {
            log::warn!("optixModuleDestroy({}) failed: {code}", self.name);
        }
    }
}

/// A compiled OptiX module. Cheap to clone (shared).
#[derive(Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

// SAFETY: an OptiX module handle is immutable after creation and usable from any thread.
unsafe impl Send for ModuleInner {}
unsafe impl Sync for ModuleInner {}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module({})", self.inner.name)
    }
}

impl Module {
    /// Compiles PTX text. `name` is only for messages (e.g. "raycast.ptx"). A compile failure
    /// gives [`OptixError::ModuleCompile`] with OptiX's log.
    pub fn from_ptx(
        ctx: &Arc<DeviceContext>,
        name: &str,
        ptx: &str,
        module_options: &ModuleCompileOptions,
        pipeline_options: &PipelineCompileOptions,
    ) -> Result<Module, OptixError> {
        let pipeline = pipeline_options.to_raw(ctx.abi())?;
        let module = OptixModuleCompileOptions {
            max_register_count: module_options.max_register_count,
            opt_level: module_options.opt_level,
            debug_level: module_options.debug_level,
            bound_values: std::ptr::null(),
            num_bound_values: 0,
            num_payload_types: 0,
            payload_types: std::ptr::null(),
        };
        let mut raw: sys::OptixModule = std::ptr::null_mut();
        ctx.gpu().bind_to_thread()?;
        let (code, log) = with_log(|log, log_len| {
            // SAFETY: all pointers are to live locals; `ptx` is passed with its length (OptiX
            // does not need a NUL terminator when given the size).
            unsafe {
                (ctx.api().module_create)(
                    ctx.raw(),
                    &module,
                    &pipeline.raw,
                    ptx.as_ptr().cast(),
                    ptx.len(),
                    log,
                    log_len,
                    &mut raw,
                )
            }
        });
        if !code.is_success() {
            return Err(match code {
                OptixResult::ERROR_DEVICE_OUT_OF_MEMORY => {
                    OptixError::call("optixModuleCreate", code)
                }
                _ => OptixError::ModuleCompile {
                    module: name.to_string(),
                    name: code
                        .name()
                        .map(str::to_string)
                        .unwrap_or_else(|| format!("OptixResult({})", code.0)),
                    log,
                },
            });
        }
        if !log.trim().is_empty() {
            log::debug!(target: "optix", "module {name}: {}", log.trim());
        }
        Ok(Module {
            inner: Arc::new(ModuleInner {
                raw,
                name: name.to_string(),
                ctx: ctx.clone(),
            }),
        })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn raw(&self) -> sys::OptixModule {
        self.inner.raw
    }
}

// ---------------------------------------------------------------------------------------------
// Program groups
// ---------------------------------------------------------------------------------------------

/// A program (entry function) of a module, e.g. `__closesthit__radiance`.
#[derive(Clone, Debug)]
pub struct Entry {
    pub module: Module,
    pub function: String,
}

impl Entry {
    pub fn new(module: &Module, function: &str) -> Entry {
        Entry {
            module: module.clone(),
            function: function.to_string(),
        }
    }
}

/// What a program group contains.
#[derive(Clone, Debug)]
pub enum ProgramGroupKind {
    Raygen(Entry),
    /// `None`: a miss group with no program (rays that miss do nothing).
    Miss(Option<Entry>),
    Exception(Entry),
    /// Any subset; triangles need no intersection program.
    Hitgroup {
        closest_hit: Option<Entry>,
        any_hit: Option<Entry>,
        intersection: Option<Entry>,
    },
}

impl ProgramGroupKind {
    fn raw_kind(&self) -> u32 {
        match self {
            ProgramGroupKind::Raygen(_) => sys::OPTIX_PROGRAM_GROUP_KIND_RAYGEN,
            ProgramGroupKind::Miss(_) => sys::OPTIX_PROGRAM_GROUP_KIND_MISS,
            ProgramGroupKind::Exception(_) => sys::OPTIX_PROGRAM_GROUP_KIND_EXCEPTION,
            ProgramGroupKind::Hitgroup { .. } => sys::OPTIX_PROGRAM_GROUP_KIND_HITGROUP,
        }
    }

    fn entries(&self) -> Vec<&Entry> {
        match self {
            ProgramGroupKind::Raygen(e) | ProgramGroupKind::Exception(e) => vec![e],
            ProgramGroupKind::Miss(e) => e.iter().collect(),
            ProgramGroupKind::Hitgroup {
                closest_hit,
                any_hit,
                intersection,
            } => [closest_hit, any_hit, intersection]
                .into_iter()
                .flatten()
                .collect(),
        }
    }
}

/// The raw descriptor with the C strings it points to kept alive beside it.
struct RawProgramGroupDesc {
    desc: OptixProgramGroupDesc,
    _names: Vec<CString>,
}

fn raw_desc(kind: &ProgramGroupKind) -> Result<RawProgramGroupDesc, OptixError> {
    let mut names = Vec::new();
    let mut single =
        |entry: Option<&Entry>| -> Result<(sys::OptixModule, *const c_char), OptixError> {
            match entry {
                None => Ok((std::ptr::null_mut(), std::ptr::null())),
                Some(e) => {
                    let name = c_string("entry function", &e.function)?;
                    let ptr = name.as_ptr();
                    names.push(name);
                    Ok((e.module.raw(), ptr))
                }
            }
        };
    // The union zeroed whole, then one member written: the bytes past a smaller member
    // (`single` is 16 of the 48) are zero, not left over.
    // SAFETY: every member is pointers, for which all-zero (null) is valid.
    let mut desc: OptixProgramGroupDescUnion = unsafe { std::mem::zeroed() };
    match kind {
        ProgramGroupKind::Raygen(e) | ProgramGroupKind::Exception(e) => {
            let (module, entry_function_name) = single(Some(e))?;
            desc.single = OptixProgramGroupSingleModule {
                module,
                entry_function_name,
            };
        }
        ProgramGroupKind::Miss(e) => {
            let (module, entry_function_name) = single(e.as_ref())?;
            desc.single = OptixProgramGroupSingleModule {
                module,
                entry_function_name,
            };
        }
        ProgramGroupKind::Hitgroup {
            closest_hit,
            any_hit,
            intersection,
        } => {
            let (module_ch, entry_function_name_ch) = single(closest_hit.as_ref())?;
            let (module_ah, entry_function_name_ah) = single(any_hit.as_ref())?;
            let (module_is, entry_function_name_is) = single(intersection.as_ref())?;
            desc.hitgroup = OptixProgramGroupHitgroup {
                module_ch,
                entry_function_name_ch,
                module_ah,
                entry_function_name_ah,
                module_is,
                entry_function_name_is,
            };
        }
    }
    Ok(RawProgramGroupDesc {
        desc: OptixProgramGroupDesc {
            kind: kind.raw_kind(),
            flags: sys::OPTIX_PROGRAM_GROUP_FLAGS_NONE,
            desc,
        },
        _names: names,
    })
}

struct ProgramGroupInner {
    raw: sys::OptixProgramGroup,
    kind: ProgramGroupKind,
    ctx: Arc<DeviceContext>,
}

// SAFETY: program group handles are immutable after creation and usable from any thread.
unsafe impl Send for ProgramGroupInner {}
unsafe impl Sync for ProgramGroupInner {}

impl Drop for ProgramGroupInner {
    fn drop(&mut self) {
        // SAFETY: created by optixProgramGroupCreate, destroyed once; pipelines using it hold
        // this Arc. The modules it uses are still alive (held in `kind`).
        let code = unsafe { (self.ctx.api().program_group_destroy)(self.raw) };
        if !code.is_success() {
            log::warn!("optixProgramGroupDestroy failed: {code}");
        }
    }
}

/// A program group; holds the modules it uses. Cheap to clone (shared).
#[derive(Clone)]
pub struct ProgramGroup {
    inner: Arc<ProgramGroupInner>,
}

impl std::fmt::Debug for ProgramGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgramGroup({:?})", self.inner.kind)
    }
}

impl ProgramGroup {
    pub fn new(
        ctx: &Arc<DeviceContext>,
        kind: ProgramGroupKind,
    ) -> Result<ProgramGroup, OptixError> {
        for entry in kind.entries() {
            if !Arc::ptr_eq(&entry.module.inner.ctx, ctx) {
                return Err(OptixError::InvalidArgument(format!(
                    "module {} belongs to another OptiX context",
                    entry.module.name()
                )));
            }
        }
        let desc = raw_desc(&kind)?;
        let options = OptixProgramGroupOptions {
            payload_type: std::ptr::null(),
        };
        let mut raw: sys::OptixProgramGroup = std::ptr::null_mut();
        let (code, log) = with_log(|log, log_len| {
            // SAFETY: one descriptor whose strings and modules are alive; `raw` receives one
            // handle.
            unsafe {
                (ctx.api().program_group_create)(
                    ctx.raw(),
                    &desc.desc,
                    1,
                    &options,
                    log,
                    log_len,
                    &mut raw,
                )
            }
        });
        if !code.is_success() {
            return Err(OptixError::call_with_log(
                "optixProgramGroupCreate",
                code,
                log,
            ));
        }
        Ok(ProgramGroup {
            inner: Arc::new(ProgramGroupInner {
                raw,
                kind,
                ctx: ctx.clone(),
            }),
        })
    }

    pub fn raygen(
        ctx: &Arc<DeviceContext>,
        module: &Module,
        function: &str,
    ) -> Result<ProgramGroup, OptixError> {
        Self::new(ctx, ProgramGroupKind::Raygen(Entry::new(module, function)))
    }

    pub fn miss(
        ctx: &Arc<DeviceContext>,
        module: &Module,
        function: &str,
    ) -> Result<ProgramGroup, OptixError> {
        Self::new(
            ctx,
            ProgramGroupKind::Miss(Some(Entry::new(module, function))),
        )
    }

    /// A hit group with only a closest-hit program (built-in triangles).
    pub fn closest_hit(
        ctx: &Arc<DeviceContext>,
        module: &Module,
        function: &str,
    ) -> Result<ProgramGroup, OptixError> {
        Self::new(
            ctx,
            ProgramGroupKind::Hitgroup {
                closest_hit: Some(Entry::new(module, function)),
                any_hit: None,
                intersection: None,
            },
        )
    }

    /// A hit group with a closest-hit and an any-hit program (built-in triangles).
    pub fn hit_group(
        ctx: &Arc<DeviceContext>,
        module: &Module,
        closest_hit: &str,
        any_hit: &str,
    ) -> Result<ProgramGroup, OptixError> {
        Self::new(
            ctx,
            ProgramGroupKind::Hitgroup {
                closest_hit: Some(Entry::new(module, closest_hit)),
                any_hit: Some(Entry::new(module, any_hit)),
                intersection: None,
            },
        )
    }

    pub fn raw(&self) -> sys::OptixProgramGroup {
        self.inner.raw
    }

    pub fn kind(&self) -> &ProgramGroupKind {
        &self.inner.kind
    }

    /// The stack sizes of this group's programs (`optixProgramGroupGetStackSize`).
    pub fn stack_sizes(&self, pipeline: Option<&Pipeline>) -> Result<OptixStackSizes, OptixError> {
        let mut sizes = OptixStackSizes::default();
        // SAFETY: `sizes` is writable; the pipeline handle is null or alive.
        let code = unsafe {
            (self.inner.ctx.api().program_group_get_stack_size)(
                self.inner.raw,
                &mut sizes,
                pipeline.map_or(std::ptr::null_mut(), |p| p.raw),
            )
        };
        check("optixProgramGroupGetStackSize", code)?;
        Ok(sizes)
    }
}

// ---------------------------------------------------------------------------------------------
// Pipelines and stack sizes
// ---------------------------------------------------------------------------------------------

/// The four numbers of `optixPipelineSetStackSize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineStackSizes {
    pub direct_callable_from_traversal: u32,
    pub direct_callable_from_state: u32,
    pub continuation: u32,
    pub max_traversable_graph_depth: u32,
}

/// The element-wise maximum of the groups' stack sizes.
pub fn max_stack_sizes(sizes: &[OptixStackSizes]) -> OptixStackSizes {
    sizes
        .iter()
        .fold(OptixStackSizes::default(), |a, b| OptixStackSizes {
            css_rg: a.css_rg.max(b.css_rg),
            css_ms: a.css_ms.max(b.css_ms),
            css_ch: a.css_ch.max(b.css_ch),
            css_ah: a.css_ah.max(b.css_ah),
            css_is: a.css_is.max(b.css_is),
            css_cc: a.css_cc.max(b.css_cc),
            dss_dc: a.dss_dc.max(b.dss_dc),
        })
}

/// The stack sizes a pipeline needs, from the largest per-program sizes and the call depths
/// (the rule the OptiX programming guide gives for pipelines without recursion beyond
/// `max_trace_depth`): a ray-generation frame, plus for every trace level but the last a
/// closest-hit or miss frame with its continuation callables, plus for the last level the
/// larger of that and an intersection + any-hit frame.
pub fn compute_stack_sizes(
    s: &OptixStackSizes,
    max_trace_depth: u32,
    max_cc_depth: u32,
    max_dc_depth: u32,
    max_traversable_graph_depth: u32,
) -> PipelineStackSizes {
    let direct = max_dc_depth.saturating_mul(s.dss_dc);
    let cc_tree = max_cc_depth.saturating_mul(s.css_cc);
    let ch_or_ms_plus_cc = s.css_ch.max(s.css_ms).saturating_add(cc_tree);
    let continuation = s
        .css_rg
        .saturating_add(cc_tree)
        .saturating_add(
            max_trace_depth
                .max(1)
                .saturating_sub(1)
                .saturating_mul(ch_or_ms_plus_cc),
        )
        .saturating_add(
            max_trace_depth
                .min(1)
                .saturating_mul(ch_or_ms_plus_cc.max(s.css_is.saturating_add(s.css_ah))),
        );
    PipelineStackSizes {
        direct_callable_from_traversal: direct,
        direct_callable_from_state: direct,
        continuation,
        max_traversable_graph_depth,
    }
}

/// A linked pipeline; holds its program groups.
///
/// `Send` but not `Sync`: OptiX does not support concurrent launches of one pipeline
/// (`optixLaunch`'s thread-safety note in `optix_host.h`: concurrent launches need separate
/// pipeline objects). So a `&Pipeline` cannot reach two threads, and code that launches from
/// several threads or streams at once makes one pipeline each from the same program groups
/// (cheap: the groups are compiled once), as the path tracer's workers do. The shader binding
/// table can be shared: its headers are packed from the program groups, not the pipeline.
///
/// A pipeline moves to another thread:
/// ```
/// fn send<T: Send>() {}
/// send::<gasworks::optix::Pipeline>();
/// ```
/// but is not shared by two:
/// ```compile_fail,E0277
/// fn sync<T: Sync>() {}
/// sync::<gasworks::optix::Pipeline>();
/// ```
pub struct Pipeline {
    raw: sys::OptixPipeline,
    groups: Vec<ProgramGroup>,
    max_trace_depth: u32,
    ctx: Arc<DeviceContext>,
}

// SAFETY: the handle may be used from another thread than the one that made it; it is used
// by one thread at a time (no `Sync`), which is what OptiX's launch contract asks.
unsafe impl Send for Pipeline {}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("groups", &self.groups.len())
            .field("max_trace_depth", &self.max_trace_depth)
            .finish()
    }
}

impl Pipeline {
    /// Links `groups` into a pipeline, then sets its stack size from the groups' own sizes for
    /// `max_trace_depth` and a traversable graph of depth 2 (IAS over GAS).
    pub fn new(
        ctx: &Arc<DeviceContext>,
        options: &PipelineCompileOptions,
        max_trace_depth: u32,
        groups: &[ProgramGroup],
    ) -> Result<Pipeline, OptixError> {
        if groups.is_empty() {
            return Err(OptixError::InvalidArgument(
                "a pipeline needs at least one program group".into(),
            ));
        }
        let compile = options.to_raw(ctx.abi())?;
        let link = OptixPipelineLinkOptions { max_trace_depth };
        // Path-tracer workers link their pipelines on whichever thread makes them (a scheduler
        // thread, a pooled render_tile call): make this GPU's context current there, as the
        // module compile does.
        ctx.gpu().bind_to_thread()?;
        let raw_groups: Vec<sys::OptixProgramGroup> =
            groups.iter().map(ProgramGroup::raw).collect();
        let mut raw: sys::OptixPipeline = std::ptr::null_mut();
        let (code, log) = with_log(|log, log_len| {
            // SAFETY: the options and the group handles are alive for the call.
            unsafe {
                (ctx.api().pipeline_create)(
                    ctx.raw(),
                    &compile.raw,
                    &link,
                    raw_groups.as_ptr(),
                    raw_groups.len() as u32,
                    log,
                    log_len,
                    &mut raw,
                )
            }
        });
        if !code.is_success() {
            return Err(OptixError::call_with_log("optixPipelineCreate", code, log));
        }
        let mut pipeline = Pipeline {
            raw,
            groups: groups.to_vec(),
            max_trace_depth,
            ctx: ctx.clone(),
        };
        let per_group = groups
            .iter()
            .map(|g| g.stack_sizes(Some(&pipeline)))
            .collect::<Result<Vec<_>, _>>()?;
        let sizes = compute_stack_sizes(&max_stack_sizes(&per_group), max_trace_depth, 0, 0, 2);
        pipeline.set_stack_size(sizes)?;
        Ok(pipeline)
    }

    /// `optixPipelineSetStackSize`.
    pub fn set_stack_size(&mut self, sizes: PipelineStackSizes) -> Result<(), OptixError> {
        // SAFETY: live pipeline handle, exclusive access.
        let code = unsafe {
            (self.ctx.api().pipeline_set_stack_size)(
                self.raw,
                sizes.direct_callable_from_traversal,
                sizes.direct_callable_from_state,
                sizes.continuation,
                sizes.max_traversable_graph_depth,
            )
        };
        check("optixPipelineSetStackSize", code)
    }

    pub fn raw(&self) -> sys::OptixPipeline {
        self.raw
    }

    pub fn context(&self) -> &Arc<DeviceContext> {
        &self.ctx
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // SAFETY: created by optixPipelineCreate, destroyed once; its groups are still alive.
        let code = unsafe { (self.ctx.api().pipeline_destroy)(self.raw) };
        if !code.is_success() {
            log::warn!("optixPipelineDestroy failed: {code}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shader binding table
// ---------------------------------------------------------------------------------------------

/// One SBT record on the host: OptiX's 32-byte header (packed from a program group) followed by
/// the user data `T`, which the device code sees at offset 32 of the record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SbtRecord<T: Pod> {
    pub header: [u8; OPTIX_SBT_RECORD_HEADER_SIZE],
    pub data: T,
}

/// Rounds `n` up to a multiple of `to` (a power of two).
pub fn align_up(n: usize, to: usize) -> usize {
    debug_assert!(to.is_power_of_two());
    (n + to - 1) & !(to - 1)
}

impl<T: Pod> SbtRecord<T> {
    /// Bytes from one record to the next in device memory: header plus data, rounded up to
    /// `OPTIX_SBT_RECORD_ALIGNMENT`.
    pub const STRIDE: usize = {
        let n = OPTIX_SBT_RECORD_HEADER_SIZE + std::mem::size_of::<T>();
        n.div_ceil(OPTIX_SBT_RECORD_ALIGNMENT) * OPTIX_SBT_RECORD_ALIGNMENT
    };

    /// A record for `group` carrying `data` (`optixSbtRecordPackHeader`).
    pub fn new(group: &ProgramGroup, data: T) -> Result<SbtRecord<T>, OptixError> {
        Self::check_alignment()?;
        // Aligned as OptiX's own samples align their records (OPTIX_SBT_RECORD_ALIGNMENT): the
        // header documents no alignment for this host pointer, but nothing says the driver
        // writes it without vector stores.
        #[repr(C, align(16))]
        struct Header([u8; OPTIX_SBT_RECORD_HEADER_SIZE]);
        const _: () = assert!(std::mem::align_of::<Header>() == OPTIX_SBT_RECORD_ALIGNMENT);
        let mut header = Header([0u8; OPTIX_SBT_RECORD_HEADER_SIZE]);
        // SAFETY: `header` is a writable, 16-byte-aligned 32-byte host buffer, as the call
        // requires.
        let code = unsafe {
            (group.inner.ctx.api().sbt_record_pack_header)(
                group.raw(),
                header.0.as_mut_ptr().cast(),
            )
        };
        check("optixSbtRecordPackHeader", code)?;
        Ok(SbtRecord {
            header: header.0,
            data,
        })
    }

    /// A record with a header obtained elsewhere (tests, or a header packed once and reused).
    pub fn with_header(header: [u8; OPTIX_SBT_RECORD_HEADER_SIZE], data: T) -> SbtRecord<T> {
        SbtRecord { header, data }
    }

    /// The device code places `T` at offset 32 only if `T` needs no more than 32-byte
    /// alignment; records must also keep 16-byte alignment, which `STRIDE` does.
    fn check_alignment() -> Result<(), OptixError> {
        if std::mem::align_of::<T>() > OPTIX_SBT_RECORD_HEADER_SIZE {
            return Err(OptixError::InvalidArgument(format!(
                "SBT record data {} needs {}-byte alignment; at most 32 is supported",
                std::any::type_name::<T>(),
                std::mem::align_of::<T>()
            )));
        }
        Ok(())
    }
}

/// Lays records out as OptiX reads them: each at a multiple of `STRIDE`, header then data, the
/// padding zeroed.
pub fn pack_records<T: Pod>(records: &[SbtRecord<T>]) -> Vec<u8> {
    let stride = SbtRecord::<T>::STRIDE;
    let mut bytes = vec![0u8; stride * records.len()];
    for (record, out) in records.iter().zip(bytes.chunks_exact_mut(stride)) {
        out[..OPTIX_SBT_RECORD_HEADER_SIZE].copy_from_slice(&record.header);
        let data = bytemuck::bytes_of(&record.data);
        out[OPTIX_SBT_RECORD_HEADER_SIZE..OPTIX_SBT_RECORD_HEADER_SIZE + data.len()]
            .copy_from_slice(data);
    }
    bytes
}

/// Packed records of one kind, not yet uploaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedRecords {
    pub bytes: Vec<u8>,
    pub stride: u32,
    pub count: u32,
}

impl PackedRecords {
    pub fn new<T: Pod>(records: &[SbtRecord<T>]) -> Result<PackedRecords, OptixError> {
        SbtRecord::<T>::check_alignment()?;
        let count = u32::try_from(records.len()).map_err(|_| {
            OptixError::InvalidArgument(format!("{} SBT records is too many", records.len()))
        })?;
        Ok(PackedRecords {
            bytes: pack_records(records),
            stride: SbtRecord::<T>::STRIDE as u32,
            count,
        })
    }
}

/// Collects the records of an SBT on the host, then uploads them all at once.
#[derive(Clone, Debug, Default)]
pub struct SbtBuilder {
    raygen: Option<PackedRecords>,
    exception: Option<PackedRecords>,
    miss: Option<PackedRecords>,
    hitgroup: Option<PackedRecords>,
}

impl SbtBuilder {
    pub fn new() -> SbtBuilder {
        SbtBuilder::default()
    }

    pub fn raygen<T: Pod>(mut self, record: SbtRecord<T>) -> Result<Self, OptixError> {
        self.raygen = Some(PackedRecords::new(&[record])?);
        Ok(self)
    }

    pub fn exception<T: Pod>(mut self, record: SbtRecord<T>) -> Result<Self, OptixError> {
        self.exception = Some(PackedRecords::new(&[record])?);
        Ok(self)
    }

    /// Miss records, indexed by the `missSBTIndex` of `optixTrace` (the ray type).
    pub fn miss<T: Pod>(mut self, records: &[SbtRecord<T>]) -> Result<Self, OptixError> {
        self.miss = Some(PackedRecords::new(records)?);
        Ok(self)
    }

    /// Hit-group records, indexed by instance `sbtOffset` + build-input SBT index * ray-type
    /// stride + ray type.
    pub fn hitgroup<T: Pod>(mut self, records: &[SbtRecord<T>]) -> Result<Self, OptixError> {
        self.hitgroup = Some(PackedRecords::new(records)?);
        Ok(self)
    }

    /// Checks what OptiX requires of every SBT before uploading anything.
    pub fn validate(&self) -> Result<(), OptixError> {
        if self.raygen.as_ref().is_none_or(|r| r.count != 1) {
            return Err(OptixError::InvalidArgument(
                "the SBT needs exactly one raygen record".into(),
            ));
        }
        for (what, records) in [("miss", &self.miss), ("hitgroup", &self.hitgroup)] {
            if let Some(r) = records {
                if r.count == 0 {
                    return Err(OptixError::InvalidArgument(format!(
                        "the SBT's {what} record array is empty"
                    )));
                }
                if r.stride as usize % OPTIX_SBT_RECORD_ALIGNMENT != 0 {
                    return Err(OptixError::InvalidArgument(format!(
                        "{what} record stride {} is not 16-byte aligned",
                        r.stride
                    )));
                }
            }
        }
        Ok(())
    }

    /// Uploads the records and returns the table that owns them.
    pub fn build(self, gpu: &Gpu, stream: &Stream) -> Result<ShaderBindingTable, OptixError> {
        self.validate()?;
        let upload = |records: Option<PackedRecords>| -> Result<Option<RecordArray>, OptixError> {
            records
                .map(|r| {
                    let buffer = gpu.upload(stream, &r.bytes)?;
                    Ok(RecordArray {
                        buffer,
                        stride: r.stride,
                        count: r.count,
                    })
                })
                .transpose()
        };
        let raygen = upload(self.raygen)?;
        let exception = upload(self.exception)?;
        let miss = upload(self.miss)?;
        let hitgroup = upload(self.hitgroup)?;
        let raw = raw_sbt(
            raygen.as_ref().map_or(0, |r| r.buffer.device_ptr()),
            exception.as_ref().map_or(0, |r| r.buffer.device_ptr()),
            miss.as_ref().map(RecordArray::location),
            hitgroup.as_ref().map(RecordArray::location),
        );
        Ok(ShaderBindingTable {
            raw,
            _raygen: raygen,
            _exception: exception,
            _miss: miss,
            _hitgroup: hitgroup,
        })
    }
}

/// Uploaded records of one kind.
#[derive(Debug)]
struct RecordArray {
    buffer: DeviceBuffer,
    stride: u32,
    count: u32,
}

impl RecordArray {
    fn location(&self) -> (u64, u32, u32) {
        (self.buffer.device_ptr(), self.stride, self.count)
    }
}

/// The raw table for records at these device addresses ((base, stride, count) per array).
fn raw_sbt(
    raygen: u64,
    exception: u64,
    miss: Option<(u64, u32, u32)>,
    hitgroup: Option<(u64, u32, u32)>,
) -> OptixShaderBindingTable {
    let (miss_base, miss_stride, miss_count) = miss.unwrap_or((0, 0, 0));
    let (hit_base, hit_stride, hit_count) = hitgroup.unwrap_or((0, 0, 0));
    OptixShaderBindingTable {
        raygen_record: raygen,
        exception_record: exception,
        miss_record_base: miss_base,
        miss_record_stride_in_bytes: miss_stride,
        miss_record_count: miss_count,
        hitgroup_record_base: hit_base,
        hitgroup_record_stride_in_bytes: hit_stride,
        hitgroup_record_count: hit_count,
        callables_record_base: 0,
        callables_record_stride_in_bytes: 0,
        callables_record_count: 0,
    }
}

/// A shader binding table that owns the device buffers its raw table points into; the raw
/// table is only lent out, so it cannot outlive them.
#[derive(Debug)]
pub struct ShaderBindingTable {
    raw: OptixShaderBindingTable,
    _raygen: Option<RecordArray>,
    _exception: Option<RecordArray>,
    _miss: Option<RecordArray>,
    _hitgroup: Option<RecordArray>,
}

impl ShaderBindingTable {
    pub fn builder() -> SbtBuilder {
        SbtBuilder::new()
    }

    pub fn raw(&self) -> &OptixShaderBindingTable {
        &self.raw
    }
}

// ---------------------------------------------------------------------------------------------
// Launch
// ---------------------------------------------------------------------------------------------

/// `optixLaunch` of `width` x `height` x `depth` threads on `stream`, reading the launch
/// parameters from `params` (the device copy of the struct the device code declares under
/// `launch_params_variable_name`), then waits for the stream: when it returns, the GPU uses
/// none of the inputs any more, so nothing can be freed under a running launch.
///
/// (A guard that waits when dropped cannot promise that: `mem::forget` skips its drop.)
///
/// # Safety
/// Every device address the launch follows (inside `params`, and inside the SBT's records)
/// must point into a live allocation, sized for what the device code reads and writes there.
pub unsafe fn launch_and_wait(
    pipeline: &Pipeline,
    stream: &Stream,
    params: &DeviceBuffer,
    sbt: &ShaderBindingTable,
    width: u32,
    height: u32,
    depth: u32,
) -> Result<(), OptixError> {
    // SAFETY: the caller vouches for the addresses; the wait below ends every use of the
    // inputs, which are borrowed until then.
    unsafe { launch_unchecked(pipeline, stream, params, sbt, width, height, depth)? };
    Ok(stream.synchronize()?)
}

/// [`launch_and_wait`] without the wait, for back-to-back launches on one stream.
///
/// # Safety
/// `pipeline`, `params` and the buffers of `sbt` must stay alive and unchanged until the launch
/// is done on `stream`.
pub unsafe fn launch_unchecked(
    pipeline: &Pipeline,
    stream: &Stream,
    params: &DeviceBuffer,
    sbt: &ShaderBindingTable,
    width: u32,
    height: u32,
    depth: u32,
) -> Result<(), OptixError> {
    if params.is_empty() {
        return Err(OptixError::InvalidArgument(
            "launch parameters are empty".into(),
        ));
    }
    stream.bind_to_thread()?;
    // SAFETY: per this function's contract.
    let code = unsafe {
        (pipeline.ctx.api().launch)(
            pipeline.raw,
            stream.raw(),
            params.device_ptr(),
            params.len_bytes(),
            sbt.raw(),
            width,
            height,
            depth,
        )
    };
    check("optixLaunch", code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    struct HitData {
        color: [f32; 3],
        group: u32,
        vertices: u64,
    }

    #[test]
    fn record_stride_rounds_header_plus_data_to_16() {
        assert_eq!(SbtRecord::<u8>::STRIDE, 48);
        assert_eq!(SbtRecord::<[u8; 16]>::STRIDE, 48);
        assert_eq!(SbtRecord::<[u8; 17]>::STRIDE, 64);
        assert_eq!(SbtRecord::<HitData>::STRIDE, 32 + 32);
        assert_eq!(SbtRecord::<()>::STRIDE, 32);
    }

    #[test]
    fn packed_records_put_header_then_data_at_each_stride() {
        let records: Vec<SbtRecord<HitData>> = (0..3u8)
            .map(|i| {
                SbtRecord::with_header(
                    [i + 1; 32],
                    HitData {
                        color: [i as f32; 3],
                        group: 10 + i as u32,
                        vertices: 0x1000 * i as u64,
                    },
                )
            })
            .collect();
        let bytes = pack_records(&records);
        let stride = SbtRecord::<HitData>::STRIDE;
        assert_eq!(bytes.len(), 3 * stride);
        for (i, r) in records.iter().enumerate() {
            let rec = &bytes[i * stride..(i + 1) * stride];
            assert_eq!(&rec[..32], &r.header[..]);
            let data: HitData =
                bytemuck::pod_read_unaligned(&rec[32..32 + std::mem::size_of::<HitData>()]);
            assert_eq!(data, r.data);
        }
        let packed = PackedRecords::new(&records).unwrap();
        assert_eq!((packed.stride, packed.count), (64, 3));
    }

    #[test]
    fn padding_between_records_is_zero() {
        let records = [
            SbtRecord::with_header([0xAB; 32], 0xFFu8),
            SbtRecord::with_header([0xCD; 32], 0xEEu8),
        ];
        let bytes = pack_records(&records);
        assert_eq!(bytes.len(), 96);
        assert_eq!(bytes[32], 0xFF);
        assert!(bytes[33..48].iter().all(|&b| b == 0));
        assert_eq!(bytes[48], 0xCD);
        assert_eq!(bytes[80], 0xEE);
    }

    #[test]
    fn sbt_validation() {
        let record = SbtRecord::with_header([0; 32], 0u32);
        assert!(SbtBuilder::new().validate().is_err(), "raygen is required");
        let ok = SbtBuilder::new().raygen(record).unwrap();
        assert!(ok.validate().is_ok());
        let empty_hits = ok.clone().hitgroup::<u32>(&[]).unwrap();
        assert!(empty_hits.validate().is_err());
        let with_miss = ok.miss(&[record, record]).unwrap();
        assert!(with_miss.validate().is_ok());
    }

    #[test]
    fn raw_sbt_fields() {
        let raw = raw_sbt(0x100, 0, Some((0x200, 48, 2)), Some((0x400, 64, 7)));
        assert_eq!(raw.raygen_record, 0x100);
        assert_eq!(raw.exception_record, 0);
        assert_eq!(
            (
                raw.miss_record_base,
                raw.miss_record_stride_in_bytes,
                raw.miss_record_count
            ),
            (0x200, 48, 2)
        );
        assert_eq!(
            (
                raw.hitgroup_record_base,
                raw.hitgroup_record_stride_in_bytes,
                raw.hitgroup_record_count
            ),
            (0x400, 64, 7)
        );
        assert_eq!(raw.callables_record_count, 0);
    }

    #[test]
    fn stack_sizes_follow_the_trace_depth_rule() {
        let s = OptixStackSizes {
            css_rg: 100,
            css_ms: 30,
            css_ch: 50,
            css_ah: 20,
            css_is: 40,
            css_cc: 0,
            dss_dc: 0,
        };
        // Depth 1: RG + max(CH or MS, IS + AH) = 100 + max(50, 60).
        let one = compute_stack_sizes(&s, 1, 0, 0, 2);
        assert_eq!(one.continuation, 160);
        assert_eq!(one.max_traversable_graph_depth, 2);
        assert_eq!(
            (
                one.direct_callable_from_traversal,
                one.direct_callable_from_state
            ),
            (0, 0)
        );
        // Depth 2 adds one CH-or-MS frame.
        assert_eq!(compute_stack_sizes(&s, 2, 0, 0, 2).continuation, 210);
        // Depth 0 (no trace): only the raygen frame.
        assert_eq!(compute_stack_sizes(&s, 0, 0, 0, 2).continuation, 100);
        // Direct callables scale with their depth.
        let dc = OptixStackSizes { dss_dc: 16, ..s };
        let sizes = compute_stack_sizes(&dc, 1, 0, 3, 2);
        assert_eq!(sizes.direct_callable_from_state, 48);
        assert_eq!(sizes.direct_callable_from_traversal, 48);
        // Continuation callables add their tree to each level.
        let cc = OptixStackSizes { css_cc: 8, ..s };
        assert_eq!(
            compute_stack_sizes(&cc, 2, 2, 0, 2).continuation,
            100 + 16 + 66 + 66
        );
    }

    #[test]
    fn max_of_stack_sizes_is_elementwise() {
        let a = OptixStackSizes {
            css_rg: 5,
            css_ch: 9,
            ..Default::default()
        };
        let b = OptixStackSizes {
            css_rg: 7,
            css_ms: 3,
            ..Default::default()
        };
        let m = max_stack_sizes(&[a, b]);
        assert_eq!((m.css_rg, m.css_ch, m.css_ms), (7, 9, 3));
    }

    #[test]
    fn log_text_handles_truncation_and_nul() {
        let mut buf = vec![0u8; 8];
        buf[..5].copy_from_slice(b"hello");
        assert_eq!(log_text(&buf, 6), "hello");
        let full = b"abcdefgh".to_vec();
        let t = log_text(&full, 100);
        assert!(
            t.starts_with("abcdefgh") && t.contains("truncated: 100 bytes"),
            "{t}"
        );
    }

    #[test]
    fn pipeline_options_raw_keeps_abi87_prefix_clean() {
        let raw = PipelineCompileOptions::default().to_raw(Abi::V87).unwrap();
        assert_eq!(raw.raw.allow_clustered_geometry, 0);
        assert_eq!(raw.raw.num_attribute_values, 2);
        // SAFETY: the pointer targets the CString kept in `raw`.
        let name =
            unsafe { std::ffi::CStr::from_ptr(raw.raw.pipeline_launch_params_variable_name) };
        assert_eq!(name.to_str().unwrap(), "params");
        let bad = PipelineCompileOptions {
            launch_params_variable_name: "pa\0rams".into(),
            ..Default::default()
        };
        assert!(bad.to_raw(Abi::V105).is_err());
    }

    #[test]
    fn program_group_descriptors() {
        // Descriptors are built without a GPU only for groups without modules.
        let miss = raw_desc(&ProgramGroupKind::Miss(None)).unwrap();
        assert_eq!(miss.desc.kind, sys::OPTIX_PROGRAM_GROUP_KIND_MISS);
        // SAFETY: a miss descriptor uses the `single` member.
        let single = unsafe { miss.desc.desc.single };
        assert!(single.module.is_null() && single.entry_function_name.is_null());
        let hit = raw_desc(&ProgramGroupKind::Hitgroup {
            closest_hit: None,
            any_hit: None,
            intersection: None,
        })
        .unwrap();
        assert_eq!(hit.desc.kind, sys::OPTIX_PROGRAM_GROUP_KIND_HITGROUP);
    }
}
