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

#[cfg(test)]
mod tests {
    use super::*;

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
