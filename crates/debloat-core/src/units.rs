//! Numbers with units, read and written the way `tc` does (iproute2 `get_rate64`, `get_time64`,
//! `get_size`, `sprint_rate`, `sprint_time`, `sprint_size`).
//!
//! * Rates: `bit`, `kbit`, `mbit`, `gbit`, `tbit` (powers of 1000), `kibit` … (1024), `bps`,
//!   `kbps`, `mbps`, `gbps`, `tbps` (bytes/s), case-insensitive; a bare number is bit/s.
//! * Times: `s`/`sec`/`secs`, `ms`/`msec`/`msecs`, `us`/`usec`/`usecs`, `ns`/`nsec`/`nsecs`;
//!   a bare number is microseconds.
//! * Sizes: `b`, `k`/`kb` (1024), `m`/`mb`, `g`/`gb`, `kbit`/`mbit`/`gbit` (bits, /8); a bare
//!   number is bytes. (tc's `Mb` is a mebibyte, as in `memory_limit 32Mb`.)

use thiserror::Error;

/// A value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{value}` is not a valid {what}: {hint}")]
pub struct UnitError {
    /// The token as given.
    pub value: String,
    /// What was expected ("rate", "time", "size").
    pub what: &'static str,
    /// How to write it.
    pub hint: &'static str,
}

const RATE_HINT: &str =
    "use a number with bit, kbit, Mbit, Gbit, Tbit (or bps, kbps, Mbps for bytes/s), e.g. 20Mbit";
const TIME_HINT: &str = "use a number with s, ms, us or ns, e.g. 5ms";
const SIZE_HINT: &str =
    "use a number with b, kb, mb, gb (1024-based bytes) or kbit, mbit, e.g. 32Mb";

/// The number and the (lower-cased) unit after it: `"14.5ms"` → `("14.5", "ms")`.
fn split_number(s: &str) -> (&str, String) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    (num, unit.to_ascii_lowercase())
}

/// `num × mult`, rounded to the nearest whole unit, when below `limit`.
///
/// A plain decimal (`8882023002.3`) is scaled exactly, in integers: iproute2 multiplies a
/// `double` (`strtod`) and so turns 8882023002.3 ms into 8882023002299999 ns, and then the
/// words we print for a value would not read back as that value. Digits past the 18th after the
/// point are dropped (below a billionth of the smallest unit any multiplier here reaches).
/// The exponent form (`1e3`) goes through `f64`, as in tc.
fn scaled(num: &str, mult: u64, limit: u64) -> Option<u64> {
    if num.contains(['e', 'E']) {
        let v = num.parse::<f64>().ok()? * mult as f64;
        return (v.is_finite() && v >= 0.0 && v < limit as f64).then(|| v.round() as u64);
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return None;
    }
    let whole: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let frac = &frac[..frac.len().min(18)];
    let part: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let den = 10u128.pow(frac.len() as u32);
    let m = u128::from(mult);
    let v = whole
        .checked_mul(m)?
        .checked_add((part * m + den / 2) / den)?;
    (v < u128::from(limit)).then_some(v as u64)
}

fn err(value: &str, what: &'static str, hint: &'static str) -> UnitError {
    UnitError {
        value: value.to_string(),
        what,
        hint,
    }
}

/// Parse a rate; returns bits per second.
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    let bad = || err(s, "rate", RATE_HINT);
    let (num, unit) = split_number(s);
    let mult: u64 = match unit.as_str() {
        "" | "bit" => 1,
        "kbit" => 1_000,
        "mbit" => 1_000_000,
        "gbit" => 1_000_000_000,
        "tbit" => 1_000_000_000_000,
        "kibit" => 1 << 10,
        "mibit" => 1 << 20,
        "gibit" => 1 << 30,
        "tibit" => 1 << 40,
        "bps" => 8,
        "kbps" => 8_000,
        "mbps" => 8_000_000,
        "gbps" => 8_000_000_000,
        "tbps" => 8_000_000_000_000,
        "kibps" => 8 << 10,
        "mibps" => 8 << 20,
        "gibps" => 8 << 30,
        _ => return Err(bad()),
    };
    scaled(num, mult, u64::MAX).ok_or_else(bad)
}

/// Parse a time; returns nanoseconds.
pub fn parse_time(s: &str) -> Result<u64, UnitError> {
    let bad = || err(s, "time", TIME_HINT);
    let (num, unit) = split_number(s);
    let mult: u64 = match unit.as_str() {
        "s" | "sec" | "secs" => 1_000_000_000,
        "ms" | "msec" | "msecs" => 1_000_000,
        "" | "us" | "usec" | "usecs" => 1_000,
        "ns" | "nsec" | "nsecs" => 1,
        _ => return Err(bad()),
    };
    scaled(num, mult, 18_000_000_000_000_000_000).ok_or_else(bad)
}

/// Parse a size; returns bytes.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let bad = || err(s, "size", SIZE_HINT);
    let (num, unit) = split_number(s);
    // tc's bit sizes are 1024-based bits: `kbit` is 1024/8 = 128 bytes.
    let mult: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        "kbit" => 1 << 7,
        "mbit" => 1 << 17,
        "gbit" => 1 << 27,
        _ => return Err(bad()),
    };
    scaled(num, mult, u64::MAX).ok_or_else(bad)
}

/// Format bits/s as tc does: `20Mbit`, `1250Kbit`, `64Kbit`, `999bit`.
/// iproute2's `sprint_rate`: divide by 1000 (whole numbers, remainders dropped) while the
/// rate is a whole multiple or at least 1000 of the next unit: 15312500 → `15312Kbit`.
pub fn fmt_rate(bits: u64) -> String {
    let units = ["bit", "Kbit", "Mbit", "Gbit", "Tbit"];
    let mut r = bits;
    let mut i = 0;
    while i + 1 < units.len() && r >= 1000 && (r % 1000 == 0 || r >= 1_000_000) {
        r /= 1000;
        i += 1;
    }
    format!("{r}{}", units[i])
}

/// Format nanoseconds as tc does: `100ms`, `14.5ms`, `500us`, `1s`.
pub fn fmt_time(ns: u64) -> String {
    let (v, unit) = if ns >= 1_000_000_000 {
        (ns as f64 / 1e9, "s")
    } else if ns >= 1_000_000 {
        (ns as f64 / 1e6, "ms")
    } else if ns >= 1_000 {
        (ns as f64 / 1e3, "us")
    } else {
        return format!("{ns}ns");
    };
    format!("{}{unit}", g3(v))
}

/// C's `%.3g` for a value ≥ 1, as iproute2 prints times: three significant digits, trailing
/// zeros dropped (109.5 → "110", 5.8125 → "5.81", 14.5 → "14.5", 5 → "5"), and from 999.5 on
/// the exponent form (1001 → "1e+03", 12345 → "1.23e+04": seconds past 1000 print so).
fn g3(v: f64) -> String {
    if v >= 999.5 {
        let sci = format!("{v:.2e}");
        let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        let mant = mant.trim_end_matches('0').trim_end_matches('.');
        return format!("{mant}e+{:0>2}", exp);
    }
    let decimals = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{v:.decimals$}");
    // Rounding can carry into a fourth digit (99.95 → "100.0"): %.3g then prints "100".
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Microseconds as iproute2 prints a `u32` time in µs (CoDel's and CAKE's statistics):
/// `0us`, `950us`, `14.5ms`.
pub fn fmt_usecs(us: u64) -> String {
    if us >= 1000 {
        fmt_time(us * 1000)
    } else {
        format!("{us}us")
    }
}

/// Format bits/s exactly, in the largest unit that keeps it whole: `20Mbit`, `1250Kbit`,
/// `1234560bit`. Specs print with this so they re-parse to the same value.
pub fn fmt_rate_exact(bits: u64) -> String {
    for (unit, per) in [
        ("Gbit", 1_000_000_000u64),
        ("Mbit", 1_000_000),
        ("Kbit", 1_000),
    ] {
        if bits >= per && bits % per == 0 {
            return format!("{}{unit}", bits / per);
        }
    }
    format!("{bits}bit")
}

/// Format nanoseconds exactly, in the largest unit that keeps it whole or with one decimal:
/// `5ms`, `14.5ms`, `1010us`, `2500ns`. Specs print with this so they re-parse to the same value.
pub fn fmt_time_exact(ns: u64) -> String {
    for (unit, per) in [("s", 1_000_000_000u64), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= per && ns.checked_mul(10).is_some_and(|x| x % per == 0) {
            return if ns % per == 0 {
                format!("{}{unit}", ns / per)
            } else {
                format!("{}.{}{unit}", ns / per, ns % per * 10 / per)
            };
        }
    }
    format!("{ns}ns")
}

/// Format bytes as tc does: `32Mb`, `4Mb`, `1514b`, `1478656b`.
pub fn fmt_size(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{}Mb", b >> 20)
    } else if b >= 1 << 10 && b % (1 << 10) == 0 {
        format!("{}Kb", b >> 10)
    } else {
        format!("{b}b")
    }
}

/// A size as iproute2's `sprint_size` prints what the kernel reports: `Mb` when within 1 KiB of
/// a whole MiB, `Kb` when within 16 bytes of a whole KiB (32767 → `32Kb`), else bytes. Not
/// exact, so for statistics and tc's text, never for spec words ([`fmt_size`]).
pub fn fmt_size_tc(b: u64) -> String {
    let (kilo, mega) = (1024.0, 1024.0 * 1024.0);
    let x = b as f64;
    if x >= mega && (mega * (x / mega).round() - x).abs() < 1024.0 {
        format!("{:.0}Mb", (x / mega).round())
    } else if x >= kilo && (kilo * (x / kilo).round() - x).abs() < 16.0 {
        format!("{:.0}Kb", (x / kilo).round())
    } else {
        format!("{b}b")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_iproute2_prints_them() {
        assert_eq!(fmt_size_tc(32767), "32Kb");
        assert_eq!(fmt_size_tc(102412), "100Kb");
        assert_eq!(fmt_size_tc(12344), "12344b");
        assert_eq!(fmt_size_tc(1540), "1540b");
        assert_eq!(fmt_size_tc(1049000), "1Mb");
        assert_eq!(fmt_size_tc(1048000), "1048000b");
        assert_eq!(fmt_size_tc(100000), "100000b");
    }

    #[test]
    fn rates_as_tc_reads_them() {
        assert_eq!(parse_rate("20Mbit"), Ok(20_000_000));
        assert_eq!(parse_rate("20mbit"), Ok(20_000_000));
        assert_eq!(parse_rate("1.5Gbit"), Ok(1_500_000_000));
        assert_eq!(parse_rate("64kbit"), Ok(64_000));
        assert_eq!(parse_rate("1Mbps"), Ok(8_000_000));
        assert_eq!(parse_rate("1000"), Ok(1000));
        assert!(parse_rate("20Mbits").is_err());
        assert!(parse_rate("fast").is_err());
    }

    #[test]
    fn times_and_sizes_as_tc_reads_them() {
        assert_eq!(parse_time("5ms"), Ok(5_000_000));
        assert_eq!(
            parse_time("100"),
            Ok(100_000),
            "bare number is microseconds"
        );
        assert_eq!(parse_time("1s"), Ok(1_000_000_000));
        assert_eq!(parse_time("250us"), Ok(250_000));
        assert_eq!(parse_size("32Mb"), Ok(33_554_432));
        assert_eq!(parse_size("1514"), Ok(1514));
        assert_eq!(parse_size("4kb"), Ok(4096));
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn exact_times_round_trip() {
        for ns in [
            5_000_000,
            14_500_000,
            1_010_000,
            2_500,
            7,
            100_000_000,
            1_500_000_000,
            3_600_000_000_000,
        ] {
            assert_eq!(
                parse_time(&fmt_time_exact(ns)),
                Ok(ns),
                "{}",
                fmt_time_exact(ns)
            );
        }
        assert_eq!(fmt_time_exact(5_000_000), "5ms");
        assert_eq!(fmt_time_exact(1_010_000), "1010us");
    }

    /// Found by the netem_words fuzz target: 8882023002.3 × 1e6 in floating point is
    /// 8882023002299999.x, so `slot 8882023002.3ms` read back one nanosecond short.
    #[test]
    fn decimals_scale_exactly_and_bad_numbers_are_errors() {
        assert_eq!(parse_time("8882023002.3ms"), Ok(8_882_023_002_300_000));
        assert_eq!(parse_time(".5ms"), Ok(500_000));
        assert_eq!(parse_time("2.ms"), Ok(2_000_000));
        assert_eq!(parse_time("0.0000004ms"), Ok(0), "rounds to the nearest ns");
        assert_eq!(parse_time("0.0000005ms"), Ok(1));
        assert_eq!(parse_time("1e3us"), Ok(1_000_000), "exponents as tc");
        assert_eq!(parse_rate("1.000000001Gbit"), Ok(1_000_000_001));
        assert_eq!(parse_size("1.5kbit"), Ok(192));
        assert_eq!(
            parse_rate("18446744073709551615bit"),
            Err(err("18446744073709551615bit", "rate", RATE_HINT))
        );
        for bad in [
            ".ms",
            "1.2.3ms",
            "ms",
            "1e",
            "99999999999999999999s",
            "-5ms",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_as_tc_prints_them() {
        assert_eq!(fmt_rate(20_000_000), "20Mbit");
        assert_eq!(fmt_rate(1_250_000), "1250Kbit");
        assert_eq!(fmt_rate(5_000_000), "5Mbit");
        assert_eq!(fmt_time(5_000_000), "5ms");
        assert_eq!(fmt_time(14_500_000), "14.5ms");
        assert_eq!(fmt_time(100_000_000), "100ms");
        // iproute2's %.3g: three significant digits.
        assert_eq!(fmt_time(109_500_000), "110ms");
        assert_eq!(fmt_time(5_812_500), "5.81ms");
        assert_eq!(fmt_time(9_080_000), "9.08ms");
        assert_eq!(fmt_time(290_700_000), "291ms");
        assert_eq!(fmt_time(50_000), "50us");
        assert_eq!(fmt_time(1_024_000_000), "1.02s");
        assert_eq!(fmt_time(1_001_000_000_000), "1e+03s");
        assert_eq!(fmt_time(12_345_000_000_000), "1.23e+04s");
        assert_eq!(fmt_usecs(0), "0us");
        assert_eq!(fmt_rate(15_312_500), "15312Kbit");
        assert_eq!(fmt_rate(17_500_000), "17500Kbit");
        assert_eq!(fmt_size(33_554_432), "32Mb");
        assert_eq!(fmt_size(1514), "1514b");
    }
}
