//! (being written)
use clap::Args;

#[derive(Args, Debug)]
pub struct BuildBenchArgs {}

pub fn run(_a: BuildBenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
