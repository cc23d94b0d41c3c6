//! The client side of the IETF responsiveness test (see the [module docs](super)): fetch the
//! configuration, load the path up and down at once over HTTP/2 connections added by the
//! draft's ramp, probe it from fresh connections (foreign) and on the load connections (self),
//! and compute RPM when goodput and then responsiveness are stable, or at the time limit.

use super::Config;
use crate::rpm::{self, Ramp, Rpm, Timed};
use debloat_http::body::{self, Zeros};
use debloat_http::client::{self, Sender, Target};
use debloat_http::{Method, Uri};
use http_body_util::BodyExt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The configuration URL (`https://HOST/.well-known/nq`).
    pub config_url: String,
    /// Extra trusted certificates (PEM), e.g. a test server's self-signed one.
    pub ca_pem: Option<String>,
    /// Time limit of the load, s.
    pub length_s: f64,
    /// Interval ID, s (the draft's 5).
    pub interval_s: f64,
    /// Most load connections per direction (MNP).
    pub max_flows: usize,
    /// Print a line per interval on stderr.
    pub progress: bool,
}

/// What was measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    /// The configuration URL and what it named.
    pub config_url: String,
    /// Small object, large object, upload URLs.
    pub urls: [String; 3],
    /// Whether the load connections ran HTTP/2.
    pub http2: bool,
    /// Load time, s.
    pub elapsed_s: f64,
    /// Stopped by the user.
    pub interrupted: bool,
    /// Foreign probes' TCP handshakes (time s, ms).
    pub tcp_f: Vec<Timed>,
    /// Foreign probes' TLS handshakes, per round trip (time s, ms).
    pub tls_f: Vec<Timed>,
    /// Foreign probes' GETs of the small object (time s, ms).
    pub http_f: Vec<Timed>,
    /// Self probes: GETs of the small object on load connections (time s, ms).
    pub http_l: Vec<Timed>,
    /// Goodput each second: (time s, down Mbit/s, up Mbit/s).
    pub goodput: Vec<(f64, f64, f64)>,
    /// The load ramp.
    pub ramp: Ramp,
    /// RPM, where there were samples of every kind.
    pub rpm: Option<Rpm>,
    /// What failed along the way.
    pub errors: Vec<String>,
}

/// The definition printed with the result.
pub const DEFINITION: &str = "draft-ietf-ippm-responsiveness-09 over HTTP/2 and TLS: RPM = (60000/mean(TM(tcp_f),TM(tls_f),TM(http_f)) + 60000/TM(http_l)) / 2, TM = mean of the lowest 95 %, over the last 4 intervals; http_l = GETs of the small object on the load connections";

/// Probes of each kind per second.
const PROBES_PER_S: f64 = 10.0;
/// Deadline of one connection set-up or probe.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);

/// The shared state of a run.
struct Live {
    t0: Instant,
    tls: Arc<debloat_http::rustls::ClientConfig>,
    addr: SocketAddr,
    host: String,
    urls: [Uri; 3],
    down: AtomicU64,
    up: Arc<AtomicU64>,
    stop_load: Arc<AtomicBool>,
    /// The live load connections' HTTP/2 senders (self probes ride them), by load task.
    senders: Mutex<Vec<(u64, Sender)>>,
    /// Load tasks started, to name each one's sender.
    loads: AtomicU64,
    /// Whether any load connection spoke HTTP/2.
    http2: AtomicBool,
    samples: Mutex<Samples>,
    errors: Mutex<Vec<String>>,
}

#[derive(Default)]
struct Samples {
    tcp_f: Vec<Timed>,
    tls_f: Vec<Timed>,
    http_f: Vec<Timed>,
    http_l: Vec<Timed>,
}

impl Live {
    fn t(&self) -> f64 {
        self.t0.elapsed().as_secs_f64()
    }

    fn error(&self, e: String) {
        let mut v = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        if v.len() < 20 && !v.contains(&e) {
            v.push(e);
        }
    }

    /// A new connection; a load connection's socket keeps little unsent (draft-09).
    async fn connect(&self, load: bool) -> Result<client::Connection, String> {
        client::connect_with(
            self.addr,
            &self.host,
            Some(Arc::clone(&self.tls)),
            PROBE_DEADLINE,
            load.then_some(super::NOTSENT_LOWAT),
        )
        .await
        .map_err(|e| format!("connecting to {}: {e}", self.addr))
    }
}

/// Run the test; `stop` ends it early.
pub fn run(o: &Options, stop: &AtomicBool) -> Result<Outcome, String> {
    let rt = debloat_http::runtime(2, "nq").map_err(|e| e.to_string())?;
    rt.block_on(test(o, stop))
}

/// Fetch and read the configuration.
async fn config(
    url: &str,
    tls: &Arc<debloat_http::rustls::ClientConfig>,
) -> Result<Config, String> {
    let t = Target::parse(url).map_err(|e| e.to_string())?;
    let addr = *t
        .resolve()
        .await
        .map_err(|e| format!("{url}: {e}"))?
        .first()
        .ok_or("no address")?;
    let tls = t.tls.then(|| Arc::clone(tls));
    let mut c = client::connect(addr, &t.host, tls, PROBE_DEADLINE)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    let r = c
        .sender
        .send(client::get(&t.uri))
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("{url}: the server answered {}", r.status()));
    }
    let b = r.into_body().collect().await.map_err(|e| e.to_string())?;
    Config::parse(&String::from_utf8_lossy(&b.to_bytes())).map_err(|e| format!("{url}: {e}"))
}

async fn live_of(o: &Options) -> Result<(Live, Config), String> {
    let tls = debloat_http::tls::client(o.ca_pem.as_deref(), &debloat_http::tls::ALPN)
        .map_err(|e| e.to_string())?;
    let cfg = config(&o.config_url, &tls).await?;
    let targets = [&cfg.small, &cfg.large, &cfg.upload]
        .map(|u| Target::parse(u).map_err(|e| format!("the config's URL: {e}")));
    let [small, large, upload] = targets;
    let (small, large, upload) = (small?, large?, upload?);
    if !large.tls {
        return Err(format!(
            "{}: the test runs over TLS; the config names http://",
            cfg.large
        ));
    }
    let endpoint = cfg
        .test_endpoint
        .clone()
        .unwrap_or_else(|| large.host.clone());
    let addr = *tokio::net::lookup_host((endpoint.as_str(), large.port))
        .await
        .map_err(|e| format!("{endpoint}: {e}"))?
        .collect::<Vec<_>>()
        .first()
        .ok_or_else(|| format!("{endpoint}: no address"))?;
    let live = Live {
        t0: Instant::now(),
        tls,
        addr,
        host: large.host.clone(),
        urls: [small.uri, large.uri, upload.uri],
        down: AtomicU64::new(0),
        up: Arc::new(AtomicU64::new(0)),
        stop_load: Arc::new(AtomicBool::new(false)),
        senders: Mutex::new(Vec::new()),
        loads: AtomicU64::new(0),
        http2: AtomicBool::new(false),
        samples: Mutex::new(Samples::default()),
        errors: Mutex::new(Vec::new()),
    };
    Ok((live, cfg))
}

/// One load-generating connection: GETs of the large object (down) or one endless POST (up),
/// again and again until the load stops.
async fn load(live: Arc<Live>, down: bool) {
    let mut c = match live.connect(true).await {
        Ok(c) => c,
        Err(e) => return live.error(e),
    };
    let id = live.loads.fetch_add(1, Ordering::Relaxed);
    if let Some(s) = c.sender.share() {
        live.http2.store(true, Ordering::Relaxed);
        live.senders
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, s));
    }
    run_load(&live, &mut c.sender, down).await;
    // A connection that failed carries no more self probes.
    live.senders
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|(i, _)| *i != id);
}

/// The load's requests on one connection, until the load stops or a request fails (said).
async fn run_load(live: &Live, sender: &mut Sender, down: bool) {
    while !live.stop_load.load(Ordering::Relaxed) {
        let r = if down {
            match sender.send(client::get(&live.urls[1])).await {
                Ok(r) => body::drain(r.into_body(), Some(&live.down))
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            }
        } else {
            let z = Zeros::new(u64::MAX)
                .chunk(super::NOTSENT_LOWAT as usize)
                .until(Arc::clone(&live.stop_load))
                .counted(Arc::clone(&live.up));
            let req = client::request(Method::POST, &live.urls[2], z.boxed());
            sender
                .send(req)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        if let Err(e) = r {
            if !live.stop_load.load(Ordering::Relaxed) {
                live.error(format!(
                    "load connection ({}): {e}",
                    if down { "down" } else { "up" }
                ));
            }
            return;
        }
    }
}

/// A GET of the small object on `s`, timed to its last byte, ms.
async fn get_small(s: &mut Sender, uri: &Uri) -> Result<f64, String> {
    let t = Instant::now();
    let r = tokio::time::timeout(PROBE_DEADLINE, async {
        let r = s.send(client::get(uri)).await.map_err(|e| e.to_string())?;
        r.into_body().collect().await.map_err(|e| e.to_string())
    })
    .await
    .map_err(|_| "probe: no answer in 10 s".to_string())?;
    r?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// One foreign probe: a new connection, its TLS handshake, a GET of the small object.
async fn foreign(live: Arc<Live>) {
    let t = live.t();
    let mut c = match live.connect(false).await {
        Ok(c) => c,
        Err(e) => return live.error(format!("foreign probe: {e}")),
    };
    let http = match get_small(&mut c.sender, &live.urls[0]).await {
        Ok(ms) => ms,
        Err(e) => return live.error(format!("foreign probe: {e}")),
    };
    let tls_ms =
        c.tls.unwrap_or_default().as_secs_f64() * 1e3 / f64::from(c.tls_round_trips.max(1));
    let mut s = live.samples.lock().unwrap_or_else(PoisonError::into_inner);
    s.tcp_f.push((t, c.tcp.as_secs_f64() * 1e3));
    s.tls_f.push((t, tls_ms));
    s.http_f.push((t, http));
}

/// One self probe on the `k`-th load connection (round robin).
async fn self_probe(live: Arc<Live>, k: usize) {
    let t = live.t();
    let sender = {
        let v = live.senders.lock().unwrap_or_else(PoisonError::into_inner);
        if v.is_empty() {
            return;
        }
        v[k % v.len()].1.share()
    };
    let Some(mut s) = sender else { return };
    match get_small(&mut s, &live.urls[0]).await {
        Ok(ms) => live
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .http_l
            .push((t, ms)),
        Err(e) => live.error(format!("self probe: {e}")),
    }
}

/// The run's clock: when the next probes, goodput sample and interval are due, and what the
/// intervals have found.
struct Pace {
    next_probe: f64,
    next_second: f64,
    next_interval: f64,
    probes: usize,
    /// (time, down bytes, up bytes) at the last goodput sample.
    last: (f64, u64, u64),
    interval_bytes: u64,
    goodput: Vec<(f64, f64, f64)>,
    ramp: Ramp,
    running: usize,
    rpm_now: Option<Rpm>,
}

impl Pace {
    fn new(o: &Options) -> Pace {
        Pace {
            next_probe: 0.0,
            next_second: 1.0,
            next_interval: o.interval_s,
            probes: 0,
            last: (0.0, 0, 0),
            interval_bytes: 0,
            goodput: Vec::new(),
            ramp: Ramp::new(0.0, o.interval_s, o.max_flows),
            running: 0,
            rpm_now: None,
        }
    }

    /// Start the load connections the ramp asks for, and the probes that are due.
    fn spawn(&mut self, live: &Arc<Live>, t: f64) {
        while self.running < self.ramp.flows {
            tokio::spawn(load(Arc::clone(live), true));
            tokio::spawn(load(Arc::clone(live), false));
            self.running += 1;
        }
        if t >= self.next_probe {
            tokio::spawn(foreign(Arc::clone(live)));
            tokio::spawn(self_probe(Arc::clone(live), self.probes));
            self.probes += 1;
            self.next_probe += 1.0 / PROBES_PER_S;
        }
    }

    /// A goodput sample each second.
    fn second(&mut self, live: &Live, t: f64) {
        if t < self.next_second {
            return;
        }
        let (d, u) = (
            live.down.load(Ordering::Relaxed),
            live.up.load(Ordering::Relaxed),
        );
        let last = self.last;
        let mbps = |b: u64, a: u64| b.saturating_sub(a) as f64 * 8.0 / (t - last.0) / 1e6;
        self.goodput.push((t, mbps(d, last.1), mbps(u, last.2)));
        self.last = (t, d, u);
        self.next_second += 1.0;
    }

    /// At an interval's end: the ramp's step and RPM so far; true when the draft's end is
    /// reached (goodput saturated, then responsiveness stable).
    fn interval(&mut self, live: &Live, o: &Options, t: f64) -> bool {
        if t < self.next_interval {
            return false;
        }
        let end = self.next_interval;
        let total = live.down.load(Ordering::Relaxed) + live.up.load(Ordering::Relaxed);
        let mbps = total.saturating_sub(self.interval_bytes) as f64 * 8.0 / o.interval_s / 1e6;
        self.interval_bytes = total;
        self.ramp.interval_done(end, mbps);
        self.rpm_now = rpm_of(live, &self.goodput, end, o.interval_s);
        if o.progress {
            progress(
                live,
                &self.goodput,
                self.running,
                end,
                self.rpm_now.as_ref(),
            );
        }
        self.next_interval += o.interval_s;
        let stable = self
            .rpm_now
            .as_ref()
            .is_some_and(|r| r.confidence == rpm::Confidence::High);
        if self.ramp.saturated_at_s.is_some() && stable {
            self.ramp.ended_at_s = Some(t);
            return true;
        }
        false
    }
}

async fn test(o: &Options, stop: &AtomicBool) -> Result<Outcome, String> {
    let (live, cfg) = live_of(o).await?;
    let live = Arc::new(live);
    let mut pace = Pace::new(o);
    let interrupted = loop {
        let t = live.t();
        pace.spawn(&live, t);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let t = live.t();
        if stop.load(Ordering::Relaxed) {
            break true;
        }
        pace.second(&live, t);
        if pace.interval(&live, o, t) || t >= o.length_s {
            break false;
        }
    };
    live.stop_load.store(true, Ordering::Relaxed);
    let elapsed_s = live.t();
    let rpm = rpm_of(&live, &pace.goodput, elapsed_s, o.interval_s).or(pace.rpm_now);
    let s = std::mem::take(&mut *live.samples.lock().unwrap_or_else(PoisonError::into_inner));
    let http2 = live.http2.load(Ordering::Relaxed);
    let errors = live.errors.lock().map(|v| v.clone()).unwrap_or_default();
    Ok(Outcome {
        config_url: o.config_url.clone(),
        urls: [cfg.small, cfg.large, cfg.upload],
        http2,
        elapsed_s,
        interrupted,
        tcp_f: s.tcp_f,
        tls_f: s.tls_f,
        http_f: s.http_f,
        http_l: s.http_l,
        goodput: pace.goodput,
        ramp: pace.ramp,
        rpm,
        errors,
    })
}

/// RPM over [0, t] with the samples so far. The draft's intervals are `interval_s` long;
/// `rpm::compute_with` uses the draft's 5 s, so shorter intervals (tests) are scaled onto it.
fn rpm_of(live: &Live, goodput: &[(f64, f64, f64)], t: f64, interval_s: f64) -> Option<Rpm> {
    let s = live.samples.lock().unwrap_or_else(PoisonError::into_inner);
    let scale = rpm::ID_S / interval_s;
    let sc = |v: &[Timed]| -> Vec<Timed> { v.iter().map(|x| (x.0 * scale, x.1)).collect() };
    let gp: Vec<Timed> = goodput.iter().map(|g| (g.0 * scale, g.1 + g.2)).collect();
    let (tcp, tls, http, l) = (sc(&s.tcp_f), sc(&s.tls_f), sc(&s.http_f), sc(&s.http_l));
    rpm::compute_with(0.0, t * scale, &[&tcp, &tls, &http], &l, &gp, DEFINITION)
}

fn progress(live: &Live, goodput: &[(f64, f64, f64)], flows: usize, t: f64, r: Option<&Rpm>) {
    let last = goodput.last().copied().unwrap_or_default();
    let rpm = r.map_or("n/a".to_string(), |r| {
        format!("{:.0} RPM ({})", r.rpm, r.class)
    });
    let errs = live.errors.lock().map(|v| v.len()).unwrap_or(0);
    eprintln!(
        "  {t:5.0} s  {flows} connection(s) each way  down {:.1} Mbit/s  up {:.1} Mbit/s  {rpm}{}",
        last.1,
        last.2,
        if errs > 0 {
            format!("  ({errs} errors so far)")
        } else {
            String::new()
        }
    );
}
