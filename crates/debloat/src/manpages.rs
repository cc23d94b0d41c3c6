//! `debloat man DIR` writes a man page for the command and each subcommand (clap_mangen:
//! `debloat.1`, `debloat-gateway.1`, `debloat-gateway-stats.1` …), and `debloat completions
//! SHELL` prints a completion script (clap_complete). Both are built from the same clap
//! definitions as `--help`, so they cannot drift from it; the package installs their output.

use anyhow::{Context, Result};
use clap::CommandFactory;
use std::path::{Path, PathBuf};

/// `debloat man`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Example:\n  debloat man /usr/share/man/man1 && man debloat-gateway")]
pub struct ManArgs {
    /// Where to write the pages (created if missing).
    dir: PathBuf,
}

/// `debloat completions`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat completions bash > /usr/share/bash-completion/completions/debloat\n  debloat completions zsh > /usr/share/zsh/vendor-completions/_debloat\n  debloat completions fish > ~/.config/fish/completions/debloat.fish"
)]
pub struct CompletionArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

/// Write every page; print how many.
pub fn man(a: &ManArgs) -> Result<()> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let mut cmd = crate::Cli::command();
    cmd.build();
    let n = write_pages(&cmd, "debloat", &a.dir)?;
    println!("{n} man pages written to {}", a.dir.display());
    Ok(())
}

fn write_pages(cmd: &clap::Command, name: &str, dir: &Path) -> Result<usize> {
    let page = cmd.clone().name(name.to_string());
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    let mut n = 1;
    for sub in cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        n += write_pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(n)
}

/// Print the completion script for one shell.
pub fn completions(a: &CompletionArgs) -> Result<()> {
    let mut cmd = crate::Cli::command();
    clap_complete::generate(a.shell, &mut cmd, "debloat", &mut std::io::stdout());
    Ok(())
}
