//! `debloat testbed churn` and `churn-serve`: short TCP connections and UDP from source ports
//! that change every second, from the client namespace to a server in the server namespace, so
//! the gateway's flow tables turn over (what `debloat soak` runs for an hour).

use anyhow::{Context, Result};
use debloat_core::units::parse_rate;
use debloat_probe::churn;
use std::net::SocketAddr;
use std::time::Duration;

/// Arguments of `testbed churn`.
#[derive(clap::Args, Debug)]
pub struct ChurnArgs {
    /// The server (`testbed churn-serve`), TCP and UDP.
    #[arg(long, default_value = "198.18.2.2:5300")]
    to: SocketAddr,
    /// Seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
    /// Short TCP connections started per second.
    #[arg(long, default_value_t = 20.0)]
    flows_per_second: f64,
    /// Bytes each connection sends before it closes.
    #[arg(long, default_value_t = 20_000)]
    flow_bytes: usize,
    /// UDP rate, all source ports together (0 for none), e.g. 2Mbit.
    #[arg(long, default_value = "2Mbit")]
    udp_rate: String,
    /// UDP source ports (sockets) opened afresh every second.
    #[arg(long, default_value_t = 10)]
    udp_flows: u32,
}

/// Arguments of `testbed churn-serve`.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address (TCP and UDP).
    #[arg(long, default_value = "0.0.0.0:5300")]
    listen: SocketAddr,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 60.0)]
    seconds: f64,
}

/// Send churn; print what was done as one JSON line.
pub fn churn(a: &ChurnArgs) -> Result<()> {
    let udp_bps = if a.udp_rate == "0" {
        0
    } else {
        parse_rate(&a.udp_rate).with_context(|| format!("--udp-rate {}", a.udp_rate))?
    };
    let r = churn::run(&churn::Config {
        to: a.to,
        duration: Duration::from_secs_f64(a.seconds.max(0.0)),
        flows_per_sec: a.flows_per_second,
        flow_bytes: a.flow_bytes,
        udp_bps,
        udp_flows: a.udp_flows,
    })
    .with_context(|| format!("churn to {}", a.to))?;
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}

/// Take churn; print what arrived as one JSON line.
pub fn serve(a: &ServeArgs) -> Result<()> {
    let s = churn::serve(a.listen, Duration::from_secs_f64(a.seconds.max(0.0)))
        .with_context(|| format!("churn-serve on {}", a.listen))?;
    println!("{}", serde_json::to_string(&s)?);
    Ok(())
}
