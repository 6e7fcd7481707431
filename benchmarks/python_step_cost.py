#!/usr/bin/env python3
"""What remat.torch.Checkpointed costs beside plain autograd where it recomputes nothing: a
step at the store-all budget against `loss(model(x)).backward()` on the same stages, with the
gradients set to None before each step (`zero_grad(set_to_none=True)`, the optimizers' default
since torch 2.0) and with the gradients kept and accumulated into (`zero_grad(set_to_none=False)`).

    PYTHONPATH=<build>/python python3 benchmarks/python_step_cost.py \\
        --out benchmarks/results/python_step_cost.txt

Each configuration runs in a process of its own (--child), as a training loop would: the
allocator's state, and so how many pages a step faults in, depends on what the process did
before, and one configuration's steps change it for the next. Rounds run every configuration
once in turn, so that load from other processes falls on all alike; each keeps its least step
time over its rounds' steps, in process CPU time (one torch thread: user and system time,
page faults included, not the time spent waiting for a core) and in wall time.

glibc's malloc gives memory back to the system when the free space at the top of its heap
passes a threshold that it adapts as it goes, and a step that allocates it again faults its
pages in (a 9 MiB weight gradient is 2304 pages): whether a configuration's steps do so
depends on where its blocks happen to lie, and changes from process to process for plain
autograd as for Checkpointed. `--allocator steady` runs every process with that threshold fixed
(MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_), so that what remains is each configuration's
own work; `default` leaves malloc as it is. The table has a block for each.
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

CONFIGS = [("plain", True), ("checkpointed", True), ("plain", False), ("checkpointed", False)]
# No trimming of the heap's top, and blocks up to 32 MiB (glibc's largest mmap threshold) from
# the heap: the same for every configuration.
STEADY = {"MALLOC_TRIM_THRESHOLD_": str(1 << 34), "MALLOC_MMAP_THRESHOLD_": str(1 << 25)}


def child(a):
    import torch
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from python_checkpointed import resnet_stages

    torch.manual_seed(0)
    stages = resnet_stages(a.depth)
    x = torch.randn(a.batch, 3, a.image, a.image, requires_grad=True)
    target = torch.randint(10, (a.batch,))
    loss = lambda y: torch.nn.functional.cross_entropy(y, target)
    if a.child == "plain":  # as a user runs it: remat is not even imported
        model = torch.nn.Sequential(*stages)
    else:
        import remat.torch
        model = remat.torch.Checkpointed(stages, x, budget=1 << 62, loss=loss)
        store_all = len(model.schedule.ops) == 2 * len(stages) + 1
        assert store_all, "the budget should let the schedule store everything"
    params = list(model.parameters())
    steps = []
    for i in range(a.warmup + a.steps):
        for p in params:
            if a.set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()
        x.grad = None
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        c0, t0 = time.process_time(), time.perf_counter()
        l = loss(model(x))
        t1 = time.perf_counter()
        l.backward()
        c2, t2 = time.process_time(), time.perf_counter()
        del l
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        if i >= a.warmup:
            steps.append(dict(cpu=(c2 - c0) * 1e3, wall=(t2 - t0) * 1e3,
                              forward=(t1 - t0) * 1e3, backward=(t2 - t1) * 1e3, faults=faults))
    print(json.dumps(dict(torch=torch.__version__, steps=steps)))


def run_child(a, name, set_to_none, batch, allocator):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--batch", str(batch),
           "--depth", str(a.depth), "--image", str(a.image), "--steps", str(a.steps),
           "--warmup", str(a.warmup)] + (["--set-to-none"] if set_to_none else [])
    env = dict(os.environ, OMP_NUM_THREADS="1", **(STEADY if allocator == "steady" else {}))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=18, choices=(18, 34, 50))
    ap.add_argument("--batches", default="8,32")
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=8, help="timed steps per process")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--allocator", default="default,steady",
                    help="default, steady, or both (comma-separated)")
    ap.add_argument("--out")
    ap.add_argument("--child", choices=("plain", "checkpointed"), help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--set-to-none", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)

    batches = [int(b) for b in a.batches.split(",")]
    allocators = a.allocator.split(",")
    best, version = {}, None
    for _ in range(a.rounds):
        for allocator in allocators:
            for batch in batches:
                for name, set_to_none in CONFIGS:
                    r = run_child(a, name, set_to_none, batch, allocator)
                    version = r["torch"]
                    key = (allocator, batch, name, set_to_none)
                    old = best.setdefault(key, {})
                    for s in r["steps"]:
                        for k, v in s.items():
                            old[k] = min(old.get(k, v), v)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    lines = [f"# resnet{a.depth} in 10 stages, {a.image}x{a.image}, store-all budget, CPU "
             f"({platform.processor() or platform.machine()}, {os.cpu_count()} cores, one torch "
             f"thread), torch {version}, commit {commit or 'unknown'}",
             f"# least over {a.rounds} rounds x {a.steps} steps (after {a.warmup} warm-up steps), "
             "each configuration in its own process; ms; faults: the fewest minor page faults "
             "of a step", "",
             "| malloc | batch | zero_grad | plain CPU | Checkpointed CPU | ratio | plain wall | "
             "Checkpointed wall | ratio | forward (plain / Checkpointed) | backward | faults |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for allocator, batch, set_to_none in (
            (al, b, n) for al in allocators for b in batches for n in (True, False)):
        p = best[(allocator, batch, "plain", set_to_none)]
        c = best[(allocator, batch, "checkpointed", set_to_none)]
        lines.append(
            f"| {allocator} | {batch} | set_to_none={set_to_none} | {p['cpu']:.1f} | "
            f"{c['cpu']:.1f} | {c['cpu'] / p['cpu']:.3f} | {p['wall']:.1f} | {c['wall']:.1f} | "
            f"{c['wall'] / p['wall']:.3f} | {p['forward']:.1f} / {c['forward']:.1f} | "
            f"{p['backward']:.1f} / {c['backward']:.1f} | {p['faults']} / {c['faults']} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
