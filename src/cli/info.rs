//! (being written)
use clap::Args;

#[derive(Args, Debug)]
pub struct InfoArgs {}

pub fn run(_a: InfoArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
