//! qosify's `/etc/config/qosify` as a gateway setup: its `config interface` / `config device`
//! sections set up cake on both directions, and the same file (with the map files it lists)
//! configures the marking stage. As qosify's `interface.c` builds the command:
//! `cake [bandwidth BW] MODE egress|ingress [autorate-ingress] (nat|nonat dual-srchost|dual-dsthost
//! | flows) OPTIONS DIRECTION_OPTIONS`, with qosify's defaults: mode `diffserv4`, both
//! directions shaped, host isolation on, `nat` on for a logical interface and off for a device,
//! autorate off. The first section not `disabled` is used.

use super::uci::{self, Section};
use super::{spec, ImportError, Setup};
use std::path::Path;

const KNOWN: &[&str] = &[
    "name",
    "disabled",
    "bandwidth_up",
    "bandwidth_down",
    "ingress",
    "egress",
    "mode",
    "nat",
    "host_isolate",
    "autorate_ingress",
    "ingress_options",
    "egress_options",
    "options",
];

fn flag(s: &Section, k: &str, default: bool) -> bool {
    s.get(k).map_or(default, |o| {
        matches!(o.value.as_str(), "1" | "true" | "yes" | "on")
    })
}

fn val<'a>(s: &'a Section, k: &str) -> &'a str {
    s.get(k).map_or("", |o| o.value.as_str())
}

/// cake's words for one direction of section `s`.
fn cake(s: &Section, egress: bool, device: bool) -> String {
    let bw = val(
        s,
        if egress {
            "bandwidth_up"
        } else {
            "bandwidth_down"
        },
    );
    let mut w = String::from("cake");
    if !bw.is_empty() {
        w += &format!(" bandwidth {bw}");
    }
    let mode = s.get("mode").map_or("diffserv4", |o| o.value.as_str());
    w += &format!(" {mode} {}", if egress { "egress" } else { "ingress" });
    if !egress && flag(s, "autorate_ingress", false) {
        w += " autorate-ingress";
    }
    if flag(s, "host_isolate", true) {
        let nat = if flag(s, "nat", !device) {
            "nat"
        } else {
            "nonat"
        };
        w += &format!(" {nat} dual-{}host", if egress { "src" } else { "dst" });
    } else {
        w += " flows";
    }
    let dir = val(
        s,
        if egress {
            "egress_options"
        } else {
            "ingress_options"
        },
    );
    format!("{w} {} {dir}", val(s, "options"))
}

/// Import qosify's UCI file at `path` (its text given): the shaper from its first enabled
/// interface or device section, the marking stage from the file itself.
pub fn import(path: &Path, text: &str) -> Result<Setup, ImportError> {
    let file = path.display().to_string();
    let sections = uci::parse(&file, text)?;
    let ifaces: Vec<&Section> = sections
        .iter()
        .filter(|s| s.kind == "interface" || s.kind == "device")
        .collect();
    let mut warnings = Vec::new();
    let Some(&s) = ifaces.iter().find(|s| !flag(s, "disabled", false)) else {
        warnings.push(format!("{file}: no enabled `config interface` or `config device` section: the marking stage only, disciplines as given"));
        return Ok(Setup {
            classify: Some(path.to_path_buf()),
            warnings,
            ..Setup::default()
        });
    };
    let device = s.kind == "device";
    let name = s
        .get("name")
        .map(|o| o.value.clone())
        .or_else(|| s.name.clone());
    if !device {
        warnings.push(format!("{file}:{}: interface '{}' is a logical OpenWrt interface; debloat needs the device: check --wan", s.line, name.as_deref().unwrap_or("")));
    }
    for other in ifaces
        .iter()
        .filter(|o| o.line != s.line && !flag(o, "disabled", false))
    {
        warnings.push(format!(
            "{file}:{}: another enabled section; debloat shapes one link",
            other.line
        ));
    }
    for o in s
        .options
        .iter()
        .filter(|o| !KNOWN.contains(&o.key.as_str()))
    {
        warnings.push(format!(
            "{file}:{}: {} '{}': unknown to qosify; ignored",
            o.line, o.key, o.value
        ));
    }
    let side = |egress: bool| {
        let (on, k) = if egress {
            ("egress", "egress_options")
        } else {
            ("ingress", "ingress_options")
        };
        if !flag(s, on, true) {
            return Ok(None);
        }
        let line = s.get(k).or(s.get("options")).map_or(s.line, |o| o.line);
        spec(&cake(s, egress, device), &file, line, on).map(Some)
    };
    Ok(Setup {
        wan: name,
        egress: side(true)?,
        ingress: side(false)?,
        classify: Some(path.to_path_buf()),
        warnings,
    })
}
