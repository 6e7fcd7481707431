"""One training step measured on remat's CPU meter (`remat._torch`): the measure the Python
benchmarks that compare Checkpointed with PyTorch's own tools share. Imports nothing that needs
torch 2.x, so it serves both tiers."""

import gc
import time

from remat import _torch as meter

MiB = 2**20


def one_step(forward, x, peak_of=None):
    """(peak, saved, ms) of `forward(x).backward()`: bytes above what was held before the step
    (the input included), bytes the forward left for the backward, wall milliseconds."""
    # Garbage that a collection would free in the middle of the step (reference cycles of an
    # earlier step or model) would lower what the meter reads: collect it first.
    gc.collect()
    before = meter.cpu_current()
    base = before - x.numel() * x.element_size()
    meter.cpu_reset_peak()
    t0 = time.perf_counter()
    l = forward(x)
    saved = meter.cpu_current() - before - l.numel() * l.element_size()
    l.backward()
    ms = (time.perf_counter() - t0) * 1e3
    del l
    peak = peak_of() if peak_of else meter.cpu_peak() - base
    return peak, saved, ms
