"""ZeroGPU without a GPU: the app with tests/app/spaces_standin.py as its `spaces` (modelled on spaces 0.51.3: inert
unless SPACES_ZERO_GPU, durations, pickled arguments and values, the error rule, a daily quota per visitor), and
with the real `spaces` package off a Space. A run of several calls must come out as one run; a refusal inside a call
keeps its message; a spent quota pauses a run, which goes on later to the steps it was asked for; the quick views
never spend GPU time."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import gradio as gr
import pytest
import spaces_standin
import torch
from helpers import client_of, free_port, named, reverse_pairs, tiny_cfg

from playground.packages.store import load_package
from playground.training.chunked import ChunkedRun, chunk_duration, in_fresh_process, train_chunk
from playground.training.events import Done, Eval, Start, Step
from playground.training.inputs import TrainData
from playground.training.trainer import Trainer

DATA = TrainData(reverse_pairs(200), reverse_pairs(12, seed=1), "seq", "rev", "reverse test")
STEPS = 600
TINY = dict(d_model=32, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=64, vocab_size=200,
            max_sentence_tokens=32, batch_tokens=512, max_minutes=0, max_epochs=0, eval_every=400, eval_sentences=8,
            warmup_steps=10, lr=3e-3, schedule="inverse_sqrt", precision="fp32", device="auto", seed=7)


def config(**changes):
    return tiny_cfg(**{"dropout": 0.1, "max_steps": STEPS, "eval_every": 40, **changes})


def test_the_standin_follows_spaces(monkeypatch):
    def plain(x):
        return x

    assert spaces_standin.install(monkeypatch, zero_gpu=False).GPU(duration=5)(plain) is plain  # inert off ZeroGPU
    spaces = spaces_standin.install(monkeypatch, quota_s=10)
    assert torch.cuda.is_available() and torch.cuda.get_device_name() == spaces_standin.CUDA_DEVICE_NAME

    @spaces.GPU(duration=lambda n: n)  # a function of the call's arguments
    def inside(n):
        return torch.cuda.is_available(), {"weights": torch.zeros(2)}

    cuda, value = inside(2)
    assert not cuda and torch.equal(value["weights"], torch.zeros(2))  # here, CUDA is what this machine has
    with pytest.raises(gr.Error) as refused:
        inside(8)  # 8 s declared, about 10 left: admitted; then 11 declared: refused
        inside(11)
    assert refused.value.title == "ZeroGPU quota exceeded" and "(11s requested vs." in refused.value.message

    @spaces.GPU(duration=timedelta(seconds=5))
    def fails(kind):
        raise (gr.Error("details that stay in the worker", title="mine") if kind == "gradio" else
               ValueError("details that stay in the worker"))

    spaces.new_day()
    with pytest.raises(gr.Error) as other:
        fails("value")
    assert (other.value.title, other.value.message) == ("ZeroGPU worker error", "ValueError")
    with pytest.raises(gr.Error) as own:
        fails("gradio")
    assert (own.value.title, own.value.message) == ("mine", "details that stay in the worker")

    @spaces.GPU(duration=1)
    def slow():
        yield 1
        time.sleep(1.5)
        yield 2

    values = slow()
    assert next(values) == 1
    with pytest.raises(gr.Error, match="GPU task aborted"):
        next(values)

    @spaces.GPU(duration=5)
    def leaks():
        yield open(__file__)

    with pytest.raises(gr.Error, match="TypeError"):
        next(leaks())


def test_a_run_of_several_gpu_calls_is_the_run_in_one_piece(tmp_path, one_thread, monkeypatch):
    whole = [e for e in Trainer(config(), DATA, tmp_path / "whole").run()]
    whole_steps = [e for e in whole if isinstance(e, Step)]
    seconds = whole_steps[-1].elapsed
    chunk_s = max(seconds / 4, 1.5)  # several calls' worth of training, whatever this machine's speed

    spaces = spaces_standin.install(monkeypatch, quota_s=10_000)
    monkeypatch.setattr("playground.training.inputs.train_tokenizer",
                        lambda *a, **k: pytest.fail("a call trained a tokenizer"))
    monkeypatch.setattr("playground.training.trainer.encode_pairs",
                        lambda *a, **k: pytest.fail("a call encoded the pairs"))
    chunk = spaces.GPU(duration=chunk_duration)(train_chunk)
    run = ChunkedRun(config(), DATA, tmp_path / "chunked", chunk_s=chunk_s, run_chunk=chunk)
    events = list(run.run())

    assert len(spaces.calls) >= 3, spaces.calls  # several calls, each within its duration (or the stand-in aborted)
    assert all(declared <= chunk_s + 1 and ran <= declared for _, declared, ran, _ in spaces.calls), spaces.calls
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
    assert not list(tmp_path.glob(".*stop*")) and not list(tmp_path.glob(".*prepared*"))


def test_stop_within_a_call_and_between_calls(tmp_path, one_thread, monkeypatch):
    spaces = spaces_standin.install(monkeypatch, quota_s=10_000)
    chunk = spaces.GPU(duration=chunk_duration)(train_chunk)
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


def test_stop_during_a_calls_closing_save_ends_the_run_in_that_call(tmp_path, one_thread, monkeypatch):
    """Issue 34: Stop pressed while a call saved its state to go on used to be seen only by the next call: one more
    GPU call (a wait for a GPU, the package loaded, validated and saved again) before the run ended."""
    spaces = spaces_standin.install(monkeypatch, quota_s=10_000)
    run = ChunkedRun(config(max_steps=100_000, eval_every=10**6), DATA, tmp_path / "stopped", chunk_s=2,
                     run_chunk=spaces.GPU(duration=chunk_duration)(train_chunk))
    save = Trainer.save

    def stop_while_saving(trainer, *args, **kwargs):  # no validations: the first save is the call's closing one
        run.stop()
        return save(trainer, *args, **kwargs)

    monkeypatch.setattr(Trainer, "save", stop_while_saving)
    events = list(run.run())
    assert len(spaces.calls) == 1, spaces.calls
    assert isinstance(events[-1], Done) and events[-1].reason == "stopped by the user"
    steps = [e.step for e in events if isinstance(e, Step)]
    assert load_package(tmp_path / "stopped").training["steps"] == events[-1].summary["steps"] == steps[-1] > 0


def test_each_call_asks_for_the_seconds_the_run_has_left():
    run = ChunkedRun(config(max_steps=1000), DATA, "unused", chunk_s=60)

    def step(n, elapsed):
        return Step(n, 0.0, 1.0, 1e-3, 1.0, 1000.0, elapsed, None, 1000)

    assert run.call_seconds(None, None) == 60  # nothing measured yet: the longest call
    assert run.call_seconds(step(1, 0.0), step(201, 20.0)) == 60  # 799 steps x 0.1 s: more than a call
    assert run.call_seconds(step(401, 0.0), step(801, 20.0)) == pytest.approx((199 * 0.05 + 0.05) / 0.6)
    assert run.call_seconds(step(990, 0.0), step(999, 0.1)) == 15  # never below what loading and saving take


def start_app(tmp_path, shared=True):

    from playground.ui.app import build_app

    demo = build_app(tmp_path / "models", shared=shared)
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=free_port(), quiet=True)
    return demo, lambda: client_of(demo.local_url)


def train_job(client, name, **changes):
    client.predict("reverse", 0.05, api_name="/load_builtin")
    return client.submit(model_name=name, api_name="/train", **{**TINY, **changes})


def test_a_refusal_inside_a_gpu_call_keeps_its_message(tmp_path, monkeypatch, one_thread):
    spaces = spaces_standin.install(monkeypatch)
    monkeypatch.setenv("PLAYGROUND_GPU_CHUNK_S", "20")
    demo, client = start_app(tmp_path)
    try:
        # Trainer, inside the call: too few batches
        job = train_job(client(), "refused", max_steps=600, accumulate=10_000)
        status = job.result()[0]
    finally:
        demo.close()
    assert [c[0] for c in spaces.calls] == ["train_chunk"], status  # the refusal came from inside the GPU call
    assert status.startswith("⚠️ One optimizer step takes 10000 batches"), status


@pytest.mark.slow
def test_a_spent_quota_pauses_the_run_which_goes_on_later_to_its_steps(tmp_path, monkeypatch, one_thread):
    """Two visitors train at once; each has GPU time for two calls. Both runs pause with their packages; one goes on
    on the GPU the next day, the other at once on the CPU; both end at the steps they were asked for."""
    chunk_s, steps = 10, 3000  # seconds: loading and saving fit a call even on a busy machine
    spaces = spaces_standin.install(monkeypatch, quota_s=2 * chunk_s + 0.5)
    monkeypatch.setenv("PLAYGROUND_GPU_CHUNK_S", str(chunk_s))
    monkeypatch.setenv("PLAYGROUND_MAX_RUN_MINUTES", "0")  # no run-length cap: a busy machine's CPU run is slow
    demo, client = start_app(tmp_path)
    try:
        first, second = client(), client()
        jobs = [train_job(first, "first", max_steps=steps), train_job(second, "second", max_steps=steps)]
        paused = [job.result()[0] for job in jobs]
        first_name, second_name = (named(os.listdir(tmp_path / "models"), n) for n in ("first", "second"))
        for name, status in zip([first_name, second_name], paused):
            assert status.startswith("⏸ **Paused**: ZeroGPU gave no GPU time"), status
            assert f"You have exceeded your ZeroGPU quota ({chunk_s}s requested vs." in status
            assert "signing in" in status
            kept = load_package(tmp_path / "models" / name).training["steps"]
            assert 0 < kept < steps and f"kept as of step {kept:,}" in status, status
        visitors = {who for *_, who in spaces.calls}
        assert len(visitors) == 2 and all(sum(c[3] == v for c in spaces.calls) == 2 for v in visitors), spaces.calls
        assert len(spaces.refused) == 2

        spaces.new_day()
        spaces.quota_s = 10_000
        calls = len(spaces.calls)
        on_cpu = second.submit(second_name, api_name="/continue_on_cpu")  # both go on at once
        for _ in range(4):  # a call that a busy machine lets run past its duration is aborted: press again
            done = first.submit(first_name, api_name="/continue_on_gpu").result()[0]
            if not done.startswith("⏸"):
                break
            assert "GPU task aborted" in done, done
        assert done.startswith(f"✅ **Done** (step budget reached): {steps:,} steps"), done
        done = on_cpu.result()[0]
        assert done.startswith(f"✅ **Done** (step budget reached): {steps:,} steps") and "on cpu" in done, done
        went_on = [who for *_, who in spaces.calls[calls:]]
        assert went_on and set(went_on) == {first.session_hash}, spaces.calls  # the CPU run spent no GPU time
    finally:
        demo.close()
    for name in (first_name, second_name):
        training = load_package(tmp_path / "models" / name).training
        assert training["steps"] == steps and training["history"]["steps"] == list(range(1, steps + 1))


def test_quick_views_run_on_the_cpu_and_spend_no_gpu_time(tmp_path, monkeypatch, one_thread):
    for name in ("quick", "other"):
        list(Trainer(tiny_cfg(max_steps=10), DATA, tmp_path / "models" / name).run())
    spaces = spaces_standin.install(monkeypatch)
    spaces.busy = True  # every GPU call would be refused
    demo, client = start_app(tmp_path, shared=False)
    try:
        c = client()
        intro = [b["props"].get("value") for b in demo.config["components"]
                 if b.get("props", {}).get("elem_id") == "intro"]
        assert "Running on ZeroGPU" in str(intro), intro
        table, note, *_ = c.predict("quick", "a b c\nd e", "greedy", api_name="/translate")
        assert "**quick**" in note and len(table["data"]) == 2
        c.predict(2, 3, api_name="/next_tokens")
        c.predict("quick", "a b c", "beam", api_name="/decode_steps")
        plot, target, note, *_ = c.predict("quick", "a b c", api_name="/attention", target="")
        assert "**quick**" in note, note
        for api_name in ("/positional_encoding", "/masks", "/batching", "/embeddings"):
            result = c.predict("quick", api_name=api_name)
            assert not str(result[-1]).startswith("⚠️"), (api_name, result[-1])
        message, table = c.predict(["quick", "other"], "a b", api_name="/compare_translate")
        assert message == "" and len(table["data"]) == 1, message
        assert spaces.calls == [] and spaces.refused == [] and spaces.used == {}
        # the duration estimate spends GPU time only when pressed: opening the Train tab times nothing
        assert "first_estimate" not in {fn.name for fn in demo.fns.values()}
        spaces.busy = False
        line, _ = c.predict(api_name="/estimate", **{**TINY, "max_steps": 100})
        assert "Estimated duration" in line and [c[:2] for c in spaces.calls] == [("estimate_training", 20)], line
    finally:
        demo.close()


def test_spaces_importable_but_not_zerogpu_trains_in_one_piece(tmp_path, monkeypatch, one_thread):
    from playground.serving import zerogpu
    from playground.ui.tabs.train_run import make_trainer

    spaces = spaces_standin.install(monkeypatch, zero_gpu=False)
    monkeypatch.delenv("PLAYGROUND_GPU_CHUNK_S", raising=False)
    assert not zerogpu.on_zerogpu() and zerogpu.gpu_chunk_seconds() is None and zerogpu.training_slots() == 1
    trainer = make_trainer(config(max_steps=30), DATA, tmp_path / "one")
    assert isinstance(trainer, ChunkedRun) and trainer.run_chunk is in_fresh_process  # one piece, its own process
    assert isinstance(list(trainer.run())[-1], Done) and spaces.calls == []


def test_the_real_spaces_package_off_a_space_is_inert(tmp_path, monkeypatch, one_thread):
    real = pytest.importorskip("spaces")
    import sys

    from playground.serving.zerogpu import device_line, on_zerogpu
    from playground.ui import zerogpu
    from playground.ui.tabs.train_run import make_trainer

    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    monkeypatch.delenv("PLAYGROUND_GPU_CHUNK_S", raising=False)
    monkeypatch.setitem(sys.modules, "spaces", real)
    monkeypatch.setattr(zerogpu, "_spaces", real)
    assert real.config.Config.zero_gpu is False and not on_zerogpu()

    def task():
        return 1

    assert real.GPU(duration=5)(task) is task and zerogpu.gpu(task, duration=5) is task
    assert make_trainer(config(max_steps=5), DATA, tmp_path / "one").run_chunk is in_fresh_process
    assert "ZeroGPU" not in device_line()


def gpu_run(tmp_path, name: str, resume_from=None, chunk_s: float = 20.0, **changes):
    from playground.ui.zerogpu import gpu

    return ChunkedRun(config(**changes), DATA, tmp_path / name, resume_from, chunk_s=chunk_s,
                      run_chunk=gpu(train_chunk, duration=chunk_duration))


ENDINGS = {  # every way spaces 0.51.3's GPU call can end without GPU time (zero/client.py, zero/wrappers.py)
    "quota": spaces_standin.error("ZeroGPU quota exceeded", "You have exceeded your free ZeroGPU quota (60s requested "
                                  "vs. 12s left). Try again in 23:54:10. "),
    "runs limit": spaces_standin.error("ZeroGPU quota exceeded", "You have exceeded your ZeroGPU runs limit. "),
    "pending credits": spaces_standin.error("ZeroGPU pending credits exceeded", "You have too many ZeroGPU credits "
                                            "allocated to running tasks."),
    "queue timeout": spaces_standin.error("ZeroGPU queue timeout", "No GPU was available after 60s"),
    "no gpu": spaces_standin.error("ZeroGPU client error", "No GPU was available"),
    "aborted": spaces_standin.error("ZeroGPU worker error", "GPU task aborted"),
    "end of stream": RuntimeError("Unexpected end of stream"),
    "queue disconnect": RuntimeError("Error while re-trying after queue disconnect"),
    "visitor left": RuntimeError("Connection closed by visitor while queueing"),
    "left on success": RuntimeError("Connection closed by visitor on queue success"),
    "schedule error": RuntimeError("ZeroGPU API /schedule error: 500 (Internal Server Error)"),
    "crash": "crash",
}


def test_every_way_a_gpu_call_ends_pauses_the_run_with_its_last_package(tmp_path, one_thread, monkeypatch):
    from playground.training.events import Interrupted

    spaces = spaces_standin.install(monkeypatch, quota_s=10_000)
    spaces.crash_after = 5  # a crash part-way through a call: some steps shown, none saved
    first = list(gpu_run(tmp_path, "run", max_steps=40).run())
    assert isinstance(first[-1], Done)
    kept = load_package(tmp_path / "run").training["steps"]
    for way, ending in ENDINGS.items():
        spaces.fail_next(ending)
        events = list(gpu_run(tmp_path, "run", resume_from=tmp_path / "run", max_steps=400).run())
        assert isinstance(events[-1], Interrupted), (way, events[-1])
        said = "ZeroGPU worker error: RuntimeError" if ending == "crash" else \
            getattr(ending, "message", str(ending)).strip()
        assert events[-1].step == kept and said in events[-1].message, (way, events[-1])
        assert load_package(tmp_path / "run").training["steps"] == kept, way  # the package as it was
    assert not spaces.failures and len(spaces.dead) == 1


def test_an_illegal_duration_is_asked_again_shorter(tmp_path, one_thread, monkeypatch):
    monkeypatch.setattr(ChunkedRun, "admitted_s", float("inf"))
    spaces = spaces_standin.install(monkeypatch, quota_s=10_000)
    spaces.duration_factor, spaces.max_duration_s = 1.5, 45  # the newest hardware: 40 s declared is 60 s charged
    events = list(gpu_run(tmp_path, "short", chunk_s=40, max_steps=30).run())
    assert isinstance(events[-1], Done), events[-1]
    assert [r[1] for r in spaces.refused] == [60] and [c[1] for c in spaces.calls] == [20]  # 40 s refused, 20 s ran
    assert gpu_run(tmp_path, "next", chunk_s=40).chunk_s == 20  # Continue asks what was admitted, not 40 s again
    spaces.max_duration_s = 10  # not even the shortest call: paused, never failed
    monkeypatch.setattr(ChunkedRun, "admitted_s", float("inf"))
    events = list(gpu_run(tmp_path, "never", chunk_s=40, max_steps=30).run())
    assert events[-1].__class__.__name__ == "Interrupted" and "illegal duration" in events[-1].message


def test_the_hardware_duration_factor_is_counted_and_said_before_a_run(tmp_path, monkeypatch):
    from playground.serving.zerogpu import gpu_time_note
    from playground.ui.tabs.train_run import make_trainer
    from playground.ui.zerogpu import duration_factor

    monkeypatch.setattr(ChunkedRun, "admitted_s", float("inf"))
    monkeypatch.delenv("PLAYGROUND_GPU_CHUNK_S", raising=False)
    spaces = spaces_standin.install(monkeypatch)
    assert duration_factor() == 1 and make_trainer(config(), DATA, tmp_path / "a").chunk_s == 60
    spaces.duration_factor = 1.5
    assert duration_factor() == 1.5
    assert make_trainer(config(), DATA, tmp_path / "b").chunk_s == 40  # declared 40 s: charged 60 s
    note = gpu_time_note(60, 1.5, 10)
    assert "at most 60 s of your daily GPU time" in note and "1.5×" in note and "about 15 minutes of GPU time" in note
    spaces_standin.install(monkeypatch, zero_gpu=False)
    assert duration_factor() == 1 and gpu_time_note(None, 1, 10) == ""


def test_a_worker_that_crashes_pauses_the_train_tabs_run(tmp_path, monkeypatch, one_thread):
    monkeypatch.setattr(ChunkedRun, "admitted_s", float("inf"))
    spaces = spaces_standin.install(monkeypatch, quota_s=10_000)
    monkeypatch.setenv("PLAYGROUND_GPU_CHUNK_S", "4")
    spaces.crash_after = 20
    spaces.fail_next("crash")  # the first call's worker dies part-way
    demo, client = start_app(tmp_path)
    try:
        status = train_job(client(), "crashed", max_steps=3000).result()[0]
    finally:
        demo.close()
    assert status.startswith("⏸ **Paused**: ZeroGPU gave no GPU time"), status
    assert "ZeroGPU worker error: RuntimeError" in status and "Nothing of this run was saved yet" in status, status
