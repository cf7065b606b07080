//! What the commands print on stderr, by level: the one place that decides.
//!
//! - `--quiet`: warnings and errors only.
//! - normal: a few status lines (a render prints backend, scene, timings, output).
//! - `--verbose` (`-v`): details as well: the camera, the schedule's per-worker table and the
//!   cost map's error histogram.
//!
//! Warnings always go out; errors are printed by `cli::main`.
//!
//! Every message leaves in one `write` call ([`write_whole`], from [`crate::stderr_line`]).

pub use crate::stderr_line::write_whole;

/// How much a command prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    Quiet,
    Normal,
    Verbose,
}

impl Verbosity {
    /// From `--quiet` and `--verbose` (clap keeps them exclusive).
    pub fn from_flags(quiet: bool, verbose: bool) -> Verbosity {
        match (quiet, verbose) {
            (true, _) => Verbosity::Quiet,
            (false, true) => Verbosity::Verbose,
            (false, false) => Verbosity::Normal,
        }
    }

    /// A status line, shown unless quiet.
    pub fn status(self, line: impl std::fmt::Display) {
        if self >= Verbosity::Normal {
            write_whole(line);
        }
    }

    /// Detail text (one or more lines, each ending in a newline or not), shown when `shown`
    /// is true and the level is not quiet: `-v`, or an option that asked for it.
    pub fn detail(self, shown: bool, text: impl std::fmt::Display) {
        if self > Verbosity::Quiet && (shown || self >= Verbosity::Verbose) {
            write_whole(text);
        }
    }

    /// A warning, always shown.
    pub fn warn(self, message: impl std::fmt::Display) {
        write_whole(format_args!("warning: {message}"));
    }

    pub fn is_quiet(self) -> bool {
        self == Verbosity::Quiet
    }
}
