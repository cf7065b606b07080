//! One stderr message, one `write` call.
//!
//! `eprintln!` writes each piece of its format separately. Under `mpirun` the ranks share one
//! stream, and the pieces of their lines then interleave ("error: error: the job ..."), which
//! CI saw. Everything gasworks prints on stderr goes through [`write_whole`]: the CLI's
//! console levels and error printer, and the cluster's abort message (below the CLI, which
//! is why this lives outside `cli`).

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
