"""remat.torch.Checkpointed on real models of transformers (GPT-2, Llama) and timm (ResNet-D,
ViT), random weights, cut into stages by hand (tests/python/pypi_models.py), dropout on: the
stages compute what the whole model computes, and at the least feasible budget, a middle one and
store-all's, one step gives plain autograd's gradients bit for bit with every op's measured
allocation as predicted (test_torch.py's check_budgets). The same for transformers' GPT-2 and
Llama passed whole, as they come (WholeModels: traced, cut at their cut points; the same
assertions as test_any_model.py's). And the stages under CPU bfloat16 autocast (MixedPrecision:
test_mixed_precision.py's assertions).

PyTorch 2.x tier only (python/requirements-torch.txt pins transformers and timm); where they are
not installed (Debian's torch 1.13), the test exits with status 77, which CTest reports as
skipped with the message printed here.
"""

import inspect
import os
import sys
import unittest

os.environ["HF_HUB_OFFLINE"] = "1"  # random weights from configs: nothing may be fetched

try:
    import timm  # noqa: F401
    import transformers  # noqa: F401
except ImportError as e:
    print(f"skipped: {e.name} is not installed for this Python (the PyTorch 2.x tier's "
          "python/requirements-torch.txt installs transformers and timm)")
    sys.exit(77)

import torch

import pypi_models
import remat.torch as rt
import test_any_model
import test_mixed_precision
import test_torch

transformers.logging.set_verbosity_error()


class PyPIModels(unittest.TestCase):
    check_budgets = test_torch.Checkpointed.check_budgets

    def run_model(self, name, seed):
        torch.manual_seed(seed)
        model, stages, x, loss = pypi_models.MODELS[name]()
        self.assert_same_function(name, model, stages, x)
        self.check_budgets(stages, x, loss)

    def assert_same_function(self, name, model, stages, x):
        """The stages, run in turn, compute the model's own output (in eval mode: no dropout),
        and in training mode draw random numbers (dropout is on: two runs differ)."""
        def run_stages():
            y = x
            for s in stages:
                y = s(y)
            return y

        modules = [model, *stages]
        with torch.no_grad():
            for m in modules:
                m.eval()
            want, got = pypi_models.output_of(model, x), run_stages()
            for m in modules:
                m.train()
            self.assertTrue(torch.equal(got, want), f"{name}: the stages differ from the model")
            self.assertFalse(torch.equal(run_stages(), run_stages()), f"{name}: no dropout")

    def test_gpt2(self):
        self.run_model("gpt2", 11)

    def test_llama(self):
        self.run_model("llama", 12)

    def test_timm_resnet(self):
        self.run_model("resnet", 13)

    def test_timm_vit(self):
        self.run_model("vit", 14)


class WholeModels(unittest.TestCase):
    """transformers' GPT2LMHeadModel and LlamaForCausalLM as they come (tied embeddings, the
    causal mask transformers builds from the input's shape, dropout on), traced and cut by
    remat: the loss receives the model's own ModelOutput. Token ids are the chain's input and
    have no gradient; parameter gradients and buffers are compared bit for bit. With an
    attention mask (left padding), a second input the blocks read from the context."""

    def run_model(self, name, seed, output_class, blocks, padded=False):
        torch.manual_seed(seed)
        # use_cache=False: a training step has no cache (with one, the model returns a
        # DynamicCache, which torch.fx cannot carry: the error names it).
        model, _, ids, token_loss = pypi_models.MODELS[name](layers=2, use_cache=False)
        self.assertFalse(ids.requires_grad)
        args = [ids]
        if padded:
            # An attention mask, a second input that needs no gradient: the first row is padded
            # on the left. Passed by position, as the forward's signature orders it.
            mask = torch.ones_like(ids)
            mask[0, :5] = 0
            bound = inspect.signature(model.forward).bind(input_ids=ids, attention_mask=mask)
            bound.apply_defaults()
            args = list(bound.args)
        seen = []

        def loss(out):
            seen.append(type(out))
            return token_loss(out.logits)

        m = test_any_model.check_budgets(self, model, args, loss=loss)
        self.assertEqual(set(seen), {output_class})
        self.assertEqual(m.split.leaves, [])
        self.assertEqual(len(m.split.blocks), blocks)
        if padded:
            self.assertIn("attention_mask", [n for n, _ in m.split.extra_inputs])
        return model, ids

    def test_gpt2(self):
        from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions
        model, ids = self.run_model("gpt2", 21, CausalLMOutputWithCrossAttentions, 9)
        # Tied input and output embeddings: one parameter, read by the first and last blocks.
        self.assertIs(model.lm_head.weight, model.transformer.wte.weight)
        model.config.use_cache = True
        with self.assertRaisesRegex(rt.ModelError, "DynamicCache"):
            rt.Checkpointed(model, ids, budget="100%")

    def test_gpt2_with_an_attention_mask(self):
        from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions
        self.run_model("gpt2", 23, CausalLMOutputWithCrossAttentions, 9, padded=True)

    def test_llama(self):
        from transformers.modeling_outputs import CausalLMOutputWithPast
        self.run_model("llama", 22, CausalLMOutputWithPast, 8)

    def test_llama_with_an_attention_mask(self):
        from transformers.modeling_outputs import CausalLMOutputWithPast
        self.run_model("llama", 24, CausalLMOutputWithPast, 8, padded=True)


@unittest.skipIf(test_mixed_precision.CPU_BF16_MISSING is not None,
                 test_mixed_precision.CPU_BF16_MISSING or "")
class MixedPrecision(unittest.TestCase):
    """The same models' stages, each step under CPU bfloat16 autocast, against the model run
    plainly under it (test_mixed_precision.py's check_budgets): bitwise, as predicted."""

    def run_model(self, name, seed):
        torch.manual_seed(seed)
        _, stages, x, loss = pypi_models.MODELS[name]()
        model = torch.nn.Sequential(*stages)
        m = rt.Checkpointed(model, x, budget=1 << 40, loss=loss, runs=1)
        test_mixed_precision.check_budgets(self, m, model, x, loss,
                                           test_mixed_precision.Step(test_mixed_precision.bf16))

    def test_gpt2(self):
        self.run_model("gpt2", 3)

    def test_llama(self):
        self.run_model("llama", 4)

    def test_timm_resnet(self):
        self.run_model("resnet", 5)

    def test_timm_vit(self):
        self.run_model("vit", 6)

    def test_gpt2_whole(self):
        # Traced and cut by remat (WholeModels' case): with torch 2.4 and later, block options
        # checked and profiled under the autocast state.
        torch.manual_seed(7)
        model, _, ids, token_loss = pypi_models.MODELS["gpt2"](layers=2, use_cache=False)
        loss = lambda out: token_loss(out.logits)
        m = rt.Checkpointed(model, ids, budget=1 << 40, loss=loss, runs=1)
        test_mixed_precision.check_budgets(self, m, model, ids, loss,
                                           test_mixed_precision.Step(test_mixed_precision.bf16))


if __name__ == "__main__":
    unittest.main()
