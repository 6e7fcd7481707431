"""remat._core as a Python user sees it: chains (keywords, columns, files), errors, solve,
simulate, trade_off, the offload model, graphs and their cut points. Run: python3 test_core.py (PYTHONPATH: the package)."""

import json
import os
import tempfile
import unittest

import numpy as np

import remat

EIGHT = [remat.Stage(forward_time=1, backward_time=2, output_size=4, tape_size=12)] * 8


def eight(**kw):
    return remat.Chain(EIGHT, input_size=4, **kw)


class Chains(unittest.TestCase):
    def test_keywords_and_columns_make_the_same_chain(self):
        cols = remat.Chain.from_columns(input_size=np.int64(4), forward_time=np.ones(8),
                                        backward_time=[2.0] * 8,
                                        output_size=np.full(8, 4, dtype=np.int64),
                                        tape_size=(12,) * 8)
        self.assertEqual(cols, eight())
        self.assertEqual(len(cols), 8)
        self.assertEqual(cols.stages[3].tape_size, 12)
        self.assertIsNone(cols.transfer)

    def test_bad_values_name_the_stage_and_the_field(self):
        with self.assertRaises(remat.ChainError) as e:
            remat.Chain.from_columns(input_size=4, forward_time=[1, 1], backward_time=[1, 1],
                                     output_size=[4, 40], tape_size=[8, 12])
        self.assertIsInstance(e.exception, ValueError)
        self.assertEqual(str(e.exception), "stages[1].tape_size: must be >= output_size (12 < 40)")
        self.assertEqual((e.exception.stage_index, e.exception.field), (1, "tape_size"))
        with self.assertRaises(remat.ChainError) as e:
            remat.Chain.from_columns(input_size=4, forward_time=[1, float("nan")],
                                     backward_time=[1, 1], output_size=[4, 4], tape_size=[8, 8])
        self.assertEqual(str(e.exception), "stages[1].forward_time: must be a finite number")
        with self.assertRaises(remat.ChainError) as e:
            remat.Chain.from_columns(input_size=4, forward_time=[1], backward_time=[1],
                                     output_size=np.array([4.0]), tape_size=[8])
        self.assertIn("stages[0].output_size: must be an integer", str(e.exception))
        with self.assertRaises(remat.ChainError) as e:
            remat.Chain.from_columns(input_size=4, forward_time=[1, 1], backward_time=[1],
                                     output_size=[4, 4], tape_size=[8, 8])
        self.assertEqual(str(e.exception), "backward_time: has 1 values, forward_time has 2")
        with self.assertRaises(remat.ChainError) as e:
            eight(loss_overhead=-1)
        self.assertEqual((e.exception.stage_index, e.exception.field),
                         (None, "loss.backward_overhead"))
        with self.assertRaises(remat.ChainError) as e:
            remat.Chain([], input_size=1)
        self.assertEqual(str(e.exception), "stages: must not be empty")

    def test_files_round_trip_and_bad_files_name_file_stage_field(self):
        c = remat.Chain([remat.Stage(name="conv", forward_time=0.1, backward_time=0.3,
                                     output_size=10, tape_size=20, recording_overhead=5)],
                        input_size=3, loss_time=0.5, name="tiny", time_unit="ms",
                        memory_unit="bytes",
                        transfer=remat.Transfer(offload_bandwidth=2, prefetch_bandwidth=3))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "c.json")
            c.write(path)
            back = remat.read_chain(path)
            self.assertEqual(back, c)
            self.assertEqual(back.stages[0].name, "conv")
            self.assertEqual(back.stages[0].recording_overhead, 5)
            self.assertEqual(back.transfer, remat.Transfer(offload_bandwidth=2, prefetch_bandwidth=3))
            with open(path, "w") as f:
                f.write('{"input_size": 1, "stages": [{"forward_time": 1, "backward_time": 1, '
                        '"output_size": 1}]}')
            with self.assertRaises(remat.ChainFileError) as e:
                remat.read_chain(path)
            self.assertEqual(str(e.exception), path + ": stages[0].tape_size: missing (required)")
            self.assertEqual((e.exception.source, e.exception.stage_index, e.exception.field),
                             (path, 0, "tape_size"))
            self.assertIsInstance(e.exception, remat.ChainError)
        self.assertEqual(remat.Chain.from_json(c.to_json()), c)
        with self.assertRaises(remat.ChainFileError):
            remat.read_chain("/nonexistent/chain.json")


class Options(unittest.TestCase):
    """Several options per stage (docs/model.md): F_all(k, o) and B(k) run option o."""

    @staticmethod
    def two_ways(**kw):
        # Option 0: a small tape, a slow backward; option 1: a large tape, a fast backward.
        return remat.Chain([remat.Stage(forward_time=1, backward_time=5, output_size=1,
                                        tape_size=1, options=[
                                            remat.StageOption(forward_time=1, backward_time=5,
                                                              tape_size=1),
                                            remat.StageOption(forward_time=1, backward_time=2,
                                                              tape_size=4)])],
                           input_size=1, **kw)

    def test_stage_options_are_read_written_and_checked(self):
        c = self.two_ways(name="two")
        self.assertEqual(len(c.stages[0].options), 2)
        self.assertEqual(c.stages[0].options[1].tape_size, 4)
        self.assertEqual(c.stages[0].options[1],
                         remat.StageOption(forward_time=1, backward_time=2, tape_size=4))
        self.assertIn("options=[StageOption(", repr(c.stages[0]))
        self.assertEqual(remat.Chain.from_json(c.to_json()), c)
        self.assertEqual(EIGHT[0].options, [])
        with self.assertRaises(remat.ChainError) as e:
            remat.Stage(forward_time=1, backward_time=1, output_size=4, tape_size=4,
                        options=[remat.StageOption(forward_time=1, backward_time=1, tape_size=3)])
        self.assertEqual(e.exception.field, "options[0].tape_size")
        self.assertIn("must be >= output_size (3 < 4)", str(e.exception))

    def test_ops_name_their_option_and_solve_picks_it(self):
        c = self.two_ways()
        run = [remat.Op("F_all", 0, option=1), remat.Op("loss", 1), remat.Op("B", 0)]
        self.assertEqual(str(run[0]), "F_all(0,1)")
        self.assertEqual(run[0].option, 1)
        self.assertNotEqual(run[0], remat.Op("F_all", 0))
        r = remat.simulate(c, run)
        self.assertEqual((r.valid, r.makespan, r.peak_memory), (True, 3, 7))
        bad = remat.simulate(c, [remat.Op("F_all", 0, option=2)])
        self.assertEqual(bad.error, "bad_option")
        with self.assertRaisesRegex(ValueError, "only F_all names one"):
            remat.Op("B", 0, option=1)
        fast = remat.solve(c, 100, slots="exact")
        self.assertEqual((fast.makespan, fast.ops[0].option), (3, 1))
        small = remat.solve(c, 4, slots="exact")
        self.assertEqual((small.makespan, small.ops[0].option), (6, 0))


class Solving(unittest.TestCase):
    def test_the_readme_numbers(self):
        got = []
        for budget in (120, 60, 40, 20):
            r = remat.solve(eight(), budget, slots="exact")
            got.append((r.feasible, r.makespan, r.peak_memory, r.min_feasible_budget))
        self.assertEqual(got, [(True, 24, 108, 28), (True, 29, 60, 28), (True, 32, 40, 28),
                               (False, None, None, 28)])
        r = remat.solve(eight(), 40, slots="exact")
        self.assertTrue(r.exact)
        self.assertEqual(str(r.ops[0]), "F_ck(0)")
        self.assertEqual(r.ops[-1], remat.Op("B", 0))
        self.assertEqual(remat.simulate(eight(), r.ops).peak_memory, 40)

    def test_budgets_solvers_and_bad_requests(self):
        c = eight()
        self.assertEqual(remat.solve(c, "40B", slots="exact").peak_memory, 40)
        self.assertEqual(remat.solve(c, 40, solver="chen_sqrt").solver, "chen-sqrt")
        with self.assertRaisesRegex(ValueError, "unknown solver 'fastest'"):
            remat.solve(c, 40, solver="fastest")
        with self.assertRaisesRegex(ValueError, "budget '12XB': unknown unit"):
            remat.solve(c, "12XB")
        with self.assertRaises(TypeError):
            remat.solve(c, 40.5)
        with self.assertRaises(remat.SolverError) as e:
            remat.solve(c, 40, solver="vdnn")
        self.assertIn("no link to host memory", str(e.exception))
        self.assertEqual(remat.solvers()[0], "optimal")
        self.assertTrue(remat.needs_link("save-on-cpu"))
        self.assertFalse(remat.needs_link("offload"))

    def test_trade_off_is_solve_at_every_point(self):
        c = eight()
        points = remat.trade_off(c)
        self.assertEqual(points[0], (28, 52.0))
        self.assertEqual(points[-1], (108, 24.0))
        for budget, makespan in points:
            self.assertEqual(remat.solve(c, budget, slots="exact").makespan, makespan)

    def test_simulate_says_why_a_schedule_is_invalid(self):
        c = eight()
        r = remat.simulate(c, [remat.Op("F_ck", 0), remat.Op("B", 0)])
        self.assertFalse(r.valid)
        self.assertEqual(r.error, "gradient_missing")
        self.assertEqual(r.first_invalid, 1)
        self.assertEqual(r.message, "op 1 (B(0)): needs g_1, which is not held")
        with self.assertRaises(TypeError):
            remat.simulate(c, ["F_ck(0)"])
        with self.assertRaisesRegex(ValueError, "unknown op kind"):
            remat.Op("X", 0)

    def test_schedule_json(self):
        c = eight()
        r = remat.solve(c, 40, slots="exact")
        text = remat.schedule_to_json(r.ops)
        self.assertEqual(json.loads(text)[0], {"op": "F_ck", "stage": 0})
        self.assertEqual(remat.schedule_from_json(text, c), r.ops)
        self.assertEqual(remat.schedule_from_json('{"ops": ' + text + "}", c), r.ops)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.json")
            with open(path, "w") as f:
                f.write(text)
            self.assertEqual(remat.read_schedule(path, c), r.ops)
            with self.assertRaisesRegex(ValueError, "cannot open"):
                remat.read_schedule(os.path.join(d, "none.json"), c)
        with self.assertRaisesRegex(ValueError, r"^plan.json: ops\[1\]\.stage: missing$"):
            remat.schedule_from_json('[{"op": "loss"}, {"op": "B"}]', c, "plan.json")

    def test_micro_batches_in_flight(self):
        c = eight()
        for K in (1, 2, 3):
            for budget in (40, 60, 80, 120):
                r = remat.solve(c, budget, slots="exact", in_flight=K)
                self.assertEqual(r.in_flight, K)
                if r.feasible:
                    self.assertEqual(remat.simulate(c, r.ops).retained, r.retained)
                    self.assertLessEqual(r.peak_memory + (K - 1) * r.retained, budget)
                else:
                    self.assertIsNone(r.retained)
                    self.assertGreater(r.min_feasible_budget, budget)
        self.assertTrue(remat.solve(c, 60, in_flight=2).feasible)  # docs/python.md's line
        with self.assertRaisesRegex(ValueError, "in_flight must be >= 1"):
            remat.solve(c, 40, in_flight=0)
        with self.assertRaises(TypeError):
            remat.solve(c, 40, in_flight=1.5)
        linked = eight(transfer=remat.Transfer(offload_bandwidth=8, prefetch_bandwidth=8))
        with self.assertRaises(remat.SolverError) as e:
            remat.solve(linked, 40, solver="offload", in_flight=2)
        self.assertIn("micro-batches in flight", str(e.exception))

    def test_pipeline_split(self):
        # Heavier stages at the end: the equal split is not the best.
        c = remat.Chain(
            [remat.Stage(forward_time=1 + k, backward_time=2 + 2 * k, output_size=4,
                         tape_size=12, name=f"s{k}") for k in range(8)],
            input_size=4, loss_time=1)
        K = remat.micro_batches_in_flight("1f1b", ranks=3, micro_batches=6)
        self.assertEqual(K, [3, 2, 1])
        self.assertEqual(remat.micro_batches_in_flight("gpipe", 2, 5), [5, 5])
        p = remat.split_pipeline(c, 200, K, slots="exact")
        self.assertTrue(p)
        equal = remat.solve_pipeline(c, 200, K, remat.equal_starts(len(c), 3), slots="exact")
        self.assertLess(p.slowest, equal.slowest)
        self.assertEqual(p.slowest, max(s.time for s in p.stages))
        self.assertEqual([s.first for s in p.stages], p.starts)
        for s, k in zip(p.stages, K):
            part = remat.stage_chain(c, s.first, s.end)
            self.assertEqual(len(part), s.end - s.first)
            replay = remat.simulate(part, s.result.ops)
            self.assertTrue(replay.valid)
            self.assertEqual(s.memory, replay.peak_memory + (k - 1) * replay.retained)
            self.assertLessEqual(s.memory, 200)
            self.assertEqual(s.in_flight, k)
        # The same split solved again is the same; below the least budget, what would fit.
        again = remat.solve_pipeline(c, 200, K, p.starts, slots="exact")
        self.assertEqual(again.slowest, p.slowest)
        low = remat.split_pipeline(c, 10, K, slots="exact")
        self.assertFalse(low)
        self.assertIsNone(low.slowest)
        self.assertTrue(remat.split_pipeline(c, low.min_feasible_budget, K, slots="exact"))
        full = remat.checkpoint_every_stage(c, 10_000, K, remat.equal_starts(len(c), 3))
        self.assertTrue(full)
        self.assertGreaterEqual(full.slowest, equal.slowest)
        with self.assertRaisesRegex(ValueError, "schedule 'zb'"):
            remat.micro_batches_in_flight("zb", 2, 2)
        with self.assertRaises(remat.SolverError):
            remat.split_pipeline(c, 200, [1] * 9)
        with self.assertRaisesRegex(remat.SolverError, "rank 1 starts"):
            remat.solve_pipeline(c, 200, [2, 1], [0, 0])

    def test_offloading(self):
        c = eight(transfer=remat.Transfer(offload_bandwidth=8, prefetch_bandwidth=8))
        r = remat.solve(c, 24, solver="offload", slots="exact")
        moves = [o for o in r.ops if o.kind == "O"]
        self.assertEqual((r.makespan, len(moves)), (34.5, 7))
        self.assertTrue(all(o.is_transfer and o.tensor in ("a", "t") for o in moves))
        self.assertEqual(repr(moves[0]), f"Op('O', {moves[0].index}, '{moves[0].tensor}')")
        self.assertEqual(remat.simulate(c, r.ops).makespan, r.makespan)
        self.assertFalse(remat.solve(eight(), 24, slots="exact").feasible)


class Graphs(unittest.TestCase):
    def skip_graph(self):
        """x -> a -> relu_ (in place) -> b; c reads b and the relu's output (a skip), d after c;
        a weight read by a and b."""
        g = remat.Graph()
        x = g.input("x", 16)
        w = g.add_global("w", 1000)
        a = g.apply("a", [x, w], 32)
        r = g.apply_in_place("relu", a)
        b = g.apply("b", [r, w], 32)
        c = g.apply("c", [b, r], 32)
        g.apply("d", [c], 8)
        return g

    def test_cut_points_blocks_and_the_node_map(self):
        lin = remat.linearize(self.skip_graph())
        # After "b" the relu's output is still read by "c": no cut there.
        self.assertEqual(lin.cut_nodes, [0, 1, 3, 4])
        self.assertEqual([(b.first, b.end) for b in lin.blocks], [(0, 1), (1, 2), (2, 4), (4, 5)])
        self.assertEqual(lin.block_of, [0, 1, 2, 2, 3])
        self.assertEqual(lin.global_bytes, 1000)
        self.assertEqual(len(lin.chain), 4)
        self.assertEqual(lin.chain.input_size, 16)
        # Block 2 makes b and c (64 bytes); the whole counts every non-global value's size, the
        # in-place output's too: 16 + 32 + 32 + 32 + 32 + 8.
        self.assertAlmostEqual(lin.activation_share(2), 64 / 152)
        self.assertAlmostEqual(lin.activation_share(1), 0.0)  # the in-place op makes no bytes
        with self.assertRaises(IndexError):
            lin.activation_share(4)

    def test_block_options(self):
        # x -> up -> gelu -> down, + x (a skip): one block, whose saved values up's and gelu's
        # outputs may be dropped and recomputed in its backward.
        g = remat.Graph()
        x = g.input("x", 16)
        up = g.apply("up", [x], 256, forward_time=4.0, backward_time=8.0, saved=[x])
        act = g.apply("gelu", [up], 256, forward_time=1.0, backward_time=1.0, saved=[up])
        down = g.apply("down", [act], 16, forward_time=4.0, backward_time=8.0, saved=[act])
        g.apply("add", [down, x], 16)
        plain = remat.linearize(g)
        self.assertEqual([b.options for b in plain.blocks], [[]])
        lin = remat.linearize(g, block_options=True)
        block, stage = lin.blocks[0], lin.chain.stages[0]
        self.assertGreater(len(block.options), 1)
        self.assertEqual(len(stage.options), len(block.options))
        self.assertEqual(block.options[0], ([], []))
        for (dropped, recompute), opt in zip(block.options[1:], stage.options[1:]):
            self.assertTrue(dropped and recompute)
            self.assertLess(opt.tape_size, stage.options[0].tape_size)
            self.assertGreater(opt.backward_time, stage.options[0].backward_time)
        self.assertEqual(len(remat.linearize(g, block_options=True, max_options=1).blocks[0]
                             .options), 0)
        with self.assertRaisesRegex(ValueError, "exact_limit"):
            remat.linearize(g, block_options=True, exact_limit=31)

    def test_the_graph_as_built(self):
        g = self.skip_graph()
        self.assertEqual([(v.name, v.size, v.kind) for v in g.values[:3]],
                         [("x", 16, "input"), ("w", 1000, "global"), ("a", 32, "activation")])
        self.assertEqual(g.nodes[1].in_place, [(3, 2)])
        self.assertEqual(g.nodes[3].inputs, [4, 3])
        two = remat.Graph()
        x = two.input("x", 4)
        p, q = two.add_value("p", 4, "activation"), two.add_value("q", 4, "activation")
        two.add_node("split", [x], [p, q], saved=[x])
        two.apply("join", [p, q], 4)
        self.assertEqual(remat.linearize(two).cut_nodes, [1])

    def test_bad_graphs_name_the_node_and_the_value(self):
        g = self.skip_graph()
        g.apply("late", [2], 4)  # reads a, which the relu overwrote
        with self.assertRaises(remat.GraphError) as e:
            remat.linearize(g)
        self.assertIsInstance(e.exception, ValueError)
        self.assertEqual((e.exception.node, e.exception.value), (5, 2))
        self.assertIn('node 5 ("late"): reads value 2 ("a"), which node 1 ("relu") overwrote',
                      str(e.exception))
        with self.assertRaises(remat.GraphError) as e:
            remat.Graph().validate()
        self.assertEqual((e.exception.node, e.exception.value), (None, None))
        with self.assertRaisesRegex(ValueError, "kind must be"):
            remat.Graph().add_value("v", 1, "weight")

    def test_parse_size(self):
        self.assertEqual(remat.parse_size("512MiB"), 512 << 20)
        self.assertEqual(remat.parse_size("8GB"), 8 * 10**9)
        self.assertEqual(remat.parse_size("800"), 800)
        with self.assertRaisesRegex(ValueError, "'12XB': unknown unit 'XB'"):
            remat.parse_size("12XB")


if __name__ == "__main__":
    unittest.main()
