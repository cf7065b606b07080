//! (being written)
use clap::Args;

#[derive(Args, Debug)]
pub struct ScheduleSimArgs {}

pub fn run(_a: ScheduleSimArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
