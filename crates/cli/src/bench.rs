//! `psikit bench`: performance figures (being written).

use anyhow::Result;
use clap::Args;

#[derive(Args)]
pub struct BenchArgs {}

pub fn run(_a: BenchArgs) -> Result<()> {
    anyhow::bail!("not yet available")
}
