#!/usr/bin/env python3
"""remat.torch.Checkpointed beside PyTorch 2.x's own tools, on the CPU, at matched measured peaks,
on the models of tests/python/pypi_models.py (transformers' GPT-2 and Llama, timm's ResNet-D and
ViT) at benchmark sizes:

* plain autograd (everything saved);
* torch.utils.checkpoint (non-reentrant) around every block;
* the same with a selective-checkpoint policy: the outputs of matrix products and convolutions
  saved, everything else recomputed (create_selective_checkpoint_contexts);
* torch.compile of the whole model (inductor) with torch._functorch.config.
  activation_memory_budget swept from 0 to 1;
* Checkpointed at each peak measured for one of the above: its budget covers its schedule, and
  autograd holds a little beside it (the loss, and late in the backward the output's gradient:
  `outside_schedule`), so the budget is lowered until the whole step's peak is at most the
  other method's; and at its own least budget.

    PYTHONPATH=<build>/python python3 benchmarks/python_vs_torch.py \\
        --out benchmarks/results/python_vs_torch.txt --svg benchmarks/results/python_vs_torch.svg \\
        --json benchmarks/results/python_vs_torch.json

One meter for all: remat::torch's CPU meter (remat._torch), which counts every byte that
libtorch's CPU allocator gives out, eager tensors and the buffers inductor's generated code
allocates (empty_strided) alike. A step's peak is the most it saw allocated during
`loss(model(x)).backward()` above what was held before the step, the input included (for
Checkpointed its `total_peak`, which includes what autograd holds beside the schedule); gradients
of parameters exist before any step, so none is counted. `saved` is what the forward left
allocated for the backward (read between the two, the loss's scalar not counted). Whether a
method kept its budget: Checkpointed was asked for a peak in bytes (every op's measured peak
within the budget, and as predicted); torch.compile for a share of the activations its
default partition saves (by the partitioner's definition: 0 saves only the graph's inputs, 1 what
the default saves), so it kept the budget b when its saved bytes are at most b times the saved
bytes at 1 (the eager tools are asked for nothing).

Times are wall clock on one thread. Each of --rounds rounds runs every configuration of a model
once, so that load from other processes falls on all alike, and each configuration keeps its
least time (and its largest peak): on a shared machine the least is the run disturbed least.
"""

import argparse
import functools
import gc
import json
import math
import os
import platform
import subprocess
import sys
import time
import types

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._functorch.config  # noqa: E402
import torch._inductor.config  # noqa: E402
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts  # noqa: E402

import pypi_models  # noqa: E402
import remat  # noqa: E402
import remat.torch  # noqa: E402
from step_meter import MiB, one_step  # noqa: E402

SIZES = {
    "gpt2": dict(batch=8, seq=128, vocab=2048, dim=256, heads=4, layers=6),
    "llama": dict(batch=8, seq=128, vocab=2048, dim=256, heads=4, kv_heads=2, layers=6),
    "resnet": dict(batch=16, image=64),
    "vit": dict(batch=16, image=64, patch=8, dim=192, heads=3, depth=6),
}
aten = torch.ops.aten
SAVED_OPS = [aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
             aten.convolution.default]


class Blocks(torch.nn.Module):
    """The stages, the blocks (all but the first and last stage) each run through `wrap`."""

    def __init__(self, stages, wrap):
        super().__init__()
        self.stages = torch.nn.ModuleList(stages)
        self.wrap = wrap

    def forward(self, x):
        last = len(self.stages) - 1
        for k, s in enumerate(self.stages):
            x = self.wrap(s, x) if 0 < k < last else s(x)
        return x


def per_block_checkpoint(stage, x):
    return checkpoint(stage, x, use_reentrant=False)


def selective_checkpoint(stage, x):
    return checkpoint(stage, x, use_reentrant=False,
                      context_fn=functools.partial(create_selective_checkpoint_contexts, SAVED_OPS))


def compiled_step(seq, loss, budget, tag, x):
    """torch.compile of loss(seq(x)) partitioned with activation_memory_budget = `budget`. Each
    budget compiles its own copy of the function's code: dynamo keys its cache on the code
    object and does not guard on the partitioner's configuration, so copies sharing one code
    object would all run the first budget's graph."""
    def fwd(x):
        return loss(seq(x))

    code = fwd.__code__.replace(co_name=f"fwd_{tag}")
    f = types.FunctionType(code, fwd.__globals__, code.co_name, None, fwd.__closure__)
    compiled = torch.compile(f, fullgraph=True)

    def step(x):
        return compiled(x)

    with torch._functorch.config.patch(activation_memory_budget=budget):
        compiled(x).backward()  # compiles the forward and the backward under `budget`
    return step


def measure(configs, x, rounds):
    """Every config's (largest peak, largest saved, least ms) over interleaved rounds."""
    best = {}
    for _ in range(rounds):
        for name, forward, peak_of in configs:
            peak, saved, ms = one_step(forward, x, peak_of)
            old = best.get(name, (0, 0, float("inf")))
            best[name] = (max(old[0], peak), max(old[1], saved), min(old[2], ms))
    return best


def run_model(name, a):
    torch.manual_seed(0)
    model, stages, x, loss = pypi_models.MODELS[name](**({} if a.tiny else SIZES[name]))
    del model  # the stages hold its modules
    for s in stages:
        s.train()
    for p in torch.nn.ModuleList(stages).parameters():
        p.grad = torch.zeros_like(p)
    plain = torch.nn.Sequential(*stages)
    tools = [("plain autograd", lambda x: loss(plain(x)), None),
             ("checkpoint per block", lambda x, m=Blocks(stages, per_block_checkpoint): loss(m(x)),
              None),
             ("selective checkpoint", lambda x, m=Blocks(stages, selective_checkpoint): loss(m(x)),
              None)]
    budgets = [float(b) for b in a.compile_budgets.split(",")] if a.compile_budgets else []
    for i, b in enumerate(budgets):
        t0 = time.perf_counter()
        tools.append((f"compile, budget {b:g}", compiled_step(plain, loss, b, f"{name}_{i}", x), None))
        print(f"# {name}: compiled at budget {b:g} in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)
    # The tools' own peaks first (a short measure), then Checkpointed at each of them.
    first = measure(tools, x, 1)
    m = remat.torch.Checkpointed(stages, x, budget=1 << 62, loss=loss)
    least = m.least_budget  # the whole step's (the loss is given)

    def checkpointed_at(budget):
        def forward(x):
            m.budget = budget
            return loss(m(x))
        return forward

    def fit(target):
        """The budget at which Checkpointed's whole step peaks at most at `target`: the budget
        itself, since it bounds the whole step where the loss is given (the loop lowers it by
        what a step went over, should one). Else (None, why)."""
        budget = target
        for _ in range(5):
            if budget < least:
                return None, f"its step needs {(target - budget + least) / MiB:.2f} MiB"
            m.budget = budget
            gc.collect()
            loss(m(x)).backward()
            print(f"# {name}: Checkpointed at {budget} B for {target} B: total {m.total_peak} B, "
                  f"schedule {m.measured_peak} B, as predicted: {m.as_predicted}",
                  file=sys.stderr, flush=True)
            if m.total_peak <= target:
                return budget, None
            # Below the schedule's own peak, or the same schedule comes back.
            budget = min(budget, m.measured_peak) - (m.total_peak - target)
        return None, "no fit in 5 tries"

    configs = list(tools)
    matched, why = {}, {}
    for tool, _, _ in tools:
        matched[tool], why[tool] = fit(first[tool][0])
    budgets_run = {b for b in matched.values() if b is not None} | {least}
    for budget in sorted(budgets_run):
        configs.append((("remat", budget), checkpointed_at(budget), lambda: m.total_peak))
    best = measure(configs, x, a.rounds)
    remat_rows = {}
    for budget in sorted(budgets_run):
        m.budget = budget
        gc.collect()
        loss(m(x)).backward()
        peak, saved, ms = best[("remat", budget)]
        remat_rows[budget] = dict(budget=budget, peak=peak, saved=saved, ms=ms,
                                  recomputations=len(m.schedule.ops) - (2 * len(stages) + 1),
                                  kept=bool(m.within_budget),
                                  as_predicted=bool(m.as_predicted))
    rows = []
    for tool, _, _ in tools:
        peak, saved, ms = best[tool]
        rows.append(dict(method=tool, peak=peak, saved=saved, ms=ms,
                         checkpointed=remat_rows.get(matched[tool]), unmatched=why[tool]))
    return dict(model=name, stages=len(stages), least=least, rows=rows,
                least_row=remat_rows[least], checkpointed=list(remat_rows.values()))




def table(results):
    lines = ["| model | method | peak (MiB) | saved (MiB) | kept its budget | step (ms) | "
             "Checkpointed at that peak: budget (MiB) | peak (MiB) | kept | step (ms) | "
             "recomputations |",
             "|---|---|---:|---:|---|---:|---:|---:|---|---:|---:|"]

    def checkpointed(c, why=None):
        if c is None:
            return f"- ({why}) | | | | "
        kept = ("yes" if c["kept"] else "no") + ("" if c["as_predicted"] else ", not as predicted")
        return (f"{c['budget'] / MiB:.2f} | {c['peak'] / MiB:.2f} | {kept} | {c['ms']:.0f} | "
                f"{c['recomputations']}")

    for r in results:
        saved_at_1 = next((t["saved"] for t in r["rows"] if t["method"] == "compile, budget 1"),
                          None)
        for t in r["rows"]:
            kept = "-"
            if t["method"].startswith("compile, budget ") and saved_at_1:
                b = float(t["method"].rsplit(" ", 1)[1])
                kept = "yes" if t["saved"] <= b * saved_at_1 else (
                    f"no ({t['saved'] / saved_at_1:.2f} of budget 1's)")
            lines.append(f"| {r['model']} | {t['method']} | {t['peak'] / MiB:.2f} | "
                         f"{t['saved'] / MiB:.2f} | {kept} | {t['ms']:.0f} | "
                         f"{checkpointed(t['checkpointed'], t['unmatched'])} |")
        lines.append(f"| {r['model']} | Checkpointed, least budget | | | | | "
                     f"{checkpointed(r['least_row'])} |")
    return lines


def summary(results):
    """The README's table: each method's peak and step time, and Checkpointed's step time at
    that peak."""
    methods = ["plain autograd", "checkpoint per block", "selective checkpoint",
               "compile, budget 0", "compile, budget 0.5", "compile, budget 1"]
    lines = ["| model | " + " | ".join(methods) + " |", "|---|" + "---:|" * len(methods)]
    for r in results:
        cells = []
        for name in methods:
            t = next((t for t in r["rows"] if t["method"] == name), None)
            if t is None:
                cells.append("")
                continue
            c = t["checkpointed"]
            theirs = f"{t['peak'] / MiB:.0f} MiB, {t['ms']:.0f} ms"
            ours = f"{c['ms']:.0f} ms" if c else t["unmatched"]
            cells.append(f"{theirs} / {ours}")
        lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    return lines


def nice_ceiling(v):
    """The least of 1, 2, 3, 4, 5, 6, 8 times a power of ten at or above `v`."""
    p = 10 ** math.floor(math.log10(v))
    return next(k * p for k in (1, 2, 3, 4, 5, 6, 8, 10) if k * p >= v)


PANEL_MARGINS = 60, 45, 30, 15  # left, bottom, top, right


def svg_panel(out, ox, oy, pw, ph, title, x1, y1):
    """A chart panel at (ox, oy), pw by ph, appended to `out`: its title, axes from 0 to x1 MiB
    of measured peak and 0 to y1 ms of step time, with ticks and labels. Returns (px, py), which
    place a peak in bytes and a time in ms."""
    left, bottom, top, right = PANEL_MARGINS
    px = lambda v: ox + left + v / MiB / x1 * (pw - left - right)  # noqa: E731
    py = lambda v: oy + ph - bottom - v / y1 * (ph - bottom - top)  # noqa: E731
    out.append(f'<text x="{ox + pw / 2}" y="{oy + 18}" text-anchor="middle" font-size="13">'
               f'{title}</text>')
    out.append(f'<line x1="{ox + left}" y1="{oy + ph - bottom}" x2="{ox + pw - right}" '
               f'y2="{oy + ph - bottom}" stroke="black"/>')
    out.append(f'<line x1="{ox + left}" y1="{oy + top}" x2="{ox + left}" '
               f'y2="{oy + ph - bottom}" stroke="black"/>')
    digits = 0 if x1 >= 40 else 1 if x1 >= 4 else 2
    for k in range(5):
        xv, yv = x1 * k / 4, y1 * k / 4
        out.append(f'<text x="{px(xv * MiB):.1f}" y="{oy + ph - bottom + 14}" '
                   f'text-anchor="middle">{xv:.{digits}f}</text>')
        out.append(f'<text x="{ox + left - 5}" y="{py(yv) + 4:.1f}" text-anchor="end">'
                   f'{yv:.0f}</text>')
    out.append(f'<text x="{ox + pw / 2}" y="{oy + ph - 12}" text-anchor="middle">'
               'measured peak (MiB)</text>')
    out.append(f'<text x="{ox + 14}" y="{oy + ph / 2}" text-anchor="middle" '
               f'transform="rotate(-90 {ox + 14} {oy + ph / 2})">step (ms)</text>')
    return px, py


def write_results(a, header, results, table_lines, svg):
    """Prints the header and the table, and writes them (--out), the measures (--json, unless
    they were read with --replot) and the chart (--svg)."""
    text = "\n".join(header + [""] + table_lines) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.json and not a.replot:
        with open(a.json, "w") as f:
            json.dump(dict(header=header, results=results), f, indent=1)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg)


def replayed(a):
    """(header, results) of the --replot file, or None."""
    if not a.replot:
        return None
    with open(a.replot) as f:
        saved = json.load(f)
    return saved["header"], saved["results"]


def svg_chart(results):
    """One panel per model: step time against measured peak, one series per method."""
    pw, ph, cols = 420, 300, 2
    rows = (len(results) + cols - 1) // cols
    w, h = pw * cols, ph * rows + 44
    colours = {"plain autograd": "#2ca02c", "checkpoint per block": "#d62728",
               "selective checkpoint": "#ff7f0e", "compile": "#9467bd", "Checkpointed": "#1f77b4"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="11">', f'<rect width="{w}" height="{h}" fill="white"/>']
    for i, r in enumerate(results):
        ox, oy = (i % cols) * pw, (i // cols) * ph
        series = {"compile": [(t["peak"], t["ms"], t["method"].rsplit(" ", 1)[1])
                              for t in r["rows"] if t["method"].startswith("compile")],
                  "Checkpointed": [(c["peak"], c["ms"], None) for c in r["checkpointed"]]}
        points = [(t["method"], t["peak"], t["ms"]) for t in r["rows"]
                  if not t["method"].startswith("compile")]
        allp = [p for s in series.values() for p, _, _ in s] + [p for _, p, _ in points]
        allt = [t for s in series.values() for _, t, _ in s] + [t for _, _, t in points]
        px, py = svg_panel(out, ox, oy, pw, ph, f'{r["model"]} ({r["stages"]} stages)',
                           nice_ceiling(max(allp) / MiB), nice_ceiling(max(allt)))
        for key, pts in series.items():  # compile's in budget order, Checkpointed's by peak
            pts = pts if key == "compile" else sorted(pts)
            c = colours[key]
            if len(pts) > 1:
                out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="'
                           + " ".join(f"{px(p):.1f},{py(t):.1f}" for p, t, _ in pts) + '"/>')
            for p, t, label in pts:
                out.append(f'<circle cx="{px(p):.1f}" cy="{py(t):.1f}" r="3" fill="{c}"/>')
                if label is not None:
                    out.append(f'<text x="{px(p) + 4:.1f}" y="{py(t) - 4:.1f}" fill="{c}" '
                               f'font-size="9">{label}</text>')
        for t, p, ms in points:
            c = colours[t]
            out.append(f'<rect x="{px(p) - 4:.1f}" y="{py(ms) - 4:.1f}" width="8" height="8" '
                       f'fill="{c}"/>')
    for i, (name, c) in enumerate(colours.items()):
        label = {"compile": "torch.compile, activation_memory_budget (labels)",
                 "Checkpointed": "remat Checkpointed, at the others' peaks"}.get(name, name)
        x, ly = 10 + (i % 3) * (w - 20) / (3 - i // 3), h - 28 + 16 * (i // 3)
        out.append(f'<rect x="{x:.0f}" y="{ly - 8}" width="10" height="10" fill="{c}"/>')
        out.append(f'<text x="{x + 14:.0f}" y="{ly + 1}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,llama,resnet,vit")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compile-budgets", default="0,0.25,0.5,0.75,1",
                    help="activation_memory_budget values for torch.compile ('' for none)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tiny", action="store_true", help="the tests' sizes (a quick smoke run)")
    ap.add_argument("--out")
    ap.add_argument("--svg")
    ap.add_argument("--json", help="also write the measures (for --replot)")
    ap.add_argument("--summary", action="store_true",
                    help="also print the short table of benchmarks/README.md")
    ap.add_argument("--replot", metavar="JSON", help="write the table and chart of a --json "
                    "file again, measuring nothing")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch._inductor.config.compile_threads = 1  # a shared 2-core machine
    torch._dynamo.config.cache_size_limit = 64
    if a.replot:
        header, results = replayed(a)
    else:
        results = [run_model(name, a) for name in a.models.split(",")]
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "unknown"
        import timm
        import transformers
        header = [f"# CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} "
                  f"cores, {torch.get_num_threads()} torch thread(s)), torch {torch.__version__}, "
                  f"transformers {transformers.__version__}, timm {timm.__version__}, "
                  f"commit {commit}; least time of {a.rounds} interleaved rounds",
                  "# sizes: " + ("the tests' (--tiny)" if a.tiny else
                                 "; ".join(f"{n} {SIZES[n]}" for n in a.models.split(",")))]
        for r in results:
            header.append(f"# {r['model']}: {r['stages']} stages, Checkpointed's least budget "
                          f"{r['least'] / MiB:.2f} MiB")
    write_results(a, header, results, table(results), svg_chart(results))
    if a.summary:
        print("\n".join([""] + summary(results)))


if __name__ == "__main__":
    main()
