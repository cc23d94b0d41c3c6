//! `debloat._native`: the Python package's door into the Rust library (`debloat_cli::api`).
//!
//! Every function takes the command line's words as a list of strings and returns JSON text;
//! `python/debloat` turns the JSON into data frames (through Arrow) and keyword arguments into
//! words. The simulation runs with the GIL released, so several Python threads (or Dask's
//! threaded workers) run simulations at once. A refused call raises `debloat.DebloatError`
//! (a `ValueError`) with the CLI's own message; `UsageError` (its subclass) when the words did
//! not parse.

use debloat_cli::api::{self, ApiError};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

// Named as `debloat._native.…` so that an exception raised on a Dask worker unpickles on the
// client as itself.
create_exception!(
    debloat._native,
    DebloatError,
    PyValueError,
    "A run refused its words or failed."
);
create_exception!(
    debloat._native,
    UsageError,
    DebloatError,
    "The words did not parse (clap's message)."
);

fn to_py(e: ApiError) -> PyErr {
    match e {
        ApiError::Usage(m) => UsageError::new_err(m),
        ApiError::Run(m) => DebloatError::new_err(m),
    }
}

/// `debloat sim WORDS…` → JSON `{"test", "runs": [{"seed", "summary", "flent"}]}`.
#[pyfunction]
fn sim(py: Python<'_>, words: Vec<String>) -> PyResult<String> {
    py.detach(|| api::sim(&words)).map_err(to_py)
}

/// Check `debloat sim WORDS…` without running it.
#[pyfunction]
fn check_sim(words: Vec<String>) -> PyResult<()> {
    api::check_sim(&words).map_err(to_py)
}

/// `debloat spec TEXT --json` → JSON `{"spec", "qdisc", "classes", "tc"}`.
#[pyfunction]
fn spec(text: &str) -> PyResult<String> {
    api::spec(text).map_err(to_py)
}

/// `debloat replay WORDS…` → the summary text the command prints (files where the words say).
#[pyfunction]
fn replay(py: Python<'_>, words: Vec<String>) -> PyResult<String> {
    py.detach(|| api::replay(&words)).map_err(to_py)
}

/// `debloat reproduce WORDS… --json` → the outcomes as JSON.
#[pyfunction]
fn reproduce(py: Python<'_>, words: Vec<String>) -> PyResult<String> {
    py.detach(|| api::reproduce(&words)).map_err(to_py)
}

/// The module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(check_sim, m)?)?;
    m.add_function(wrap_pyfunction!(spec, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add("DebloatError", m.py().get_type::<DebloatError>())?;
    m.add("UsageError", m.py().get_type::<UsageError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
