# Type stub for the PyO3 extension (crates/debloat-py/src/lib.rs).

__version__: str

class DebloatError(ValueError):
    """A run refused its words or failed (the CLI's message)."""

class UsageError(DebloatError):
    """The words did not parse (clap's message)."""

def sim(words: list[str]) -> str:
    """`debloat sim WORDS…` → JSON {"test", "runs": [{"seed", "summary", "flent"}]} (GIL released)."""

def check_sim(words: list[str]) -> None:
    """Check `debloat sim WORDS…` without running it."""

def spec(text: str) -> str:
    """`debloat spec TEXT --json` → JSON {"spec", "qdisc", "classes", "tc"}."""

def replay(words: list[str]) -> str:
    """`debloat replay WORDS…` → the summary text (files where the words say; GIL released)."""

def reproduce(words: list[str]) -> str:
    """`debloat reproduce WORDS… --json` → the outcomes as JSON (GIL released)."""
