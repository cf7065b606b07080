//! Which workers share one measured speed.
//!
//! Speeds are measured per group of workers (one `--devices` entry of one process or rank):
//! a worker's few tiles in a pass say little, its group's many say more. But two groups can
//! be the same hardware: two GPUs of one model in one process (`gpu0x2,gpu1x2`), or the
//! ranks of a cluster of alike machines. Measured apart, noise sets them apart (figures:
//! docs/cluster.md#speeds), and the scheduler would treat the "slower" one as a slow device
//! (the steal guard keeping it from tiles it would finish in time, its share cut into
//! pieces). Groups alike in device kind and hardware, GPUs also in their number of streams,
//! are one *speed class*: their tiles are pooled into one measurement (total estimated cost
//! over total seconds), which has as many tiles as the class has, and every worker of the
//! class plans at that speed. A real difference between
//! alike machines (another job on one node) then shows as busy time, and work stealing evens
//! it, as it does between the workers of one group.
//!
//! Groups whose hardware is not known ([`crate::render::TileRenderer::hardware`] empty) are
//! each a class of their own.

use super::workers::Worker;

/// What decides whether two groups are alike, for one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerKind<'a> {
    /// The worker's group (numbered across ranks in a cluster).
    pub group: usize,
    /// Its device name: "cpu", "gpu0" (its kind is the name without the index).
    pub device: &'a str,
    /// What it runs on ("gpu: NVIDIA H200, 132 SMs"); empty where not known.
    pub hardware: &'a str,
}

/// Each worker's speed class, numbered from 0 in the order of the workers' first appearance.
/// Two workers share a class when their groups are alike: the same device kind ("cpu",
/// "gpu") and the same known hardware, and for GPUs the same number of workers. The streams
/// of a GPU share it, and their tiles are timed by the wall clock, so a stream of `gpu0x4` is
/// slower than one of `gpu0x2` on the same GPU. A CPU thread's tiles are timed by its own CPU
/// time, which does not grow with the number of threads: a rank of 8 threads and one of 16
/// on one CPU model are alike.
pub fn speed_classes(workers: &[WorkerKind<'_>]) -> Vec<usize> {
    let groups = workers.iter().map(|w| w.group).max().map_or(0, |g| g + 1);
    let mut count = vec![0usize; groups];
    for w in workers {
        count[w.group] += 1;
    }
    let kind = |d: &str| d.trim_end_matches(|c: char| c.is_ascii_digit()).to_string();
    // A group's key: alike groups have equal keys; a group of unknown hardware, its own.
    let key = |w: &WorkerKind<'_>| -> (String, String, usize, Option<usize>) {
        let own = w.hardware.is_empty().then_some(w.group);
        let kind = kind(w.device);
        let streams = if kind == "cpu" { 0 } else { count[w.group] };
        (kind, w.hardware.to_string(), streams, own)
    };
    let mut keys: Vec<(String, String, usize, Option<usize>)> = Vec::new();
    workers
        .iter()
        .map(|w| {
            let k = key(w);
            match keys.iter().position(|x| *x == k) {
                Some(c) => c,
                None => {
                    keys.push(k);
                    keys.len() - 1
                }
            }
        })
        .collect()
}

/// [`speed_classes`] of one process's workers.
pub fn of_workers(workers: &[Worker]) -> Vec<usize> {
    let hardware: Vec<String> = workers.iter().map(|w| w.renderer.hardware()).collect();
    let kinds: Vec<WorkerKind<'_>> = workers
        .iter()
        .zip(&hardware)
        .map(|(w, h)| WorkerKind {
            group: w.group,
            device: &w.device,
            hardware: h,
        })
        .collect();
    speed_classes(&kinds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds<'a>(list: &[(usize, &'a str, &'a str)]) -> Vec<WorkerKind<'a>> {
        list.iter()
            .map(|&(group, device, hardware)| WorkerKind {
                group,
                device,
                hardware,
            })
            .collect()
    }

    const H200: &str = "gpu: NVIDIA H200, 132 SMs";
    const H100: &str = "gpu: NVIDIA H100 80GB HBM3, 132 SMs";
    const EPYC: &str = "cpu: AMD EPYC 7B13 64-Core Processor";

    #[test]
    fn two_gpus_of_one_model_are_one_class() {
        // gpu0x2,gpu1x2 on a machine of two H200s.
        let w = kinds(&[
            (0, "gpu0", H200),
            (0, "gpu0", H200),
            (1, "gpu1", H200),
            (1, "gpu1", H200),
        ]);
        assert_eq!(speed_classes(&w), [0, 0, 0, 0]);
    }

    #[test]
    fn unlike_hardware_or_stream_counts_are_classes_apart() {
        // An H200 and an H100; an H200 with 2 streams and one with 4; CPU threads.
        let w = kinds(&[
            (0, "gpu0", H200),
            (0, "gpu0", H200),
            (1, "gpu0", H100),
            (1, "gpu0", H100),
            (2, "gpu0", H200),
            (2, "gpu0", H200),
            (2, "gpu0", H200),
            (2, "gpu0", H200),
            (3, "cpu", EPYC),
            (4, "cpu", EPYC),
        ]);
        // The CPU groups have one thread each and one CPU: alike.
        assert_eq!(speed_classes(&w), [0, 0, 1, 1, 2, 2, 2, 2, 3, 3]);
    }

    #[test]
    fn cpu_ranks_of_one_model_are_alike_whatever_their_thread_counts() {
        // A cluster's rank of one thread beside a rank of two, then one of another CPU.
        let w = kinds(&[
            (0, "cpu", EPYC),
            (1, "cpu", EPYC),
            (1, "cpu", EPYC),
            (2, "cpu", "cpu: X"),
        ]);
        assert_eq!(speed_classes(&w), [0, 0, 0, 1]);
    }

    #[test]
    fn groups_of_unknown_hardware_stay_apart() {
        let w = kinds(&[
            (0, "cpu", ""),
            (1, "cpu", ""),
            (2, "cpu", EPYC),
            (3, "cpu", EPYC),
        ]);
        assert_eq!(speed_classes(&w), [0, 1, 2, 2]);
    }

    #[test]
    fn a_device_kind_is_its_name_without_the_index() {
        // Hardware strings that happen to agree across kinds do not merge a CPU and a GPU.
        let w = kinds(&[(0, "gpu0", "x"), (1, "gpu1", "x"), (2, "cpu", "x")]);
        assert_eq!(speed_classes(&w), [0, 0, 1]);
    }
}
