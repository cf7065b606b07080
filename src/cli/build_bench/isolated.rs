//! `build-bench --isolate`: every configuration (and the single-GAS reference) timed in a
//! process of its own.
//!
//! Why: a batch that crashes poisons its CUDA context (`CUDA_ERROR_ILLEGAL_ADDRESS` is sticky),
//! and one that hangs blocks its process, so in one process nothing can be timed after the
//! first failure, and some configurations (the LPT variants the benchmark protocol asks for)
//! crash at random (figures: docs/gas-builds.md).
//! A child per configuration turns each failure into one failed row: the parent notes how the
//! child ended, goes on with the next, and writes the CSV and plot of everything that was
//! timed.
//!
//! The child is this same executable with the parent's own arguments plus two hidden ones
//! (`--isolated-child JOB --isolated-rows FILE`): it times its one job, writes its rows to
//! FILE, and its output goes straight to the parent's stdout and stderr, so the log shows every
//! child's lines and errors as they happen. The cost is a CUDA context, an OptiX context, the
//! scene's load and upload per configuration (seconds on the 10M-triangle toystore), outside
//! every timed span: the times are the same batches timed the same way, one process each.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::bench_report::BenchRow;
use crate::optix::watchdog::EXIT_GPU_HUNG;

/// What one child times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// Configuration `k` of `configurations()`, in its order.
    Config(usize),
    /// The whole scene as one GAS, per flag setting timed.
    Reference,
}

impl Job {
    /// The value of `--isolated-child`.
    pub fn spec(self) -> String {
        match self {
            Job::Config(k) => k.to_string(),
            Job::Reference => "reference".into(),
        }
    }

    pub fn parse(spec: &str) -> anyhow::Result<Job> {
        if spec == "reference" {
            return Ok(Job::Reference);
        }
        spec.parse().map(Job::Config).map_err(|_| {
            anyhow::anyhow!("--isolated-child {spec:?}: a configuration index or \"reference\"")
        })
    }
}

/// How a child process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    Passed,
    /// A non-zero exit status.
    Exited(i32),
    /// Ended by a signal (a crash in the driver: SIGSEGV, SIGABRT...).
    Signalled(i32),
    /// Still running at `--config-timeout-s`, and killed.
    TimedOut(Duration),
}

impl Ending {
    pub fn from_status(status: ExitStatus) -> Ending {
        if status.success() {
            return Ending::Passed;
        }
        if let Some(code) = status.code() {
            return Ending::Exited(code);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            if let Some(signal) = status.signal() {
                return Ending::Signalled(signal);
            }
        }
        Ending::Exited(-1)
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Passed => write!(f, "passed"),
            Ending::Exited(code) if *code == EXIT_GPU_HUNG => write!(
                f,
                "exit status {code}: the batch hung and the watchdog ended the process"
            ),
            Ending::Exited(code) => write!(f, "exit status {code}"),
            Ending::Signalled(signal) => {
                write!(f, "killed by signal {signal}{}", signal_name(*signal))
            }
            Ending::TimedOut(after) => write!(
                f,
                "still running after {} s (--config-timeout-s), killed",
                after.as_secs_f64()
            ),
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => " (SIGILL)",
        6 => " (SIGABRT)",
        7 => " (SIGBUS)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

/// One job that did not pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Failed {
    /// The configuration, as the rows' lines name it.
    pub label: String,
    pub ending: Ending,
}

/// The rows of every job that passed, in job order, and the jobs that failed. Every job runs,
/// whatever the ones before it did: that is the point of isolating them. After each job that
/// passed, `rows_so_far` gets every row so far (build-bench writes them out, so that a run
/// stopped part-way keeps them).
pub fn run_jobs(
    jobs: &[(Job, String)],
    mut rows_so_far: impl FnMut(&[BenchRow]) -> anyhow::Result<()>,
    mut run: impl FnMut(Job) -> anyhow::Result<(Ending, Vec<BenchRow>)>,
) -> anyhow::Result<(Vec<BenchRow>, Vec<Failed>)> {
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for (job, label) in jobs {
        // An error here is the parent's own (the executable would not start, a rows file
        // could not be read): nothing any later job could do differently.
        let (ending, mut job_rows) = run(*job)?;
        if ending == Ending::Passed {
            rows.append(&mut job_rows);
            rows_so_far(&rows)?;
        } else {
            eprintln!("build-bench --isolate: {label}: {ending}");
            failed.push(Failed {
                label: label.clone(),
                ending,
            });
        }
    }
    Ok((rows, failed))
}

/// The arguments of a child: the parent's own (after the executable's name) and the job.
pub fn child_args(
    parent_args: impl IntoIterator<Item = OsString>,
    job: Job,
    rows: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = parent_args.into_iter().collect();
    args.extend([
        "--isolated-child".into(),
        job.spec().into(),
        "--isolated-rows".into(),
        rows.as_os_str().to_owned(),
    ]);
    args
}

/// Runs `program args`, its stdout and stderr the parent's, and waits for it, for at most
/// `timeout` if one is given (then kills it).
pub fn run_child(
    program: &Path,
    args: &[OsString],
    timeout: Option<Duration>,
) -> anyhow::Result<Ending> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", program.display()))?;
    let started = Instant::now();
    loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("waiting for {}", program.display()))?
        {
            return Ok(Ending::from_status(status));
        }
        if let Some(limit) = timeout {
            if started.elapsed() >= limit {
                // Already ended between the poll and now is fine: the kill then fails and the
                // wait below reaps it.
                let _ = child.kill();
                let _ = child.wait();
                return Ok(Ending::TimedOut(limit));
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads the rows a child wrote with `write_csv`.
pub fn read_rows(path: &Path) -> anyhow::Result<Vec<BenchRow>> {
    let mut reader = csv::Reader::from_path(path)
        .with_context(|| format!("reading a child's rows, {}", path.display()))?;
    reader
        .deserialize()
        .collect::<Result<Vec<BenchRow>, _>>()
        .with_context(|| format!("reading a child's rows, {}", path.display()))
}

/// Where job `job` of this process writes its rows: the system's temporary folder, named by
/// this process so that parallel runs do not meet.
pub fn rows_path(job: Job) -> PathBuf {
    std::env::temp_dir().join(format!(
        "gasworks-build-bench-{}-{}.csv",
        std::process::id(),
        job.spec()
    ))
}

/// The message of a run with failed jobs: how many passed, and each failure.
pub fn failure_summary(failed: &[Failed], jobs: usize) -> String {
    let mut text = if failed.len() < jobs {
        format!(
            "{} of {} isolated configurations failed (the rows of the others are written):",
            failed.len(),
            jobs
        )
    } else {
        format!("all {jobs} isolated configurations failed (no rows, so no CSV or plot):")
    };
    for f in failed {
        text.push_str(&format!("\n  {}: {}", f.label, f.ending));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_round_trip_through_their_spec() {
        for job in [Job::Config(0), Job::Config(17), Job::Reference] {
            assert_eq!(Job::parse(&job.spec()).unwrap(), job);
        }
        assert!(Job::parse("-1").is_err());
        assert!(Job::parse("").is_err());
        assert!(Job::parse("ref").is_err());
    }

    #[test]
    fn a_child_gets_the_parents_arguments_then_its_job() {
        let args = child_args(
            ["build-bench", "s.obj", "--isolate"].map(OsString::from),
            Job::Config(3),
            Path::new("/tmp/r.csv"),
        );
        assert_eq!(
            args,
            [
                "build-bench",
                "s.obj",
                "--isolate",
                "--isolated-child",
                "3",
                "--isolated-rows",
                "/tmp/r.csv"
            ]
            .map(OsString::from)
        );
    }

    #[test]
    fn every_job_runs_whatever_failed_before_it() {
        let jobs: Vec<(Job, String)> = (0..4)
            .map(|k| (Job::Config(k), format!("config {k}")))
            .chain([(Job::Reference, "single GAS".to_string())])
            .collect();
        let mut ran = Vec::new();
        // What was handed on after each job: the rows so far, each time a job passed.
        let mut handed = Vec::new();
        let (rows, failed) = run_jobs(
            &jobs,
            |so_far| {
                handed.push(so_far.iter().map(|r| r.scene.clone()).collect::<Vec<_>>());
                Ok(())
            },
            |job| {
                ran.push(job);
                Ok(match job {
                    Job::Config(1) => (Ending::Signalled(11), vec![]),
                    Job::Config(2) => (Ending::Exited(EXIT_GPU_HUNG), vec![]),
                    _ => (Ending::Passed, vec![row(&job.spec())]),
                })
            },
        )
        .unwrap();
        assert_eq!(ran.len(), 5);
        assert_eq!(
            handed,
            [vec!["0"], vec!["0", "3"], vec!["0", "3", "reference"]]
        );
        assert_eq!(
            rows.iter().map(|r| r.scene.as_str()).collect::<Vec<_>>(),
            ["0", "3", "reference"]
        );
        assert_eq!(
            failed.iter().map(|f| f.label.as_str()).collect::<Vec<_>>(),
            ["config 1", "config 2"]
        );
        let summary = failure_summary(&failed, jobs.len());
        assert!(
            summary.starts_with("2 of 5 isolated configurations failed"),
            "{summary}"
        );
        assert!(
            summary.contains("config 1: killed by signal 11 (SIGSEGV)"),
            "{summary}"
        );
        assert!(
            summary.contains(
                "config 2: exit status 75: the batch hung and the watchdog ended the process"
            ),
            "{summary}"
        );
        assert!(failure_summary(&failed, 2)
            .starts_with("all 2 isolated configurations failed (no rows"));
        // The parent's own failure stops the run.
        assert!(run_jobs(&jobs, |_| Ok(()), |_| anyhow::bail!("cannot start")).is_err());
        // So does a failure to keep the rows so far (a full disk, a folder gone).
        let kept = run_jobs(
            &jobs,
            |_| anyhow::bail!("cannot write"),
            |job| Ok((Ending::Passed, vec![row(&job.spec())])),
        );
        assert!(kept.is_err());
    }

    /// A row named `scene` (test data).
    fn row(scene: &str) -> BenchRow {
        BenchRow {
            scene: scene.into(),
            build: crate::bench_report::BuildKind::Batch,
            groups: 390,
            gases: 390,
            triangles: 260_202,
            streams: 8,
            flags: "fast-trace".into(),
            assign: "lpt".into(),
            scratch_mode: "shared".into(),
            merge_below: 0,
            lpt_build_weight: 0,
            issue_order: "assignment".into(),
            enqueue_threads: 1,
            build_contexts: "per-stream".into(),
            repeats: 100,
            min_ms: 19.25,
            median_ms: 19.766,
            max_ms: 22.5,
            enqueue_median_ms: 19.346,
            scratch_bytes: 1 << 20,
            output_bytes: 3 << 20,
            compacted_bytes: None,
            device: "NVIDIA H200".into(),
            driver: "580.159.04".into(),
            git_commit: "3c6f6ab".into(),
        }
    }

    #[test]
    fn rows_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.csv");
        let mut compacted = row("sponza, \"like\"");
        compacted.compacted_bytes = Some(123_456);
        compacted.build = crate::bench_report::BuildKind::SingleGas;
        let rows = vec![row("a"), compacted];
        crate::bench_report::write_csv(std::fs::File::create(&path).unwrap(), &rows).unwrap();
        assert_eq!(read_rows(&path).unwrap(), rows);
        let err = read_rows(&dir.path().join("none.csv")).unwrap_err();
        assert!(format!("{err:#}").contains("none.csv"), "{err:#}");
    }

    #[cfg(unix)]
    #[test]
    fn child_endings_are_told_apart() {
        let sh = Path::new("/bin/sh");
        let run = |script: &str, timeout: Option<Duration>| {
            run_child(sh, &["-c".into(), script.into()], timeout).unwrap()
        };
        assert_eq!(run("exit 0", None), Ending::Passed);
        assert_eq!(run("exit 75", None), Ending::Exited(75));
        assert_eq!(run("kill -SEGV $$", None), Ending::Signalled(11));
        // `exec`: the shell becomes the sleep, so the kill reaches the process that sleeps.
        let limit = Duration::from_millis(200);
        assert_eq!(run("exec sleep 30", Some(limit)), Ending::TimedOut(limit));
        assert!(run_child(Path::new("/no/such/gasworks"), &[], None).is_err());
    }
}
