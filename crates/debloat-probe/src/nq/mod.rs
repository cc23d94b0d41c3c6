//! The IETF responsiveness test (draft-ietf-ippm-responsiveness-09) as the draft and Apple's
//! `networkQuality` run it: HTTP/2 over TLS against any server that publishes the draft's
//! configuration, and the server side of it in `debloat server --https`.
//!
//! - [`Config`]: the configuration document at the config URL (`/.well-known/nq` by the
//!   draft): a version, the URLs of a small (1-byte) object, a large object and an upload
//!   sink, all on one host. Both the draft's key names and the older `*_https_*` names of
//!   Apple's servers are read, and both are served.
//! - [`server`]: the endpoints — `/.well-known/nq` (also `/config`), `/small`, `/large`
//!   ([`LARGE_BYTES`] of zeros), `/slurp` (POST or PUT, discarded).
//! - [`client`]: the test — load-generating connections up and down at once (as
//!   `networkQuality` does by default), added one per interval by the draft's ramp
//!   ([`crate::rpm::Ramp`]); foreign probes (a new TCP connection, a TLS handshake, a GET of
//!   the small object) and self probes (a GET of the small object on a load connection's own
//!   HTTP/2 connection); RPM as the draft computes it with TLS ([`crate::rpm::compute_with`]:
//!   Foreign = 60000 / mean(TM(tcp_f), TM(tls_f), TM(http_f)), Loaded = 60000 / TM(http_l),
//!   RPM = their mean).
//!
//! Where debloat deviates: DNS time is not measured (the host is resolved once, before the
//! load); the TLS time is divided by the handshake's round trips (1 for TLS 1.3, 2 for 1.2) as
//! the draft says; probes run at a fixed 10 per second of each kind, far under the draft's
//! ceiling of 100 per second and 5 % of capacity; the server's sockets and the client's load
//! connections cap their unsent data (the socket's TCP_NOTSENT_LOWAT, rustls' record buffer,
//! HTTP/2's stream buffer and the body's chunks) at a fixed [`NOTSENT_LOWAT`] bytes each rather
//! than the draft's throughput × 5 ms.

pub mod client;
pub mod server;

use serde::Deserialize;

/// The large object's size: 8 GiB, as Apple's servers serve.
pub const LARGE_BYTES: u64 = 8 << 30;
/// Unsent bytes a load connection's socket may hold (TCP_NOTSENT_LOWAT), and its TLS and
/// HTTP/2 send buffers and body chunks: 8 KiB, about 5 ms at 13 Mbit/s per connection.
pub const NOTSENT_LOWAT: u32 = 8 * 1024;
/// The draft's well-known path of the configuration.
pub const WELL_KNOWN: &str = "/.well-known/nq";

/// The configuration document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Its version (1).
    pub version: u64,
    /// URL of the small (1-byte) object.
    pub small: String,
    /// URL of the large object.
    pub large: String,
    /// URL that takes uploads.
    pub upload: String,
    /// Where the test should connect instead of the URLs' host (`test_endpoint`), if set.
    pub test_endpoint: Option<String>,
}

#[derive(Deserialize)]
struct Raw {
    version: Option<u64>,
    urls: RawUrls,
    test_endpoint: Option<String>,
}

#[derive(Deserialize)]
struct RawUrls {
    small_download_url: Option<String>,
    small_https_download_url: Option<String>,
    large_download_url: Option<String>,
    large_https_download_url: Option<String>,
    upload_url: Option<String>,
    https_upload_url: Option<String>,
}

impl Config {
    /// Read a configuration document; an error names what is missing.
    pub fn parse(json: &str) -> Result<Config, String> {
        let r: Raw = serde_json::from_str(json).map_err(|e| {
            format!("the config is not the draft's JSON ({{\"version\":1,\"urls\":{{…}}}}): {e}")
        })?;
        let pick = |a: Option<String>, b: Option<String>, name: &str| {
            a.or(b).ok_or_else(|| {
                format!("the config has no urls.{name} (nor its *_https_* spelling)")
            })
        };
        let u = r.urls;
        Ok(Config {
            version: r.version.unwrap_or(1),
            small: pick(
                u.small_download_url,
                u.small_https_download_url,
                "small_download_url",
            )?,
            large: pick(
                u.large_download_url,
                u.large_https_download_url,
                "large_download_url",
            )?,
            upload: pick(u.upload_url, u.https_upload_url, "upload_url")?,
            test_endpoint: r.test_endpoint,
        })
    }

    /// The document for a server reached as `authority` (HOST[:PORT]), both spellings of
    /// the keys.
    pub fn served(authority: &str) -> String {
        let u = |p: &str| format!("https://{authority}{p}");
        serde_json::json!({
            "version": 1,
            "urls": {
                "small_download_url": u("/small"),
                "large_download_url": u("/large"),
                "upload_url": u("/slurp"),
                "small_https_download_url": u("/small"),
                "large_https_download_url": u("/large"),
                "https_upload_url": u("/slurp"),
            }
        })
        .to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_read_and_a_missing_url_is_named() {
        let c = Config::parse(&Config::served("198.18.0.2:4443")).unwrap();
        assert_eq!(c.small, "https://198.18.0.2:4443/small");
        assert_eq!(c.upload, "https://198.18.0.2:4443/slurp");
        let apple = r#"{"version":1,"urls":{"small_https_download_url":"https://a/s","large_https_download_url":"https://a/l","https_upload_url":"https://a/u"},"test_endpoint":"a.example"}"#;
        let c = Config::parse(apple).unwrap();
        assert_eq!(
            (c.large.as_str(), c.test_endpoint.as_deref()),
            ("https://a/l", Some("a.example"))
        );
        let e = Config::parse(
            r#"{"version":1,"urls":{"small_download_url":"x","large_download_url":"y"}}"#,
        )
        .expect_err("no upload");
        assert!(e.contains("urls.upload_url"), "{e}");
        assert!(Config::parse("<html>")
            .expect_err("not json")
            .contains("draft's JSON"));
    }
}
