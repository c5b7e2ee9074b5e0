"""GPU check in one call: on a machine with CUDA, what the CPU machines never run. It reads the device (CUDA build,
bf16 support, the precision "auto" picks, torch.cuda.mem_get_info through the memory check, NCCL), times the
project's training step against the fair nn.Transformer baseline on the same GPU (in fp32 and in the same autocast),
trains the small preset for --minutes with mixed precision, decodes the result (greedy and beam 5, sentences/s, BLEU,
GPU against CPU), exports it (🤗 transformers and CTranslate2, outputs compared with ours) and runs the test suite's
CUDA-marked tests. Each part records its error instead of stopping the rest. Progress goes to stderr; stdout gets
one JSON line.

    python bench/gpu_check.py             # 3 minutes of training; about 6 minutes in all
    python bench/gpu_check.py --quick     # 20 s of training and small samples: about 2 minutes

Multi30k en→de from --data, else ../shared/data/multi30k or shared/data/multi30k beside the repository, else the
built-in toy data. Runs on a fresh machine that has only the requirements installed (no `pip install -e .`: the
repository root is put on the path). Without CUDA it says so and runs the same parts on the CPU: a dry run of the
script.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: `playground` without install

import common  # noqa: E402  first of the project: the allocator is chosen before PyTorch loads
import decode_speed  # noqa: E402
import quality  # noqa: E402
import torch  # noqa: E402
import train_throughput as throughput  # noqa: E402

from playground.core.decode import DecodeOptions, output_limit, source_ids, translate  # noqa: E402
from playground.core.metrics import score  # noqa: E402
from playground.core.quantize import int8_linears  # noqa: E402
from playground.core.sequences import pad_batch  # noqa: E402
from playground.core.tokenizer import PairTokenizer  # noqa: E402
from playground.errors import TrainingError  # noqa: E402
from playground.export import export_package  # noqa: E402
from playground.packages.format import Package  # noqa: E402
from playground.packages.store import load_package  # noqa: E402
from playground.runtime.device import (  # noqa: E402
    autocast,
    matmul_flops,
    resolve_device,
    resolve_precision,
    sync,
    tf32_matmuls,
)
from playground.runtime.memory import check_training_fits, free_memory_bytes, training_memory_bytes  # noqa: E402
from playground.training.inputs import TrainData  # noqa: E402
from playground.training.presets import preset_config  # noqa: E402

MULTI30K_PLACES = ("../shared/data/multi30k", "shared/data/multi30k")  # relative to the repository root
MB = 2**20
AGREEMENT_NEEDED = 0.98  # exports and devices: a sentence in 50 may differ where two candidates tie to rounding


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much each part does: the default run, or --quick."""

    warmup_steps: int = 5
    windows: int = 6
    steps_per_window: int = 20
    decode_sentences: int = 1000
    compare_sentences: int = 100  # GPU against CPU, and against the exports
    latency_repeats: int = 5
    tests_timeout_s: int = 240


QUICK = Sizes(warmup_steps=1, windows=2, steps_per_window=3, decode_sentences=100, compare_sentences=30,
              latency_repeats=2)


def multi30k_folder(choice: str | None) -> str | None:
    if choice:
        return choice
    for place in MULTI30K_PLACES:
        folder = common.REPO_ROOT / place
        if all(path.is_file() for path in common.split_files(folder, "train")):
            return str(folder.resolve())
    return None


def run_part(results: dict, name: str, work: Callable[[], dict]) -> None:
    """results[name] = work(), or the error it raised: one part's failure does not hide the others'."""
    print(f"\n== {name}", flush=True)
    began = time.perf_counter()
    try:
        results[name] = work()
    except (Exception, SystemExit) as err:  # quality.train ends a failed run with SystemExit
        results[name] = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()[-2000:]}
    results[name]["seconds"] = round(time.perf_counter() - began, 1)
    print(f"{name}: {json.dumps(results[name], default=str)[:600]}", flush=True)


# ----------------------------------------------------------------------------------------------------------
# The device


def environment(device: torch.device) -> dict:
    """The build, the device, the precision "auto" picks and what autocast computes in, the free memory the
    memory check reads, and NCCL."""
    info = {"torch": torch.__version__, "cuda_build": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
            "device": str(device)}
    precision = resolve_precision("auto", device)
    layer = torch.nn.Linear(64, 64).to(device)
    with autocast(device, precision):
        computed = layer(torch.randn(8, 64, device=device)).dtype
    info |= {"auto_precision": precision, "autocast_output_dtype": str(computed),
             "bf16_matmul_tflops": matmul_flops(device.type, torch.bfloat16) / 1e12,
             "fp32_matmul_tflops": matmul_flops(device.type, torch.float32) / 1e12}
    if device.type != "cuda":
        return info
    properties = torch.cuda.get_device_properties(device)
    free, total = torch.cuda.mem_get_info(device)
    checked_free = free_memory_bytes(device)
    small = preset_config("small")
    model_cfg = small.model_config(small.vocab_size, small.vocab_size, True)
    check_training_fits(model_cfg, small.batch_tokens, device, precision)  # raises if the small preset would not fit
    try:
        check_training_fits(model_cfg, 10**12, device, precision)
        refusal = None
    except TrainingError as err:
        refusal = str(err)
    expected = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    info |= {"name": properties.name, "capability": f"{properties.major}.{properties.minor}",
             "devices": torch.cuda.device_count(), "cudnn": torch.backends.cudnn.version(),
             "tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "bf16_supported": torch.cuda.is_bf16_supported(),
             "mem_get_info_free_mb": free / MB, "mem_get_info_total_mb": total / MB,
             "memory_check_free_mb": checked_free / MB, "refusal": refusal, "nccl": nccl_check(device)}
    info["checks"] = {
        "auto_precision_is_" + expected: precision == expected,
        "autocast_computes_in_it": computed == (torch.bfloat16 if expected == "bf16" else torch.float16),
        "memory_check_reads_mem_get_info": abs(checked_free - free) < 256 * MB,
        "oversized_run_refused": refusal is not None and "cuda has" in refusal,
    }
    return info


def nccl_check(device: torch.device) -> dict:
    """NCCL's version and a one-rank all-reduce on the GPU (a multi-GPU run's collectives go through it)."""
    import torch.distributed as dist

    if not dist.is_nccl_available():
        return {"available": False}
    try:
        gpu = torch.device("cuda", torch.cuda.current_device())  # init_process_group wants the device's index
        dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=gpu)
        tensor = torch.ones(4, device=gpu)
        dist.all_reduce(tensor)
        version = torch.cuda.nccl.version()
        return {"available": True, "version": ".".join(map(str, version)) if isinstance(version, tuple) else version,
                "ok": tensor.tolist() == [1.0] * 4}
    except Exception as err:  # reported with the rest of the environment
        return {"error": f"{type(err).__name__}: {err}"}
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


# ----------------------------------------------------------------------------------------------------------
# Training


class AutocastSortedBatchRunner(throughput.SortedBatchRunner):
    """The fair baseline in the project's autocast: nn.Transformer fed the same batches, in bf16 (fp16) on a GPU."""

    def __init__(self, trainer, seed: int):
        super().__init__(trainer, seed)
        self.precision = trainer.precision
        self.name = f"baseline, sorted batches, {self.precision}"

    def step(self) -> int:
        with autocast(self.device, self.precision):
            return super().step()


def training_throughput(data: str | None, device: torch.device, seed: int, sizes: Sizes, out_dir: Path) -> dict:
    """The project's step against the fair baseline (fp32, and in the project's autocast) in alternating windows,
    as bench/train_throughput.py times them: median real tokens/s, MFU."""
    trainer = common.project_trainer(data, None, "auto", device.type, seed, out_dir)
    project = common.ProjectRunner(trainer)
    runners = [project, throughput.SortedBatchRunner(trainer, seed)]
    if trainer.precision != "fp32":
        runners.append(AutocastSortedBatchRunner(trainer, seed))
    try:  # TF32 for every system's fp32 matmuls, as the project's step has them (runtime/device.py::tf32_matmuls)
        with tf32_matmuls(trainer.device):
            windows = throughput.measure(runners, trainer.device, sizes.warmup_steps, sizes.windows,
                                         sizes.steps_per_window)
    finally:
        project.close()
    per_token = common.flops_per_token(trainer.model.cfg, common.pair_lengths(trainer.train_set))
    share = common.target_share(trainer.train_set)
    systems = {r.name: throughput.summarise(r, windows[r.name], per_token, share, trainer.device) for r in runners}
    speedups = {f"project / {name}": systems["project"]["tokens_per_s"] / s["tokens_per_s"]
                for name, s in systems.items() if name != "project"}
    return {"batch_tokens": trainer.cfg.batch_tokens, "auto_precision_step_s": trainer.machine.precision_seconds,
            "systems": systems, "speedups": speedups}


def small_preset_run(data: str | None, device: torch.device, seed: int, minutes: float, out_dir: Path) -> dict:
    """The small preset for `minutes` in automatic mixed precision (bf16 where the GPU has it), as bench/quality.py
    trains it; the package is saved to out_dir."""
    cfg = preset_config("small", device=device.type, precision="auto", seed=seed)
    cfg = dataclasses.replace(cfg, max_minutes=minutes, max_steps=None, max_epochs=None)
    pairs = TrainData(common.load_pairs(data, "train", cfg.max_sentence_tokens), common.load_pairs(data, "val"),
                      common.SRC_LANG, common.TGT_LANG, "Multi30k" if data else "mini-translation")
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    summary = quality.train(cfg, pairs, out_dir, "small")
    result = {key: summary.get(key) for key in ("reason", "steps", "epochs", "wall_s", "tokens_per_s", "train_loss",
                                                  "device", "precision", "params", "first_plan")}
    final = summary.get("final") or {}
    result["final_validation"] = {key: final.get(key) for key in ("step", "val_loss", "bleu", "chrf")}
    result["package"] = str(out_dir)
    if device.type == "cuda":
        package = load_package(out_dir)
        estimate = training_memory_bytes(package.model.cfg, cfg.batch_tokens, summary.get("precision", "fp32"),
                                         device.type)
        result |= {"peak_cuda_allocated_mb": torch.cuda.max_memory_allocated(device) / MB,
                   "memory_estimate_mb": estimate / MB}
    return result


# ----------------------------------------------------------------------------------------------------------
# Decoding and exports


def agreement(ours: list[str], theirs: list[str]) -> dict:
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    differing = [{"ours": a, "theirs": b} for a, b in zip(ours, theirs) if a != b][:3]
    return {"agreement": same / len(ours), "ok": same >= AGREEMENT_NEEDED * len(ours), "examples": differing}


def timed_translations(package: Package, sources: list[str], method: str) -> tuple[list[str], float]:
    device = next(package.model.parameters()).device
    sync(device)
    began = time.perf_counter()
    found = translate(package.model, package.tokenizer, sources, DecodeOptions(method, batch_size=64))
    sync(device)
    return [t.text for t in found], time.perf_counter() - began


def decoding(folder: Path, data: str | None, device: torch.device, sizes: Sizes) -> dict:
    """Greedy and beam 5 over the test set on the device (sentences/s, BLEU), one sentence's latency, the same
    sentences decoded on the CPU, and the BLEU of int8 linear layers (core/quantize.py) against fp32 on the CPU."""
    package = load_package(folder, device)
    test = common.load_pairs(data, common.TEST_SPLIT)[: sizes.decode_sentences]
    sources, references = [s for s, _ in test], [r for _, r in test]
    result = {"sentences": len(test)}
    for method in ("greedy", "beam"):
        translate(package.model, package.tokenizer, sources[:64], DecodeOptions(method))  # warm-up: kernels, caches
        texts, seconds = timed_translations(package, sources, method)
        result[method] = {"sentences_per_s": len(texts) / seconds, "seconds": seconds,
                          "bleu": score(texts, references).bleu}
    sentence = sorted(sources, key=len)[len(sources) // 2]  # median length
    result["one_sentence"] = [decode_speed.translate_latency(package.model, package.tokenizer, sentence, method,
                                                             sizes.latency_repeats) for method in ("greedy", "beam")]
    on_cpu = load_package(folder, "cpu")
    int8 = dataclasses.replace(on_cpu, model=int8_linears(on_cpu.model))
    for method in ("greedy", "beam"):
        (fp32_texts, fp32_s), (int8_texts, int8_s) = (timed_translations(p, sources, method) for p in (on_cpu, int8))
        bleu = {"fp32": score(fp32_texts, references).bleu, "int8": score(int8_texts, references).bleu}
        result[f"{method}_int8_on_cpu"] = {"bleu": bleu, "bleu_difference": bleu["int8"] - bleu["fp32"],
                                           "speedup": fp32_s / int8_s}
    if device.type != "cpu":
        compared = sources[: sizes.compare_sentences]
        src = pad_batch(source_ids(on_cpu.tokenizer, compared[:16], on_cpu.model.cfg), pad_id=on_cpu.model.cfg.pad_id)
        with torch.inference_mode():
            difference = (on_cpu.model(src, src[:, :8]) - package.model(src.to(device), src[:, :8].to(device)).cpu())
        result["max_logit_difference_vs_cpu"] = difference.abs().max().item()
        for method in ("greedy", "beam"):
            result[f"{method}_vs_cpu"] = agreement(timed_translations(on_cpu, compared, method)[0],
                                                   timed_translations(package, compared, method)[0])
    return result


def by_output_limit(package: Package, sentences: list[str]) -> dict[int, list[int]]:
    """Sentence indices grouped by our per-sentence output limit (2 x source + 10, capped), so that every group can
    be decoded by another runtime as one batch with one length limit."""
    groups = defaultdict(list)
    for i, ids in enumerate(source_ids(package.tokenizer, sentences, package.model.cfg)):
        groups[output_limit(package.model.cfg, len(ids), None)].append(i)
    return groups


def transformers_greedy(folder: Path, package: Package, sentences: list[str], device: torch.device) -> list[str]:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()  # not a warning per batch that max_new_tokens overrides the saved max_length

    from playground.export.transformers import TARGET_TOKENIZER_DIR

    model = AutoModelForSeq2SeqLM.from_pretrained(folder, local_files_only=True).to(device).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    target = tokenizer if package.tokenizer.joint else AutoTokenizer.from_pretrained(folder / TARGET_TOKENIZER_DIR)
    texts = [""] * len(sentences)
    for limit, indices in by_output_limit(package, sentences).items():
        batch = tokenizer([sentences[i] for i in indices], return_tensors="pt", padding=True).to(device)
        with torch.inference_mode():
            out = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=limit)
        for i, text in zip(indices, target.batch_decode(out, skip_special_tokens=True)):
            texts[i] = text
    return texts


def ctranslate2_greedy(folder: Path, package: Package, sentences: list[str], device: str) -> list[str]:
    import ctranslate2

    from playground.export.ctranslate2 import translate_with_ctranslate2

    translator = ctranslate2.Translator(str(folder), device=device)
    exported = PairTokenizer.load(folder)
    texts = [""] * len(sentences)
    for limit, indices in by_output_limit(package, sentences).items():
        found = translate_with_ctranslate2(translator, exported, [sentences[i] for i in indices],
                                           package.model.cfg.max_positions, max_output_tokens=limit)
        for i, text in zip(indices, found):
            texts[i] = text
    return texts


def exports(folder: Path, data: str | None, device: torch.device, sizes: Sizes, out_dir: Path) -> dict:
    """The trained package exported to transformers (run on the device) and CTranslate2 (float32 on the GPU when
    CTranslate2 sees one, and on the CPU; int8 on the CPU): greedy outputs against ours on the device."""
    import ctranslate2

    package = load_package(folder, device)
    sentences = [s for s, _ in common.load_pairs(data, common.TEST_SPLIT)[: sizes.compare_sentences]]
    ours = [t.text for t in translate(package.model, package.tokenizer, sentences, DecodeOptions("greedy"))]
    result: dict = {"sentences": len(sentences)}
    with contextlib.suppress(Exception):
        result["ctranslate2_cuda_devices"] = ctranslate2.get_cuda_device_count()
    hf = export_package(str(folder), "transformers", str(out_dir / "transformers"))
    result["transformers"] = agreement(ours, transformers_greedy(hf, package, sentences, device))
    ct2_devices = ["cuda"] * (result.get("ctranslate2_cuda_devices", 0) > 0) + ["cpu"]
    for quantization, devices in (("float32", ct2_devices), ("int8", ["cpu"])):
        exported = export_package(str(folder), "ctranslate2", str(out_dir / f"ct2-{quantization}"), quantization)
        for ct2_device in devices:
            # CTranslate2 on the GPU needs CUDA libraries of its own, which torch's may not match: not a failure
            key = f"ctranslate2_{quantization}_{ct2_device}" + ("_optional" if ct2_device == "cuda" else "")
            try:
                result[key] = agreement(ours, ctranslate2_greedy(exported, package, sentences, ct2_device))
            except Exception as err:  # a CTranslate2 wheel without this CUDA: say so, go on with the CPU
                result[key] = {"error": f"{type(err).__name__}: {err}"}
    # int8 is not held to the bar: on a briefly trained model its rounding flips near-ties (tests/system/test_export)
    result["ctranslate2_int8_cpu"].pop("ok", None)
    return result


CUDA_TESTS = "tests/unit/test_cuda.py"


def cuda_tests(timeout_s: int) -> dict:
    """`pytest tests/unit/test_cuda.py -m cuda` in a child process from the repository root. The file, not the
    folder: collecting all of tests/unit imports every module's needs (plotly, for one, which a GPU image may lack;
    the first run on an H200 stopped there), and the CUDA tests need only the core's."""
    command = [sys.executable, "-m", "pytest", CUDA_TESTS, "-m", "cuda", "-q", "-rs", "-p", "no:cacheprovider"]
    done = subprocess.run(command, cwd=common.REPO_ROOT, capture_output=True, text=True, timeout=timeout_s)
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return {"command": " ".join(command[1:]), "returncode": done.returncode, "ok": done.returncode == 0,
            "summary": lines[-1] if lines else "", "output_tail": (done.stdout + done.stderr)[-3000:]}


def failures(results: dict) -> list[str]:
    """Where a part (or a piece of one, unless its name ends in "_optional") raised, or a check came out false: an
    "error", an "ok" that is False, a False among "checks"; two levels down."""
    failed = []
    for name, part in results.items():
        if not isinstance(part, dict):
            continue
        if "error" in part or part.get("ok") is False:
            failed.append(name)
        failed += [f"{name}.{key}" for key, value in part.get("checks", {}).items() if value is False]
        failed += [f"{name}.{key}" for key, value in part.items() if isinstance(value, dict)
                   and not key.endswith("_optional") and ("error" in value or value.get("ok") is False)]
    return failed


# ----------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=False)
    parser.add_argument("--minutes", type=float, default=3.0, help="training time of the small preset")
    parser.add_argument("--quick", action="store_true", help="20 s of training and small samples (about 2 minutes)")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["throughput", "training", "decoding", "export", "tests"], help="parts to leave out")
    args = parser.parse_args()
    sizes, minutes = (QUICK, 1 / 3) if args.quick else (Sizes(), args.minutes)
    results: dict = {"check": "gpu_check", "settings": vars(args)}
    began = time.perf_counter()
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr), tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        results["machine"] = common.start(args)
        torch.manual_seed(args.seed)
        device = resolve_device(args.device)
        data = multi30k_folder(args.data)
        results |= {"cuda_available": torch.cuda.is_available(), "device": str(device),
                    "data": data or "built-in mini-translation (no Multi30k folder found)"}
        if device.type != "cuda":
            print("CUDA is not available: running the parts on the CPU (a dry run of this script)")
        package = Path(tmp) / "small"
        parts = {
            "environment": lambda: environment(device),
            "throughput": lambda: training_throughput(data, device, args.seed, sizes, Path(tmp) / "throughput"),
            "training": lambda: small_preset_run(data, device, args.seed, minutes, package),
            "decoding": lambda: decoding(package, data, device, sizes),
            "export": lambda: exports(package, data, device, sizes, Path(tmp)),
            "tests": lambda: cuda_tests(sizes.tests_timeout_s),
        }
        for name, work in parts.items():
            if name not in args.skip:
                run_part(results, name, work)
    failed = failures(results)
    results |= {"failed": failed, "ok": results["cuda_available"] and not failed,
                "total_seconds": round(time.perf_counter() - began, 1)}
    print(json.dumps(results, default=str), file=stdout, flush=True)
    sys.exit(0 if not failed else 1)


if __name__ == "__main__":
    main()
