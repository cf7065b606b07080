//! The discrete-event simulator (schedule-sim): one worker is fully efficient, no tile is ever
//! lost or doubled, zero-latency stealing never loses to no stealing, and the command replays
//! the statistics files a render writes.

mod cli_support;
mod sched_support;

use cli_support::gasworks_command;
use gasworks::scene::MaterialKind;
use gasworks::sched::costmap::CostMap;
use gasworks::sched::policy::initial_deques;
use gasworks::sched::report::{read_tiles, write_stats};
use gasworks::sched::sim::{simulate, Replay};
use gasworks::sched::{render_frame, DeviceSpec, SchedConfig, Strategy};
use proptest::prelude::*;
use sched_support::{room, room_settings, MockFactory, MockRenderer};

fn strategy_of(i: u8) -> Strategy {
    Strategy::ALL[i as usize % 3]
}

proptest! {
    #[test]
    fn one_worker_is_fully_efficient(
        costs in proptest::collection::vec(0.001f64..10.0, 1..200),
        s in 0u8..3, steal: bool, latency in 0.0f64..1.0, seed: u64,
    ) {
        let deques = initial_deques(strategy_of(s), &costs, &[1.0]);
        let run = simulate(&costs, deques, steal, latency, seed);
        let total: f64 = costs.iter().sum();
        prop_assert!((run.makespan - total).abs() <= 1e-9 * total);
        prop_assert!((run.efficiency() - 1.0).abs() < 1e-9);
        prop_assert_eq!(run.steals, 0);
    }

    #[test]
    fn no_tile_is_lost_or_doubled(
        costs in proptest::collection::vec(0.0f64..10.0, 0..300),
        workers in 1usize..40, s in 0u8..3, steal: bool, latency in 0.0f64..1.0, seed: u64,
    ) {
        let deques = initial_deques(strategy_of(s), &costs, &vec![1.0; workers]);
        let run = simulate(&costs, deques, steal, latency, seed);
        prop_assert!(run.ran_by.iter().all(Option::is_some));
        prop_assert_eq!(run.tiles.iter().sum::<usize>(), costs.len());
        let busy: f64 = run.busy.iter().sum();
        let total: f64 = costs.iter().sum();
        prop_assert!((busy - total).abs() <= 1e-9 * total.max(1.0));
        prop_assert!(run.efficiency() <= 1.0 + 1e-12);
    }

    /// With free steals every tile starts no later than it would without stealing (a stolen
    /// tile was still waiting behind the victim's current one), so the makespan never grows.
    #[test]
    fn free_stealing_never_loses_to_no_stealing(
        costs in proptest::collection::vec(0.0f64..10.0, 1..200),
        workers in 2usize..20, s in 0u8..3, seed: u64,
    ) {
        let deques = initial_deques(strategy_of(s), &costs, &vec![1.0; workers]);
        let without = simulate(&costs, deques.clone(), false, 0.0, seed);
        let with = simulate(&costs, deques, true, 0.0, seed);
        prop_assert!(with.makespan <= without.makespan + 1e-9, "{} > {}", with.makespan, without.makespan);
    }
}

#[test]
fn replay_of_a_uniform_map_charges_each_tile_its_measured_time() {
    // 8 x 8 image, 4 x 4 map; four measured 4 x 4 tiles of different times.
    let estimate = CostMap::uniform(4, 4, 1.0);
    let tiles: Vec<_> = gasworks::sched::tiles::equal_tiles(8, 8, 2, 2);
    let seconds = vec![1.0, 2.0, 3.0, 4.0];
    let replay = Replay::new(8, 8, estimate, &[(tiles, seconds)]);
    assert!((replay.serial_s() - 10.0).abs() < 1e-9);
    let runs = replay.run(Strategy::Regular, false, 4, 4, 0.0, &[0]);
    assert_eq!(runs.len(), 1);
    assert!((runs[0].makespan - 4.0).abs() < 1e-9);
    // The estimate is flat, so the two workers get two tiles each in serpentine order:
    // (1, 2) and (3, 4). The first frees up at t = 3 and steals the 4 s tile: makespan 7.
    let runs = replay.run(Strategy::Sorted, true, 2, 4, 0.0, &[0, 1, 2]);
    assert_eq!(runs.len(), 3);
    assert!(runs
        .iter()
        .all(|r| (r.makespan - 7.0).abs() < 1e-9 && r.steals == 1));
}

/// schedule-sim on the stats, with these options: its stdout, after checking it succeeded.
fn schedule_sim(stats: &std::path::Path, options: &[&str]) -> String {
    let out = gasworks_command()
        .arg("schedule-sim")
        .arg(stats)
        .args(options)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{options:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Sorted tiles (`tiles` of them) on two CPU threads, one sample per pass.
fn two_threads(tiles: u32) -> SchedConfig {
    SchedConfig {
        strategy: Strategy::Sorted,
        tiles: Some(tiles),
        devices: vec![DeviceSpec::Cpu { workers: Some(2) }],
        pass_spp: Some(1),
        ..SchedConfig::default()
    }
}

#[test]
fn schedule_sim_replays_a_mock_render() {
    let (w, h) = (96, 64);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(w, h, 2, 1);
    // Cost follows the estimate's story: the lower left (mirror floor) is slow.
    let mock = MockRenderer::new(w, 1)
        .with_spin(move |x, y| if x < w / 2 && y > h / 2 { 400 } else { 40 });
    let factory = MockFactory::new(mock);
    let config = two_threads(96);
    let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("run.csv");
    write_stats(&frame.report, &stats).unwrap();
    let rows = read_tiles(&dir.path().join("run.tiles.csv")).unwrap();
    assert_eq!(rows.len(), 2 * frame.report.passes[0].tiles.len());
    let summary = std::fs::read_to_string(&stats).unwrap();
    assert!(summary.starts_with(
        "pass,spp_from,spp_to,worker,label,device,tiles,steals,busy_s,makespan_s,efficiency"
    ));
    assert_eq!(summary.lines().count(), 1 + 2 * 2);

    let replay = |options: &[&str]| schedule_sim(&stats, options);
    let stdout = replay(&["--workers", "1,4,16", "--seeds", "3"]);
    eprintln!("{}{stdout}", frame.report.summary());
    for needle in [
        "1 worker:",
        "4 workers:",
        "16 workers:",
        "regular w/o steal",
        "sorted + steal",
        "adaptive + steal",
    ] {
        assert!(stdout.contains(needle), "{needle} missing from:\n{stdout}");
    }
    // One simulated worker is 100% efficient in every row.
    let one = stdout.split("4 workers:").next().unwrap();
    assert_eq!(one.matches("100.0% -  100.0%").count(), 6, "{one}");

    // Workers of different speeds: one worker 50 times slower beside two. Equal shares hand
    // it a third of the frame; with shares by speed and the guard it runs at most what pays
    // (here, where the mock's costs stray far from the estimate, nothing), and the frame ends
    // within a few percent of the two fast workers' alone (the cuts differ, and probing the
    // slow worker's empty deque costs steal latency).
    let stdout = replay(&["--speeds", "1x2,0.02", "--seeds", "3"]);
    for strategy in ["regular", "sorted", "adaptive"] {
        let rows: Vec<&str> = stdout
            .lines()
            .filter(|l| l.trim_start().starts_with(strategy))
            .collect();
        assert_eq!(rows.len(), 5, "{stdout}");
        assert!(
            rows[0].contains("2 fastest alone") && rows[0].contains("1.00x"),
            "{stdout}"
        );
        assert!(rows[1].contains("all 3, equal shares"), "{stdout}");
        let ratio = |row: &str| -> f64 {
            let x = row
                .split_whitespace()
                .find(|t| t.ends_with('x') && t.len() > 1)
                .unwrap();
            x.trim_end_matches('x').parse().unwrap()
        };
        assert!(ratio(rows[1]) > 1.3, "equal shares: {}", rows[1]);
        assert!(rows[3].contains("by speed + guard "), "{stdout}");
        assert!(ratio(rows[3]) <= 1.1, "guarded: {}", rows[3]);
        // The same on tiles cut for the slow worker (a share of 1% cut into 8 pieces).
        assert!(rows[4].contains("by speed + guard + cut"), "{stdout}");
        assert!(ratio(rows[4]) <= 1.1, "guarded, cut: {}", rows[4]);
    }

    // Ranks of different speeds: a rank of two fast workers beside a rank of one 50 times
    // slower, taking turns. Every strategy has one row per rank count, with the four plans,
    // each a makespan and its ratio to equal shares'. (What the guards decide is checked
    // exactly in sched::sim's tests; here the mock's costs stray from the estimate, and a
    // slow rank's planned tile can outlast the fast ranks whatever the plan.)
    let stdout = replay(&["--ranks", "2,4", "--speeds", "1x2;0.02", "--seeds", "3"]);
    assert!(
        stdout.contains("mixed cluster: rank r is kind r mod 2 of 1x2;0.02"),
        "{stdout}"
    );
    for (ranks, workers) in [(2, 3), (4, 6)] {
        for strategy in ["regular", "sorted", "adaptive"] {
            let row = stdout
                .lines()
                .find(|l| {
                    let t: Vec<&str> = l.split_whitespace().collect();
                    t.len() > 5
                        && t[0] == ranks.to_string()
                        && t[1] == workers.to_string()
                        && t[5] == strategy
                })
                .unwrap_or_else(|| panic!("no row for {ranks} ranks, {strategy}:\n{stdout}"));
            let ratios: Vec<f64> = row
                .split_whitespace()
                .filter(|t| t.ends_with('x') && t.len() > 1)
                .map(|t| t.trim_end_matches('x').parse().unwrap())
                .collect();
            assert_eq!(ratios.len(), 4, "{row}");
            assert_eq!(ratios[0], 1.0, "{row}");
            assert!(ratios.iter().all(|r| r.is_finite() && *r > 0.0), "{row}");
        }
    }

    // A bad file is an error that names it.
    let out = gasworks_command()
        .args([
            "schedule-sim",
            dir.path().join("missing.csv").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.csv: no such file"));

    // Options a replay cannot take are refused by name, before any work.
    for (args, says) in [
        (&["--tiles", "0"][..], "--tiles must be at least 1"),
        (
            &["--workers", "1000000"][..],
            "at most 65536 simulated workers",
        ),
        (
            &["--workers", "2", "--ranks", "18446744073709551615"][..],
            "at most 65536 simulated workers",
        ),
        (
            &["--speeds", "1x2,0x3"][..],
            "the speed must be a positive number",
        ),
        (&["--speeds", "1x0"][..], "the count must be a whole number"),
        (&["--speeds", ","][..], "give 1 to 65536 workers"),
        (
            &["--speeds", "1x2;0.5"][..],
            "`;` separates kinds of rank, which only --ranks models",
        ),
        (
            &["--speeds", "1x2;", "--ranks", "2"][..],
            "give 1 to 65536 workers",
        ),
        (
            &["--speeds", "1x40000;1", "--ranks", "2"][..],
            "at most 65536 simulated workers",
        ),
    ] {
        let out = gasworks_command()
            .arg("schedule-sim")
            .arg(&stats)
            .args(args)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {e}");
        assert!(e.contains(says), "{args:?}: {e}");
    }
}

/// A stats file that is not there is named as given; a summary without its per-tile file
/// names the per-tile file and the render that writes it. Exit 1, no panic.
#[test]
fn schedule_sim_names_the_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = |given: &std::path::Path| {
        let out = gasworks_command()
            .arg("schedule-sim")
            .arg(given)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = dir.path().join("typo.csv");
    let stderr = run(&missing);
    assert!(
        stderr.starts_with(&format!("error: {}: no such file (", missing.display())),
        "{stderr}"
    );
    let summary = dir.path().join("run.csv");
    std::fs::write(&summary, "pass,worker\n").unwrap();
    let stderr = run(&summary);
    let tiles = dir.path().join("run.tiles.csv");
    assert!(
        stderr.contains(&format!(
            "error: {}: no such file: the per-tile times that `render --stats {}` writes",
            tiles.display(),
            summary.display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A resumed render's statistics number its passes from the frame's first (here the third of
/// three): schedule-sim replays them all the same, and `--replay-corrections` names the pass
/// by its number in the frame.
#[test]
fn schedule_sim_replays_a_resumed_render() {
    let (w, h) = (48, 32);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let config = two_threads(24);
    let factory = || MockFactory::new(MockRenderer::new(w, 1));
    let film = render_frame(
        &scene,
        &room_settings(w, h, 2, 1),
        &config,
        &factory(),
        true,
    )
    .unwrap()
    .film;
    let frame = gasworks::sched::render_frame_until(
        &scene,
        &room_settings(w, h, 3, 1),
        &config,
        &factory(),
        true,
        gasworks::sched::FrameControl {
            stop: &std::sync::atomic::AtomicU8::new(0),
            resume: Some(gasworks::sched::Resume { film, spp_done: 2 }),
            ..gasworks::sched::FrameControl::default()
        },
    )
    .unwrap();
    assert_eq!((frame.report.first_pass, frame.report.passes.len()), (2, 1));
    let dir = tempfile::tempdir().unwrap();
    let stats = dir.path().join("resumed.csv");
    write_stats(&frame.report, &stats).unwrap();
    let rows = read_tiles(&dir.path().join("resumed.tiles.csv")).unwrap();
    assert!(rows.iter().all(|r| r.pass == 2));
    for (options, says) in [
        (&["--workers", "1,2"][..], "1 pass,"),
        (&["--replay-corrections"][..], "pass 3: 24 tiles"),
    ] {
        let stdout = schedule_sim(&stats, options);
        assert!(
            stdout.contains(says),
            "{options:?}: no {says:?} in:\n{stdout}"
        );
    }
}
