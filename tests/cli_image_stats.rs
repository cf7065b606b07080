//! `gasworks image-stats` comparing two renders: the mean luminance difference and its
//! standard error over the pixels, against a brute-force computation of the same figures.

mod cli_support;

use cli_support::gasworks_command;
use std::path::Path;

/// Writes a linear-radiance EXR of `width` x `height` pixels.
fn write_exr(path: &Path, width: u32, height: u32, pixels: &[[f32; 3]]) {
    let flat: Vec<f32> = pixels.iter().flatten().copied().collect();
    image::Rgb32FImage::from_raw(width, height, flat)
        .unwrap()
        .save(path)
        .unwrap();
}

fn image_stats_json(images: &[&Path]) -> serde_json::Value {
    let out = gasworks_command()
        .arg("image-stats")
        .args(images)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn luminance(p: [f32; 3]) -> f64 {
    0.2126 * f64::from(p[0]) + 0.7152 * f64::from(p[1]) + 0.0722 * f64::from(p[2])
}

/// A deterministic noisy image: each pixel `base` plus noise of amplitude `noise` per channel.
fn noisy(n: usize, seed: u64, base: f32, noise: f32) -> Vec<[f32; 3]> {
    let mut state = seed;
    let mut next = move || {
        // SplitMix64: uniform in [0, 1).
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n)
        .map(|_| [(); 3].map(|_| base + noise * (next() - 0.5)))
        .collect()
}

#[test]
fn the_mean_luminance_difference_and_its_standard_error_match_brute_force() {
    let dir = tempfile::tempdir().unwrap();
    let (w, h) = (64u32, 48u32);
    let n = (w * h) as usize;
    let reference = noisy(n, 1, 0.5, 0.4);
    // Same scene, other noise: no bias. Then a biased one (2% brighter).
    let unbiased = noisy(n, 2, 0.5, 0.4);
    let biased: Vec<[f32; 3]> = noisy(n, 3, 0.5, 0.4)
        .iter()
        .map(|p| p.map(|c| c * 1.02))
        .collect();
    let paths = ["ref.exr", "unbiased.exr", "biased.exr"].map(|f| dir.path().join(f));
    for (path, pixels) in paths.iter().zip([&reference, &unbiased, &biased]) {
        write_exr(path, w, h, pixels);
    }
    let v = image_stats_json(&paths.each_ref().map(|p| p.as_path()));
    assert_eq!(v[0]["mean_luminance_difference"], serde_json::Value::Null);
    let mut multiples = Vec::new();
    for (k, other) in [(1, &unbiased), (2, &biased)] {
        let d: Vec<f64> = reference
            .iter()
            .zip(other.iter())
            .map(|(&a, &b)| luminance(b) - luminance(a))
            .collect();
        let mean = d.iter().sum::<f64>() / n as f64;
        let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let se = (var / n as f64).sqrt();
        let got_mean = v[k]["mean_luminance_difference"].as_f64().unwrap();
        let got_se = v[k]["mean_luminance_difference_standard_error"]
            .as_f64()
            .unwrap();
        assert!(
            (got_mean - mean).abs() <= 1e-9 * mean.abs().max(1e-6),
            "{got_mean} vs {mean}"
        );
        assert!((got_se - se).abs() <= 1e-6 * se, "{got_se} vs {se}");
        multiples.push(mean.abs() / se);
    }
    // Uniform noise of 0.4 per channel: a standard error of about 0.0022 for 3072 pixels, and
    // the 2% bias (0.01) about 4.5 of them (this noise gave 2.34 and 5.84).
    assert!(multiples[0] < 4.0 && multiples[1] > 3.0, "{multiples:?}");

    // The text output says it in one line scripts read (scripts/gpu-session.sh).
    let out = gasworks_command()
        .arg("image-stats")
        .args([&paths[0], &paths[2]])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("mean luminance difference"))
        .unwrap_or_else(|| panic!("{text}"));
    let figure: f64 = line
        .rsplit(": ")
        .next()
        .and_then(|tail| tail.strip_suffix(" standard errors"))
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        (figure - multiples[1]).abs() < 0.01,
        "{line} vs {}",
        multiples[1]
    );
}

#[test]
fn equal_luminances_have_no_standard_error() {
    let dir = tempfile::tempdir().unwrap();
    let pixels = noisy(16, 7, 0.3, 0.2);
    let (a, b) = (dir.path().join("a.exr"), dir.path().join("b.exr"));
    write_exr(&a, 4, 4, &pixels);
    write_exr(&b, 4, 4, &pixels);
    let v = image_stats_json(&[&a, &b]);
    assert_eq!(v[1]["pixels_differing_from_first"], 0);
    assert_eq!(v[1]["mean_luminance_difference"], 0.0);
    assert_eq!(
        v[1]["mean_luminance_difference_standard_error"],
        serde_json::Value::Null
    );
}

/// Renders whose keys differ say on which items (`another render: seed 0 -> seed 1`; JSON
/// `render_differences_from_first`); the same render twice, none; an image without a render
/// key (not written by gasworks) is not compared by key.
#[test]
fn renders_of_other_settings_say_which() {
    let dir = tempfile::tempdir().unwrap();
    let cornell = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/cornell/cornell.obj");
    let render = |name: &str, seed: &str| {
        let out = dir.path().join(name);
        let o = gasworks_command()
            .arg("render")
            .arg(&cornell)
            .arg("-o")
            .arg(&out)
            .args(["--width", "16", "--height", "16", "--spp", "2", "-q"])
            .args(["--backend", "cpu", "--seed", seed])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    };
    let (a, again, b) = (
        render("a.exr", "0"),
        render("again.exr", "0"),
        render("b.exr", "1"),
    );
    let plain = dir.path().join("plain.exr");
    write_exr(&plain, 16, 16, &noisy(256, 1, 0.5, 0.1));
    let json = image_stats_json(&[&a, &again, &b, &plain]);
    assert!(json[0]["render_differences_from_first"].is_null(), "{json}");
    assert_eq!(
        json[1]["render_differences_from_first"],
        serde_json::json!([])
    );
    assert_eq!(
        json[2]["render_differences_from_first"],
        serde_json::json!([["seed 0", "seed 1"]])
    );
    assert!(json[3]["render_differences_from_first"].is_null(), "{json}");
    let text = gasworks_command()
        .arg("image-stats")
        .args([&a, &again, &b])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert_eq!(stdout.matches("another render: ").count(), 1, "{stdout}");
    assert!(
        stdout.contains("another render: seed 0 -> seed 1\n"),
        "{stdout}"
    );
}
