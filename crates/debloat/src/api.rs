//! The library's door for the Python package (`crates/debloat-py`): the command line's own words
//! in, JSON out, nothing printed.
//!
//! Each function takes the words that follow the subcommand on a command line (`["rrul",
//! "--link", "20Mbit/2Mbit"]`), parses them with the very parser `debloat` uses, and runs the
//! very code the command runs — so a seed gives the numbers the CLI gives, and a mistake gives
//! the CLI's message. What the command would print as a table comes back as JSON instead.

use crate::{reproduce, sim, Cli, Command};
use clap::Parser;
use debloat_sim::repeat::{self, SeedRun};
use serde_json::{json, Value};

/// Why a call failed: the words did not parse (`Usage`, clap's message, as the CLI prints it),
/// or the run refused them or failed (`Run`, the CLI's `error:` line without its prefix).
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The words did not parse.
    #[error("{0}")]
    Usage(String),
    /// The run failed.
    #[error("{0}")]
    Run(String),
}

fn run_err(e: anyhow::Error) -> ApiError {
    ApiError::Run(format!("{e:#}"))
}

/// Parse `debloat WORDS…` as the binary does (with `--allow-slow-rate` applied).
fn parse(sub: &str, words: &[String]) -> Result<Command, ApiError> {
    let argv = ["debloat", sub]
        .into_iter()
        .map(String::from)
        .chain(words.iter().cloned());
    let cli = Cli::try_parse_from(argv).map_err(|e| ApiError::Usage(e.render().to_string()))?;
    crate::rates::allow_slow(cli.allow_slow_rate);
    Ok(cli.command)
}

/// `debloat sim WORDS…`, as JSON: `{"test", "runs": [{"seed", "summary", "flent"}]}` with one
/// run per seed (`--seeds N`: N runs, on every core as the CLI runs them), each run's summary
/// as `summary.json` has it and its flent data file (for a scenario file: no flent file, as the
/// CLI writes none). `--output DIR` writes what the CLI writes there too. `--sweep` is the
/// Python package's `sweep()`, on Dask: refused here.
pub fn sim(words: &[String]) -> Result<String, ApiError> {
    let Command::Sim(a) = parse("sim", words)? else {
        return Err(ApiError::Usage("not a sim command".into()));
    };
    if !a.sweep.is_empty() {
        return Err(ApiError::Usage(
            "--sweep: use debloat.sweep(grid, …), which runs the combinations on Dask".into(),
        ));
    }
    if a.circuits.network.is_some() {
        return circuits(&a.circuits);
    }
    let out = if let Some(path) = a.scenario.as_deref() {
        let (cfg, r) = sim::scenario(&a, path).map_err(run_err)?;
        let run = SeedRun {
            seed: cfg.seed,
            summary: r.summary,
            flent: Value::Null,
        };
        (cfg.test.name(), vec![run])
    } else {
        let cfg = sim::config(&a).map_err(run_err)?;
        let runs = if a.seeds > 1 {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            let seeds = crate::seeds::seeds(&a);
            let epoch = debloat_sim::flent::DEFAULT_EPOCH;
            repeat::run_seeds(&cfg, &seeds, threads, epoch, &a.title, &|_| {})
        } else {
            let r = debloat_sim::simulate(&cfg, |_| {});
            let epoch = debloat_sim::flent::DEFAULT_EPOCH;
            let flent = debloat_sim::flent::data_file(&r.world, &cfg, epoch, &a.title);
            if let Some(dir) = &a.output {
                sim::write_output(dir, &cfg, &r.summary, &flent, &a.title).map_err(run_err)?;
            }
            vec![SeedRun {
                seed: cfg.seed,
                summary: r.summary,
                flent,
            }]
        };
        (cfg.test.name(), runs)
    };
    let runs = out.1.iter().map(|r| RunOut {
        seed: r.seed,
        summary: &r.summary,
        flent: &r.flent,
    });
    let out = SimOut {
        test: out.0,
        runs: runs.collect(),
        circuits: None,
        nodes: None,
    };
    serde_json::to_string(&out).map_err(|e| ApiError::Run(e.to_string()))
}

/// `sim`'s answer; a struct (not a `Value`) so that the summary's fields keep their order.
#[derive(serde::Serialize)]
struct SimOut<'a> {
    test: &'static str,
    runs: Vec<RunOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    circuits: Option<&'a [debloat_sim::circuits::CircuitResult]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<&'a [debloat_sim::circuits::NodeResult]>,
}

/// `sim --network … --devices … --load …`: the run, its circuits and its nodes.
fn circuits(a: &sim::circuits::CircuitSimArgs) -> Result<String, ApiError> {
    let r = sim::circuits::simulate(a).map_err(run_err)?;
    let out = SimOut {
        test: "circuits",
        runs: vec![RunOut {
            seed: r.seed,
            summary: &r.summary,
            flent: &Value::Null,
        }],
        circuits: Some(&r.circuits),
        nodes: Some(&r.nodes),
    };
    serde_json::to_string(&out).map_err(|e| ApiError::Run(e.to_string()))
}

#[derive(serde::Serialize)]
struct RunOut<'a> {
    seed: u64,
    summary: &'a debloat_sim::Summary,
    flent: &'a Value,
}

/// Check `debloat sim WORDS…` without running: the words parse and make a configuration (the
/// sweep checks every combination before it sends one to a worker).
pub fn check_sim(words: &[String]) -> Result<(), ApiError> {
    let Command::Sim(a) = parse("sim", words)? else {
        return Err(ApiError::Usage("not a sim command".into()));
    };
    match a.scenario.as_deref() {
        Some(_) => Ok(()),
        None => sim::config(&a).map(|_| ()).map_err(run_err),
    }
}

/// `debloat spec TEXT --json`: the discipline's statistics (and classes) as JSON, and tc's text.
pub fn spec(text: &str) -> Result<String, ApiError> {
    crate::rates::check_spec("spec", text).map_err(run_err)?;
    let spec: debloat_core::QdiscSpec = text.parse().map_err(|e| run_err(anyhow::Error::new(e)))?;
    let q = spec.build::<debloat_core::Record>(debloat_core::FlowHasher::default(), 0);
    let out = json!({
        "spec": spec.to_string(),
        "qdisc": q.stats(),
        "classes": q.classes(),
        "tc": debloat_core::qdisc::stats::tc_show(q.as_ref()),
    });
    Ok(out.to_string())
}

/// `debloat replay WORDS…`: runs as the command does (the fates CSV and `--stats-json` are
/// written where the words say) and returns the summary the command prints, as text.
pub fn replay(words: &[String]) -> Result<String, ApiError> {
    let Command::Replay(a) = parse("replay", words)? else {
        return Err(ApiError::Usage("not a replay command".into()));
    };
    crate::replay::execute(&a).map_err(run_err)
}

/// `debloat reproduce WORDS… --json`: every chosen experiment's outcome (with `--seeds N`, its
/// intervals), as the command's JSON. A check outside its band is data here, not an error.
pub fn reproduce(words: &[String]) -> Result<String, ApiError> {
    let Command::Reproduce(a) = parse("reproduce", words)? else {
        return Err(ApiError::Usage("not a reproduce command".into()));
    };
    reproduce::outcomes_json(&a).map_err(run_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    /// The API's run is the CLI's: same summary for the same words and seed.
    #[test]
    fn sim_gives_the_clis_summary_and_flent_file() {
        let words = w(&["tcp_1up", "--length", "2", "--delay", "0.5", "--seed", "3"]);
        let v: Value = serde_json::from_str(&sim(&words).expect("runs")).expect("json");
        let Command::Sim(a) = parse("sim", &words).expect("parses") else {
            panic!("not sim")
        };
        let cfg = sim::config(&a).expect("config");
        let r = debloat_sim::simulate(&cfg, |_| {});
        let want = serde_json::to_value(&r.summary).expect("summary");
        assert_eq!(v["runs"][0]["summary"], want);
        assert_eq!(v["runs"][0]["seed"], 3);
        assert!(v["runs"][0]["flent"]["results"].is_object());
    }

    #[test]
    fn bad_words_give_the_clis_messages() {
        let e = sim(&w(&["rrul", "--bogus"])).expect_err("refused");
        assert!(
            matches!(e, ApiError::Usage(ref m) if m.contains("--bogus")),
            "{e}"
        );
        let e = sim(&w(&["rrul", "--qdisc", "cake bandwith 1Mbit"])).expect_err("refused");
        assert!(
            matches!(e, ApiError::Run(ref m) if m.contains("bandwith")),
            "{e}"
        );
        let e = sim(&w(&["rrul", "--sweep", "rtt=1ms;2ms"])).expect_err("refused");
        assert!(e.to_string().contains("debloat.sweep"), "{e}");
    }

    #[test]
    fn seeds_run_each_seed() {
        let v: Value = serde_json::from_str(
            &sim(&w(&[
                "ping", "--length", "1", "--delay", "0", "--seeds", "3", "--seed", "5",
            ]))
            .expect("runs"),
        )
        .expect("json");
        let seeds: Vec<u64> = v["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .filter_map(|r| r["seed"].as_u64())
            .collect();
        assert_eq!(seeds, vec![5, 6, 7]);
    }

    #[test]
    fn spec_shows_tc_text_and_statistics() {
        let v: Value =
            serde_json::from_str(&spec("fq_codel target 3ms").expect("ok")).expect("json");
        assert!(v["tc"].as_str().unwrap_or("").contains("target 3ms"), "{v}");
        assert!(spec("fq_codel targt 3ms").is_err());
    }
}
