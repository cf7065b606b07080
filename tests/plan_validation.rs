//! Properties of the build plan and the GAS grouping, checked on random inputs against
//! brute-force oracles, and plans broken on purpose that the validator must reject.

use gasworks::optix::plan::{
    group_gases, make_plan, validate, Assign, BuildNeed, BuildPlan, IssueOrder, MergeOptions,
    PlanError, PlanOptions, ScratchMode, ACCEL_BUFFER_ALIGNMENT,
};
use proptest::prelude::*;

fn align(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// The O(n^2) oracle: does any pair of builds that can run at once share a byte? (An empty
/// range holds no byte, wherever it points.)
fn brute_force_conflict(p: &BuildPlan) -> bool {
    let shares =
        |a: (u64, u64), b: (u64, u64)| a.1 > 0 && b.1 > 0 && a.0 < b.0 + b.1 && b.0 < a.0 + a.1;
    for i in 0..p.builds.len() {
        for j in i + 1..p.builds.len() {
            let (a, b) = (&p.builds[i], &p.builds[j]);
            if shares(
                (a.output.offset, a.output.len),
                (b.output.offset, b.output.len),
            ) {
                return true;
            }
            let concurrent = match p.scratch_mode {
                ScratchMode::Shared => true,
                ScratchMode::PerStream => a.stream != b.stream,
            };
            if concurrent
                && shares(
                    (a.scratch.offset, a.scratch.len),
                    (b.scratch.offset, b.scratch.len),
                )
            {
                return true;
            }
        }
    }
    false
}

/// The oracle for everything else validate checks.
fn brute_force_well_formed(p: &BuildPlan) -> bool {
    let mut order = p.issue_order.clone();
    order.sort_unstable();
    order == (0..p.builds.len()).collect::<Vec<_>>()
        && p.builds.iter().all(|b| {
            b.stream < p.streams
                && b.scratch.offset % p.alignment == 0
                && b.output.offset % p.alignment == 0
                && b.scratch.len >= b.need.temp_bytes
                && b.output.len >= b.need.output_bytes
                && b.scratch.offset + b.scratch.len <= p.scratch_bytes
                && b.output.offset + b.output.len <= p.output_bytes
        })
}

fn arb_need() -> impl Strategy<Value = BuildNeed> {
    // Heavy-tailed sizes, zero included: most builds tiny, a few huge.
    let bytes = prop_oneof![
        3 => 0u64..512,
        2 => 0u64..100_000,
        1 => 0u64..50_000_000,
    ];
    (bytes.clone(), bytes, 0u64..2_000_000).prop_map(|(t, o, tris)| BuildNeed {
        temp_bytes: t,
        output_bytes: o,
        triangles: tris,
        groups: vec![0],
    })
}

fn arb_options() -> impl Strategy<Value = PlanOptions> {
    (
        1u32..20,
        prop_oneof![Just(Assign::RoundRobin), Just(Assign::Lpt)],
        prop_oneof![Just(ScratchMode::Shared), Just(ScratchMode::PerStream)],
        0u32..9,
        prop_oneof![Just(0u64), 0u64..100_000],
        prop_oneof![
            4 => Just(IssueOrder::Assignment),
            1 => Just(IssueOrder::BuildOrder),
            1 => Just(IssueOrder::LargestFirst)
        ],
    )
        .prop_map(|(streams, assign, scratch, log_align, weight, issue)| {
            let mut o = PlanOptions::new(streams, assign, scratch);
            o.alignment = 1 << log_align;
            o.lpt_build_weight = weight;
            o.issue = issue;
            o
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Every plan made is valid by the validator and by the brute-force oracles, its totals are
    /// exactly what the modes promise, and round-robin/LPT place builds as specified.
    #[test]
    fn made_plans_are_safe_and_tight(
        needs in prop::collection::vec(arb_need(), 0..120),
        o in arb_options(),
    ) {
        let p = make_plan(&needs, &o).unwrap();
        prop_assert_eq!(validate(&p), Ok(()));
        prop_assert!(brute_force_well_formed(&p));
        prop_assert!(!brute_force_conflict(&p));
        prop_assert_eq!(p.builds.len(), needs.len());
        for (b, n) in p.builds.iter().zip(&needs) {
            prop_assert_eq!(&b.need, n);
        }

        let a = o.alignment;
        let out_total: u64 = needs.iter().map(|n| align(n.output_bytes, a)).sum();
        prop_assert_eq!(p.output_bytes, out_total);
        let scratch_total: u64 = match o.scratch {
            ScratchMode::Shared => needs.iter().map(|n| align(n.temp_bytes, a)).sum(),
            ScratchMode::PerStream => (0..o.streams)
                .map(|s| {
                    p.builds
                        .iter()
                        .filter(|b| b.stream == s)
                        .map(|b| align(b.need.temp_bytes, a))
                        .max()
                        .unwrap_or(0)
                })
                .sum(),
        };
        prop_assert_eq!(p.scratch_bytes, scratch_total);

        match o.issue {
            IssueOrder::Assignment => {}
            IssueOrder::BuildOrder => {
                prop_assert_eq!(&p.issue_order, &(0..needs.len()).collect::<Vec<_>>());
            }
            IssueOrder::LargestFirst => {
                for w in p.issue_order.windows(2) {
                    let t = |i: usize| needs[i].triangles;
                    prop_assert!(t(w[0]) > t(w[1]) || (t(w[0]) == t(w[1]) && w[0] < w[1]));
                }
            }
        }
        match o.assign {
            Assign::RoundRobin => {
                if o.issue == IssueOrder::Assignment {
                    prop_assert_eq!(&p.issue_order, &(0..needs.len()).collect::<Vec<_>>());
                }
                for (i, b) in p.builds.iter().enumerate() {
                    prop_assert_eq!(b.stream as usize, i % o.streams as usize);
                }
            }
            Assign::Lpt => {
                // Issued largest load first (in the assignment's own order).
                let load = |i: usize| needs[i].triangles + o.lpt_build_weight;
                if o.issue == IssueOrder::Assignment {
                    for w in p.issue_order.windows(2) {
                        prop_assert!(load(w[0]) >= load(w[1]));
                    }
                }
                // Graham's bound for list scheduling: no stream exceeds the mean load plus
                // the largest single load.
                let mut per_stream = vec![0u64; o.streams as usize];
                for (i, b) in p.builds.iter().enumerate() {
                    per_stream[b.stream as usize] += load(i);
                }
                let total: u64 = per_stream.iter().sum();
                let largest = (0..needs.len()).map(load).max().unwrap_or(0);
                let worst = *per_stream.iter().max().unwrap();
                prop_assert!(worst * o.streams as u64 <= total + largest * o.streams as u64);
            }
        }
    }

    /// The validator agrees with the brute-force oracles on plans corrupted at random: one
    /// offset, length, stream or total moved.
    #[test]
    fn validator_agrees_with_brute_force_on_corrupted_plans(
        needs in prop::collection::vec(arb_need(), 1..40),
        o in arb_options(),
        which in 0usize..6,
        pick in any::<prop::sample::Index>(),
        value in 0u64..200_000,
    ) {
        let mut p = make_plan(&needs, &o).unwrap();
        let i = pick.index(p.builds.len());
        let b = &mut p.builds[i];
        match which {
            0 => b.scratch.offset = value,
            1 => b.output.offset = value,
            2 => b.scratch.len = value,
            3 => b.stream = (value % (o.streams as u64 + 2)) as u32,
            4 => p.scratch_bytes = value,
            _ => p.output_bytes = value,
        }
        let oracle_ok = brute_force_well_formed(&p) && !brute_force_conflict(&p);
        prop_assert_eq!(validate(&p).is_ok(), oracle_ok, "{:?}", validate(&p));
    }

    /// Grouping: every non-empty group in exactly one GAS; merged GASes hold only groups under
    /// the threshold and respect the caps; the SBT record of each (GAS, input) names its group.
    #[test]
    fn grouping_keeps_every_group_and_its_identity(
        tris in prop::collection::vec(prop_oneof![3 => 0u64..20, 1 => 0u64..100_000], 0..300),
        merge_below in prop_oneof![Just(0u64), 1u64..2_000],
        max_triangles in 1u64..5_000,
        max_inputs in 1usize..50,
    ) {
        let o = MergeOptions { merge_below, max_triangles, max_inputs };
        let t = group_gases(&tris, &o);
        let mut count = vec![0usize; tris.len()];
        for (gi, gas) in t.gases.iter().enumerate() {
            prop_assert!(!gas.groups.is_empty());
            prop_assert_eq!(gas.triangles, gas.groups.iter().map(|&g| tris[g as usize]).sum::<u64>());
            if gas.groups.len() > 1 {
                prop_assert!(gas.groups.iter().all(|&g| tris[g as usize] < merge_below));
                prop_assert!(gas.groups.len() <= max_inputs);
                // Closed once it reached the triangle cap: all but its last group fit below it.
                let before_last: u64 = gas.groups[..gas.groups.len() - 1].iter().map(|&g| tris[g as usize]).sum();
                prop_assert!(before_last < max_triangles);
            } else {
                prop_assert_eq!(gas.instance_id(), gas.groups[0]);
            }
            for (input, &g) in gas.groups.iter().enumerate() {
                count[g as usize] += 1;
                prop_assert_eq!(t.record_groups[t.sbt_offsets[gi] as usize + input], g);
                prop_assert_eq!(t.locate(g), Some((gi, input)));
            }
        }
        for (g, &c) in count.iter().enumerate() {
            prop_assert_eq!(c, usize::from(tris[g] > 0), "group {}", g);
        }
        prop_assert_eq!(t.record_groups.len(), t.gases.iter().map(|g| g.groups.len()).sum::<usize>());
        if merge_below == 0 {
            prop_assert!(t.gases.iter().all(|g| g.groups.len() == 1));
        }
    }
}

fn needs3() -> Vec<BuildNeed> {
    (0..3)
        .map(|i| BuildNeed {
            temp_bytes: 1000,
            output_bytes: 500,
            triangles: 10 * (i + 1),
            groups: vec![i as u32],
        })
        .collect()
}

fn plan(scratch: ScratchMode) -> BuildPlan {
    make_plan(&needs3(), &PlanOptions::new(2, Assign::RoundRobin, scratch)).unwrap()
}

#[test]
fn broken_plan_shared_scratch_reused_is_rejected() {
    // The forum thread's crash: two concurrent builds handed the same scratch.
    let mut p = plan(ScratchMode::Shared);
    p.builds[1].scratch = p.builds[0].scratch;
    assert_eq!(
        validate(&p),
        Err(PlanError::Overlap {
            a: 0,
            b: 1,
            what: "scratch"
        })
    );
}

#[test]
fn broken_plan_per_stream_slice_used_by_another_stream_is_rejected() {
    let mut p = plan(ScratchMode::PerStream);
    // Builds 0 and 2 share stream 0's slice: fine. Moving build 2 to stream 1 is not.
    assert_eq!(p.builds[0].scratch, p.builds[2].scratch);
    assert_eq!(validate(&p), Ok(()));
    p.builds[2].stream = 1;
    assert_eq!(
        validate(&p),
        Err(PlanError::Overlap {
            a: 0,
            b: 2,
            what: "scratch"
        })
    );
}

#[test]
fn broken_plan_shared_outputs_are_rejected_even_on_one_stream() {
    let mut p = make_plan(
        &needs3(),
        &PlanOptions::new(1, Assign::RoundRobin, ScratchMode::PerStream),
    )
    .unwrap();
    p.builds[2].output.offset = p.builds[1].output.offset;
    assert_eq!(
        validate(&p),
        Err(PlanError::Overlap {
            a: 1,
            b: 2,
            what: "output"
        })
    );
}

#[test]
fn broken_plan_misaligned_small_out_of_bounds_bad_stream_bad_order() {
    let good = plan(ScratchMode::Shared);
    assert_eq!(good.alignment, ACCEL_BUFFER_ALIGNMENT);

    let mut p = good.clone();
    p.builds[1].output.offset += 8;
    assert!(matches!(
        validate(&p),
        Err(PlanError::Misaligned {
            build: 1,
            what: "output",
            ..
        })
    ));

    let mut p = good.clone();
    p.builds[0].scratch.len = 999;
    assert!(matches!(
        validate(&p),
        Err(PlanError::TooSmall {
            build: 0,
            what: "scratch",
            ..
        })
    ));

    let mut p = good.clone();
    p.scratch_bytes -= ACCEL_BUFFER_ALIGNMENT * 2;
    assert!(matches!(
        validate(&p),
        Err(PlanError::OutOfBounds {
            what: "scratch",
            ..
        })
    ));

    let mut p = good.clone();
    p.builds[2].stream = 2;
    assert!(matches!(
        validate(&p),
        Err(PlanError::StreamOutOfRange { build: 2, .. })
    ));

    let mut p = good.clone();
    p.issue_order = vec![0, 1, 1];
    assert!(matches!(validate(&p), Err(PlanError::BadIssueOrder { .. })));

    let mut p = good.clone();
    p.builds[0].scratch.offset = u64::MAX - 127;
    assert_eq!(validate(&p), Err(PlanError::Overflow));

    let mut p = good;
    p.streams = 0;
    assert_eq!(validate(&p), Err(PlanError::NoStreams));
}
