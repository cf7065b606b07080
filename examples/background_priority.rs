//! What the low-priority pool of `gasworks::cpu::background` costs the work beside it: a
//! CPU-bound parallel job on rayon's global pool (as the cost map is, while a GPU is set up),
//! timed alone, beside a background pool whose threads spin, and beside an ordinary pool of
//! as many spinning threads, in turns, in one process.
//!
//!     cargo run --release --example background_priority [ROUNDS]
//!
//! Prints each run, then each beside-run's time over the same round's run alone (min, median,
//! max over the rounds). With the pool's nice 10 the foreground should keep most of the cores;
//! at normal priority it gets about its share of them.

use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The foreground: a parallel sum of `n` sines on the global pool (about 0.7 s on 2 cores).
fn foreground(n: u64) -> f64 {
    (0..n)
        .into_par_iter()
        .map(|i| (i as f64 * 1e-9).sin())
        .sum()
}

/// Spins one thread per thread of `pool` until `stop` is set, on a thread of its own.
fn spin_on(pool: rayon::ThreadPool, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let threads = pool.current_num_threads();
        pool.install(|| {
            (0..threads).into_par_iter().for_each(|_| {
                let mut x = 0f64;
                while !stop.load(Ordering::Relaxed) {
                    x += 1.0;
                    std::hint::black_box(x);
                }
            })
        })
    })
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let threads = rayon::current_num_threads();
    let n = 150_000_000u64;
    let mut ratios: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    println!("{threads} threads in the global pool and in each spinning pool");
    for round in 0..rounds {
        let mut alone = 0.0;
        for (mode, name) in [
            "alone",
            "beside a background pool",
            "beside an ordinary pool",
        ]
        .iter()
        .enumerate()
        {
            let stop = Arc::new(AtomicBool::new(false));
            let spinner = match mode {
                0 => None,
                1 => Some(gasworks::cpu::background::background_pool(threads)),
                _ => Some(rayon::ThreadPoolBuilder::new().num_threads(threads).build()),
            }
            .map(|pool| spin_on(pool.expect("a thread pool"), stop.clone()));
            // Let the spinners start before the clock does.
            std::thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            std::hint::black_box(foreground(n));
            let seconds = t.elapsed().as_secs_f64();
            stop.store(true, Ordering::Relaxed);
            if let Some(s) = spinner {
                s.join().expect("the spinners end");
            }
            println!("round {round}: foreground {seconds:.3} s {name}");
            match mode {
                0 => alone = seconds,
                m => ratios[m - 1].push(seconds / alone),
            }
        }
    }
    for (name, r) in ["a background pool (nice 10)", "an ordinary pool"]
        .iter()
        .zip(ratios.iter_mut())
    {
        r.sort_by(f64::total_cmp);
        println!(
            "beside {name}: {:.2}x / {:.2}x / {:.2}x the time alone (min / median / max of {rounds})",
            r[0],
            r[r.len() / 2],
            r[r.len() - 1]
        );
    }
}
