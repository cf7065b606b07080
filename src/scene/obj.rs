//! The OBJ/MTL loader (being written).
use super::Scene;
use std::path::Path;

#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// No progress bar.
    pub quiet: bool,
}

pub fn load_obj(path: &Path, _opts: &LoadOptions) -> anyhow::Result<Scene> {
    anyhow::bail!("{}: loader not yet written", path.display())
}
