//! Running `mpirun` (or any command) from a test without ever hanging the test run.
//!
//! - Every wait is bounded: past its deadline the command and every process under it are
//!   killed, and the test fails with what each of them was doing (state and kernel wait
//!   channel per thread), so a hang in CI is a red test with a diagnosis, not a CI timeout.
//! - stdout and stderr are read as they come, on threads: a chatty job never blocks on a
//!   full pipe.
//! - OpenMPI 4.1.4's `mpirun` (Debian 12, external PMIx 4.2.2) sometimes deadlocks in its
//!   own teardown after every rank has exited: its main thread joins PMIx's progress thread
//!   (`orte_finalize` → `PMIx_server_finalize` → `pmix_progress_thread_pause`) while that
//!   thread waits for a lock the main thread holds; the ranks stay zombies, never reaped.
//!   Seen here after `kill -TERM mpirun`, about once in ten runs (the same backtrace as
//!   openpmix/openpmix#1244). Nothing of gasworks runs then: every rank has exited and said
//!   what it had to. So a wait that finds every rank exited and `mpirun` still alive
//!   [`MPIRUN_TEARDOWN_GRACE`] later kills `mpirun`, says so, and reports how each rank
//!   exited (read from its zombie) instead of mpirun's own exit status.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Generous: a job that has not ended after this is taken for hung, killed, and the test
/// fails. The timeouts only tell a hang from an answer; nothing here measures speed.
pub const DEADLINE: Duration = Duration::from_secs(180);

/// How long `mpirun` may outlive the last of its ranks before it is taken for stuck in its
/// teardown. A healthy mpirun reaps its ranks and exits within milliseconds.
pub const MPIRUN_TEARDOWN_GRACE: Duration = Duration::from_secs(10);

/// How a process ended, as `waitpid` tells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl Exit {
    /// Decodes a `waitpid` status word.
    fn from_wait_status(status: i32) -> Exit {
        if status & 0x7f == 0 {
            Exit::Code((status >> 8) & 0xff)
        } else {
            Exit::Signal(status & 0x7f)
        }
    }
}

/// How a command ended.
pub struct Run {
    /// The command's exit code: `None` when a signal ended it, or when `mpirun` was stuck in
    /// its teardown and had to be killed (then see [`Run::ranks_when_stuck`]), except that a
    /// stuck `mpirun` whose ranks all exited 0 counts as `Some(0)`, which is what it would
    /// have returned.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// Set when `mpirun` outlived all its ranks and was killed: how each rank exited (in
    /// process-id order, which is the order mpirun started them in).
    pub ranks_when_stuck: Option<Vec<Exit>>,
}

/// A command running under supervision ([`start`]).
pub struct Job {
    child: Child,
    what: String,
    stdout: mpsc::Receiver<Vec<u8>>,
    stderr: mpsc::Receiver<Vec<u8>>,
    started: Instant,
}

/// Starts `cmd` with its stdout and stderr read as they come (stdin closed).
pub fn start(mut cmd: Command) -> Job {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e} (is OpenMPI's mpirun installed?)"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    Job {
        child,
        what,
        stdout,
        stderr,
        started: Instant::now(),
    }
}

/// Runs `cmd` to its end (bounded by [`DEADLINE`]).
pub fn run(cmd: Command) -> Run {
    start(cmd).wait()
}

/// Reads `from` to its end on a thread of its own; the bytes come through the channel.
fn drain(mut from: impl std::io::Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        let _ = tx.send(bytes);
    });
    rx
}

impl Job {
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether the command is still running (it is not reaped here if it has ended).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The processes the command started directly (mpirun's ranks), in process-id order.
    pub fn children(&self) -> Vec<u32> {
        children_of(self.child.id())
    }

    /// Waits for the command to end, at most until [`DEADLINE`] after it started.
    pub fn wait(mut self) -> Run {
        let mut all_exited_since: Option<Instant> = None;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    return self.finish(status.code(), None);
                }
                Ok(None) => {}
                Err(e) => panic!("waiting for {}: {e}", self.what),
            }
            let ranks = self.children();
            let exits: Vec<Option<Exit>> = ranks.iter().map(|&p| zombie_exit(p)).collect();
            if !exits.is_empty() && exits.iter().all(Option::is_some) {
                let since = *all_exited_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= MPIRUN_TEARDOWN_GRACE {
                    // Read before the kill: once mpirun is gone, init reaps the zombies.
                    let exits: Vec<Exit> = exits.into_iter().flatten().collect();
                    let diagnosis = describe_tree(self.child.id());
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    eprintln!(
                        "mpirun-support: mpirun outlived its ranks by {MPIRUN_TEARDOWN_GRACE:?} \
                         (OpenMPI's teardown hang; see tests/mpirun_support): killed it. \
                         The ranks exited {exits:?}. {}\n{diagnosis}",
                        self.what
                    );
                    let code = exits.iter().all(|e| *e == Exit::Code(0)).then_some(0);
                    return self.finish(code, Some(exits));
                }
            } else {
                all_exited_since = None;
            }
            if self.started.elapsed() > DEADLINE {
                let diagnosis = describe_tree(self.child.id());
                kill_tree(self.child.id());
                let _ = self.child.kill();
                let _ = self.child.wait();
                let what = self.what.clone();
                let run = self.finish(None, None);
                panic!(
                    "hung for {DEADLINE:?}, killed with every process under it: {what}\n\
                     what each process was doing:\n{diagnosis}\nstderr:\n{}",
                    run.stderr
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Collects the output (which ends once the command and its children are gone; waited
    /// for a few seconds at most, in case something else holds the pipes).
    fn finish(self, code: Option<i32>, ranks_when_stuck: Option<Vec<Exit>>) -> Run {
        let collect = |rx: &mpsc::Receiver<Vec<u8>>| {
            let bytes = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        Run {
            code,
            stdout: collect(&self.stdout),
            stderr: collect(&self.stderr),
            ranks_when_stuck,
        }
    }
}

/// The children of `pid`, in process-id order (empty if it has none or is gone).
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return pids;
    };
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            pids.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// `pid`'s fields from `/proc/PID/stat` after the command name (which may hold spaces).
fn stat_fields(path: &Path) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(path).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_string).collect())
}

/// How `pid` exited, if it is a zombie (exited, not yet reaped by its parent).
fn zombie_exit(pid: u32) -> Option<Exit> {
    let fields = stat_fields(Path::new(&format!("/proc/{pid}/stat")))?;
    // fields[0] is the state (field 3 of proc(5)); the exit status is the last field (52).
    if fields.first().map(String::as_str) != Some("Z") {
        return None;
    }
    let status: i32 = fields.last()?.parse().ok()?;
    Some(Exit::from_wait_status(status))
}

/// `pid` and everything under it, one line per thread: pid, tid, state, kernel wait
/// channel, command line.
fn describe_tree(pid: u32) -> String {
    let mut text = String::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let cmdline = std::fs::read(format!("/proc/{p}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        text += &format!("  process {p}: {}\n", cmdline.trim_end());
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
            for task in tasks.flatten() {
                let state = stat_fields(&task.path().join("stat"))
                    .and_then(|f| f.first().cloned())
                    .unwrap_or_default();
                let wchan = std::fs::read_to_string(task.path().join("wchan")).unwrap_or_default();
                let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
                text += &format!(
                    "    thread {} ({}): {state} in {wchan}\n",
                    task.file_name().to_string_lossy(),
                    comm.trim()
                );
            }
        }
        todo.extend(children_of(p));
    }
    text
}

/// SIGKILLs everything under `pid` (deepest first), not `pid` itself.
fn kill_tree(pid: u32) {
    for child in children_of(pid) {
        kill_tree(child);
        signal(child, "KILL");
    }
}

/// Sends `kill -NAME pid`; whether it arrived.
pub fn signal(pid: u32, name: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
