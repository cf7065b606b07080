//! The raw OptiX ABI: the types, constants and function tables gasworks uses, declared by hand
//! from the ABI facts of the public OptiX 8.0 (ABI 87) and 9.0 (ABI 105) headers. Declarations
//! only: [`super::loader`] loads the driver's `libnvoptix.so.1` and fills a table.
//!
//! This is the one place with OptiX FFI declarations. Everything here mirrors C layouts exactly; the tests at
//! the bottom pin the size, alignment and every field offset of every struct, and the value of
//! every constant, against the numbers the C headers give (see `docs/optix-abi.md`).
//!
//! Conventions:
//! - C enums are plain `u32`/`i32` type aliases with `const`s, never Rust enums: the driver may
//!   hand back a value we do not know, and an unknown discriminant in a Rust enum is undefined
//!   behaviour. [`OptixResult`] is a newtype so that it can carry its name.
//! - Structs keep the C type names; fields are snake_case versions of the C field names.
//! - Only the types and table entries gasworks calls are declared. Unused trailing table entries
//!   are opaque padding so that the table has the exact size the driver checks.

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;

// ---------------------------------------------------------------------------------------------
// Basic handle types
// ---------------------------------------------------------------------------------------------

/// A CUDA device address (64-bit on every platform gasworks supports).
pub type CUdeviceptr = u64;
/// A CUDA context handle, as the driver API passes it.
pub type CUcontext = *mut c_void;
/// A CUDA stream handle, as the driver API passes it.
pub type CUstream = *mut c_void;
/// An opaque handle to a traversable (GAS, IAS...), used in device code.
pub type OptixTraversableHandle = u64;

macro_rules! opaque_handle {
    ($handle:ident, $target:ident) => {
        #[repr(C)]
        pub struct $target {
            _private: [u8; 0],
        }
        pub type $handle = *mut $target;
    };
}
opaque_handle!(OptixDeviceContext, OptixDeviceContext_t);
opaque_handle!(OptixModule, OptixModule_t);
opaque_handle!(OptixProgramGroup, OptixProgramGroup_t);
opaque_handle!(OptixPipeline, OptixPipeline_t);

// ---------------------------------------------------------------------------------------------
// Alignment constants
// ---------------------------------------------------------------------------------------------

/// Size of the opaque header at the start of every SBT record.
pub const OPTIX_SBT_RECORD_HEADER_SIZE: usize = 32;
/// Alignment of SBT records in device memory.
pub const OPTIX_SBT_RECORD_ALIGNMENT: usize = 16;
/// Alignment of acceleration-structure temp (scratch) and output buffers.
pub const OPTIX_ACCEL_BUFFER_BYTE_ALIGNMENT: usize = 128;
/// Alignment of the instance array of an instance build input.
pub const OPTIX_INSTANCE_BYTE_ALIGNMENT: usize = 16;

// ---------------------------------------------------------------------------------------------
// Result codes
// ---------------------------------------------------------------------------------------------

/// An `OptixResult`: 0 is success, everything else an error with a name.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OptixResult(pub c_int);

macro_rules! optix_results {
    ($($name:ident = $value:expr,)*) => {
        impl OptixResult {
            $(pub const $name: OptixResult = OptixResult($value);)*

            /// Every result code gasworks knows, with its C name.
            pub const ALL: &'static [(OptixResult, &'static str)] = &[
                $((OptixResult($value), concat!("OPTIX_", stringify!($name))),)*
            ];
        }
    };
}

optix_results! {
    SUCCESS = 0,
    ERROR_INVALID_VALUE = 7001,
    ERROR_HOST_OUT_OF_MEMORY = 7002,
    ERROR_INVALID_OPERATION = 7003,
    ERROR_FILE_IO_ERROR = 7004,
    ERROR_INVALID_FILE_FORMAT = 7005,
    ERROR_DISK_CACHE_INVALID_PATH = 7010,
    ERROR_DISK_CACHE_PERMISSION_ERROR = 7011,
    ERROR_DISK_CACHE_DATABASE_ERROR = 7012,
    ERROR_DISK_CACHE_INVALID_DATA = 7013,
    ERROR_LAUNCH_FAILURE = 7050,
    ERROR_INVALID_DEVICE_CONTEXT = 7051,
    ERROR_CUDA_NOT_INITIALIZED = 7052,
    ERROR_VALIDATION_FAILURE = 7053,
    ERROR_INVALID_INPUT = 7200,
    ERROR_INVALID_LAUNCH_PARAMETER = 7201,
    ERROR_INVALID_PAYLOAD_ACCESS = 7202,
    ERROR_INVALID_ATTRIBUTE_ACCESS = 7203,
    ERROR_INVALID_FUNCTION_USE = 7204,
    ERROR_INVALID_FUNCTION_ARGUMENTS = 7205,
    ERROR_PIPELINE_OUT_OF_CONSTANT_MEMORY = 7250,
    ERROR_PIPELINE_LINK_ERROR = 7251,
    ERROR_ILLEGAL_DURING_TASK_EXECUTE = 7270,
    ERROR_INTERNAL_COMPILER_ERROR = 7299,
    ERROR_DENOISER_MODEL_NOT_SET = 7300,
    ERROR_DENOISER_NOT_INITIALIZED = 7301,
    ERROR_NOT_COMPATIBLE = 7400,
    ERROR_PAYLOAD_TYPE_MISMATCH = 7500,
    ERROR_PAYLOAD_TYPE_RESOLUTION_FAILED = 7501,
    ERROR_PAYLOAD_TYPE_ID_INVALID = 7502,
    ERROR_NOT_SUPPORTED = 7800,
    ERROR_UNSUPPORTED_ABI_VERSION = 7801,
    ERROR_FUNCTION_TABLE_SIZE_MISMATCH = 7802,
    ERROR_INVALID_ENTRY_FUNCTION_OPTIONS = 7803,
    ERROR_LIBRARY_NOT_FOUND = 7804,
    ERROR_ENTRY_SYMBOL_NOT_FOUND = 7805,
    ERROR_LIBRARY_UNLOAD_FAILURE = 7806,
    ERROR_DEVICE_OUT_OF_MEMORY = 7807,
    // Added in OptiX 9.0 (ABI 105); an ABI-87 driver never returns it.
    ERROR_INVALID_POINTER = 7808,
    ERROR_CUDA_ERROR = 7900,
    ERROR_INTERNAL_ERROR = 7990,
    ERROR_UNKNOWN = 7999,
}

impl OptixResult {
    /// The C name of this code (`OPTIX_ERROR_INVALID_VALUE`), or `None` for a code newer than
    /// this table.
    pub fn name(self) -> Option<&'static str> {
        Self::ALL
            .iter()
            .find(|(code, _)| *code == self)
            .map(|(_, name)| *name)
    }

    pub fn is_success(self) -> bool {
        self == Self::SUCCESS
    }
}

impl fmt::Debug for OptixResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name}"),
            None => write!(f, "OptixResult({})", self.0),
        }
    }
}

impl fmt::Display for OptixResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

// ---------------------------------------------------------------------------------------------
// Enums and flags (C enums: plain integers)
// ---------------------------------------------------------------------------------------------

pub type OptixDeviceContextValidationMode = u32;
pub const OPTIX_DEVICE_CONTEXT_VALIDATION_MODE_OFF: u32 = 0;
pub const OPTIX_DEVICE_CONTEXT_VALIDATION_MODE_ALL: u32 = 0xFFFF_FFFF;

pub type OptixDeviceProperty = u32;
pub const OPTIX_DEVICE_PROPERTY_LIMIT_MAX_TRACE_DEPTH: u32 = 0x2001;
pub const OPTIX_DEVICE_PROPERTY_LIMIT_MAX_TRAVERSABLE_GRAPH_DEPTH: u32 = 0x2002;
pub const OPTIX_DEVICE_PROPERTY_LIMIT_MAX_PRIMITIVES_PER_GAS: u32 = 0x2003;
pub const OPTIX_DEVICE_PROPERTY_LIMIT_MAX_INSTANCES_PER_IAS: u32 = 0x2004;
pub const OPTIX_DEVICE_PROPERTY_RTCORE_VERSION: u32 = 0x2005;
pub const OPTIX_DEVICE_PROPERTY_LIMIT_MAX_INSTANCE_ID: u32 = 0x2006;
pub const OPTIX_DEVICE_PROPERTY_LIMIT_MAX_SBT_RECORDS_PER_GAS: u32 = 0x2008;
pub const OPTIX_DEVICE_PROPERTY_LIMIT_MAX_SBT_OFFSET: u32 = 0x2009;

pub type OptixCompileOptimizationLevel = u32;
pub const OPTIX_COMPILE_OPTIMIZATION_DEFAULT: u32 = 0;
pub const OPTIX_COMPILE_OPTIMIZATION_LEVEL_0: u32 = 0x2340;
pub const OPTIX_COMPILE_OPTIMIZATION_LEVEL_1: u32 = 0x2341;
pub const OPTIX_COMPILE_OPTIMIZATION_LEVEL_2: u32 = 0x2342;
pub const OPTIX_COMPILE_OPTIMIZATION_LEVEL_3: u32 = 0x2343;

pub type OptixCompileDebugLevel = u32;
pub const OPTIX_COMPILE_DEBUG_LEVEL_DEFAULT: u32 = 0;
pub const OPTIX_COMPILE_DEBUG_LEVEL_NONE: u32 = 0x2350;
pub const OPTIX_COMPILE_DEBUG_LEVEL_MINIMAL: u32 = 0x2351;
pub const OPTIX_COMPILE_DEBUG_LEVEL_FULL: u32 = 0x2352;
pub const OPTIX_COMPILE_DEBUG_LEVEL_MODERATE: u32 = 0x2353;

pub type OptixProgramGroupKind = u32;
pub const OPTIX_PROGRAM_GROUP_KIND_RAYGEN: u32 = 0x2421;
pub const OPTIX_PROGRAM_GROUP_KIND_MISS: u32 = 0x2422;
pub const OPTIX_PROGRAM_GROUP_KIND_EXCEPTION: u32 = 0x2423;
pub const OPTIX_PROGRAM_GROUP_KIND_HITGROUP: u32 = 0x2424;
pub const OPTIX_PROGRAM_GROUP_KIND_CALLABLES: u32 = 0x2425;
pub const OPTIX_PROGRAM_GROUP_FLAGS_NONE: u32 = 0;

pub const OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_ANY: u32 = 0;
pub const OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_SINGLE_GAS: u32 = 1 << 0;
pub const OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_SINGLE_LEVEL_INSTANCING: u32 = 1 << 1;

pub const OPTIX_EXCEPTION_FLAG_NONE: u32 = 0;
pub const OPTIX_EXCEPTION_FLAG_STACK_OVERFLOW: u32 = 1 << 0;
pub const OPTIX_EXCEPTION_FLAG_TRACE_DEPTH: u32 = 1 << 1;
pub const OPTIX_EXCEPTION_FLAG_USER: u32 = 1 << 2;

pub const OPTIX_PRIMITIVE_TYPE_FLAGS_CUSTOM: u32 = 1 << 0;
pub const OPTIX_PRIMITIVE_TYPE_FLAGS_TRIANGLE: u32 = 1 << 31;

pub type OptixBuildInputType = u32;
pub const OPTIX_BUILD_INPUT_TYPE_TRIANGLES: u32 = 0x2141;
pub const OPTIX_BUILD_INPUT_TYPE_CUSTOM_PRIMITIVES: u32 = 0x2142;
pub const OPTIX_BUILD_INPUT_TYPE_INSTANCES: u32 = 0x2143;
pub const OPTIX_BUILD_INPUT_TYPE_INSTANCE_POINTERS: u32 = 0x2144;

pub type OptixVertexFormat = u32;
pub const OPTIX_VERTEX_FORMAT_NONE: u32 = 0;
pub const OPTIX_VERTEX_FORMAT_FLOAT3: u32 = 0x2121;

pub type OptixIndicesFormat = u32;
pub const OPTIX_INDICES_FORMAT_NONE: u32 = 0;
pub const OPTIX_INDICES_FORMAT_UNSIGNED_SHORT3: u32 = 0x2102;
pub const OPTIX_INDICES_FORMAT_UNSIGNED_INT3: u32 = 0x2103;

pub type OptixTransformFormat = u32;
pub const OPTIX_TRANSFORM_FORMAT_NONE: u32 = 0;
pub const OPTIX_TRANSFORM_FORMAT_MATRIX_FLOAT12: u32 = 0x21E1;

pub const OPTIX_GEOMETRY_FLAG_NONE: u32 = 0;
pub const OPTIX_GEOMETRY_FLAG_DISABLE_ANYHIT: u32 = 1 << 0;
pub const OPTIX_GEOMETRY_FLAG_REQUIRE_SINGLE_ANYHIT_CALL: u32 = 1 << 1;
pub const OPTIX_GEOMETRY_FLAG_DISABLE_TRIANGLE_FACE_CULLING: u32 = 1 << 2;

pub const OPTIX_BUILD_FLAG_NONE: u32 = 0;
pub const OPTIX_BUILD_FLAG_ALLOW_UPDATE: u32 = 1 << 0;
pub const OPTIX_BUILD_FLAG_ALLOW_COMPACTION: u32 = 1 << 1;
pub const OPTIX_BUILD_FLAG_PREFER_FAST_TRACE: u32 = 1 << 2;
pub const OPTIX_BUILD_FLAG_PREFER_FAST_BUILD: u32 = 1 << 3;
pub const OPTIX_BUILD_FLAG_ALLOW_RANDOM_VERTEX_ACCESS: u32 = 1 << 4;
pub const OPTIX_BUILD_FLAG_ALLOW_RANDOM_INSTANCE_ACCESS: u32 = 1 << 5;

pub type OptixBuildOperation = u32;
pub const OPTIX_BUILD_OPERATION_BUILD: u32 = 0x2161;
pub const OPTIX_BUILD_OPERATION_UPDATE: u32 = 0x2162;

pub type OptixAccelPropertyType = u32;
pub const OPTIX_PROPERTY_TYPE_COMPACTED_SIZE: u32 = 0x2181;
pub const OPTIX_PROPERTY_TYPE_AABBS: u32 = 0x2182;

pub const OPTIX_INSTANCE_FLAG_NONE: u32 = 0;
pub const OPTIX_INSTANCE_FLAG_DISABLE_TRIANGLE_FACE_CULLING: u32 = 1 << 0;
pub const OPTIX_INSTANCE_FLAG_FLIP_TRIANGLE_FACING: u32 = 1 << 1;
pub const OPTIX_INSTANCE_FLAG_DISABLE_ANYHIT: u32 = 1 << 2;
pub const OPTIX_INSTANCE_FLAG_ENFORCE_ANYHIT: u32 = 1 << 3;

// ---------------------------------------------------------------------------------------------
// Structs
// ---------------------------------------------------------------------------------------------

/// `OptixLogCallback`: level (1 fatal, 2 error, 3 warning, 4 print), tag, message, user data.
pub type OptixLogCallback = Option<
    unsafe extern "C" fn(
        level: c_uint,
        tag: *const c_char,
        message: *const c_char,
        cbdata: *mut c_void,
    ),
>;

/// Implements `Default` as all-zero bytes, which is what the C API means by "not set" for these
/// plain-data structs (integers, raw pointers and nullable function pointers only).
macro_rules! zeroed_default {
    ($($ty:ty),*) => {$(
        impl Default for $ty {
            fn default() -> Self {
                // SAFETY: every field of this #[repr(C)] struct is an integer, a float, a raw
                // pointer, an Option of a function pointer or an array/union of those, for all
                // of which the all-zero bit pattern is a valid value.
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixDeviceContextOptions {
    pub log_callback_function: OptixLogCallback,
    pub log_callback_data: *mut c_void,
    pub log_callback_level: c_int,
    pub validation_mode: OptixDeviceContextValidationMode,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixModuleCompileOptions {
    pub max_register_count: c_int,
    pub opt_level: OptixCompileOptimizationLevel,
    pub debug_level: OptixCompileDebugLevel,
    /// `const OptixModuleCompileBoundValueEntry*` (unused by gasworks: null).
    pub bound_values: *const c_void,
    pub num_bound_values: c_uint,
    pub num_payload_types: c_uint,
    /// `const OptixPayloadType*` (unused by gasworks: null).
    pub payload_types: *const c_void,
}

/// `OptixPipelineCompileOptions` in its ABI-105 (OptiX 9.0) layout, 48 bytes.
///
/// ABI 87 (OptiX 8.0) has the same fields up to `allow_opacity_micromaps` and ends there
/// (40 bytes, [`PIPELINE_COMPILE_OPTIONS_SIZE_ABI87`]). Because the 9.0 field is appended at the
/// end and an ABI-87 driver reads only the first 40 bytes, this one struct serves both ABIs as
/// long as `allow_clustered_geometry` stays 0 under ABI 87 (the safe layer guarantees it).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixPipelineCompileOptions {
    pub uses_motion_blur: c_int,
    pub traversable_graph_flags: c_uint,
    pub num_payload_values: c_int,
    pub num_attribute_values: c_int,
    pub exception_flags: c_uint,
    pub pipeline_launch_params_variable_name: *const c_char,
    pub uses_primitive_type_flags: c_uint,
    pub allow_opacity_micromaps: c_int,
    /// ABI 105 only.
    pub allow_clustered_geometry: c_int,
}

/// Size of `OptixPipelineCompileOptions` under ABI 87 (it lacks `allowClusteredGeometry`).
pub const PIPELINE_COMPILE_OPTIONS_SIZE_ABI87: usize = 40;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixPipelineLinkOptions {
    pub max_trace_depth: c_uint,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixProgramGroupSingleModule {
    pub module: OptixModule,
    pub entry_function_name: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixProgramGroupHitgroup {
    pub module_ch: OptixModule,
    pub entry_function_name_ch: *const c_char,
    pub module_ah: OptixModule,
    pub entry_function_name_ah: *const c_char,
    pub module_is: OptixModule,
    pub entry_function_name_is: *const c_char,
}

/// The union of `OptixProgramGroupDesc`: raygen, miss and exception use `single`, hit groups
/// `hitgroup`. (Callables are not used by gasworks; the union keeps the C size.)
#[repr(C)]
#[derive(Clone, Copy)]
pub union OptixProgramGroupDescUnion {
    pub single: OptixProgramGroupSingleModule,
    pub hitgroup: OptixProgramGroupHitgroup,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptixProgramGroupDesc {
    pub kind: OptixProgramGroupKind,
    pub flags: c_uint,
    pub desc: OptixProgramGroupDescUnion,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixProgramGroupOptions {
    /// `const OptixPayloadType*` (null: the module's default payload type).
    pub payload_type: *const c_void,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixShaderBindingTable {
    pub raygen_record: CUdeviceptr,
    pub exception_record: CUdeviceptr,
    pub miss_record_base: CUdeviceptr,
    pub miss_record_stride_in_bytes: c_uint,
    pub miss_record_count: c_uint,
    pub hitgroup_record_base: CUdeviceptr,
    pub hitgroup_record_stride_in_bytes: c_uint,
    pub hitgroup_record_count: c_uint,
    pub callables_record_base: CUdeviceptr,
    pub callables_record_stride_in_bytes: c_uint,
    pub callables_record_count: c_uint,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixBuildInputTriangleArray {
    /// `const CUdeviceptr*`: a HOST array of one device pointer per motion key (1 without motion).
    pub vertex_buffers: *const CUdeviceptr,
    pub num_vertices: c_uint,
    pub vertex_format: OptixVertexFormat,
    pub vertex_stride_in_bytes: c_uint,
    pub index_buffer: CUdeviceptr,
    pub num_index_triplets: c_uint,
    pub index_format: OptixIndicesFormat,
    pub index_stride_in_bytes: c_uint,
    pub pre_transform: CUdeviceptr,
    /// `const unsigned int*`: a HOST array of `num_sbt_records` geometry flags.
    pub flags: *const c_uint,
    pub num_sbt_records: c_uint,
    pub sbt_index_offset_buffer: CUdeviceptr,
    pub sbt_index_offset_size_in_bytes: c_uint,
    pub sbt_index_offset_stride_in_bytes: c_uint,
    pub primitive_index_offset: c_uint,
    pub transform_format: OptixTransformFormat,
    /// `OptixBuildInputOpacityMicromap` (48 bytes), unused by gasworks: keep zeroed.
    pub opacity_micromap: [u64; 6],
    /// `OptixBuildInputDisplacementMicromap` (96 bytes), unused by gasworks: keep zeroed.
    pub displacement_micromap: [u64; 12],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OptixBuildInputInstanceArray {
    /// Device address of an array of [`OptixInstance`] (16-byte aligned).
    pub instances: CUdeviceptr,
    pub num_instances: c_uint,
    /// 0 means `sizeof(OptixInstance)`.
    pub instance_stride: c_uint,
}

/// The union of `OptixBuildInput`: 1024 bytes whatever the variant (the C header pads it with
/// `char pad[1024]`, which is what fixes the size of the whole struct at 8 + 1024).
#[repr(C)]
#[derive(Clone, Copy)]
pub union OptixBuildInputUnion {
    pub triangle_array: OptixBuildInputTriangleArray,
    pub instance_array: OptixBuildInputInstanceArray,
    pub pad: [u64; 128],
}

/// `OptixBuildInput`: a type tag and a fixed-size union. Build it with
/// [`OptixBuildInput::triangles`] or [`OptixBuildInput::instances`], which zero the unused bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptixBuildInput {
    pub type_: OptixBuildInputType,
    pub input: OptixBuildInputUnion,
}

impl OptixBuildInput {
    pub fn triangles(array: OptixBuildInputTriangleArray) -> Self {
        let mut input = OptixBuildInputUnion { pad: [0; 128] };
        input.triangle_array = array;
        OptixBuildInput {
            type_: OPTIX_BUILD_INPUT_TYPE_TRIANGLES,
            input,
        }
    }

    pub fn instances(array: OptixBuildInputInstanceArray) -> Self {
        let mut input = OptixBuildInputUnion { pad: [0; 128] };
        input.instance_array = array;
        OptixBuildInput {
            type_: OPTIX_BUILD_INPUT_TYPE_INSTANCES,
            input,
        }
    }

    /// The triangle array, if this is a triangle input.
    pub fn as_triangles(&self) -> Option<&OptixBuildInputTriangleArray> {
        // SAFETY: the tag says which union member was written by the constructors above, and
        // both members are plain data valid for any bit pattern that was written through them.
        if self.type_ == OPTIX_BUILD_INPUT_TYPE_TRIANGLES {
            Some(unsafe { &self.input.triangle_array })
        } else {
            None
        }
    }

    /// The instance array, if this is an instance input.
    pub fn as_instances(&self) -> Option<&OptixBuildInputInstanceArray> {
        // SAFETY: as in `as_triangles`.
        if self.type_ == OPTIX_BUILD_INPUT_TYPE_INSTANCES {
            Some(unsafe { &self.input.instance_array })
        } else {
            None
        }
    }
}

impl fmt::Debug for OptixBuildInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("OptixBuildInput");
        d.field("type", &format_args!("{:#x}", self.type_));
        if let Some(t) = self.as_triangles() {
            d.field("triangle_array", t);
        } else if let Some(i) = self.as_instances() {
            d.field("instance_array", i);
        }
        d.finish()
    }
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OptixMotionOptions {
    pub num_keys: u16,
    pub flags: u16,
    pub time_begin: f32,
    pub time_end: f32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OptixAccelBuildOptions {
    pub build_flags: c_uint,
    pub operation: OptixBuildOperation,
    pub motion_options: OptixMotionOptions,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptixAccelBufferSizes {
    pub output_size_in_bytes: usize,
    pub temp_size_in_bytes: usize,
    pub temp_update_size_in_bytes: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptixAccelEmitDesc {
    /// Device address the property is written to (8-byte aligned).
    pub result: CUdeviceptr,
    pub type_: OptixAccelPropertyType,
}

/// One instance of an instance build input: 80 bytes, uploaded as an array to device memory.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct OptixInstance {
    /// Row-major 3x4 object-to-world matrix.
    pub transform: [f32; 12],
    pub instance_id: c_uint,
    pub sbt_offset: c_uint,
    pub visibility_mask: c_uint,
    pub flags: c_uint,
    pub traversable_handle: OptixTraversableHandle,
    pub pad: [c_uint; 2],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptixStackSizes {
    pub css_rg: c_uint,
    pub css_ms: c_uint,
    pub css_ch: c_uint,
    pub css_ah: c_uint,
    pub css_is: c_uint,
    pub css_cc: c_uint,
    pub dss_dc: c_uint,
}

zeroed_default!(
    OptixDeviceContextOptions,
    OptixModuleCompileOptions,
    OptixPipelineCompileOptions,
    OptixProgramGroupDesc,
    OptixProgramGroupOptions,
    OptixShaderBindingTable,
    OptixBuildInputTriangleArray,
    OptixBuildInputInstanceArray
);

// SAFETY (for both): these hold only host pointers that the safe layer keeps alive for the
// duration of the call they are passed to; the structs themselves are inert data.
unsafe impl Send for OptixBuildInput {}
unsafe impl Sync for OptixBuildInput {}

// ---------------------------------------------------------------------------------------------
// Function tables
// ---------------------------------------------------------------------------------------------

/// An entry of the table that gasworks does not call: kept only for its position.
pub type UnusedEntry = Option<unsafe extern "C" fn()>;

pub type FnGetErrorName = unsafe extern "C" fn(OptixResult) -> *const c_char;
pub type FnDeviceContextCreate = unsafe extern "C" fn(
    CUcontext,
    *const OptixDeviceContextOptions,
    *mut OptixDeviceContext,
) -> OptixResult;
pub type FnDeviceContextDestroy = unsafe extern "C" fn(OptixDeviceContext) -> OptixResult;
pub type FnDeviceContextGetProperty = unsafe extern "C" fn(
    OptixDeviceContext,
    OptixDeviceProperty,
    *mut c_void,
    usize,
) -> OptixResult;
pub type FnDeviceContextSetLogCallback =
    unsafe extern "C" fn(OptixDeviceContext, OptixLogCallback, *mut c_void, c_uint) -> OptixResult;
pub type FnModuleCreate = unsafe extern "C" fn(
    OptixDeviceContext,
    *const OptixModuleCompileOptions,
    *const OptixPipelineCompileOptions,
    *const c_char,
    usize,
    *mut c_char,
    *mut usize,
    *mut OptixModule,
) -> OptixResult;
pub type FnModuleDestroy = unsafe extern "C" fn(OptixModule) -> OptixResult;
pub type FnProgramGroupCreate = unsafe extern "C" fn(
    OptixDeviceContext,
    *const OptixProgramGroupDesc,
    c_uint,
    *const OptixProgramGroupOptions,
    *mut c_char,
    *mut usize,
    *mut OptixProgramGroup,
) -> OptixResult;
pub type FnProgramGroupDestroy = unsafe extern "C" fn(OptixProgramGroup) -> OptixResult;
pub type FnProgramGroupGetStackSize =
    unsafe extern "C" fn(OptixProgramGroup, *mut OptixStackSizes, OptixPipeline) -> OptixResult;
pub type FnPipelineCreate = unsafe extern "C" fn(
    OptixDeviceContext,
    *const OptixPipelineCompileOptions,
    *const OptixPipelineLinkOptions,
    *const OptixProgramGroup,
    c_uint,
    *mut c_char,
    *mut usize,
    *mut OptixPipeline,
) -> OptixResult;
pub type FnPipelineDestroy = unsafe extern "C" fn(OptixPipeline) -> OptixResult;
pub type FnPipelineSetStackSize =
    unsafe extern "C" fn(OptixPipeline, c_uint, c_uint, c_uint, c_uint) -> OptixResult;
pub type FnAccelComputeMemoryUsage = unsafe extern "C" fn(
    OptixDeviceContext,
    *const OptixAccelBuildOptions,
    *const OptixBuildInput,
    c_uint,
    *mut OptixAccelBufferSizes,
) -> OptixResult;
pub type FnAccelBuild = unsafe extern "C" fn(
    OptixDeviceContext,
    CUstream,
    *const OptixAccelBuildOptions,
    *const OptixBuildInput,
    c_uint,
    CUdeviceptr,
    usize,
    CUdeviceptr,
    usize,
    *mut OptixTraversableHandle,
    *const OptixAccelEmitDesc,
    c_uint,
) -> OptixResult;
pub type FnAccelCompact = unsafe extern "C" fn(
    OptixDeviceContext,
    CUstream,
    OptixTraversableHandle,
    CUdeviceptr,
    usize,
    *mut OptixTraversableHandle,
) -> OptixResult;
pub type FnAccelEmitProperty = unsafe extern "C" fn(
    OptixDeviceContext,
    CUstream,
    OptixTraversableHandle,
    *const OptixAccelEmitDesc,
) -> OptixResult;
pub type FnSbtRecordPackHeader =
    unsafe extern "C" fn(OptixProgramGroup, *mut c_void) -> OptixResult;
pub type FnLaunch = unsafe extern "C" fn(
    OptixPipeline,
    CUstream,
    CUdeviceptr,
    usize,
    *const OptixShaderBindingTable,
    c_uint,
    c_uint,
    c_uint,
) -> OptixResult;

/// The first 38 entries, identical in the ABI-87 and ABI-105 tables (indices 0..=37).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FunctionTablePrefix {
    pub optix_get_error_name: Option<FnGetErrorName>, // 0
    pub optix_get_error_string: Option<FnGetErrorName>, // 1
    pub optix_device_context_create: Option<FnDeviceContextCreate>, // 2
    pub optix_device_context_destroy: Option<FnDeviceContextDestroy>, // 3
    pub optix_device_context_get_property: Option<FnDeviceContextGetProperty>, // 4
    pub optix_device_context_set_log_callback: Option<FnDeviceContextSetLogCallback>, // 5
    /// optixDeviceContext{Set,Get}Cache{Enabled,Location,DatabaseSizes}
    pub unused_cache: [UnusedEntry; 6], // 6..=11
    pub optix_module_create: Option<FnModuleCreate>,  // 12
    /// optixModuleCreateWithTasks, optixModuleGetCompilationState
    pub unused_module_tasks: [UnusedEntry; 2], // 13..=14
    pub optix_module_destroy: Option<FnModuleDestroy>, // 15
    /// optixBuiltinISModuleGet, optixTaskExecute
    pub unused_builtin_task: [UnusedEntry; 2], // 16..=17
    pub optix_program_group_create: Option<FnProgramGroupCreate>, // 18
    pub optix_program_group_destroy: Option<FnProgramGroupDestroy>, // 19
    pub optix_program_group_get_stack_size: Option<FnProgramGroupGetStackSize>, // 20
    pub optix_pipeline_create: Option<FnPipelineCreate>, // 21
    pub optix_pipeline_destroy: Option<FnPipelineDestroy>, // 22
    pub optix_pipeline_set_stack_size: Option<FnPipelineSetStackSize>, // 23
    pub optix_accel_compute_memory_usage: Option<FnAccelComputeMemoryUsage>, // 24
    pub optix_accel_build: Option<FnAccelBuild>,      // 25
    /// optixAccelGetRelocationInfo, optixCheckRelocationCompatibility, optixAccelRelocate
    pub unused_relocation: [UnusedEntry; 3], // 26..=28
    pub optix_accel_compact: Option<FnAccelCompact>,  // 29
    pub optix_accel_emit_property: Option<FnAccelEmitProperty>, // 30
    /// optixConvertPointerToTraversableHandle and the 6 opacity/displacement micromap entries
    pub unused_micromaps: [UnusedEntry; 7], // 31..=37
}

/// Number of entries of the full ABI-87 (OptiX 8.0) table.
pub const TABLE_ENTRIES_ABI87: usize = 48;
/// Number of entries of the full ABI-105 (OptiX 9.0) table.
pub const TABLE_ENTRIES_ABI105: usize = 52;

/// The ABI-87 table: after the prefix come optixSbtRecordPackHeader (38) and optixLaunch (39),
/// then 8 denoiser entries gasworks does not use.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FunctionTableAbi87 {
    pub prefix: FunctionTablePrefix,
    pub optix_sbt_record_pack_header: Option<FnSbtRecordPackHeader>, // 38
    pub optix_launch: Option<FnLaunch>,                              // 39
    pub unused_tail: [UnusedEntry; TABLE_ENTRIES_ABI87 - 40],        // 40..=47 denoiser
}

/// The ABI-105 table: OptiX 9.0 inserted optixClusterAccelComputeMemoryUsage and
/// optixClusterAccelBuild (38, 39) before optixSbtRecordPackHeader (40) and optixLaunch (41),
/// then two cooperative-vector entries and 8 denoiser entries.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FunctionTableAbi105 {
    pub prefix: FunctionTablePrefix,
    pub unused_cluster: [UnusedEntry; 2], // 38..=39
    pub optix_sbt_record_pack_header: Option<FnSbtRecordPackHeader>, // 40
    pub optix_launch: Option<FnLaunch>,   // 41
    pub unused_tail: [UnusedEntry; TABLE_ENTRIES_ABI105 - 42], // 42..=51
}

macro_rules! zeroed_table {
    ($($ty:ty),*) => {$(
        impl $ty {
            /// An all-null table, for the loader to hand the driver to fill.
            pub(super) fn empty() -> Self {
                // SAFETY: the table holds only Option<fn> entries, for which zero is None.
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}
zeroed_table!(FunctionTableAbi87, FunctionTableAbi105);

/// `optixQueryFunctionTable(abiId, numOptions, optionKeys, optionValues, table, sizeOfTable)`.
pub type FnQueryFunctionTable = unsafe extern "C" fn(
    c_int,
    c_uint,
    *mut c_void,
    *mut *const c_void,
    *mut c_void,
    usize,
) -> OptixResult;

// ---------------------------------------------------------------------------------------------
// ABI versions
// ---------------------------------------------------------------------------------------------

/// The OptiX ABI versions gasworks can speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Abi {
    /// ABI 105: OptiX 9.0, drivers R570 and newer.
    V105,
    /// ABI 87: OptiX 8.0, drivers R535 and newer.
    V87,
}

impl Abi {
    /// Newest first: the order [`AbiRequest::Newest`](super::loader::AbiRequest::Newest) tries
    /// them in.
    pub const ALL: [Abi; 2] = [Abi::V105, Abi::V87];

    pub fn number(self) -> u32 {
        match self {
            Abi::V105 => 105,
            Abi::V87 => 87,
        }
    }

    pub fn from_number(n: u32) -> Option<Abi> {
        Abi::ALL.into_iter().find(|abi| abi.number() == n)
    }

    /// The OptiX SDK release that defines this ABI.
    pub fn sdk(self) -> &'static str {
        match self {
            Abi::V105 => "OptiX 9.0",
            Abi::V87 => "OptiX 8.0",
        }
    }

    /// The oldest driver branch that provides this ABI.
    pub fn minimum_driver(self) -> &'static str {
        match self {
            Abi::V105 => "R570",
            Abi::V87 => "R535",
        }
    }

    /// Bytes of the full function table of this ABI (what the driver checks `sizeOfTable`
    /// against).
    pub fn table_size(self) -> usize {
        match self {
            Abi::V105 => std::mem::size_of::<FunctionTableAbi105>(),
            Abi::V87 => std::mem::size_of::<FunctionTableAbi87>(),
        }
    }
}

impl fmt::Display for Abi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ABI {} ({})", self.number(), self.sdk())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    /// Asserts size and alignment of a struct.
    macro_rules! layout {
        ($ty:ty, $size:expr, $align:expr) => {
            assert_eq!(size_of::<$ty>(), $size, "size of {}", stringify!($ty));
            assert_eq!(
                align_of::<$ty>(),
                $align,
                "alignment of {}",
                stringify!($ty)
            );
        };
    }
    /// Asserts the offsets of fields, in order.
    macro_rules! offsets {
        ($ty:ty { $($field:ident: $offset:expr),* $(,)? }) => {
            $(assert_eq!(offset_of!($ty, $field), $offset, "offset of {}::{}", stringify!($ty), stringify!($field));)*
        };
    }

    // The expected numbers below are those of the C headers (OptiX 8.0 and 9.0 agree on all of
    // them but OptixPipelineCompileOptions), on x86-64 Linux.

    #[test]
    fn device_context_options_layout() {
        layout!(OptixDeviceContextOptions, 24, 8);
        offsets!(OptixDeviceContextOptions {
            log_callback_function: 0,
            log_callback_data: 8,
            log_callback_level: 16,
            validation_mode: 20,
        });
    }

    #[test]
    fn module_compile_options_layout() {
        layout!(OptixModuleCompileOptions, 40, 8);
        offsets!(OptixModuleCompileOptions {
            max_register_count: 0,
            opt_level: 4,
            debug_level: 8,
            bound_values: 16,
            num_bound_values: 24,
            num_payload_types: 28,
            payload_types: 32,
        });
    }

    #[test]
    fn pipeline_compile_options_layout_for_both_abis() {
        layout!(OptixPipelineCompileOptions, 48, 8);
        offsets!(OptixPipelineCompileOptions {
            uses_motion_blur: 0,
            traversable_graph_flags: 4,
            num_payload_values: 8,
            num_attribute_values: 12,
            exception_flags: 16,
            pipeline_launch_params_variable_name: 24,
            uses_primitive_type_flags: 32,
            allow_opacity_micromaps: 36,
            allow_clustered_geometry: 40,
        });
        // ABI 87's struct is the 40-byte prefix: its last field must end exactly there.
        assert_eq!(
            offset_of!(OptixPipelineCompileOptions, allow_opacity_micromaps) + 4,
            PIPELINE_COMPILE_OPTIONS_SIZE_ABI87
        );
        assert_eq!(
            offset_of!(OptixPipelineCompileOptions, allow_clustered_geometry),
            PIPELINE_COMPILE_OPTIONS_SIZE_ABI87
        );
    }

    #[test]
    fn pipeline_link_options_layout() {
        layout!(OptixPipelineLinkOptions, 4, 4);
        offsets!(OptixPipelineLinkOptions { max_trace_depth: 0 });
    }

    #[test]
    fn program_group_layouts() {
        layout!(OptixProgramGroupSingleModule, 16, 8);
        offsets!(OptixProgramGroupSingleModule {
            module: 0,
            entry_function_name: 8,
        });
        layout!(OptixProgramGroupHitgroup, 48, 8);
        offsets!(OptixProgramGroupHitgroup {
            module_ch: 0,
            entry_function_name_ch: 8,
            module_ah: 16,
            entry_function_name_ah: 24,
            module_is: 32,
            entry_function_name_is: 40,
        });
        // The C union also holds OptixProgramGroupCallables (32 bytes); the hit group (48) is the
        // largest member either way.
        layout!(OptixProgramGroupDescUnion, 48, 8);
        layout!(OptixProgramGroupDesc, 56, 8);
        offsets!(OptixProgramGroupDesc {
            kind: 0,
            flags: 4,
            desc: 8,
        });
        layout!(OptixProgramGroupOptions, 8, 8);
        offsets!(OptixProgramGroupOptions { payload_type: 0 });
    }

    #[test]
    fn shader_binding_table_layout() {
        layout!(OptixShaderBindingTable, 64, 8);
        offsets!(OptixShaderBindingTable {
            raygen_record: 0,
            exception_record: 8,
            miss_record_base: 16,
            miss_record_stride_in_bytes: 24,
            miss_record_count: 28,
            hitgroup_record_base: 32,
            hitgroup_record_stride_in_bytes: 40,
            hitgroup_record_count: 44,
            callables_record_base: 48,
            callables_record_stride_in_bytes: 56,
            callables_record_count: 60,
        });
    }

    #[test]
    fn build_input_layouts() {
        layout!(OptixBuildInputTriangleArray, 240, 8);
        offsets!(OptixBuildInputTriangleArray {
            vertex_buffers: 0,
            num_vertices: 8,
            vertex_format: 12,
            vertex_stride_in_bytes: 16,
            index_buffer: 24,
            num_index_triplets: 32,
            index_format: 36,
            index_stride_in_bytes: 40,
            pre_transform: 48,
            flags: 56,
            num_sbt_records: 64,
            sbt_index_offset_buffer: 72,
            sbt_index_offset_size_in_bytes: 80,
            sbt_index_offset_stride_in_bytes: 84,
            primitive_index_offset: 88,
            transform_format: 92,
            opacity_micromap: 96,
            displacement_micromap: 144,
        });
        layout!(OptixBuildInputInstanceArray, 16, 8);
        offsets!(OptixBuildInputInstanceArray {
            instances: 0,
            num_instances: 8,
            instance_stride: 12,
        });
        layout!(OptixBuildInputUnion, 1024, 8);
        // sizeof(OptixBuildInput) == 8 + 1024 is asserted by the C header itself.
        layout!(OptixBuildInput, 1032, 8);
        offsets!(OptixBuildInput { type_: 0, input: 8 });
    }

    #[test]
    fn build_input_constructors_tag_and_zero() {
        let tri = OptixBuildInput::triangles(OptixBuildInputTriangleArray {
            num_vertices: 3,
            ..Default::default()
        });
        assert_eq!(tri.type_, OPTIX_BUILD_INPUT_TYPE_TRIANGLES);
        assert_eq!(tri.as_triangles().map(|t| t.num_vertices), Some(3));
        assert!(tri.as_instances().is_none());
        // Bytes past the triangle array must be zero (the driver may read the whole union).
        // SAFETY: the union was fully initialised through `pad` first.
        let pad = unsafe { tri.input.pad };
        assert!(pad[size_of::<OptixBuildInputTriangleArray>() / 8..]
            .iter()
            .all(|&w| w == 0));

        let inst = OptixBuildInput::instances(OptixBuildInputInstanceArray {
            instances: 0x1000,
            num_instances: 7,
            instance_stride: 0,
        });
        assert_eq!(inst.type_, OPTIX_BUILD_INPUT_TYPE_INSTANCES);
        assert_eq!(inst.as_instances().map(|i| i.num_instances), Some(7));
        assert!(inst.as_triangles().is_none());
    }

    #[test]
    fn accel_layouts() {
        layout!(OptixMotionOptions, 12, 4);
        offsets!(OptixMotionOptions {
            num_keys: 0,
            flags: 2,
            time_begin: 4,
            time_end: 8,
        });
        layout!(OptixAccelBuildOptions, 20, 4);
        offsets!(OptixAccelBuildOptions {
            build_flags: 0,
            operation: 4,
            motion_options: 8,
        });
        layout!(OptixAccelBufferSizes, 24, 8);
        offsets!(OptixAccelBufferSizes {
            output_size_in_bytes: 0,
            temp_size_in_bytes: 8,
            temp_update_size_in_bytes: 16,
        });
        layout!(OptixAccelEmitDesc, 16, 8);
        offsets!(OptixAccelEmitDesc {
            result: 0,
            type_: 8
        });
    }

    #[test]
    fn instance_layout() {
        layout!(OptixInstance, 80, 8);
        offsets!(OptixInstance {
            transform: 0,
            instance_id: 48,
            sbt_offset: 52,
            visibility_mask: 56,
            flags: 60,
            traversable_handle: 64,
            pad: 72,
        });
        // An array of instances stays 16-byte aligned element by element.
        assert_eq!(
            size_of::<OptixInstance>() % OPTIX_INSTANCE_BYTE_ALIGNMENT,
            0
        );
    }

    #[test]
    fn stack_sizes_layout() {
        layout!(OptixStackSizes, 28, 4);
        offsets!(OptixStackSizes {
            css_rg: 0,
            css_ms: 4,
            css_ch: 8,
            css_ah: 12,
            css_is: 16,
            css_cc: 20,
            dss_dc: 24,
        });
    }

    #[test]
    fn function_tables_have_the_driver_sizes_and_entry_positions() {
        let ptr = size_of::<usize>();
        layout!(FunctionTablePrefix, 38 * ptr, ptr);
        layout!(FunctionTableAbi87, TABLE_ENTRIES_ABI87 * ptr, ptr);
        layout!(FunctionTableAbi105, TABLE_ENTRIES_ABI105 * ptr, ptr);
        assert_eq!(Abi::V87.table_size(), 48 * 8);
        assert_eq!(Abi::V105.table_size(), 52 * 8);

        offsets!(FunctionTablePrefix {
            optix_get_error_name: 0,
            optix_get_error_string: ptr,
            optix_device_context_create: 2 * ptr,
            optix_device_context_destroy: 3 * ptr,
            optix_device_context_get_property: 4 * ptr,
            optix_device_context_set_log_callback: 5 * ptr,
            unused_cache: 6 * ptr,
            optix_module_create: 12 * ptr,
            unused_module_tasks: 13 * ptr,
            optix_module_destroy: 15 * ptr,
            unused_builtin_task: 16 * ptr,
            optix_program_group_create: 18 * ptr,
            optix_program_group_destroy: 19 * ptr,
            optix_program_group_get_stack_size: 20 * ptr,
            optix_pipeline_create: 21 * ptr,
            optix_pipeline_destroy: 22 * ptr,
            optix_pipeline_set_stack_size: 23 * ptr,
            optix_accel_compute_memory_usage: 24 * ptr,
            optix_accel_build: 25 * ptr,
            unused_relocation: 26 * ptr,
            optix_accel_compact: 29 * ptr,
            optix_accel_emit_property: 30 * ptr,
            unused_micromaps: 31 * ptr,
        });
        offsets!(FunctionTableAbi87 {
            prefix: 0,
            optix_sbt_record_pack_header: 38 * ptr,
            optix_launch: 39 * ptr,
            unused_tail: 40 * ptr,
        });
        offsets!(FunctionTableAbi105 {
            prefix: 0,
            unused_cluster: 38 * ptr,
            optix_sbt_record_pack_header: 40 * ptr,
            optix_launch: 41 * ptr,
            unused_tail: 42 * ptr,
        });
    }

    #[test]
    fn alignment_constants() {
        assert_eq!(OPTIX_SBT_RECORD_HEADER_SIZE, 32);
        assert_eq!(OPTIX_SBT_RECORD_ALIGNMENT, 16);
        assert_eq!(OPTIX_ACCEL_BUFFER_BYTE_ALIGNMENT, 128);
        assert_eq!(OPTIX_INSTANCE_BYTE_ALIGNMENT, 16);
    }

    #[test]
    fn enum_values() {
        assert_eq!(OPTIX_DEVICE_CONTEXT_VALIDATION_MODE_OFF, 0);
        assert_eq!(OPTIX_DEVICE_CONTEXT_VALIDATION_MODE_ALL, 0xFFFF_FFFF);
        assert_eq!(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_TRACE_DEPTH, 0x2001);
        assert_eq!(
            OPTIX_DEVICE_PROPERTY_LIMIT_MAX_TRAVERSABLE_GRAPH_DEPTH,
            0x2002
        );
        assert_eq!(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_PRIMITIVES_PER_GAS, 0x2003);
        assert_eq!(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_INSTANCES_PER_IAS, 0x2004);
        assert_eq!(OPTIX_DEVICE_PROPERTY_RTCORE_VERSION, 0x2005);
        assert_eq!(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_INSTANCE_ID, 0x2006);
        assert_eq!(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_SBT_RECORDS_PER_GAS, 0x2008);
        assert_eq!(OPTIX_DEVICE_PROPERTY_LIMIT_MAX_SBT_OFFSET, 0x2009);
        assert_eq!(OPTIX_COMPILE_OPTIMIZATION_DEFAULT, 0);
        assert_eq!(OPTIX_COMPILE_OPTIMIZATION_LEVEL_0, 0x2340);
        assert_eq!(OPTIX_COMPILE_OPTIMIZATION_LEVEL_1, 0x2341);
        assert_eq!(OPTIX_COMPILE_OPTIMIZATION_LEVEL_2, 0x2342);
        assert_eq!(OPTIX_COMPILE_OPTIMIZATION_LEVEL_3, 0x2343);
        assert_eq!(OPTIX_COMPILE_DEBUG_LEVEL_DEFAULT, 0);
        assert_eq!(OPTIX_COMPILE_DEBUG_LEVEL_NONE, 0x2350);
        assert_eq!(OPTIX_COMPILE_DEBUG_LEVEL_MINIMAL, 0x2351);
        assert_eq!(OPTIX_COMPILE_DEBUG_LEVEL_FULL, 0x2352);
        assert_eq!(OPTIX_COMPILE_DEBUG_LEVEL_MODERATE, 0x2353);
        assert_eq!(OPTIX_PROGRAM_GROUP_KIND_RAYGEN, 0x2421);
        assert_eq!(OPTIX_PROGRAM_GROUP_KIND_MISS, 0x2422);
        assert_eq!(OPTIX_PROGRAM_GROUP_KIND_EXCEPTION, 0x2423);
        assert_eq!(OPTIX_PROGRAM_GROUP_KIND_HITGROUP, 0x2424);
        assert_eq!(OPTIX_PROGRAM_GROUP_KIND_CALLABLES, 0x2425);
        assert_eq!(OPTIX_PROGRAM_GROUP_FLAGS_NONE, 0);
        assert_eq!(OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_ANY, 0);
        assert_eq!(OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_SINGLE_GAS, 1);
        assert_eq!(
            OPTIX_TRAVERSABLE_GRAPH_FLAG_ALLOW_SINGLE_LEVEL_INSTANCING,
            2
        );
        assert_eq!(OPTIX_EXCEPTION_FLAG_NONE, 0);
        assert_eq!(OPTIX_EXCEPTION_FLAG_STACK_OVERFLOW, 1);
        assert_eq!(OPTIX_EXCEPTION_FLAG_TRACE_DEPTH, 2);
        assert_eq!(OPTIX_EXCEPTION_FLAG_USER, 4);
        assert_eq!(OPTIX_PRIMITIVE_TYPE_FLAGS_CUSTOM, 1);
        assert_eq!(OPTIX_PRIMITIVE_TYPE_FLAGS_TRIANGLE, 0x8000_0000);
        assert_eq!(OPTIX_BUILD_INPUT_TYPE_TRIANGLES, 0x2141);
        assert_eq!(OPTIX_BUILD_INPUT_TYPE_CUSTOM_PRIMITIVES, 0x2142);
        assert_eq!(OPTIX_BUILD_INPUT_TYPE_INSTANCES, 0x2143);
        assert_eq!(OPTIX_BUILD_INPUT_TYPE_INSTANCE_POINTERS, 0x2144);
        assert_eq!(OPTIX_VERTEX_FORMAT_NONE, 0);
        assert_eq!(OPTIX_VERTEX_FORMAT_FLOAT3, 0x2121);
        assert_eq!(OPTIX_INDICES_FORMAT_NONE, 0);
        assert_eq!(OPTIX_INDICES_FORMAT_UNSIGNED_SHORT3, 0x2102);
        assert_eq!(OPTIX_INDICES_FORMAT_UNSIGNED_INT3, 0x2103);
        assert_eq!(OPTIX_TRANSFORM_FORMAT_NONE, 0);
        assert_eq!(OPTIX_TRANSFORM_FORMAT_MATRIX_FLOAT12, 0x21E1);
        assert_eq!(OPTIX_GEOMETRY_FLAG_NONE, 0);
        assert_eq!(OPTIX_GEOMETRY_FLAG_DISABLE_ANYHIT, 1);
        assert_eq!(OPTIX_GEOMETRY_FLAG_REQUIRE_SINGLE_ANYHIT_CALL, 2);
        assert_eq!(OPTIX_GEOMETRY_FLAG_DISABLE_TRIANGLE_FACE_CULLING, 4);
        assert_eq!(OPTIX_BUILD_FLAG_NONE, 0);
        assert_eq!(OPTIX_BUILD_FLAG_ALLOW_UPDATE, 1);
        assert_eq!(OPTIX_BUILD_FLAG_ALLOW_COMPACTION, 2);
        assert_eq!(OPTIX_BUILD_FLAG_PREFER_FAST_TRACE, 4);
        assert_eq!(OPTIX_BUILD_FLAG_PREFER_FAST_BUILD, 8);
        assert_eq!(OPTIX_BUILD_FLAG_ALLOW_RANDOM_VERTEX_ACCESS, 16);
        assert_eq!(OPTIX_BUILD_FLAG_ALLOW_RANDOM_INSTANCE_ACCESS, 32);
        assert_eq!(OPTIX_BUILD_OPERATION_BUILD, 0x2161);
        assert_eq!(OPTIX_BUILD_OPERATION_UPDATE, 0x2162);
        assert_eq!(OPTIX_PROPERTY_TYPE_COMPACTED_SIZE, 0x2181);
        assert_eq!(OPTIX_PROPERTY_TYPE_AABBS, 0x2182);
        assert_eq!(OPTIX_INSTANCE_FLAG_NONE, 0);
        assert_eq!(OPTIX_INSTANCE_FLAG_DISABLE_TRIANGLE_FACE_CULLING, 1);
        assert_eq!(OPTIX_INSTANCE_FLAG_FLIP_TRIANGLE_FACING, 2);
        assert_eq!(OPTIX_INSTANCE_FLAG_DISABLE_ANYHIT, 4);
        assert_eq!(OPTIX_INSTANCE_FLAG_ENFORCE_ANYHIT, 8);
    }

    #[test]
    fn result_codes_and_names() {
        let expect = [
            (0, "OPTIX_SUCCESS"),
            (7001, "OPTIX_ERROR_INVALID_VALUE"),
            (7002, "OPTIX_ERROR_HOST_OUT_OF_MEMORY"),
            (7050, "OPTIX_ERROR_LAUNCH_FAILURE"),
            (7053, "OPTIX_ERROR_VALIDATION_FAILURE"),
            (7251, "OPTIX_ERROR_PIPELINE_LINK_ERROR"),
            (7299, "OPTIX_ERROR_INTERNAL_COMPILER_ERROR"),
            (7801, "OPTIX_ERROR_UNSUPPORTED_ABI_VERSION"),
            (7802, "OPTIX_ERROR_FUNCTION_TABLE_SIZE_MISMATCH"),
            (7804, "OPTIX_ERROR_LIBRARY_NOT_FOUND"),
            (7807, "OPTIX_ERROR_DEVICE_OUT_OF_MEMORY"),
            (7808, "OPTIX_ERROR_INVALID_POINTER"),
            (7900, "OPTIX_ERROR_CUDA_ERROR"),
            (7990, "OPTIX_ERROR_INTERNAL_ERROR"),
            (7999, "OPTIX_ERROR_UNKNOWN"),
        ];
        for (code, name) in expect {
            assert_eq!(OptixResult(code).name(), Some(name));
        }
        assert_eq!(OptixResult::ALL.len(), 42);
        // Codes are unique.
        let mut codes: Vec<i32> = OptixResult::ALL.iter().map(|(c, _)| c.0).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), OptixResult::ALL.len());
        assert_eq!(OptixResult(1234).name(), None);
        assert_eq!(format!("{}", OptixResult(1234)), "OptixResult(1234)");
    }

    #[test]
    fn abi_numbers() {
        assert_eq!(Abi::V105.number(), 105);
        assert_eq!(Abi::V87.number(), 87);
        assert_eq!(Abi::V105.minimum_driver(), "R570");
        assert_eq!(Abi::V87.minimum_driver(), "R535");
    }
}
