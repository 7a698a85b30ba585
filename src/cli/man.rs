//! `cru man`: the manual pages in roff, made from the same definitions as `--help`.
//! `cru man` prints `cru(1)`, whose SUBCOMMANDS section lists every command;
//! `cru man --out DIR` writes `cru.1` and a page per subcommand (`cru-session.1`,
//! `cru-session-new.1`…), for `man -l` or a `man1` folder.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, CommandFactory};
use clap_mangen::Man;

use crate::cli::output::outln;

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (`cru.1`, `cru-<subcommand>.1`…) into this folder instead of
    /// printing `cru.1`; the folder is made if missing.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn run(args: &ManArgs) -> anyhow::Result<ExitCode> {
    let cmd = super::Cli::command().disable_help_subcommand(true);
    match &args.out {
        None => {
            let mut page = Vec::new();
            page_of(cmd).render(&mut page)?;
            outln!("{}", String::from_utf8_lossy(&page).trim_end());
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot make {}", dir.display()))?;
            let mut cmd = cmd;
            cmd.build();
            let written = write_pages(&cmd, dir)
                .with_context(|| format!("cannot write the pages into {}", dir.display()))?;
            outln!("{written} pages written to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A page, dated with the build and named with the version.
fn page_of(cmd: clap::Command) -> Man {
    Man::new(cmd)
        .date(env!("CRU_BUILD_DATE"))
        .manual("crucible")
}

/// Writes the page of `cmd` and of each of its subcommands (hidden ones aside); returns
/// how many.
fn write_pages(cmd: &clap::Command, dir: &Path) -> std::io::Result<usize> {
    let mut written = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written += write_pages(sub, dir)?;
    }
    page_of(cmd.clone()).generate_to(dir)?;
    Ok(written + 1)
}
