//! The IETF responsiveness test on the command line: `debloat server --https ADDR` serves it,
//! `debloat test responsiveness --config URL` runs it against that server or any other that
//! publishes the draft's configuration (debloat_probe::nq).

use anyhow::{bail, Context, Result};
use debloat_probe::nq;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Start the HTTPS side of `debloat server`: a certificate from files, or a self-signed one
/// for `names` (plus localhost and the bound address) written to `cert_out`.
pub fn serve(
    addr: &str,
    files: Option<(&Path, &Path)>,
    names: &[String],
    cert_out: &Path,
) -> Result<nq::server::Running> {
    let bind: std::net::SocketAddr = addr
        .parse()
        .with_context(|| format!("--https {addr:?}: write ADDR:PORT, e.g. 0.0.0.0:4443"))?;
    let id = match files {
        Some((c, k)) => debloat_http::tls::Identity::from_files(c, k)?,
        None => {
            let mut all: Vec<String> = vec!["localhost".into()];
            if !bind.ip().is_unspecified() {
                all.push(bind.ip().to_string());
            }
            all.extend(names.iter().cloned());
            let id = debloat_http::tls::Identity::self_signed(&all)?;
            std::fs::write(cert_out, &id.cert_pem)
                .with_context(|| format!("writing {}", cert_out.display()))?;
            println!(
                "debloat server: self-signed certificate for {} written to {} (clients: --ca {})",
                all.join(", "),
                cert_out.display(),
                cert_out.display()
            );
            id
        }
    };
    let running = nq::server::start(bind, &id)
        .with_context(|| format!("cannot serve HTTPS on {bind} (in use? try --https ADDR:PORT)"))?;
    let a = running.server.addr();
    println!(
        "debloat server: HTTPS {a} (IETF responsiveness, HTTP/2; config https://{}:{}{})",
        if a.ip().is_unspecified() {
            "HOST".to_string()
        } else {
            host_of(a)
        },
        a.port(),
        nq::WELL_KNOWN
    );
    Ok(running)
}

fn host_of(a: std::net::SocketAddr) -> String {
    match a.ip() {
        std::net::IpAddr::V6(v) => format!("[{v}]"),
        ip => ip.to_string(),
    }
}

/// Run the IETF test against `url` and print it beside `native` (debloat's own variant's RPM,
/// when a debloat server was named too).
pub fn test(
    url: &str,
    ca: Option<&Path>,
    length_s: f64,
    output: &Path,
    native: Option<debloat_probe::rpm::Rpm>,
) -> Result<()> {
    let ca_pem = ca
        .map(|p| std::fs::read_to_string(p).with_context(|| format!("--ca {}", p.display())))
        .transpose()?;
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    let o = nq::client::Options {
        config_url: url.to_string(),
        ca_pem,
        length_s,
        interval_s: debloat_probe::rpm::ID_S,
        max_flows: debloat_probe::rpm::MNP,
        progress: true,
    };
    eprintln!(
        "debloat test responsiveness (IETF, HTTP/2 over TLS) against {url}: at most {length_s:.0} s{}",
        if std::io::stderr().is_terminal() { "; Ctrl-C stops early" } else { "" }
    );
    let out = nq::client::run(&o, &stop).map_err(anyhow::Error::msg)?;
    for e in &out.errors {
        eprintln!("warning: {e}");
    }
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path: PathBuf = output.join(format!("responsiveness-ietf-{unix}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&out)?)
        .with_context(|| format!("writing {}", path.display()))?;
    print_outcome(&out, native.as_ref());
    println!("\nsummary: {}", path.display());
    if out.rpm.is_none() {
        bail!("no RPM: the test needs load connections and answered probes of both kinds (see the warnings above)");
    }
    Ok(())
}

fn print_outcome(out: &nq::client::Outcome, native: Option<&debloat_probe::rpm::Rpm>) {
    let mean = |v: &[(f64, f64)]| v.iter().map(|x| x.1).sum::<f64>() / v.len().max(1) as f64;
    let tail = out.goodput.iter().rev().take(5).collect::<Vec<_>>();
    let n = tail.len().max(1) as f64;
    let (down, up) = tail
        .iter()
        .fold((0.0, 0.0), |a, g| (a.0 + g.1 / n, a.1 + g.2 / n));
    println!(
        "\n{} over {:.0} s; goodput in the last 5 s: down {down:.1} Mbit/s, up {up:.1} Mbit/s; {} probes foreign, {} self",
        if out.http2 { "HTTP/2 over TLS" } else { "HTTP/1.1 over TLS" },
        out.elapsed_s,
        out.tcp_f.len(),
        out.http_l.len()
    );
    println!(
        "probe means: TCP handshake {:.1} ms, TLS handshake {:.1} ms per round trip, GET on a new connection {:.1} ms, GET on a load connection {:.1} ms",
        mean(&out.tcp_f), mean(&out.tls_f), mean(&out.http_f), mean(&out.http_l)
    );
    if let Some(r) = &out.rpm {
        println!(
            "responsiveness (IETF draft-09, HTTP/2 + TLS): {:.0} RPM, {} ({:?} confidence; foreign {:.0}, loaded {:.0}; P90 variant {:.0} RPM)",
            r.rpm, r.class, r.confidence, r.foreign_rpm, r.loaded_rpm, r.p90_rpm
        );
    }
    if let Some(r) = native {
        println!(
            "responsiveness (debloat's own, TCP-only, same run): {:.0} RPM, {} ({:?} confidence; foreign {:.0}, loaded {:.0})",
            r.rpm, r.class, r.confidence, r.foreign_rpm, r.loaded_rpm
        );
    }
}
