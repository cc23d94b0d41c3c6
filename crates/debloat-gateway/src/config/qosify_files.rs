//! Reading qosify's files from disk for the marking stage (`--classify FILE`): either its UCI
//! file (`/etc/config/qosify`), whose `list defaults` patterns name the map files, or a map file
//! alone, read against qosify's shipped classes and defaults (besteffort CS0, bulk LE, video
//! AF41, voice CS6; ICMP `+besteffort`, UDP `besteffort`, small-packet flows `video`).

use debloat_core::classify::qosify::{parse_uci, Config, ConfigError};
use std::path::{Path, PathBuf};

/// Why qosify's files could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// A file or folder that could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file or folder.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// A line of a file that does not parse (it names the file and line).
    #[error(transparent)]
    Parse(#[from] ConfigError),
    /// A `list defaults` pattern that names no file.
    #[error("{file}: `list defaults {pattern}` matches no file; copy the map files there or change the line")]
    NoMapFile {
        /// The UCI file.
        file: String,
        /// The pattern.
        pattern: String,
    },
}

/// qosify's shipped `/etc/config/qosify`, without its interface section.
pub const SHIPPED: &str = "config defaults
	option dscp_prio video
	option dscp_icmp +besteffort
	option dscp_default_udp besteffort
	option prio_max_avg_pkt_len 500
config class besteffort
	option ingress CS0
	option egress CS0
config class bulk
	option ingress LE
	option egress LE
config class video
	option ingress AF41
	option egress AF41
config class voice
	option ingress CS6
	option egress CS6
	option bulk_trigger_pps 100
	option bulk_trigger_timeout 5
	option dscp_bulk CS0
";

fn read(p: &Path) -> Result<String, RulesError> {
    std::fs::read_to_string(p).map_err(|source| RulesError::Read {
        path: p.to_path_buf(),
        source,
    })
}

/// `*` and `?` as fnmatch reads them, for one path component.
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => {
            matches(&pattern[1..], name) || (!name.is_empty() && matches(pattern, &name[1..]))
        }
        (Some(b'?'), Some(_)) => matches(&pattern[1..], &name[1..]),
        (Some(a), Some(b)) if a == b => matches(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The files a `list defaults` pattern names (wildcards in the last component), sorted;
/// relative patterns are relative to `base`.
pub fn expand(pattern: &str, base: &Path) -> Result<Vec<PathBuf>, RulesError> {
    let p = base.join(pattern);
    let (dir, file) = (
        p.parent().unwrap_or(Path::new(".")).to_path_buf(),
        p.file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
    );
    if !file.contains(['*', '?']) {
        return Ok(vec![p]);
    }
    let entries = std::fs::read_dir(&dir).map_err(|source| RulesError::Read {
        path: dir.clone(),
        source,
    })?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|f| {
            f.file_name()
                .is_some_and(|n| matches(file.as_bytes(), n.to_string_lossy().as_bytes()))
        })
        .collect();
    found.sort();
    Ok(found)
}

/// Load `path`: a qosify UCI file (it has `config` sections) with the map files it lists, or
/// one map file with qosify's shipped classes.
pub fn load(path: &Path) -> Result<Config, RulesError> {
    let text = read(path)?;
    let name = path.display().to_string();
    let uci = text.lines().any(|l| l.trim_start().starts_with("config "));
    if !uci {
        let mut cfg = parse_uci("qosify's shipped defaults", SHIPPED)?;
        cfg.add_map(&name, &text)?;
        return Ok(cfg);
    }
    let mut cfg = parse_uci(&name, &text)?;
    let base = path.parent().unwrap_or(Path::new("."));
    for pattern in cfg.map_files.clone() {
        let files = expand(&pattern, base)?;
        if files.is_empty() {
            return Err(RulesError::NoMapFile {
                file: name,
                pattern,
            });
        }
        for f in files {
            let t = read(&f)?;
            cfg.add_map(&f.display().to_string(), &t)?;
        }
    }
    Ok(cfg)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_uci_file_brings_its_map_files_and_a_map_file_the_shipped_classes() {
        let d = tempfile_dir();
        std::fs::write(d.join("00-defaults.conf"), "udp:53 voice\ntcp:22 +video\n").unwrap();
        std::fs::write(d.join("10-local.conf"), "198.18.0.0/15 bulk\n").unwrap();
        std::fs::write(d.join("notes.txt"), "not a map\n").unwrap();
        let uci = format!("{SHIPPED}config defaults\n\tlist defaults '*.conf'\n");
        std::fs::write(d.join("qosify"), uci).unwrap();
        let c = load(&d.join("qosify")).unwrap();
        assert_eq!(c.rules.len(), 3, "{:?}", c.rules);
        assert_eq!(c.classes.len(), 4);
        let m = load(&d.join("10-local.conf")).unwrap();
        assert_eq!((m.rules.len(), m.classes.len()), (1, 4));
        std::fs::write(
            d.join("bad"),
            "config defaults\n\tlist defaults /nonexistent-dir/*.conf\n",
        )
        .unwrap();
        let e = load(&d.join("bad")).unwrap_err();
        assert!(matches!(e, RulesError::Read { .. }), "{e:?}");
        assert!(e.to_string().contains("nonexistent-dir"), "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn wildcards_match_as_fnmatch() {
        assert!(matches(b"*.conf", b"00-defaults.conf"));
        assert!(!matches(b"*.conf", b"00-defaults.conf.bak"));
        assert!(matches(b"0?-*", b"00-x"));
        assert!(!matches(b"?", b""));
    }

    fn tempfile_dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("qosify-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
