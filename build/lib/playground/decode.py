"""The search API that model cards and the README use (`from playground.decode import translate`): kept here so
those imports work whatever the package layout inside; the code lives in playground/core/decode.py."""

from playground.core.decode import DecodeOptions, Hypothesis, Translation, beam_search, translate

__all__ = ["DecodeOptions", "Hypothesis", "Translation", "beam_search", "translate"]
