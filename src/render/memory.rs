//! Whether a frame's film and outputs fit in this machine's memory, asked before the render.
//!
//! A 32768x32768 frame (the largest gasworks renders) needs about 64 GiB. Without this check,
//! an allocation that fails aborts the process ("memory allocation of N bytes failed", no
//! image, no resume file), and on Linux, where allocations are promised lazily, the kernel's
//! out-of-memory killer may end it hours later instead.

/// Bytes a frame needs per pixel at its peak, on the process that holds the film: the film's
/// sums (16), the copy a checkpoint inside a pass takes of it (16) and the image's own pixels
/// (12 for EXR), with 20 to spare. (A stop no longer keeps a copy of the complete passes'
/// film, and a resume file is streamed out rather than put together in memory; the figure
/// stays, as the frame size the checks and the docs promise.)
pub const FRAME_BYTES_PER_PIXEL: u64 = 64;

/// The memory a frame of `width` x `height` pixels needs where its film is held.
pub fn frame_bytes(width: u32, height: u32) -> u64 {
    u64::from(width) * u64::from(height) * FRAME_BYTES_PER_PIXEL
}

/// The memory joining crops into a frame of `width` x `height` pixels needs on top of the
/// crops already read: the frame's pixels (12 bytes for EXR, 3 for PNG) and a coverage byte
/// each, rounded up to 16.
pub fn merge_bytes(width: u32, height: u32) -> u64 {
    u64::from(width) * u64::from(height) * 16
}

/// The memory this process can be given without swapping: Linux's `MemAvailable`, or less
/// where a control group caps the process (a container, a Slurm job: `memory.max` less
/// `memory.current`); `None` where neither is known (another system, or /proc not mounted).
pub fn available_bytes() -> Option<u64> {
    let system = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_mem_available(&t));
    // The process's own group (cgroup v2: the `0::/path` line of /proc/self/cgroup), which
    // is "/" inside a container's namespace.
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()))
        })
        .unwrap_or_default();
    let read = |name: &str| {
        let dir = own.trim_end_matches('/');
        std::fs::read_to_string(format!("/sys/fs/cgroup{dir}/{name}")).ok()
    };
    let group = cgroup_room(
        read("memory.max").as_deref(),
        read("memory.current").as_deref(),
    );
    match (system, group) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The room under a cgroup v2 memory cap: `max` less `current`; `None` without a cap ("max").
fn cgroup_room(max: Option<&str>, current: Option<&str>) -> Option<u64> {
    let max: u64 = max?.trim().parse().ok()?;
    let current: u64 = current.and_then(|c| c.trim().parse().ok()).unwrap_or(0);
    Some(max.saturating_sub(current))
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib * 1024)
}

/// `Err` with a message saying what `what` needs and what is available, when it does not fit.
pub fn check_fits(what: &str, needed: u64, available: Option<u64>) -> Result<(), String> {
    match available {
        Some(free) if needed > free => Err(format!(
            "{what} needs about {} of memory, and {} is available to this process",
            gib(needed),
            gib(free)
        )),
        _ => Ok(()),
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_kib() {
        let text = "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:    8388608 kB\n";
        assert_eq!(parse_mem_available(text), Some(8 << 30));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn a_control_group_cap_counts_only_when_there_is_one() {
        assert_eq!(cgroup_room(Some("max\n"), Some("100\n")), None);
        assert_eq!(cgroup_room(Some("1000\n"), Some("100\n")), Some(900));
        assert_eq!(cgroup_room(Some("1000"), None), Some(1000));
        assert_eq!(cgroup_room(None, Some("1")), None);
    }

    #[test]
    fn a_frame_that_does_not_fit_says_what_it_needs() {
        let largest = frame_bytes(32768, 32768);
        assert_eq!(largest, 64 << 30);
        let e = check_fits("a 32768x32768 image", largest, Some(8 << 30)).unwrap_err();
        assert_eq!(
            e,
            "a 32768x32768 image needs about 64.0 GiB of memory, and 8.0 GiB is available to this process"
        );
        assert!(check_fits("x", 1 << 20, Some(8 << 30)).is_ok());
        assert!(
            check_fits("x", u64::MAX, None).is_ok(),
            "unknown: not refused"
        );
    }
}
