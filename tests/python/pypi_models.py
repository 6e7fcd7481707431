"""Real models of transformers and timm cut by hand into stages that map one tensor to one tensor,
as remat.torch.Checkpointed takes them: an embedding, the blocks, a head. Random weights, built
from a config (transformers) or by name with pretrained=False (timm): nothing is fetched.

Each builder returns (model, stages, sample, loss): `model` is the whole model as its library
runs it, `stages` its own modules (shared, not copied) regrouped, so that `stages` run in turn
compute what `model` computes; `tests/python/test_pypi_models.py` checks that they do. Used by
those tests and by `benchmarks/python_vs_torch.py`. Sizes are keyword arguments: the tests
build tiny models, the benchmark larger ones.

Dropout is on wherever the model has it (transformers' GPT-2 defaults; attention dropout for
Llama; timm's drop_rate, attn_drop_rate, proj_drop_rate and drop_path_rate), so that a
recomputation must draw the masks its first run drew.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a hub

import torch


# --- transformers: GPT-2 and a Llama-style decoder ------------------------------------------------

class GPT2Embed(torch.nn.Module):
    """GPT2Model.forward up to the blocks: token and position embeddings, then dropout."""

    def __init__(self, transformer):
        super().__init__()
        self.wte, self.wpe, self.drop = transformer.wte, transformer.wpe, transformer.drop

    def forward(self, ids):
        positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        return self.drop(self.wte(ids) + self.wpe(positions))


class CausalBlock(torch.nn.Module):
    """One decoder layer called as its model calls it, without a mask or a cache: with torch's
    scaled_dot_product_attention (transformers' default, "sdpa") no mask means is_causal."""

    def __init__(self, layer, rotary=None):
        super().__init__()
        self.layer = layer
        # Llama's rotary embedding has no parameters and one buffer that nothing updates; it is
        # computed in each block, where the model computes it once for all of them.
        self.rotary = rotary

    def forward(self, x):
        if self.rotary is None:
            return self.layer(x)
        positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        return self.layer(x, position_embeddings=self.rotary(x, positions),
                          position_ids=positions)


class Head(torch.nn.Module):
    """The final norm and the language-model head."""

    def __init__(self, norm, lm_head):
        super().__init__()
        self.norm, self.lm_head = norm, lm_head

    def forward(self, x):
        return self.lm_head(self.norm(x))


def token_loss(target):
    """Next-token cross entropy over (batch, sequence, vocabulary) logits."""
    return lambda y: torch.nn.functional.cross_entropy(y.flatten(0, 1), target.flatten())


def gpt2(batch=2, seq=16, vocab=128, dim=32, heads=4, layers=4, **config_args):
    """transformers' GPT2LMHeadModel, its input and output embeddings tied (as GPT-2's are), and
    its default dropout (0.1 on embeddings, attention and residuals). `config_args` go to its
    config."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(vocab_size=vocab, n_positions=seq, n_embd=dim, n_layer=layers,
                        n_head=heads, bos_token_id=vocab - 1, eos_token_id=vocab - 1,
                        attn_implementation="sdpa", **config_args)
    model = GPT2LMHeadModel(config)
    t = model.transformer
    stages = [GPT2Embed(t), *[CausalBlock(b) for b in t.h], Head(t.ln_f, model.lm_head)]
    ids = torch.randint(vocab, (batch, seq))
    return model, stages, ids, token_loss(torch.randint(vocab, (batch, seq)))


def llama(batch=2, seq=16, vocab=128, dim=32, heads=4, kv_heads=2, layers=4, **config_args):
    """transformers' LlamaForCausalLM: RMSNorm, rotary embeddings, grouped-query attention,
    SwiGLU; attention dropout on (Llama's config has it, at 0 by default). `config_args` go to
    its config."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=dim, intermediate_size=(8 * dim) // 3,
                         num_hidden_layers=layers, num_attention_heads=heads,
                         num_key_value_heads=kv_heads, max_position_embeddings=seq,
                         attention_dropout=0.1, attn_implementation="sdpa", **config_args)
    model = LlamaForCausalLM(config)
    m = model.model
    stages = [m.embed_tokens, *[CausalBlock(b, m.rotary_emb) for b in m.layers],
              Head(m.norm, model.lm_head)]
    ids = torch.randint(vocab, (batch, seq))
    return model, stages, ids, token_loss(torch.randint(vocab, (batch, seq)))


def output_of(model, x):
    """What the whole model computes for `x`: a transformers model's logits (no cache), a timm
    model's output."""
    from transformers import PreTrainedModel

    return model(x, use_cache=False).logits if isinstance(model, PreTrainedModel) else model(x)


# --- timm: a ResNet and a ViT ------------------------------------------------------------------------

class ResNetHead(torch.nn.Module):
    """timm ResNet.forward_head: global pooling, dropout (drop_rate), the classifier."""

    def __init__(self, net):
        super().__init__()
        self.global_pool, self.fc = net.global_pool, net.fc
        self.drop = torch.nn.Dropout(float(net.drop_rate))

    def forward(self, x):
        return self.fc(self.drop(self.global_pool(x)))


def resnet(batch=2, image=32, classes=10, name="resnet18d"):
    """timm's ResNet-D (a three-convolution stem, average pooling in the shortcut's
    downsampling) with batch norm, dropout before the classifier and stochastic depth."""
    import timm

    net = timm.create_model(name, pretrained=False, num_classes=classes, drop_rate=0.1,
                            drop_path_rate=0.05)
    stem = torch.nn.Sequential(net.conv1, net.bn1, net.act1, net.maxpool)
    blocks = [b for layer in (net.layer1, net.layer2, net.layer3, net.layer4) for b in layer]
    x = torch.randn(batch, 3, image, image, requires_grad=True)
    target = torch.randint(classes, (batch,))
    return (net, [stem, *blocks, ResNetHead(net)], x,
            lambda y: torch.nn.functional.cross_entropy(y, target))


class ViTEmbed(torch.nn.Module):
    """timm VisionTransformer.forward_features up to the blocks: patches, the class token, the
    position embedding (added after the class token is prepended), dropouts, norm_pre."""

    def __init__(self, vit):
        super().__init__()
        assert vit.reg_token is None and not vit.no_embed_class and not vit.dynamic_img_size
        self.patch_embed, self.cls_token, self.pos_embed = vit.patch_embed, vit.cls_token, vit.pos_embed
        self.pos_drop, self.patch_drop, self.norm_pre = vit.pos_drop, vit.patch_drop, vit.norm_pre

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        return self.norm_pre(self.patch_drop(self.pos_drop(x + self.pos_embed)))


class ViTHead(torch.nn.Module):
    """The final norm and VisionTransformer.forward_head with class-token pooling."""

    def __init__(self, vit):
        super().__init__()
        assert vit.global_pool == "token" and vit.attn_pool is None
        self.norm, self.fc_norm, self.head_drop, self.head = vit.norm, vit.fc_norm, vit.head_drop, vit.head

    def forward(self, x):
        return self.head(self.head_drop(self.fc_norm(self.norm(x)[:, 0])))


def vit(batch=2, image=32, patch=8, dim=48, heads=3, depth=4, classes=10):
    """timm's ViT (vit_tiny_patch16_224's design at another size) with every dropout it has."""
    import timm

    net = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=image,
                            patch_size=patch, embed_dim=dim, num_heads=heads, depth=depth,
                            num_classes=classes, drop_rate=0.1, pos_drop_rate=0.1,
                            attn_drop_rate=0.1, proj_drop_rate=0.1, drop_path_rate=0.1)
    x = torch.randn(batch, 3, image, image, requires_grad=True)
    target = torch.randint(classes, (batch,))
    return (net, [ViTEmbed(net), *net.blocks, ViTHead(net)], x,
            lambda y: torch.nn.functional.cross_entropy(y, target))


MODELS = {"gpt2": gpt2, "llama": llama, "resnet": resnet, "vit": vit}
