//! What `gasworks build-bench` reports, as pure functions: the statistics of repeated timings,
//! the CSV rows, and an SVG plot of build time against stream count. No GPU is involved here,
//! so all of it is tested on made-up rows.

use std::fmt::Write as _;
use std::io;

use serde::{Deserialize, Serialize};

/// Minimum, median and maximum of a set of timings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Stats {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Stats {
    /// `None` for no samples. NaNs are ignored; the median of an even count is the mean of the
    /// two middle samples.
    pub fn of(samples: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        };
        Some(Stats {
            min: v[0],
            median,
            max: v[n - 1],
        })
    }
}

/// What a row times: the per-group batch, or the whole scene as one GAS (the reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BuildKind {
    Batch,
    SingleGas,
}

/// One configuration's result: one CSV row (read back by `build-bench --isolate` from its
/// children).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRow {
    pub scene: String,
    pub build: BuildKind,
    /// Groups of the scene.
    pub groups: u64,
    /// GASes built (fewer than the groups when merging; 1 for the single GAS).
    pub gases: u64,
    pub triangles: u64,
    pub streams: u32,
    /// `fast-trace` or `fast-build`.
    pub flags: String,
    /// `round-robin` or `lpt`.
    pub assign: String,
    /// `shared` or `per-stream`.
    pub scratch_mode: String,
    pub merge_below: u32,
    /// Triangles each build adds to its LPT load (0 unless `assign` is `lpt`).
    pub lpt_build_weight: u64,
    /// The enqueue order: `assignment` (the assignment's own), `build` or `largest-first`.
    pub issue_order: String,
    /// Host threads that enqueued the builds (1 for the single GAS).
    pub enqueue_threads: u32,
    /// The OptiX contexts the builds went through: `shared` or `per-stream`.
    pub build_contexts: String,
    pub repeats: u32,
    pub min_ms: f64,
    pub median_ms: f64,
    pub max_ms: f64,
    /// Median host wall time of the enqueue call alone (plan check, fork, every
    /// `optixAccelBuild`, join), which the GPU-timed span contains: where it comes close to
    /// `median_ms`, the host's enqueue, not the GPU, bounds the batch.
    pub enqueue_median_ms: f64,
    pub scratch_bytes: u64,
    pub output_bytes: u64,
    /// Empty unless the run compacted.
    pub compacted_bytes: Option<u64>,
    pub device: String,
    pub driver: String,
    pub git_commit: String,
}

impl BenchRow {
    /// The configuration apart from the stream count: the identity of a line in the plot.
    pub fn series_label(&self) -> String {
        match self.build {
            BuildKind::SingleGas => format!("single GAS, {}", self.flags),
            BuildKind::Batch => {
                let mut s = format!(
                    "{}, {}, {} scratch",
                    self.flags, self.assign, self.scratch_mode
                );
                if self.lpt_build_weight > 0 {
                    let _ = write!(s, " weight {}", self.lpt_build_weight);
                }
                if !self.issue_order.is_empty() && self.issue_order != "assignment" {
                    let _ = write!(s, ", issued {}", self.issue_order);
                }
                if self.build_contexts == "per-stream" {
                    s.push_str(", a context per stream");
                }
                if self.enqueue_threads > 1 {
                    let _ = write!(s, ", {} enqueue threads", self.enqueue_threads);
                }
                if self.merge_below > 0 {
                    let _ = write!(s, ", merge<{}", self.merge_below);
                }
                if self.compacted_bytes.is_some() {
                    s.push_str(", compact");
                }
                s
            }
        }
    }
}

/// Which of a figure's repeats a [`CpuBenchRow`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Statistic {
    Min,
    Median,
    Max,
}

impl Statistic {
    pub const ALL: [Statistic; 3] = [Statistic::Min, Statistic::Median, Statistic::Max];

    pub fn of(self, s: &Stats) -> f64 {
        match self {
            Statistic::Min => s.min,
            Statistic::Median => s.median,
            Statistic::Max => s.max,
        }
    }
}

/// One CSV row of `gasworks cpu-bench`: one scene, one thread count, one statistic of the
/// repeats, taken figure by figure (the `min` row holds the smallest load rate, the smallest
/// build rate and the smallest render rate, which need not come from the same repeat).
/// A figure that was not measured is empty.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuBenchRow {
    pub scene: String,
    pub groups: u64,
    pub triangles: u64,
    /// Bytes of the OBJ and the MTL files it names (0 for a built-in scene).
    pub file_bytes: u64,
    pub threads: usize,
    pub statistic: Statistic,
    /// Loading (parse + scene build) in MB/s of file size (10^6 bytes), with `--load`.
    pub load_mb_per_s: Option<f64>,
    /// BVH build, both levels, in million triangles per second (wall clock).
    pub build_mtri_per_s: f64,
    /// Path tracing in million samples per second (wall clock).
    pub render_msamples_per_s: Option<f64>,
    /// Path tracing in million samples per second of process CPU time (all threads): what a
    /// core does when it gets to run, which other load on the machine does not deflate.
    pub render_msamples_per_cpu_s: Option<f64>,
    /// Path tracing in million rays per second (wall clock): closest-hit rays (camera and
    /// bounces) and shadow rays.
    pub render_mrays_per_s: Option<f64>,
    pub width: u32,
    pub height: u32,
    pub spp: u32,
    pub max_depth: u32,
    pub repeats: u32,
    pub git_commit: String,
}

/// Writes the rows as CSV with a header line.
pub fn write_csv<W: io::Write, R: Serialize>(out: W, rows: &[R]) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}

fn xml_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// Distinct colours for the series, cycled.
const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
];

/// The plot's geometry, in SVG user units.
const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 560.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 330.0; // room for the legend
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// A log-scale axis mapping `[lo, hi]` onto `[a, b]` pixels.
struct LogAxis {
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl LogAxis {
    fn new(lo: f64, hi: f64, a: f64, b: f64) -> LogAxis {
        // Whole powers of two (x) or ten (y) are chosen by the caller; guard a flat range.
        let (lo, hi) = if hi > lo {
            (lo, hi)
        } else {
            (lo / 2.0, lo * 2.0)
        };
        LogAxis { lo, hi, a, b }
    }

    fn map(&self, v: f64) -> f64 {
        let t = (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln());
        self.a + t * (self.b - self.a)
    }
}

/// Decade-ish ticks for a log axis: 1, 2, 5 times powers of ten within [lo, hi].
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut t = Vec::new();
    let mut p = 10f64.powf(lo.log10().floor());
    while p <= hi * 1.0001 {
        for m in [1.0, 2.0, 5.0] {
            let v = p * m;
            if v >= lo * 0.9999 && v <= hi * 1.0001 {
                t.push(v);
            }
        }
        p *= 10.0;
    }
    t
}

fn fmt_ms(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else if v >= 0.1 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Plots median build time (log scale) against streams (log2 scale): one line per batch
/// configuration, with min-max whiskers, and each single-GAS reference as a dashed horizontal
/// line. Returns the SVG document.
pub fn plot_svg(rows: &[BenchRow], title: &str) -> String {
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="25" text-anchor="middle" font-size="15">{}</text>"#,
        (LEFT + WIDTH - RIGHT) / 2.0,
        xml_escape(title)
    );

    let usable: Vec<&BenchRow> = rows
        .iter()
        .filter(|r| r.median_ms > 0.0 && r.min_ms > 0.0 && r.max_ms.is_finite() && r.streams > 0)
        .collect();
    if usable.is_empty() {
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">no timings to plot</text>"#,
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        svg.push_str("</svg>\n");
        return svg;
    }

    let (x, y) = plot_axes(&usable);
    write_frame(&mut svg, &x, &y);

    // Series in order of first appearance.
    let mut labels: Vec<String> = Vec::new();
    for r in &usable {
        let l = r.series_label();
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    for (i, label) in labels.iter().enumerate() {
        let mut pts: Vec<&&BenchRow> = usable
            .iter()
            .filter(|r| &r.series_label() == label)
            .collect();
        pts.sort_by_key(|r| r.streams);
        write_series(&mut svg, i, label, &pts, &x, &y);
    }
    svg.push_str("</svg>\n");
    svg
}

/// Axes: x over the batch stream counts, y over every min/max and the references.
fn plot_axes(usable: &[&BenchRow]) -> (LogAxis, LogAxis) {
    let max_streams = usable
        .iter()
        .filter(|r| r.build == BuildKind::Batch)
        .map(|r| r.streams)
        .max()
        .unwrap_or(1)
        .max(2);
    let x = LogAxis::new(
        1.0,
        max_streams.next_power_of_two() as f64,
        LEFT,
        WIDTH - RIGHT,
    );
    let y_lo = usable
        .iter()
        .map(|r| r.min_ms)
        .fold(f64::INFINITY, f64::min);
    let y_hi = usable.iter().map(|r| r.max_ms).fold(0.0, f64::max);
    let y_lo = 10f64.powf(y_lo.log10().floor());
    let y_hi = 10f64.powf(y_hi.log10().ceil());
    let y = LogAxis::new(y_lo, y_hi, HEIGHT - BOTTOM, TOP);
    (x, y)
}

/// Frame, grid and ticks, then the axis titles.
fn write_frame(svg: &mut String, x: &LogAxis, y: &LogAxis) {
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP);
    let _ = writeln!(
        svg,
        r##"<rect x="{x0}" y="{y1}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        x1 - x0,
        y0 - y1
    );
    let mut s = 1u32;
    while (s as f64) <= x.hi {
        let px = x.map(s as f64);
        let _ = writeln!(
            svg,
            r##"<line x1="{px:.1}" y1="{y0}" x2="{px:.1}" y2="{y1}" stroke="#ddd"/><text x="{px:.1}" y="{}" text-anchor="middle">{s}</text>"##,
            y0 + 18.0
        );
        s *= 2;
    }
    for t in log_ticks(y.lo, y.hi) {
        let py = y.map(t);
        let _ = writeln!(
            svg,
            r##"<line x1="{x0}" y1="{py:.1}" x2="{x1}" y2="{py:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 6.0,
            py + 4.0,
            fmt_ms(t)
        );
    }
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" text-anchor="middle">CUDA streams</text>"#,
        (x0 + x1) / 2.0,
        HEIGHT - 20.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">build time, ms (median, min-max bars)</text>"#,
        (y0 + y1) / 2.0,
        (y0 + y1) / 2.0
    );
}

/// One series, the `i`th: a single-GAS reference as a dashed line across the plot, a batch
/// configuration as a line through its medians with min-max whiskers; then its legend entry.
/// `pts` are its rows by stream count.
fn write_series(
    svg: &mut String,
    i: usize,
    label: &str,
    pts: &[&&BenchRow],
    x: &LogAxis,
    y: &LogAxis,
) {
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let colour = PALETTE[i % PALETTE.len()];
    let _ = writeln!(
        svg,
        r#"<g class="series" data-label="{}">"#,
        xml_escape(label)
    );
    if pts[0].build == BuildKind::SingleGas {
        let py = y.map(pts[0].median_ms);
        let _ = writeln!(
            svg,
            r#"<line class="reference" x1="{x0}" y1="{py:.1}" x2="{x1}" y2="{py:.1}" stroke="{colour}" stroke-width="2" stroke-dasharray="6 4"/>"#
        );
    } else {
        let coords: Vec<String> = pts
            .iter()
            .map(|r| format!("{:.1},{:.1}", x.map(r.streams as f64), y.map(r.median_ms)))
            .collect();
        let _ = writeln!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
            coords.join(" ")
        );
        for r in pts {
            let px = x.map(r.streams as f64);
            let _ = writeln!(
                svg,
                r#"<line x1="{px:.1}" y1="{:.1}" x2="{px:.1}" y2="{:.1}" stroke="{colour}"/><circle cx="{px:.1}" cy="{:.1}" r="3.5" fill="{colour}"><title>{} streams: median {:.3} ms (min {:.3}, max {:.3})</title></circle>"#,
                y.map(r.min_ms),
                y.map(r.max_ms),
                y.map(r.median_ms),
                r.streams,
                r.median_ms,
                r.min_ms,
                r.max_ms
            );
        }
    }
    // Legend entry.
    let ly = TOP + 10.0 + 20.0 * i as f64;
    let lx = WIDTH - RIGHT + 20.0;
    let dash = if pts[0].build == BuildKind::SingleGas {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    let _ = writeln!(
        svg,
        r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{colour}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
        lx + 24.0,
        lx + 30.0,
        ly + 4.0,
        xml_escape(label)
    );
    svg.push_str("</g>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Test data, made up: not measurements.
    fn fake_row(build: BuildKind, streams: u32, flags: &str, median: f64) -> BenchRow {
        BenchRow {
            scene: "fake & <scene>".into(),
            build,
            groups: 10,
            gases: if build == BuildKind::Batch { 10 } else { 1 },
            triangles: 1000,
            streams,
            flags: flags.into(),
            assign: "round-robin".into(),
            scratch_mode: "shared".into(),
            merge_below: 0,
            lpt_build_weight: 0,
            issue_order: "assignment".into(),
            enqueue_threads: 1,
            build_contexts: "shared".into(),
            repeats: 3,
            min_ms: median * 0.9,
            median_ms: median,
            max_ms: median * 1.2,
            enqueue_median_ms: median * 0.25,
            scratch_bytes: 1 << 20,
            output_bytes: 1 << 21,
            compacted_bytes: None,
            device: "Fake GPU".into(),
            driver: "0.0".into(),
            git_commit: "abc123".into(),
        }
    }

    #[test]
    fn stats_min_median_max() {
        assert_eq!(Stats::of(&[]), None);
        assert_eq!(
            Stats::of(&[3.0, 1.0, 2.0]),
            Some(Stats {
                min: 1.0,
                median: 2.0,
                max: 3.0
            })
        );
        assert_eq!(Stats::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
        assert_eq!(
            Stats::of(&[f64::NAN, 5.0]),
            Some(Stats {
                min: 5.0,
                median: 5.0,
                max: 5.0
            })
        );
    }

    #[test]
    fn csv_has_the_documented_columns_in_order() {
        let mut r = fake_row(BuildKind::Batch, 4, "fast-trace", 11.5);
        r.compacted_bytes = Some(777);
        let rows = vec![r, fake_row(BuildKind::SingleGas, 1, "fast-trace", 0.5)];
        let mut out = Vec::new();
        write_csv(&mut out, &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "scene,build,groups,gases,triangles,streams,flags,assign,scratch_mode,merge_below,lpt_build_weight,issue_order,enqueue_threads,build_contexts,repeats,min_ms,median_ms,max_ms,enqueue_median_ms,scratch_bytes,output_bytes,compacted_bytes,device,driver,git_commit"
        );
        assert_eq!(
            lines[1],
            "fake & <scene>,batch,10,10,1000,4,fast-trace,round-robin,shared,0,0,assignment,1,shared,3,10.35,11.5,13.799999999999999,2.875,1048576,2097152,777,Fake GPU,0.0,abc123"
        );
        assert!(lines[2].starts_with("fake & <scene>,single-gas,10,1,"));
        // No compaction: an empty field.
        assert!(lines[2].contains(",2097152,,Fake GPU,"));
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn svg_has_a_line_per_configuration_and_the_reference() {
        let mut rows = Vec::new();
        for (s, ms) in [(1, 60.0), (2, 30.0), (4, 12.0), (8, 7.0), (16, 7.0)] {
            rows.push(fake_row(BuildKind::Batch, s, "fast-trace", ms));
            rows.push(fake_row(BuildKind::Batch, s, "fast-build", ms / 2.0));
        }
        rows.push(fake_row(BuildKind::SingleGas, 1, "fast-trace", 0.7));
        let svg = plot_svg(&rows, "fake & title");
        assert!(svg.starts_with("<svg "));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches(r#"class="reference""#).count(), 1);
        assert_eq!(svg.matches("<circle").count(), 10);
        // Text is escaped.
        assert!(svg.contains("fake &amp; title"));
        assert!(!svg.contains("fake & title"));
        // Tags balance (a cheap well-formedness check).
        for tag in ["g", "svg", "text", "circle", "title"] {
            let open =
                svg.matches(&format!("<{tag} ")).count() + svg.matches(&format!("<{tag}>")).count();
            assert_eq!(open, svg.matches(&format!("</{tag}>")).count(), "<{tag}>");
        }
    }

    #[test]
    fn svg_points_follow_log_axes() {
        // Doubling the streams moves a point by the same x step; a 10x time ratio by the same
        // y step: log scales on both axes.
        let rows: Vec<BenchRow> = [(1, 100.0), (2, 10.0), (4, 1.0)]
            .into_iter()
            .map(|(s, ms)| fake_row(BuildKind::Batch, s, "fast-trace", ms))
            .collect();
        let svg = plot_svg(&rows, "t");
        let key = r#"<polyline points=""#;
        let start = svg.find(key).unwrap() + key.len();
        let pts: Vec<(f64, f64)> = svg[start..svg[start..].find('"').unwrap() + start]
            .split(' ')
            .map(|p| {
                let (a, b) = p.split_once(',').unwrap();
                (a.parse().unwrap(), b.parse().unwrap())
            })
            .collect();
        assert_eq!(pts.len(), 3);
        let dx = (pts[1].0 - pts[0].0, pts[2].0 - pts[1].0);
        let dy = (pts[1].1 - pts[0].1, pts[2].1 - pts[1].1);
        assert!((dx.0 - dx.1).abs() < 0.2 && dx.0 > 0.0);
        assert!((dy.0 - dy.1).abs() < 0.2 && dy.0 > 0.0); // y grows downwards: faster is lower
        for (px, py) in pts {
            assert!((LEFT..=WIDTH - RIGHT).contains(&px));
            assert!((TOP..=HEIGHT - BOTTOM).contains(&py));
        }
    }

    #[test]
    fn svg_without_timings_says_so() {
        let svg = plot_svg(&[], "t");
        assert!(svg.contains("no timings to plot"));
    }

    #[test]
    fn series_labels_separate_configurations() {
        let a = fake_row(BuildKind::Batch, 1, "fast-trace", 1.0);
        let mut b = a.clone();
        b.merge_below = 64;
        let mut c = a.clone();
        c.compacted_bytes = Some(1);
        let d = fake_row(BuildKind::SingleGas, 1, "fast-trace", 1.0);
        let mut w = a.clone();
        w.assign = "lpt".into();
        let mut w2 = w.clone();
        w2.lpt_build_weight = 2000;
        let mut w3 = w2.clone();
        w3.issue_order = "build".into();
        let mut t = a.clone();
        t.enqueue_threads = 4;
        let labels = [a, b, c, d, w, w2, w3, t].map(|r| r.series_label());
        for i in 0..labels.len() {
            for j in i + 1..labels.len() {
                assert_ne!(labels[i], labels[j]);
            }
        }
        let mut e = fake_row(BuildKind::Batch, 8, "fast-trace", 1.0);
        e.median_ms = 5.0;
        assert_eq!(e.series_label(), labels[0]);
    }
}
