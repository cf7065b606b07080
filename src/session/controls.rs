//! What reaches a render from outside while it runs: a stop (in the command line, Ctrl-C,
//! SIGTERM or SIGHUP) and a request for a checkpoint (SIGUSR1). The command line answers the
//! signals and hands the session its flags ([`Controls`]); a program that renders through the
//! library gives its own, or [`NoControls`].

use std::sync::atomic::AtomicU8;

use crate::console::Verbosity;

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
        128 + i32::from(self.number())
    }

    /// The signal's number, the same on every Unix (and what a rank sends rank 0).
    pub fn number(self) -> u8 {
        match self {
            StopSignal::Interrupt => 2,
            StopSignal::Terminate => 15,
            StopSignal::HangUp => 1,
        }
    }

    pub fn from_number(number: u8) -> Option<StopSignal> {
        match number {
            2 => Some(StopSignal::Interrupt),
            15 => Some(StopSignal::Terminate),
            1 => Some(StopSignal::HangUp),
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

/// The render was stopped (by a signal, or by a flag a program set); its image was written
/// with what was rendered, unless nothing was. The command exits as a process ended by that
/// signal conventionally does (130, 143, 129).
#[derive(Debug, thiserror::Error)]
#[error("stopped by {by}: {message}")]
pub struct Interrupted {
    pub by: StopSignal,
    pub message: String,
}

/// The flags a render watches, and what it tells their owner.
pub trait Controls: Sync {
    /// The stop flag: 0 while the frame may go on, else the number of the signal that
    /// stops it (any other non-zero value reads as SIGINT).
    fn stop(&self) -> &AtomicU8;

    /// The frame starts now, shared by `ranks` processes: a stop from here on stops it
    /// (before, while the scene loads and the backend builds, the process ends as usual).
    fn frame_starts(&self, _ranks: usize, _out: Verbosity) {}

    /// The frame has ended: a stop from here on changes nothing of what is written.
    fn frame_ended(&self) {}

    /// Whether a checkpoint was asked for since the last call (the request is taken).
    fn take_checkpoint_request(&self) -> bool {
        false
    }

    /// Whether a checkpoint request is still waiting for a tile to be done.
    fn checkpoint_request_pending(&self) -> bool {
        false
    }

    /// The signal that stopped the frame, if one did.
    fn stopped_by(&self) -> Option<StopSignal> {
        match self.stop().load(std::sync::atomic::Ordering::SeqCst) {
            0 => None,
            n => Some(StopSignal::from_number(n).unwrap_or(StopSignal::Interrupt)),
        }
    }
}

/// Controls that a program sets itself: a stop flag it may set (the signal's number, or any
/// non-zero value), and no checkpoint requests.
#[derive(Debug, Default)]
pub struct NoControls(pub AtomicU8);

impl Controls for NoControls {
    fn stop(&self) -> &AtomicU8 {
        &self.0
    }
}
