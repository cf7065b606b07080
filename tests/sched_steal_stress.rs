//! Stealing under stress: many workers, random delays, tiny tiles. Nothing is lost and
//! nothing is done twice, both in a real threaded render and on the bare deques.

mod sched_support;

use std::sync::Mutex;

use gasworks::scene::MaterialKind;
use gasworks::sched::policy::{initial_deques, StealRng, WorkQueues};
use gasworks::sched::{render_frame, DeviceSpec, SchedConfig, Strategy};
use gasworks::splitmix::mix64;
use sched_support::{room, room_settings, MockFactory, MockRenderer};

#[test]
fn many_workers_with_random_delays_render_each_tile_once() {
    let (w, h, spp) = (64, 48, 2);
    let scene = room(MaterialKind::Mirror, MaterialKind::Diffuse);
    let settings = room_settings(w, h, spp, 5);
    for strategy in Strategy::ALL {
        let factory = MockFactory::new(MockRenderer::new(w, 5).with_sleep(400));
        let config = SchedConfig {
            strategy,
            tiles: Some(256),
            devices: vec![DeviceSpec::Cpu { workers: Some(32) }],
            ..SchedConfig::default()
        };
        let frame = render_frame(&scene, &settings, &config, &factory, true).unwrap();
        let mut calls: Vec<_> = factory.all_calls().into_iter().map(|(t, _)| t).collect();
        let mut planned = frame.report.passes[0].tiles.clone();
        calls.sort();
        planned.sort();
        assert_eq!(calls, planned, "{strategy:?}");
        let records = &frame.report.passes[0].records;
        assert!(records.iter().enumerate().all(|(task, r)| r.task == task));
        // Steal counts agree with the records.
        let stolen = records.iter().filter(|r| r.stolen_from.is_some()).count();
        assert_eq!(stolen, frame.report.passes[0].steals());
        assert!(records.iter().all(|r| r.stolen_from != Some(r.worker)));
    }
}

#[test]
fn bare_deques_hand_out_every_task_once_under_contention() {
    for round in 0..20u64 {
        let tasks = 500 + (mix64(round) % 500) as usize;
        let workers = 2 + (mix64(round ^ 7) % 30) as usize;
        let costs: Vec<f64> = (0..tasks)
            .map(|i| (mix64(i as u64 ^ round) % 100) as f64)
            .collect();
        let weights: Vec<f64> = (0..workers).map(|w| 1.0 + (w % 3) as f64).collect();
        let queues = WorkQueues::new(initial_deques(Strategy::Sorted, &costs, &weights), true);
        let taken = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for w in 0..workers {
                let (queues, taken) = (&queues, &taken);
                s.spawn(move || {
                    let mut rng = StealRng::new(round, w, 0);
                    let mut mine = Vec::new();
                    while let Some(t) = queues.next(w, &mut rng) {
                        mine.push(t.task);
                        // A little random work so that workers interleave.
                        if mix64(t.task as u64) % 4 == 0 {
                            std::thread::yield_now();
                        }
                    }
                    taken.lock().unwrap().extend(mine);
                });
            }
        });
        let mut taken = taken.into_inner().unwrap();
        taken.sort();
        assert_eq!(taken, (0..tasks).collect::<Vec<_>>(), "round {round}");
    }
}
