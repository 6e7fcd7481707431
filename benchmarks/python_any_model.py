#!/usr/bin/env python3
"""remat.torch.Checkpointed on whole models as they come (traced and cut by remat), beside
PyTorch's own tools, on the CPU:

* plain autograd (everything saved: the store-all peak);
* Checkpointed at its least feasible budget, and at 30% and 50% of its store-all peak (the
  profile's prediction of plain autograd's peak): measured peak of the whole step (the budget
  covers the schedule; the loss's tensors and the output's gradient come beside it, so the
  schedule's own peak is in the notes) and step time;
* torch.utils.checkpoint (non-reentrant) around each top-level block, as torchtitan's full
  activation checkpointing does (a transformer's decoder layers, a ResNet's bottlenecks, a
  Sequential's children);
* checkpoint_sequential where the model is an nn.Sequential, at a few segment counts;
* on PyTorch 2.x, torch.compile of the whole step with activation_memory_budget 0.3 and 0.5:
  its measured peak beside the asked share (of its own saved activations, by the partitioner's
  definition; the table gives its peak as a share of plain autograd's, which is what a user
  reading "0.3" hopes for).

    PYTHONPATH=<build>/python python3 benchmarks/python_any_model.py \\
        --out benchmarks/results/python_any_model.txt \\
        --svg benchmarks/results/python_any_model.svg --json benchmarks/results/python_any_model.json

The meter, the step and the rounds are benchmarks/python_vs_torch.py's (remat::torch's CPU meter
counts every byte libtorch's CPU allocator gives out; a step's peak is taken above what was held
before it, the input included; each configuration keeps its least time and largest peak over
interleaved rounds). Sizes are tiny so that a run takes minutes on a shared 2-core machine: the
times are dominated by per-op overheads and say little about large models; the peaks are exact.
"""

import argparse
import copy
import json
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "tests", "python"))

import torch  # noqa: E402
from torch.utils.checkpoint import checkpoint, checkpoint_sequential  # noqa: E402

import remat  # noqa: E402
import remat.torch  # noqa: E402

from step_meter import MiB, one_step  # noqa: E402

TORCH2 = int(torch.__version__.split(".")[0]) >= 2
if TORCH2:
    import python_vs_torch as pvt  # noqa: E402  (imports torch._dynamo; 2.x only)


class Checkpointed(torch.nn.Module):
    """A top-level block run through torch.utils.checkpoint (non-reentrant), keyword arguments
    included, as torchtitan's checkpoint_wrapper does."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, *args, **kwargs):
        return checkpoint(self.block, *args, use_reentrant=False, **kwargs)


def per_block(model, blocks):
    """A copy of `model` with each of its submodules named in `blocks` checkpointed."""
    model = copy.deepcopy(model)
    for name in blocks:
        parent, _, leaf = name.rpartition(".")
        owner = model.get_submodule(parent) if parent else model
        setattr(owner, leaf, Checkpointed(owner.get_submodule(leaf)))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # gradients exist before a step, as for the others
    return model


def cross_entropy_of(target, field=None):
    def loss(out):
        y = getattr(out, field) if field else out
        return torch.nn.functional.cross_entropy(y.flatten(0, -2), target.flatten())
    return loss


def resnet50(a):
    import torchvision
    model = torchvision.models.resnet50(num_classes=10)
    x = torch.randn(a.batch, 3, a.image, a.image, requires_grad=True)
    blocks = [f"layer{i}.{j}" for i in range(1, 5) for j in range(len(getattr(model, f"layer{i}")))]
    return model, x, cross_entropy_of(torch.randint(10, (a.batch,))), blocks, False


def transformer(name):
    def build(a):
        import pypi_models
        model, _, ids, _ = pypi_models.MODELS[name](
            batch=a.batch, seq=a.seq, vocab=a.vocab, dim=a.dim, layers=a.layers, use_cache=False)
        layers = (model.transformer.h if name == "gpt2" else model.model.layers)
        prefix = "transformer.h" if name == "gpt2" else "model.layers"
        target = torch.randint(a.vocab, ids.shape)
        return (model, ids, cross_entropy_of(target, "logits"),
                [f"{prefix}.{i}" for i in range(len(layers))], False)
    return build


def mlp(a):
    """An nn.Sequential (checkpoint_sequential's case): Linear and GELU pairs, then a head."""
    width = 4 * a.dim
    model = torch.nn.Sequential(
        *[torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU())
          for _ in range(2 * a.layers)], torch.nn.Linear(width, 10))
    x = torch.randn(a.batch * a.seq, width, requires_grad=True)
    return (model, x, cross_entropy_of(torch.randint(10, (a.batch * a.seq,))),
            [str(i) for i in range(len(model))], True)


MODELS = {"resnet50": resnet50, "gpt2": transformer("gpt2"), "llama": transformer("llama"),
          "sequential_mlp": mlp}


def measure(configs, x, rounds):
    best = {}
    for _ in range(rounds):
        for name, forward, peak_of in configs:
            try:
                peak, saved, ms = one_step(forward, x, peak_of)
            except Exception as e:  # noqa: BLE001  (a tool that fails is a row, not a crash)
                best[name] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
                continue
            old = best.get(name, (0, 0, float("inf")))
            if isinstance(old, str):
                continue
            best[name] = (max(old[0], peak), max(old[1], saved), min(old[2], ms))
    return best


def run_model(name, a):
    torch.manual_seed(0)
    model, x, loss, blocks, sequential = MODELS[name](a)
    model.train()
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    t0 = time.perf_counter()
    m = remat.torch.Checkpointed(model, x, budget="100%", loss=loss)
    setup_s = time.perf_counter() - t0
    # The budget bounds the whole step (the loss is given): its figures include the loss's side.
    store_all, least = m.store_all_peak, m.least_budget

    # The same model with one option per block, where Checkpointed gives blocks options
    # (selective checkpointing, torch 2.4 on): the same budgets in bytes.
    m1 = None
    if m.split is not None and any(st.options for st in m.chain.stages):
        m1 = remat.torch.Checkpointed(model, x, budget="100%", loss=loss, block_options=False)

    def checkpointed_at(c, budget):
        def forward(x):
            c.budget = budget
            return loss(c(x))
        return forward

    configs = [("plain autograd", lambda x: loss(model(x)), None)]
    budgets = {"least": least, "30%": store_all * 3 // 10, "50%": store_all // 2}
    for label, b in budgets.items():
        if b >= least:
            configs.append((f"Checkpointed, {label}", checkpointed_at(m, b),
                            lambda: m.total_peak))
        if m1 is not None and label != "least" and b >= m1.least_budget:
            configs.append((f"Checkpointed, {label}, one option per block",
                            checkpointed_at(m1, b), lambda: m1.total_peak))
    wrapped = per_block(model, blocks)
    configs.append((f"checkpoint per block ({len(blocks)})", lambda x: loss(wrapped(x)), None))
    if sequential:
        for segments in sorted({2, 3, max(2, len(model) // 2)}):
            configs.append((f"checkpoint_sequential, {segments} segments",
                            lambda x, s=segments: loss(checkpoint_sequential(
                                model, s, x, use_reentrant=False)), None))
    compile_notes = []
    if TORCH2 and name in a.compile.split(","):
        for i, share in enumerate((0.3, 0.5)):
            t0 = time.perf_counter()
            try:
                step = pvt.compiled_step(model, loss, share, f"{name}_{i}", x)
                configs.append((f"torch.compile, activation_memory_budget {share}", step, None))
                compile_notes.append(f"compiled at {share} in {time.perf_counter() - t0:.0f} s")
            except Exception as e:  # noqa: BLE001
                compile_notes.append(f"torch.compile at {share} failed: {type(e).__name__}: "
                                     f"{str(e).splitlines()[0][:160]}")
            print(f"# {name}: {compile_notes[-1]}", file=sys.stderr, flush=True)
    best = measure(configs, x, a.rounds)
    # Checkpointed's own figures at each budget (as predicted, within the budget).
    facts = {}
    for label, b in budgets.items():
        if b < least:
            continue
        m.budget = b
        loss(m(x)).backward()
        facts[f"Checkpointed, {label}"] = dict(
            budget=b, as_predicted=bool(m.as_predicted), within=bool(m.within_budget),
            recomputed=len(m.schedule.ops) - (2 * len(m.chain) + 1), schedule_peak=m.measured_peak,
            options=sum(1 for o in m.schedule.ops if o.kind == "F_all" and o.option))
    return dict(model=name, blocks=len(m.split.blocks) if m.split else len(m.stages),
                cut_points=m.split.cut_points if m.split else None, store_all=store_all,
                least=least, setup_s=setup_s, plain=best["plain autograd"], best=best,
                facts=facts, notes=compile_notes, input=tuple(x.shape))


def table(results):
    lines = ["| model | method | asked | measured peak (MiB) | share of plain autograd's | "
             "step (ms) | notes |", "|---|---|---|---:|---:|---:|---|"]
    # Checkpointed's budget covers its schedule; the step's peak adds what autograd holds beside
    # it (the loss's own tensors, the output's gradient late in the backward: outside_schedule).
    for r in results:
        plain_peak = r["plain"][0] if not isinstance(r["plain"], str) else None
        with_options = any(k.endswith("one option per block") for k in r["best"])
        for method, v in r["best"].items():
            asked, notes = "", ""
            f = r["facts"].get(method)
            if f:
                asked = f"{f['budget'] / MiB:.2f} MiB"
                notes = (f"schedule's peak {f['schedule_peak'] / MiB:.2f} MiB; "
                         f"{f['recomputed']} recomputations; "
                         + (f"{f['options']} F_all with a block's option; "
                            if with_options and "options" in f else "")
                         + ("as predicted" if f["as_predicted"] else "NOT as predicted") + ", "
                         + ("within the budget" if f["within"] else "OVER the budget"))
            elif method.startswith("torch.compile"):
                asked = method.rsplit(" ", 1)[1] + " (a share)"
            if isinstance(v, str):
                lines.append(f"| {r['model']} | {method} | {asked} | | | | {v} |")
                continue
            peak, _, ms = v
            share = f"{peak / plain_peak:.0%}" if plain_peak else ""
            lines.append(f"| {r['model']} | {method} | {asked} | {peak / MiB:.2f} | {share} | "
                         f"{ms:.1f} | {notes} |")
        for label in ("30%", "50%"):
            if f"Checkpointed, {label}" not in r["best"]:
                lines.append(f"| {r['model']} | Checkpointed, {label} | | | | | infeasible: the "
                             f"least budget is {r['least'] / MiB:.2f} MiB |")
    return lines


def svg_chart(results):
    """One panel per model: each method's measured peak as a share of plain autograd's (bars),
    its step time written beside the bar."""
    colours = {"plain": "#2ca02c", "Checkpointed": "#1f77b4", "checkpoint per": "#d62728",
               "checkpoint_seq": "#8c564b", "torch.compile": "#9467bd"}
    bar, gap, left, width = 16, 4, 290, 300
    out, y = [], 10
    for r in results:
        rows = [(k, v) for k, v in r["best"].items() if not isinstance(v, str)]
        plain_peak = r["plain"][0]
        out.append(f'<text x="10" y="{y + 14}" font-size="13" font-weight="bold">{r["model"]}'
                   f' ({r["blocks"]} blocks)</text>')
        y += 22
        for method, (peak, _, ms) in rows:
            share = peak / plain_peak
            c = next(v for k, v in colours.items() if method.startswith(k))
            out.append(f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{method}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{share * width:.1f}" height="{bar}" '
                       f'fill="{c}"/>')
            out.append(f'<text x="{left + share * width + 4:.1f}" y="{y + 12}">{share:.0%}, '
                       f'{ms:.0f} ms</text>')
            y += bar + gap
        y += 10
    h = y + 20
    head = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 120}" height="{h}" '
            'font-family="sans-serif" font-size="11">',
            f'<rect width="{left + width + 120}" height="{h}" fill="white"/>',
            f'<text x="{left}" y="{h - 6}">measured peak of the step, share of plain '
            "autograd's; step time</text>"]
    return "\n".join(head + out + ["</svg>"]) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="resnet50,gpt2,llama,sequential_mlp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--image", type=int, default=64, help="resnet50's input size")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--compile", default="gpt2,llama,sequential_mlp",
                    help="the models run through torch.compile too, on 2.x (resnet50's compile "
                         "takes minutes on one thread: left out by default)")
    ap.add_argument("--out")
    ap.add_argument("--svg", help="also write a chart")
    ap.add_argument("--json", help="also write the measures (for --replot)")
    ap.add_argument("--replot", metavar="JSON", help="write the table and chart of a --json "
                    "file again, measuring nothing")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if TORCH2:
        import torch._inductor.config as inductor_config
        inductor_config.compile_threads = 1  # a shared 2-core machine
    import transformers
    transformers.logging.set_verbosity_error()
    if a.replot:
        with open(a.replot) as f:
            saved = json.load(f)
        write(saved["header"], saved["results"], a)
        return
    t0 = time.perf_counter()
    results = [run_model(n, a) for n in a.models.split(",")]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    header = [f"# CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, 1 "
              f"torch thread), torch {torch.__version__}, transformers {transformers.__version__},"
              f" commit {commit}; least time of {a.rounds} interleaved rounds; run took "
              f"{time.perf_counter() - t0:.0f} s",
              f"# sizes: batch {a.batch}; resnet50 {a.image}x{a.image} images, 10 classes; "
              f"gpt2/llama seq {a.seq}, vocab {a.vocab}, dim {a.dim}, {a.layers} layers "
              f"(use_cache=False, dropout on); sequential_mlp {2 * a.layers} Linear({4 * a.dim})"
              f"+GELU and a head on {a.batch * a.seq} rows"]
    for r in results:
        header.append(
            f"# {r['model']}: input {r['input']}, {r['blocks']} blocks"
            + (f" ({r['cut_points']} cut points)" if r["cut_points"] else " (stages)")
            + f", store-all {r['store_all'] / MiB:.2f} MiB, least budget {r['least'] / MiB:.2f} "
            f"MiB ({r['least'] / r['store_all']:.0%}), Checkpointed built in {r['setup_s']:.1f} s"
            + "".join(f"; {n}" for n in r["notes"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(header=header, results=results), f, indent=1)
    write(header, results, a)


def write(header, results, a):
    text = "\n".join(header + [""] + table(results)) + "\n"
    print(text, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg_chart(results))


if __name__ == "__main__":
    main()
