//! A frame's progress, counted in tiles: a bar on a terminal, plain lines where stderr is a
//! file or a pipe, or nothing.
//!
//! Batch systems and render farms capture stderr into a log, where a progress bar draws
//! nothing: a render of several hours would say nothing between its first line and its last.
//! There, progress comes as lines, each 10% of the tiles and at least every minute:
//!
//! ```text
//! progress: 40% (pass 13/32), 1640 of 4096 tiles, 2m05s elapsed, about 3m07s left
//! ```
//!
//! `--progress auto` (the default) starts those lines only 30 s into the render, so that a short
//! render still prints its four lines and nothing else; `--progress lines` prints them from the
//! first tile, `--progress bar` draws the bar even where stderr is not a terminal, and
//! `--progress none` (like `--quiet`) shows nothing. The mode is the process's, like the log
//! level: set once by the command line ([`set_mode`]).

use std::io::IsTerminal;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// How progress is shown (`--progress`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// A bar when stderr is a terminal, else lines from [`AUTO_LINES_AFTER`] into the render.
    #[default]
    Auto,
    Bar,
    /// Lines from the first tile.
    Lines,
    None,
}

/// When `--progress auto` writes lines, the first comes this far into the render.
pub const AUTO_LINES_AFTER: Duration = Duration::from_secs(30);
/// Lines come at least this often (when a tile ends), besides each 10% of the tiles.
pub const LINES_EVERY: Duration = Duration::from_secs(60);

static MODE: OnceLock<ProgressMode> = OnceLock::new();

/// Sets the process's progress mode (the first call wins; the default is [`ProgressMode::Auto`]).
pub fn set_mode(mode: ProgressMode) {
    let _ = MODE.set(mode);
}

/// The progress of one frame. Cheap to share: workers call [`Progress::inc`] from their threads.
pub struct Progress {
    bar: ProgressBar,
    lines: Option<Mutex<Lines>>,
}

impl Progress {
    /// The progress display of a frame: nothing when `quiet`, else as the process's mode says.
    pub fn new(quiet: bool) -> Progress {
        let mode = if quiet {
            ProgressMode::None
        } else {
            MODE.get().copied().unwrap_or_default()
        };
        let terminal = std::io::stderr().is_terminal();
        let lines_after = match mode {
            ProgressMode::Auto if !terminal => Some(AUTO_LINES_AFTER),
            ProgressMode::Lines => Some(Duration::ZERO),
            _ => None,
        };
        let bar = match mode {
            ProgressMode::Bar => bar(),
            ProgressMode::Auto if terminal => bar(),
            _ => ProgressBar::hidden(),
        };
        Progress {
            bar,
            lines: lines_after.map(|after| Mutex::new(Lines::new(after, LINES_EVERY))),
        }
    }

    /// The tiles of the whole render; the clock of the lines starts here.
    pub fn set_length(&self, tiles: u64) {
        self.bar.set_length(tiles);
        if let Some(lines) = &self.lines {
            let mut l = lines.lock().unwrap_or_else(|p| p.into_inner());
            l.len = tiles;
            l.start = Instant::now();
        }
    }

    /// Corrects the tiles of the whole render once a pass knows its count (passes cut for
    /// slow workers differ), keeping the lines' clock.
    pub fn set_total(&self, tiles: u64) {
        self.bar.set_length(tiles);
        if let Some(lines) = &self.lines {
            lines.lock().unwrap_or_else(|p| p.into_inner()).len = tiles;
        }
    }

    /// What is being rendered ("pass 3/16").
    pub fn set_message(&self, message: String) {
        if let Some(lines) = &self.lines {
            lines.lock().unwrap_or_else(|p| p.into_inner()).message = message.clone();
        }
        self.bar.set_message(message);
    }

    /// One more tile done.
    pub fn inc(&self) {
        self.bar.inc(1);
        if let Some(lines) = &self.lines {
            let line = {
                let mut l = lines.lock().unwrap_or_else(|p| p.into_inner());
                l.pos += 1;
                l.line_due(Instant::now())
            };
            if let Some(line) = line {
                crate::console::write_whole(line);
            }
        }
    }

    /// A warning line on stderr, whatever the mode (even `--quiet` shows warnings), above the
    /// bar when one is drawn.
    pub fn warn(&self, message: impl std::fmt::Display) {
        self.bar
            .suspend(|| crate::console::write_whole(format_args!("warning: {message}")));
    }

    /// The render is over: the bar is cleared (the summary follows).
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} tiles (eta {eta})",
    ) {
        bar.set_style(style);
    }
    bar
}

/// The state of progress lines.
struct Lines {
    start: Instant,
    /// No line before this far into the render.
    after: Duration,
    /// A line at least this often.
    every: Duration,
    last: Option<Instant>,
    /// The next multiple of 10% that brings a line.
    next_percent: u64,
    message: String,
    len: u64,
    pos: u64,
}

impl Lines {
    fn new(after: Duration, every: Duration) -> Lines {
        Lines {
            start: Instant::now(),
            after,
            every,
            last: None,
            next_percent: 10,
            message: String::new(),
            len: 0,
            pos: 0,
        }
    }

    /// The line to print at `now`, with `pos` of `len` tiles done, if one is due: the first
    /// once `after` has passed, then at each 10% of the tiles or `every` since the last line.
    fn line_due(&mut self, now: Instant) -> Option<String> {
        if self.len == 0 {
            return None;
        }
        let elapsed = now.saturating_duration_since(self.start);
        if elapsed < self.after {
            return None;
        }
        let percent = (self.pos.min(self.len) * 100) / self.len;
        let due = match self.last {
            None => true,
            Some(last) => {
                percent >= self.next_percent || now.saturating_duration_since(last) >= self.every
            }
        };
        if !due {
            return None;
        }
        self.last = Some(now);
        self.next_percent = (percent / 10 + 1) * 10;
        let mut line = format!("progress: {percent}%");
        if !self.message.is_empty() {
            line += &format!(" ({})", self.message);
        }
        line += &format!(
            ", {} of {} tiles, {} elapsed",
            self.pos,
            self.len,
            clock(elapsed)
        );
        if self.pos > 0 && self.pos < self.len {
            let left = elapsed.mul_f64((self.len - self.pos) as f64 / self.pos as f64);
            line += &format!(", about {} left", clock(left));
        }
        Some(line)
    }
}

/// "1h02m03s", "2m05s", "12s", "0.4s".
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match (s / 3600, (s / 60) % 60, s % 60) {
        (0, 0, sec) if sec < 10 => format!("{:.1}s", d.as_secs_f64()),
        (0, 0, sec) => format!("{sec}s"),
        (0, min, sec) => format!("{min}m{sec:02}s"),
        (h, min, sec) => format!("{h}h{min:02}m{sec:02}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(after_s: u64, len: u64) -> (Lines, Instant) {
        let mut l = Lines::new(Duration::from_secs(after_s), Duration::from_secs(60));
        l.len = len;
        l.message = "pass 1/2".into();
        let start = l.start;
        (l, start)
    }

    /// Advances `l` tile by tile, one second per tile, and returns the lines printed.
    fn run(l: &mut Lines, t0: Instant, tiles: u64, seconds_per_tile: u64) -> Vec<String> {
        (1..=tiles)
            .filter_map(|i| {
                l.pos = i;
                l.line_due(t0 + Duration::from_secs(i * seconds_per_tile))
            })
            .collect()
    }

    #[test]
    fn lines_come_at_the_first_tile_and_each_ten_percent() {
        let (mut l, t0) = lines(0, 32);
        let printed = run(&mut l, t0, 32, 1);
        let percents: Vec<&str> = printed
            .iter()
            .map(|s| s.split('%').next().unwrap())
            .collect();
        assert_eq!(
            percents,
            [
                "progress: 3",
                "progress: 12",
                "progress: 21",
                "progress: 31",
                "progress: 40",
                "progress: 50",
                "progress: 62",
                "progress: 71",
                "progress: 81",
                "progress: 90",
                "progress: 100"
            ]
        );
        assert_eq!(
            printed[4],
            "progress: 40% (pass 1/2), 13 of 32 tiles, 13s elapsed, about 19s left"
        );
        assert_eq!(
            printed[10],
            "progress: 100% (pass 1/2), 32 of 32 tiles, 32s elapsed"
        );
    }

    #[test]
    fn auto_lines_wait_and_then_come_at_least_every_minute() {
        // 1000 tiles of 2 s each: nothing in the first 30 s, then lines at each 10% (every
        // 200 s) and every minute in between.
        let (mut l, t0) = lines(30, 1000);
        let printed = run(&mut l, t0, 1000, 2);
        assert!(printed[0].starts_with("progress: 1% "), "{}", printed[0]);
        assert!(
            printed[0].contains("15 of 1000 tiles, 30s elapsed"),
            "{}",
            printed[0]
        );
        assert!(
            printed[1].contains(" 45 of 1000 tiles, 1m30s elapsed"),
            "{}",
            printed[1]
        );
        assert!(printed[2].starts_with("progress: 7% "), "{}", printed[2]);
        assert!(printed.iter().any(|s| s.starts_with("progress: 10% ")));
        assert!(printed.last().unwrap().starts_with("progress: 100% "));
        assert!(printed.last().unwrap().contains("33m20s elapsed"));
        // A short render (under 30 s) prints nothing.
        let (mut l, t0) = lines(30, 10);
        assert!(run(&mut l, t0, 10, 2).is_empty());
    }

    #[test]
    fn clocks_read_as_durations() {
        assert_eq!(clock(Duration::from_millis(420)), "0.4s");
        assert_eq!(clock(Duration::from_secs(12)), "12s");
        assert_eq!(clock(Duration::from_secs(125)), "2m05s");
        assert_eq!(clock(Duration::from_secs(3723)), "1h02m03s");
    }
}
