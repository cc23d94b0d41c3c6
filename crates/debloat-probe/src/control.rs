//! The TCP control line of `debloat server`: how a client asks for a bulk flow or a
//! responsiveness probe on the server's TCP port (2112 by default, the number irtt uses on UDP).
//!
//! On accept the server sends a greeting with a fresh nonce:
//! `DEBLOAT1 <nonce hex>\n`. The client answers with one request line and, when the server has
//! a key, an HMAC-MD5 over `nonce + line` so a captured request cannot be replayed:
//!
//! ```text
//! up <length_ms> <step_ms>            client sends; the server reports what it received
//! down <length_ms> <cc> <tos>         server sends with that congestion control and TOS byte
//! probe                               one-byte request/response pairs (RPM's foreign probe)
//! ... [mac=<32 hex>]
//! ```
//!
//! The server answers `OK\n` or `ERR <reason>\n`. During an upload it writes one report line
//! per step, `R <µs since the stream began> <bytes received>`, and a final `E <µs> <bytes>` after
//! the client's end of stream: throughput is measured where it was received. On a probe
//! connection each byte the client sends is answered by a line `P <rtt µs> …`: the kernel's
//! smoothed RTT of every download the server is sending to that client's address.

use hmac::{KeyInit, Mac};

/// The greeting's protocol word.
pub const MAGIC: &str = "DEBLOAT1";

/// A client's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// The client uploads for this long; the server reports every step.
    Up {
        /// Length of the flow.
        length_ms: u64,
        /// Report interval.
        step_ms: u64,
    },
    /// The server sends for this long with this congestion control and TOS byte.
    Down {
        /// Length of the flow.
        length_ms: u64,
        /// Congestion control name (`cubic`, `bbr`, `reno` …).
        cc: String,
        /// TOS byte (DSCP << 2).
        tos: u8,
    },
    /// Request/response probes on a fresh connection.
    Probe,
}

/// A request line that could not be understood; the text says which token and what was wanted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadRequest(pub String);

impl Request {
    /// The line (without HMAC or newline).
    pub fn line(&self) -> String {
        match self {
            Request::Up { length_ms, step_ms } => format!("up {length_ms} {step_ms}"),
            Request::Down { length_ms, cc, tos } => format!("down {length_ms} {cc} {tos}"),
            Request::Probe => "probe".into(),
        }
    }

    /// Parse a request line (no HMAC part).
    pub fn parse(line: &str) -> Result<Request, BadRequest> {
        let w: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize, what: &str| -> Result<u64, BadRequest> {
            let t = w
                .get(i)
                .ok_or_else(|| BadRequest(format!("missing {what}")))?;
            t.parse()
                .map_err(|_| BadRequest(format!("bad {what} `{t}`: want a whole number")))
        };
        match w.first().copied() {
            Some("up") if w.len() == 3 => Ok(Request::Up {
                length_ms: num(1, "length_ms")?,
                step_ms: num(2, "step_ms")?.max(1),
            }),
            Some("down") if w.len() == 4 => {
                let cc = w[2];
                if cc.is_empty()
                    || cc.len() > 15
                    || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
                {
                    return Err(BadRequest(format!(
                        "bad congestion control `{cc}`: want a name like cubic or bbr"
                    )));
                }
                let tos = num(3, "tos")?;
                let tos = u8::try_from(tos)
                    .map_err(|_| BadRequest(format!("bad tos `{tos}`: want 0-255")))?;
                Ok(Request::Down {
                    length_ms: num(1, "length_ms")?,
                    cc: cc.to_string(),
                    tos,
                })
            }
            Some("probe") if w.len() == 1 => Ok(Request::Probe),
            Some(k @ ("up" | "down" | "probe")) => Err(BadRequest(format!(
                "wrong number of fields for `{k}`: want `up LENGTH_MS STEP_MS`, `down LENGTH_MS CC TOS` or `probe`"
            ))),
            Some(k) => Err(BadRequest(format!(
                "unknown request `{}`: want up, down or probe",
                k.chars().take(32).collect::<String>()
            ))),
            None => Err(BadRequest("empty request".into())),
        }
    }
}

/// HMAC-MD5 of `nonce` + `line`, as 32 hex digits.
pub fn mac(key: &[u8], nonce: &str, line: &str) -> String {
    let Ok(mut m) = hmac::Hmac::<md5::Md5>::new_from_slice(key) else {
        return String::new();
    };
    m.update(nonce.as_bytes());
    m.update(line.as_bytes());
    m.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The full line a client sends: request, and the MAC when it has a key.
pub fn signed_line(req: &Request, key: Option<&[u8]>, nonce: &str) -> String {
    let line = req.line();
    match key {
        Some(k) => format!("{line} mac={}\n", mac(k, nonce, &line)),
        None => format!("{line}\n"),
    }
}

/// Check a received line against the server's key and nonce; the request if it is good.
pub fn verify_line(raw: &str, key: Option<&[u8]>, nonce: &str) -> Result<Request, BadRequest> {
    let raw = raw.trim_end_matches(['\r', '\n']);
    let (line, given) = match raw.rsplit_once(" mac=") {
        Some((l, m)) => (l, Some(m)),
        None => (raw, None),
    };
    match (key, given) {
        (Some(k), Some(m)) => {
            let want = mac(k, nonce, line);
            // Constant-time enough for 32 hex digits: compare every byte.
            let same = want.len() == m.len()
                && want
                    .bytes()
                    .zip(m.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0;
            if !same {
                return Err(BadRequest(
                    "bad HMAC (client and server keys differ?)".into(),
                ));
            }
        }
        (Some(_), None) => {
            return Err(BadRequest(
                "no HMAC, and this server requires one (debloat test --hmac KEY)".into(),
            ))
        }
        (None, Some(_)) => {
            return Err(BadRequest(
                "request carries an HMAC but this server has no key".into(),
            ))
        }
        (None, None) => {}
    }
    Request::parse(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Up {
                length_ms: 60_000,
                step_ms: 200,
            },
            Request::Down {
                length_ms: 1,
                cc: "bbr".into(),
                tos: 0xb8,
            },
            Request::Probe,
        ] {
            assert_eq!(Request::parse(&r.line()), Ok(r));
        }
    }

    #[test]
    fn bad_requests_name_the_token() {
        let e = Request::parse("sideways 3").expect_err("must fail");
        assert!(
            e.0.contains("`sideways`") && e.0.contains("up, down or probe"),
            "{e}"
        );
        let e = Request::parse("down 10 cu/bic 0").expect_err("must fail");
        assert!(e.0.contains("cu/bic"), "{e}");
        let e = Request::parse("down 10 cubic 300").expect_err("must fail");
        assert!(e.0.contains("300"), "{e}");
        let e = Request::parse("up ten 200").expect_err("must fail");
        assert!(e.0.contains("`ten`"), "{e}");
    }

    #[test]
    fn hmac_is_checked_and_bound_to_the_nonce() {
        let r = Request::Probe;
        let line = signed_line(&r, Some(b"k"), "n1");
        assert_eq!(verify_line(&line, Some(b"k"), "n1"), Ok(r.clone()));
        assert!(
            verify_line(&line, Some(b"k"), "n2").is_err(),
            "replayed under another nonce"
        );
        assert!(verify_line(&line, Some(b"other"), "n1").is_err());
        assert!(verify_line("probe\n", Some(b"k"), "n1").is_err());
        assert!(verify_line(&line, None, "n1").is_err());
    }
}
