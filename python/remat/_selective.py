"""Options inside a traced model's blocks (docs/python.md, "Options inside blocks").

A block of a traced model (a GraphModule, _fx.py) may run its recording forward F_all in a second
way besides plain autograd: under torch's selective activation checkpointing, keeping what the
compute-heavy ops give (convolutions, matrix products, attention) and recomputing the rest
(normalizations, activations, element-wise ops) in the block's backward from those and the block's
input. That is one more option of the stage (remat.StageOption): a smaller tape for a longer
backward. The solver decides per F_all which option runs; F_none and F_ck run the block as it is.

What keeps the option's results those of plain autograd:

* in-place ops of the block run out of place in the option (an in-place ReLU would overwrite what
  the option keeps), which gives the same values;
* the block's recomputation in the backward writes its buffers' updates into scratch copies (batch
  norm's running statistics are updated once, by the forward), and draws the random numbers the
  forward drew (torch.utils.checkpoint restores the generators);
* before an option is used, it runs once beside plain autograd on the profiling sample: output,
  input gradient and parameter gradients must be bitwise equal, or the option is not offered
  (`Checkpointed.split.refused_options` says why).

Needs torch.utils.checkpoint.create_selective_checkpoint_contexts (torch 2.4 and later); with an
older torch every block has one option.
"""

from __future__ import annotations

import contextlib
import copy
import operator

import torch
import torch.fx as fx

try:
    from torch.utils.checkpoint import (CheckpointPolicy, checkpoint,
                                        create_selective_checkpoint_contexts)
    from torch.utils._python_dispatch import _disable_current_modes
    AVAILABLE = True
except ImportError:  # torch < 2.4
    AVAILABLE = False

# The ops whose outputs the option keeps: those that cost the most time per byte they give.
_KEPT = ("convolution", "_convolution", "mm", "addmm", "bmm", "baddbmm", "_scaled_mm",
         "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
         "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
         "_flash_attention_forward", "_efficient_attention_forward")


def _kept_ops():
    aten = torch.ops.aten
    out = set()
    for name in _KEPT:
        try:
            out.add(getattr(aten, name))
        except (AttributeError, RuntimeError):
            pass
    return frozenset(out)


_kept = None


def _policy(ctx, func, *args, **kwargs):
    return (CheckpointPolicy.MUST_SAVE if func.overloadpacket in _kept
            else CheckpointPolicy.PREFER_RECOMPUTE)


def _contexts():
    return create_selective_checkpoint_contexts(_policy)


# In-place ops and their out-of-place twins, for the option's copy of a block.
_IN_PLACE_OPERATORS = {operator.iadd: operator.add, operator.isub: operator.sub,
                       operator.imul: operator.mul, operator.itruediv: operator.truediv,
                       operator.ifloordiv: operator.floordiv, operator.ipow: operator.pow,
                       operator.iand: operator.and_, operator.ior: operator.or_,
                       operator.ixor: operator.xor}


def _out_of_place_function(target):
    if target in _IN_PLACE_OPERATORS:
        return _IN_PLACE_OPERATORS[target]
    name = getattr(target, "__name__", "")
    module = getattr(target, "__module__", "") or ""
    if name.endswith("_") and not name.endswith("__") and module.startswith("torch"):
        for space in (torch, torch.nn.functional):
            twin = getattr(space, name[:-1], None)
            if twin is not None and getattr(space, name, None) is target:
                return twin
    return None


def _out_of_place(block):
    """A copy of the GraphModule `block` whose in-place ops run out of place (same values, new
    tensors); its submodules and tensors are the block's. Where an in-place op has no
    out-of-place twin that remat knows, that op's node instead."""
    gm = fx.GraphModule(block, copy.deepcopy(block.graph), type(block).__name__)
    nodes = list(gm.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    for i, n in enumerate(nodes):
        written = _make_out_of_place(gm, n, i)
        if written is False:
            return n
        if isinstance(written, fx.Node):  # later readers of what the op wrote read its output
            written.replace_all_uses_with(n, delete_user_cb=lambda u: order.get(u, -1) > i)
    gm.recompile()
    return gm


def _make_out_of_place(gm, n, i):
    """Node n of gm made out of place: the node it wrote into, None if it writes nothing, False
    if remat knows no out-of-place twin of it."""
    first = n.args[0] if n.args and isinstance(n.args[0], fx.Node) else None
    if n.kwargs.get("inplace") is True:
        n.kwargs = {**n.kwargs, "inplace": False}
        return first if first is not None else n.kwargs.get("input")
    if n.op == "call_module":
        m = gm.get_submodule(n.target)
        if getattr(m, "inplace", False) is not True:
            return None
        twin = copy.copy(m)
        twin.inplace = False
        name = f"remat_out_of_place_{i}"
        gm.add_submodule(name, twin)
        n.target = name
        return first
    if n.op == "call_function":
        twin = _out_of_place_function(n.target)
        if twin is None:
            name = getattr(n.target, "__name__", "")
            module = getattr(n.target, "__module__", "") or ""
            in_place = module.startswith("torch") and name.endswith("_") and not name.endswith("__")
            return False if in_place else None
        n.target = twin
        return first
    if n.op == "call_method" and n.target.endswith("_") and not n.target.endswith("__"):
        if n.target == "requires_grad_":
            return None
        if not hasattr(torch.Tensor, n.target[:-1]):
            return False
        n.target = n.target[:-1]
        return first
    return None


@contextlib.contextmanager
def _scratch_buffers(module):
    """Module's buffers replaced by copies while the body runs: a recomputation updates those."""
    swapped = []
    try:
        # The copies are made outside the recomputation's dispatch mode, which would look for
        # them among the forward's ops.
        with _disable_current_modes():
            for m in module.modules():
                for name, b in m._buffers.items():
                    if b is not None:
                        swapped.append((m, name, b))
                        m._buffers[name] = b.clone()
        yield
    finally:
        for m, name, b in swapped:
            m._buffers[name] = b


class Selective(torch.nn.Module):
    """Block as the option runs it: without gradients, the block itself; recording, its
    out-of-place copy under selective checkpointing. Holds no parameter or buffer of its own
    (it is not registered as a submodule of the Checkpointed)."""

    def __init__(self, block, recording):
        super().__init__()
        object.__setattr__(self, "block", block)  # not a submodule: no second owner
        object.__setattr__(self, "recording", recording)

    def forward(self, x):
        if not torch.is_grad_enabled():
            return self.block(x)
        calls = []

        def run(a):
            calls.append(None)
            if len(calls) == 1:
                return self.recording(a)
            with _scratch_buffers(self.recording):
                return self.recording(a)

        return checkpoint(run, x, use_reentrant=False, context_fn=_contexts,
                          preserve_rng_state=True)


def option_for(block):
    """The option of a block (a Selective), or (None, why) where it cannot have one."""
    global _kept
    if not AVAILABLE:
        return None, "this torch has no selective checkpointing (torch 2.4 and later)"
    if _kept is None:
        _kept = _kept_ops()
    recording = _out_of_place(block)
    if isinstance(recording, fx.Node):
        target = getattr(recording.target, "__name__", recording.target)
        return None, (f"'{recording.name}' ({target}) writes in place and has no out-of-place "
                      "twin")
    return Selective(block, recording), None
