#!/usr/bin/env python3
"""remat.torch.Checkpointed beside torch.utils.checkpoint.checkpoint_sequential on one model at
the same budgets: for each budget, checkpoint_sequential with its best segment count (the
fastest of the counts whose measured peak fits) and Checkpointed with the budget; measured peak
and step time of each, as a table (stdout, and --out FILE) and a chart (--svg FILE).

    PYTHONPATH=<build>/python python3 benchmarks/python_checkpointed.py \\
        --out benchmarks/results/python_checkpointed.txt \\
        --svg benchmarks/results/python_checkpointed.svg

Both peaks are the most remat::torch's CPU meter saw allocated during a whole step
(`loss(model(x)).backward()`), above what was allocated before it (parameters, their gradients),
the input included: for Checkpointed its `total_peak`, which includes what autograd holds beside
its schedule (`outside_schedule`); the next column is the peak the solver predicts for its
schedule. Each of --steps rounds runs every configuration once (so that load from other
processes falls on all alike) and each keeps its least time: wall clock, on the CPU.
"""

import argparse
import platform
import subprocess
import time

import torch
import torchvision
from torch.utils.checkpoint import checkpoint_sequential

import remat
import remat.torch
from remat import _torch as meter


def resnet_stages(depth, classes=10):
    net = getattr(torchvision.models, f"resnet{depth}")(num_classes=classes)
    stem = torch.nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
    blocks = [b for layer in (net.layer1, net.layer2, net.layer3, net.layer4) for b in layer]
    return [stem, *blocks, torch.nn.Sequential(net.avgpool, torch.nn.Flatten(), net.fc)]


def one_step(step, x):
    """(peak bytes above the step's start, the input included; ms) of one run of `step`."""
    base = meter.cpu_current() - x.numel() * x.element_size()
    meter.cpu_reset_peak()
    t0 = time.perf_counter()
    step()
    ms = (time.perf_counter() - t0) * 1e3
    return meter.cpu_peak() - base, ms


def measure_all(configs, x, rounds):
    """Every config's (largest peak, least ms) over `rounds` rounds, each round running every
    config once: load from other processes falls on all of them alike, and the least time is
    the one it disturbed least. A config is (name, step, peak_of) where peak_of, if given,
    reads the peak after the step (Checkpointed resets the meter's peak at every op)."""
    best = {}
    for _ in range(rounds):
        for name, step, peak_of in configs:
            peak, ms = one_step(step, x)
            if peak_of is not None:
                peak = peak_of()
            old = best.get(name, (0, float("inf")))
            best[name] = (max(old[0], peak), min(old[1], ms))
    return best


def svg_chart(rows, title):
    """Step time against budget, one polyline per method (rows: budget MiB, seq ms, remat ms)."""
    w, h, left, bottom, top, right = 640, 380, 70, 50, 40, 20
    xs = [r[0] for r in rows]
    ys = [v for r in rows for v in r[1:] if v is not None]
    x0, x1 = min(xs), max(xs)
    y0, y1 = 0, max(ys) * 1.1
    px = lambda v: left + (v - x0) / ((x1 - x0) or 1) * (w - left - right)
    py = lambda v: h - bottom - (v - y0) / (y1 - y0) * (h - bottom - top)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - right}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">budget (MiB)</text>',
           f'<text x="16" y="{h / 2}" transform="rotate(-90 16 {h / 2})" '
           'text-anchor="middle">step time (ms)</text>']
    for v in xs:
        out.append(f'<text x="{px(v):.1f}" y="{h - bottom + 16}" text-anchor="middle">{v:.0f}</text>')
    for i in range(5):
        v = y1 * i / 4
        out.append(f'<text x="{left - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:.0f}</text>')
    for col, colour, name in ((1, "#d62728", "checkpoint_sequential, best segments"),
                              (2, "#1f77b4", "remat.torch.Checkpointed")):
        pts = [(px(r[0]), py(r[col])) for r in rows if r[col] is not None]
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                   + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts) + '"/>')
        out += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{colour}"/>' for a, b in pts]
        ly = top + 10 + 18 * (col - 1)
        out.append(f'<line x1="{w - 290}" y1="{ly}" x2="{w - 270}" y2="{ly}" stroke="{colour}" '
                   'stroke-width="2"/>')
        out.append(f'<text x="{w - 264}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depth", type=int, default=18, choices=(18, 34, 50))
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--shares", default="0.52,0.6,0.7,0.85,1.0",
                    help="budgets as shares of plain autograd's peak")
    ap.add_argument("--out")
    ap.add_argument("--svg")
    a = ap.parse_args()

    torch.manual_seed(0)
    stages = resnet_stages(a.depth)
    seq = torch.nn.Sequential(*stages)
    x = torch.randn(a.batch, 3, a.image, a.image, requires_grad=True)
    target = torch.randint(10, (a.batch,))
    loss = lambda y: torch.nn.functional.cross_entropy(y, target)
    for p in seq.parameters():
        p.grad = torch.zeros_like(p)  # gradients exist before any measure, for both

    def sequential_step(segments):
        return lambda: loss(checkpoint_sequential(seq, segments, x)).backward()

    m = remat.torch.Checkpointed(stages, x, budget=1 << 62, loss=loss)
    least = m.least_budget  # the whole step's (the loss is given)
    top = one_step(lambda: loss(seq(x)).backward(), x)[0]
    budgets = [int(top * float(s)) for s in a.shares.split(",")]

    def remat_step(budget):
        def step():
            m.budget = budget
            loss(m(x)).backward()
        return step

    # checkpoint_sequential's memory does not depend on the budget: every segment count once.
    configs = [("plain", lambda: loss(seq(x)).backward(), None)]
    configs += [(n, sequential_step(n), None) for n in range(1, len(stages) + 1)]
    schedules = {}
    for b in budgets:
        m.budget = b
        schedules[b] = m.schedule
        if m.schedule.feasible:
            configs.append((("remat", b), remat_step(b), lambda: m.total_peak))
    best = measure_all(configs, x, a.steps)
    plain = best["plain"]
    by_segments = {n: best[n] for n in range(1, len(stages) + 1)}

    rows, lines = [], []
    head = ("| budget (MiB) | checkpoint_sequential: segments | peak (MiB) | step (ms) | "
            "Checkpointed: peak (MiB) | schedule's peak (MiB) | step (ms) | recomputations |")
    lines += [head, "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for budget in budgets:
        fits = [(ms, n, peak) for n, (peak, ms) in by_segments.items() if peak <= budget]
        ms_seq, n_seq, peak_seq = min(fits) if fits else (None, None, None)
        schedule = schedules[budget]
        if schedule.feasible:
            peak_remat, ms_remat = best[("remat", budget)]
            schedule_peak = schedule.peak_memory
            recomputations = len(schedule.ops) - (2 * len(stages) + 1)
        else:
            peak_remat = ms_remat = schedule_peak = recomputations = None
        mib = lambda v: "-" if v is None else f"{v / 2**20:.1f}"
        msf = lambda v: "-" if v is None else f"{v:.0f}"
        lines.append(f"| {budget / 2**20:.1f} | {n_seq or '-'} | {mib(peak_seq)} | {msf(ms_seq)} | "
                     f"{mib(peak_remat)} | {mib(schedule_peak)} | {msf(ms_remat)} | "
                     f"{'-' if recomputations is None else recomputations} |")
        rows.append((budget / 2**20, ms_seq, ms_remat))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    header = [f"# resnet{a.depth} in {len(stages)} stages, batch {a.batch}, {a.image}x{a.image}, "
              f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} "
              f"threads), torch {torch.__version__}, commit {commit}",
              f"# plain autograd: peak {plain[0] / 2**20:.1f} MiB, {plain[1]:.0f} ms; "
              f"Checkpointed's least budget {least / 2**20:.1f} MiB",
              "# checkpoint_sequential by segment count (peak MiB, ms): " +
              ", ".join(f"{n}: {p / 2**20:.1f}, {t:.0f}" for n, (p, t) in by_segments.items())]
    text = "\n".join(header + [""] + lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg_chart(rows, f"resnet{a.depth}, batch {a.batch}, {a.image}x{a.image}, CPU"))


if __name__ == "__main__":
    main()
