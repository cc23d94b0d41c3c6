//! Which forwarders the benchmark measures, and what each row is called.

use super::*;

/// The forwarders measured, in order: the kernel's bridge (and with the discipline), then per
/// back end the do-nothing forwarder, the gateway, and the busy-polling gateway.
pub(super) fn forwarders(a: &Config, cpus: Cpus) -> Vec<(Forwarder, Vec<String>)> {
    let mut v: Vec<(Forwarder, Vec<String>)> = vec![(Forwarder::Kernel, vec![])];
    if a.kernel_qdisc {
        v.push((Forwarder::KernelQdisc, vec![]));
    }
    for io in &a.io {
        let with = |more: &[&str]| {
            let mut x = vec!["--io".to_string(), io.clone()];
            x.extend(more.iter().map(|m| m.to_string()));
            (Forwarder::Gateway, x)
        };
        v.push(with(&["--passthrough"]));
        v.push(with(&[]));
        if !a.no_busy_poll {
            v.push(with(&["--busy-poll"]));
        }
        if a.workers > 1 {
            for cores in worker_layouts(a.workers, cpus) {
                v.push(with(&["--cores", &cores]));
            }
        }
    }
    v
}

/// Where N workers run: all on the forwarding core; and on N cores of their own, apart from
/// the generator's, where the machine has them.
fn worker_layouts(n: usize, cpus: Cpus) -> Vec<String> {
    let list = |c: Vec<usize>| c.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let mut v = vec![list(vec![cpus.fwd; n])];
    let have = std::thread::available_parallelism().map_or(1, |p| p.get());
    if !cpus.shared() && have > n {
        v.push(list((0..have).filter(|&c| c != cpus.gen).take(n).collect()));
    }
    v
}

/// Each back end's do-nothing forwarder with its gateway (the first gateway row of that back
/// end that does not spin: the one with default arguments).
pub(super) fn ceilings(rows: &[Row]) -> impl Iterator<Item = (&Row, &Row)> {
    rows.iter()
        .filter(|r| r.passthrough)
        .filter_map(move |nothing| {
            rows.iter()
                .find(|r| r.io == nothing.io && !r.passthrough && !r.spins)
                .map(|g| (nothing, g))
        })
}

/// The back end a gateway's arguments name (`--io X`), "" for none.
pub(super) fn io_of(extra: &[String]) -> String {
    extra
        .windows(2)
        .find(|w| w[0] == "--io")
        .map_or(String::new(), |w| w[1].clone())
}

pub(super) fn row_name(a: &Config, fwd: Forwarder, extra: &[String]) -> String {
    let io = io_of(extra);
    match fwd {
        Forwarder::Kernel => "kernel bridge".to_string(),
        Forwarder::KernelQdisc => format!("kernel bridge + {}", a.qdisc),
        Forwarder::Gateway if extra.iter().any(|x| x == "--passthrough") => {
            format!("do-nothing forwarder, {io}")
        }
        Forwarder::Gateway => {
            let busy = if extra.iter().any(|x| x == "--busy-poll") {
                " --busy-poll"
            } else {
                ""
            };
            let cores = extra
                .windows(2)
                .find(|w| w[0] == "--cores")
                .map_or(String::new(), |w| {
                    format!(", {} workers on CPUs {}", w[1].split(',').count(), w[1])
                });
            format!("gateway {}, {io}{busy}{cores}", a.qdisc)
        }
    }
}
