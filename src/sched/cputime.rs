//! The CPU time of the calling thread: the cost of a CPU tile that other processes on the
//! machine do not inflate (wall time counts the time the thread waited to be scheduled).
//! The unsafe calls of the scheduler (and of `cpu-bench`, which reads the process's CPU time)
//! live here.

/// Seconds of CPU time the calling thread has used, or `None` where the platform cannot say.
pub fn thread_cpu_seconds() -> Option<f64> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
        // CLOCK_THREAD_CPUTIME_ID is a clock every supported Unix provides.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Seconds of CPU time the whole process has used (all threads), or `None` where the platform
/// cannot say: `gasworks cpu-bench` divides work by it to give figures that other processes
/// on a loaded machine do not deflate.
pub fn process_cpu_seconds() -> Option<f64> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: as above, with CLOCK_PROCESS_CPUTIME_ID.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The process's peak resident memory so far, in bytes (`getrusage`'s `ru_maxrss`), or `None`
/// where the platform cannot say: `gasworks cpu-bench` prints it.
pub fn peak_rss_bytes() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: rusage is integers and timevals, for which all zeros is a valid value.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `usage` is a valid, writable rusage for the duration of the call.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
        // Linux reports kibibytes.
        (rc == 0).then(|| usage.ru_maxrss as u64 * 1024)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_memory_covers_what_is_held() {
        let Some(before) = peak_rss_bytes() else {
            return;
        };
        let held = vec![1u8; 64 << 20];
        let after = peak_rss_bytes().unwrap();
        assert!(
            after >= before && after >= held.len() as u64,
            "{before} -> {after}"
        );
        std::hint::black_box(held);
    }

    #[test]
    fn thread_cpu_time_grows_with_work_only() {
        let Some(t0) = thread_cpu_seconds() else {
            return;
        };
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = crate::splitmix::mix64(x ^ i);
        }
        std::hint::black_box(x);
        let t1 = thread_cpu_seconds().unwrap();
        assert!(t1 > t0);
        // Sleeping uses no CPU time (allow generous slack for the clock's granularity).
        std::thread::sleep(std::time::Duration::from_millis(50));
        let t2 = thread_cpu_seconds().unwrap();
        assert!(t2 - t1 < 0.025, "{}", t2 - t1);
    }
}
