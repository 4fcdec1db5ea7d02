//! Shell completions and man pages, generated from the clap definition of
//! the CLI (`clap_complete`, `clap_mangen`), so they never drift from it.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use super::args::Cli;

/// Writes the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell, out: &mut impl Write) -> Result<()> {
    // Into a buffer first: clap_complete panics on a write error (a closed
    // pipe), where this says what failed.
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "slicectl", &mut buf);
    out.write_all(&buf)
        .and_then(|()| out.flush())
        .context("cannot write the completion script to stdout")
}

/// Writes the man page of `slicectl` (roff).
pub fn man_page(out: &mut impl Write) -> Result<()> {
    clap_mangen::Man::new(Cli::command())
        .render(out)
        .context("cannot write the man page to stdout")
}

/// Writes `slicectl.1` and one page per subcommand into `dir` (created if
/// missing).
pub fn man_pages(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the man page directory {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir).with_context(|| {
        format!(
            "cannot write the man pages into {} (check it is writable)",
            dir.display()
        )
    })
}
