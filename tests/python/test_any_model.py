"""remat.torch.Checkpointed on models as they come (not cut by hand): traced with torch.fx, cut at
the cut points remat.linearize finds, one stage per block. Tiny hand-made modules check the
tracing and the split (skip connections, in-place ReLUs at a cut, tied parameters, a dict output,
other inputs, meta values across blocks, untraceable code); torchvision's models as they come
check one step at the least, a middle and the store-all budget against plain autograd: parameter
gradients, the input's gradient and buffers bitwise equal, every op allocating what the profile
predicts (the CPU meter), within the budget.

REMAT_TEST_MODELS=all adds the slower torchvision models (convnext_tiny, swin_t, vit_b_16) to
the default four (resnet50, densenet121, mobilenet_v3_large, efficientnet_b0)."""

import copy
import dataclasses
import gc
import io
import os
import unittest
import warnings

import torch
import torchvision

import remat
import remat.torch as rt
from checks import favour_options, whole_step_peak

LOSS = staticmethod(lambda y: y.float().pow(2).mean())


def step_and_compare(test, m, model, args, loss, budget):
    """One step of m at `budget` and one of plain autograd on a copy of model, from the same
    generator state: gradients, input gradient and buffers must be equal bit for bit, every op
    as predicted and within the budget."""
    m.budget = budget
    ref = copy.deepcopy(model)
    for p in list(model.parameters()) + list(ref.parameters()):
        p.grad = None
    x = args[0]
    if x.requires_grad:
        x.grad = None
    rng = torch.get_rng_state()
    # Earlier tests' Checkpointed objects are reference cycles (an output's node holds its step)
    # holding tensors: freed by the garbage collector in the middle of this step, they would
    # lower what the meter reads.
    gc.collect()
    loss(m(*args)).backward()
    got_x = x.grad
    if x.requires_grad:
        x.grad = None
    torch.set_rng_state(rng)
    loss(ref(*args)).backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        test.assertTrue((p.grad is None and q.grad is None) or torch.equal(p.grad, q.grad),
                        f"gradient of {name}")
    for (name, b), c in zip(model.named_buffers(), ref.buffers()):
        test.assertTrue(torch.equal(b, c), f"buffer {name}")
    if x.requires_grad:
        test.assertTrue(torch.equal(got_x, x.grad), "input gradient")
    test.assertEqual(m.op_peaks, m.expected_op_peaks)
    test.assertTrue(m.as_predicted)
    test.assertEqual(m.measured_peak, m.expected_peak)
    test.assertLessEqual(m.measured_peak, m.budget_bytes)
    test.assertTrue(m.within_budget)
    recomputations = len(m.schedule.ops) - (2 * len(m.chain) + 1)
    # A second step, with the gradients defined (new ones are outside the budget), measured
    # whole by the allocator: within the budget where the loss was given.
    measured = whole_step_peak(lambda: loss(m(*args)).backward(), x)
    test.assertEqual(measured, m.total_peak)
    test.assertTrue(m.as_predicted)
    if m.user_loss is not None:
        test.assertLessEqual(measured, m.budget_bytes)
        test.assertLessEqual(m.outside_schedule, m.loss_reserve)
    return recomputations


def check_budgets(test, model, args, loss=LOSS.__func__, expect_recompute=True):
    """Schedules at the least, a middle and the store-all budget (run_plainly=False: a small
    model's budgets may all hold plain autograd's step), then the store-all budget as a user
    gets it, which runs plainly where a loss is given."""
    m = rt.Checkpointed(model, tuple(args), budget=1 << 40, loss=loss, runs=1,
                        run_plainly=False)
    least, store_all = m.least_budget, m.store_all_peak  # with the loss's reserve
    recomputed = 0
    for budget in (least, (least + store_all) // 2, store_all):
        with test.subTest(budget=budget):
            recomputed += step_and_compare(test, m, model, args, loss, budget)
    if expect_recompute:
        test.assertGreater(recomputed, 0, "no budget made the schedule recompute")
    m.run_plainly = True
    with test.subTest(budget=store_all, plainly=True):
        step_and_compare(test, m, model, args, loss, store_all)
        if loss is not None:
            test.assertLessEqual(m.plain_peak, store_all)
            test.assertEqual(m.measured_peak, m.plain_peak)
            test.assertIn("the model runs plainly", m.report(file=io.StringIO()))
    m.run_plainly = False
    return m


# --- tiny modules --------------------------------------------------------------------------------

class Residual(torch.nn.Module):
    """Blocks x + f(x) (a skip connection each), with in-place ReLUs after each sum."""

    def __init__(self, dim=32, blocks=4):
        super().__init__()
        self.inp = torch.nn.Linear(dim, dim)
        self.fs = torch.nn.ModuleList(torch.nn.Sequential(
            torch.nn.Linear(dim, dim), torch.nn.ReLU(inplace=True), torch.nn.Linear(dim, dim))
            for _ in range(blocks))
        self.relu = torch.nn.ReLU(inplace=True)
        self.out = torch.nn.Linear(dim, 4)

    def forward(self, x):
        x = self.relu(self.inp(x))
        for f in self.fs:
            x = self.relu(x + f(x))
        return self.out(x)


class Tied(torch.nn.Module):
    """One Linear used in the first and in the last block (tied parameters)."""

    def __init__(self, dim=16):
        super().__init__()
        self.shared = torch.nn.Linear(dim, dim)
        self.mid = torch.nn.Sequential(*[torch.nn.Linear(dim, dim) for _ in range(3)])

    def forward(self, x):
        return self.shared(torch.tanh(self.mid(torch.tanh(self.shared(x)))))


class DictOut(torch.nn.Module):
    """A dict output, a meta value (the batch size) read three blocks later, a dropout and an
    input that needs no gradient (a mask) read by the last block."""

    def __init__(self, dim=16):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(4))
        self.drop = torch.nn.Dropout(0.2)

    def forward(self, x, mask, scale=1.0):
        n = x.shape[0]
        for layer in self.layers:
            x = torch.sin(self.drop(layer(x)))
        return {"logits": (x * mask).reshape(n, -1) * scale, "n": None}


@dataclasses.dataclass
class Prediction:
    """A dataclass output (not a dict): its fields' values as the model made them."""
    logits: torch.Tensor
    classes: int = 4


class DataclassOut(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.a, self.b = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, 4)

    def forward(self, x):
        return Prediction(self.b(torch.tanh(self.a(x))))


class Branchy(torch.nn.Module):
    """Python control flow on a tensor's value: fx cannot trace this module's code."""

    def __init__(self, dim=16):
        super().__init__()
        self.a, self.b = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.a(x) if x.sum() > 0 else self.b(x)


class WithBranchy(torch.nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.pre = torch.nn.Linear(dim, dim)
        self.branchy = Branchy(dim)
        self.post = torch.nn.Linear(dim, dim)

    def forward(self, x):
        return self.post(torch.relu(self.branchy(torch.relu(self.pre(x)))))


class ShapeBranch(torch.nn.Module):
    """Python control flow on shapes (a branch on the batch size, a star-unpacked shape), as
    transformers' mask functions have: traced along the sample's branch."""

    def __init__(self, dim=16):
        super().__init__()
        self.a, self.b = torch.nn.Linear(dim, dim), torch.nn.Linear(dim, dim)

    def forward(self, x):
        h = self.a(x)
        if h.shape[0] > 2:
            h = h * 2
        h = torch.tanh(h).reshape(*h.shape[:-1], 2, -1).flatten(-2)
        return self.b(h)


class Tracing(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(3)

    def test_skip_connections_and_in_place_relus(self):
        m = check_budgets(self, Residual(), [torch.randn(8, 32, requires_grad=True)])
        s = m.split
        # Cut points: after the first ReLU's input, each sum, each ReLU, and the output; those
        # before an in-place ReLU are not used (the ReLU stays with its producer).
        self.assertEqual(s.cut_points, 11)
        self.assertEqual(len(s.blocks), 6)
        self.assertEqual([why for _, why in s.dropped_cuts],
                         ["the next op writes into its output in place"] * 5)
        self.assertEqual(s.block_nodes[1][-1], "relu_1")  # x + f(x), then its ReLU

    def test_a_sequential_with_in_place_relus_fuses_them_with_their_producer(self):
        seq = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(inplace=True),
                                  torch.nn.Linear(16, 16), torch.nn.ReLU(inplace=True),
                                  torch.nn.Flatten(), torch.nn.Linear(16, 4))
        x = torch.randn(4, 16, requires_grad=True)
        m = rt.Checkpointed(seq, x, budget="1GB", runs=1)
        self.assertEqual(m.fused, [1, 3, 4])  # two in-place ReLUs and a flatten (a view)
        self.assertEqual(len(m.stages), 3)
        self.assertIsNone(m.split)
        for budget in (remat.solve(m.chain, 0).min_feasible_budget, 1 << 30):
            step_and_compare(self, m, seq, (x,), LOSS.__func__, budget)

    def test_tied_parameters(self):
        model = Tied()
        m = check_budgets(self, model, [torch.randn(4, 16, requires_grad=True)])
        uses = [b for b in m.split.block_nodes if any(n.startswith("shared") for n in b)]
        self.assertGreaterEqual(len(m.split.blocks), 3)
        self.assertEqual(len(uses), 2, m.split.block_nodes)  # two blocks read the weight
        self.assertEqual(len(list(m.parameters())), len(list(model.parameters())))

    def test_dict_output_other_inputs_and_meta_values(self):
        model = DictOut()
        x, mask = torch.randn(4, 16, requires_grad=True), torch.rand(4, 16) > 0.5

        def loss(out):
            self.assertIsInstance(out, dict)
            self.assertIsNone(out["n"])
            return out["logits"].pow(2).mean()

        m = check_budgets(self, model, [x, mask], loss=loss)
        self.assertGreaterEqual(len(m.split.blocks), 4)
        self.assertEqual(m.split.extra_inputs[0][0], "mask")
        out = m(x, mask)
        self.assertEqual(sorted(out), ["logits", "n"])
        out["logits"].sum().backward()
        with self.assertRaisesRegex(rt.ModelError, "argument 'scale' is 2.0; the model was "
                                                   "traced with 1.0"):
            m(x, mask, scale=2.0)
        with self.assertRaisesRegex(rt.ModelError, "input 'mask' requires grad"):
            m(x, mask.float().requires_grad_())
        # Eval mode runs the model itself.
        m.eval()
        self.assertTrue(torch.equal(m(x, mask)["logits"], model(x, mask)["logits"]))

    def test_a_dataclass_output_held_by_the_caller(self):
        model, x = DataclassOut(), torch.randn(8, 16, requires_grad=True)
        loss = lambda out: out.logits.pow(2).mean()  # noqa: E731
        m = check_budgets(self, model, [x], loss=loss, expect_recompute=False)
        # The caller keeps the output through its backward: the schedule's tape that held it is
        # freed, its bytes are not, and are counted beside the schedule.
        m.budget = "100%"
        gc.collect()
        y = m(x)
        self.assertIsInstance(y, Prediction)
        self.assertEqual(y.classes, 4)
        loss(y).backward()
        self.assertTrue(m.as_predicted, f"{m.op_peaks} != {m.expected_op_peaks}")
        self.assertTrue(m.within_budget)

    def test_a_submodule_that_cannot_be_traced_is_kept_whole(self):
        model = WithBranchy()
        m = check_budgets(self, model, [torch.randn(4, 16, requires_grad=True)])
        self.assertEqual(m.split.leaves, ["branchy"])
        self.assertIn("branchy", [n for b in m.split.block_nodes for n in b])

    def test_branches_on_shapes_follow_the_sample_with_a_guard(self):
        model = ShapeBranch()
        x = torch.randn(4, 16, requires_grad=True)
        m = check_budgets(self, model, [x])
        self.assertEqual(m.split.leaves, [])
        # Another batch size that takes the same branch runs (profiled at its shape) ...
        y = torch.randn(3, 16)
        self.assertTrue(torch.equal(m(y), model(y)))
        # ... one that takes the other is refused, naming the line that branched.
        with self.assertRaisesRegex(rt.ModelError, r"test_any_model.py:\d+ the model was traced "
                                                   r"with this condition True"):
            m(torch.randn(2, 16))

    def test_a_model_that_cannot_be_traced_is_an_error_naming_it(self):
        with self.assertRaises(rt.ModelError) as e:
            rt.Checkpointed(Branchy(), torch.randn(4, 16), budget="1GB")
        msg = str(e.exception)
        self.assertIn("the model: torch.fx cannot trace Branchy", msg)
        self.assertIn("test_any_model.py", msg)  # the line of the model's code
        self.assertIn("return self.a(x) if x.sum() > 0 else self.b(x)", msg)
        self.assertIn("pass its stages by hand", msg)
        self.assertIsNone(e.exception.stage_index)

    def test_refusals_by_name(self):
        class TwoOutputs(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = torch.nn.Linear(4, 4)

            def forward(self, x):
                h = self.a(x)
                return h, h.relu()

        with self.assertRaisesRegex(rt.ModelError, r"returns 2 values computed from its input "
                                                   r"and 0 others \(a, relu\)"):
            rt.Checkpointed(TwoOutputs(), torch.randn(2, 4), budget="1GB")
        with self.assertRaisesRegex(rt.ModelError, "input 'y' requires grad"):
            class Two(torch.nn.Module):
                def forward(self, x, y):
                    return x * y
            rt.Checkpointed(Two(), (torch.randn(2), torch.randn(2, requires_grad=True)), "1GB")

    def test_few_cut_points_are_said(self):
        class LongSkip(torch.nn.Module):  # the input is read at the end: no cut in between
            def __init__(self):
                super().__init__()
                self.f = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])

            def forward(self, x):
                return self.f(x) + x

        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            m = rt.Checkpointed(LongSkip(), torch.randn(4, 16), budget="1GB", runs=1)
        self.assertEqual(len(m.split.blocks), 1)
        msgs = [str(x.message) for x in w if issubclass(x.category, rt.FewCutsWarning)]
        self.assertEqual(len(msgs), 1)
        self.assertIn("block 0 of 1", msgs[0])
        # 5 values of 256 bytes of 6 (the input is the sixth)
        self.assertIn("83% of the model's activation bytes", msgs[0])

    def test_budgets_as_bytes_sizes_and_shares(self):
        model = Residual()
        x = torch.randn(8, 32, requires_grad=True)
        m = rt.Checkpointed(model, x, budget="50%", runs=1)
        store_all = remat.solve(m.chain, 1 << 62, solver="store-all").peak_memory
        self.assertEqual(m.budget_bytes, store_all // 2)
        m.budget = "100%"
        self.assertEqual(m.budget_bytes, store_all)
        m.budget = "8GB"
        self.assertEqual(m.budget_bytes, 8 * 10**9)
        m.budget = "512MiB"
        self.assertEqual(m.schedule.budget, 512 << 20)
        # Relative to the least budget: what fits on any machine, whatever its sizes.
        least = remat.solve(m.chain, 0).min_feasible_budget
        self.assertLess(least, store_all)
        m.budget = "least"
        self.assertEqual(m.budget_bytes, least)
        m.budget = "least+50%"
        self.assertEqual(m.budget_bytes, least + (store_all - least) // 2)
        m.budget = " Least + 100% "
        self.assertEqual(m.budget_bytes, store_all)
        m.budget = "least+0%"
        LOSS.__func__(m(x)).backward()
        self.assertTrue(m.within_budget and m.as_predicted)
        self.assertEqual(m.schedule.budget, least)
        with self.assertRaises(rt.BudgetError) as e:
            m.budget = least - 1
            m(x)
        self.assertIn(f"the least is {least} bytes", str(e.exception))
        self.assertIn("budget='least+N%'", str(e.exception))
        for bad, error in (("12XB", ValueError), ("-3%", ValueError), (1.5, TypeError),
                           ("least+101%", ValueError), ("least+x%", ValueError),
                           ("least-5%", ValueError)):
            m.budget = bad
            with self.assertRaises(error):
                m.budget_bytes
        m.budget = store_all
        LOSS.__func__(m(x)).backward()
        text = m.report(file=open(os.devnull, "w"))
        self.assertIn("Residual: traced with torch.fx, ", text)
        self.assertIn("as predicted, within the budget", text)
        self.assertIn(f"predicted peak {m.expected_peak} bytes", text)
        self.assertIn("the budget bounds the schedule", text)
        # With the loss given, the budget bounds the whole step: the schedule gets it less what
        # the loss's side holds beside it, and the figures are in the budget's terms.
        w = rt.Checkpointed(model, x, budget="least", runs=1, loss=LOSS.__func__)
        reserve = w.loss_reserve
        self.assertGreater(reserve, 0)
        least = remat.solve(w.chain, 0).min_feasible_budget
        store_all = remat.solve(w.chain, 1 << 62, solver="store-all").peak_memory
        self.assertEqual((w.least_budget, w.store_all_peak), (least + reserve, store_all + reserve))
        self.assertEqual((w.budget_bytes, w.schedule.budget), (least + reserve, least))
        w.budget = "100%"
        self.assertEqual(w.budget_bytes, store_all + reserve)
        for budget in ("least", "least+50%", "100%"):
            w.budget = budget
            measured = whole_step_peak(lambda: LOSS.__func__(w(x)).backward(), x)
            self.assertLessEqual(measured, w.budget_bytes)
            self.assertTrue(w.within_budget and w.as_predicted)
        text = w.report(file=open(os.devnull, "w"))
        self.assertIn(f"the budget bounds the whole step: {reserve} bytes kept", text)


# --- options inside blocks ------------------------------------------------------------------------

class WideMLP(torch.nn.Module):
    """Residual MLPs much wider than their input: plain autograd keeps each hidden layer twice
    (what `up` gives, which GELU's backward reads, and GELU's output, which `down` reads);
    selective checkpointing keeps what `up` gives and recomputes GELU's output in the backward."""

    def __init__(self, dim=16, hidden=512, blocks=2):
        super().__init__()
        self.inp = torch.nn.Linear(dim, dim)
        self.ups = torch.nn.ModuleList(torch.nn.Linear(dim, hidden) for _ in range(blocks))
        self.downs = torch.nn.ModuleList(torch.nn.Linear(hidden, dim) for _ in range(blocks))
        self.drop = torch.nn.Dropout(0.1)
        self.out = torch.nn.Linear(dim, 4)

    def forward(self, x):
        x = torch.tanh(self.inp(x))
        for up, down in zip(self.ups, self.downs):
            x = x + self.drop(down(torch.nn.functional.gelu(up(x))))
        return self.out(torch.relu_(x))


class NoTwin(torch.nn.Module):
    """An in-place op with no out-of-place twin (fill_diagonal_) in the middle block."""

    def __init__(self, dim=16):
        super().__init__()
        self.a, self.b, self.c = (torch.nn.Linear(dim, dim) for _ in range(3))

    def forward(self, x):
        h = torch.tanh(self.a(x))
        h = torch.sin(self.b(h)) * 1.0
        h.fill_diagonal_(0.0)
        return self.c(torch.tanh(h))


SELECTIVE = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 4)


class BlockOptions(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(5)

    @unittest.skipUnless(SELECTIVE, "selective checkpointing needs torch 2.4 or later")
    def test_schedules_that_record_with_options_keep_autograds_results(self):
        model, x = WideMLP(), torch.randn(8, 16, requires_grad=True)
        plain = rt.Checkpointed(model, x, budget="100%", runs=1, block_options=False)
        self.assertEqual([st.options for st in plain.chain.stages], [[]] * len(plain.chain))
        m = check_budgets(self, model, [x], expect_recompute=False)  # as measured
        self.assertEqual(m.option_refusals, [])
        # A hidden layer is 8 x 512 floats (16 KiB); the option's tape also holds the generator's
        # state that torch.utils.checkpoint saves (about 5 KB on the CPU).
        wide = [k for k, st in enumerate(m.chain.stages)
                if st.options and st.options[1].tape_size < st.options[0].tape_size - 8192]
        self.assertEqual(len(wide), 2, "each MLP's option should keep one hidden layer less")
        favour_options(m)
        least, store_all = m.least_budget, m.store_all_peak
        used = set()
        for budget in range(least, store_all + 1, max(1, (store_all - least) // 6)):
            with self.subTest(budget=budget):
                step_and_compare(self, m, model, [x], LOSS.__func__, budget)
                used |= {o.index for o in m.schedule.ops if o.kind == "F_all" and o.option == 1}
        self.assertTrue(used & set(wide), "no schedule recorded an MLP's option")
        self.assertIn("options inside blocks (selective checkpointing): ",
                      m.report(file=open(os.devnull, "w")))

    @unittest.skipUnless(SELECTIVE, "selective checkpointing needs torch 2.4 or later")
    def test_a_block_whose_in_place_op_has_no_twin_gets_no_option(self):
        m = check_budgets(self, NoTwin(), [torch.randn(16, 16, requires_grad=True)],
                          expect_recompute=False)
        self.assertEqual(len(m.option_refusals), 1)
        k, option, why = m.option_refusals[0]
        self.assertEqual(m.chain.stages[k].options, [])
        self.assertIn("fill_diagonal_", why)

    def test_an_alternative_that_differs_is_not_offered(self):
        stage = torch.nn.Linear(8, 8)
        same = lambda x: stage(x) * 1.0  # noqa: E731
        off = lambda x: stage(x) + 1e-7  # noqa: E731
        x = torch.randn(4, 8)
        kept, refused = rt._check_alternatives([stage], [[off, same]], x, rt._Rng(x.device),
                                               [[]])
        self.assertEqual(kept, [[same]])
        self.assertEqual(refused, [(0, 1, "its output differs from the block's")])
        self.assertIsNone(stage.weight.grad)

    @unittest.skipIf(SELECTIVE, "this torch has selective checkpointing")
    def test_without_selective_checkpointing_every_block_has_one_option(self):
        m = rt.Checkpointed(WideMLP(), torch.randn(8, 16, requires_grad=True), budget="100%",
                            runs=1)
        self.assertEqual([st.options for st in m.chain.stages], [[]] * len(m.chain))
        self.assertIn("one option per block: this torch has no selective checkpointing",
                      m.report(file=open(os.devnull, "w")))


# --- torchvision's models as they come -----------------------------------------------------------

DEFAULT = ["resnet50", "densenet121", "mobilenet_v3_large", "efficientnet_b0"]
SLOWER = ["convnext_tiny", "swin_t", "vit_b_16"]
MODELS = DEFAULT + (SLOWER if os.environ.get("REMAT_TEST_MODELS") == "all" else [])
# The cut points remat.linearize finds in each (2x3x32x32; the same on torch 1.13 and 2.x).
CUT_POINTS = {"resnet50": 39, "densenet121": 25, "mobilenet_v3_large": 65,
              "efficientnet_b0": 79, "convnext_tiny": 40, "swin_t": 41, "vit_b_16": 33}


class Torchvision(unittest.TestCase):
    pass


def _model_test(name):
    def test(self):
        torch.manual_seed(0)
        extra = {"image_size": 32} if name == "vit_b_16" else {}
        model = getattr(torchvision.models, name)(num_classes=10, **extra)
        x = torch.randn(2, 3, 32, 32, requires_grad=True)
        target = torch.randint(10, (2,))
        m = check_budgets(self, model, [x],
                          loss=lambda y: torch.nn.functional.cross_entropy(y, target))
        self.assertEqual(m.split.cut_points, CUT_POINTS[name])
        self.assertEqual(m.split.leaves, [])
    return test


for _name in MODELS:
    setattr(Torchvision, f"test_{_name}", _model_test(_name))


if __name__ == "__main__":
    unittest.main()
