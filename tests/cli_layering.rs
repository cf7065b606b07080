//! Layering: the command line sits on top. No module under `src/` except `src/cli/` and
//! `src/main.rs` may name the `cli` module (the OptiX layer, the backends and the scheduler
//! take plain option structs; the CLI converts its arguments into them).
//!
//! The check reads every source file with its comments and string literals removed and looks
//! for the identifier `cli` used as a path segment (`crate::cli`, `super::cli`,
//! `gasworks::cli`, `use crate::{cli, ...}`, `cli::Foo`): a plain text search would be fooled
//! by comments and strings, and miss grouped imports.

use std::path::{Path, PathBuf};

/// `src` with comments, string and char literals blanked out (newlines kept, so positions
/// still give line numbers). Handles nested block comments, raw strings and lifetimes.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // r"..." or r#"..."#: count the hashes.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|h| b.get(j + 1 + h) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            out.extend(b[i..j.min(b.len())].iter().map(|&c| blank(c)));
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): a literal closes with
            // a quote within a few characters.
            let close = (i + 2..(i + 12).min(b.len())).find(|&j| b[j] == '\'');
            let is_char = match close {
                Some(j) => b[i + 1] == '\\' || j == i + 2,
                None => false,
            };
            if let (true, Some(j)) = (is_char, close) {
                out.extend(b[i..=j].iter().map(|&c| blank(c)));
                i = j + 1;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Lines (1-based) where the identifier `cli` is used as a path segment.
fn cli_paths(code: &str) -> Vec<usize> {
    let chars: Vec<char> = code.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut hits = Vec::new();
    let mut line = 1;
    for i in 0..chars.len() {
        if chars[i] == '\n' {
            line += 1;
        }
        let starts = i == 0 || !ident(chars[i - 1]);
        if !(starts && chars[i..].starts_with(&['c', 'l', 'i'])) {
            continue;
        }
        if chars.get(i + 3).is_some_and(|&c| ident(c)) {
            continue;
        }
        // What comes before and after, spaces skipped.
        let before: String = chars[..i]
            .iter()
            .rev()
            .skip_while(|c| c.is_whitespace())
            .take(2)
            .collect();
        let after: String = chars[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take(2)
            .collect();
        let in_path = before == "::" || after == "::";
        let in_group = before.starts_with('{') || before.starts_with(',');
        // Inside a `use` statement: a `use` keyword before, and no `;` since.
        let in_use = || {
            let prefix: String = chars[..i].iter().collect();
            prefix.match_indices("use").any(|(p, _)| {
                let word_start = p == 0 || !prefix[..p].ends_with(|c: char| ident(c));
                let word_end = prefix[p + 3..].starts_with(char::is_whitespace);
                word_start && word_end && !prefix[p..].contains(';')
            })
        };
        if in_path || (in_group && in_use()) {
            hits.push(line);
        }
    }
    hits
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn only_the_cli_and_main_name_the_cli_module() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 20, "found only {} source files", files.len());
    let allowed = |p: &Path| {
        let rel = p.strip_prefix(&src).unwrap();
        rel.starts_with("cli") || rel == Path::new("main.rs")
    };
    let mut offences = Vec::new();
    for f in files.iter().filter(|f| !allowed(f)) {
        let text = std::fs::read_to_string(f).unwrap();
        for line in cli_paths(&code_only(&text)) {
            offences.push(format!(
                "{}:{line}: {}",
                f.display(),
                text.lines().nth(line - 1).unwrap_or("").trim()
            ));
        }
    }
    assert!(
        offences.is_empty(),
        "modules outside src/cli/ and src/main.rs use the command line; give them a plain \
         options struct and convert in src/cli/ instead:\n{}",
        offences.join("\n")
    );
}

/// The scanner finds every way of naming the module, and nothing in comments or strings.
#[test]
fn the_scanner_sees_code_not_comments() {
    let code = r##"
use crate::cli::AccelArgs;
use crate::{cli, render};
use crate::{sched::{a, b}, cli as c};
fn f(a: &super::cli::X) -> gasworks::cli::Y { cli::z() }
// crate::cli in a comment
/* nested /* crate::cli */ still comment */
let s = "crate::cli in a string";
let r = r#"crate::cli "raw""#;
let c = '"'; let l: &'static str = "x";
let client = cli_args; let x = my.cli;
"##;
    let hits = cli_paths(&code_only(code));
    assert_eq!(hits, vec![2, 3, 4, 5, 5, 5]);
}
