//! A rayon pool for work that should take only the cores the rest of the process leaves idle:
//! the `--aov` layers traced while a GPU is set up and renders (`crate::session::aovs`). Its
//! threads run at a lower priority than the others (on Linux, nice 10 above them), so that
//! the GPU's setup, which packs the scene and enqueues its builds on the calling thread, and
//! the cost map estimated beside it on the global pool are slowed little by it, and the
//! layers get the cores back while the GPU renders.
//! `cargo run --release --example background_priority` measures it (figures:
//! docs/guide/output-and-layers.md).
//!
//! A pool of its own, not the global one: rayon serves its workers' own queues before the
//! jobs other threads inject, so a global pool busy with the layers would keep the cost map
//! (a parallel job from another thread) waiting until the layers were all but done.

/// How much lower (in nice steps) the pool's threads run than the thread that starts them.
pub const BACKGROUND_NICE: i32 = 10;

/// A pool of `threads` background threads (see the module comment).
pub fn background_pool(threads: usize) -> Result<rayon::ThreadPool, rayon::ThreadPoolBuildError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .thread_name(|i| format!("gasworks-background-{i}"))
        .start_handler(|_| lower_this_threads_priority())
        .build()
}

/// The calling thread's nice value (Linux), for the tests; `None` elsewhere.
pub fn this_threads_nice() -> Option<i32> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid and getpriority take no pointers; getpriority of our own thread id
        // cannot fail other than by the id, which is ours.
        Some(unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            libc::getpriority(libc::PRIO_PROCESS, tid)
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Linux keeps the nice value per thread, and setpriority on a thread's id changes that thread
/// alone. Where it fails (a sandbox forbidding it), the thread keeps its priority: the layers
/// then share the cores evenly, slower to give way, never wrong.
fn lower_this_threads_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: as in `this_threads_nice`; setpriority takes no pointers either.
        unsafe {
            let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
            let now = libc::getpriority(libc::PRIO_PROCESS, tid);
            libc::setpriority(libc::PRIO_PROCESS, tid, (now + BACKGROUND_NICE).min(19));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pools_threads_run_at_a_lower_priority_than_their_starter() {
        let pool = background_pool(2).expect("a pool");
        let (Some(here), Some(there)) = (this_threads_nice(), pool.install(this_threads_nice))
        else {
            return; // not Linux: no per-thread nice to read
        };
        assert_eq!(there, (here + BACKGROUND_NICE).min(19));
        // The caller's own priority is untouched.
        assert_eq!(this_threads_nice(), Some(here));
        // And the pool's work runs there: a parallel sum inside it is its own.
        let sum: u64 = pool.install(|| {
            use rayon::prelude::*;
            (0..1000u64).into_par_iter().sum()
        });
        assert_eq!(sum, 499_500);
    }
}
