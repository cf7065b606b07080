//! The statistical comparison of renders (`gasworks::render::compare`), which the GPU tests use
//! to compare the OptiX backend with the CPU, checked here on the CPU alone, so that it is
//! known to work before a GPU ever runs it: renders of one estimator pass it, whether they
//! replay the same random numbers (same seed, a scene perturbed by float rounding so that
//! some paths diverge, as the GPU's do) or not (another seed); a 1% bias injected into one of
//! them is flagged.

mod cpu_common;

use cpu_common::*;
use gasworks::render::compare::{compare, CompareOptions};
use gasworks::render::RenderSettings;

/// Paired renders (same seed) of the Cornell-like box, one of them moved by a small offset so
/// that they differ by float rounding as a GPU's does: the paired tests pass, and resolve a 1%
/// bias (asserted), which injected into one render they flag; renders with another seed pass
/// them too.
#[test]
fn paired_renders_pass_and_a_one_percent_bias_is_flagged() {
    let scene = cornell_like();
    let s = cornell_settings(64, 64, 64, 3, 1);
    let a = cpu_stats(&scene, &s);
    let (moved, ms) = shifted(&scene, &s);
    let b = cpu_stats(&moved, &ms);
    let o = CompareOptions {
        paired: true,
        ..CompareOptions::default()
    };
    let c = compare(&a, &b, &o);
    eprintln!("same seed, shifted scene:\n{}", c.summary());
    assert!(c.passed(), "{}", c.summary());
    let paired = c.paired.as_ref().unwrap();
    assert!(paired.detectable_bias < 0.01, "{}", paired.summary);
    assert!(c.chi_square.detectable_bias < 0.01, "{}", c.summary());
    // The renders are not the same bits: float rounding differs nearly everywhere (and now
    // and then a path takes another way), which the tolerance absorbs.
    let differ = (0..a.pixel_count())
        .filter(|&p| a.mean(p) != b.mean(p))
        .count();
    assert!(differ > a.pixel_count() / 2, "only {differ} pixels differ");
    // The paired tests are valid for renders that share nothing, too: another seed passes.
    let other = cpu_stats(&scene, &RenderSettings { seed: 2, ..s });
    let c = compare(&a, &other, &o);
    eprintln!("paired tests, another seed:\n{}", c.summary());
    assert!(c.passed(), "{}", c.summary());

    let c = compare(&a, &b.scaled(1.01), &o);
    eprintln!("same seed, shifted scene, 1% bias:\n{}", c.summary());
    assert!(!c.paired.as_ref().unwrap().passed, "{}", c.summary());
    assert!(!c.chi_square.passed, "{}", c.summary());
}

/// Independent renders (two seeds) of a low-variance scene: the global mean and the
/// chi-square tests pass, the global mean resolves 1% (asserted), and a 1% bias injected into
/// one render fails it.
#[test]
fn independent_renders_pass_and_a_one_percent_bias_is_flagged() {
    let scene = spheres_under_a_sky();
    let a = cpu_stats(&scene, &sky_settings(48, 64, 1));
    let b = cpu_stats(&scene, &sky_settings(48, 64, 2));
    let o = CompareOptions::default();
    let c = compare(&a, &b, &o);
    eprintln!("two seeds:\n{}", c.summary());
    assert!(c.passed(), "{}", c.summary());
    assert!(c.global_mean.detectable_bias < 0.01, "{}", c.summary());
    let c = compare(&a, &b.scaled(1.01), &o);
    eprintln!("two seeds, 1% bias:\n{}", c.summary());
    assert!(!c.global_mean.passed, "{}", c.summary());
}
