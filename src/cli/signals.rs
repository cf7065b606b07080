//! The signals a render answers: stop and keep what is rendered, or write a checkpoint.
//!
//! - Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the frame: the tiles in flight finish, the image
//!   is written with what was rendered, and a resume file is left. SIGTERM matters as much as
//!   Ctrl-C: it is what `kill`, Slurm (at a job's time limit), Kubernetes (on preemption) and
//!   render-farm managers send before they kill a job, usually with a grace period of about
//!   30 s. SIGHUP is a closed terminal or SSH session.
//! - A second stop signal quits at once, with that signal's exit status.
//! - SIGUSR1 asks for a checkpoint at the next pass boundary, and the render goes on (Slurm's
//!   `--signal=USR1@120` sends it two minutes before the time limit).
//!
//! The stop handlers are installed when the frame starts; before (loading, building), those
//! signals keep their default actions and end the process. SIGUSR1 is caught from the start.
//! On platforms without Unix signals only Ctrl-C is caught.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use super::console::Verbosity;

/// A signal that stopped the render.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT: Ctrl-C in a terminal.
    Interrupt,
    /// SIGTERM: `kill`, a batch system's time limit, a preemption.
    Terminate,
    /// SIGHUP: the terminal or session closed.
    HangUp,
}

impl StopSignal {
    /// How a process ended by this signal conventionally exits: 128 plus its number.
    pub fn exit_code(self) -> i32 {
        match self {
            StopSignal::Interrupt => 130,
            StopSignal::Terminate => 143,
            StopSignal::HangUp => 129,
        }
    }

    fn code(self) -> u8 {
        match self {
            StopSignal::Interrupt => 1,
            StopSignal::Terminate => 2,
            StopSignal::HangUp => 3,
        }
    }

    fn from_code(code: u8) -> Option<StopSignal> {
        match code {
            1 => Some(StopSignal::Interrupt),
            2 => Some(StopSignal::Terminate),
            3 => Some(StopSignal::HangUp),
            _ => None,
        }
    }
}

impl std::fmt::Display for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StopSignal::Interrupt => "Ctrl-C",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::HangUp => "SIGHUP",
        })
    }
}

/// Set by the first stop signal: the frame stops taking tiles
/// ([`crate::sched::FrameControl::stop`]).
pub static STOP: AtomicBool = AtomicBool::new(false);
/// Which signal set [`STOP`] (`StopSignal::code`), 0 before any.
static STOPPED_BY: AtomicU8 = AtomicU8::new(0);
/// Set by SIGUSR1, taken by the next pass boundary.
static CHECKPOINT_ASKED: AtomicBool = AtomicBool::new(false);

/// The signal that stopped the render, if one did.
pub fn stopped_by() -> Option<StopSignal> {
    StopSignal::from_code(STOPPED_BY.load(Ordering::SeqCst))
}

/// Whether SIGUSR1 asked for a checkpoint since the last call (the request is taken).
pub fn take_checkpoint_request() -> bool {
    CHECKPOINT_ASKED.swap(false, Ordering::SeqCst)
}

/// Whether a SIGUSR1 request is still waiting for a pass boundary.
pub fn checkpoint_request_pending() -> bool {
    CHECKPOINT_ASKED.load(Ordering::SeqCst)
}

/// What a stop signal does: the first sets [`STOP`] and says so; a second quits at once.
fn on_stop(signal: StopSignal, out: Verbosity) {
    if STOP.swap(true, Ordering::SeqCst) {
        crate::stderr_line::write_whole(format!(
            "gasworks: second stop signal ({signal}): quitting without writing the image"
        ));
        std::process::exit(signal.exit_code());
    }
    STOPPED_BY.store(signal.code(), Ordering::SeqCst);
    if !out.is_quiet() {
        let again = match signal {
            StopSignal::Interrupt => "Ctrl-C again to quit at once".to_string(),
            other => format!("another {other} or Ctrl-C quits at once"),
        };
        crate::stderr_line::write_whole(format!(
            "gasworks: {signal}: finishing the tiles in flight, then writing what is rendered ({again})"
        ));
    }
}

/// From the start of `render`: SIGUSR1 asks for a checkpoint at the next pass boundary.
/// Caught from the start (its default action ends the process), and on every rank under
/// mpirun, which passes it on to every rank (rank 0 writes the checkpoint).
pub fn watch_checkpoint_requests(out: Verbosity) {
    #[cfg(unix)]
    serve(&[signal_hook::consts::SIGUSR1], out);
    #[cfg(not(unix))]
    let _ = out;
}

/// From the start of the frame in one process: Ctrl-C, SIGTERM and SIGHUP stop it. Before
/// (loading, building) they end the process as usual; under mpirun they are mpirun's, which
/// ends the job.
pub fn watch_stops(out: Verbosity) {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        serve(&[SIGINT, SIGTERM, SIGHUP], out);
    }
    #[cfg(not(unix))]
    if let Err(e) = ctrlc::set_handler(move || on_stop(StopSignal::Interrupt, out)) {
        log::debug!("no Ctrl-C handler: {e}");
    }
}

/// Serves `signals` on a thread of ours. The handlers only queue the signal; the thread does
/// the work, outside signal context, so it may print and exit. It registers them itself (so
/// that handlers never exist without a thread to serve them) and says when they are in place.
/// Without handlers (they cannot be installed) the signals keep their default actions, which
/// is said at debug level only: the render itself is unaffected.
#[cfg(unix)]
fn serve(signals: &'static [std::ffi::c_int], out: Verbosity) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    let (ready, registered) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("gasworks-signals".into())
        .spawn(move || {
            let mut signals = match signal_hook::iterator::Signals::new(signals) {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return;
                }
            };
            let _ = ready.send(Ok(()));
            for signal in signals.forever() {
                match signal {
                    SIGINT => on_stop(StopSignal::Interrupt, out),
                    SIGTERM => on_stop(StopSignal::Terminate, out),
                    SIGHUP => on_stop(StopSignal::HangUp, out),
                    SIGUSR1 => {
                        CHECKPOINT_ASKED.store(true, Ordering::SeqCst);
                        if !out.is_quiet() {
                            crate::stderr_line::write_whole(
                                "gasworks: SIGUSR1: writing a checkpoint at the next pass boundary",
                            );
                        }
                    }
                    _ => {}
                }
            }
        });
    match spawned.map(|_| registered.recv()) {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(e))) => log::debug!("no signal handlers: {e}"),
        Ok(Err(e)) => log::debug!("no signal handlers: {e}"),
        Err(e) => log::debug!("no signal thread: {e}"),
    }
}
