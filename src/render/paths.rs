//! The files a command writes besides its image (`--stats` and its siblings, `--costmap`,
//! `--csv`): checked before the work, as the image is, so that an hour's render does not end
//! in "No such file or directory", and never one of the command's own inputs or outputs (a
//! `--stats` naming the scene replaced the scene with a CSV).

use std::path::{Path, PathBuf};

/// `path` made absolute through its folder (which must exist), or itself when it exists.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = path.canonicalize() {
        return Some(p);
    }
    let name = path.file_name()?;
    let folder = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    Some(folder.canonicalize().ok()?.join(name))
}

/// Whether two paths name the same file (through links and `..`), existing or not.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (resolved(a), resolved(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// The folder a file path is written in (`.` for a bare name).
fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Writes and removes an empty file in `folder`: the only sure test that it takes files.
fn probe(flag: &str, path: &Path, folder: &Path) -> anyhow::Result<()> {
    let probe = folder.join(format!(".gasworks-write-probe-{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            anyhow::anyhow!(
                "{flag} {}: cannot write in {}: {e}",
                path.display(),
                folder.display()
            )
        })
}

/// Whether the file at `path` (which exists) starts as a file gasworks writes there does:
/// one of the CSV headers in `ours`, or nothing at all.
fn written_by_us(path: &Path, ours: &[&str]) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(4096).read_to_end(&mut head));
    read.is_ok() && (head.is_empty() || ours.iter().any(|h| head.starts_with(h.as_bytes())))
}

/// Checks a file that `flag` will write: not a folder, not one of `taken` (what each is, and
/// its path), in an existing folder that takes files; and, when it exists, a file of the kind
/// `flag` writes (its first line one of the CSV headers in `ours`, or empty), so that no
/// other file (a scene's MTL library, a texture, a document) is replaced.
pub fn check_side_file(
    flag: &str,
    path: &Path,
    taken: &[(&str, &Path)],
    ours: &[&str],
) -> anyhow::Result<()> {
    if path.is_dir() {
        anyhow::bail!("{flag} {}: is a folder; give a file name", path.display());
    }
    if let Some((what, _)) = taken.iter().find(|(_, other)| same_file(path, other)) {
        anyhow::bail!(
            "{flag} {} is {what}: writing there would overwrite it",
            path.display()
        );
    }
    if path.exists() && !written_by_us(path, ours) {
        anyhow::bail!(
            "{flag} {} exists and is not a file {flag} writes: writing there would overwrite it; name another file, or delete it first",
            path.display()
        );
    }
    let folder = folder_of(path);
    if !folder.is_dir() {
        anyhow::bail!(
            "{flag} {}: the folder {} does not exist",
            path.display(),
            folder.display()
        );
    }
    probe(flag, path, folder)
}

/// Checks (making it if needed) a folder that `flag` will write files into.
pub fn check_side_folder(flag: &str, dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!("{flag} {}: is a file, not a folder", dir.display());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("{flag} {}: cannot make the folder: {e}", dir.display()))?;
    probe(flag, dir, dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_folders_and_missing_folders_are_refused_by_flag() {
        let dir = tempfile::tempdir().unwrap();
        let scene = dir.path().join("s.obj");
        std::fs::write(&scene, "v 0 0 0\n").unwrap();
        // The same file through another spelling of its folder.
        let again = dir.path().join(".").join("s.obj");
        let e = check_side_file("--stats", &again, &[("the scene", &scene)], &[]).unwrap_err();
        assert!(
            e.to_string()
                .ends_with("is the scene: writing there would overwrite it"),
            "{e}"
        );
        let e = check_side_file("--stats", dir.path(), &[], &[]).unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        let gone = dir.path().join("gone/x.csv");
        let e = check_side_file("--stats", &gone, &[], &[]).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        // A new file beside the scene is fine, and nothing is left behind by the check.
        check_side_file(
            "--stats",
            &dir.path().join("x.csv"),
            &[("the scene", &scene)],
            &[],
        )
        .unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        // An existing file is replaced only when it is one this flag writes (or empty).
        let mtl = dir.path().join("s.mtl");
        std::fs::write(&mtl, "newmtl a\nKd 1 1 1\n").unwrap();
        let e = check_side_file("--stats", &mtl, &[], &["pass,"]).unwrap_err();
        assert!(
            e.to_string()
                .contains("exists and is not a file --stats writes"),
            "{e}"
        );
        let old = dir.path().join("old.csv");
        std::fs::write(&old, "pass,spp_from\n0,0\n").unwrap();
        check_side_file("--stats", &old, &[], &["pass,"]).unwrap();
        std::fs::write(&old, "").unwrap();
        check_side_file("--stats", &old, &[], &["pass,"]).unwrap();
        std::fs::remove_file(&mtl).unwrap();
        std::fs::remove_file(&old).unwrap();

        let e = check_side_folder("--costmap", &scene).unwrap_err();
        assert!(e.to_string().contains("is a file, not a folder"), "{e}");
        check_side_folder("--costmap", &dir.path().join("maps")).unwrap();
        assert!(dir.path().join("maps").is_dir());
    }
}
