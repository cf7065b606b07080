//! The memory an input may take: an allocator that counts the bytes live and aborts, naming
//! the sizes, when one allocation would take them past the budget of the input being read.
//! libFuzzer reports the abort as a crash and keeps the input.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// What one input may allocate on top of what was live before it: `floor` bytes, and
/// `per_byte` bytes for each of its bytes.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub floor: usize,
    pub per_byte: usize,
}

impl Budget {
    pub fn bytes(self, input_len: usize) -> usize {
        self.floor
            .saturating_add(self.per_byte.saturating_mul(input_len))
    }
}

/// The system allocator, counted.
pub struct Budgeted;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static INPUT_LEN: AtomicUsize = AtomicUsize::new(0);

/// Runs `read` with the allocations past `budget` for an input of `input_len` bytes fatal,
/// and returns what it returned with the most bytes it held live at once.
pub fn within<R>(input_len: usize, budget: Budget, read: impl FnOnce() -> R) -> (R, usize) {
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    INPUT_LEN.store(input_len, Relaxed);
    LIMIT.store(base.saturating_add(budget.bytes(input_len)), Relaxed);
    let out = read();
    LIMIT.store(usize::MAX, Relaxed);
    (out, PEAK.load(Relaxed).saturating_sub(base))
}

fn take(size: usize) {
    let live = LIVE.fetch_add(size, Relaxed) + size;
    PEAK.fetch_max(live, Relaxed);
    let limit = LIMIT.load(Relaxed);
    // A panic's report (its backtrace) is not the input's: the panic is the crash.
    if live > limit && !std::thread::panicking() {
        // No allocation from here on: the message is written with a fixed buffer.
        LIMIT.store(usize::MAX, Relaxed);
        over_budget(size, live, limit, INPUT_LEN.load(Relaxed));
    }
}

fn over_budget(size: usize, live: usize, limit: usize, input_len: usize) -> ! {
    use std::io::Write;
    let mut buf = [0u8; 256];
    let mut w = &mut buf[..];
    let _ = writeln!(
        w,
        "over budget: an allocation of {size} bytes takes {live} bytes live, past the \
         {limit} allowed for an input of {input_len} bytes"
    );
    let left = w.len();
    let _ = std::io::stderr().write_all(&buf[..buf.len() - left]);
    std::process::abort()
}

unsafe impl GlobalAlloc for Budgeted {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > layout.size() {
            take(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Relaxed);
        }
        System.realloc(ptr, layout, new_size)
    }
}
