//! Why a change to a running gateway (`gateway set`, `gateway reload`, SIGHUP) was not made.
//! The running configuration is kept whole whenever one of these is returned.

/// Why a change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// Words that do not parse (a rate, netem's words).
    #[error("{what}: {why}")]
    Words {
        /// The words, as given.
        what: String,
        /// What is wrong.
        why: String,
    },
    /// A part that is read only at start.
    #[error("{what} cannot change while running{detail}: restart the gateway")]
    NeedsRestart {
        /// Which part (`the interfaces`, `egress: the emulated link's \`buffer\``).
        what: String,
        /// The old and new values, when they help (` (a ⇄ b → c ⇄ d)`), or nothing.
        detail: String,
    },
    /// Only a shaper's rate can change at run time, and this discipline has none.
    #[error("this discipline has no shaper (only cake's bandwidth can change)")]
    NoShaper,
    /// A rate controller asked of a discipline other than cake.
    #[error("{side}: a shaper-rate controller needs cake, and the new discipline is `{spec}`")]
    AutorateNeedsCake {
        /// `egress` or `ingress`.
        side: &'static str,
        /// The discipline given.
        spec: String,
    },
    /// A `gateway set` the control socket does not know.
    #[error("unknown setting `{0}`: expected egress, ingress, emulate-egress or emulate-ingress")]
    UnknownSetting(String),
    /// The configuration could not be read again (the reader's message: a file, a flag).
    #[error("{0}")]
    Reread(String),
}

impl ChangeError {
    pub(crate) fn restart(what: impl Into<String>) -> ChangeError {
        ChangeError::NeedsRestart {
            what: what.into(),
            detail: String::new(),
        }
    }
}
