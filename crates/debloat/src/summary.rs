//! Small statistics helpers shared by the commands' printed summaries.

/// Nanoseconds as milliseconds with sensible precision.
pub fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Bytes over a duration as Mbit/s.
pub fn mbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        return 0.0;
    }
    bytes as f64 * 8.0 * 1e3 / ns as f64
}

/// Overwrite the terminal's current line with `what` and a percentage (stderr).
pub fn progress_line(what: &str, fraction: f64) {
    eprint!("\r\x1b[2K  {what}: {:3.0}%", fraction * 100.0);
}
