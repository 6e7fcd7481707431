#!/usr/bin/env python3
"""A small GPT-2 trained as a 4-stage pipeline on 4 gloo processes (torch.distributed.pipelining,
1F1B, CPU), two ways, at the same memory per rank:

  (a) equal blocks per rank, every block but each rank's last wrapped in
      torch.utils.checkpoint (what torchtitan's and Megatron's full recomputation do);
  (c) remat's split (remat.split_pipeline on the model's profiled chain of blocks), each rank a
      remat.torch.Checkpointed of its blocks with its micro-batches in flight.

The budget per rank is what (a) needs on the profiled chain (the most any rank's peak plus K - 1
micro-batches' retained memory). For each way and rank: its blocks, K, the memory the rank held
at once across a whole step as the allocator measured it (remat's CPU meter, above what was
allocated before the step: parameters and their gradients; the most over --steps steps after a
first), and the step's time (the least of them, wall clock; every rank runs the same step). On
the last rank torch also keeps, until the step ends, every micro-batch's loss and the stage's
received input (docs/pipelines.md): M of each beside the budget. Gradients of both ways are checked against
the whole model run in one process, micro-batch by micro-batch.

    PYTHONPATH=<build>/python python3 benchmarks/python_pipeline.py \\
        --out benchmarks/results/python_pipeline.txt

Needs torch 2.4 or later (torch.distributed.pipelining) with gloo. Times on a machine with fewer
cores than ranks are those of ranks sharing cores; the memory figures do not depend on it.
"""

import argparse
import inspect
import os
import platform
import socket
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
from torch.utils.checkpoint import checkpoint

import remat
import remat.torch as rt

VOCAB, DIM, HEADS, SEQ, DEPTH = 4096, 128, 4, 128, 8
ROWS, RANKS, MICRO = 4, 4, 8  # rows per micro-batch, pipeline ranks, micro-batches per step
# torch keeps every micro-batch's output until the step ends unless told not to (where it can be).
KEEP_NO_OUTPUTS = ({"return_outputs": False}
                   if "return_outputs" in inspect.signature(Schedule1F1B.step).parameters else {})


class Embed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Parameter(torch.randn(SEQ, DIM) * 0.02)

    def forward(self, x):  # x: the tokens' embeddings, (rows, SEQ, DIM)
        return x + self.pos


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(DIM), torch.nn.LayerNorm(DIM)
        self.qkv, self.proj = torch.nn.Linear(DIM, 3 * DIM), torch.nn.Linear(DIM, DIM)
        self.fc, self.out = torch.nn.Linear(DIM, 4 * DIM), torch.nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        q, k, v = self.qkv(self.ln1(x)).split(DIM, dim=2)
        heads = [t.reshape(ROWS, SEQ, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v)]
        a = F.scaled_dot_product_attention(*heads, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(ROWS, SEQ, DIM))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(DIM)
        self.lm = torch.nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, x):
        return self.lm(self.ln(x))


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(Embed(), *[Block() for _ in range(DEPTH)], Head())


def loss_fn(logits, target):
    return F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


def data():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(MICRO * ROWS, SEQ, DIM, generator=g)
    target = torch.randint(0, VOCAB, (MICRO * ROWS, SEQ), generator=g)
    return x, target


class EveryBlockCheckpointed(torch.nn.Module):
    """(a): every block but the last under torch.utils.checkpoint."""

    def __init__(self, blocks):
        super().__init__()
        self.blocks = torch.nn.ModuleList(blocks)

    def forward(self, x):
        for b in self.blocks[:-1]:
            x = checkpoint(b, x, use_reentrant=False)
        return self.blocks[-1](x)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, port, way, starts, K, budget, steps, results):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=RANKS)
    torch.set_num_threads(1)
    try:
        full = model()
        first, end = starts[rank], starts[rank + 1] if rank + 1 < RANKS else len(full)
        part = full[first:end]
        x, target = data()
        sample = x[:ROWS].clone()
        if rank > 0:
            with torch.no_grad():
                sample = full[:first](sample)
            sample.requires_grad_(True)
        if way == "a":
            module = EveryBlockCheckpointed(list(part))
        else:
            # The last rank profiles its blocks with the pipeline's loss (the others' "loss" is
            # the output's gradient arriving), as the whole model's profile did.
            last = end == len(full)
            module = rt.Checkpointed(
                part, sample, budget=budget, in_flight=K[rank], runs=1,
                loss=(lambda y: loss_fn(y, target[:ROWS])) if last else None)
        out_shape = (ROWS, SEQ, VOCAB) if end == len(full) else (ROWS, SEQ, DIM)
        stage = PipelineStage(module, rank, RANKS, torch.device("cpu"),
                              input_args=(torch.empty(ROWS, SEQ, DIM, requires_grad=rank > 0),),
                              output_args=(torch.empty(out_shape, requires_grad=True),))
        sched = Schedule1F1B(stage, MICRO, loss_fn=loss_fn, scale_grads=False)
        for p in part.parameters():
            p.grad = torch.zeros_like(p)
        peaks, times = [], []
        for _ in range(steps + 1):  # the first also makes the stage's buffers: not measured
            for p in part.parameters():
                p.grad.zero_()
            dist.barrier()
            before = rt.cpu_meter.current()
            rt.cpu_meter.reset_peak()
            start = time.perf_counter()
            if rank == 0:
                sched.step(x)
            elif rank == RANKS - 1:
                # The outputs are not kept for returning (torch keeps every micro-batch's
                # otherwise): the loss is all this step needs of them.
                sched.step(target=target, **KEEP_NO_OUTPUTS)
            else:
                sched.step()
            times.append(time.perf_counter() - start)
            peaks.append(rt.cpu_meter.peak() - before)
        # One step's gradients against the whole model in one process.
        ref = model()
        for xs, ts in zip(x.chunk(MICRO), target.chunk(MICRO)):
            loss_fn(ref(xs), ts).backward()
        pairs = list(zip(part.parameters(), ref[first:end].parameters()))
        close = ("bit for bit" if all(torch.equal(p.grad, q.grad) for p, q in pairs) else
                 "within 1e-5" if all(torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7)
                                       for p, q in pairs) else "DIFFER")
        planned = None
        if way == "c":  # what the rank's own Checkpointed planned with its own profile
            sch = module.schedule
            planned = (module.plain_peak if K[rank] == 1 and module.plain_peak is not None
                       and module.plain_peak <= module.budget_bytes  # runs plainly
                       else sch.peak_memory + (K[rank] - 1) * sch.retained + module.loss_reserve)
        results[rank] = (first, end, max(peaks[1:]), min(times[1:]), close, planned)
    finally:
        dist.destroy_process_group()


def run_way(way, starts, K, budget, steps):
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(worker, args=(free_port(), way, starts, K, budget, steps, results),
                 nprocs=RANKS)
        return dict(results)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5, help="profile runs per block (the median)")
    ap.add_argument("--out")
    args = ap.parse_args()

    K = remat.micro_batches_in_flight("1f1b", RANKS, MICRO)
    torch.set_num_threads(1)  # as each rank runs: the profile's times are theirs
    full = model()
    x, target = data()
    prof = rt.profile(full, x[:ROWS], loss=lambda y: loss_fn(y, target[:ROWS]), warmup=2,
                      runs=args.runs)
    chain = prof.chain
    equal = remat.equal_starts(len(chain), RANKS)
    a = remat.checkpoint_every_stage(chain, 0, K, equal)
    budget = a.min_feasible_budget
    a = remat.checkpoint_every_stage(chain, budget, K, equal)
    c = remat.split_pipeline(chain, budget, K)
    lines = [f"# python_pipeline.py: torch {torch.__version__}, {platform.processor() or 'cpu'}, "
             "1 thread per rank; commit "
             + subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True).stdout.strip(),
             f"# GPT: {DEPTH} blocks, dim {DIM}, {HEADS} heads, sequence {SEQ}, vocabulary "
             f"{VOCAB}; micro-batches of {ROWS} rows, {MICRO} per step; {RANKS} ranks, 1F1B, "
             f"K = {K}",
             f"# budget per rank: {budget} bytes ({budget / 2**20:.1f} MiB), what (a) needs on "
             "the profiled chain",
             f"# predicted slowest rank per micro-batch: (a) {a.slowest:.2f} ms, (c) "
             f"{c.slowest:.2f} ms (split {c.starts})",
             f"# {os.cpu_count()} cores for {RANKS} ranks" + (
                 ": fewer cores than ranks, so a step takes about the ranks' work summed over "
                 "the cores, not the slowest rank's: its time does not show the balance"
                 if (os.cpu_count() or 1) < RANKS else ""), ""]
    lines.append("| way | rank | blocks | K | memory on the chain | planned by the rank | "
                 "measured peak | step ms | gradients |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for way, split in (("a", a), ("c", c)):
        results = run_way(way, split.starts, K, budget, args.steps)
        for r in range(RANKS):
            first, end, peak, t, close, planned = results[r]
            s = split.stages[r]
            lines.append(f"| ({way}) | {r} | {first}-{end - 1} | {K[r]} | {s.memory} | "
                         f"{planned if planned is not None else '-'} | {peak} | "
                         f"{1e3 * t:.0f} | {close} |")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
