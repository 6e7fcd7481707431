#!/usr/bin/env python3
"""Cross-checks remat-solve against an independent implementation of docs/model.md.

Written from the formulas of docs/model.md (with the recording overheads of the repository's
docs/recording-overhead.md: F_all(k) peaks at held + fa[k], fa = ft where a stage gives none),
not from the C++: a memoized recursion for OPT(i, l, m),
the smallest feasible budget by scanning m, and a replay simulator following the op table. On random
small chains (zero sizes included, overheads up to twice the tape, 1..8 stages) and budgets around
the interesting thresholds, it runs

    remat-solve CHAIN --budget B --slots exact --json

and checks the exit status, feasibility, the optimal makespan (relative tolerance 1e-9), the
smallest feasible budget, the store-all figures, and that the returned ops replay within B to the
reported makespan and peak. Smaller extra checks: the exhaustive solver never does worse than the
persistent optimum, and discretized (--slots N) schedules fit the byte budget.

Standard library only. Exit status 0 when everything agrees, 1 otherwise.
"""

import argparse
import functools
import json
import math
import os
import random
import subprocess
import sys
import tempfile

INF = math.inf
HERE = os.path.dirname(os.path.abspath(__file__))


class Model:
    """docs/model.md's arrays: x[0..L+1], xb[0..L+1], fw/ft/fa/bw/bt[0..L] (index L is the loss)."""

    def __init__(self, chain):
        stages = chain["stages"]
        loss = chain.get("loss", {})
        self.L = len(stages)
        self.x = [chain["input_size"]] + [s["output_size"] for s in stages] + [0]
        self.xb = [0] + [s["tape_size"] for s in stages] + [0]
        self.fw = [s["forward_time"] for s in stages] + [0.0]
        self.ft = [s.get("forward_overhead", 0) for s in stages] + [0]
        self.fa = [s.get("recording_overhead", s.get("forward_overhead", 0)) for s in stages] + [0]
        self.bw = [s["backward_time"] for s in stages] + [loss.get("backward_time", 0.0)]
        self.bt = [s.get("backward_overhead", 0) for s in stages] + [loss.get("backward_overhead", 0)]


class PersistentDP:
    """OPT(i, l, m) of docs/model.md, by memoized recursion, with the choice that achieves it."""

    def __init__(self, md):
        self.md = md
        self.best = functools.lru_cache(maxsize=None)(self._best)

    def _best(self, i, l, m):
        md = self.md
        x, xb, fw, ft, fa, bw, bt, L = md.x, md.xb, md.fw, md.ft, md.fa, md.bw, md.bt, md.L
        if m < 0:
            return INF, None
        if i == l == L:
            return (bw[L], "loss") if m >= x[L] + bt[L] else (INF, None)
        if i == l:
            fits = m >= x[i + 1] + xb[i + 1] + fa[i] and m >= x[i] + x[i + 1] + xb[i + 1] + bt[i]
            return (fw[i] + bw[i], "base") if fits else (INF, None)
        # No mmin: each branch checks the peaks of its own ops (with fa = ft, docs/model.md's mmin is
        # implied by them, so this is its DP).
        value, choice = INF, None
        if m >= x[l + 1] + xb[i + 1] + fa[i] and m >= x[i] + x[i + 1] + xb[i + 1] + bt[i]:
            v = fw[i] + bw[i] + self.best(i + 1, l, m - xb[i + 1])[0]
            if v < value:
                value, choice = v, "tape"
        for j in range(i + 1, l + 1):
            # F_ck(i), F_none(i+1 .. j-1), with g_{l+1} held.
            forwards = max([x[i + 1] + ft[i]] + [x[k] + x[k + 1] + ft[k] for k in range(i + 1, j)])
            if m >= x[j] and m >= x[l + 1] + forwards:
                v = sum(fw[i:j]) + self.best(j, l, m - x[j])[0] + self.best(i, j - 1, m)[0]
                if v < value:
                    value, choice = v, j
        return value, choice

    def value(self, budget):
        """Least makespan for a total budget (the input included), or INF."""
        return self.best(0, self.md.L, budget - self.md.x[0])[0]

    def schedule(self, budget):
        """The ops of an optimal schedule for `budget`, as (name, stage) pairs."""
        out = []

        def emit(i, l, m):
            choice = self.best(i, l, m)[1]
            assert choice is not None
            if choice == "loss":
                out.append(("loss", None))
            elif choice == "base":
                out.extend([("F_all", i), ("B", i)])
            elif choice == "tape":
                out.append(("F_all", i))
                emit(i + 1, l, m - self.md.xb[i + 1])
                out.append(("B", i))
            else:
                j = choice
                out.append(("F_ck", i))
                out.extend(("F_none", k) for k in range(i + 1, j))
                emit(j, l, m - self.md.x[j])
                emit(i, j - 1, m)

        emit(0, self.md.L, budget - self.md.x[0])
        return out

    def min_budget(self, upper):
        """The smallest budget with a persistent schedule, scanning up to `upper`; None if none."""
        for budget in range(self.md.x[0], upper + 1):
            if self.value(budget) < INF:
                return budget
        return None


class ReplayError(Exception):
    pass


def replay(md, ops):
    """Replays (name, stage) ops by docs/model.md's op table. Returns (makespan, peak)."""
    L, x, xb = md.L, md.x, md.xb
    held = {("a", 0)}
    size = {"a": lambda k: x[k], "g": lambda k: x[k], "t": lambda k: xb[k]}
    memory = x[0]
    peak = memory
    time = 0.0

    def add(t):
        nonlocal memory
        if t in held:
            raise ReplayError(f"{t} is already held")
        held.add(t)
        memory += size[t[0]](t[1])

    def drop(t):
        nonlocal memory
        if t in held:
            held.remove(t)
            memory -= size[t[0]](t[1])

    def need(t):
        if t not in held:
            raise ReplayError(f"{t} is not held")

    for n, (name, k) in enumerate(ops):
        if ("g", 0) in held:
            raise ReplayError(f"op {n} after g_0 was produced")
        if name == "loss":
            if ("a", L) not in held and ("t", L) not in held:
                raise ReplayError("loss without a_L or t_L")
            add(("g", L))
            op_peak = memory + md.bt[L]
            drop(("a", L))
            time += md.bw[L]
        else:
            if not isinstance(k, int) or not 0 <= k < L:
                raise ReplayError(f"op {n}: bad stage {k}")
            has_input = ("a", k) in held or (k > 0 and ("t", k) in held)
            if name in ("F_none", "F_ck", "F_all"):
                if not has_input:
                    raise ReplayError(f"op {n} {name}({k}): no input")
                add(("t", k + 1) if name == "F_all" else ("a", k + 1))
                op_peak = memory + (md.fa[k] if name == "F_all" else md.ft[k])
                if name == "F_none":
                    drop(("a", k))
                time += md.fw[k]
            elif name == "B":
                need(("g", k + 1))
                need(("t", k + 1))
                if not has_input:
                    raise ReplayError(f"op {n} B({k}): no input")
                add(("g", k))
                op_peak = memory + md.bt[k]
                drop(("g", k + 1))
                drop(("t", k + 1))
                drop(("a", k))
                time += md.bw[k]
            else:
                raise ReplayError(f"op {n}: unknown op {name}")
        peak = max(peak, op_peak)
    if ("g", 0) not in held:
        raise ReplayError("ends without g_0")
    return time, peak


def store_all_ops(L):
    return [("F_all", k) for k in range(L)] + [("loss", None)] + [("B", k) for k in reversed(range(L))]


def random_chain(rng):
    def time():
        return rng.choice([0.0, 0.5, 1.0, 2.0, round(rng.uniform(0, 5), 3), rng.uniform(0, 1)])

    stages = []
    for _ in range(rng.randint(1, 8)):
        out = rng.choice([0, 0, rng.randint(0, 10)])
        tape = out + rng.choice([0, rng.randint(0, 10)])
        stage = {
            "forward_time": time(), "backward_time": time(),
            "output_size": out, "tape_size": tape,
            "forward_overhead": rng.randint(0, 2 * tape),
            "backward_overhead": rng.randint(0, 2 * tape),
        }
        # A recording overhead on two thirds of the stages: below or at ft, or anywhere.
        pick = rng.randint(0, 2)
        if pick == 1:
            stage["recording_overhead"] = rng.randint(0, stage["forward_overhead"])
        elif pick == 2:
            stage["recording_overhead"] = rng.randint(0, 2 * tape)
        stages.append(stage)
    return {
        "format": "remat-chain/1",
        "input_size": rng.choice([0, rng.randint(0, 10)]),
        "stages": stages,
        "loss": {"backward_time": time(), "backward_overhead": rng.randint(0, 5)},
    }


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


class Checker:
    def __init__(self, exe, workdir):
        self.exe = exe
        self.workdir = workdir
        self.runs = 0
        self.failures = []
        self.infeasible = 0
        self.exhaustive_better = 0

    def fail(self, chain, args, why):
        self.failures.append(f"{why}\n  args: {' '.join(args)}\n  chain: {json.dumps(chain)}")

    def run(self, path, args):
        """Runs remat-solve; returns (exit status, parsed JSON or None, stderr)."""
        self.runs += 1
        try:
            p = subprocess.run([self.exe, path] + args, capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            return -1, None, "no answer within 20 s"
        try:
            return p.returncode, json.loads(p.stdout), p.stderr
        except ValueError:
            return p.returncode, None, p.stderr + f" (stdout is not JSON: {p.stdout[:200]!r})"

    def check_exact(self, chain, path, md, dp, budget, min_budget, store_all):
        args = ["--budget", str(budget), "--slots", "exact", "--json"]
        status, j, err = self.run(path, args)
        if status not in (0, 1) or err or j is None:
            return self.fail(chain, args, f"exit {status}, stderr {err!r}")
        expected = dp.value(budget)
        feasible = expected < INF
        problems = []
        if status != (0 if feasible else 1):
            problems.append(f"exit status {status}, oracle says feasible={feasible}")
        if j["feasible"] != feasible:
            problems.append(f"feasible {j['feasible']}, oracle {feasible}")
        if j["budget"] != budget:
            problems.append(f"budget {j['budget']} != {budget}")
        if j["min_feasible_budget"] != min_budget:
            problems.append(f"min_feasible_budget {j['min_feasible_budget']}, oracle {min_budget}")
        if not close(j["store_all_makespan"], store_all[0]) or j["store_all_memory"] != store_all[1]:
            problems.append(f"store-all {j['store_all_makespan']}/{j['store_all_memory']}, "
                            f"oracle {store_all}")
        if feasible and j["feasible"]:
            if not close(j["makespan"], expected):
                problems.append(f"makespan {j['makespan']!r}, oracle OPT {expected!r}")
            ops = [(o["op"], o.get("stage")) for o in j["ops"]]
            try:
                time, peak = replay(md, ops)
                if peak > budget:
                    problems.append(f"ops peak {peak} > budget {budget}")
                if not close(time, j["makespan"]):
                    problems.append(f"ops replay to makespan {time!r}, reported {j['makespan']!r}")
                if peak != j["peak_memory"]:
                    problems.append(f"ops replay to peak {peak}, reported {j['peak_memory']}")
            except ReplayError as e:
                problems.append(f"ops do not replay: {e}")
        if not feasible:
            self.infeasible += 1
            if j["ops"] or j["makespan"] is not None or j["peak_memory"] is not None:
                problems.append("an infeasible answer with ops or figures")
        if problems:
            self.fail(chain, args, "; ".join(problems))

    def check_exhaustive(self, chain, path, md, budget, persistent):
        args = ["--budget", str(budget), "--solver", "exhaustive", "--json"]
        status, j, err = self.run(path, args)
        if status != 0 or err or j is None:
            return self.fail(chain, args, f"exit {status}, stderr {err!r}")
        try:
            time, peak = replay(md, [(o["op"], o.get("stage")) for o in j["ops"]])
        except ReplayError as e:
            return self.fail(chain, args, f"exhaustive ops do not replay: {e}")
        if peak > budget or not close(time, j["makespan"]):
            return self.fail(chain, args, f"exhaustive ops replay to {time}/{peak}")
        if time > persistent and not close(time, persistent):
            return self.fail(chain, args, f"exhaustive {time} worse than persistent OPT {persistent}")
        if time < persistent and not close(time, persistent):
            self.exhaustive_better += 1

    def check_slots(self, chain, path, md, budget, slots, exact_optimum):
        args = ["--budget", str(budget), "--slots", str(slots), "--json"]
        status, j, err = self.run(path, args)
        if status not in (0, 1) or err or j is None:
            return self.fail(chain, args, f"exit {status}, stderr {err!r}")
        if not j["feasible"]:
            return
        try:
            time, peak = replay(md, [(o["op"], o.get("stage")) for o in j["ops"]])
        except ReplayError as e:
            return self.fail(chain, args, f"ops do not replay: {e}")
        if peak > budget:
            self.fail(chain, args, f"discretized schedule peaks at {peak} > {budget}")
        elif exact_optimum == INF or (time < exact_optimum and not close(time, exact_optimum)):
            self.fail(chain, args, f"discretized makespan {time} beats the exact optimum "
                                   f"{exact_optimum}")

    def check_chain(self, chain, budgets_of, rng, name):
        md = Model(chain)
        dp = PersistentDP(md)
        store_all = replay(md, store_all_ops(md.L))
        # Self-check of the oracle: its own schedules replay to its own values.
        min_budget = dp.min_budget(store_all[1])
        if min_budget is None:
            return self.fail(chain, [], "oracle: store-all peak is not persistent-feasible")
        for b in (min_budget, store_all[1]):
            t, p = replay(md, dp.schedule(b))
            if p > b or not close(t, dp.value(b)):
                return self.fail(chain, [], f"oracle inconsistent at budget {b}: {t}/{p}")

        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            json.dump(chain, f)
        for budget in budgets_of(min_budget, store_all[1]):
            self.check_exact(chain, path, md, dp, budget, min_budget, store_all)
        if md.L <= 5:
            budget = rng.randint(min_budget, store_all[1])
            self.check_exhaustive(chain, path, md, budget, dp.value(budget))
        if rng.random() < 0.3:
            budget = rng.randint(min_budget, store_all[1] + 5)
            self.check_slots(chain, path, md, budget, rng.randint(1, 12), dp.value(budget))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--exe", required=True, help="path of remat-solve")
    parser.add_argument("--chains", type=int, default=300, help="random chains to try")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="remat-oracle-") as workdir:
        checker = Checker(args.exe, workdir)

        def random_budgets(lo, hi):
            picks = {lo, hi, rng.randint(lo, hi), hi + rng.randint(1, 10)}
            if lo > 0:
                picks.add(lo - 1)
                picks.add(rng.randint(0, lo - 1))
            return sorted(picks)

        for n in range(args.chains):
            checker.check_chain(random_chain(rng), random_budgets, rng, f"chain{n}.json")
            if len(checker.failures) >= 5:
                break

        # The measured chain: 13 stages, exact units.
        with open(os.path.join(HERE, "..", "data", "chains", "resnet18-rockmate.json")) as f:
            resnet = json.load(f)
        checker.check_chain(resnet, lambda lo, hi: [lo - 1, lo, (lo + hi) // 2, hi, 1000], rng,
                            "resnet18.json")

    if checker.failures:
        print(f"model_oracle: {len(checker.failures)} disagreement(s) in {checker.runs} runs:")
        for f in checker.failures:
            print(" -", f)
        return 1
    print(f"model_oracle: {checker.runs} runs of remat-solve on {args.chains} random chains and "
          f"resnet18 agree with docs/model.md ({checker.infeasible} infeasible budgets; the exhaustive "
          f"solver beat the persistent optimum {checker.exhaustive_better} times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
