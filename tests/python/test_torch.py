"""remat.torch.Checkpointed against plain autograd, on torchvision's ResNet-18 and MobileNetV2
(random weights, cut into stages) and a GPT-style model with dropout: at budgets from the least
feasible to store-all, one step gives parameter gradients, the input's gradient and batch norm's
statistics bitwise equal to plain autograd's, and every op allocates what the profile predicts
(remat::torch's CPU meter), so the measured peak is the expected one, within the budget."""

import copy
import os
import unittest

# cuBLAS reads this before its first handle: deterministic matrix products on a GPU.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch
import torchvision

import remat
import remat.torch as rt
from checks import whole_step_peak


def resnet18_stages():
    net = torchvision.models.resnet18(num_classes=10)
    stem = torch.nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
    blocks = [b for layer in (net.layer1, net.layer2, net.layer3, net.layer4) for b in layer]
    head = torch.nn.Sequential(net.avgpool, torch.nn.Flatten(), net.fc)
    return [stem, *blocks, head]


def mobilenet_v2_stages():
    net = torchvision.models.mobilenet_v2(num_classes=10)  # its classifier has dropout
    head = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), net.classifier)
    return [*net.features, head]


class Embed(torch.nn.Module):
    def __init__(self, vocab, seq, dim):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, ids):
        return self.drop(self.tok(ids) + self.pos[: ids.shape[1]])


class Block(torch.nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(dim)
        self.attn = torch.nn.MultiheadAttention(dim, heads, dropout=0.1, batch_first=True)
        self.ln2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim), torch.nn.Dropout(0.1))

    def forward(self, x):
        h = self.ln1(x)
        mask = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device), 1)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


def gpt_stages(vocab=50, seq=16, dim=32, heads=4, layers=3):
    head = torch.nn.Sequential(torch.nn.LayerNorm(dim), torch.nn.Linear(dim, vocab))
    return [Embed(vocab, seq, dim), *[Block(dim, heads) for _ in range(layers)], head]


class Checkpointed(unittest.TestCase):
    def check_budgets(self, stages, x, loss, schedule_budgets=None, run_plainly=True):
        """One step at the least, a middle and the store-all budget (or at each of
        `schedule_budgets` given to the schedule, the loss's reserve added) against plain
        autograd; then a second step, with the parameters' gradients defined, measured whole."""
        m = rt.Checkpointed(stages, x, budget=1 << 40, loss=loss, runs=1,
                            run_plainly=run_plainly)
        chain = m.chain
        least, store_all = m.least_budget, m.store_all_peak
        self.assertEqual(least, remat.solve(chain, 0).min_feasible_budget + m.loss_reserve)
        self.assertGreater(m.loss_reserve, 0)
        budgets = ([b + m.loss_reserve for b in schedule_budgets] if schedule_budgets
                   else [least, (least + store_all) // 2, store_all])
        recomputed = 0
        for budget in budgets:
            with self.subTest(budget=budget):
                m.budget = budget
                ref = torch.nn.Sequential(*copy.deepcopy(list(m.stages)))
                for p in list(m.parameters()) + list(ref.parameters()):
                    p.grad = None
                if x.requires_grad:
                    x.grad = None
                rng = torch.get_rng_state()
                cuda_rng = torch.cuda.get_rng_state(x.device) if x.is_cuda else None
                loss(m(x)).backward()
                got_x = x.grad
                if x.requires_grad:
                    x.grad = None
                torch.set_rng_state(rng)
                if x.is_cuda:
                    torch.cuda.set_rng_state(cuda_rng, x.device)
                loss(ref(x)).backward()
                for (name, p), q in zip(m.stages.named_parameters(), ref.parameters()):
                    self.assertTrue(torch.equal(p.grad, q.grad), f"gradient of {name}")
                for (name, b), c in zip(m.stages.named_buffers(), ref.buffers()):
                    self.assertTrue(torch.equal(b, c), f"buffer {name}")
                if x.requires_grad:
                    self.assertTrue(torch.equal(got_x, x.grad), "input gradient")
                self.assertEqual(m.op_peaks, m.expected_op_peaks)
                self.assertTrue(m.as_predicted)
                self.assertEqual(m.measured_peak, m.expected_peak)
                plainly = run_plainly and budget >= m.plain_peak  # it holds plain autograd's
                if not plainly:
                    self.assertLessEqual(m.measured_peak, budget - m.loss_reserve)
                self.assertTrue(m.within_budget)
                # Beside the schedule: the loss's scalar and its gradient, and the output's
                # gradient (autograd's, until the backward returns): nothing of remat's, and no
                # more than the profile kept for it.
                out = torch.Size(chain_output_shape(m))
                if x.is_cuda:  # in the caching allocator's 512-byte blocks
                    self.assertLessEqual(m.outside_schedule, (out.numel() * 4 + 511) // 512 * 512
                                         + 2 * 512)
                else:
                    self.assertLessEqual(m.outside_schedule, out.numel() * 4 + 64)
                self.assertLessEqual(m.outside_schedule, m.loss_reserve)
                self.assertLessEqual(m.step_peak, budget)
                recomputed += len(m.schedule.ops) - (2 * len(chain) + 1)
                # The budget bounds the whole step as the allocator measures it, and the step
                # never peaks above plain autograd's, whose peak the profile measured.
                measured = whole_step_peak(lambda: loss(m(x)).backward(), x)
                self.assertLessEqual(measured, budget)
                self.assertEqual(measured, m.total_peak)
                self.assertTrue(m.within_budget and m.as_predicted)
                plain = whole_step_peak(lambda: loss(ref(x)).backward(), x)
                self.assertEqual(plain, m.plain_peak)
                if run_plainly:
                    self.assertLessEqual(measured, plain)
                if plainly:
                    self.assertEqual(measured, plain)
        self.assertGreater(recomputed, 0, "no budget made the schedule recompute")
        if schedule_budgets is None:  # store-all's budget holds plain autograd's step
            self.assertGreaterEqual(m.store_all_peak, m.plain_peak)
        return m

    def test_resnet18(self):
        torch.manual_seed(1)
        target = torch.randint(10, (2,))
        x = torch.randn(2, 3, 32, 32, requires_grad=True)
        self.check_budgets(resnet18_stages(), x,
                           lambda y: torch.nn.functional.cross_entropy(y, target))

    def test_mobilenet_v2_with_dropout(self):
        torch.manual_seed(2)
        target = torch.randint(10, (2,))
        x = torch.randn(2, 3, 32, 32, requires_grad=True)
        self.check_budgets(mobilenet_v2_stages(), x,
                           lambda y: torch.nn.functional.cross_entropy(y, target))

    def test_gpt_with_dropout_and_a_new_shape(self):
        torch.manual_seed(3)
        stages = gpt_stages()
        ids = torch.randint(50, (2, 16))
        target = torch.randint(50, (2, 16))
        loss = lambda y: torch.nn.functional.cross_entropy(y.flatten(0, 1),
                                                           target[:, : y.shape[1]].flatten())
        m = self.check_budgets(stages, ids, loss)
        # Another sequence length is profiled again, and its own schedule runs.
        short = ids[:, :8].contiguous()
        m.budget = "least"
        loss(m(short)).backward()
        self.assertEqual(m.chain.input_size, short.numel() * 8)
        self.assertTrue(m.as_predicted)

    def test_loss_after_a_forward_that_does_not_record(self):
        # Where the loss is cheaper to run with less held (its transients pass the last
        # stage's tape), the schedule runs the last stage without recording before it:
        # F_none(L-1) or F_ck(L-1), then the loss, which reads a_L, and F_all(L-1) after. The
        # model frees a_L when the loss ends; cross entropy keeps its softmax, not its input,
        # so a_L must be held by the schedule through the loss, whoever else drops it.
        torch.manual_seed(6)
        x = torch.randn(64, 16, requires_grad=True)
        target = torch.randint(256, (64,))
        loss = lambda y: torch.nn.functional.cross_entropy(y, target)
        stages = [torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()) for _ in range(3)]
        stages.append(torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.GELU()))
        chain = rt.profile(stages, x, loss, runs=1).chain
        L = len(stages)
        found = {}
        for budget, _ in remat.trade_off(chain):
            ops = remat.solve(chain, budget).ops
            before = ops[[o.kind for o in ops].index("loss") - 1]
            if before.index == L - 1 and before.kind in ("F_none", "F_ck"):
                found.setdefault(before.kind, budget)
        self.assertEqual(sorted(found), ["F_ck", "F_none"])
        # Those budgets hold plain autograd's step: the schedules run as asked.
        self.check_budgets(stages, x, loss, schedule_budgets=sorted(found.values()),
                           run_plainly=False)

    def test_two_forwards_then_one_backward_and_accumulated_micro_batches(self):
        # Loops that hold two steps at once (the backward of a sum of two losses) or accumulate
        # gradients over micro-batches: plain autograd's gradients, bit for bit, whether the
        # budget runs a schedule or holds plain autograd's step.
        torch.manual_seed(8)
        stages = [torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh()) for _ in range(6)]
        xs = [torch.randn(8, 32), torch.randn(8, 32)]
        loss = lambda y: y.pow(2).mean()  # noqa: E731
        ref = torch.nn.Sequential(*copy.deepcopy(stages))
        m = rt.Checkpointed(stages, xs[0], budget="least", loss=loss, runs=1)
        for budget in ("least", "least+50%", "100%"):
            for loop in ("sum", "accumulate"):
                with self.subTest(budget=budget, loop=loop):
                    m.budget = budget
                    for p in list(m.parameters()) + list(ref.parameters()):
                        p.grad = None
                    for model in (m, ref):
                        if loop == "sum":
                            (loss(model(xs[0])) + loss(model(xs[1]))).backward()
                        else:
                            for x in xs:
                                loss(model(x)).backward()
                    for p, q in zip(m.parameters(), ref.parameters()):
                        self.assertTrue(torch.equal(p.grad, q.grad))
                    if loop == "accumulate":
                        self.assertTrue(m.as_predicted and m.within_budget)

    @unittest.skipUnless(torch.cuda.is_available(), "no GPU")
    def test_gpt_with_dropout_on_a_gpu(self):
        # The CUDA meter (sizes in the allocator's 512-byte blocks) and the CUDA generator put
        # back for a recomputation; bitwise equality needs deterministic kernels.
        torch.use_deterministic_algorithms(True)
        try:
            torch.manual_seed(3)
            gpu = torch.device("cuda", 0)
            stages = [s.to(gpu) for s in gpt_stages()]
            ids = torch.randint(50, (2, 16), device=gpu)
            target = torch.randint(50, (2, 16), device=gpu)
            loss = lambda y: torch.nn.functional.cross_entropy(y.flatten(0, 1), target.flatten())
            m = self.check_budgets(stages, ids, loss)
            self.assertEqual(m.chain.input_size % 512, 0)
        finally:
            torch.use_deterministic_algorithms(False)

    def test_plan_is_a_deprecated_alias_of_schedule(self):
        torch.manual_seed(7)
        x = torch.randn(8, 16)
        stages = [torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Tanh()) for _ in range(3)]
        m = rt.Checkpointed(stages, x, budget="least+50%")
        m(x).sum().backward()
        self.assertTrue(m.schedule.feasible)
        with self.assertWarns(DeprecationWarning):
            plan = m.plan
        self.assertIs(plan, m.schedule)

    def test_errors(self):
        torch.manual_seed(4)
        x = torch.randn(4, 8)
        net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        m = rt.Checkpointed(net, x, budget=1, runs=1)
        with self.assertRaises(rt.BudgetError) as e:
            m(x)
        self.assertEqual(e.exception.min_feasible_budget,
                         remat.solve(m.chain, 0).min_feasible_budget)
        self.assertEqual(m.loss_reserve, 0)  # no loss given: the budget bounds the schedule
        with_loss = rt.Checkpointed(net, x, budget=1, runs=1, loss=lambda y: y.pow(2).sum())
        with self.assertRaisesRegex(rt.BudgetError, "kept for the loss's side") as e:
            with_loss(x)
        self.assertGreater(with_loss.loss_reserve, 0)
        self.assertEqual(e.exception.min_feasible_budget, with_loss.least_budget)
        # A stage that returns its input (or a view of it) runs with the stage before it; as
        # the first stage, it is an error.
        fused = rt.Checkpointed([torch.nn.Linear(8, 8), torch.nn.Identity()], x, budget=1 << 30)
        self.assertEqual((fused.fused, len(fused.stages)), ([1], 1))
        with self.assertRaisesRegex(rt.ModelError, "stage 0: returns the model's input or a view"):
            rt.Checkpointed([torch.nn.Identity(), torch.nn.Linear(8, 8)], x, budget=1 << 30)
        with self.assertRaisesRegex(TypeError, "not an nn.Module"):
            rt.Checkpointed([torch.nn.Linear(8, 8), torch.relu], x, budget=1 << 30)
        with self.assertRaisesRegex(rt.ModelError, "the loss: must return a scalar"):
            rt.Checkpointed(net, x, budget=1 << 30, loss=lambda y: y)
        with torch.no_grad():  # outside training the stages just run
            self.assertTrue(torch.equal(m(x), net(x)))
        m.budget = 1 << 30
        l = m(x).sum()
        l.backward(retain_graph=True)
        with self.assertRaisesRegex(RuntimeError, "already run its backward"):
            l.backward()


def chain_output_shape(m):
    return m._shapes[m._last_key].profile.outputs[-1][0]


if __name__ == "__main__":
    unittest.main()
