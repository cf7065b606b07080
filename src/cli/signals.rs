//! The signals a render answers: stop and keep what is rendered, or write a checkpoint.
//!
//! - Ctrl-C (SIGINT), SIGTERM and SIGHUP stop the frame: the tiles in flight finish, the image
//!   is written with what was rendered, and a resume file is left. SIGTERM matters as much as
//!   Ctrl-C: it is what `kill`, Slurm (at a job's time limit), Kubernetes (on preemption) and
//!   render-farm managers send before they kill a job, usually with a grace period of about
//!   30 s. SIGHUP is a closed terminal or SSH session.
//! - A second stop signal quits at once, with that signal's exit status.
//! - SIGUSR1 asks for a checkpoint once the next tile is done, and the render goes on (Slurm's
//!   `--signal=USR1@120` sends it two minutes before the time limit).
//!
//! The stop handlers are installed when the frame starts; before (loading, building), those
//! signals keep their default actions and end the process. Once the frame has ended, a first
//! stop signal changes nothing (the image is written as the frame left it) and says so.
//! SIGUSR1 is caught from the start.
//! On platforms without Unix signals only Ctrl-C is caught.
//!
//! Under mpirun a stop signal on any rank stops the job: rank 0 writes the resume file and
//! the image with what has arrived, its own tiles in flight included, without waiting for
//! the other ranks' (mpirun kills its ranks a grace period after it sends them SIGTERM: 1 s
//! unless `--mca odls_base_sigkill_timeout` says otherwise), and every rank exits.
//!
//! The render session sees these signals through [`Signals`], its [`Controls`].

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::console::Verbosity;
use crate::session::{Controls, StopSignal};

/// Lets a closed stdout end the process quietly, as `gasworks info ... | head` expects: the
/// default action of SIGPIPE, which Rust's runtime replaces by "ignore" (every `println!`
/// then panics on the broken pipe). Only for the commands whose output is meant for pipes
/// (`info`, `gen`, `schedule-sim`, `cpu-bench`, `build-bench`, `image-stats`): a render prints
/// on stderr only, and must keep rendering (and write its image) when that is closed.
pub fn end_quietly_when_stdout_closes() {
    #[cfg(unix)]
    // SAFETY: restores SIGPIPE's default disposition; no handler code runs, and it is called
    // first thing, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Set by the first stop signal, whose second one quits at once.
static STOP: AtomicBool = AtomicBool::new(false);
/// The number of the signal that set [`STOP`] ([`StopSignal::number`]), 0 before any: what
/// the frame watches ([`crate::sched::FrameJob::stop`]).
static STOPPED_BY: AtomicU8 = AtomicU8::new(0);
/// Set by SIGUSR1, taken once the next tile is done (or at the next pass boundary).
static CHECKPOINT_ASKED: AtomicBool = AtomicBool::new(false);
/// Set once the frame has ended ([`frame_ended`]): a stop signal then changes nothing of what
/// is written, and says so.
static FRAME_ENDED: AtomicBool = AtomicBool::new(false);

/// The frame has ended (complete, stopped or at its time limit): from here a stop signal no
/// longer stops anything, and its message must not say that it does. Under mpirun a
/// batch system's SIGTERM often comes in the job's last second, after rank 0 wrote the whole
/// image; it said "writing what has arrived from every rank", as if the image were partial.
pub fn frame_ended() {
    FRAME_ENDED.store(true, Ordering::SeqCst);
}

/// Whether SIGUSR1 asked for a checkpoint since the last call (the request is taken).
pub fn take_checkpoint_request() -> bool {
    CHECKPOINT_ASKED.swap(false, Ordering::SeqCst)
}

/// Whether a SIGUSR1 request is still waiting for a tile to be done.
pub fn checkpoint_request_pending() -> bool {
    CHECKPOINT_ASKED.load(Ordering::SeqCst)
}

/// The render's controls ([`Controls`]): the stop signals and SIGUSR1 this process answers.
pub struct Signals;

impl Controls for Signals {
    fn stop(&self) -> &AtomicU8 {
        &STOPPED_BY
    }

    fn frame_starts(&self, ranks: usize, out: Verbosity) {
        let stopping = match ranks {
            1 => Stopping::Process,
            _ => Stopping::ClusterRank,
        };
        watch_stops(stopping, out);
    }

    fn frame_ended(&self) {
        frame_ended();
    }

    fn take_checkpoint_request(&self) -> bool {
        take_checkpoint_request()
    }

    fn checkpoint_request_pending(&self) -> bool {
        checkpoint_request_pending()
    }
}

/// Who answers a stop signal, and so what it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopping {
    /// One process: the tiles in flight finish, then the image is written.
    Process,
    /// A rank under mpirun: rank 0 writes what has arrived at once (mpirun kills the job a
    /// grace period after its SIGTERM), another rank passes the request on to rank 0.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    ClusterRank,
}

/// What a stop signal does: the first sets [`STOP`] and says so; a second quits at once.
fn on_stop(signal: StopSignal, stopping: Stopping, out: Verbosity) {
    if STOP.swap(true, Ordering::SeqCst) {
        crate::console::write_whole(format!(
            "gasworks: second stop signal ({signal}): quitting without writing the image"
        ));
        std::process::exit(signal.exit_code());
    }
    STOPPED_BY.store(signal.number(), Ordering::SeqCst);
    if !out.is_quiet() {
        crate::console::write_whole(stop_message(
            signal,
            stopping,
            FRAME_ENDED.load(Ordering::SeqCst),
        ));
    }
}

/// What the first stop signal says it does, before or after the frame ended.
fn stop_message(signal: StopSignal, stopping: Stopping, frame_ended: bool) -> String {
    let again = match signal {
        StopSignal::Interrupt => "Ctrl-C again to quit at once".to_string(),
        other => format!("another {other} or Ctrl-C quits at once"),
    };
    let what = match (stopping, frame_ended) {
        (Stopping::Process, false) => {
            "finishing the tiles in flight, then writing what is rendered"
        }
        (Stopping::ClusterRank, false) => "writing what has arrived from every rank",
        (Stopping::Process, true) => "the frame had ended: what it rendered is written as it was",
        (Stopping::ClusterRank, true) => {
            "the frame had ended, and rank 0 has written what it could: ending"
        }
    };
    format!("gasworks: {signal}: {what} ({again})")
}

/// From the start of `render`: SIGUSR1 asks for a checkpoint once the next tile is done.
/// Caught from the start (its default action ends the process), and on every rank under
/// mpirun, which passes it on to every rank (rank 0 writes the checkpoint).
pub fn watch_checkpoint_requests(out: Verbosity) {
    #[cfg(unix)]
    serve(&[signal_hook::consts::SIGUSR1], Stopping::Process, out);
    #[cfg(not(unix))]
    let _ = out;
}

/// From the start of the frame: Ctrl-C, SIGTERM and SIGHUP stop it, as `stopping` says.
/// Before (loading, building) they end the process as usual. Under mpirun every rank
/// watches them: mpirun sends its ranks SIGTERM when it is told to end the job (Ctrl-C,
/// SIGTERM, a batch system's time limit), and a signal may also reach one rank alone.
pub fn watch_stops(stopping: Stopping, out: Verbosity) {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        serve(&[SIGINT, SIGTERM, SIGHUP], stopping, out);
    }
    #[cfg(not(unix))]
    if let Err(e) = ctrlc::set_handler(move || on_stop(StopSignal::Interrupt, stopping, out)) {
        log::debug!("no Ctrl-C handler: {e}");
    }
}

/// Serves `signals` on a thread of ours. The handlers only queue the signal; the thread does
/// the work, outside signal context, so it may print and exit. It registers them itself (so
/// that handlers never exist without a thread to serve them) and says when they are in place.
/// Without handlers (they cannot be installed) the signals keep their default actions, which
/// is said at debug level only: the render itself is unaffected.
#[cfg(unix)]
fn serve(signals: &'static [std::ffi::c_int], stopping: Stopping, out: Verbosity) {
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
                    SIGINT => on_stop(StopSignal::Interrupt, stopping, out),
                    SIGTERM => on_stop(StopSignal::Terminate, stopping, out),
                    SIGHUP => on_stop(StopSignal::HangUp, stopping, out),
                    SIGUSR1 => {
                        CHECKPOINT_ASKED.store(true, Ordering::SeqCst);
                        if !out.is_quiet() {
                            crate::console::write_whole(
                                "gasworks: SIGUSR1: writing a checkpoint once the next tile is done",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_after_the_frame_ended_does_not_say_it_stops_anything() {
        for stopping in [Stopping::Process, Stopping::ClusterRank] {
            let during = stop_message(StopSignal::Terminate, stopping, false);
            let after = stop_message(StopSignal::Terminate, stopping, true);
            assert!(
                after.starts_with("gasworks: SIGTERM: the frame had ended"),
                "{after}"
            );
            assert!(
                !after.contains("what has arrived") && !after.contains("in flight"),
                "{after}"
            );
            assert!(!during.contains("had ended"), "{during}");
            assert!(after.ends_with("(another SIGTERM or Ctrl-C quits at once)"));
        }
        assert_eq!(
            stop_message(StopSignal::Interrupt, Stopping::ClusterRank, false),
            "gasworks: Ctrl-C: writing what has arrived from every rank (Ctrl-C again to quit at once)"
        );
    }
}
