"""The binding's results are remat-solve's: on chains of the zoo and on random chains, for every
solver at a few budgets, `remat.solve` gives what `remat-solve --json` prints (feasibility,
makespan, peak, least budget, ops), and `remat.read_chain` reads what remat-zoo writes.

    python3 test_vs_remat_solve.py --solve PATH/remat-solve --zoo PATH/remat-zoo [--chains N]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import remat

# Small enough that every solver, the exhaustive search excepted, answers at once.
ZOO = [["resnet50", "--batch", "8", "--image", "64"], ["gpt2-small", "--batch", "2", "--seq", "128"],
       ["densenet121", "--batch", "4", "--image", "64", "--pcie", "4"]]
SOLVERS = [s for s in remat.solvers() if s != "exhaustive"]


def op_json(o):
    if o.is_transfer:
        return {"op": {"O": "offload", "P": "prefetch", "W": "wait"}[o.kind], "tensor": o.tensor,
                "index": o.index}
    return {"op": "loss"} if o.kind == "loss" else {"op": o.kind, "stage": o.index}


def random_chain(rng, k):
    n = rng.randint(1, 12)
    out = [rng.randint(0, 50) for _ in range(n)]
    return remat.Chain.from_columns(
        input_size=rng.randint(1, 50), forward_time=[rng.randint(1, 9) / 4 for _ in range(n)],
        backward_time=[rng.randint(1, 9) / 4 for _ in range(n)], output_size=out,
        tape_size=[o + rng.randint(0, 40) for o in out],
        forward_overhead=[rng.choice([0, rng.randint(0, 20)]) for _ in range(n)],
        backward_overhead=[rng.choice([0, rng.randint(0, 20)]) for _ in range(n)],
        loss_time=rng.randint(0, 3) / 2, loss_overhead=rng.randint(0, 10),
        transfer=remat.Transfer(offload_bandwidth=rng.randint(1, 20),
                                prefetch_bandwidth=rng.randint(1, 20)) if k % 2 else None,
        name=f"random-{k}")


def compare(exe, path, chain, budget, solver, slots, failures):
    args = [exe, path, "--budget", str(budget), "--solver", solver, "--json"]
    if slots is not None:
        args += ["--slots", str(slots)]
    p = subprocess.run(args, capture_output=True, text=True)
    where = f"{chain.name} --budget {budget} --solver {solver} --slots {slots}"
    try:
        r = remat.solve(chain, budget, solver=solver, slots=slots)
    except remat.SolverError as e:
        if p.returncode != 2 or str(e) not in p.stderr:
            failures.append(f"{where}: binding refused ({e}), remat-solve: {p.returncode} {p.stderr}")
        return 0
    if p.returncode not in (0, 1):
        failures.append(f"{where}: remat-solve failed ({p.stderr.strip()}), binding: {r}")
        return 0
    want = json.loads(p.stdout)
    got = {"solver": r.solver, "feasible": r.feasible, "budget": r.budget,
           "makespan": r.makespan, "peak_memory": r.peak_memory,
           "min_feasible_budget": r.min_feasible_budget, "ops": [op_json(o) for o in r.ops]}
    for key, value in got.items():
        if want[key] != value:
            failures.append(f"{where}: {key}: remat-solve {want[key]!r}, binding {value!r}")
    # The binding's JSON writer and reader agree with remat-solve's output.
    if json.loads(remat.schedule_to_json(r.ops)) != want["ops"]:
        failures.append(f"{where}: schedule_to_json differs from remat-solve's ops")
    if remat.schedule_from_json(p.stdout, chain) != r.ops:
        failures.append(f"{where}: schedule_from_json of remat-solve's output differs")
    return 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--solve", required=True)
    ap.add_argument("--zoo", required=True)
    ap.add_argument("--chains", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    failures, compared = [], 0
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory() as d:
        cases = []
        for args in ZOO:
            path = os.path.join(d, args[0] + ".json")
            subprocess.run([a.zoo, *args, "-o", path], check=True)
            cases.append((path, remat.read_chain(path)))
        for k in range(a.chains):
            path = os.path.join(d, f"random-{k}.json")
            chain = random_chain(rng, k)
            chain.write(path)
            if remat.read_chain(path) != chain:
                failures.append(f"{path}: does not read back as written")
            cases.append((path, chain))
        for path, chain in cases:
            store_all = remat.solve(chain, 2**62, solver="store-all").peak_memory
            least = remat.solve(chain, 0).min_feasible_budget
            budgets = sorted({least, (least + store_all) // 2, store_all})
            random_case = chain.name.startswith("random")
            for budget in budgets:
                for solver in SOLVERS + (["exhaustive"] if random_case and len(chain) <= 3 and chain.transfer is None else []):
                    if remat.needs_link(solver) and chain.transfer is None:
                        continue
                    slots = rng.choice([None, "exact", 50]) if solver == "optimal" else None
                    compared += compare(a.solve, path, chain, budget, solver, slots, failures)
            # Below the least budget: infeasible, with the same least budget.
            compared += compare(a.solve, path, chain, max(0, least - 1), "optimal", None, failures)
    for f in failures[:20]:
        print("MISMATCH", f)
    print(f"{compared} solves compared with remat-solve, {len(failures)} mismatches")
    return 1 if failures or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
