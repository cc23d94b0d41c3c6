//! `debloat lab`: the real Linux kernel's qdiscs, here, under User-Mode Linux (`debloat-lab`).

use anyhow::{anyhow, bail, Context, Result};
use debloat_lab::Lab;
use std::path::PathBuf;

/// Arguments of `debloat lab`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  debloat lab spec \"cake bandwidth 20Mbit diffserv4\" \"fq_codel limit 1001 noecn\"\n  debloat lab run script.sh --keep results/\n\nNeeds Debian's user-mode-linux and kmod (apt-get install user-mode-linux kmod); no root,\nno KVM. The guest is Linux 6.1 with the host's filesystem read-only, one CPU, no BQL."
)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// Show each spec as the kernel's `tc -s qdisc show` prints it (on a veth, MTU 1500) beside
    /// `debloat spec`, and say where they differ; exit 2 if any does.
    Spec {
        /// tc specs, e.g. "cake bandwidth 20Mbit diffserv4".
        #[arg(required = true)]
        specs: Vec<String>,
    },
    /// Boot the kernel, run a shell script in it as root (its working directory is a host
    /// directory; `$DEBLOAT` is this binary), print what it printed and exit with its status.
    Run {
        /// The script (POSIX sh); `-` reads it from standard input.
        script: PathBuf,
        /// Copy the files the script wrote in its working directory here.
        #[arg(long)]
        keep: Option<PathBuf>,
        /// Guest memory, MiB.
        #[arg(long, default_value_t = 512)]
        mem: u32,
    },
}

/// Run the command.
pub fn run(a: &Args) -> Result<()> {
    let mut lab = Lab::find()?;
    match &a.what {
        What::Spec { specs } => spec(&lab, specs),
        What::Run { script, keep, mem } => {
            lab.mem_mb = *mem;
            let text = if script.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(script)
                    .with_context(|| format!("reading {}", script.display()))?
            };
            // The script finds this very binary as $DEBLOAT (the guest sees the host's files).
            let exe = std::env::current_exe().context("finding debloat's own path")?;
            let text = format!(
                "export DEBLOAT={}\n{text}",
                debloat_lab::quote(&exe.to_string_lossy())
            );
            eprintln!("booting the kernel lab (≈2 s) …");
            let o = lab.run(&text, keep.as_deref())?;
            print!("{}", o.stdout);
            eprint!("{}", o.stderr);
            eprintln!(
                "lab: exit {} after {:.1} s",
                o.status,
                o.elapsed.as_secs_f64()
            );
            if o.status != 0 {
                std::process::exit(o.status.clamp(1, 255));
            }
            Ok(())
        }
    }
}

fn spec(lab: &Lab, specs: &[String]) -> Result<()> {
    // Check every spec here first: a typo is named before the kernel boots.
    let ours: Vec<String> = specs
        .iter()
        .map(|s| {
            let q: debloat_core::QdiscSpec = s.parse().map_err(|e| anyhow!("\"{s}\": {e}"))?;
            let q = q.build::<debloat_core::Record>(debloat_core::FlowHasher::default(), 0);
            Ok(q.stats().to_tc_string())
        })
        .collect::<Result<_>>()?;
    eprintln!("booting the kernel lab (≈2 s) …");
    let o = lab.run(&debloat_lab::tc_show_script(specs), None)?;
    let theirs = debloat_lab::split_tc_show(&o.stdout);
    let mut differ = Vec::new();
    for (spec, ours) in specs.iter().zip(&ours) {
        let Some((_, tc)) = theirs.iter().find(|(s, _)| s == spec) else {
            differ.push(spec.clone());
            println!("=== {spec}\nthe kernel's tc refused it:\n{}", o.stderr);
            continue;
        };
        if tc == ours {
            println!("=== {spec}: same text\n{tc}");
        } else {
            differ.push(spec.clone());
            println!("=== {spec}: DIFFERENT\n--- tc -s qdisc show (Linux 6.1)\n{tc}+++ debloat spec\n{ours}");
        }
    }
    if !differ.is_empty() {
        bail!(
            "tc and debloat print differently for: {}",
            differ.join("; ")
        );
    }
    println!(
        "{} specs: debloat prints what the kernel's tc prints",
        specs.len()
    );
    Ok(())
}
