"""The CUDA path, on a machine with a CUDA GPU (marked `cuda`, skipped without one): bf16 where the GPU has it, a
mixed-precision run learns, "auto" trains in whichever of bf16 and fp32 (TF32) steps faster, decoding on the GPU
gives what it gives on the CPU, the memory check reads the GPU's free memory (torch.cuda.mem_get_info), and a run
trained on the GPU loads, translates and resumes on the CPU. bench/gpu_check.py runs them
(`python -m pytest tests/unit/test_cuda.py -m cuda`) on a GPU machine."""

from __future__ import annotations

import pytest
import torch
from helpers import DATA, DEMO, tiny_cfg

from playground.core.decode import DecodeOptions, source_ids, translate
from playground.core.sequences import pad_batch
from playground.datasets.catalog import DATASETS_DIR
from playground.errors import TrainingError
from playground.packages.store import load_package
from playground.runtime.device import autocast, resolve_precision
from playground.runtime.memory import check_training_fits, free_memory_bytes
from playground.training.events import Done, Start, Step
from playground.training.trainer import Trainer, run_training

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CUDA = torch.device("cuda")
TEST_TSV = DATASETS_DIR / "mini-translation" / "test.tsv"
SENTENCES = [line.split("\t")[0] for line in TEST_TSV.read_text("utf-8").splitlines()[1:41]]
AMP = "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp16"


def test_auto_precision_is_bf16_where_the_gpu_has_it_and_autocast_computes_in_it():
    assert resolve_precision("auto", CUDA) == AMP
    package = load_package(DEMO, CUDA)
    src = pad_batch(source_ids(package.tokenizer, SENTENCES[:4], package.model.cfg), pad_id=0).to(CUDA)
    tgt_in = src[:, :5].clone()
    tgt_in[:, 0] = package.model.cfg.bos_id
    package.model.train()
    with autocast(CUDA, AMP):
        logits = package.model(src, tgt_in)
    logits.float().logsumexp(-1).mean().backward()
    assert logits.dtype == (torch.bfloat16 if AMP == "bf16" else torch.float16)
    # the weights and their gradients stay fp32: autocast casts copies for the matmuls
    assert {p.dtype for p in package.model.parameters()} == {torch.float32}
    assert {p.grad.dtype for p in package.model.parameters() if p.grad is not None} == {torch.float32}


def train_on_cuda(folder, precision=AMP, **changes) -> list:
    """A tiny run on the GPU, in mixed precision unless said; its events."""
    events = list(run_training(tiny_cfg(device="cuda", precision=precision, **changes), DATA, folder))
    assert isinstance(events[-1], Done), events[-1]
    return events


def test_a_mixed_precision_run_on_cuda_learns(tmp_path):
    events = train_on_cuda(tmp_path / "run", max_steps=60, eval_every=60)
    start = next(e for e in events if isinstance(e, Start))
    assert start.precision == AMP and start.device.startswith("cuda")
    losses = [e.loss for e in events if isinstance(e, Step)]
    assert len(losses) == 60 and all(loss == loss for loss in losses)  # no NaN
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5


def test_auto_on_a_gpu_trains_in_the_precision_that_stepped_faster_here(tmp_path):
    trainer = Trainer(tiny_cfg(device="cuda", precision="auto", max_steps=5), DATA, tmp_path / "run")
    timed = trainer.machine.precision_seconds
    assert set(timed) == {AMP, "fp32"}
    assert trainer.precision == min(timed, key=timed.get)
    assert trainer.optimization.precision == trainer.precision
    start = next(e for e in trainer.run() if isinstance(e, Start))
    assert start.precision == trainer.precision


def test_a_run_trained_on_cuda_loads_translates_and_resumes_on_the_cpu(tmp_path):
    train_on_cuda(tmp_path / "run", max_steps=30, eval_every=30)
    on_gpu, on_cpu = load_package(tmp_path / "run", CUDA), load_package(tmp_path / "run", "cpu")
    for (name, gpu_weight), cpu_weight in zip(on_gpu.model.state_dict().items(), on_cpu.model.state_dict().values()):
        assert cpu_weight.device.type == "cpu" and torch.equal(gpu_weight.cpu(), cpu_weight), name
    sentences = [source for source, _ in DATA.val]
    assert translate(on_cpu.model, on_cpu.tokenizer, sentences)  # runs on the CPU, nothing left on the GPU
    # the optimizer's moments, saved from the GPU, go on on the CPU
    resumed = list(Trainer(tiny_cfg(device="cpu", max_steps=34, eval_every=30), DATA, tmp_path / "run",
                           resume_from=tmp_path / "run").run())
    assert isinstance(resumed[-1], Done) and resumed[-1].summary["steps"] == 34
    assert [e.step for e in resumed if isinstance(e, Step)] == [31, 32, 33, 34]


@pytest.mark.parametrize("method", ["greedy", "beam"])
def test_decoding_on_cuda_gives_what_it_gives_on_the_cpu(method):
    on_cpu, on_gpu = load_package(DEMO, "cpu"), load_package(DEMO, CUDA)
    src = pad_batch(source_ids(on_cpu.tokenizer, SENTENCES, on_cpu.model.cfg), pad_id=0)
    with torch.inference_mode():
        cpu_logits = on_cpu.model(src, src[:, :8])
        gpu_logits = on_gpu.model(src.to(CUDA), src[:, :8].to(CUDA)).cpu()
    assert torch.allclose(cpu_logits, gpu_logits, atol=1e-3), (cpu_logits - gpu_logits).abs().max()
    opts = DecodeOptions(method)
    cpu = translate(on_cpu.model, on_cpu.tokenizer, SENTENCES, opts)
    gpu = translate(on_gpu.model, on_gpu.tokenizer, SENTENCES, opts)
    same = [(c, g) for c, g in zip(cpu, gpu) if c.text == g.text]
    # ≥ 95%: where two candidates tie to float rounding the devices may pick differently; the rest score alike
    assert len(same) >= 0.95 * len(SENTENCES), [(c.text, g.text) for c, g in zip(cpu, gpu) if c.text != g.text]
    assert all(abs(c.best.score - g.best.score) < 1e-3 for c, g in same)


def test_the_memory_check_reads_the_gpus_free_memory():
    free, total = torch.cuda.mem_get_info(CUDA)
    assert 0 < free_memory_bytes(CUDA) <= total
    assert abs(free_memory_bytes(CUDA) - free) < 2**28  # the same reading, give or take another process's work
    model_cfg = tiny_cfg().model_config(50, 50, True)
    check_training_fits(model_cfg, 256, CUDA, AMP)  # a tiny run fits
    with pytest.raises(TrainingError, match=r"cuda has [\d.]+ GB free: lower batch tokens"):
        check_training_fits(model_cfg, 10**12, CUDA, AMP)



def test_int8_weights_are_refused_on_the_gpu_saying_how_to_decode_on_the_cpu(capsys):
    from playground.cli.main import main

    assert main(["translate", "--model", str(DEMO), "--device", "cuda", "--int8", "A dog runs."]) == 2
    assert "add --device cpu" in capsys.readouterr().err
