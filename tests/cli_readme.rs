//! Every `gasworks ...` command line of the README and of the user guide (`docs/guide/`), and
//! of the fenced blocks in the other `docs/` pages, is checked: each parses against the real
//! clap definition, and each that can run here runs on a small scene and succeeds.
//!
//! What counts as a command line:
//! - in fenced code blocks: lines starting with `gasworks `, `cargo run ... -- ` (the rest is
//!   gasworks' arguments), or a wrapper (`nsys profile ...`, `mpirun ...`) followed by
//!   `gasworks ...`; backslash continuations are joined and `# comments` dropped;
//! - in the prose of the README and of the guide: inline code spans starting with `gasworks `
//!   (one that is only `gasworks SUBCOMMAND` names a subcommand, which must exist).
//!
//! The usage notation is understood: `[...]` is optional (each line is tried with all optional
//! parts and with none), `a|b|c` and `[x | y]` are alternatives (every alternative is tried at
//! least once), `...`, a trailing `...` and a trailing `,...` mean "more of the same". Placeholders in capitals are
//! substituted ([`placeholder`]): `SCENE.obj` is a generated Cornell box, other capitalised
//! file names (`OUT.png`, `IMAGE.exr`) become lower-case names in the test's folder (an input
//! image that no earlier line wrote is a small render copied there first, and so are the
//! statistics of a small render for a `schedule-sim` of a CSV no earlier line wrote), value placeholders
//! (`N`, `X,Y,Z`, `DEG`...) get values that suit their flag. An unknown placeholder fails the
//! test with the line: add it to [`placeholder`].
//!
//! Lines that need a GPU (`--backend optix`, `--devices gpu...`, `build-bench`) or a stopped
//! render (`--resume`, `info` or `preview` of a resume file) and wrapped lines (`nsys`, `mpirun`) are only parsed. Lines that run do so with `--spp 1` (4 with `--noise-threshold`, which needs three passes), a 32x32
//! image (unless they have `--pixelbounds`), `--repeat 1` and small generated scenes, so
//! that the whole README runs in seconds; see [`quick`].

mod cli_support;

use cli_support::gasworks_in;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use gasworks::cli::Cli;

/// Where a command line came from, for messages.
#[derive(Clone, Debug)]
struct Source {
    file: String,
    line: usize,
    text: String,
}

/// A command line as written: its gasworks arguments (still in usage notation) and whether it
/// came wrapped in another command.
#[derive(Clone, Debug)]
struct Found {
    source: Source,
    args: Vec<String>,
    wrapped: bool,
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Splits a shell line into words (double and single quotes group; no expansions).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    words.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Drops a `# comment` (a `#` at a word start, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut prev_space = true;
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') if prev_space => return &line[..i],
            _ => {}
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// The gasworks arguments of one shell line, if it is a gasworks command line.
fn command_of(line: &str) -> Option<(Vec<String>, bool)> {
    let words = shell_words(strip_comment(line));
    let first = words.first()?;
    if first == "gasworks" {
        return Some((words[1..].to_vec(), false));
    }
    if first == "cargo" && words.get(1).map(String::as_str) == Some("run") {
        let dashes = words.iter().position(|w| w == "--")?;
        return Some((words[dashes + 1..].to_vec(), false));
    }
    // A wrapper (nsys, mpirun, time...): the first word that is the gasworks binary.
    let at = words
        .iter()
        .position(|w| w == "gasworks" || w.ends_with("/gasworks"))?;
    Some((words[at + 1..].to_vec(), true))
}

/// The command lines of a Markdown file: fenced blocks, and inline spans when `inline`.
fn extract(file: &Path, inline: bool) -> Vec<Found> {
    let text = std::fs::read_to_string(file).unwrap();
    let name = file
        .strip_prefix(repo())
        .unwrap_or(file)
        .display()
        .to_string();
    let mut found = Vec::new();
    let mut in_fence = false;
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        if raw.trim_start().starts_with("```") {
            in_fence = !in_fence;
            pending = None;
            continue;
        }
        if in_fence {
            let (start, mut joined) = pending.take().unwrap_or((line_no, String::new()));
            let body = strip_comment(raw).trim_end();
            let continued = body.ends_with('\\');
            joined.push_str(body.trim_end_matches('\\'));
            joined.push(' ');
            if continued {
                pending = Some((start, joined));
                continue;
            }
            if let Some((args, wrapped)) = command_of(&joined) {
                found.push(Found {
                    source: Source {
                        file: name.clone(),
                        line: start,
                        text: joined.trim().to_string(),
                    },
                    args,
                    wrapped,
                });
            }
        } else if inline {
            for span in raw.split('`').skip(1).step_by(2) {
                if let Some(rest) = span.strip_prefix("gasworks ") {
                    // `gasworks merge` in a sentence names a subcommand: it must exist.
                    if let [sub] = shell_words(rest).as_slice() {
                        assert!(
                            Cli::command().find_subcommand(sub).is_some(),
                            "{name}:{line_no}: `{span}` names no gasworks subcommand"
                        );
                        continue;
                    }
                    found.push(Found {
                        source: Source {
                            file: name.clone(),
                            line: line_no,
                            text: span.to_string(),
                        },
                        args: shell_words(rest),
                        wrapped: false,
                    });
                }
            }
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// Usage notation: [optional], a|b, [x | y], ",..."

#[derive(Clone, Debug)]
enum Node {
    /// One word; several when it is `a|b|c`.
    Word(Vec<String>),
    /// `[ ... ]`, with its `|`-separated alternatives.
    Optional(Vec<Vec<Node>>),
}

/// Splits brackets and standalone bars off the words.
fn tokens(args: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for w in args {
        // `a b ...`: more of the same.
        if w == "..." {
            continue;
        }
        let mut w = w.as_str();
        while let Some(rest) = w.strip_prefix('[') {
            out.push("[".to_string());
            w = rest;
        }
        let mut closing = 0;
        while let Some(rest) = w.strip_suffix(']') {
            closing += 1;
            w = rest;
        }
        // `[B.exr ...]`: the `...` inside the brackets is the same notation.
        if !w.is_empty() && w != "..." {
            out.push(w.to_string());
        }
        out.extend(std::iter::repeat_n("]".to_string(), closing));
    }
    out
}

fn parse_seq(tokens: &[String], at: &mut usize, src: &Source) -> Vec<Vec<Node>> {
    let mut alternatives = vec![Vec::new()];
    while *at < tokens.len() {
        let t = &tokens[*at];
        *at += 1;
        match t.as_str() {
            "[" => {
                let inner = parse_seq(tokens, at, src);
                alternatives.last_mut().unwrap().push(Node::Optional(inner));
            }
            "]" => return alternatives,
            "|" => alternatives.push(Vec::new()),
            w => {
                // `A,...` and `A...` (one or more): one of them.
                let w = w.strip_suffix(",...").unwrap_or(w);
                let w = w.strip_suffix("...").filter(|w| !w.is_empty()).unwrap_or(w);
                // `a|b|c` is a choice of values; `--flag=a|b` too.
                let alts = match w.split_once('=') {
                    Some((flag, values)) if flag.starts_with("--") => {
                        values.split('|').map(|v| format!("{flag}={v}")).collect()
                    }
                    _ => w.split('|').map(str::to_string).collect(),
                };
                alternatives.last_mut().unwrap().push(Node::Word(alts));
            }
        }
    }
    assert!(
        *at >= tokens.len(),
        "{}:{}: unbalanced brackets in {}",
        src.file,
        src.line,
        src.text
    );
    alternatives
}

/// The most alternatives any choice in `seq` has (how many variants cover them all).
fn widest(seq: &[Node]) -> usize {
    seq.iter()
        .map(|n| match n {
            Node::Word(a) => a.len(),
            Node::Optional(alts) => alts
                .len()
                .max(alts.iter().map(|s| widest(s)).max().unwrap_or(1)),
        })
        .max()
        .unwrap_or(1)
}

/// One concrete argument list: optional parts all in (`with_optional`) or all out, choice `k`
/// (mod its width) at every alternative.
fn variant(seq: &[Node], with_optional: bool, k: usize, out: &mut Vec<String>) {
    for n in seq {
        match n {
            Node::Word(alts) => out.push(alts[k % alts.len()].clone()),
            Node::Optional(alts) if with_optional => {
                variant(&alts[k % alts.len()], with_optional, k, out)
            }
            Node::Optional(_) => {}
        }
    }
}

/// Every variant of a usage line: the bare one first, then one per choice index with all
/// optional parts; duplicates removed.
fn variants(found: &Found) -> Vec<Vec<String>> {
    let toks = tokens(&found.args);
    let mut at = 0;
    let alts = parse_seq(&toks, &mut at, &found.source);
    assert_eq!(
        alts.len(),
        1,
        "{}:{}: a top-level `|` in {}",
        found.source.file,
        found.source.line,
        found.source.text
    );
    let seq = &alts[0];
    let mut out: Vec<Vec<String>> = Vec::new();
    let mut push = |v: Vec<String>| {
        if !out.contains(&v) {
            out.push(v);
        }
    };
    let mut bare = Vec::new();
    variant(seq, false, 0, &mut bare);
    push(bare);
    for k in 0..widest(seq) {
        let mut v = Vec::new();
        variant(seq, true, k, &mut v);
        push(v);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Placeholders

/// The value of a capitalised placeholder word, given the flag before it; `None` for an
/// unknown one. Extend here when the README gains a new placeholder.
fn placeholder(word: &str, flag: &str) -> Option<String> {
    // File names: SCENE.obj is the generated scene; OUT.png, IMAGE.exr... lower-cased.
    if word == "SCENE.obj" {
        return Some("scene/cornell.obj".into());
    }
    // The name before the first dot: `FRAME.exr.gasworks-resume` is `frame.exr.gasworks-resume`.
    if let Some((stem, ext)) = word.split_once('.') {
        if !stem.is_empty()
            && stem
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            return Some(format!("{}.{ext}", stem.to_lowercase()));
        }
    }
    let v = match (word, flag) {
        // The generated scene is the Cornell box, in millimetres.
        ("X,Y,Z", "--eye") => "278,273,-800",
        ("X,Y,Z", "--look-at") => "278,273,0",
        ("X,Y,Z", "--up") => "0,1,0",
        ("X,Y,Z", "--focus-on") => "278,273,300",
        ("DEG", "--fov") => "39.3",
        ("DEG", "--env-rotate") => "30",
        ("K", "--env-scale") => "2",
        ("P", "--env-share") => "0.25",
        ("EV", "--exposure") => "1",
        ("R", "--lens-radius") => "20",
        ("D", "--focus-distance") => "1100",
        ("R,G,B", _) => "0.5,0.5,0.5",
        ("T", "--threads") => "2",
        ("T", "--noise-threshold") => "0.05",
        ("S", "--seed") => "7",
        ("K", "--pass-spp") => "1",
        ("N", "--shelves") => "1",
        ("N", "--tiles") => "4",
        ("N", "--merge-below") => "100",
        ("N", _) => "2",
        ("DIR", _) => "dir",
        ("DURATION", "--checkpoint-every") => "10m",
        ("DURATION", "--time-limit") => "1h",
        ("FILE", "--resume") => "out.png.gasworks-resume",
        // On the 16-pixel grid, which --noise-threshold asks of a crop.
        ("X0,X1,Y0,Y1", "--pixelbounds") => "0,16,16,32",
        _ => return None,
    };
    Some(v.to_string())
}

fn is_placeholder(word: &str) -> bool {
    let core = word.split(['.', ',', ':']).next().unwrap_or("");
    !core.is_empty()
        && core.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && core
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Substitutes the placeholders of one argument list (also inside `--flag=VALUE` and in
/// values like `cpu:N`).
fn substitute(args: &[String], src: &Source) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let flag = if i > 0 { args[i - 1].as_str() } else { "" };
        let (prefix, word, flag) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (format!("{f}="), v.to_string(), f),
            _ => (String::new(), a.clone(), flag),
        };
        let value = if is_placeholder(&word) {
            placeholder(&word, flag).unwrap_or_else(|| {
                panic!(
                    "{}:{}: unknown placeholder {word:?} (after {flag:?}) in `{}`: add it to placeholder() in tests/cli_readme.rs",
                    src.file, src.line, src.text
                )
            })
        } else if let Some((head, tail)) = word.split_once(':') {
            // cpu:N and the like.
            if is_placeholder(tail) {
                format!("{head}:{}", placeholder(tail, flag).unwrap())
            } else {
                word
            }
        } else {
            word
        };
        out.push(format!("{prefix}{value}"));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Running

fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            args.get(i + 1).map(String::as_str)
        } else {
            a.strip_prefix(flag).and_then(|r| r.strip_prefix('='))
        }
    })
}

fn has_flag(args: &[String], flag: &str) -> bool {
    args.iter()
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

/// Why a line cannot run here (it is parsed only), or `None`.
fn needs_what(args: &[String]) -> Option<&'static str> {
    if args.first().map(String::as_str) == Some("build-bench") {
        return Some("a GPU (build-bench)");
    }
    if value_of(args, "--backend") == Some("optix") {
        return Some("a GPU (--backend optix)");
    }
    if value_of(args, "--devices").is_some_and(|d| d.contains("gpu")) {
        return Some("a GPU (--devices gpu...)");
    }
    if has_flag(args, "--resume") {
        // Run end to end by tests/cli_interrupt.rs (a render stopped with SIGINT, resumed).
        return Some("a stopped render's resume file (--resume)");
    }
    if args.first().map(String::as_str) == Some("info")
        && args.iter().any(|a| a.ends_with(".gasworks-resume"))
    {
        // Run end to end by tests/cli_info.rs (on a render stopped at its time limit).
        return Some("a stopped render's resume file (info)");
    }
    if args.first().map(String::as_str) == Some("preview") {
        // Run end to end by tests/cli_interrupt.rs (on renders stopped by a signal and by
        // their time limit, whole frames and crops).
        return Some("a stopped render's resume file (preview)");
    }
    None
}

/// The arguments a line runs with: flags that keep the run short (`--spp 1`, a 32x32 image,
/// `--repeat 1`, a small generated scene) replace the line's values, or are added, where the
/// line's subcommand takes them. The line was parsed as written first; what it shows of
/// costs (`[--spp 64]`) is an example, not what the test needs to spend. A line with
/// `--pixelbounds` keeps its image size, which its window depends on.
fn quick(args: &[String]) -> Vec<String> {
    let sub = args.first().map(String::as_str).unwrap_or("");
    let cmd = Cli::command();
    let Some(subcommand) = cmd.find_subcommand(sub) else {
        return args.to_vec();
    };
    let takes = |flag: &str| {
        subcommand
            .get_arguments()
            .any(|a| a.get_long() == Some(flag.trim_start_matches("--")))
    };
    // Adaptive sampling decides between passes: at least three (of one sample each).
    let spp = if has_flag(args, "--noise-threshold") {
        "4"
    } else {
        "1"
    };
    let mut wanted: Vec<(&str, &str)> = vec![("--spp", spp), ("--repeat", "1")];
    if !has_flag(args, "--pixelbounds") {
        wanted.push(("--width", "32"));
        wanted.push(("--height", "32"));
    }
    if sub == "gen" {
        // Only what the preset takes: the others refuse these flags.
        match args.get(1).map(String::as_str) {
            Some("sponza-like") => {
                wanted.push(("--groups", "40"));
                wanted.push(("--triangles", "4000"));
            }
            Some("toystore") => wanted.push(("--shelves", "1")),
            _ => {}
        }
    }
    let mut out = args.to_vec();
    for (flag, value) in wanted {
        if !takes(flag) {
            continue;
        }
        let eq = format!("{flag}=");
        match out.iter().position(|a| a == flag || a.starts_with(&eq)) {
            Some(i) if out[i] == flag && i + 1 < out.len() => out[i + 1] = value.to_string(),
            Some(i) => out[i] = format!("{eq}{value}"),
            None => out.extend([flag.to_string(), value.to_string()]),
        }
    }
    out
}

/// Input images a line names that no earlier line wrote get a small render to read (an EXR
/// with its --aov layers beside it, for `denoise`); a `schedule-sim` of statistics that no
/// earlier line wrote gets a small render's (`--stats`: the CSV, its tiles and its cost map).
fn provide_images(args: &[String], dir: &Path, stock: &Path) {
    if args.first().map(String::as_str) == Some("schedule-sim") {
        for a in &args[1..] {
            let Some(stem) = a.strip_suffix(".csv") else {
                continue;
            };
            if !a.starts_with('-') && !dir.join(a).exists() {
                for part in ["", ".tiles", ".costmap"] {
                    std::fs::copy(
                        stock.with_file_name(format!("stats{part}.csv")),
                        dir.join(format!("{stem}{part}.csv")),
                    )
                    .unwrap();
                }
            }
        }
    }
    let output = value_of(args, "-o").or(value_of(args, "--output"));
    for a in args {
        let is_image = a.ends_with(".exr") || a.ends_with(".png");
        if is_image && Some(a.as_str()) != output && !dir.join(a).exists() {
            let ext = if a.ends_with(".exr") { "exr" } else { "png" };
            std::fs::copy(stock.with_extension(ext), dir.join(a)).unwrap();
            if ext == "exr" {
                let stem = a.trim_end_matches(".exr");
                for layer in ["albedo", "normal"] {
                    std::fs::copy(
                        stock.with_extension(format!("{layer}.exr")),
                        dir.join(format!("{stem}.{layer}.exr")),
                    )
                    .unwrap();
                }
            }
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Parses (and where possible runs) every command line of the files, in order, in one
/// folder, so that a line can read what an earlier one wrote (`--stats stats.csv`, then
/// `schedule-sim stats.csv`).
fn check_files(files: &[(PathBuf, bool)]) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The repository's relative paths (assets/cornell/cornell.obj) and SCENE.obj.
    copy_dir(&repo().join("assets"), &d.join("assets"));
    let setup = |args: &[&str]| {
        let out = gasworks_in(d, args);
        assert!(
            out.status.success(),
            "setup {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    setup(&["gen", "cornell", "-o", "scene", "-q"]);
    let stock = d.join(".stock/render");
    std::fs::create_dir_all(d.join(".stock")).unwrap();
    for ext in ["exr", "png"] {
        let out = format!(".stock/render.{ext}");
        setup(&[
            "render",
            "scene/cornell.obj",
            "-o",
            &out,
            "--width",
            "8",
            "--height",
            "8",
            "--spp",
            "1",
            "--aov",
            "albedo,normal",
            "-q",
        ]);
    }
    // Statistics for a `schedule-sim` line that no earlier line wrote any for.
    setup(&[
        "render",
        "scene/cornell.obj",
        "-o",
        ".stock/stats-render.exr",
        "--width",
        "32",
        "--height",
        "32",
        "--spp",
        "1",
        "--stats",
        ".stock/stats.csv",
        "-q",
    ]);

    let mut checked = 0;
    let mut failures = Vec::new();
    for (file, inline) in files {
        for found in extract(file, *inline) {
            let src = &found.source;
            for v in variants(&found) {
                let args = substitute(&v, src);
                let mut argv = vec!["gasworks".to_string()];
                argv.extend(args.iter().cloned());
                checked += 1;
                match Cli::try_parse_from(&argv) {
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            clap::error::ErrorKind::DisplayHelp
                                | clap::error::ErrorKind::DisplayVersion
                        ) => {}
                    Err(e) => {
                        failures.push(format!(
                            "{}:{}: `{}`\n  as {:?}\n  does not parse: {}",
                            src.file,
                            src.line,
                            src.text,
                            args,
                            e.render()
                        ));
                        continue;
                    }
                }
                if found.wrapped || needs_what(&args).is_some() {
                    continue;
                }
                let run = quick(&args);
                provide_images(&run, d, &stock);
                let started = std::time::Instant::now();
                let out = gasworks_in(d, &run);
                eprintln!(
                    "{}:{}: gasworks {} ({:.1} s)",
                    src.file,
                    src.line,
                    run.join(" "),
                    started.elapsed().as_secs_f64()
                );
                let stderr = String::from_utf8_lossy(&out.stderr);
                if !out.status.success() || stderr.contains("panicked") {
                    failures.push(format!(
                        "{}:{}: `{}`\n  ran as gasworks {}\n  exit {:?}: {stderr}",
                        src.file,
                        src.line,
                        src.text,
                        run.join(" "),
                        out.status.code()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} README/docs command line(s) fail:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    checked
}

/// The Markdown files of a folder, sorted.
fn markdown_in(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_readme_and_docs_command_line_parses_and_the_runnable_ones_run() {
    // The README and the user guide it was split into: fenced blocks and prose. The other
    // pages of docs/: fenced blocks.
    let mut files = vec![(repo().join("README.md"), true)];
    let guide = markdown_in(&repo().join("docs/guide"));
    assert!(!guide.is_empty(), "no docs/guide/*.md");
    files.extend(guide.into_iter().map(|p| (p, true)));
    files.extend(
        markdown_in(&repo().join("docs"))
            .into_iter()
            .map(|p| (p, false)),
    );
    let checked = check_files(&files);
    // The README and the guide have a hundred command lines and more; finding few means the
    // extraction broke.
    assert!(checked >= 60, "only {checked} command lines found");
}

/// The checker itself: it catches a flag that does not exist (the README once said
/// `schedule-sim --tiles-csv`), and understands the notation.
#[test]
fn the_checker_catches_bad_lines_and_reads_usage_notation() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("x.md");
    std::fs::write(
        &md,
        "Replay with `gasworks schedule-sim --tiles-csv stats.tiles.csv`.\n",
    )
    .unwrap();
    let result = std::panic::catch_unwind(|| check_files(&[(md.clone(), true)]));
    let message = *result
        .expect_err("a flag that does not exist must fail")
        .downcast::<String>()
        .unwrap();
    assert!(
        message.contains("x.md:1") && message.contains("--tiles-csv"),
        "{message}"
    );

    let found = Found {
        source: Source {
            file: "t".into(),
            line: 1,
            text: "t".into(),
        },
        args: shell_words(
            "render SCENE.obj -o OUT.png [--backend auto|cpu|optix] [--devices cpu|cpu:N,...] [--fast-build | --flags both]",
        ),
        wrapped: false,
    };
    let v: Vec<String> = variants(&found)
        .iter()
        .map(|v| substitute(v, &found.source).join(" "))
        .collect();
    assert_eq!(
        v,
        [
            "render scene/cornell.obj -o out.png",
            "render scene/cornell.obj -o out.png --backend auto --devices cpu --fast-build",
            "render scene/cornell.obj -o out.png --backend cpu --devices cpu:2 --flags both",
            "render scene/cornell.obj -o out.png --backend optix --devices cpu --fast-build",
        ]
    );
    assert_eq!(
        command_of("mpirun -n 4 gasworks render a.obj -o b.png # note"),
        Some((shell_words("render a.obj -o b.png"), true))
    );
    assert_eq!(
        command_of("cargo run --release -- render a.obj -o b.png"),
        Some((shell_words("render a.obj -o b.png"), false))
    );
    assert_eq!(command_of("cargo test"), None);
    let _ = Cli::try_parse_from(["gasworks", "--help"]);
}
