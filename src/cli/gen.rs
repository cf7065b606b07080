//! (being written)
use clap::Args;

#[derive(Args, Debug)]
pub struct GenArgs {}

pub fn run(_a: GenArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
