//! What a rate someone wrote means, said in words, and rates too slow to be meant.
//!
//! tc reads `Mbps` as megabytes per second and a bare number as bits per second
//! (iproute2's `get_rate64`), and debloat keeps that reading so that a spec copied from a
//! `tc` command line, an sqm-scripts or a qosify file means what it meant there. But an ISP
//! sells "100 Mbps" meaning megabits: `cake bandwidth 100Mbps` shapes at 800 Mbit/s (no
//! effect), and `cake bandwidth 100` at 100 bit/s (a dead link). So every command says what
//! such a word means and how to write megabits ([`explain`]), and a shaper or link rate below
//! [`SLOW_RATE_BITS`] is refused unless the user says it is intended ([`too_slow`]).
//!
//! The words looked at in a spec or an emulated link ([`rate_words`]) are the values of
//! `bandwidth` (cake), `rate` and `peakrate` (tbf, netem) and `maxrate` (fq): the rates of a
//! shaper or a link, not the other numbers of a spec.

use crate::units::{fmt_rate, parse_rate};

/// Below this (64 kbit/s, a narrowband modem's rate) a shaper or link rate is taken for a
/// mistake unless the user says otherwise.
pub const SLOW_RATE_BITS: u64 = 64_000;

/// The spec words whose next word is a shaper's or a link's rate.
const RATE_KEYWORDS: [&str; 4] = ["bandwidth", "rate", "peakrate", "maxrate"];

/// The rate words of a spec or emulated link (`cake bandwidth 10Mbps nat` → `["10Mbps"]`).
pub fn rate_words(text: &str) -> Vec<&str> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| RATE_KEYWORDS.contains(&w[0].to_ascii_lowercase().as_str()))
        .map(|w| w[1])
        .filter(|w| parse_rate(w).is_ok())
        .collect()
}

/// How `word` is read, when that may surprise: bytes per second (`10Mbps`) or a bare number
/// (bits per second). None for `10Mbit`, `unlimited`, and words that are not rates.
pub fn explain(word: &str) -> Option<String> {
    let bits = parse_rate(word).ok()?;
    let digits = word
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(word.len());
    let (number, unit) = word.split_at(digits);
    let unit = unit.to_ascii_lowercase();
    let means = fmt_mbit(bits);
    if unit.is_empty() {
        return Some(format!(
            "`{word}` = {means} (a bare number is bits per second, as tc reads it; write {number}Mbit for megabits)"
        ));
    }
    if unit.ends_with("bps") {
        let prefix = &word[digits..word.len() - 3];
        return Some(format!(
            "`{word}` = {means} (tc reads {prefix}bps as {}bytes per second; write {number}{prefix}bit for {}bits)",
            byte_prefix_name(&unit),
            byte_prefix_name(&unit)
        ));
    }
    None
}

/// The refusal of a rate under [`SLOW_RATE_BITS`] (not 0: `bandwidth 0` is cake's unlimited).
pub fn too_slow(word: &str) -> Option<String> {
    let bits = parse_rate(word).ok()?;
    (bits > 0 && bits < SLOW_RATE_BITS).then(|| {
        format!(
            "`{word}` = {} is below 64 kbit/s, slower than any link a shaper is put on (did you mean {}Mbit?); if it is intended, add --allow-slow-rate",
            fmt_mbit(bits),
            word.trim_end_matches(|c: char| c.is_ascii_alphabetic())
        )
    })
}

/// A rate in words people read: `80 Mbit/s`, `10 bit/s`, `1.5 Gbit/s`.
pub fn fmt_mbit(bits: u64) -> String {
    let tc = fmt_rate(bits);
    let split = tc
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(tc.len());
    format!("{} {}/s", &tc[..split], &tc[split..])
}

fn byte_prefix_name(unit: &str) -> &'static str {
    match unit.trim_end_matches("bps") {
        "k" => "kilo",
        "m" => "mega",
        "g" => "giga",
        "t" => "tera",
        "ki" => "kibi",
        "mi" => "mebi",
        "gi" => "gibi",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn megabytes_and_bare_numbers_are_explained_and_megabits_are_not() {
        assert_eq!(
            explain("10Mbps").as_deref(),
            Some("`10Mbps` = 80 Mbit/s (tc reads Mbps as megabytes per second; write 10Mbit for megabits)")
        );
        assert_eq!(
            explain("100").as_deref(),
            Some("`100` = 100 bit/s (a bare number is bits per second, as tc reads it; write 100Mbit for megabits)")
        );
        assert!(
            explain("512kbps").is_some_and(
                |s| s.contains("= 4096 Kbit/s") && s.contains("write 512kbit for kilobits")
            ),
            "{:?}",
            explain("512kbps")
        );
        assert_eq!(explain("10Mbit"), None);
        assert_eq!(explain("unlimited"), None);
    }

    #[test]
    fn the_rate_words_of_a_spec_are_found() {
        assert_eq!(rate_words("cake bandwidth 10Mbps nat"), ["10Mbps"]);
        assert_eq!(
            rate_words("tbf rate 1mbit burst 10kb latency 50ms peakrate 2mbit mtu 1514"),
            ["1mbit", "2mbit"]
        );
        assert_eq!(rate_words("rate 10Mbit delay 10ms limit 1000"), ["10Mbit"]);
        assert!(rate_words("fq_codel limit 1000 quantum 1514").is_empty());
        assert!(rate_words("cake bandwidth unlimited").is_empty());
    }

    #[test]
    fn rates_under_64_kbit_are_refused_with_the_way_out() {
        let e = too_slow("10").expect("10 bit/s is too slow");
        assert!(e.contains("`10` = 10 bit/s is below 64 kbit/s"), "{e}");
        assert!(
            e.contains("did you mean 10Mbit?") && e.contains("--allow-slow-rate"),
            "{e}"
        );
        assert!(too_slow("63999bit").is_some());
        assert_eq!(too_slow("64kbit"), None);
        assert_eq!(too_slow("0"), None, "0 is cake's unlimited");
        assert_eq!(too_slow("10Mbps"), None);
    }
}
