"""remat.torch.Checkpointed with torch.compile (PyTorch 2.x): `compile=True` and
`torch.compile(Checkpointed(...))` run each block compiled and the schedule's runner outside
dynamo's graph. Five steps at the least budget (recomputations), then at one that holds plain
autograd's step: no recompilation after the first steps and no recompile-limit warning, every op
allocating what the profile of the compiled blocks predicts, within the budget, and gradients
those of the eager model within float32 rounding (compiled kernels round differently).

Exit status 77 (a skip for ctest) where torch has no torch.compile (Debian's 1.13), after
checking that compile=True is refused there saying why."""

import copy
import io
import logging
import sys
import unittest

import torch

import remat.torch as rt

if not hasattr(torch, "compile"):
    try:
        rt.Checkpointed([torch.nn.Linear(4, 4)], torch.randn(2, 4), budget=1 << 30,
                        compile=True)
    except RuntimeError as e:
        assert "has no torch.compile" in str(e), e
    else:
        sys.exit("compile=True was accepted by a torch without torch.compile")
    print(f"torch {torch.__version__} has no torch.compile: skipped")
    sys.exit(77)

from torch._dynamo.utils import counters  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Warnings(logging.Handler):
    """What torch._dynamo logs at WARNING and above (the recompile limit is one)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def eager_gradients(blocks, x, loss):
    ref = copy.deepcopy(blocks)
    y = x
    for b in ref:
        y = b(y)
    loss(y).backward()
    return [p.grad for b in ref for p in b.parameters()]


class Compiled(unittest.TestCase):
    def check(self, outer):
        torch.manual_seed(5)
        torch._dynamo.reset()
        blocks = [Block() for _ in range(8)]
        x = torch.randn(16, 64)
        loss = lambda y: y.pow(2).mean()  # noqa: E731
        want = eager_gradients(blocks, x, loss)
        if outer:
            m = rt.Checkpointed(blocks, x, budget="least", loss=loss, runs=1)
            step = torch.compile(m)
        else:
            m = rt.Checkpointed(blocks, x, budget="least", loss=loss, runs=1, compile=True)
            step = m
        seen = Warnings()
        logging.getLogger("torch._dynamo").addHandler(seen)
        try:
            graphs = []
            for budget in ("least", "100%"):
                m.budget = budget
                for i in range(5):
                    for p in m.parameters():
                        p.grad = None
                    loss(step(x)).backward()
                    graphs.append(counters["stats"]["unique_graphs"])
                    with self.subTest(budget=budget, step=i):
                        self.assertTrue(m.as_predicted, f"{m.op_peaks} != {m.expected_op_peaks}")
                        self.assertTrue(m.within_budget)
                        for p, g in zip(m.parameters(), want):
                            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)
                if budget == "least":
                    self.assertGreater(len(m.schedule.ops), 2 * len(blocks) + 1, "no recomputation")
                else:
                    self.assertTrue(m._current[1].plain, "the budget holds plain autograd's step")
                self.assertIn("each block runs compiled by torch.compile",
                              m.report(file=io.StringIO()))
        finally:
            logging.getLogger("torch._dynamo").removeHandler(seen)
        # Compiled in the first steps at each budget (grad and no_grad forwards), then reused.
        self.assertEqual(graphs[2:5], [graphs[1]] * 3)
        self.assertEqual(graphs[7:10], [graphs[6]] * 3)
        self.assertEqual([w for w in seen.messages if "recompile" in w.lower()], [])

    def test_compile_true(self):
        self.check(outer=False)

    def test_torch_compile_of_checkpointed(self):
        self.check(outer=True)

    def test_checkpointed_of_a_compiled_model(self):
        torch.manual_seed(6)
        model = torch.nn.Sequential(*[Block() for _ in range(4)])
        x = torch.randn(16, 64)
        loss = lambda y: y.pow(2).mean()  # noqa: E731
        want = eager_gradients(list(model), x, loss)
        m = rt.Checkpointed(torch.compile(model), x, budget="least", loss=loss, runs=1)
        loss(m(x)).backward()
        self.assertTrue(m.as_predicted and m.within_budget)
        self.assertIn("each block runs compiled by torch.compile", m.report(file=io.StringIO()))
        for p, g in zip(m.parameters(), want):
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)

    @unittest.skipUnless(hasattr(torch.nn.Module, "compile"), "nn.Module.compile: torch 2.2+")
    def test_module_compile_in_place(self):
        torch.manual_seed(7)
        blocks = [Block() for _ in range(4)]
        x = torch.randn(16, 64)
        loss = lambda y: y.pow(2).mean()  # noqa: E731
        want = eager_gradients(blocks, x, loss)
        m = rt.Checkpointed(blocks, x, budget="least", loss=loss, runs=1)
        m.compile()
        for _ in range(2):
            for p in m.parameters():
                p.grad = None
            loss(m(x)).backward()
        self.assertTrue(m.as_predicted and m.within_budget)
        self.assertIn("each block runs compiled by torch.compile", m.report(file=io.StringIO()))
        for p, g in zip(m.parameters(), want):
            torch.testing.assert_close(p.grad, g, rtol=1e-4, atol=1e-6)

    def test_bad_compile_argument(self):
        with self.assertRaisesRegex(TypeError, "compile must be True, False or a dict"):
            rt.Checkpointed([torch.nn.Linear(4, 4)], torch.randn(2, 4), budget=1 << 30,
                            compile="max-autotune")


if __name__ == "__main__":
    unittest.main()
