//! A watchdog for driver calls that may never return.
//!
//! [`GasBatch::wait`](super::accel::GasBatch::wait) polls its event with a limit, so a batch of
//! builds that hangs on the GPU becomes an error. But a hung batch can also block the host
//! *inside* the enqueue: OptiX's `optixAccelBuild` waits on its own queue of outstanding
//! requests, and the wait is never reached (docs/gas-builds.md, "The watchdog"). No return
//! value can report that: the thread is in the driver.
//!
//! So a second thread watches. Code about to make such calls arms a [`Watch`] with a deadline
//! and a description; dropping the watch disarms it. When a deadline passes while its watch is
//! armed, the watchdog calls the action it was made with. The process-wide one
//! ([`global`]) writes `error: <description>` on stderr in one write and ends the process with
//! [`EXIT_GPU_HUNG`] through `_exit`: a thread blocked in the driver can be neither woken nor
//! joined, and the driver's own exit handlers would block on the hung device too.
//!
//! One thread serves every watch (started by the first), so arming costs a lock and, when the
//! new deadline is the earliest, a wake-up: cheap enough for each of build-bench's enqueues.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The exit status of a process the [`global`] watchdog ended: 75, `EX_TEMPFAIL` of
/// `sysexits.h` ("a temporary failure; the user is invited to retry"). A hung GPU is not a bad
/// input: the same command may well pass in a new process, and a batch system can tell this
/// status from an error's 1.
pub const EXIT_GPU_HUNG: i32 = 75;

/// Describes, when a deadline has passed, what was watched and how far it got. Called on the
/// watchdog's thread while the watched thread may be blocked: it must not take a lock that
/// thread could hold (read atomics, format owned data).
pub type Describe = Box<dyn Fn() -> String + Send + Sync>;

/// What a watchdog does with the description of a watch whose deadline passed.
pub type OnFire = Box<dyn Fn(String) + Send + Sync>;

/// A thread that fires the watches whose deadlines pass while they are armed.
pub struct Watchdog {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    on_fire: OnFire,
}

#[derive(Default)]
struct State {
    next_id: u64,
    armed: Vec<Armed>,
    thread_started: bool,
    /// Set when the [`Watchdog`] is dropped: its thread ends.
    closed: bool,
}

struct Armed {
    id: u64,
    deadline: Instant,
    describe: Describe,
}

/// One armed deadline; dropping it disarms it (see [`Watch::keep_armed`]).
#[must_use = "a Watch disarms when dropped"]
pub struct Watch {
    shared: Arc<Shared>,
    id: u64,
}

impl Watch {
    /// Leaves the deadline armed for as long as the process lives: for code that has found the
    /// GPU hung and is on its way out, whose own cleanup may block in the driver. Should the
    /// way out take past the deadline, the watchdog ends the process with the description.
    pub fn keep_armed(self) {
        std::mem::forget(self);
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.armed.retain(|a| a.id != self.id);
        // No wake-up: the thread at worst wakes once more at this deadline and finds nothing.
    }
}

/// The state even when some thread panicked while holding the lock: the watchdog's bookkeeping
/// is a list of deadlines, always consistent between statements.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Watchdog {
    /// A watchdog that calls `on_fire` (on its own thread) with the description of each watch
    /// whose deadline passes while it is armed. The thread starts with the first watch.
    pub fn new(on_fire: OnFire) -> Watchdog {
        Watchdog {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
                on_fire,
            }),
        }
    }

    /// Arms a deadline `limit` from now. `describe` is called only if it passes while armed.
    pub fn arm(&self, limit: Duration, describe: Describe) -> Watch {
        // A limit too large for an Instant (a mistyped environment variable) is a day: as good
        // as never, for a watch on calls that take milliseconds.
        let now = Instant::now();
        let deadline = now
            .checked_add(limit)
            .unwrap_or_else(|| now + Duration::from_secs(86_400));
        let mut state = lock(&self.shared.state);
        let id = state.next_id;
        state.next_id += 1;
        let earliest = state.armed.iter().all(|a| deadline < a.deadline);
        state.armed.push(Armed {
            id,
            deadline,
            describe,
        });
        if !state.thread_started {
            state.thread_started = true;
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name("gasworks-watchdog".into())
                .spawn(move || watch_loop(&shared));
            if let Err(e) = spawned {
                // Without the thread nothing is watched; the work itself goes on as before.
                state.thread_started = false;
                log::warn!("could not start the watchdog thread ({e}): hangs in the driver will not be reported");
            }
        } else if earliest {
            self.shared.wake.notify_one();
        }
        Watch {
            shared: self.shared.clone(),
            id,
        }
    }

    /// How many watches are armed now (for tests and messages).
    pub fn armed(&self) -> usize {
        lock(&self.shared.state).armed.len()
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.wake.notify_one();
    }
}

/// The watchdog's thread: sleeps until the earliest deadline (or a wake-up for an earlier
/// one), fires every watch past its deadline, in deadline order, once each.
fn watch_loop(shared: &Shared) {
    let mut state = lock(&shared.state);
    loop {
        if state.closed {
            return;
        }
        let now = Instant::now();
        let due = state
            .armed
            .iter()
            .enumerate()
            .filter(|(_, a)| a.deadline <= now)
            .min_by_key(|(_, a)| a.deadline)
            .map(|(i, _)| i);
        if let Some(i) = due {
            let fired = state.armed.remove(i);
            // Unlocked while describing and acting: the action may block or end the process,
            // and other watches may be armed or dropped meanwhile.
            drop(state);
            (shared.on_fire)((fired.describe)());
            state = lock(&shared.state);
            continue;
        }
        state = match state.armed.iter().map(|a| a.deadline).min() {
            None => shared
                .wake
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            Some(deadline) => {
                shared
                    .wake
                    .wait_timeout(state, deadline.saturating_duration_since(now))
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0
            }
        };
    }
}

/// A watch's limit: the seconds environment variable `var` gives (a positive number, fractions
/// allowed), else `default`. A value that is not a positive number of seconds is reported and
/// the default kept: a typo must not turn the watchdog off.
pub fn limit_from_env(var: &str, default: Duration) -> Duration {
    match std::env::var(var) {
        Err(_) => default,
        Ok(text) => parse_limit(&text).unwrap_or_else(|| {
            log::warn!(
                "{var}={text:?} is not a positive number of seconds: keeping {} s",
                default.as_secs_f64()
            );
            default
        }),
    }
}

/// Seconds as [`limit_from_env`] takes them: positive, finite, under 1e9.
pub fn parse_limit(text: &str) -> Option<Duration> {
    let secs: f64 = text.trim().parse().ok()?;
    (secs.is_finite() && secs > 0.0 && secs < 1e9).then(|| Duration::from_secs_f64(secs))
}

/// The process-wide watchdog: writes `error: <description>` on stderr (one write, as every
/// stderr line of gasworks) and ends the process at once with [`EXIT_GPU_HUNG`].
pub fn global() -> &'static Watchdog {
    static GLOBAL: OnceLock<Watchdog> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        Watchdog::new(Box::new(|description| {
            crate::console::write_whole(format_args!(
                "error: {description}; ending the process now (exit status {EXIT_GPU_HUNG}): \
                 a thread blocked in the driver can be neither woken nor freed"
            ));
            end_process_now(EXIT_GPU_HUNG);
        }))
    })
}

/// Ends the process without running exit handlers: the CUDA driver's would wait for the hung
/// device. Complete lines of stdout are already written (Rust's stdout is line-buffered).
fn end_process_now(status: i32) -> ! {
    // SAFETY: `_exit` takes any status and never returns; skipping destructors and exit
    // handlers is its purpose here.
    unsafe { libc::_exit(status) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    #[test]
    fn limits_are_positive_seconds_only() {
        assert_eq!(parse_limit("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_limit(" 2.5 "), Some(Duration::from_millis(2500)));
        assert_eq!(parse_limit("0.000001"), Some(Duration::from_micros(1)));
        for bad in ["", "0", "-3", "ten", "inf", "NaN", "1e12"] {
            assert_eq!(parse_limit(bad), None, "{bad:?}");
        }
        let default = Duration::from_secs(7);
        // Only this test reads these variables.
        assert_eq!(
            limit_from_env("GASWORKS_TEST_NO_SUCH_LIMIT", default),
            default
        );
        std::env::set_var("GASWORKS_TEST_BAD_LIMIT", "soon");
        assert_eq!(limit_from_env("GASWORKS_TEST_BAD_LIMIT", default), default);
        std::env::set_var("GASWORKS_TEST_BAD_LIMIT", "0.25");
        assert_eq!(
            limit_from_env("GASWORKS_TEST_BAD_LIMIT", default),
            Duration::from_millis(250)
        );
    }

    /// A watchdog whose firings arrive on a channel instead of ending the process.
    fn recording() -> (Watchdog, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let dog = Watchdog::new(Box::new(move |text| {
            let _ = lock_sender(&tx).send(text);
        }));
        (dog, rx)
    }

    fn lock_sender<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Generous: only a watchdog that never fires waits this long.
    const PATIENCE: Duration = Duration::from_secs(30);

    #[test]
    fn a_deadline_passed_while_armed_fires_once_with_what_was_described_then() {
        let (dog, rx) = recording();
        let progress = Arc::new(AtomicUsize::new(0));
        let seen = progress.clone();
        let watch = dog.arm(
            Duration::from_millis(50),
            Box::new(move || format!("{} of 390 builds enqueued", seen.load(Ordering::Relaxed))),
        );
        // Progress made after arming is what the description reports.
        progress.store(37, Ordering::Relaxed);
        assert_eq!(
            rx.recv_timeout(PATIENCE).as_deref(),
            Ok("37 of 390 builds enqueued")
        );
        // Fired watches are gone: nothing more comes, and dropping the watch is harmless.
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
        assert_eq!(dog.armed(), 0);
        drop(watch);
    }

    #[test]
    fn a_watch_dropped_before_its_deadline_never_fires() {
        let (dog, rx) = recording();
        let early = dog.arm(Duration::from_millis(300), Box::new(|| "early".into()));
        drop(early);
        let _late = dog.arm(Duration::from_millis(400), Box::new(|| "late".into()));
        // Had the dropped one fired, it would have come first.
        assert_eq!(rx.recv_timeout(PATIENCE).as_deref(), Ok("late"));
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    }

    #[test]
    fn watches_fire_in_deadline_order_whatever_order_they_were_armed_in() {
        let (dog, rx) = recording();
        // Armed latest-first: each new one is the earliest, and must wake the thread, which is
        // already asleep until the first one's deadline.
        let _c = dog.arm(Duration::from_millis(900), Box::new(|| "c".into()));
        std::thread::sleep(Duration::from_millis(20));
        let _b = dog.arm(Duration::from_millis(500), Box::new(|| "b".into()));
        let _a = dog.arm(Duration::from_millis(100), Box::new(|| "a".into()));
        let got: Vec<String> = (0..3)
            .filter_map(|_| rx.recv_timeout(PATIENCE).ok())
            .collect();
        assert_eq!(got, ["a", "b", "c"]);
    }

    #[test]
    fn a_watch_kept_armed_fires_after_its_owner_is_gone() {
        let (dog, rx) = recording();
        dog.arm(Duration::from_millis(50), Box::new(|| "kept".into()))
            .keep_armed();
        assert_eq!(rx.recv_timeout(PATIENCE).as_deref(), Ok("kept"));
    }

    #[test]
    fn an_overlong_limit_is_armed_not_a_panic() {
        let (dog, rx) = recording();
        let w = dog.arm(Duration::MAX, Box::new(|| "never".into()));
        assert_eq!(dog.armed(), 1);
        drop(w);
        assert_eq!(dog.armed(), 0);
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    }

    #[test]
    fn a_dropped_watchdog_ends_its_thread() {
        let (dog, rx) = recording();
        let w = dog.arm(Duration::from_secs(3600), Box::new(|| "never".into()));
        drop(w);
        drop(dog);
        // The thread held the only other sender-side reference (inside `on_fire`): once it
        // ends, the channel closes.
        assert_eq!(
            rx.recv_timeout(PATIENCE),
            Err(mpsc::RecvTimeoutError::Disconnected)
        );
    }
}
