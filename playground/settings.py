"""The one reader of the operator's environment variables (PLAYGROUND_*, SPACE_ID, SPACES_ZERO_GPU, ...), and the
one meaning of their units.

Every `PLAYGROUND_*_MB` setting counts mebibytes: `MB` is 1024**2 bytes here and wherever a size is reported from
one of them (README, "Settings"). A setting read here is read when it is used, so a test (or an operator's shell)
that changes a variable changes what the next call sees.
"""

from __future__ import annotations

import os

KB, MB, GB = 1024, 1024**2, 1024**3
ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")


def env_str(name: str, default: str = "") -> str:
    """A setting as text, stripped; `default` when it is unset or blank."""
    return os.environ.get(name, "").strip() or default


def env_flag(name: str, default: bool = False) -> bool:
    """A yes/no setting: 1/true/yes/on or 0/false/no/off (any case); `default` when unset, blank or anything else."""
    value = env_str(name).lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    return default


def env_int(name: str, default: int) -> int:
    """A positive integer setting (a count, a limit); anything else is a start-up error that says so."""
    raw = env_str(name)
    if not raw:
        return default
    try:
        value = int(float(raw))
    except ValueError:
        raise ValueError(f"The environment variable {name}={raw!r} must be a positive number.") from None
    if value < 1:
        raise ValueError(f"The environment variable {name}={raw!r} must be a positive number.")
    return value


def env_number(name: str, default: float | None) -> float | None:
    """A setting that may be any number, 0 and fractions included (minutes, hours, seconds, a quota in MB)."""
    raw = env_str(name)
    try:
        return float(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def env_megabytes(name: str, default: float) -> int:
    """A `PLAYGROUND_*_MB` size setting in bytes: a positive number of MB (mebibytes, MB above), fractions allowed;
    anything else is a start-up error that says so."""
    size = env_number(name, default)
    if not size > 0:
        raise ValueError(f"The environment variable {name}={env_str(name)!r} must be a positive number of MB.")
    return int(size * MB)


def on_space() -> bool:
    """Running on a Hugging Face Space (it sets SPACE_ID)."""
    return bool(env_str("SPACE_ID"))
