//! Parsing one line-aligned chunk of OBJ text, independently of every other chunk.
//!
//! The loader cuts the file into chunks that end at line ends and parses them in parallel.
//! Two things a line needs from outside its chunk are known before any chunk is parsed, from
//! a cheap counting pass ([`count`]) over the chunks before it: its line number, and how many
//! `v`, `vt` and `vn` elements precede it (what a face index, absolute or negative, is
//! resolved and checked against). So every line is checked here exactly as a sequential scan
//! would check it, and each chunk reports its first error with the file's true line number.
//!
//! What needs the whole file (the `o`/`g` sections, `usemtl`, `mtllib`) is returned as a list
//! of [`Event`]s in file order, for the sequential stitch in [`super::assemble`].
//!
//! Whitespace is ASCII whitespace; numbers are parsed by `fast-float2`, which accepts exactly
//! what Rust's `str::parse::<f32>` accepts (tested below) and rounds the same way.

use std::path::Path;

use glam::{Vec2, Vec3};

use super::LoadError;

/// An attribute index that is absent (`f 1//3` has no texture coordinate).
pub const NONE: u32 = u32::MAX;

/// An attribute index that was given but pointed nowhere, so was dropped (and tallied): absent
/// like [`NONE`], but already warned about.
pub const DROPPED: u32 = u32::MAX - 1;

/// Name given to faces that come before any `o`/`g` line, and to an `o`/`g` with no name.
pub const UNNAMED_GROUP: &str = "unnamed";

/// One corner of a triangle: 0-based indices into the whole file's `v`, `vt` and `vn`
/// elements, [`NONE`] where the face gives none, [`DROPPED`] where it gave a bad one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Corner {
    pub v: u32,
    pub vt: u32,
    pub vn: u32,
}

/// Lines and elements of a stretch of the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub lines: usize,
    pub v: u64,
    pub vt: u64,
    pub vn: u64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.lines += o.lines;
        self.v += o.v;
        self.vt += o.vt;
        self.vn += o.vn;
    }
}

/// How often something was met, and the line of its first occurrence (for warnings that
/// name a line and a count).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Occurrences {
    pub count: usize,
    pub first_line: usize,
}

impl Occurrences {
    pub(super) fn note(&mut self, line: usize) {
        if self.count == 0 {
            self.first_line = line;
        }
        self.count += 1;
    }

    /// Adds the occurrences of a later stretch of the file.
    pub fn merge(&mut self, later: &Occurrences) {
        if later.count > 0 {
            if self.count == 0 {
                self.first_line = later.first_line;
            }
            self.count += later.count;
        }
    }
}

/// What a chunk repaired or ignored; each becomes one warning for the whole file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// `l` statements.
    pub polylines: Occurrences,
    /// `p` statements.
    pub points: Occurrences,
    /// `v x y z r g b` lines (the colour is dropped).
    pub vertex_colours: Occurrences,
    /// Faces with fewer than 3 vertices (skipped).
    pub short_faces: Occurrences,
    /// A face with fewer than 3 vertices on the file's last line, which has no newline
    /// (skipped, and not counted in `short_faces`): the file looks cut short.
    pub truncated_faces: Occurrences,
    /// `usemtl` with no name (the default material is used).
    pub unnamed_materials: Occurrences,
    /// Faces with a normal index that points nowhere (their normals are dropped).
    pub normals_nowhere: Occurrences,
    /// Faces with a texture coordinate index that points nowhere (their UVs are dropped).
    pub uvs_nowhere: Occurrences,
    /// `v` lines with a coordinate that is not finite (after dividing by `w`).
    pub non_finite_positions: Occurrences,
    /// `vn` lines with a component that is not finite (stored as a zero normal).
    pub non_finite_normals: Occurrences,
    /// `vt` lines with a component that is not finite (read as 0).
    pub non_finite_uvs: Occurrences,
    /// Faces that cross or overlap themselves, so no split into triangles is right (kept as
    /// fans; see [`super::polygon`]).
    pub self_intersecting_polygons: Occurrences,
    /// Concave faces with more corners than [`super::polygon::MAX_EAR_CLIPPED_CORNERS`]
    /// (kept as fans).
    pub huge_concave_polygons: Occurrences,
}

impl Tally {
    pub fn merge(&mut self, later: &Tally) {
        self.polylines.merge(&later.polylines);
        self.points.merge(&later.points);
        self.vertex_colours.merge(&later.vertex_colours);
        self.short_faces.merge(&later.short_faces);
        self.truncated_faces.merge(&later.truncated_faces);
        self.unnamed_materials.merge(&later.unnamed_materials);
        self.normals_nowhere.merge(&later.normals_nowhere);
        self.uvs_nowhere.merge(&later.uvs_nowhere);
        self.non_finite_positions.merge(&later.non_finite_positions);
        self.non_finite_normals.merge(&later.non_finite_normals);
        self.non_finite_uvs.merge(&later.non_finite_uvs);
        self.self_intersecting_polygons
            .merge(&later.self_intersecting_polygons);
        self.huge_concave_polygons
            .merge(&later.huge_concave_polygons);
    }
}

/// A statement that the sequential stitch needs, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// `o name` or `g name`: the faces that follow form a new section.
    Section { name: String, line: usize },
    /// `usemtl name`; an empty name stands for the default material.
    UseMaterial { name: String, line: usize },
    /// `mtllib file`.
    Library { name: String, line: usize },
    /// The next `count` triangles of [`ChunkOut::corners`], from faces starting at `line`.
    Triangles { count: usize, line: usize },
    /// `s`: the smoothing group of the faces that follow, 0 for none (`s off`); pushed when it
    /// changes within the chunk.
    Smoothing { group: u32 },
}

/// The result of parsing one chunk.
#[derive(Debug, Default)]
pub struct ChunkOut {
    pub events: Vec<Event>,
    /// Three corners per triangle (faces are fans: corners 0, i, i + 1), in file order, until
    /// [`super::polygon::split_concave`] re-splits the concave faces among [`Self::polygons`].
    pub corners: Vec<Corner>,
    /// Where each face of 4 or more corners went in [`Self::corners`], in file order.
    pub polygons: Vec<Polygon>,
    pub tally: Tally,
    /// The first error of the chunk; parsing stopped there, and every event above comes
    /// from lines before it.
    pub error: Option<LoadError>,
}

/// A face of 4 or more corners, split as a fan into `corners - 2` triangles that start at
/// `first` in [`ChunkOut::corners`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Polygon {
    pub first: usize,
    pub corners: usize,
    /// The face's line, for warnings.
    pub line: usize,
}

/// Smoothing groups at or above this are folded below it: the values above are the vertex
/// keys of faces outside any smoothing group ([`super::assemble`]).
pub const SMOOTHING_GROUPS: u32 = 1 << 31;

/// The smoothing group an `s` statement names: 0 for none (`s off`, `s 0`, a bare `s`), the
/// number otherwise (folded below [`SMOOTHING_GROUPS`]), and 1 for a word that is not a
/// number (`s on`).
fn smoothing_group(word: &[u8]) -> u32 {
    if matches!(word, b"off" | b"") {
        return 0;
    }
    match std::str::from_utf8(word)
        .ok()
        .and_then(|w| w.parse::<u64>().ok())
    {
        Some(n) if n < u64::from(SMOOTHING_GROUPS) => n as u32,
        Some(n) => (n % u64::from(SMOOTHING_GROUPS - 1)) as u32 + 1,
        None => 1,
    }
}

/// Whitespace between words. `\n` never occurs inside a line.
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c')
}

/// Whether a line of the file (without its `\n`) ends in a backslash (before an optional `\r`):
/// then the line after it goes on with it, unless it is a comment. Blocks and chunks are never
/// cut after such a line ([`super::read`]).
#[inline]
pub fn ends_in_backslash(line: &[u8]) -> bool {
    matches!(line, [.., b'\\'] | [.., b'\\', b'\r'])
}

/// The next line of the file in `rest` (without its `\n`), and the bytes it takes.
#[inline]
fn next_physical(rest: &[u8]) -> (&[u8], usize) {
    match memchr::memchr(b'\n', rest) {
        Some(end) => (&rest[..end], end + 1),
        None => (rest, rest.len()),
    }
}

/// Calls `each(line, lines, bytes)` for the lines of a chunk in order, until it returns false:
/// `line` without line ends, `lines` and `bytes` what it spans of the file (line ends
/// included). A chunk that does not end in `\n` (the file's last line) yields its tail as a
/// last line.
///
/// A statement line that ends in a backslash goes on in the next line, as the OBJ format says
/// (Blender reads it so): they are joined, the backslash and line end read as one space. A
/// comment line that ends in a backslash does not continue: a Windows path at the end of a
/// comment must not swallow the vertex on the next line. Chunks without a backslash (nearly
/// all) take a plain loop.
#[inline]
pub fn for_each_line(text: &[u8], mut each: impl FnMut(&[u8], usize, usize) -> bool) {
    let mut rest = text;
    if memchr::memchr(b'\\', text).is_none() {
        while !rest.is_empty() {
            let (line, used) = next_physical(rest);
            rest = &rest[used..];
            if !each(line, 1, used) {
                return;
            }
        }
        return;
    }
    let mut joined = Vec::new();
    while !rest.is_empty() {
        let (first, used) = next_physical(rest);
        rest = &rest[used..];
        if !ends_in_backslash(first) || trim(first).first() == Some(&b'#') {
            if !each(first, 1, used) {
                return;
            }
            continue;
        }
        let (mut lines, mut bytes) = (1, used);
        joined.clear();
        let mut part = first;
        while ends_in_backslash(part) {
            let cut = part.len() - if part.ends_with(b"\r") { 2 } else { 1 };
            joined.extend_from_slice(&part[..cut]);
            joined.push(b' ');
            if rest.is_empty() {
                // The end of the file: the line goes on to nothing.
                part = b"";
                break;
            }
            let (next, used) = next_physical(rest);
            rest = &rest[used..];
            part = next;
            lines += 1;
            bytes += used;
        }
        joined.extend_from_slice(part);
        if !each(&joined, lines, bytes) {
            return;
        }
    }
}

/// The kinds of element lines, as the counting pass and the parser both see them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Element {
    Position,
    TexCoord,
    Normal,
}

/// Whether a line is a `v`, `vt` or `vn` statement (what its keyword is, nothing more), and
/// the text after the keyword.
#[inline]
fn element_of(line: &[u8]) -> Option<(Element, &[u8])> {
    let start = if line.first().is_some_and(|&b| !is_space(b)) {
        0
    } else {
        line.iter().position(|&b| !is_space(b))?
    };
    let word = &line[start..];
    if word.first() != Some(&b'v') {
        return None;
    }
    let ends_at = |i: usize| word.get(i).is_none_or(|&b| is_space(b));
    match word.get(1) {
        None => Some((Element::Position, &word[1..])),
        Some(&b) if is_space(b) => Some((Element::Position, &word[1..])),
        Some(b't') if ends_at(2) => Some((Element::TexCoord, &word[2..])),
        Some(b'n') if ends_at(2) => Some((Element::Normal, &word[2..])),
        _ => None,
    }
}

/// Counts a chunk's lines and its `v`, `vt` and `vn` statements.
pub fn count(text: &[u8]) -> Counts {
    let mut c = Counts::default();
    for_each_line(text, |line, lines, _| {
        c.lines += lines;
        match element_of(line) {
            Some((Element::Position, _)) => c.v += 1,
            Some((Element::TexCoord, _)) => c.vt += 1,
            Some((Element::Normal, _)) => c.vn += 1,
            None => {}
        }
        true
    });
    c
}

/// Splits off the next whitespace-separated word of `rest`.
#[inline]
fn next_word<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let text = *rest;
    let start = skip_spaces(text, 0);
    if start == text.len() {
        *rest = &text[start..];
        return None;
    }
    let mut end = start + 1;
    while end < text.len() && !is_space(text[end]) {
        end += 1;
    }
    *rest = &text[end..];
    Some(&text[start..end])
}

/// The index of the first non-space byte of `text` at or after `at`.
#[inline]
fn skip_spaces(text: &[u8], mut at: usize) -> usize {
    while at < text.len() && is_space(text[at]) {
        at += 1;
    }
    at
}

/// Fast path for well-formed numbers: reads up to `N` numbers that are whole words, and
/// returns them with how many there were and whether the line ends after them. `None` when a
/// word is not a number: the careful path then says why.
#[inline]
fn numbers_fast<const N: usize>(text: &[u8]) -> Option<([f32; N], usize, bool)> {
    let mut values = [0f32; N];
    let mut at = 0;
    for (n, value) in values.iter_mut().enumerate() {
        at = skip_spaces(text, at);
        if at == text.len() {
            return Some((values, n, true));
        }
        let (v, used) = fast_float2::parse_partial::<f32, _>(&text[at..]).ok()?;
        at += used;
        if at < text.len() && !is_space(text[at]) {
            return None;
        }
        *value = v;
    }
    Some((values, N, skip_spaces(text, at) == text.len()))
}

/// Fast path for an integer prefix of a face corner: an optional sign and up to 18 digits
/// (no overflow). `None` sends the word to the careful path.
#[inline]
fn index_prefix(word: &[u8], mut at: usize) -> Option<(i64, usize)> {
    let negative = match word.get(at) {
        Some(b'-') => {
            at += 1;
            true
        }
        Some(b'+') => {
            at += 1;
            false
        }
        _ => false,
    };
    let start = at;
    let mut value: i64 = 0;
    while let Some(&b) = word.get(at) {
        let digit = b.wrapping_sub(b'0');
        if digit > 9 {
            break;
        }
        if at - start == 18 {
            return None;
        }
        value = value * 10 + digit as i64;
        at += 1;
    }
    if at == start {
        return None;
    }
    Some((if negative { -value } else { value }, at))
}

/// The raw indices of a face corner, `v`, `v/vt`, `v//vn` or `v/vt/vn`, when the word is one
/// of these exactly.
#[inline]
fn corner_fast(word: &[u8]) -> Option<(i64, Option<i64>, Option<i64>)> {
    let (v, mut at) = index_prefix(word, 0)?;
    if at == word.len() {
        return Some((v, None, None));
    }
    if word[at] != b'/' {
        return None;
    }
    at += 1;
    let mut vt = None;
    if at < word.len() && word[at] != b'/' {
        let (i, end) = index_prefix(word, at)?;
        vt = Some(i);
        at = end;
    }
    if at == word.len() {
        return Some((v, vt, None));
    }
    if word[at] != b'/' {
        return None;
    }
    at += 1;
    if at == word.len() {
        return Some((v, vt, None));
    }
    let (vn, end) = index_prefix(word, at)?;
    (end == word.len()).then_some((v, vt, Some(vn)))
}

/// `line` up to a `#` that starts a word: a comment after a statement of numbers
/// (`f 1 2 3 # quad`), which several exporters write. A `#` inside a word is kept, as in the
/// MSVC spellings of NaN (`1.#IND`).
#[inline]
fn without_trailing_comment(line: &[u8]) -> &[u8] {
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'#', &line[from..]).map(|i| i + from) {
        if i == 0 || line[i - 1].is_ascii_whitespace() {
            return &line[..i];
        }
        from = i + 1;
    }
    line
}

/// The NaN and infinity spellings of Microsoft's C runtime (`1.#IND`, `-1.#INF00`,
/// `1.#QNAN0`), which exporters built with it write and other OBJ readers accept.
#[cold]
fn msvc_special(word: &[u8]) -> Option<f32> {
    let (negative, rest) = match word.first()? {
        b'-' => (true, &word[1..]),
        b'+' => (false, &word[1..]),
        _ => (false, word),
    };
    let hash = rest.iter().position(|&b| b == b'#')?;
    let (mantissa, special) = (&rest[..hash], &rest[hash + 1..]);
    if mantissa.len() < 2
        || !mantissa.ends_with(b".")
        || !mantissa[..mantissa.len() - 1]
            .iter()
            .all(u8::is_ascii_digit)
    {
        return None;
    }
    let letters = special
        .iter()
        .take_while(|b| b.is_ascii_alphabetic())
        .count();
    if !special[letters..].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = match special[..letters].to_ascii_uppercase().as_slice() {
        b"INF" => f32::INFINITY,
        b"IND" | b"QNAN" | b"SNAN" | b"NAN" => f32::NAN,
        _ => return None,
    };
    Some(if negative { -value } else { value })
}

/// `rest` without the whitespace around it.
fn trim(rest: &[u8]) -> &[u8] {
    let start = rest
        .iter()
        .position(|&b| !is_space(b))
        .unwrap_or(rest.len());
    let end = rest
        .iter()
        .rposition(|&b| !is_space(b))
        .map_or(start, |e| e + 1);
    &rest[start..end.max(start)]
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An OBJ index (`-3`, `12`, `+4`): what `i64::from_str` accepts, without allocating.
#[inline]
fn parse_index(word: &[u8]) -> Option<i64> {
    let (negative, digits) = match word.first()? {
        b'-' => (true, &word[1..]),
        b'+' => (false, &word[1..]),
        _ => (false, word),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for &d in digits {
        let digit = d.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit as i64)?
        } else {
            value.checked_add(digit as i64)?
        };
    }
    Some(value)
}

/// Resolves a 1-based or negative (relative) index against `defined` elements: `None` when
/// it points nowhere.
#[inline]
fn resolve(index: i64, defined: u64) -> Option<u32> {
    let zero_based = if index > 0 {
        let i = index as u64;
        (i <= defined).then(|| i - 1)?
    } else if index < 0 {
        let back = index.unsigned_abs();
        (back <= defined).then(|| defined - back)?
    } else {
        return None;
    };
    // The loader refuses files with DROPPED elements or more, so a valid index is below it.
    u32::try_from(zero_based).ok().filter(|&i| i < DROPPED)
}

/// Where a chunk sits in the file, and where its elements go.
pub struct ChunkInput<'a> {
    pub path: &'a Path,
    pub text: &'a [u8],
    /// 1-based number of the chunk's first line.
    pub first_line: usize,
    /// Elements defined before the chunk.
    pub before: Counts,
    /// This chunk's `v`, `vt` and `vn` values, exactly as many as [`count`] found.
    pub positions: &'a mut [Vec3],
    pub uvs: &'a mut [Vec2],
    pub normals: &'a mut [Vec3],
}

/// The parser of one chunk.
struct ChunkParser<'a> {
    path: &'a Path,
    line: usize,
    /// Elements defined so far in the file (before the chunk plus this chunk's so far).
    defined_v: u64,
    defined_vt: u64,
    defined_vn: u64,
    positions: &'a mut [Vec3],
    uvs: &'a mut [Vec2],
    normals: &'a mut [Vec3],
    /// Elements of this chunk written so far.
    written_v: usize,
    written_vt: usize,
    written_vn: usize,
    out: ChunkOut,
    /// The corners of the face being parsed (kept to reuse its allocation).
    face: Vec<Corner>,
    /// The last `s` of this chunk, or none yet.
    smoothing: Option<u32>,
}

/// What a warning or an error on the file's last line adds when that line has no newline: a
/// file cut short (by a full disk, an interrupted copy or download) ends so, mid-statement.
pub const TRUNCATED_NOTE: &str = "the last line has no newline: the file looks truncated \
     (cut short by a full disk or an interrupted copy?)";

/// Parses one chunk. Never panics on any input: every problem is an error or a tally.
pub fn parse_chunk(input: ChunkInput<'_>) -> ChunkOut {
    let mut p = ChunkParser {
        path: input.path,
        line: input.first_line.saturating_sub(1),
        defined_v: input.before.v,
        defined_vt: input.before.vt,
        defined_vn: input.before.vn,
        positions: input.positions,
        uvs: input.uvs,
        normals: input.normals,
        written_v: 0,
        written_vt: 0,
        written_vn: 0,
        out: ChunkOut::default(),
        face: Vec::with_capacity(8),
        smoothing: None,
    };
    // No text holds a NUL byte: past one, the file is damaged or binary (a first block that
    // holds one is refused whole before parsing).
    let nul = memchr::memchr(0, input.text);
    // Chunks end at line ends, but for the file's last one where the file has no final
    // newline.
    let unterminated = input.text.last().is_some_and(|&b| b != b'\n');
    let mut offset = 0;
    for_each_line(input.text, |line, lines, bytes| {
        // Errors name the first line of a continued statement.
        p.line += 1;
        offset += bytes;
        if nul.is_some_and(|at| at < offset) {
            p.out.error = Some(p.syntax(
                "a NUL byte: the file holds binary data here (is it damaged?)".to_string(),
            ));
            return false;
        }
        let result = if unterminated && offset == input.text.len() {
            p.last_statement(line)
        } else {
            p.statement(line)
        };
        if let Err(error) = result {
            p.out.error = Some(error);
            return false;
        }
        p.line += lines - 1;
        true
    });
    p.out
}

/// `error` with [`TRUNCATED_NOTE`] added to its message (a malformed statement, or an index
/// that a cut made point nowhere; others are kept as they are).
fn truncated(mut error: LoadError) -> LoadError {
    if let LoadError::Syntax { message, .. } | LoadError::IndexOutOfRange { message, .. } =
        &mut error
    {
        message.push_str("; ");
        message.push_str(TRUNCATED_NOTE);
    }
    error
}

impl ChunkParser<'_> {
    fn syntax(&self, message: String) -> LoadError {
        LoadError::Syntax {
            path: self.path.to_path_buf(),
            line: self.line,
            message,
        }
    }

    /// The next number of a `what` statement; any value, finite or not.
    #[inline]
    fn number(&self, word: Option<&[u8]>, what: &str) -> Result<f32, LoadError> {
        let word = word.ok_or_else(|| self.syntax(format!("{what}: missing number")))?;
        fast_float2::parse::<f32, _>(word)
            .ok()
            .or_else(|| msvc_special(word))
            .ok_or_else(|| self.syntax(format!("{what}: {:?} is not a number", text(word))))
    }

    /// The file's last line, which has no newline. Where it does not parse, the file was
    /// likely cut inside it: an error says so, and a face cut to fewer than 3 vertices is
    /// skipped (as any such face) but tallied apart, for a warning that says so too.
    fn last_statement(&mut self, line: &[u8]) -> Result<(), LoadError> {
        let short_before = self.out.tally.short_faces;
        self.statement(line).map_err(truncated)?;
        if self.out.tally.short_faces != short_before {
            self.out.tally.short_faces = short_before;
            self.out.tally.truncated_faces.note(self.line);
        }
        Ok(())
    }

    fn statement(&mut self, line: &[u8]) -> Result<(), LoadError> {
        // A comment after a statement is cut from the statements of numbers (v, vt, vn, f);
        // names (g, o, usemtl, mtllib) keep every character: 3ds Max names its materials
        // "Material #25".
        // Element lines are most of a file: recognised the way the counting pass does, and
        // read by a fast path when they are plain numbers.
        if let Some((element, rest)) = element_of(without_trailing_comment(line)) {
            return self.element(element, rest);
        }
        let mut rest = line;
        let Some(keyword) = next_word(&mut rest) else {
            return Ok(());
        };
        match keyword {
            b"f" => self.face(without_trailing_comment(rest)),
            b"o" | b"g" => {
                self.section(rest);
                Ok(())
            }
            b"usemtl" => {
                self.use_material(rest);
                Ok(())
            }
            b"mtllib" => self.library(rest),
            b"l" => {
                self.out.tally.polylines.note(self.line);
                Ok(())
            }
            b"p" => {
                self.out.tally.points.note(self.line);
                Ok(())
            }
            b"s" => {
                self.smoothing_statement(rest);
                Ok(())
            }
            // Comments, free-form geometry...: nothing gasworks uses.
            _ => Ok(()),
        }
    }

    /// A `v`, `vt` or `vn` line (`rest`: its values, without a trailing comment).
    #[inline]
    fn element(&mut self, element: Element, rest: &[u8]) -> Result<(), LoadError> {
        match element {
            Element::Position => match numbers_fast::<3>(rest) {
                Some((xyz, 3, true)) => {
                    self.store_position(xyz);
                    Ok(())
                }
                _ => self.position(rest),
            },
            Element::TexCoord => match numbers_fast::<2>(rest) {
                // A third value (w) is ignored, whatever it is.
                Some(([u, v], 2, _)) => {
                    self.store_uv(Vec2::new(u, v));
                    Ok(())
                }
                _ => self.texcoord(rest),
            },
            Element::Normal => match numbers_fast::<3>(rest) {
                Some((n, 3, true)) => {
                    self.store_normal(Vec3::from(n));
                    Ok(())
                }
                _ => self.normal(rest),
            },
        }
    }

    /// `o name` or `g name` (a section named [`UNNAMED_GROUP`] without a name).
    fn section(&mut self, rest: &[u8]) {
        let name = trim(rest);
        let name = if name.is_empty() {
            UNNAMED_GROUP.to_string()
        } else {
            text(name)
        };
        self.out.events.push(Event::Section {
            name,
            line: self.line,
        });
    }

    /// `usemtl name` (tallied without a name).
    fn use_material(&mut self, rest: &[u8]) {
        let name = trim(rest);
        if name.is_empty() {
            self.out.tally.unnamed_materials.note(self.line);
        }
        self.out.events.push(Event::UseMaterial {
            name: text(name),
            line: self.line,
        });
    }

    /// `mtllib file` (an error without a file).
    fn library(&mut self, rest: &[u8]) -> Result<(), LoadError> {
        let name = trim(rest);
        if name.is_empty() {
            return Err(self.syntax("mtllib without a file name".into()));
        }
        self.out.events.push(Event::Library {
            name: text(name),
            line: self.line,
        });
        Ok(())
    }

    /// `s group` (an event only where the group changes).
    fn smoothing_statement(&mut self, rest: &[u8]) {
        let group = smoothing_group(trim(without_trailing_comment(rest)));
        if self.smoothing != Some(group) {
            self.smoothing = Some(group);
            self.out.events.push(Event::Smoothing { group });
        }
    }

    /// `v x y z`, `v x y z w` (the position is divided by w) or `v x y z r g b` (the colour
    /// is dropped).
    fn position(&mut self, mut rest: &[u8]) -> Result<(), LoadError> {
        let what = "vertex position (v)";
        let mut xyz = [0f32; 3];
        for c in &mut xyz {
            *c = self.number(next_word(&mut rest), what)?;
        }
        let mut extra: [&[u8]; 3] = [&[]; 3];
        let mut extras = 0;
        while let Some(word) = next_word(&mut rest) {
            if extras < 3 {
                extra[extras] = word;
            }
            extras += 1;
        }
        match extras {
            0 => {}
            1 => {
                let w = self.number(Some(extra[0]), "vertex weight (v ... w)")?;
                if w == 0.0 {
                    return Err(self.syntax("vertex weight w is 0".into()));
                }
                for c in &mut xyz {
                    *c /= w;
                }
            }
            3 => {
                for c in extra {
                    self.number(Some(c), "vertex colour (v x y z r g b)")?;
                }
                self.out.tally.vertex_colours.note(self.line);
            }
            n => {
                return Err(self.syntax(format!(
                    "vertex position (v) has {} values; expected 3, 4 (x y z w) or 6 (x y z r g b)",
                    n + 3
                )))
            }
        }
        self.store_position(xyz);
        Ok(())
    }

    #[inline]
    fn store_position(&mut self, xyz: [f32; 3]) {
        let p = Vec3::from(xyz);
        if !p.is_finite() {
            self.out.tally.non_finite_positions.note(self.line);
        }
        // The counting pass saw this line as a `v`, so the slot exists.
        if let Some(slot) = self.positions.get_mut(self.written_v) {
            *slot = p;
        }
        self.written_v += 1;
        self.defined_v += 1;
    }

    #[inline]
    fn store_uv(&mut self, mut uv: Vec2) {
        if !uv.is_finite() {
            self.out.tally.non_finite_uvs.note(self.line);
            uv = Vec2::select(uv.is_finite_mask(), uv, Vec2::ZERO);
        }
        if let Some(slot) = self.uvs.get_mut(self.written_vt) {
            *slot = uv;
        }
        self.written_vt += 1;
        self.defined_vt += 1;
    }

    #[inline]
    fn store_normal(&mut self, mut normal: Vec3) {
        if !normal.is_finite() {
            // A zero normal: the groups using it fall back to geometric normals.
            self.out.tally.non_finite_normals.note(self.line);
            normal = Vec3::ZERO;
        }
        if let Some(slot) = self.normals.get_mut(self.written_vn) {
            *slot = normal;
        }
        self.written_vn += 1;
        self.defined_vn += 1;
    }

    /// `vt u [v [w]]`: a missing v is 0, as the OBJ format says; w is ignored.
    fn texcoord(&mut self, mut rest: &[u8]) -> Result<(), LoadError> {
        let what = "texture coordinate (vt)";
        let u = self.number(next_word(&mut rest), what)?;
        let v = match next_word(&mut rest) {
            Some(word) => self.number(Some(word), what)?,
            None => 0.0,
        };
        self.store_uv(Vec2::new(u, v));
        Ok(())
    }

    /// `vn x y z`.
    fn normal(&mut self, mut rest: &[u8]) -> Result<(), LoadError> {
        let what = "vertex normal (vn)";
        let mut n = [0f32; 3];
        for c in &mut n {
            *c = self.number(next_word(&mut rest), what)?;
        }
        self.store_normal(Vec3::from(n));
        Ok(())
    }

    /// The raw indices of a face corner that the fast path did not take: the exact error for a
    /// malformed one (or for a vertex index out of range that comes before it).
    #[cold]
    fn corner_careful(&self, word: &[u8]) -> Result<(i64, Option<i64>, Option<i64>), LoadError> {
        let mut parts = word.splitn(4, |&b| b == b'/');
        let v_part = parts.next().unwrap_or_default();
        let vt_part = parts.next();
        let vn_part = parts.next();
        if parts.next().is_some() || v_part.is_empty() {
            return Err(self.syntax(format!(
                "face (f): {:?} is not a vertex reference like 3, 3/1, 3//2 or 3/1/2",
                text(word)
            )));
        }
        let index_of = |part: &[u8], kind: &str| {
            parse_index(part).ok_or_else(|| {
                self.syntax(format!(
                    "face (f): {:?} has {:?} where a {kind} index should be",
                    text(word),
                    text(part)
                ))
            })
        };
        let v = index_of(v_part, "vertex")?;
        // In the order a sequential reader meets them: the vertex's range before the syntax of
        // the other parts.
        if resolve(v, self.defined_v).is_none() {
            return Err(self.index_error(v, "vertex", self.defined_v));
        }
        let optional = |part: Option<&[u8]>, kind: &str| match part.filter(|p| !p.is_empty()) {
            Some(p) => index_of(p, kind).map(Some),
            None => Ok(None),
        };
        let vt = optional(vt_part, "texture coordinate")?;
        let vn = optional(vn_part, "normal")?;
        Ok((v, vt, vn))
    }

    fn index_error(&self, index: i64, kind: &str, defined: u64) -> LoadError {
        let why = if index == 0 {
            "OBJ indices start at 1".to_string()
        } else {
            format!("only {defined} defined before this line")
        };
        LoadError::IndexOutOfRange {
            path: self.path.to_path_buf(),
            line: self.line,
            message: format!("face (f): {kind} index {index} is out of range ({why})"),
        }
    }

    /// `f v1[/vt1[/vn1]] v2... v3...`: vertex indices must point at a vertex defined before
    /// the line; texture and normal indices that point nowhere drop that attribute from the
    /// face, and a face of fewer than 3 vertices is skipped.
    fn face(&mut self, mut rest: &[u8]) -> Result<(), LoadError> {
        let mut face = std::mem::take(&mut self.face);
        face.clear();
        let mut uvs_nowhere = false;
        let mut normals_nowhere = false;
        while let Some(word) = next_word(&mut rest) {
            let (v, vt, vn) = match corner_fast(word) {
                Some(indices) => indices,
                None => match self.corner_careful(word) {
                    Ok(indices) => indices,
                    Err(e) => {
                        self.face = face;
                        return Err(e);
                    }
                },
            };
            let v = match resolve(v, self.defined_v) {
                Some(v) => v,
                None => {
                    self.face = face;
                    return Err(self.index_error(v, "vertex", self.defined_v));
                }
            };
            let mut corner = Corner {
                v,
                vt: NONE,
                vn: NONE,
            };
            if let Some(i) = vt {
                match resolve(i, self.defined_vt) {
                    Some(vt) => corner.vt = vt,
                    None => uvs_nowhere = true,
                }
            }
            if let Some(i) = vn {
                match resolve(i, self.defined_vn) {
                    Some(vn) => corner.vn = vn,
                    None => normals_nowhere = true,
                }
            }
            face.push(corner);
        }
        if face.len() < 3 {
            self.out.tally.short_faces.note(self.line);
            self.face = face;
            return Ok(());
        }
        if uvs_nowhere {
            self.out.tally.uvs_nowhere.note(self.line);
            face.iter_mut().for_each(|c| c.vt = DROPPED);
        }
        if normals_nowhere {
            self.out.tally.normals_nowhere.note(self.line);
            face.iter_mut().for_each(|c| c.vn = DROPPED);
        }
        let triangles = face.len() - 2;
        if face.len() > 3 {
            self.out.polygons.push(Polygon {
                first: self.out.corners.len(),
                corners: face.len(),
                line: self.line,
            });
        }
        self.out.corners.reserve(3 * triangles);
        for i in 1..face.len() - 1 {
            self.out
                .corners
                .extend_from_slice(&[face[0], face[i], face[i + 1]]);
        }
        match self.out.events.last_mut() {
            Some(Event::Triangles { count, .. }) => *count += triangles,
            _ => self.out.events.push(Event::Triangles {
                count: triangles,
                line: self.line,
            }),
        }
        self.face = face;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct Parsed {
        out: ChunkOut,
        positions: Vec<Vec3>,
        uvs: Vec<Vec2>,
        normals: Vec<Vec3>,
    }

    fn parse_with(text: &str, first_line: usize, before: Counts) -> Parsed {
        let c = count(text.as_bytes());
        let mut positions = vec![Vec3::splat(-9.0); c.v as usize];
        let mut uvs = vec![Vec2::splat(-9.0); c.vt as usize];
        let mut normals = vec![Vec3::splat(-9.0); c.vn as usize];
        let out = parse_chunk(ChunkInput {
            path: Path::new("t.obj"),
            text: text.as_bytes(),
            first_line,
            before,
            positions: &mut positions,
            uvs: &mut uvs,
            normals: &mut normals,
        });
        Parsed {
            out,
            positions,
            uvs,
            normals,
        }
    }

    fn parse(text: &str) -> Parsed {
        parse_with(text, 1, Counts::default())
    }

    fn error(text: &str) -> LoadError {
        parse(text).out.error.expect("an error")
    }

    #[test]
    fn counting_sees_what_the_parser_sees() {
        let text =
            "v 1 2 3\n  vt 0 0\nvn 0 0 1\r\nvx 1\nv\t1 1 1\nvtn 1\n# v 1 1 1\nf 1 2 2\nv 0 0 0";
        let c = count(text.as_bytes());
        assert_eq!(
            c,
            Counts {
                lines: 9,
                v: 3,
                vt: 1,
                vn: 1
            }
        );
        let p = parse(text);
        assert!(p.out.error.is_none(), "{:?}", p.out.error);
        assert_eq!(p.positions[2], Vec3::ZERO);
        assert_eq!(p.normals[0], Vec3::Z);
    }

    /// A backslash at the end of a statement line continues it on the next line, as the OBJ
    /// format says (Blender reads it so); comments do not continue; line numbers stay those of
    /// the file.
    #[test]
    fn backslashes_continue_statements_but_not_comments() {
        let text = "v 0 0 0\nv 1 \\\n 0 0\r\nv 1 1 \\\r\n0\r\nv 0 1 0\nf 1 2\\\n3 \\\n \\\n4\n# C:\\models\\\nv 5 5 5\nf 1 2 x\n";
        let c = count(text.as_bytes());
        assert_eq!(c.lines, 13);
        assert_eq!(c.v, 5);
        let p = parse(text);
        assert_eq!(
            p.positions,
            [Vec3::ZERO, Vec3::X, Vec3::ONE, Vec3::Y]
                .map(|p| p.with_z(0.0))
                .into_iter()
                .chain([Vec3::splat(5.0)])
                .collect::<Vec<_>>()
        );
        let c = |v| Corner {
            v,
            vt: NONE,
            vn: NONE,
        };
        assert_eq!(p.out.corners, [c(0), c(1), c(2), c(0), c(2), c(3)]);
        assert_eq!(
            p.out.events,
            [Event::Triangles { count: 2, line: 7 }],
            "the face's first line"
        );
        let e = p.out.error.expect("the bad face");
        assert_eq!(e.line(), Some(13), "{e}");
        // At the end of the text, a continuation continues onto nothing.
        let p = parse("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3 \\");
        assert!(p.out.error.is_none());
        assert_eq!(p.out.corners.len(), 3);
    }

    #[test]
    fn smoothing_groups_are_numbers_with_off_as_none() {
        for (word, group) in [
            ("off", 0),
            ("0", 0),
            ("", 0),
            ("1", 1),
            ("32", 32),
            ("on", 1),
            // Folded below SMOOTHING_GROUPS, never to 0.
            ("4294967296", 3),
        ] {
            assert_eq!(smoothing_group(word.as_bytes()), group, "{word}");
        }
        assert!(smoothing_group(b"99999999999999") < SMOOTHING_GROUPS);
    }

    #[test]
    fn faces_are_fans_with_resolved_indices() {
        let p = parse("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nvn 0 0 1\nf 1//1 2//1 3//1 -1//-1\n");
        let c = |v| Corner { v, vt: NONE, vn: 0 };
        assert_eq!(p.out.corners, [c(0), c(1), c(2), c(0), c(2), c(3)]);
        assert_eq!(p.out.events, [Event::Triangles { count: 2, line: 6 }]);
    }

    #[test]
    fn indices_resolve_against_elements_before_the_chunk() {
        let before = Counts {
            lines: 0,
            v: 10,
            vt: 0,
            vn: 2,
        };
        let p = parse_with("v 0 0 0\nf -1//-2 1//2 10\n", 21, before);
        assert!(p.out.error.is_none());
        let got: Vec<(u32, u32)> = p.out.corners.iter().map(|c| (c.v, c.vn)).collect();
        // A corner without a normal is not a normal that points nowhere: the face keeps its
        // normals (the group decides whether it can use them).
        assert_eq!(got, [(10, 0), (0, 1), (9, NONE)]);
        let e = parse_with("f 12 1 2\n", 21, before).out.error.unwrap();
        assert_eq!(e.line(), Some(21));
        assert!(e.to_string().contains("only 10 defined"), "{e}");
    }

    #[test]
    fn attributes_that_point_nowhere_are_dropped_per_face_and_tallied() {
        let p = parse(
            "v 0 0 0\nv 1 0 0\nv 0 1 0\nvt 0 0\n\
             f 1//1 2//1 3//1\nf 1/1 2/1 3/1\nf 1/2 2/1 3/1\nf 1/1/5 2/1/1 3/1/1\n",
        );
        assert!(p.out.error.is_none());
        assert_eq!(p.out.tally.normals_nowhere.count, 2);
        assert_eq!(p.out.tally.normals_nowhere.first_line, 5);
        assert_eq!(p.out.tally.uvs_nowhere.count, 1);
        assert_eq!(p.out.tally.uvs_nowhere.first_line, 7);
        let vts: Vec<u32> = p.out.corners.iter().map(|c| c.vt).collect();
        let d = DROPPED;
        assert_eq!(vts, [NONE, NONE, NONE, 0, 0, 0, d, d, d, 0, 0, 0]);
        let vns: Vec<u32> = p.out.corners.iter().map(|c| c.vn).collect();
        assert_eq!(vns, [d, d, d, NONE, NONE, NONE, NONE, NONE, NONE, d, d, d]);
    }

    #[test]
    fn short_faces_are_skipped_and_unnamed_usemtl_is_kept_as_an_event() {
        let p = parse("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2\nf\nusemtl\nf 1 2 3\n");
        assert!(p.out.error.is_none());
        assert_eq!(p.out.tally.short_faces.count, 2);
        assert_eq!(p.out.tally.short_faces.first_line, 4);
        assert_eq!(p.out.tally.unnamed_materials.first_line, 6);
        assert_eq!(
            p.out.events,
            [
                Event::UseMaterial {
                    name: String::new(),
                    line: 6
                },
                Event::Triangles { count: 1, line: 7 }
            ]
        );
    }

    /// A last line without a newline that does not parse: the file was likely cut inside it.
    /// The same line with its newline is an ordinary short face or error.
    #[test]
    fn a_last_line_cut_short_is_told_apart() {
        let head = "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";
        let cut = parse(&format!("{head}f 1 2\nf 1 2"));
        assert!(cut.out.error.is_none());
        assert_eq!(cut.out.tally.short_faces.first_line, 5);
        assert_eq!(cut.out.tally.short_faces.count, 1);
        assert_eq!(cut.out.tally.truncated_faces.count, 1);
        assert_eq!(cut.out.tally.truncated_faces.first_line, 6);
        let whole = parse(&format!("{head}f 1 2\n"));
        assert_eq!(whole.out.tally.short_faces.count, 1);
        assert_eq!(whole.out.tally.truncated_faces.count, 0);
        let e = error(&format!("{head}v 1.0 2."));
        assert_eq!(e.line(), Some(5));
        assert!(e.to_string().ends_with(TRUNCATED_NOTE), "{e}");
        assert!(e.to_string().contains("missing number"), "{e}");
        let e = error(&format!("{head}v 1.0 2.\n"));
        assert!(!e.to_string().contains("newline"), "{e}");
        // A last line that parses is not suspected, newline or not.
        let fine = parse(&format!("{head}f 1 2 3/"));
        assert!(fine.out.error.is_none());
        assert_eq!(fine.out.tally, Tally::default());
    }

    #[test]
    fn non_finite_values_are_tallied_not_refused() {
        let p = parse("v 0 0 0\nv nan 0 0\nv 1 1 1 1e-45\nvn 0 inf 0\nvt NaN 0.5\n");
        assert!(p.out.error.is_none());
        assert_eq!(p.out.tally.non_finite_positions.count, 2);
        assert_eq!(p.out.tally.non_finite_positions.first_line, 2);
        assert!(p.positions[1].x.is_nan());
        assert!(p.positions[2].x.is_infinite());
        assert_eq!(p.normals[0], Vec3::ZERO);
        assert_eq!(p.uvs[0], Vec2::new(0.0, 0.5));
        assert_eq!(p.out.tally.non_finite_uvs.first_line, 5);
    }

    #[test]
    fn msvc_nan_and_infinity_spellings_are_numbers() {
        for (word, inf) in [
            ("1.#INF", Some(f32::INFINITY)),
            ("-1.#INF00", Some(f32::NEG_INFINITY)),
            ("1.#IND", None),
            ("-1.#IND00", None),
            ("1.#QNAN0", None),
        ] {
            let v = msvc_special(word.as_bytes()).unwrap_or_else(|| panic!("{word}"));
            match inf {
                Some(i) => assert_eq!(v, i, "{word}"),
                None => assert!(v.is_nan(), "{word}"),
            }
        }
        for word in [
            "#IND", "1#IND", "1.#", "1.#INX", "1.#IND0x", "a.#INF", ".#INF",
        ] {
            assert_eq!(msvc_special(word.as_bytes()), None, "{word}");
        }
        let p = parse("v 1.#IND -1.#IND 1.#INF\n");
        assert!(p.out.error.is_none());
        assert_eq!(p.out.tally.non_finite_positions.count, 1);
    }

    #[test]
    fn weights_divide_and_colours_are_dropped() {
        let p = parse("v 2 4 6 2\nv 1 2 3 0.5 0.5 0.5\nvt 0.25\n");
        assert!(p.out.error.is_none());
        assert_eq!(
            p.positions,
            [Vec3::new(1.0, 2.0, 3.0), Vec3::new(1.0, 2.0, 3.0)]
        );
        assert_eq!(p.uvs[0], Vec2::new(0.25, 0.0));
        assert_eq!(p.out.tally.vertex_colours.count, 1);
    }

    #[test]
    fn errors_name_their_line_and_stop_the_chunk() {
        let e = error("v 0 0 0\nv 0 0 x\nv 1 1 1\n");
        assert_eq!(e.line(), Some(2));
        assert!(e.to_string().contains("\"x\" is not a number"), "{e}");
        let p = parse_with("v 0 0 0\nf 1 2 3\n", 40, Counts::default());
        assert_eq!(p.out.error.unwrap().line(), Some(41));
        for (text, what) in [
            ("v 0 0\n", "missing number"),
            ("v 1 1 1 0\n", "weight w is 0"),
            ("v 1 1 1 1 1\n", "5 values"),
            ("v 0 0 0\nf 1 1 1/1/1/1\n", "not a vertex reference"),
            ("v 0 0 0\nf /1 1 1\n", "not a vertex reference"),
            ("v 0 0 0\nf 1 1 a\n", "\"a\" where a vertex index"),
            ("v 0 0 0\nf 1 1 1/x\n", "where a texture coordinate index"),
            ("v 0 0 0\nf 1 1 0\n", "start at 1"),
            (
                "v 0 0 0\nf 1 1 99999999999999999999\n",
                "where a vertex index",
            ),
            ("mtllib  \n", "mtllib without a file name"),
        ] {
            let e = error(text);
            assert!(e.to_string().contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn names_keep_inner_spaces_and_latin1_is_replaced() {
        let p = parse("\tg   spaced name \r\no\nusemtl caf\u{e9}\n");
        let names: Vec<&str> = p
            .out
            .events
            .iter()
            .map(|e| match e {
                Event::Section { name, .. } | Event::UseMaterial { name, .. } => name.as_str(),
                _ => "",
            })
            .collect();
        assert_eq!(names, ["spaced name", UNNAMED_GROUP, "caf\u{e9}"]);
        let latin1 = b"g caf\xe9\n";
        let mut none: [Vec3; 0] = [];
        let out = parse_chunk(ChunkInput {
            path: Path::new("t.obj"),
            text: latin1,
            first_line: 1,
            before: Counts::default(),
            positions: &mut none,
            uvs: &mut [],
            normals: &mut [],
        });
        assert_eq!(
            out.events,
            [Event::Section {
                name: "caf\u{fffd}".into(),
                line: 1
            }]
        );
    }

    proptest! {
        /// fast-float2 agrees with the standard library on what is a number and its value.
        #[test]
        fn numbers_parse_as_the_standard_library_does(
            s in "[-+]?([0-9]{0,12}(\\.[0-9]{0,12})?([eE][-+]?[0-9]{0,3})?|inf|infinity|nan|NaN|INF|Infinity|\\.|e5|1e|0x1|1_0)"
        ) {
            let ours = fast_float2::parse::<f32, _>(s.as_bytes()).ok();
            let std = s.parse::<f32>().ok();
            prop_assert_eq!(ours.map(f32::to_bits), std.map(f32::to_bits));
        }

        /// The fast path reads exactly what the careful path reads, where it reads at all.
        #[test]
        fn fast_numbers_agree_with_the_standard_library(
            words in proptest::collection::vec(
                "[-+]?([0-9]{0,6}(\\.[0-9]{0,6})?([eE][-+]?[0-9]{0,2})?|inf|nan)[a-z/]{0,1}",
                0..5,
            ),
            sep in "[ \t]{1,3}",
        ) {
            let words: Vec<String> = words.into_iter().filter(|w| !w.is_empty()).collect();
            let line = words.join(&sep);
            let std: Vec<Option<f32>> = words.iter().map(|w| w.parse::<f32>().ok()).collect();
            if let Some((values, n, ends)) = numbers_fast::<3>(line.as_bytes()) {
                prop_assert_eq!(n, words.len().min(3));
                prop_assert_eq!(ends, words.len() <= 3);
                for (value, s) in values.iter().zip(&std).take(n) {
                    prop_assert_eq!(Some(value.to_bits()), s.map(f32::to_bits));
                }
            } else {
                prop_assert!(std.iter().take(3).any(|s| s.is_none()));
            }
        }

        #[test]
        fn fast_corners_agree_with_the_careful_path(word in "[-+]?[0-9]{0,20}(/[-+]?[0-9]{0,3}){0,3}x?") {
            let p = ChunkParser {
                path: Path::new("t.obj"),
                line: 1,
                defined_v: 1000,
                defined_vt: 0,
                defined_vn: 0,
                positions: &mut [],
                uvs: &mut [],
                normals: &mut [],
                written_v: 0,
                written_vt: 0,
                written_vn: 0,
                out: ChunkOut::default(),
                face: Vec::new(),
                smoothing: None,
            };
            let careful = p.corner_careful(word.as_bytes());
            match corner_fast(word.as_bytes()) {
                Some(fast) => prop_assert_eq!(
                    Some(fast).filter(|(v, _, _)| resolve(*v, 1000).is_some()),
                    careful.ok()
                ),
                None => prop_assert!(
                    careful.is_err() || word.trim_start_matches(['-', '+']).len() > 18,
                    "{} accepted only by the careful path", word
                ),
            }
        }

        /// Random bytes never panic the parser, and counting agrees with parsing.
        #[test]
        fn garbage_never_panics(lines in proptest::collection::vec(
            prop_oneof![
                "(v|vt|vn|f|o|g|l|p|usemtl|mtllib|#)?[ \t]{0,2}[-+0-9./ a-z\t]{0,24}",
                proptest::collection::vec(any::<u8>(), 0..24)
                    .prop_map(|b| String::from_utf8_lossy(&b).replace('\n', " ")),
            ],
            0..40,
        )) {
            let text = lines.join("\n");
            let p = parse(&text);
            let c = count(text.as_bytes());
            if p.out.error.is_none() {
                prop_assert_eq!(p.positions.len() as u64, c.v);
            }
            for corner in &p.out.corners {
                prop_assert!((corner.v as usize) < p.positions.len());
                prop_assert!(corner.vt >= DROPPED || (corner.vt as usize) < p.uvs.len());
                prop_assert!(corner.vn >= DROPPED || (corner.vn as usize) < p.normals.len());
            }
        }
    }
}
