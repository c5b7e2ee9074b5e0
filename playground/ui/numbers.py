"""The numeric controls of the tabs and their checks: each control's range is declared once (a `Range`), which
draws the control and checks what is typed into it, with the same words everywhere.

A value out of its range is refused beside its control by Gradio's validators (`validator=` on an event
listener): the check runs before the event is queued, the message shows on the control itself, the handler does
not run, so no output is touched; an API client gets the message as a ValidationError (HTTP 422). `watch` also
checks a control as it is typed, for controls whose event is a button press.

Gradio's own min/max check (gr.Number and gr.Slider preprocess) would answer first, with a corner toast ("Value -5
is less than minimum value 0"), a traceback in the log and every output of the event marked failed; a slider's box
would then snap to its end while the chart shows the old value. The controls made here skip it: their range only
sets the spinner's and the slider's ends in the page. Gradio's slider also snaps its box into range when it is left
(on blur), which would drop the message and draw a value nobody typed: `KEEP_TYPED` (in the page's head) keeps the
typed value and its message. (Defining the controls makes Gradio write numbers.pyi beside this file, a stub of
their events: it is gitignored.)"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import gradio as gr

from playground.errors import PlaygroundError

# Every slider of the app is a `Slider` below; the box beside it (data-testid "number-input", Gradio's slider only)
# keeps what was typed when left: its blur never reaches Gradio's handler, which would snap it into range
KEEP_TYPED = """<script>
window.addEventListener("blur", (event) => {
  if (event.target instanceof HTMLInputElement && event.target.dataset.testid === "number-input") {
    event.stopImmediatePropagation();
  }
}, true);
</script>"""


class Number(gr.Number):
    """gr.Number whose value reaches the validator as typed (checked there, not by Gradio)."""
    is_template = True  # drawn by Gradio's own number box

    def preprocess(self, payload):
        return payload


class Slider(gr.Slider):
    """gr.Slider whose value reaches the validator as typed (its box takes any number; checked there)."""
    is_template = True  # drawn by Gradio's own slider

    def preprocess(self, payload):
        return payload


def shown(value: float) -> str:
    """A number as the page writes it: 10,000 and -3, not 10000.0 and -3.0."""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{int(value):,}" if value.is_integer() and abs(value) < 1e18 else f"{value:g}"


@dataclass(frozen=True)
class Range:
    """What a numeric control takes: `low` to `high` (None: no top), whole numbers only when `whole`."""
    label: str
    low: float
    high: float | None
    whole: bool = False

    def upto(self, high: float | None) -> Range:
        """The same control with the top its data gives now (the layers of the model drawn, the rows of a table)."""
        return replace(self, high=high)

    def span(self) -> str:
        kind = "a whole number " if self.whole else ""
        if self.high is None:
            return f"{kind}of at least {shown(self.low)}"
        return f"{kind}from {shown(self.low)} to {shown(self.high)}"

    def problem(self, value) -> str:
        """What is wrong with `value`, as said beside the control ("" when nothing)."""
        if value is None or value == "":
            return f"⚠️ {self.label} must be {self.span()}; the box is empty."
        try:
            number = float(value)
            if isinstance(value, bool) or not math.isfinite(number):
                raise ValueError
        except (TypeError, ValueError, OverflowError):
            return f"⚠️ {self.label} must be {self.span()}, not {str(value)[:40]!r}."
        if (self.whole and not number.is_integer()) or number < self.low or (
                self.high is not None and number > self.high):
            return f"⚠️ {self.label} must be {self.span()}, not {shown(number)}."
        return ""

    def check(self, value) -> int | float:
        """`value` as an int (whole) or float; a PlaygroundError saying the problem otherwise."""
        problem = self.problem(value)
        if problem:
            raise PlaygroundError(problem.removeprefix("⚠️ "))
        return int(float(value)) if self.whole else float(value)

    def number(self, value, **options) -> Number:
        """A number box for this range (label and spinner ends from it)."""
        return Number(value, label=options.pop("label", self.label), minimum=self.low, maximum=self.high,
                      precision=0 if self.whole else None, **options)

    def slider(self, value, *, high: float | None = None, **options) -> Slider:
        """A slider for this range (`high`: its end in the page where the range has no top)."""
        return Slider(self.low, self.high if high is None else high, value, label=options.pop("label", self.label),
                      **options)


# A check of one input: its Range, or a function of all the event's input values (by component) giving it.
Check = Range | Callable[[dict], Range | None]


def verdicts(inputs: list, checks: dict) -> Callable:
    """The validator of an event with these inputs: each checked control's value against its Range (a function
    of the inputs' values for a range the data sets, None: not checked now)."""
    def validator(*values):
        by_component = dict(zip(inputs, values))
        answers = []  # one per input, in their order (the page puts each beside its input)
        for component, value in zip(inputs, values):
            check = checks.get(component)
            rule = check(by_component) if callable(check) and not isinstance(check, Range) else check
            problem = rule.problem(value) if rule is not None else ""
            answers.append(gr.validate(not problem, problem))
        return answers
    return validator


def checked(inputs: list, checks: dict) -> dict:
    """`inputs=` and `validator=` of an event listener whose numeric inputs are checked before it runs."""
    return dict(inputs=inputs, validator=verdicts(inputs, checks))


def watch(checks: dict, inputs: list | None = None, changes: tuple = ()) -> None:
    """Check each control in `checks` as it is typed (for controls read only when a button is pressed): the control
    and `inputs` (what a range that depends on other values needs; checked too, so that a message another value
    made stale goes), and all of them again when a control in `changes` changes (a range it sets)."""
    def nothing(*_):
        return None

    for control in [*checks, *changes]:
        watched = [control, *(i for i in inputs or [] if i is not control)]
        listener = control.change if control in changes else control.input
        listener(nothing, **checked(watched, checks), outputs=None, show_progress="hidden", api_visibility="private",
                 concurrency_limit=None, trigger_mode="always_last")
