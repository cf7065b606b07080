//! Whether a frame's film and outputs fit in this machine's memory, asked before the render.
//!
//! A 32768x32768 frame (the largest gasworks renders) needs about 64 GiB. Without this check,
//! an allocation that fails aborts the process ("memory allocation of N bytes failed", no
//! image, no resume file), and on Linux, where allocations are promised lazily, the kernel's
//! out-of-memory killer may end it hours later instead. Under an address-space limit
//! (`ulimit -v`) every allocation past it fails so, however much memory the machine has free.

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

/// The memory this process can be given, in bytes, as [`room`] finds it.
pub fn available_bytes() -> Option<u64> {
    room().map(|r| r.bytes)
}

/// How much memory this process can be given, and the limit that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Room {
    pub bytes: u64,
    pub limit: Limit,
}

/// What bounds a [`Room`], for the message of a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Linux's `MemAvailable`: the memory free or freeable without swapping.
    Available,
    /// A cgroup v2 `memory.max` of this many bytes.
    ControlGroup(u64),
    /// An address-space limit (`RLIMIT_AS`, `ulimit -v`) of this many bytes.
    AddressSpace(u64),
}

impl Room {
    /// Room that only the machine's available memory bounds.
    pub fn available(bytes: u64) -> Room {
        Room {
            bytes,
            limit: Limit::Available,
        }
    }
}

/// The memory this process can be given without swapping or failing: the least of Linux's
/// `MemAvailable`, the room under the process's control group's cap (a container, a Slurm
/// job: `memory.max` less `memory.current`) and the room under its address-space limit
/// (`ulimit -v`: the limit less what the process maps already); `None` where none is known.
pub fn room() -> Option<Room> {
    let system = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| parse_mem_available(&t))
        .map(Room::available);
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
    let address_space = address_space_room(address_space_limit(), mapped_bytes());
    [system, group, address_space]
        .into_iter()
        .flatten()
        .min_by_key(|r| r.bytes)
}

/// The room under a cgroup v2 memory cap: `max` less `current`; `None` without a cap ("max").
fn cgroup_room(max: Option<&str>, current: Option<&str>) -> Option<Room> {
    let max: u64 = max?.trim().parse().ok()?;
    let current: u64 = current.and_then(|c| c.trim().parse().ok()).unwrap_or(0);
    Some(Room {
        bytes: max.saturating_sub(current),
        limit: Limit::ControlGroup(max),
    })
}

/// The room under an address-space limit of `limit` bytes: the limit less the `mapped` bytes
/// the process maps already (all of it where that is unknown); `None` without a limit.
fn address_space_room(limit: Option<u64>, mapped: Option<u64>) -> Option<Room> {
    let limit = limit?;
    Some(Room {
        bytes: limit.saturating_sub(mapped.unwrap_or(0)),
        limit: Limit::AddressSpace(limit),
    })
}

/// The process's address-space limit (`RLIMIT_AS`, set by `ulimit -v`) in bytes; `None`
/// where it is unlimited or cannot be read. Every allocation past it fails, whatever memory
/// the machine has free.
#[cfg(unix)]
fn address_space_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given a valid pointer to.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) } != 0 {
        return None;
    }
    // `rlim_t` is u64 on Linux and macOS but not on every Unix.
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    let current = limit.rlim_cur as u64;
    (limit.rlim_cur != libc::RLIM_INFINITY).then_some(current)
}

#[cfg(not(unix))]
fn address_space_limit() -> Option<u64> {
    None
}

/// The bytes this process maps now (its virtual size, which `RLIMIT_AS` bounds): the first
/// field of /proc/self/statm, in pages; `None` where it is unknown (not Linux).
#[cfg(unix)]
fn mapped_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    parse_statm(&statm, u64::try_from(page).ok().filter(|&p| p > 0)?)
}

#[cfg(not(unix))]
fn mapped_bytes() -> Option<u64> {
    None
}

/// The virtual size in /proc/self/statm (its first field, in pages of `page` bytes).
fn parse_statm(statm: &str, page: u64) -> Option<u64> {
    let pages: u64 = statm.split_whitespace().next()?.parse().ok()?;
    pages.checked_mul(page)
}

fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let kib: u64 = words.next()?.parse().ok()?;
    (words.next() == Some("kB")).then_some(kib * 1024)
}

/// `Err` with a message saying what `what` needs, what is available and, where a cap sets
/// that rather than the machine's free memory, which cap, when it does not fit.
pub fn check_fits(what: &str, needed: u64, room: Option<Room>) -> Result<(), String> {
    let Some(room) = room.filter(|r| needed > r.bytes) else {
        return Ok(());
    };
    let under = match room.limit {
        Limit::Available => String::new(),
        Limit::ControlGroup(max) => format!(
            " under its control group's memory limit (memory.max) of {}",
            gib(max)
        ),
        Limit::AddressSpace(max) => {
            format!(" under the address-space limit (ulimit -v) of {}", gib(max))
        }
    };
    Err(format!(
        "{what} needs about {} of memory, and {} is available to this process{under}",
        gib(needed),
        gib(room.bytes)
    ))
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
        let bytes = |r: Option<Room>| r.map(|r| r.bytes);
        assert_eq!(bytes(cgroup_room(Some("max\n"), Some("100\n"))), None);
        assert_eq!(bytes(cgroup_room(Some("1000\n"), Some("100\n"))), Some(900));
        assert_eq!(bytes(cgroup_room(Some("1000"), None)), Some(1000));
        assert_eq!(bytes(cgroup_room(None, Some("1"))), None);
        assert_eq!(
            cgroup_room(Some("1000"), None).map(|r| r.limit),
            Some(Limit::ControlGroup(1000))
        );
    }

    #[test]
    fn a_frame_that_does_not_fit_says_what_it_needs() {
        let largest = frame_bytes(32768, 32768);
        assert_eq!(largest, 64 << 30);
        let e = check_fits(
            "a 32768x32768 image",
            largest,
            Some(Room::available(8 << 30)),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "a 32768x32768 image needs about 64.0 GiB of memory, and 8.0 GiB is available to this process"
        );
        assert!(check_fits("x", 1 << 20, Some(Room::available(8 << 30))).is_ok());
        assert!(
            check_fits("x", u64::MAX, None).is_ok(),
            "unknown: not refused"
        );
    }

    /// `ulimit -v 4000000` (KiB) with 300 MiB mapped already: a 12000x12000 frame (8.6 GiB)
    /// is refused, naming the limit, though the machine may have far more free.
    #[test]
    fn an_address_space_limit_bounds_the_room_and_is_named() {
        let limit = 4_000_000u64 << 10;
        let room = address_space_room(Some(limit), Some(300 << 20)).unwrap();
        assert_eq!(room.bytes, limit - (300 << 20));
        assert_eq!(room.limit, Limit::AddressSpace(limit));
        let e =
            check_fits("a 12000x12000 image", frame_bytes(12000, 12000), Some(room)).unwrap_err();
        assert_eq!(
            e,
            "a 12000x12000 image needs about 8.6 GiB of memory, and 3.5 GiB is available to \
             this process under the address-space limit (ulimit -v) of 3.8 GiB"
        );
        // What the process maps unknown: the whole limit is the room.
        assert_eq!(
            address_space_room(Some(limit), None).map(|r| r.bytes),
            Some(limit)
        );
        // Mapped past the limit (it was lowered after the mappings): no room, not a wrap.
        assert_eq!(
            address_space_room(Some(10), Some(20)).map(|r| r.bytes),
            Some(0)
        );
        assert_eq!(address_space_room(None, Some(20)), None);
    }

    #[test]
    fn the_virtual_size_is_read_in_pages() {
        assert_eq!(
            parse_statm("2500 300 100 1 0 200 0\n", 4096),
            Some(2500 * 4096)
        );
        assert_eq!(parse_statm("", 4096), None);
        assert_eq!(parse_statm("x 1", 4096), None);
        assert_eq!(parse_statm(&format!("{} 1", u64::MAX), 4096), None);
    }

    #[test]
    fn a_control_group_cap_is_named_when_it_refuses() {
        let room = cgroup_room(Some("4294967296"), Some("1073741824"));
        let e = check_fits("x", 8 << 30, room).unwrap_err();
        assert_eq!(
            e,
            "x needs about 8.0 GiB of memory, and 3.0 GiB is available to this process under \
             its control group's memory limit (memory.max) of 4.0 GiB"
        );
    }
}
