#!/usr/bin/env python3
"""remat.torch.Checkpointed with and without torch.compile, beside torch.compile's own memory
knob, on the CPU (PyTorch 2.x), at matched measured peaks, on transformers' GPT-2 and timm's
ResNet-D at python_vs_torch.py's sizes (tests/python/pypi_models.py's stages):

* plain eager autograd (everything saved);
* torch.compile of the whole step (inductor, its default partition);
* the same with torch._functorch.config.activation_memory_budget at each of --compile-budgets;
* Checkpointed eager and Checkpointed(compile=True) (each block compiled, the schedule around
  them), each at the measured peak of every method above (with `loss` given, the budget bounds
  the whole step) and at its own least budget.

    PYTHONPATH=<build>/python python3 benchmarks/python_compile.py \\
        --out benchmarks/results/python_compile.txt --svg benchmarks/results/python_compile.svg \\
        --json benchmarks/results/python_compile.json

The meter, the step and the rounds are python_vs_torch.py's: remat::torch's CPU meter counts
every byte libtorch's CPU allocator gives out (eager tensors and inductor's buffers alike); a
step's peak is the most allocated during `loss(model(x)).backward()` above what was held before
it, the input included (Checkpointed's `total_peak`); parameters' gradients exist before any
step. Each of --rounds rounds runs every configuration once, and each keeps its least time.
"""

import argparse
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._inductor.config  # noqa: E402

import pypi_models  # noqa: E402
import remat.torch  # noqa: E402
from python_vs_torch import (SIZES, compiled_step, measure, nice_ceiling, replayed,  # noqa: E402
                             svg_panel, write_results)
from step_meter import MiB  # noqa: E402


def whole_step_compile(seq, loss, tag, x):
    """torch.compile of loss(seq(x)) with its default partition (no activation_memory_budget)."""
    return compiled_step(seq, loss, torch._functorch.config.activation_memory_budget, tag, x)


def run_model(name, a):
    torch.manual_seed(0)
    model, stages, x, loss = pypi_models.MODELS[name](**({} if a.tiny else SIZES[name]))
    del model  # the stages hold its modules
    for s in stages:
        s.train()
    for p in torch.nn.ModuleList(stages).parameters():
        p.grad = torch.zeros_like(p)
    plain = torch.nn.Sequential(*stages)
    tools = [("plain eager", lambda x: loss(plain(x)), None)]
    t0 = time.perf_counter()
    tools.append(("torch.compile", whole_step_compile(plain, loss, f"{name}_default", x), None))
    notes = [f"torch.compile of the step: {time.perf_counter() - t0:.0f} s to compile"]
    for i, b in enumerate(float(v) for v in a.compile_budgets.split(",") if v):
        t0 = time.perf_counter()
        tools.append((f"torch.compile, activation_memory_budget {b:g}",
                      compiled_step(plain, loss, b, f"{name}_{i}", x), None))
        notes.append(f"at activation_memory_budget {b:g}: {time.perf_counter() - t0:.0f} s")
    first = measure(tools, x, 1)
    t0 = time.perf_counter()
    eager = remat.torch.Checkpointed(stages, x, budget=1 << 62, loss=loss)
    notes.append(f"Checkpointed: {time.perf_counter() - t0:.0f} s to trace and profile")
    t0 = time.perf_counter()
    compiled = remat.torch.Checkpointed(stages, x, budget=1 << 62, loss=loss, compile=True)
    notes.append(f"Checkpointed(compile=True): {time.perf_counter() - t0:.0f} s to compile the "
                 "blocks and profile them")
    print(f"# {name}: " + "; ".join(notes), file=sys.stderr, flush=True)
    remats = {"Checkpointed": eager, "Checkpointed, compiled": compiled}

    def at(m, budget):
        def forward(x):
            m.budget = budget
            return loss(m(x))
        return forward

    configs = list(tools)
    budgets = {label: sorted({first[t][0] for t, _, _ in tools if first[t][0] >= m.least_budget}
                             | {m.least_budget}) for label, m in remats.items()}
    for label, m in remats.items():
        for b in budgets[label]:
            configs.append(((label, b), at(m, b), lambda m=m: m.total_peak))
    # a compiled Checkpointed compiles its blocks' no-grad graphs at the first schedule that
    # needs them: one step of each before measuring
    for label, m in remats.items():
        for b in budgets[label]:
            at(m, b)(x).backward()
    best = measure(configs, x, a.rounds)
    runs = {}
    for label, m in remats.items():
        for b in budgets[label]:
            m.budget = b
            loss(m(x)).backward()
            peak, _, ms = best[(label, b)]
            runs[(label, b)] = dict(budget=b, peak=peak, ms=ms, kept=bool(m.within_budget),
                                    as_predicted=bool(m.as_predicted),
                                    plainly=bool(m.plain_peak is not None and b >= m.plain_peak),
                                    recomputations=len(m.schedule.ops) - (2 * len(m.chain) + 1))
    rows = []
    for tool, _, _ in tools:
        peak, _, ms = best[tool]
        rows.append(dict(method=tool, peak=peak, ms=ms,
                         at_peak={label: runs.get((label, first[tool][0])) for label in remats}))
    least = {label: runs[(label, m.least_budget)] for label, m in remats.items()}
    return dict(model=name, stages=len(stages), rows=rows, least=least,
                curves={label: [runs[(label, b)] for b in budgets[label]] for label in remats},
                notes=notes)


def cell(r):
    if r is None:
        return "-", "-"
    how = "plainly" if r["plainly"] else f"{r['recomputations']} recomp."
    kept = "" if r["kept"] and r["as_predicted"] else (" (over)" if not r["kept"] else
                                                       " (not as predicted)")
    return f"{r['peak'] / MiB:.2f}{kept}", f"{r['ms']:.0f} ({how})"


def table(results):
    lines = ["| model | method | peak (MiB) | step (ms) | Checkpointed at that peak: peak | step "
             "(ms) | Checkpointed compiled: peak | step (ms) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for row in r["rows"]:
            e, c = cell(row["at_peak"]["Checkpointed"]), cell(row["at_peak"]["Checkpointed, compiled"])
            lines.append(f"| {r['model']} | {row['method']} | {row['peak'] / MiB:.2f} | "
                         f"{row['ms']:.0f} | {e[0]} | {e[1]} | {c[0]} | {c[1]} |")
        e, c = cell(r["least"]["Checkpointed"]), cell(r["least"]["Checkpointed, compiled"])
        lines.append(f"| {r['model']} | Checkpointed, its least budget | | | {e[0]} | {e[1]} | "
                     f"{c[0]} | {c[1]} |")
    return lines


def svg_chart(results):
    """One panel per model: step time against measured peak; the compiled tools as points,
    Checkpointed eager and compiled as curves over their budgets."""
    pw, ph = 460, 310
    w, h = pw * len(results), ph + 44
    colours = {"plain eager": "#2ca02c", "torch.compile": "#9467bd",
               "Checkpointed": "#1f77b4", "Checkpointed, compiled": "#d62728"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="11">', f'<rect width="{w}" height="{h}" fill="white"/>']
    for i, r in enumerate(results):
        ox = i * pw
        curves = r["curves"]
        allp = [c["peak"] for v in curves.values() for c in v] + [t["peak"] for t in r["rows"]]
        allt = [c["ms"] for v in curves.values() for c in v] + [t["ms"] for t in r["rows"]]
        px, py = svg_panel(out, ox, 0, pw, ph, f'{r["model"]} ({r["stages"]} stages)',
                           nice_ceiling(max(allp) / MiB), nice_ceiling(max(allt)))
        for label, pts in curves.items():
            pts = sorted((c["peak"], c["ms"]) for c in pts)
            out.append(f'<polyline fill="none" stroke="{colours[label]}" stroke-width="1.5" '
                       'points="' + " ".join(f"{px(p):.1f},{py(t):.1f}" for p, t in pts) + '"/>')
            for p, t in pts:
                out.append(f'<circle cx="{px(p):.1f}" cy="{py(t):.1f}" r="3" '
                           f'fill="{colours[label]}"/>')
        for t in r["rows"]:
            c = colours["plain eager" if t["method"] == "plain eager" else "torch.compile"]
            out.append(f'<rect x="{px(t["peak"]) - 4:.1f}" y="{py(t["ms"]) - 4:.1f}" width="8" '
                       f'height="8" fill="{c}"/>')
            label = t["method"].rsplit(" ", 1)[1] if "budget" in t["method"] else ""
            if label:
                out.append(f'<text x="{px(t["peak"]) + 5:.1f}" y="{py(t["ms"]) - 5:.1f}" '
                           f'fill="{c}" font-size="9">{label}</text>')
    legend = {"plain eager": "plain eager", "torch.compile": "torch.compile (labels: "
              "activation_memory_budget)", "Checkpointed": "Checkpointed",
              "Checkpointed, compiled": "Checkpointed(compile=True)"}
    for i, (key, text) in enumerate(legend.items()):
        x = 10 + i * (w - 20) / len(legend)
        out.append(f'<rect x="{x:.0f}" y="{h - 30}" width="10" height="10" fill="{colours[key]}"/>')
        out.append(f'<text x="{x + 14:.0f}" y="{h - 21}">{text}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="gpt2,resnet")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compile-budgets", default="0.5,0.25",
                    help="activation_memory_budget values besides the default ('' for none)")
    ap.add_argument("--tiny", action="store_true", help="the tests' sizes (a quick smoke run)")
    ap.add_argument("--out")
    ap.add_argument("--svg")
    ap.add_argument("--json", help="also write the measures (for --replot)")
    ap.add_argument("--replot", metavar="JSON", help="write the table and chart of a --json "
                    "file again, measuring nothing")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch._inductor.config.compile_threads = 1  # a shared 2-core machine
    torch._dynamo.config.cache_size_limit = 64
    if a.replot:
        header, results = replayed(a)
    else:
        results = [run_model(name, a) for name in a.models.split(",")]
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "unknown"
        header = [f"# CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} "
                  f"cores, 1 torch thread), torch {torch.__version__}, commit {commit}; least "
                  f"time of {a.rounds} interleaved rounds",
                  "# sizes: " + ("the tests' (--tiny)" if a.tiny else
                                 "; ".join(f"{n} {SIZES[n]}" for n in a.models.split(",")))]
        header += [f"# {r['model']}: " + "; ".join(r["notes"]) for r in results]
    write_results(a, header, results, table(results), svg_chart(results))


if __name__ == "__main__":
    main()
