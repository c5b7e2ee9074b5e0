"""Where the project's training step spends its time (small preset, Multi30k batches), and whether
torch.compile helps.

1. Phases of Trainer.run()'s steps, timed with hooks on the unmodified Trainer (no copy of its step): batch
   (collate and the loop's bookkeeping), model forward, loss (forward + backward, the float32 logits included),
   model backward, gradient clipping (and the loss's .item()), optimizer.
2. torch.profiler self time per step, grouped by kind of op, and the top ops.
3. Suspects timed alone: autocast's per-forward cast of the fp32 weights to bf16; Adam as a for-loop, foreach
   and fused (the Trainer builds the fused one on the CPU and on CUDA).
4. On the CPU, the matrix products by kind (from a profile that records shapes): their FLOPs, time and speed against the
   machine's matmul probe, and the MFU the step could reach if every product ran at the probe's speed while the
   rest of the step took the time it takes: what the work outside the products allows.
5. With --compile: torch.compile's compile time and steady-state step time versus eager on the same batches.

    python bench/profile_step.py --data ../shared/data/multi30k [--compile]
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import common  # first: the allocator is chosen before PyTorch loads
import torch
from common import ProjectRunner
from torch.profiler import ProfilerActivity, profile

from playground.core.model import TransformerConfig
from playground.runtime.device import matmul_flops, sync
from playground.training.trainer import Trainer

PHASES = ("batch + loop", "forward", "loss", "backward", "clip", "optimizer", "other")
OP_KINDS = [  # first match wins; self time of every op lands in exactly one kind
    ("matmul", r"aten::(mm|addmm|bmm|baddbmm|matmul|linear)$|mkldnn"),
    ("attention kernels", r"scaled_dot_product|flash_attention|_efficient_attention"),
    ("casts/copies", r"aten::(_to_copy|copy_|to|clone|contiguous)$"),
    ("loss (log_softmax, nll)", r"softmax|nll_loss|cross_entropy"),
    ("dropout", r"dropout|bernoulli"),
    ("layer norm", r"layer_norm"),
    ("optimizer math", r"_foreach_|addcdiv|addcmul|lerp|sqrt|_fused_adam"),
    ("embedding", r"embedding"),
    ("elementwise", r"aten::(add_?|mul_?|div_?|relu|threshold_backward|sum|fill_|zero_|masked_fill|where|ne)$"),
]


# ----------------------------------------------------------------------------------------------------------
# 1. Phases


class PhaseClock:
    """Timestamps from hooks: model forward start/end, the logits' gradient, each parameter's gradient, and
    the optimizer step start/end. The Trainer runs as it is."""

    def __init__(self, trainer: Trainer):
        self.device, self.stamps = trainer.device, {}
        model, optimizer = trainer.model, trainer.optimization.optimizer
        self.handles = [model.register_forward_pre_hook(lambda *_: self.stamp("forward")),
                        model.register_forward_hook(self.on_logits),
                        optimizer.register_step_pre_hook(lambda *_: self.stamp("optimizer")),
                        optimizer.register_step_post_hook(lambda *_: self.stamp("optimizer_done"))]
        self.handles += [p.register_post_accumulate_grad_hook(lambda _: self.stamp("last_grad"))
                         for p in model.parameters()]

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()

    def stamp(self, name: str) -> None:
        sync(self.device)
        self.stamps[name] = time.perf_counter()

    def on_logits(self, module, inputs, logits: torch.Tensor) -> None:
        self.stamp("forward_done")
        if logits.requires_grad:
            logits.register_hook(lambda grad: self.stamp("logits_grad"))

    def phases(self, start: float, end: float) -> dict[str, float]:
        s = self.stamps
        edges = [start, s["forward"], s["forward_done"], s["logits_grad"], s["last_grad"], s["optimizer"],
                 s["optimizer_done"], end]
        return dict(zip(PHASES, (b - a for a, b in zip(edges, edges[1:]))))


def time_phases(runner: ProjectRunner, steps: int) -> dict[str, float]:
    """Median seconds per phase over `steps` steps."""
    clock = PhaseClock(runner.trainer)
    samples = defaultdict(list)
    for _ in range(steps):
        start = time.perf_counter()
        runner.step()
        for name, seconds in clock.phases(start, time.perf_counter()).items():
            samples[name].append(seconds)
    clock.remove()
    return {name: common.median(samples[name]) for name in PHASES}


# ----------------------------------------------------------------------------------------------------------
# 2. torch.profiler


def profile_ops(runner: ProjectRunner, steps: int) -> list[tuple[str, int, float]]:
    """(op name, calls per step, self CPU seconds per step), largest first."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            runner.step()
    ops = [(e.key, e.count // steps, e.self_cpu_time_total / 1e6 / steps) for e in prof.key_averages()]
    return sorted(ops, key=lambda op: -op[2])


def profile_products(runner: ProjectRunner, steps: int) -> tuple[dict[str, dict], float]:
    """The matrix products by kind (matmul_kinds), from a profile of their own (recording shapes slows every op),
    and that profile's self CPU seconds per step, all ops."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            runner.step()
    events = prof.key_averages(group_by_input_shape=True)
    profiled_s = sum(e.self_cpu_time_total for e in events) / 1e6 / steps
    return matmul_kinds(events, runner.trainer.model.cfg, steps), profiled_s


# (first matrix, second matrix) among each product's recorded input shapes
PRODUCT_INPUTS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1)}


def matmul_kind(op: str, shapes: list[list[int]], cfg: TransformerConfig) -> str:
    """Which of the model's products this is, by its shapes (forward and backward alike; a batch of exactly d_ff or
    vocabulary-size rows would be misfiled, which the ~2,000 rows of a Multi30k batch never are)."""
    if op == "aten::bmm":
        return "attention: scores and weighted values"
    dims = {*shapes[0], *shapes[1]}
    if cfg.tgt_vocab_size in dims:
        return "output projection (vocabulary)"
    if cfg.d_ff in dims:
        return "feed-forward"
    return "attention projections"


def matmul_kinds(events, cfg: TransformerConfig, steps: int) -> dict[str, dict]:
    """Per kind of product: calls, self seconds and FLOPs per step (2·m·k·n per product, from its shapes)."""
    kinds: dict[str, dict] = defaultdict(lambda: {"calls": 0.0, "seconds": 0.0, "flops": 0.0})
    for e in events:
        if e.key not in PRODUCT_INPUTS:
            continue
        a, b = (e.input_shapes[i] for i in PRODUCT_INPUTS[e.key])
        kind = kinds[matmul_kind(e.key, [a, b], cfg)]
        batch = a[0] if e.key == "aten::bmm" else 1
        kind["calls"] += e.count / steps
        kind["seconds"] += e.self_cpu_time_total / 1e6 / steps
        kind["flops"] += e.count * 2 * batch * a[-2] * a[-1] * b[-1] / steps
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]["seconds"]))


def op_kind(name: str) -> str:
    return next((kind for kind, pattern in OP_KINDS if re.search(pattern, name)), "other")


def by_kind(ops: list[tuple[str, int, float]]) -> dict[str, float]:
    kinds: dict[str, float] = defaultdict(float)
    for name, _, seconds in ops:
        kinds[op_kind(name)] += seconds
    return dict(sorted(kinds.items(), key=lambda kv: -kv[1]))


# ----------------------------------------------------------------------------------------------------------
# 3. Suspects


def best_of(fn, repeats: int = 7) -> float:
    fn()
    return min(common.call_times(fn, repeats))


def weight_cast_seconds(trainer: Trainer) -> float:
    """What autocast does every forward (and undoes in backward): cast each matmul weight fp32 -> bf16."""
    weights = [m.weight for m in trainer.model.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        return best_of(lambda: [w.to(torch.bfloat16) for w in weights])


def adam_seconds(trainer: Trainer) -> dict[str, float]:
    """One Adam step over the model's parameters (with gradients from the last step) per implementation."""
    params = [p for p in trainer.model.parameters() if p.grad is not None]
    variants = {"for-loop": {"foreach": False}, "foreach": {"foreach": True},
                "fused (the Trainer's, on CPU and CUDA)": {"fused": True}}
    results = {}
    for name, flags in variants.items():
        optimizer = torch.optim.Adam(params, lr=1e-9, betas=trainer.cfg.betas, eps=trainer.cfg.eps, **flags)
        results[name] = best_of(optimizer.step, repeats=5)
    return results


# ----------------------------------------------------------------------------------------------------------
# 5. torch.compile


def time_steps(runner: ProjectRunner, steps: int) -> list[common.Elapsed]:
    times = []
    for _ in range(steps):
        with common.stopwatch(runner.trainer.device) as elapsed:
            runner.step()
        times.append(elapsed)
    return times


def compare_compile(trainer: Trainer, n_batches: int, steps: int, dynamic: bool | None) -> dict[str, float]:
    """Steps cycling over the epoch's first `n_batches` batches, eager and then with the model compiled in place
    (Module.compile, so the Trainer's loop is unchanged). The first compiled pass over the batches compiles (a
    graph per new shape unless dynamic); the pass after it is the steady state. Medians of wall and CPU time."""
    trainer.batches, trainer.batch_in_epoch = trainer.batches[:n_batches] * 10_000, 0
    runner = ProjectRunner(trainer)
    time_steps(runner, n_batches)  # warm-up on these shapes
    eager = time_steps(runner, max(steps, n_batches))
    trainer.model.compile(dynamic=dynamic)
    first_pass = sum(t.wall for t in time_steps(runner, n_batches))
    compiled = time_steps(runner, max(steps, n_batches))
    runner.close()
    result = {"first_pass_s": first_pass}
    for name, times in (("eager", eager), ("compiled", compiled)):
        result[f"{name}_step_s"] = common.median([t.wall for t in times])
        result[f"{name}_step_cpu_s"] = common.median([t.cpu for t in times])
    result["compile_overhead_s"] = first_pass - n_batches * result["compiled_step_s"]
    return result


# ----------------------------------------------------------------------------------------------------------


def main() -> None:
    parser = common.base_parser(__doc__.split("\n")[0], data_required=True)
    parser.add_argument("--precision", default="auto", help="auto, fp32, bf16 or fp16")
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="token budget (default: matched to 128-sentence batches, as train_throughput.py)")
    parser.add_argument("--max-pairs", type=int, default=None, help="use only the first N training pairs (smoke runs)")
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6, help="steps timed per measurement")
    parser.add_argument("--top", type=int, default=15, help="ops listed by self time")
    parser.add_argument("--compile", action="store_true", help="also measure torch.compile")
    parser.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True) (default: torch's choice)")
    parser.add_argument("--compile-batches", type=int, default=3, help="distinct batches (shapes) in the compile test")
    args = parser.parse_args()

    machine = common.start(args)
    with tempfile.TemporaryDirectory(prefix="bench-") as out_dir:
        trainer = common.project_trainer(args.data, args.max_pairs, args.precision, args.device, args.seed,
                                         Path(out_dir), args.batch_tokens)
        result = profile_trainer(trainer, args)
        if args.compile:
            dynamic = True if args.dynamic else None  # None: torch's automatic dynamic shapes
            result["compile"] = c = compare_compile(trainer, args.compile_batches, args.steps, dynamic)
            common.print_table(f"torch.compile ({args.compile_batches} batch shapes, dynamic={args.dynamic or 'auto'})",
                               ["", "eager", "compiled", "speedup"],
                               [["step ms (wall)", 1000 * c["eager_step_s"], 1000 * c["compiled_step_s"],
                                 c["eager_step_s"] / c["compiled_step_s"]],
                                ["step ms (CPU time)", 1000 * c["eager_step_cpu_s"], 1000 * c["compiled_step_cpu_s"],
                                 c["eager_step_cpu_s"] / c["compiled_step_cpu_s"]]])
            print(f"first compiled pass over the {args.compile_batches} batches: {c['first_pass_s']:.1f} s "
                  f"(compile overhead ~{c['compile_overhead_s']:.1f} s)")
    common.emit_json(args, {"benchmark": "profile_step", "machine": machine, "settings": vars(args), **result})


def profile_trainer(trainer: Trainer, args) -> dict:
    """Sections 1-3 on the Trainer's own loop; prints their tables and returns their numbers."""
    runner = ProjectRunner(trainer)
    print(f"batch_tokens {trainer.cfg.batch_tokens}, {trainer.precision}, {len(trainer.batches)} batches per epoch")
    time_steps(runner, args.warmup_steps)
    phases = time_phases(runner, args.steps)
    total = sum(phases.values())
    common.print_table(f"Phases (median of {args.steps} steps; sum {1000 * total:,.0f} ms)", ["phase", "ms", "share"],
                       [[name, 1000 * s, f"{s / total:.1%}"] for name, s in phases.items()])

    ops = profile_ops(runner, args.steps)
    # on a GPU the profiler's CPU time of a product is its launch, not its work: section 4 is for the CPU
    products, profiled_s = profile_products(runner, args.steps) if trainer.device.type == "cpu" else ({}, 0.0)
    runner.close()
    profiled = sum(s for _, _, s in ops)
    kinds = by_kind(ops)
    common.print_table("torch.profiler self CPU time per step, by kind of op (profiler overhead included)",
                       ["kind", "ms", "share"], [[k, 1000 * s, f"{s / profiled:.1%}"] for k, s in kinds.items()])
    common.print_table(f"Top {args.top} ops by self CPU time per step", ["op", "calls", "ms", "share", "kind"],
                       [[name[:60], calls, 1000 * s, f"{s / profiled:.1%}", op_kind(name)]
                        for name, calls, s in ops[: args.top]])

    cast = weight_cast_seconds(trainer)
    adam = adam_seconds(trainer)
    rows = [["cast all Linear weights fp32 -> bf16 (autocast, every forward; backward casts the grads back)",
             1000 * cast, f"{cast / total:.1%}"]]
    rows += [[f"Adam step, {name}", 1000 * s, f"{s / total:.1%}"] for name, s in adam.items()]
    common.print_table("Suspects timed alone (best of several)", ["what", "ms", "share of a step"], rows)
    bound = products_bound(trainer, products, profiled_s, total) if products else {}
    return {"batch_tokens": trainer.cfg.batch_tokens, "precision": trainer.precision, "phases_s": phases,
            "op_kinds_s": kinds, "top_ops": ops[: args.top], "weight_cast_s": cast, "adam_s": adam,
            "products": products, **bound}


def products_bound(trainer: Trainer, products: dict[str, dict], profiled_s: float, step_s: float) -> dict:
    """Section 4: the products' speed against the probe, and the MFU bound set by the rest of the step: the phases'
    median step (no profiler) times the rest's share of the profiled step (`profiled_s`, all ops), so that a
    machine whose speed drifts between the two measurements shifts both alike. The profiler's cost per call weighs
    more on the many small ops than on the products, so the rest's share, and the bound, err on the low side. The
    model FLOPs of a step: those of the epoch's mean batch."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(trainer.precision, torch.float32)
    peak = matmul_flops(trainer.device.type, dtype)
    rows = [[kind, f"{p['calls']:.0f}", 1000 * p["seconds"], p["flops"] / 1e9, p["flops"] / p["seconds"] / 1e12,
             f"{p['flops'] / p['seconds'] / peak:.0%}"] for kind, p in products.items()]
    product_s, product_flops = (sum(p[key] for p in products.values()) for key in ("seconds", "flops"))
    rows.append(["all products", "", 1000 * product_s, product_flops / 1e9, product_flops / product_s / 1e12,
                 f"{product_flops / product_s / peak:.0%}"])
    common.print_table(f"Matrix products per step, by kind (probe: {peak / 1e12:.2f} TFLOP/s {dtype})",
                       ["kind", "calls", "ms", "GFLOP", "TFLOP/s", "of probe"], rows)
    lengths = common.pair_lengths(trainer.train_set)
    model_flops = common.mean_real_tokens(lengths, trainer.batches) * common.flops_per_token(trainer.model.cfg, lengths)
    rest_s = step_s * max(1 - product_s / profiled_s, 0.0)
    mfu, bound = model_flops / step_s / peak, model_flops / peak / (model_flops / peak + rest_s)
    print(f"MFU of this step: {mfu:.1%} ({model_flops / 1e9:.1f} model GFLOP in {1000 * step_s:.0f} ms). The step "
          f"outside the products: {1000 * rest_s:.0f} ms; with every product at the probe's speed the step would take "
          f"{1000 * (model_flops / peak + rest_s):.0f} ms, an MFU of {bound:.1%}.")
    return {"matmul_peak_flops": peak, "model_flops_per_step": model_flops, "mfu": mfu,
            "outside_products_s": rest_s, "mfu_bound_with_products_at_peak": bound}


if __name__ == "__main__":
    main()
