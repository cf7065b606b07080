//! Test hooks that make a render fail or behave as on other hardware, switched on by
//! environment variables:
//! - `GASWORKS_FAULT_AT_TILE=K` or `gpuD:K`: a GPU's K-th tile first runs a kernel that
//!   stores to address 0, so that a lost GPU context can be tested ([`GpuTileFault`]);
//! - `GASWORKS_TEST_FAULT=rank=R,after=N,kind=...`: a cluster rank dies or falls silent
//!   mid-frame ([`cluster_fault`]);
//! - `GASWORKS_CPU_TILE_WORK=N`: CPU workers ask for GPU-sized tiles ([`cpu_tile_work`]).
//!
//! They exist only with the cargo feature `fault-injection`, which the tests turn on (the
//! crate is its own dev-dependency with that feature) and a plain `cargo build` leaves off.
//! Without it every function here answers "no hook" and the variables are never read, so a
//! release binary neither reacts to them nor contains their names. CI checks that, with the
//! names it reads from the string literals of this file (`scripts/lib/fault-hooks.sh`): a hook
//! belongs here, and no other code in `src/` reads its variable.

#[cfg(feature = "fault-injection")]
use std::sync::atomic::{AtomicU64, Ordering};

/// `GASWORKS_FAULT_AT_TILE` for one GPU: which tile of its workers is to fault on purpose,
/// and how many they have started. Without the feature it holds nothing and never fires.
#[derive(Debug, Default)]
pub struct GpuTileFault {
    #[cfg(feature = "fault-injection")]
    at: Option<u64>,
    #[cfg(feature = "fault-injection")]
    started: AtomicU64,
}

impl GpuTileFault {
    /// The hook for GPU `gpu`: `K` makes every GPU fault at its K-th tile (from 1), `gpuD:K`
    /// only GPU D (so that a render on two GPUs can lose one of them). Warns on stderr when
    /// armed; a value that is neither is an error, which names the variable.
    pub fn from_env(gpu: usize) -> Result<GpuTileFault, String> {
        #[cfg(feature = "fault-injection")]
        {
            const VAR: &str = "GASWORKS_FAULT_AT_TILE";
            let Some(value) = std::env::var_os(VAR) else {
                return Ok(GpuTileFault::default());
            };
            let at = match value.to_str().and_then(parse_fault_at_tile) {
                Some((only, _)) if only.is_some_and(|d| d != gpu) => None,
                Some((_, k)) => {
                    crate::console::write_whole(format_args!(
                        "warning: {VAR}={}: this GPU's tile {k} will fault on purpose \
                         (an illegal address: a test of what a lost GPU context does to a render)",
                        value.to_string_lossy().trim()
                    ));
                    Some(k)
                }
                None => {
                    return Err(format!(
                        "{VAR}={value:?}: expected a tile number from 1 (the tile of each GPU \
                         that faults on purpose), or gpuD:K for GPU D's tile K"
                    ))
                }
            };
            Ok(GpuTileFault {
                at,
                started: AtomicU64::new(0),
            })
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            let _ = gpu;
            Ok(GpuTileFault::default())
        }
    }

    /// Counts one tile started on this GPU (calibration pieces included): true when it is the
    /// one that is to fault.
    #[inline]
    pub fn tile_started(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        {
            self.at
                .is_some_and(|k| self.started.fetch_add(1, Ordering::Relaxed) + 1 == k)
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            false
        }
    }
}

/// `K` or `gpuD:K` (K from 1): the GPU named, if any, and K.
#[cfg(feature = "fault-injection")]
fn parse_fault_at_tile(text: &str) -> Option<(Option<usize>, u64)> {
    let text = text.trim();
    let (gpu, tile) = match text.split_once(':') {
        Some((gpu, tile)) => (Some(gpu.strip_prefix("gpu")?.parse::<usize>().ok()?), tile),
        None => (None, text),
    };
    let k = tile.parse::<u64>().ok().filter(|&k| k >= 1)?;
    Some((gpu, k))
}

/// `GASWORKS_TEST_FAULT`, when set, read by `parse` (the cluster's `FaultHook::parse`, which
/// knows the `rank=R,after=N,kind=...` form): the fault one rank is to meet mid-frame. A
/// value `parse` refuses is an error, which names the variable.
pub fn cluster_fault<T>(
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    #[cfg(feature = "fault-injection")]
    {
        const VAR: &str = "GASWORKS_TEST_FAULT";
        match std::env::var(VAR) {
            Ok(v) => parse(&v).map(Some).map_err(|e| format!("{VAR}={v:?}: {e}")),
            Err(_) => Ok(None),
        }
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = parse;
        Ok(None)
    }
}

/// `GASWORKS_CPU_TILE_WORK`, read once per process: the pixel-samples per tile CPU workers
/// ask for, as GPU workers do (`TileRenderer::min_tile_work`), so that the scheduler's GPU
/// layouts (tile counts from the work, adaptive sampling's tiles that skip the stopped
/// blocks) run on a machine without a GPU. A positive whole number, else `None` (a value that
/// is not one is reported once and ignored).
pub fn cpu_tile_work() -> Option<u64> {
    #[cfg(feature = "fault-injection")]
    {
        use std::sync::OnceLock;
        const VAR: &str = "GASWORKS_CPU_TILE_WORK";
        static WORK: OnceLock<Option<u64>> = OnceLock::new();
        *WORK.get_or_init(|| {
            let text = std::env::var(VAR).ok()?;
            match text.trim().parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    log::warn!(
                        "{VAR}={text:?} is not a positive whole number of pixel-samples: ignored"
                    );
                    None
                }
            }
        })
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        None
    }
}

#[cfg(all(test, feature = "fault-injection"))]
mod tests {
    use super::*;

    #[test]
    fn the_fault_hook_names_a_tile_and_optionally_one_gpu() {
        assert_eq!(parse_fault_at_tile("3"), Some((None, 3)));
        assert_eq!(parse_fault_at_tile(" gpu1:2 "), Some((Some(1), 2)));
        for bad in [
            "0", "gpu1:0", "gpu:2", "1:2", "gpux:2", "gpu1:", "", "-1", "gpu1:2:3",
        ] {
            assert_eq!(parse_fault_at_tile(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_gpu_tile_fault_fires_once_at_its_tile() {
        let fault = GpuTileFault {
            at: Some(3),
            started: AtomicU64::new(0),
        };
        let fired: Vec<bool> = (0..5).map(|_| fault.tile_started()).collect();
        assert_eq!(fired, [false, false, true, false, false]);
        assert!(!GpuTileFault::default().tile_started());
    }
}
