//! The configuration a user already has: sqm-scripts' and qosify's OpenWrt files imported as
//! the gateway's words ([`import`]), and qosify's rule files loaded for the classify stage
//! ([`qosify_files`]).

pub mod import;
pub mod qosify_files;
