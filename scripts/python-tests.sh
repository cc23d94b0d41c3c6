#!/usr/bin/env bash
# The Python package (crates/debloat-py, issue #45), as a user gets it: maturin builds the wheel
# from the workspace, a fresh venv installs it with its test dependencies from PyPI (no Rust in
# that venv), the acceptance line runs, then pytest checks the API and the Dask sweeps against
# the CLI (target/release/debloat: run after `cargo build --release` or the README's test
# command). About a minute, most of it pip. DEBLOAT_VENV=DIR keeps the venv between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
venv="${DEBLOAT_VENV:-$work/venv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
pip() { "$venv/bin/python" -m pip -q --disable-pip-version-check "$@" 2>&1 | grep -v 'Running pip as' || true; }
pip install "maturin>=1.9,<2"
"$venv/bin/maturin" build --release --quiet -m crates/debloat-py/Cargo.toml -o "$work/wheels" 2>&1 | grep -E "error|warning: unused|Built wheel" || true
wheel="$(ls "$work"/wheels/debloat-*.whl)"
echo "wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"
pip install --force-reinstall "$wheel" "pytest>=7" "dask[distributed]>=2023.1" "matplotlib>=3.5" "scipy>=1.9" "polars>=0.20"
"$venv/bin/python" -c "import debloat, dask, pandas, pyarrow; print('debloat', debloat.__version__, '· dask', dask.__version__, '· pandas', pandas.__version__, '· pyarrow', pyarrow.__version__)"
# The issue's acceptance line, verbatim.
(cd "$work" && "$venv/bin/python" -c "import debloat; print(debloat.sim(test='rrul', link='20Mbit/2Mbit', qdisc='cake', length=10).flows)" | tail -3)
DEBLOAT_BIN="$PWD/target/release/debloat" "$venv/bin/python" -m pytest -q -p no:cacheprovider crates/debloat-py/python/tests
