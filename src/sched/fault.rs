//! A test hook of cluster renders: one rank fails in the middle of the frame (aborts, exits,
//! is killed or falls silent), to check that the job ends with a clear message and no hang.
//! The environment switches it on only with the cargo feature `fault-injection`
//! ([`crate::fault_injection`]).

use std::sync::atomic::{AtomicBool, Ordering};

/// The hook the environment asks for ([`crate::fault_injection::cluster_fault`]: only with
/// the cargo feature `fault-injection`), if any.
pub fn from_env() -> anyhow::Result<Option<FaultHook>> {
    crate::fault_injection::cluster_fault(FaultHook::parse).map_err(anyhow::Error::msg)
}

/// The hook's hung rank, once its silence landed: alive and silent until the job is
/// aborted.
pub fn hold_if_silenced() {
    while silenced_by_fault_hook() {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// A test hook: make one rank fail in the middle of the frame, after it has rendered
/// `after_tiles` tiles (rank 0: after its master took that many, from any rank), to check
/// that the job ends with a clear message and no hang.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultHook {
    pub rank: usize,
    pub after_tiles: usize,
    pub kind: FaultKind,
}

/// Set once the hook's silence has landed on this rank.
static SILENCED: AtomicBool = AtomicBool::new(false);

/// Whether [`FaultKind::Silence`] landed on this rank: its process is then to stay alive and
/// silent. (A rank the frame ended for before its fault landed leaves as usual.)
pub fn silenced_by_fault_hook() -> bool {
    SILENCED.load(Ordering::SeqCst)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `std::process::abort()`: the process dies on SIGABRT.
    Abort,
    /// `std::process::exit(3)` without finishing MPI.
    Exit,
    /// SIGKILL to itself, as the kernel's out-of-memory killer would.
    Kill,
    /// The rank stops talking (its progress loop returns and says nothing): a hung rank,
    /// which only the heartbeat timeout can catch.
    Silence,
}

impl FaultHook {
    /// Parses `rank=R,after=N,kind=abort|exit|kill|silence` (the `GASWORKS_TEST_FAULT`
    /// variable).
    pub fn parse(s: &str) -> Result<FaultHook, String> {
        let (mut rank, mut after, mut kind) = (None, None, None);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not key=value"))?;
            let num = || {
                v.parse::<usize>()
                    .map_err(|_| format!("{k}={v}: not a number"))
            };
            match k {
                "rank" => rank = Some(num()?),
                "after" => after = Some(num()?),
                "kind" => {
                    kind = Some(match v {
                        "abort" => FaultKind::Abort,
                        "exit" => FaultKind::Exit,
                        "kill" => FaultKind::Kill,
                        "silence" => FaultKind::Silence,
                        _ => {
                            return Err(format!("kind={v}: expected abort, exit, kill or silence"))
                        }
                    })
                }
                _ => return Err(format!("unknown key {k:?}")),
            }
        }
        Ok(FaultHook {
            rank: rank.ok_or("rank=R is missing")?,
            after_tiles: after.unwrap_or(0),
            kind: kind.unwrap_or(FaultKind::Abort),
        })
    }

    /// The fault, landing now on this rank: the process ends here, or (silence) it is to fall
    /// silent, which this returns true for.
    pub fn land(&self) -> bool {
        match self.kind {
            FaultKind::Abort => std::process::abort(),
            FaultKind::Exit => std::process::exit(3),
            FaultKind::Kill => {
                // SAFETY: raise only sends a signal to this process.
                unsafe { libc::raise(libc::SIGKILL) };
                true
            }
            FaultKind::Silence => {
                SILENCED.store(true, Ordering::SeqCst);
                true
            }
        }
    }
}
