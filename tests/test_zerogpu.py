"""ZeroGPU without a GPU: a stand-in `spaces` module that enforces ZeroGPU's two rules (a call that runs past its
declared duration fails; every value a call yields or returns crosses a process boundary by pickle), and a training
run several such calls long that must come out as one run: the requested steps exactly, the loss curve of a run in
one piece, and a package that loads."""

from __future__ import annotations

import functools
import inspect
import pickle
import re
import time
import types

import pytest
import torch
from conftest import reverse_pairs, tiny_cfg

from playground.chunked import ChunkedRun, train_chunk
from playground.events import Done, Eval, Start, Step
from playground.package import load_package
from playground.train import TrainConfig, TrainData, Trainer



class DurationExceeded(RuntimeError):
    pass


def standin_spaces() -> types.ModuleType:
    """`spaces.GPU(duration=...)` as ZeroGPU applies it, minus the GPU: every value goes through pickle, and a call
    still running past its duration fails (ZeroGPU kills it)."""
    module = types.ModuleType("spaces")
    module.calls = []  # (function name, declared duration, seconds it ran)

    def crossing(value):
        return pickle.loads(pickle.dumps(value))  # a CUDA tensor, a lock or an open file would fail here

    def GPU(fn=None, *, duration: float = 60):
        def wrap(f):
            def check(began):
                ran = time.monotonic() - began
                if ran > duration:
                    raise DurationExceeded(f"{f.__name__} ran {ran:.1f} s, past its declared {duration} s")
                return ran

            if inspect.isgeneratorfunction(f):
                @functools.wraps(f)
                def generator(*args, **kwargs):
                    began = time.monotonic()
                    for value in f(*crossing(args), **crossing(kwargs)):
                        check(began)
                        yield crossing(value)
                    module.calls.append((f.__name__, duration, check(began)))
                return generator

            @functools.wraps(f)
            def function(*args, **kwargs):
                began = time.monotonic()
                result = f(*crossing(args), **crossing(kwargs))
                module.calls.append((f.__name__, duration, check(began)))
                return crossing(result)
            return function
        return wrap(fn) if fn is not None else wrap

    module.GPU = GPU
    return module


DATA = TrainData(reverse_pairs(200), reverse_pairs(12, seed=1), "seq", "rev", "reverse test")
STEPS = 600


def config(**changes) -> TrainConfig:
    return tiny_cfg(**{"dropout": 0.1, "max_steps": STEPS, "eval_every": 40, **changes})


def test_the_standin_enforces_both_rules():
    spaces = standin_spaces()

    @spaces.GPU(duration=0.2)
    def slow():
        time.sleep(0.3)

    with pytest.raises(DurationExceeded):
        slow()

    @spaces.GPU(duration=5)
    def leaks():
        yield {"weights": torch.zeros(2)}  # tensors pickle; what does not is an open handle
        yield {"handle": open(__file__)}

    values = leaks()
    assert torch.equal(next(values)["weights"], torch.zeros(2))
    with pytest.raises(TypeError):
        next(values)


def test_a_run_of_several_gpu_calls_is_the_run_in_one_piece(tmp_path, one_thread):
    whole = [e for e in Trainer(config(), DATA, tmp_path / "whole").run()]
    whole_steps = [e for e in whole if isinstance(e, Step)]
    seconds = whole_steps[-1].elapsed
    chunk_s = max(seconds / 4, 0.8)  # several calls' worth of training, whatever this machine's speed

    spaces = standin_spaces()
    chunk = spaces.GPU(duration=chunk_s)(train_chunk)
    run = ChunkedRun(config(), DATA, tmp_path / "chunked", chunk_s=chunk_s, run_chunk=chunk)
    events = list(run.run())

    assert len(spaces.calls) >= 3, spaces.calls  # several calls, each within its duration (or the stand-in raised)
    assert all(ran <= duration for _, duration, ran in spaces.calls)
    # one run for the person: one start, every step once and in order, one done
    kinds = [type(e) for e in events]
    assert kinds.count(Start) == 1 and kinds[-1] is Done and kinds.count(Done) == 1
    steps = [e for e in events if isinstance(e, Step)]
    assert [e.step for e in steps] == list(range(1, STEPS + 1))
    assert events[-1].summary["steps"] == STEPS and events[-1].reason == "step budget reached"
    # the same curve as the run in one piece (dropout on: the random stream continues across calls too)
    assert [e.loss for e in steps] == [e.loss for e in whole_steps]
    assert run.history.loss == [round(e.loss, 5) for e in whole_steps]
    assert [e.step for e in events if isinstance(e, Eval)] == [*range(40, STEPS + 1, 40)]
    package = load_package(tmp_path / "chunked")
    assert package.training["steps"] == STEPS and package.training["history"]["steps"] == list(range(1, STEPS + 1))
    whole_package = load_package(tmp_path / "whole")
    for name, tensor in whole_package.model.state_dict().items():
        assert torch.equal(package.model.state_dict()[name], tensor), name
    assert not list(tmp_path.glob(".*stop*"))


def test_stop_within_a_call_and_between_calls(tmp_path, one_thread):
    spaces = standin_spaces()
    chunk = spaces.GPU(duration=2)(train_chunk)
    run = ChunkedRun(config(max_steps=100000), DATA, tmp_path / "stopped", chunk_s=2, run_chunk=chunk)
    events = []
    for event in run.run():
        events.append(event)
        if isinstance(event, Step) and len(spaces.calls) >= 1 and event.step >= 5:
            run.stop()  # pressed during the second call
    assert len(spaces.calls) >= 2
    assert isinstance(events[-1], Done) and events[-1].reason == "stopped by the user"
    steps = events[-1].summary["steps"]
    assert load_package(tmp_path / "stopped").training["steps"] == steps
    assert [e.step for e in events if isinstance(e, Step)] == list(range(1, steps + 1))


def test_the_app_on_zerogpu_trains_in_calls_and_keeps_gpu_calls_plain(tmp_path, monkeypatch, one_thread):
    """The whole app with the stand-in as its `spaces`: every GPU call of every tab (training chunks, translate,
    next tokens, step-through, attention, estimate) takes and returns values that pickle, within its duration."""
    import os

    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    from gradio_client import Client

    from playground.ui import state
    from playground.ui.app import build_app

    spaces = standin_spaces()
    monkeypatch.setattr(state, "_spaces", spaces)
    monkeypatch.setenv("PLAYGROUND_GPU_CHUNK_S", "3")  # seconds; a busy CI machine needs the slack
    demo = build_app(tmp_path / "models", shared=True)
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    try:
        client = Client(demo.local_url, verbose=False)
        client.predict("reverse", 0.05, api_name="/load_builtin")
        tiny = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, vocab_size=200,
                    max_len=32, batch_tokens=512, max_steps=600, max_minutes=0, max_epochs=0, eval_every=200,
                    eval_sentences=8, warmup_steps=10, lr=3e-3, schedule="inverse_sqrt", precision="fp32",
                    device="cpu", seed=7)
        job = client.submit(model_name="zero", api_name="/train", **tiny)
        updates = list(job)
        done = job.result()[0]
        assert done.startswith("✅ **Done** (step budget reached): 600 steps"), done
        chunks = [c for c in spaces.calls if c[0] == "train_chunk"]
        assert len(chunks) >= 2 and all(ran <= 3 for _, _, ran in chunks), chunks
        steps = [int(m.group(1).replace(",", "")) for u in updates for m in [re.search(r"step \*\*([\d,]+)\*\*", str(u[0]))] if m]
        assert steps == sorted(steps) and steps[-1] >= 500  # one progress line, never going back at a seam
        assert load_package(tmp_path / "models" / "zero").training["steps"] == 600

        table, note, *_ = client.predict("zero", "a b c\nd e", "greedy", api_name="/translate")
        assert "**zero**" in note and len(table["data"]) == 2
        client.predict(2, 3, api_name="/next_tokens")  # the session kept the rows the GPU call translated
        client.predict("zero", "a b c", "beam", api_name="/decode_steps")
        client.predict("zero", "a b c", api_name="/attention", target="")
        client.predict(api_name="/estimate", **tiny)
    finally:
        demo.close()
    durations = {name: duration for name, duration, _ in spaces.calls}
    assert durations == {"train_chunk": 3, "run_translation": 20, "next_token_rows": 20, "decode_steps": 20,
                         "compute_maps": 20, "estimate_training": 30}, durations
