"""settings.py, the one reader of the operator's variables: every `_MB` size is read one way."""

from __future__ import annotations

import pytest

from playground import limits
from playground.serving.quotas import Quotas
from playground.settings import MB, env_megabytes


def test_a_size_in_mb_is_mebibytes_fractions_allowed(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_DATA_MB", "1.5")
    monkeypatch.setenv("PLAYGROUND_MAX_VISITOR_MB", "1.5")
    assert limits.max_data_bytes() == Quotas.from_env(shared=True).bytes_per_visitor == int(1.5 * MB)
    monkeypatch.delenv("PLAYGROUND_MAX_DATA_MB")
    assert limits.max_data_bytes() == 200 * MB  # unset: the default


@pytest.mark.parametrize("raw", ["0", "-3", "lots"])
def test_a_size_that_is_not_a_positive_number_is_a_start_up_error_naming_it(monkeypatch, raw):
    monkeypatch.setenv("PLAYGROUND_MAX_TOTAL_MB", raw)
    with pytest.raises(ValueError, match="PLAYGROUND_MAX_TOTAL_MB"):
        env_megabytes("PLAYGROUND_MAX_TOTAL_MB", 5000)
