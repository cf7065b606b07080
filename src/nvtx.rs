//! NVTX ranges for Nsight Systems, without the CUDA toolkit.
//!
//! A profiler (`nsys profile --trace=cuda,nvtx`) attaches to NVTX by naming its tool library in
//! `NVTX_INJECTION64_PATH`. On the first NVTX call we load that library and call its
//! `InitializeInjectionNvtx2(getExportTable)`; the tool asks, through the export table, for our
//! per-module function tables and writes its callbacks into their slots. Later calls go through
//! those slots. With no tool (the usual case) every call is one atomic load and a branch: no
//! string is built ([`range_with`] and [`nvtx_range!`](crate::nvtx_range) format lazily), nothing
//! allocated.
//!
//! This implements the NVTX v3 injection protocol (load sequence version 2) from the public
//! NVTX headers' ABI facts. The `nvtx` crate would do the same, but its `nvtx-sys` runs bindgen
//! at build time, which needs libclang on every machine that builds gasworks.
//!
//! Ranges are per thread in NVTX: a [`Range`] guard pops on drop and cannot leave its thread.

use std::ffi::{c_char, c_int, c_uint, c_void, CString};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The environment variable a profiler sets to the path of its tool library (64-bit processes).
pub const INJECTION_PATH_ENV: &str = "NVTX_INJECTION64_PATH";
/// The entry point every NVTX tool library exports.
const INJECTION_ENTRY: &[u8] = b"InitializeInjectionNvtx2\0";
/// NVTX API version these tables follow.
const NVTX_VERSION: u32 = 3;

// Callback modules (NvtxCallbackModule) and, per module, the number of callback ids including
// the invalid id 0 (NVTX_CBID_*_SIZE): a tool may fill any of these slots.
const MODULE_CORE: usize = 1;
const MODULE_CUDA: usize = 2;
const MODULE_CORE2: usize = 5;
/// (module id, slot count) for CORE, CUDA, OPENCL, CUDART, CORE2, SYNC.
const MODULE_SIZES: [(usize, usize); 6] = [(1, 16), (2, 9), (3, 15), (4, 7), (5, 16), (6, 7)];

// Callback ids of the slots gasworks calls.
const CORE_MARK_A: usize = 2;
const CORE_RANGE_PUSH_EX: usize = 8;
const CORE_RANGE_PUSH_A: usize = 9;
const CORE_RANGE_POP: usize = 11;
const CUDA_NAME_CU_STREAM_A: usize = 5;
const CORE2_DOMAIN_RANGE_PUSH_EX: usize = 4;
const CORE2_DOMAIN_RANGE_POP: usize = 5;
const CORE2_DOMAIN_CREATE_A: usize = 12;

// Export table ids.
const ETID_CALLBACKS: u32 = 1;
const ETID_VERSIONINFO: u32 = 3;

/// `nvtxEventAttributes_v2`: 48 bytes.
#[repr(C)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_char,
}

const COLOR_ARGB: i32 = 1;
const MESSAGE_TYPE_ASCII: i32 = 1;

impl EventAttributes {
    fn ascii(message: &CString, argb: Option<u32>) -> EventAttributes {
        EventAttributes {
            version: NVTX_VERSION as u16,
            size: std::mem::size_of::<EventAttributes>() as u16,
            category: 0,
            color_type: if argb.is_some() { COLOR_ARGB } else { 0 },
            color: argb.unwrap_or(0),
            payload_type: 0,
            reserved0: 0,
            payload: 0,
            message_type: MESSAGE_TYPE_ASCII,
            message: message.as_ptr(),
        }
    }
}

type NvtxFunctionPointer = *mut c_void;

/// One module's function table: `slots[id]` holds the tool's callback for callback id `id`;
/// `pointers` is what the tool receives: pointers to the slots, NULL at id 0 and at the end.
struct ModuleTable {
    slots: Box<[AtomicPtr<c_void>]>,
    pointers: Box<[*mut NvtxFunctionPointer]>,
}

/// All module tables, allocated once and never freed (the tool keeps pointers into them).
struct Tables {
    modules: Vec<(usize, ModuleTable)>,
}

// SAFETY: the raw pointers only point into the slots of the same (leaked, immortal) allocation;
// slots are atomics.
unsafe impl Send for Tables {}
unsafe impl Sync for Tables {}

impl Tables {
    fn new() -> Tables {
        let modules = MODULE_SIZES
            .iter()
            .map(|&(module, size)| {
                let slots: Box<[AtomicPtr<c_void>]> = (0..size)
                    .map(|_| AtomicPtr::new(std::ptr::null_mut()))
                    .collect();
                let mut pointers: Vec<*mut NvtxFunctionPointer> = Vec::with_capacity(size + 1);
                pointers.push(std::ptr::null_mut());
                for slot in slots.iter().skip(1) {
                    // AtomicPtr<c_void> has the same layout as *mut c_void, so the tool can
                    // store a function pointer through this.
                    pointers.push(slot.as_ptr());
                }
                pointers.push(std::ptr::null_mut());
                (
                    module,
                    ModuleTable {
                        slots,
                        pointers: pointers.into_boxed_slice(),
                    },
                )
            })
            .collect();
        Tables { modules }
    }

    fn module(&self, module: usize) -> Option<&ModuleTable> {
        self.modules
            .iter()
            .find(|(id, _)| *id == module)
            .map(|(_, t)| t)
    }

    /// The tool's callback for `id` of `module`, if it registered one.
    fn slot(&self, module: usize, id: usize) -> Option<*mut c_void> {
        let ptr = self.module(module)?.slots.get(id)?.load(Ordering::Acquire);
        (!ptr.is_null()).then_some(ptr)
    }
}

/// Tables handed to the tool during initialisation (read by `get_module_function_table`).
static TABLES: OnceLock<&'static Tables> = OnceLock::new();
/// `Some(tables)` once a tool has attached, `None` when there is none.
static TOOL: OnceLock<Option<&'static Tables>> = OnceLock::new();

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table:
        unsafe extern "C" fn(c_int, *mut *mut *mut NvtxFunctionPointer, *mut c_uint) -> c_int,
}

#[repr(C)]
struct ExportTableVersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "C" fn(u32),
}

static CALLBACKS_TABLE: ExportTableCallbacks = ExportTableCallbacks {
    struct_size: std::mem::size_of::<ExportTableCallbacks>(),
    get_module_function_table,
};

static VERSION_TABLE: ExportTableVersionInfo = ExportTableVersionInfo {
    struct_size: std::mem::size_of::<ExportTableVersionInfo>(),
    version: NVTX_VERSION,
    reserved0: 0,
    set_injection_nvtx_version,
};

unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        ETID_CALLBACKS => (&CALLBACKS_TABLE as *const ExportTableCallbacks).cast(),
        ETID_VERSIONINFO => (&VERSION_TABLE as *const ExportTableVersionInfo).cast(),
        _ => std::ptr::null(),
    }
}

unsafe extern "C" fn get_module_function_table(
    module: c_int,
    out_table: *mut *mut *mut NvtxFunctionPointer,
    out_size: *mut c_uint,
) -> c_int {
    let Some(tables) = TABLES.get() else {
        return 0;
    };
    let Some(table) = usize::try_from(module).ok().and_then(|m| tables.module(m)) else {
        return 0;
    };
    if !out_size.is_null() {
        // The number of ids including the invalid id 0 (the pointer array minus its end NULL).
        // SAFETY: the tool passes a writable pointer or null.
        unsafe { *out_size = (table.pointers.len() - 1) as c_uint };
    }
    if !out_table.is_null() {
        // SAFETY: as above; the pointer array lives forever.
        unsafe { *out_table = table.pointers.as_ptr().cast_mut() };
    }
    1
}

unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

type InitializeInjection =
    unsafe extern "C" fn(unsafe extern "C" fn(u32) -> *const c_void) -> c_int;

/// Loads the tool named by `NVTX_INJECTION64_PATH`, if any, and lets it fill our tables.
fn attach_tool() -> Option<&'static Tables> {
    let path = std::env::var_os(INJECTION_PATH_ENV).filter(|p| !p.is_empty())?;
    // SAFETY: loading the profiler's tool library, as NVTX itself does; it was named explicitly
    // by the environment of this process.
    let library = match unsafe { libloading::Library::new(&path) } {
        Ok(lib) => lib,
        Err(e) => {
            log::warn!(
                "NVTX: cannot load tool library {}: {e}",
                path.to_string_lossy()
            );
            return None;
        }
    };
    // SAFETY: the entry point has the documented NVTX signature.
    let init: InitializeInjection =
        match unsafe { library.get::<InitializeInjection>(INJECTION_ENTRY) } {
            Ok(symbol) => *symbol,
            Err(e) => {
                log::warn!(
                    "NVTX: {} has no InitializeInjectionNvtx2: {e}",
                    path.to_string_lossy()
                );
                return None;
            }
        };
    let tables: &'static Tables = TABLES.get_or_init(|| Box::leak(Box::new(Tables::new())));
    // SAFETY: the tool gets our export-table function, which only hands out immortal tables.
    if unsafe { init(get_export_table) } == 0 {
        log::warn!(
            "NVTX: tool {} refused to initialise",
            path.to_string_lossy()
        );
        return None;
    }
    // The tool's callbacks live in the library: it must never be unloaded.
    std::mem::forget(library);
    log::debug!("NVTX: tool {} attached", path.to_string_lossy());
    Some(tables)
}

/// The attached tool's tables; initialises on first use.
#[inline]
fn tool() -> Option<&'static Tables> {
    *TOOL.get_or_init(attach_tool)
}

/// Whether a profiler's tool is attached (initialising NVTX if it was not yet).
pub fn is_attached() -> bool {
    tool().is_some()
}

fn call_push_a(tables: &Tables, message: &CString) -> bool {
    if let Some(f) = tables.slot(MODULE_CORE, CORE_RANGE_PUSH_A) {
        // SAFETY: the tool registered this slot with nvtxRangePushA's signature.
        let f: unsafe extern "C" fn(*const c_char) -> c_int = unsafe { std::mem::transmute(f) };
        // SAFETY: NUL-terminated string valid for the call.
        unsafe { f(message.as_ptr()) };
        true
    } else {
        false
    }
}

fn call_push_ex(tables: &Tables, message: &CString, argb: Option<u32>) -> bool {
    if let Some(f) = tables.slot(MODULE_CORE, CORE_RANGE_PUSH_EX) {
        let attributes = EventAttributes::ascii(message, argb);
        // SAFETY: the tool registered this slot with nvtxRangePushEx's signature.
        let f: unsafe extern "C" fn(*const EventAttributes) -> c_int =
            unsafe { std::mem::transmute(f) };
        // SAFETY: the attributes and the string they point to are valid for the call.
        unsafe { f(&attributes) };
        true
    } else {
        false
    }
}

fn to_cstring(name: &str) -> CString {
    // Names are ours (group and stream numbers...), but a NUL must not make NVTX panic.
    CString::new(name.replace('\0', " ")).unwrap_or_default()
}

/// An open NVTX range; closed (popped) when dropped, on the thread that opened it.
#[must_use = "a range closes when this guard is dropped"]
pub struct Range {
    kind: RangeKind,
    _not_send: PhantomData<*const ()>,
}

enum RangeKind {
    /// Nothing was pushed (no tool, or the tool has no push callback).
    None,
    Core(&'static Tables),
    Domain(&'static Tables, *mut c_void),
}

impl Range {
    fn none() -> Range {
        Range {
            kind: RangeKind::None,
            _not_send: PhantomData,
        }
    }

    fn core(tables: &'static Tables) -> Range {
        Range {
            kind: RangeKind::Core(tables),
            _not_send: PhantomData,
        }
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        match self.kind {
            RangeKind::None => {}
            RangeKind::Core(tables) => {
                if let Some(f) = tables.slot(MODULE_CORE, CORE_RANGE_POP) {
                    // SAFETY: registered with nvtxRangePop's signature.
                    let f: unsafe extern "C" fn() -> c_int = unsafe { std::mem::transmute(f) };
                    // SAFETY: no arguments.
                    unsafe { f() };
                }
            }
            RangeKind::Domain(tables, domain) => {
                if let Some(f) = tables.slot(MODULE_CORE2, CORE2_DOMAIN_RANGE_POP) {
                    // SAFETY: registered with nvtxDomainRangePop's signature.
                    let f: unsafe extern "C" fn(*mut c_void) -> c_int =
                        unsafe { std::mem::transmute(f) };
                    // SAFETY: the domain handle came from the same tool.
                    unsafe { f(domain) };
                }
            }
        }
    }
}

/// Opens a range named `name` (nvtxRangePushA).
pub fn range(name: &str) -> Range {
    let Some(tables) = tool() else {
        return Range::none();
    };
    let message = to_cstring(name);
    if call_push_a(tables, &message) || call_push_ex(tables, &message, None) {
        Range::core(tables)
    } else {
        Range::none()
    }
}

/// Opens a range whose name is only built when a tool is attached.
pub fn range_with(name: impl FnOnce() -> String) -> Range {
    if tool().is_none() {
        return Range::none();
    }
    range(&name())
}

/// Opens a range with a colour (0xAARRGGBB) (nvtxRangePushEx).
pub fn range_colored(name: &str, argb: u32) -> Range {
    let Some(tables) = tool() else {
        return Range::none();
    };
    let message = to_cstring(name);
    if call_push_ex(tables, &message, Some(argb)) || call_push_a(tables, &message) {
        Range::core(tables)
    } else {
        Range::none()
    }
}

/// Marks an instant (nvtxMarkA).
pub fn mark(name: &str) {
    let Some(tables) = tool() else { return };
    if let Some(f) = tables.slot(MODULE_CORE, CORE_MARK_A) {
        let message = to_cstring(name);
        // SAFETY: registered with nvtxMarkA's signature; the string is valid for the call.
        let f: unsafe extern "C" fn(*const c_char) = unsafe { std::mem::transmute(f) };
        unsafe { f(message.as_ptr()) };
    }
}

/// Names the CUDA stream whose `CUstream` handle has this value in the profile
/// (nvtxNameCuStreamA), e.g. "GAS stream 3". NVTX only records the value (it never
/// dereferences it), which is why this takes an integer, and why this layer, below the
/// backends, need not know the stream type of [`crate::optix`].
pub fn name_cuda_stream_handle(handle: usize, name: &str) {
    let Some(tables) = tool() else { return };
    if let Some(f) = tables.slot(MODULE_CUDA, CUDA_NAME_CU_STREAM_A) {
        let message = to_cstring(name);
        // SAFETY: registered with nvtxNameCuStreamA's signature; the string is valid for the
        // call and the handle is passed as an opaque value.
        let f: unsafe extern "C" fn(*mut c_void, *const c_char) = unsafe { std::mem::transmute(f) };
        unsafe { f(handle as *mut c_void, message.as_ptr()) };
    }
}

/// A named NVTX domain: its ranges appear on their own row in Nsight Systems.
#[derive(Clone, Copy, Debug)]
pub struct Domain {
    handle: *mut c_void,
}

// SAFETY: a domain handle is an opaque value the tool hands out for use from any thread.
unsafe impl Send for Domain {}
unsafe impl Sync for Domain {}

impl Domain {
    /// Creates (nvtxDomainCreateA) a domain; without a tool this is a no-op handle.
    pub fn new(name: &str) -> Domain {
        let handle = tool()
            .and_then(|tables| tables.slot(MODULE_CORE2, CORE2_DOMAIN_CREATE_A))
            .map(|f| {
                let message = to_cstring(name);
                // SAFETY: registered with nvtxDomainCreateA's signature.
                let f: unsafe extern "C" fn(*const c_char) -> *mut c_void =
                    unsafe { std::mem::transmute(f) };
                unsafe { f(message.as_ptr()) }
            })
            .unwrap_or(std::ptr::null_mut());
        Domain { handle }
    }

    /// Opens a range in this domain (nvtxDomainRangePushEx).
    pub fn range(&self, name: &str) -> Range {
        let Some(tables) = tool() else {
            return Range::none();
        };
        if self.handle.is_null() {
            return range(name);
        }
        let Some(f) = tables.slot(MODULE_CORE2, CORE2_DOMAIN_RANGE_PUSH_EX) else {
            return range(name);
        };
        let message = to_cstring(name);
        let attributes = EventAttributes::ascii(&message, None);
        // SAFETY: registered with nvtxDomainRangePushEx's signature; arguments valid for the call.
        let f: unsafe extern "C" fn(*mut c_void, *const EventAttributes) -> c_int =
            unsafe { std::mem::transmute(f) };
        unsafe { f(self.handle, &attributes) };
        Range {
            kind: RangeKind::Domain(tables, self.handle),
            _not_send: PhantomData,
        }
    }

    /// Like [`Domain::range`], with the name built only when a tool is attached.
    pub fn range_with(&self, name: impl FnOnce() -> String) -> Range {
        if tool().is_none() {
            return Range::none();
        }
        self.range(&name())
    }
}

/// Opens an NVTX range with a `format!`-style name, formatted only when a profiler is attached:
/// `let _r = nvtx_range!("gas {} stream {}", group, stream);`
#[macro_export]
macro_rules! nvtx_range {
    ($($arg:tt)*) => {
        $crate::nvtx::range_with(|| format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn event_attributes_layout_is_nvtx_v2() {
        assert_eq!(size_of::<EventAttributes>(), 48);
        assert_eq!(offset_of!(EventAttributes, category), 4);
        assert_eq!(offset_of!(EventAttributes, color_type), 8);
        assert_eq!(offset_of!(EventAttributes, color), 12);
        assert_eq!(offset_of!(EventAttributes, payload_type), 16);
        assert_eq!(offset_of!(EventAttributes, payload), 24);
        assert_eq!(offset_of!(EventAttributes, message_type), 32);
        assert_eq!(offset_of!(EventAttributes, message), 40);
    }

    #[test]
    fn export_tables_have_their_sizes_and_ids() {
        assert_eq!(size_of::<ExportTableCallbacks>(), 16);
        assert_eq!(size_of::<ExportTableVersionInfo>(), 24);
        // SAFETY: plain lookups.
        unsafe {
            assert!(!get_export_table(ETID_CALLBACKS).is_null());
            assert!(!get_export_table(ETID_VERSIONINFO).is_null());
            assert!(get_export_table(2).is_null());
            assert!(get_export_table(0).is_null());
        }
    }

    #[test]
    fn module_tables_point_at_their_slots() {
        let tables = Tables::new();
        for (module, size) in MODULE_SIZES {
            let t = tables.module(module).unwrap();
            assert_eq!(t.slots.len(), size);
            assert_eq!(t.pointers.len(), size + 1);
            assert!(t.pointers[0].is_null() && t.pointers[size].is_null());
            for id in 1..size {
                assert_eq!(t.pointers[id], t.slots[id].as_ptr());
            }
        }
        // A tool writes through the pointer; we read it back through the slot.
        let core = tables.module(MODULE_CORE).unwrap();
        // SAFETY: the pointer targets a live slot.
        unsafe { *core.pointers[CORE_RANGE_POP] = 0x1234 as *mut c_void };
        assert_eq!(
            tables.slot(MODULE_CORE, CORE_RANGE_POP),
            Some(0x1234 as *mut c_void)
        );
        assert_eq!(tables.slot(MODULE_CORE, CORE_RANGE_PUSH_A), None);
        assert_eq!(tables.slot(9, 1), None);
    }

    #[test]
    fn names_with_nul_do_not_panic() {
        assert_eq!(to_cstring("a\0b").to_str().unwrap(), "a b");
    }
}
