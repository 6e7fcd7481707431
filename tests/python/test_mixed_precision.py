"""remat.torch.Checkpointed under torch.autocast (docs/python.md, "Mixed precision"): a step under
CPU bfloat16 autocast gives the gradients, input gradient and buffers that the model run plainly
under the same autocast gives, bit for bit, at the least, a middle and the store-all budget, every
op allocating what the profile (taken under that autocast state) predicts; the profile is keyed
on the autocast state as on the input's shape; recomputations run under the state of the forward
they repeat, wherever the caller runs the backward. Also what is refused, and how it is said:
an output whose dtype differs from the profiled one, a backward with create_graph=True, a
backward of some tensors only (torch.autograd.grad). CPU float16 with a GradScaler where this
torch has them (2.3 and later), and on a GPU float16 with a GradScaler: the same comparisons."""

import copy
import gc
import os
import unittest
import warnings

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch

import remat
import remat.torch as rt
from checks import favour_options, whole_step_peak


def _cpu_bf16_autocast_works():
    """Why CPU bfloat16 autocast cannot run the models here (None: it can). A layer of the
    tests' size, forward and backward: whether it runs depends on the CPU path oneDNN takes
    (torch 1.13's oneDNN has bfloat16 matrix products only with AVX-512, so it fails under
    ONEDNN_MAX_CPU_ISA=AVX2 or on a CPU without AVX-512)."""
    try:
        x = torch.randn(32, 64, requires_grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.nn.Linear(64, 256)(x)
        y.float().sum().backward()
    except Exception as e:  # noqa: BLE001 - the reason goes into the skip
        return (f"CPU bfloat16 autocast fails in torch {torch.__version__} on this CPU path "
                f"(ONEDNN_MAX_CPU_ISA={os.environ.get('ONEDNN_MAX_CPU_ISA', 'unset')}): {e}")
    if y.dtype != torch.bfloat16:
        return f"CPU autocast in torch {torch.__version__} does not cast a Linear to bfloat16"
    return None


CPU_BF16_MISSING = _cpu_bf16_autocast_works()


def _cpu_fp16_scaling_works():
    """Why CPU float16 autocast with a CPU GradScaler cannot run here (None: it can)."""
    if not hasattr(torch.amp, "GradScaler"):
        return f"torch {torch.__version__} has no torch.amp.GradScaler (torch 2.3 and later)"
    try:
        torch.amp.GradScaler("cpu")
        with torch.autocast("cpu", dtype=torch.float16):
            y = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    except Exception as e:  # noqa: BLE001 - the reason goes into the skip
        return f"CPU float16 autocast or GradScaler fails in torch {torch.__version__}: {e}"
    if y.dtype != torch.float16:
        return f"CPU autocast in torch {torch.__version__} does not cast a Linear to float16"
    return None


CPU_FP16_SCALING_MISSING = _cpu_fp16_scaling_works()


def mlp_stages(dim=64, hidden=256, depth=4):
    """Linear layers (autocast casts them to the low precision), GELUs (kept in it) and a
    dropout (a recomputation must draw its masks again), then a head."""
    stages = [torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.GELU(),
                                  torch.nn.Dropout(0.1), torch.nn.Linear(hidden, dim),
                                  torch.nn.Tanh())
              for _ in range(depth)]
    stages.append(torch.nn.Linear(dim, 10))
    return stages


class Skips(torch.nn.Module):
    """A traced model: skip connections, an in-place ReLU after each sum."""

    def __init__(self, dim=48, blocks=4):
        super().__init__()
        self.inp = torch.nn.Linear(dim, dim)
        self.fs = torch.nn.ModuleList(torch.nn.Sequential(
            torch.nn.Linear(dim, 4 * dim), torch.nn.ReLU(), torch.nn.Linear(4 * dim, dim))
            for _ in range(blocks))
        self.relu = torch.nn.ReLU(inplace=True)
        self.out = torch.nn.Linear(dim, 4)

    def forward(self, x):
        x = self.relu(self.inp(x))
        for f in self.fs:
            x = self.relu(x + f(x))
        return self.out(x)


class Wide(torch.nn.Module):
    """Residual MLPs much wider than their input, with dropout: selective checkpointing (a
    traced block's option 1, torch 2.4 and later) keeps a hidden layer less than plain autograd."""

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


SELECTIVE = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 4)


def cross_entropy_to(target):
    return lambda y: torch.nn.functional.cross_entropy(y.float(), target)


class Step:
    """One training step as the caller writes it: the forward (and, where `backward_inside`, the
    backward) under `autocast`; with a GradScaler `scaler`, the loss scaled."""

    def __init__(self, autocast, backward_inside=True, scaler=None):
        self.autocast, self.backward_inside, self.scaler = autocast, backward_inside, scaler

    def __call__(self, model, x, loss):
        with self.autocast():
            l = loss(model(x))
            if self.scaler is not None:
                l = self.scaler.scale(l)
            if self.backward_inside:
                l.backward()
        if not self.backward_inside:
            l.backward()


def step_and_compare(test, m, model, x, loss, budget, step):
    """One step of m at `budget` and one of the model run plainly, from the same generators,
    both as `step` runs them: gradients, input gradient and buffers equal bit for bit, every op
    as predicted and within the budget. The recomputations of the schedule."""
    m.budget = budget
    ref = copy.deepcopy(model)
    for p in list(model.parameters()) + list(ref.parameters()):
        p.grad = None
    if x.requires_grad:
        x.grad = None
    rng = torch.get_rng_state()
    cuda_rng = torch.cuda.get_rng_state(x.device) if x.is_cuda else None
    gc.collect()  # earlier steps' reference cycles, not freed in the middle of this one
    step(m, x, loss)
    got_x = x.grad
    if x.requires_grad:
        x.grad = None
    torch.set_rng_state(rng)
    if x.is_cuda:
        torch.cuda.set_rng_state(cuda_rng, x.device)
    step(ref, x, loss)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        test.assertIsNotNone(p.grad, f"gradient of {name}")
        test.assertTrue(torch.equal(p.grad, q.grad), f"gradient of {name}")
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
    if not x.is_cuda and m.user_loss is not None:
        # A second step, with the gradients defined (new ones are outside the budget), measured
        # whole by the CPU meter: within the budget.
        measured = whole_step_peak(lambda: step(m, x, loss), x)
        test.assertEqual(measured, m.total_peak)
        test.assertLessEqual(measured, m.budget_bytes)
        test.assertTrue(m.as_predicted)
    return recomputations


def check_budgets(test, m, model, x, loss, step):
    """step_and_compare at the least, a middle and the store-all budget of the chain profiled
    under the step's autocast state (the first step under it profiles it)."""
    m.budget = 1 << 40
    step(m, x, loss)  # profiles the chain under the state
    least, store_all = m.least_budget, m.store_all_peak  # with the loss's reserve
    recomputed = 0
    m.run_plainly = False  # schedules at every budget (a small model's may hold plain autograd's)
    for budget in (least, (least + store_all) // 2, store_all):
        with test.subTest(budget=budget):
            recomputed += step_and_compare(test, m, model, x, loss, budget, step)
    test.assertGreater(recomputed, 0, "no budget made the schedule recompute")
    m.run_plainly = True  # as a user gets it: plainly, where the loss is given
    with test.subTest(budget=store_all, plainly=True):
        step_and_compare(test, m, model, x, loss, store_all, step)
        if m.user_loss is not None:
            test.assertEqual(m.measured_peak, m.plain_peak)


def bf16():
    return torch.autocast("cpu", dtype=torch.bfloat16)


@unittest.skipIf(CPU_BF16_MISSING is not None, CPU_BF16_MISSING or "")
class CpuBfloat16(unittest.TestCase):
    def test_stages_bitwise_at_three_budgets(self):
        torch.manual_seed(11)
        stages = mlp_stages()
        model = torch.nn.Sequential(*stages)
        x = torch.randn(32, 64, requires_grad=True)
        loss = cross_entropy_to(torch.randint(10, (32,)))
        m = rt.Checkpointed(model, x, budget=1 << 40, loss=loss, runs=1)
        check_budgets(self, m, model, x, loss, Step(bf16))
        # The chain was profiled under autocast: the stages' outputs are bfloat16.
        self.assertEqual(m.chain.stages[-1].output_size, 32 * 10 * 2)

    def test_backward_outside_autocast_recomputes_under_the_forwards_state(self):
        # Only the forward under autocast (as torch's recipes write it): the recomputations in
        # the backward must cast as the forward did.
        torch.manual_seed(12)
        stages = mlp_stages()
        model = torch.nn.Sequential(*stages)
        x = torch.randn(32, 64, requires_grad=True)
        loss = cross_entropy_to(torch.randint(10, (32,)))
        m = rt.Checkpointed(model, x, budget=1 << 40, loss=loss, runs=1)
        check_budgets(self, m, model, x, loss, Step(bf16, backward_inside=False))

    def test_traced_model_bitwise_at_three_budgets(self):
        torch.manual_seed(13)
        model = Skips()
        x = torch.randn(24, 48, requires_grad=True)
        loss = cross_entropy_to(torch.randint(4, (24,)))
        m = rt.Checkpointed(model, (x,), budget=1 << 40, loss=loss, runs=1)
        check_budgets(self, m, model, x, loss, Step(bf16))

    @unittest.skipUnless(SELECTIVE, "block options (selective checkpointing) need torch 2.4 "
                                    "or later")
    def test_block_options_checked_and_run_under_autocast(self):
        # The options are checked against plain autograd under the autocast state when it first
        # comes, profiled under it, and the schedules that record with them stay bitwise.
        torch.manual_seed(18)
        model = Wide()
        x = torch.randn(8, 16, requires_grad=True)
        loss = cross_entropy_to(torch.randint(4, (8,)))
        m = rt.Checkpointed(model, (x,), budget=1 << 40, loss=loss, runs=1)
        step = Step(bf16)
        step(m, x, loss)
        self.assertEqual(m.option_refusals, [])
        self.assertEqual(len(m._alternatives_by_state), 2)  # float32 and bfloat16
        wide = [k for k, st in enumerate(m.chain.stages)
                if st.options and st.options[1].tape_size < st.options[0].tape_size - 4096]
        self.assertEqual(len(wide), 2, "each MLP's option should keep a hidden layer less")
        favour_options(m)
        least, store_all = m.least_budget, m.store_all_peak
        used = set()
        for budget in range(least, store_all + 1, max(1, (store_all - least) // 6)):
            with self.subTest(budget=budget):
                step_and_compare(self, m, model, x, loss, budget, step)
                used |= {o.index for o in m.schedule.ops if o.kind == "F_all" and o.option == 1}
        self.assertTrue(used & set(wide), "no schedule recorded an MLP's option")

    def test_constructed_under_autocast_it_leaves_the_cast_cache_alone(self):
        # Construction runs the stages without gradients (fusing, tracing): casts cached there
        # would have no graph, and the model run plainly in the same autocast region after it
        # would give its weights no gradient.
        for traced in (False, True):
            with self.subTest(traced=traced):
                torch.manual_seed(19)
                model = Skips() if traced else torch.nn.Sequential(*mlp_stages(depth=2))
                x = torch.randn(8, 48 if traced else 64)
                loss = cross_entropy_to(torch.randint(4, (8,)))
                with bf16():
                    m = rt.Checkpointed(model, (x,) if traced else x, budget=1 << 40,
                                        loss=loss, runs=1)
                    loss(model(x)).backward()
                self.assertEqual([n for n, p in model.named_parameters() if p.grad is None], [])
                with bf16():
                    loss(m(x)).backward()
                self.assertTrue(m.as_predicted)

    def test_the_profile_is_keyed_on_the_autocast_state(self):
        torch.manual_seed(14)
        model = torch.nn.Sequential(*mlp_stages(depth=2))
        x = torch.randn(8, 64)
        m = rt.Checkpointed(model, x, budget=1 << 40, runs=1)
        fp32 = m.chain
        with bf16():
            m(x).float().pow(2).mean().backward()
        self.assertTrue(m.as_predicted)
        mixed = m.chain
        self.assertEqual(len(m._shapes), 2)
        self.assertEqual(fp32.stages[0].output_size, 8 * 64 * 4)
        self.assertEqual(mixed.stages[0].output_size, 8 * 64 * 2)
        # remat.torch.profile under autocast measures what Checkpointed's profile measured.
        with bf16():
            alone = rt.profile(list(model), x, runs=1).chain
        sizes = lambda c: [(st.output_size, st.tape_size, st.forward_overhead,
                            st.backward_overhead) for st in c.stages] + [c.loss_overhead]
        self.assertEqual(sizes(alone), sizes(mixed))
        # Back to float32: the first profile again, not a third.
        m(x).pow(2).mean().backward()
        self.assertIs(m.chain, fp32)
        self.assertTrue(m.as_predicted)
        self.assertEqual(len(m._shapes), 2)
        # Autocast off inside an autocast region is the float32 state too.
        with bf16(), torch.autocast("cpu", enabled=False):
            m(x).pow(2).mean().backward()
        self.assertIs(m.chain, fp32)


@unittest.skipIf(CPU_FP16_SCALING_MISSING is not None, CPU_FP16_SCALING_MISSING or "")
class CpuFloat16WithGradScaler(unittest.TestCase):
    def test_stages_bitwise_at_three_budgets(self):
        # float16 with a GradScaler, as on a GPU: the scaled loss scales the gradient that
        # reaches the schedule, and nothing else changes.
        torch.manual_seed(21)
        model = torch.nn.Sequential(*mlp_stages())
        x = torch.randn(32, 64, requires_grad=True)
        loss = cross_entropy_to(torch.randint(10, (32,)))
        m = rt.Checkpointed(model, x, budget=1 << 40, loss=loss, runs=1)
        scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        check_budgets(self, m, model, x, loss,
                      Step(lambda: torch.autocast("cpu", dtype=torch.float16), scaler=scaler))
        self.assertEqual(m.chain.stages[-1].output_size, 32 * 10 * 2)


class Flip(torch.nn.Module):
    """A Linear whose output is cast to `dtype` when that is set: its dtype changes between the
    profile and a step."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)
        self.dtype = None

    def forward(self, x):
        y = self.linear(x)
        return y if self.dtype is None else y.to(self.dtype)


class Refusals(unittest.TestCase):
    def test_an_output_dtype_that_differs_is_named(self):
        torch.manual_seed(15)
        flip = Flip()
        m = rt.Checkpointed([torch.nn.Linear(8, 8), flip, torch.nn.Linear(8, 2)],
                            torch.randn(4, 8), budget=1 << 30, runs=1)
        flip.dtype = torch.float64
        with self.assertRaisesRegex(
                rt.ModelError, r"^stage 1: its output is \(4, 8\) float64, profiled as \(4, 8\) "
                               r"float32 \(under no autocast\); a stage must give the same "
                               r"shape and dtype"):
            m(torch.randn(4, 8))

    def test_an_option_whose_dtype_differs_is_refused_naming_it(self):
        # A block's option checked against it (a new autocast state checks them again): one
        # whose output has another dtype is refused, and why names both dtypes.
        stage = torch.nn.Linear(8, 8)
        low = lambda x: stage(x).to(torch.bfloat16)  # noqa: E731
        x = torch.randn(4, 8)
        kept, refused = rt._check_alternatives([stage], [[low]], x, rt._Rng(x.device), [[]])
        self.assertEqual(kept, [[]])
        self.assertEqual(refused, [(0, 1, "its output is (4, 8) bfloat16, the block's (4, 8) "
                                          "float32")])

    def test_create_graph_is_refused_saying_what_to_do(self):
        torch.manual_seed(16)
        net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        x = torch.randn(4, 8, requires_grad=True)
        loss = lambda y: y.pow(2).sum()
        m = rt.Checkpointed(net, x, budget=1 << 30, loss=loss, runs=1)
        for backward in (lambda l: l.backward(create_graph=True),
                         lambda l: torch.autograd.grad(l, x, create_graph=True)):
            with self.assertRaisesRegex(RuntimeError, r"create_graph=True.*not supported.*run "
                                                      r"plainly"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch's, on backward(create_graph=True)
                backward(loss(m(x)))
        # The refusal leaves the model as it was: a step after it is as predicted.
        for p in net.parameters():
            p.grad = None
        x.grad = None
        loss(m(x)).backward()
        self.assertTrue(m.as_predicted)

    def test_a_backward_of_some_tensors_only_is_refused_saying_what_to_do(self):
        # The schedule's backwards accumulate the parameters' gradients into .grad: a backward
        # that asks for some tensors' gradients only would get those as a side effect.
        torch.manual_seed(17)
        net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        x = torch.randn(4, 8, requires_grad=True)
        loss = lambda y: y.pow(2).sum()
        m = rt.Checkpointed(net, x, budget=1 << 30, loss=loss, runs=1)
        for backward in (lambda l: torch.autograd.grad(l, x),
                         lambda l: l.backward(inputs=[x])):
            with self.assertRaisesRegex(RuntimeError, r"torch.autograd.grad and backward\(inputs="
                                                      r"\.\.\.\).*not supported.*Call "
                                                      r"loss.backward\(\)"):
                backward(loss(m(x)))
        self.assertTrue(all(p.grad is None for p in net.parameters()))
        # A backward of every leaf, the input not requiring grad, is no such backward.
        x.requires_grad_(False)
        loss(m(x)).backward()
        self.assertTrue(all(p.grad is not None for p in net.parameters()))
        self.assertTrue(m.as_predicted)


@unittest.skipUnless(torch.cuda.is_available(), "no GPU")
class CudaFloat16WithGradScaler(unittest.TestCase):
    def test_stages_bitwise_at_three_budgets(self):
        torch.use_deterministic_algorithms(True)
        try:
            torch.manual_seed(17)
            gpu = torch.device("cuda", 0)
            model = torch.nn.Sequential(*mlp_stages()).to(gpu)
            x = torch.randn(32, 64, device=gpu, requires_grad=True)
            loss = cross_entropy_to(torch.randint(10, (32,), device=gpu))
            m = rt.Checkpointed(model, x, budget=1 << 40, loss=loss, runs=1)
            scaler = (torch.amp.GradScaler("cuda", init_scale=1024.0)
                      if hasattr(torch.amp, "GradScaler")
                      else torch.cuda.amp.GradScaler(init_scale=1024.0))
            check_budgets(self, m, model, x, loss,
                          Step(lambda: torch.autocast("cuda", dtype=torch.float16),
                               scaler=scaler))
            self.assertEqual(m.chain.stages[-1].output_size % 512, 0)
        finally:
            torch.use_deterministic_algorithms(False)


if __name__ == "__main__":
    unittest.main()
