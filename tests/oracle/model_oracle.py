#!/usr/bin/env python3
"""Cross-checks remat-solve against an independent implementation of docs/model.md.

Written from the formulas of docs/model.md (with the recording overheads of the repository's
docs/recording-overhead.md: F_all(k) peaks at held + fa[k], fa = ft where a stage gives none; and
its "Several options per stage": F_all(k, o) and the B(k) of its tape take option o's times, tape
and overheads, and the base case and the tape branch take the least over o), not from the C++: a
memoized recursion for OPT(i, l, m),
the smallest feasible budget by scanning m, and a replay simulator following the op table. On random
small chains (zero sizes included, overheads up to twice the tape, 1..8 stages, half of them with
options per stage) and budgets around
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


class Option:
    """One way to run F_all(k) and B(k): times fw, bw; tape xb (t_{k+1}); overheads fa, bt."""

    def __init__(self, fw, bw, xb, fa, bt):
        self.fw, self.bw, self.xb, self.fa, self.bt = fw, bw, xb, fa, bt


class Model:
    """docs/model.md's arrays: x[0..L+1], fw/ft[0..L] (index L is the loss), the loss's bw and bt,
    and opts[k], stage k's options (one, of its own fields, where it lists none)."""

    def __init__(self, chain):
        stages = chain["stages"]
        loss = chain.get("loss", {})
        self.L = len(stages)
        self.x = [chain["input_size"]] + [s["output_size"] for s in stages] + [0]
        self.fw = [s["forward_time"] for s in stages] + [0.0]
        self.ft = [s.get("forward_overhead", 0) for s in stages] + [0]
        self.loss_time = loss.get("backward_time", 0.0)
        self.loss_overhead = loss.get("backward_overhead", 0)
        self.opts = []
        for s in stages:
            if s.get("options"):
                self.opts.append([Option(o["forward_time"], o["backward_time"], o["tape_size"],
                                         o.get("forward_overhead", 0),
                                         o.get("backward_overhead", 0)) for o in s["options"]])
            else:
                fa = s.get("recording_overhead", s.get("forward_overhead", 0))
                self.opts.append([Option(s["forward_time"], s["backward_time"], s["tape_size"],
                                         fa, s.get("backward_overhead", 0))])


class PersistentDP:
    """OPT(i, l, m) of docs/model.md, by memoized recursion, with the choice that achieves it."""

    def __init__(self, md):
        self.md = md
        self.best = functools.lru_cache(maxsize=None)(self._best)

    def _best(self, i, l, m):
        md = self.md
        x, fw, ft, L = md.x, md.fw, md.ft, md.L
        if m < 0:
            return INF, None
        if i == l == L:
            return (md.loss_time, "loss") if m >= x[L] + md.loss_overhead else (INF, None)
        value, choice = INF, None
        if i == l:
            for n, o in enumerate(md.opts[i]):
                if m >= x[i + 1] + o.xb + o.fa and m >= x[i] + x[i + 1] + o.xb + o.bt:
                    if o.fw + o.bw < value:
                        value, choice = o.fw + o.bw, ("base", n)
            return value, choice
        # No mmin: each branch checks the peaks of its own ops (with fa = ft, docs/model.md's mmin is
        # implied by them, so this is its DP).
        for n, o in enumerate(md.opts[i]):
            if m >= x[l + 1] + o.xb + o.fa and m >= x[i] + x[i + 1] + o.xb + o.bt:
                v = o.fw + o.bw + self.best(i + 1, l, m - o.xb)[0]
                if v < value:
                    value, choice = v, ("tape", n)
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
        """The ops of an optimal schedule for `budget`, as (name, stage, option) triples."""
        out = []

        def emit(i, l, m):
            choice = self.best(i, l, m)[1]
            assert choice is not None
            if choice == "loss":
                out.append(("loss", None, 0))
            elif isinstance(choice, tuple) and choice[0] == "base":
                out.extend([("F_all", i, choice[1]), ("B", i, 0)])
            elif isinstance(choice, tuple):
                out.append(("F_all", i, choice[1]))
                emit(i + 1, l, m - self.md.opts[i][choice[1]].xb)
                out.append(("B", i, 0))
            else:
                j = choice
                out.append(("F_ck", i, 0))
                out.extend(("F_none", k, 0) for k in range(i + 1, j))
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
    """Replays (name, stage, option) ops by docs/model.md's op table; a tape has the size of the
    option that recorded it, and B(k) runs that option. Returns (makespan, peak)."""
    L, x = md.L, md.x
    held = {("a", 0)}
    tape = {}  # k + 1 -> the option of the F_all(k) that recorded t_{k+1}
    size = {"a": lambda k: x[k], "g": lambda k: x[k], "t": lambda k: md.opts[k - 1][tape[k]].xb}
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
            memory -= size[t[0]](t[1])
            held.remove(t)

    def need(t):
        if t not in held:
            raise ReplayError(f"{t} is not held")

    for n, (name, k, option) in enumerate(ops):
        if ("g", 0) in held:
            raise ReplayError(f"op {n} after g_0 was produced")
        if name == "loss":
            if ("a", L) not in held and ("t", L) not in held:
                raise ReplayError("loss without a_L or t_L")
            add(("g", L))
            op_peak = memory + md.loss_overhead
            drop(("a", L))
            time += md.loss_time
        else:
            if not isinstance(k, int) or not 0 <= k < L:
                raise ReplayError(f"op {n}: bad stage {k}")
            has_input = ("a", k) in held or (k > 0 and ("t", k) in held)
            if option != 0 and name != "F_all":
                raise ReplayError(f"op {n} {name}({k}) names option {option}")
            if name == "F_all" and not 0 <= option < len(md.opts[k]):
                raise ReplayError(f"op {n} F_all({k}): no option {option}")
            if name in ("F_none", "F_ck", "F_all"):
                if not has_input:
                    raise ReplayError(f"op {n} {name}({k}): no input")
                if name == "F_all":
                    if ("t", k + 1) not in held:
                        tape[k + 1] = option
                    add(("t", k + 1))
                    op_peak = memory + md.opts[k][option].fa
                    time += md.opts[k][option].fw
                else:
                    add(("a", k + 1))
                    op_peak = memory + md.ft[k]
                    time += md.fw[k]
                if name == "F_none":
                    drop(("a", k))
            elif name == "B":
                need(("g", k + 1))
                need(("t", k + 1))
                if not has_input:
                    raise ReplayError(f"op {n} B({k}): no input")
                recorded = md.opts[k][tape[k + 1]]
                add(("g", k))
                op_peak = memory + recorded.bt
                drop(("g", k + 1))
                drop(("t", k + 1))
                drop(("a", k))
                time += recorded.bw
            else:
                raise ReplayError(f"op {n}: unknown op {name}")
        peak = max(peak, op_peak)
    if ("g", 0) not in held:
        raise ReplayError("ends without g_0")
    return time, peak


def store_all_ops(L):
    return ([("F_all", k, 0) for k in range(L)] + [("loss", None, 0)] +
            [("B", k, 0) for k in reversed(range(L))])


def ops_of(j):
    """The ops of a --json result as (name, stage, option) triples (option 0 is left out)."""
    return [(o["op"], o.get("stage"), o.get("option", 0)) for o in j["ops"]]


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
    # Half the chains list 1 to 3 options on some stages (then the stage's own tape, backward and
    # recording overhead are not read).
    if rng.random() < 0.5:
        for stage in stages:
            if rng.random() < 0.6:
                stage["options"] = []
                for _ in range(rng.randint(1, 3)):
                    tape = stage["output_size"] + rng.choice([0, rng.randint(0, 10)])
                    stage["options"].append({
                        "forward_time": rng.choice([stage["forward_time"], time()]),
                        "backward_time": time(), "tape_size": tape,
                        "forward_overhead": rng.randint(0, 2 * tape),
                        "backward_overhead": rng.randint(0, 2 * tape)})
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
            ops = ops_of(j)
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
            time, peak = replay(md, ops_of(j))
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
            time, peak = replay(md, ops_of(j))
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
        # With Rockmate's options per stage.
        with open(os.path.join(HERE, "..", "data", "chains", "resnet18-rockmate-options.json")) as f:
            options = json.load(f)
        checker.check_chain(options, lambda lo, hi: [lo - 1, lo, (lo + hi) // 2, hi, 1000], rng,
                            "resnet18-options.json")

    if checker.failures:
        print(f"model_oracle: {len(checker.failures)} disagreement(s) in {checker.runs} runs:")
        for f in checker.failures:
            print(" -", f)
        return 1
    print(f"model_oracle: {checker.runs} runs of remat-solve on {args.chains} random chains and "
          f"resnet18 (with and without options) agree with docs/model.md ({checker.infeasible} infeasible budgets; the exhaustive "
          f"solver beat the persistent optimum {checker.exhaustive_better} times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
