//! The `debloat` binary: everything is in the library (`lib.rs`), shared with the Python package.

fn main() {
    debloat_cli::cli_main();
}
