"""Which device to run on, and which precision is fastest there (measured, not assumed)."""

from __future__ import annotations

import contextlib
import functools
import threading
import time

import torch

from playground.errors import TrainingError

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def resolve_device(choice: str = "auto") -> torch.device:
    """'auto' picks CUDA, then Apple MPS, then CPU; an explicit choice must be available."""
    if choice in (None, "", "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise TrainingError("CUDA was requested but no CUDA GPU is visible to PyTorch; choose 'cpu' or 'auto'.")
    if choice == "mps" and not torch.backends.mps.is_available():
        raise TrainingError("MPS was requested but this machine has no Apple GPU; choose 'cpu' or 'auto'.")
    if choice not in ("cpu", "cuda", "mps"):
        raise TrainingError(f"Unknown device {choice!r}: use auto, cpu, cuda or mps.")
    return torch.device(choice)


@functools.lru_cache(maxsize=None)
def matmul_flops(device_type: str, dtype: torch.dtype, size: int = 1024) -> float:
    """Measured matmul throughput (FLOP/s, median of 9) of a size x size product on the device."""
    device = torch.device(device_type)
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    for _ in range(3):  # warm-up: kernel choice, caches
        a @ b
    return 2 * size**3 / median_seconds(lambda: a @ b, 9, device)


def median_seconds(call, times: int, device: torch.device) -> float:
    """Median wall seconds of `times` calls, the device synchronised around each (the median shrugs off a busy
    neighbour on a shared machine)."""
    seconds = []
    for _ in range(times):
        sync(device)
        start = time.perf_counter()
        call()
        sync(device)
        seconds.append(time.perf_counter() - start)
    return sorted(seconds)[len(seconds) // 2]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def resolve_precision(choice: str, device: torch.device) -> str:
    """'auto': bf16 on GPUs that support it, fp16 on older GPUs, bf16 on CPUs where it measures faster."""
    if choice not in PRECISIONS:
        raise TrainingError(f"Unknown precision {choice!r}: use one of {', '.join(PRECISIONS)}.")
    if choice != "auto":
        if choice == "fp16" and device.type == "cpu":
            raise TrainingError("fp16 training needs a GPU; on the CPU use bf16 or fp32.")
        return choice
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if device.type == "cpu":
        try:
            faster = matmul_flops("cpu", torch.bfloat16) > 1.3 * matmul_flops("cpu", torch.float32)
        except RuntimeError:  # no bf16 kernels on this CPU
            faster = False
        return "bf16" if faster else "fp32"
    return "fp32"


def autocast(device: torch.device, precision: str):
    """The autocast context for a precision (a no-op for fp32)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device.type, dtype=dtype)


def decoding_precision(device: torch.device | str, precision: str) -> str:
    """The precision a run's validations decode in: the run's own on a GPU, float32 on a CPU. There bf16 would have
    oneDNN compile kernels for every batch size and cache length a search meets (120 MB of them for the small
    preset's validation), which crowd the training's own out of the cache it keeps (memory.ONEDNN_KERNELS_KEPT);
    float32 decodes the same translations in about the same time (1.2 s against 1.1 s for 300 sentences)."""
    return "fp32" if torch.device(device).type == "cpu" else precision


@contextlib.contextmanager
def tf32_matmuls(device: torch.device):
    """On a CUDA GPU, fp32 matmuls and convolutions on TF32 tensor cores (Ampere and newer: a 10-bit mantissa in the
    products, fp32 sums) for what runs inside: a training step's passes. PyTorch leaves it off, and an fp32 step then
    uses a fraction of the GPU. Everything else keeps full fp32, so a GPU translates as the CPU does (TF32 moved the
    demo's logits by 0.025 on an H200 and changed a beam)."""
    if device.type != "cuda":
        yield
        return
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


_threads_lock = threading.Lock()
_one_thread_users = 0
_threads_before = 1


@contextlib.contextmanager
def one_thread_on_cpu(device: torch.device):
    """One intra-op thread on a CPU for the work inside (a validation: many small decoding steps). On a busy
    machine a second thread's spin-waits cost far more than it gains: a validation of the tiny preset took 17.6 s
    with 2 threads against 1.3 s with one while two other processes kept both cores busy (0.7 s against 0.8 s on
    a quiet machine). Thread counts are per process: the last user restores the count the first one found."""
    global _one_thread_users, _threads_before
    if device.type != "cpu":
        yield
        return
    with _threads_lock:
        if _one_thread_users == 0:
            _threads_before = torch.get_num_threads()
            torch.set_num_threads(1)
        _one_thread_users += 1
    try:
        yield
    finally:
        with _threads_lock:
            _one_thread_users -= 1
            if _one_thread_users == 0:
                torch.set_num_threads(_threads_before)


def describe(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        threads = torch.get_num_threads()
        return f"cpu ({threads} thread{'s' if threads > 1 else ''})"
    return device.type
