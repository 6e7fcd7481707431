#!/usr/bin/env python3
"""Regenerates three benchmark tables, each from one run, footed with the machine: the README's
schedule quality and pipeline tables and benchmarks/README.md's table of the default solve
against 500 slots (benchmarks/README.md says what each program measures). The commit a run measured is kept in
its results file, not in the prose.

    python3 benchmarks/readme_tables.py speed   [BUILD_DIR] [--reuse]  # bench_solver_scaling default/*
    python3 benchmarks/readme_tables.py quality [BUILD_DIR] [--reuse]  # bench_quality, the zoo
    python3 benchmarks/readme_tables.py pipeline [BUILD_DIR] [--reuse] # bench_pipeline_quality

BUILD_DIR (default build/release) holds the built benchmarks. `speed` writes the run's output to
benchmarks/results/solver_scaling_default.json, `quality` to benchmarks/results/quality/; both
print the Markdown table on stdout. Standard library only.
"""
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")


def footer(timed=True):
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    timing = "; one thread, CPU time" if timed else ""
    return f"({model}, {os.cpu_count()} cores{timing})"


def ms(t):
    """Milliseconds with three significant digits, no exponent."""
    return f"{t:.0f}" if t >= 100 else f"{t:.3g}"


def speed(build, reuse):
    exe = os.path.join(build, "benchmarks", "bench_solver_scaling")
    out = os.path.join(RESULTS, "solver_scaling_default.json")
    if not reuse:
        subprocess.run([exe, "--benchmark_filter=^default/", "--benchmark_format=json",
                        f"--benchmark_out={out}", "--benchmark_out_format=json"],
                       check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    if not reuse:  # the commit the run measured, kept with its results
        data["remat_commit"] = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True).stdout.strip()
        with open(out, "w") as f:
            json.dump(data, f, indent=1)
    runs = data["benchmarks"]
    # One row per chain, each cell its budgets' figures side by side ("30% / 50%").
    rows = {}
    worst_time, worst_makespan = 0.0, 0.0
    for r in runs:
        _, chain, percent = r["name"].split("/")[:3]
        infeasible = r["makespan_ratio"] == 0
        worst_time = max(worst_time, r["time_ratio"])
        if not infeasible:
            worst_makespan = max(worst_makespan, r["makespan_ratio"])
        exact = "yes" if r["exact"] else f"{100 * r['makespan_loss']:.2g}%"
        rows.setdefault(chain, []).append((
            percent, ms(r["cpu_time"]), ms(r["slots500_ms"]), f"{r['time_ratio']:.2f}",
            "-" if infeasible else f"{r['makespan_ratio']:.4f}", "-" if infeasible else exact))
    budgets = " / ".join(f"{b[0]}%" for b in next(iter(rows.values()))) if rows else ""
    print(f"| chain ({budgets}) | default (ms) | 500 slots (ms) | time ratio | makespan ratio "
          "| exact, or within |")
    print("|---|---:|---:|---:|---:|---|")
    for chain, cells in rows.items():
        print(f"| {chain} | " + " | ".join(" / ".join(c[i] for c in cells) for i in range(1, 6))
              + " |")
    print()
    print(f"Largest time ratio {worst_time:.2f}, largest makespan ratio {worst_makespan:.4f} "
          f"{footer()}.")


def quality(build, reuse):
    exe = os.path.join(build, "benchmarks", "bench_quality")
    out = os.path.join(RESULTS, "quality")
    if not reuse:
        subprocess.run([exe, out], check=True)
        with open(os.path.join(out, "commit"), "w") as f:
            f.write(subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                   capture_output=True, text=True).stdout)
    with open(os.path.join(out, "quality.md")) as f:
        lines = f.read().splitlines()
    # The two overhead tables of quality.md (50% and 30% of store-all), first setting of each
    # network.
    tables, current = [], None
    for line in lines:
        if line.startswith("### Makespan overhead"):
            current = {}
            tables.append(current)
        elif current is not None and line.startswith("| ") and not line.startswith("| chain"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            network = cells[0].split("-b")[0]
            current.setdefault(network, cells)
        elif current is not None and line.startswith("## "):
            current = None
    header = [c.strip() for c in next(l for l in lines if l.startswith("| chain")).strip("|").split("|")]
    keep = ["optimal (exact)", "optimal (500 slots)", "sequential", "chen-greedy", "revolve"]
    cols = [header.index(k) for k in keep]
    print("| network (stages) | " + " | ".join(keep) + " |")
    print("|---|" + "---:|" * len(keep))
    for network, at50 in tables[0].items():
        at30 = tables[1][network]
        row = [a if a == b == "infeasible" else f"{a} / {b}"
               for a, b in ((at50[c], at30[c]) for c in cols)]
        print(f"| {network} ({at50[1]}) | " + " | ".join(row) + " |")
    print()
    print(f"Makespan over store-all's at 50% / 30% of its peak memory "
          f"{footer(timed=False)}.")


def pipeline(build, reuse):
    out = os.path.join(RESULTS, "pipeline_quality.txt")
    if not reuse:
        env = dict(os.environ, BUILD=build)
        subprocess.run(["bash", os.path.join(ROOT, "benchmarks", "run.sh"), "pipeline_quality"],
                       check=True, stdout=subprocess.DEVNULL, env=env)
    with open(out) as f:
        rows = [[c.strip() for c in line.strip().strip("|").split("|")]
                for line in f if line.startswith("| ") and not line.startswith("| chain")]
    # The rows at B_a (what (a) needs per rank), and the largest micro-batches of the second
    # table, matched by chain, P and schedule.
    at = {(r[0], r[2], r[3]): r for r in rows if len(r) == 15 and r[5] == "B_a"}
    batch = {(r[0], r[1], r[2]): r for r in rows if len(r) == 8}
    print("| chain | P | schedule | (a) ms | (b) ms | (c) ms | (a)/(c) | (c) split | "
          "largest micro-batch (a) / (c) |")
    print("|---|---:|---|---:|---:|---:|---:|---|---|")
    for key, r in at.items():
        b = batch.get(key)
        print(f"| {r[0]} | {r[2]} | {r[3]} | {r[7]} | {r[8]} | {r[9]} | {r[10]} | {r[11]} | "
              + (f"{b[5]} / {b[7]}" if b else "-") + " |")
    print()
    print("The slowest rank's time per micro-batch at the memory per rank that (a) needs, "
          f"M = 2P {footer(timed=False)}.")


def main():
    modes = {"speed": speed, "quality": quality, "pipeline": pipeline}
    if len(sys.argv) < 2 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    args = [a for a in sys.argv[2:] if a != "--reuse"]
    build = args[0] if args else os.path.join(ROOT, "build", "release")
    # --reuse: the table of the last run's output, without running the benchmark again.
    modes[sys.argv[1]](build, "--reuse" in sys.argv)


if __name__ == "__main__":
    main()
