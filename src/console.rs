//! What gasworks prints on stderr, by level, and how each message leaves: the one place that
//! decides.
//!
//! - quiet (`--quiet`): warnings and errors only;
//! - normal: a few status lines (a render prints backend, scene, timings, output);
//! - verbose (`-v`): details as well: the camera, the schedule's per-worker table and the
//!   cost map's error histogram.
//!
//! Warnings always go out; errors are printed by `cli::main`.
//!
//! Every message leaves in one `write` call ([`write_whole`]): `eprintln!` writes each piece
//! of its format separately, and under `mpirun` the ranks share one stream, where the pieces
//! of their lines then interleave ("error: error: the job ...").

use std::io::Write;

/// Writes `text` plus a newline (unless it ends in one) to stderr in one call, so lines of
/// concurrent processes sharing the stream never mix mid-line.
pub fn write_whole(text: impl std::fmt::Display) {
    let mut text = text.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    // Nothing sensible can be done when stderr itself is gone.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

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
