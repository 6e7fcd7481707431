"""remat.torch: any nn.Module (or an nn.Sequential, or a list of modules) trained within a
memory budget.

    m = remat.torch.Checkpointed(net, sample, budget="200MB", loss=loss_fn)
    y = m(x)                      # the schedule's forward part
    loss_fn(y).backward()         # the rest: recomputations and backwards, through autograd

A model that is not an nn.Sequential or a list of modules is traced with torch.fx and cut at
the cut points remat.linearize finds (module remat._fx): one stage per block.

What it does mirrors remat::torch's C++ executor (include/remat/torch/executor.hpp): the stages
are profiled at each input shape by remat::torch::profile (module remat._torch; times, and sizes
exact to the byte from remat::torch's CPU allocation meter, or from torch.cuda's statistics on a
GPU), the chain is solved for the budget, and one custom autograd Function runs the schedule:
its forward runs the ops before the loss, its backward the ops after it. A stage run twice
behaves as if it ran once: the same dropout masks (the generator's state is put back for a
recomputation) and batch norm's running statistics updated once (a recomputation restores them).
Gradients of parameters and of the input are those of plain autograd, bit for bit.
"""

from __future__ import annotations

import contextlib
import json
import numbers
import sys
import time
import warnings
import weakref
from dataclasses import dataclass, field

import torch

from . import Chain, Stage, StageOption, parse_size, simulate, solve
from . import _fx, _selective
from ._pipeline import micro_batches_in_flight

try:
    from . import _torch as _meter
except ModuleNotFoundError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "remat.torch needs remat._torch, remat::torch's CPU meter compiled against the libtorch "
        "that this Python's torch loads; it was not built (see the 'remat Python package' lines "
        "of CMake's configure output; pip builds it where the Python that runs pip imports "
        "torch: install torch, then reinstall remat)"
    ) from e
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        f"remat._torch does not load with this Python's torch {torch.__version__} ({e}); it "
        "must be built against this torch: rebuild remat, or reinstall it (pip install "
        "--force-reinstall --no-cache-dir)"
    ) from e

__all__ = ["Checkpointed", "ModelError", "BudgetError", "FewCutsWarning", "Profile", "profile",
           "cpu_meter", "micro_batches_in_flight"]


class ModelError(ValueError):
    """A stage (or the loss) that remat cannot run: `stage_index` names it (None: the loss or
    the model as a whole)."""

    def __init__(self, stage_index, message):
        where = "the loss" if stage_index == "loss" else (
            "the model" if stage_index is None else f"stage {stage_index}")
        super().__init__(f"{where}: {message}")
        self.stage_index = None if stage_index == "loss" else stage_index


def _model_error(message, stage_index):
    """remat::torch's model_error as a ModelError: its message as it is."""
    e = ModelError.__new__(ModelError)
    ValueError.__init__(e, message)
    e.stage_index = stage_index
    return e


_meter._register_model_error(_model_error)


class FewCutsWarning(UserWarning):
    """A traced model one of whose blocks holds most of its activation bytes: remat can only
    keep or recompute that block whole."""


class BudgetError(ValueError):
    """No schedule fits the budget at this input shape; `min_feasible_budget` says what would."""

    def __init__(self, message, min_feasible_budget):
        super().__init__(message)
        self.min_feasible_budget = min_feasible_budget


# --- torch.compile ---------------------------------------------------------------------------------

_compiler = getattr(torch, "compiler", None)
if _compiler is not None and hasattr(_compiler, "disable"):  # torch 2.1 and later
    _outside_dynamo = _compiler.disable
elif hasattr(torch, "_dynamo"):  # torch 2.0
    _outside_dynamo = torch._dynamo.disable
else:  # torch 1.x: nothing compiles
    def _outside_dynamo(fn):
        return fn
if _compiler is not None and hasattr(_compiler, "is_compiling"):
    _is_compiling = _compiler.is_compiling
elif hasattr(torch, "_dynamo") and hasattr(torch._dynamo, "is_compiling"):
    _is_compiling = torch._dynamo.is_compiling
else:
    def _is_compiling():
        return False


def _compile_options(compile):
    """Checkpointed's `compile` as torch.compile's keyword arguments (None: not compiled)."""
    if compile is None or compile is False:
        return None
    if not hasattr(torch, "compile"):
        raise RuntimeError(f"compile: torch {torch.__version__} has no torch.compile (torch 2.0 "
                           "and later)")
    if compile is True:
        return {}
    if isinstance(compile, dict):
        return dict(compile)
    raise TypeError("compile must be True, False or a dict of torch.compile's keyword arguments "
                    f"(e.g. {{'mode': 'max-autotune'}}), not {type(compile).__name__}")


# --- meters ----------------------------------------------------------------------------------------

class _WindowedMeter:
    """A meter whose peak statistic a step resets per op: each op is measured in a window of its
    own (`open_window`, then `window_peak`), and `peak()` is the most allocated since
    `reset_peak()`, the windows opened since included, so that this meter read around a step
    sees the step's peak. Subclasses give current, _raw_peak, _raw_reset and sync."""

    def __init__(self):
        self._before = 0  # the peak before the window open now

    def window_peak(self):
        return self._raw_peak()

    def reset_peak(self):
        self._before = 0
        self._raw_reset()

    def peak(self):
        return max(self._before, self._raw_peak())

    def open_window(self):
        self._before = self.peak()
        self._raw_reset()


class _CpuMeter(_WindowedMeter):
    """libtorch's CPU allocator, counted exactly (remat::torch::cpu_memory())."""

    current = staticmethod(_meter.cpu_current)
    _raw_peak = staticmethod(_meter.cpu_peak)
    _raw_reset = staticmethod(_meter.cpu_reset_peak)

    def sync(self):
        pass


class _CudaMeter(_WindowedMeter):
    """The CUDA caching allocator's statistics of one device (bytes given to tensors). The step
    resets the device's peak statistics per op: read around a step,
    `torch.cuda.max_memory_allocated` sees its last op only, where this meter's `peak()` (and
    `total_peak`) see the step's."""

    def __init__(self, device):
        super().__init__()
        self.device = device

    def current(self):
        return torch.cuda.memory_allocated(self.device)

    def _raw_peak(self):
        return torch.cuda.max_memory_allocated(self.device)

    def _raw_reset(self):
        torch.cuda.reset_peak_memory_stats(self.device)

    def sync(self):
        torch.cuda.synchronize(self.device)


cpu_meter = _CpuMeter()


class _Windows:
    """A meter's op windows as remat._torch.NewGradients reads a meter (sync, peak, reset_peak),
    so that the windows it opens count in the CPU meter's `peak()`."""

    def __init__(self, meter):
        self.sync, self.peak, self.reset_peak = meter.sync, meter.window_peak, meter.open_window


_cuda_meters = {}  # one per device, whose peak() counts every step's windows on it


def _meter_for(t):
    if not t.is_cuda:
        return cpu_meter
    device = torch.device("cuda", t.device.index if t.device.index is not None
                          else torch.cuda.current_device())
    if device not in _cuda_meters:
        _cuda_meters[device] = _CudaMeter(device)
    return _cuda_meters[device]


class _Rng:
    """The generators a stage draws from, saved and put back without allocating on the meter's
    device: the CPU generator through remat._torch (torch.get_rng_state() allocates a CPU
    tensor), and on a GPU that device's generator too."""

    def __init__(self, device):
        self.cuda = device if device.type == "cuda" else None

    def save(self):
        cuda = torch.cuda.get_rng_state(self.cuda) if self.cuda is not None else None
        return (_meter.save_cpu_rng(), cuda)

    def restore(self, state):
        _meter.restore_cpu_rng(state[0])
        if self.cuda is not None:
            torch.cuda.set_rng_state(state[1], self.cuda)


def _nbytes(t):
    """What t's data counts on its device's meter: its bytes, rounded up to the CUDA caching
    allocator's 512-byte blocks on a GPU (remat::torch::allocated_size)."""
    if t is None:
        return 0
    n = t.numel() * t.element_size()
    return (n + 511) // 512 * 512 if t.is_cuda and n > 0 else n


# A tensor's untyped storage: torch 1.13 has no untyped_storage(), and its storage() builds a
# Python TypedStorage around _storage(), at a cost that counts once per op.
_untyped_storage = getattr(torch.Tensor, "untyped_storage", None) or torch.Tensor._storage


def _storage_bytes(t):
    return _untyped_storage(t).nbytes()


def _shape(t):
    return (tuple(t.shape), t.dtype, t.device)


def _describe(shape, other):
    """A profiled or run output's _shape as an error names it: its dtype (and device) too where
    those differ from `other`'s."""
    text = str(shape[0])
    if shape[1] != other[1]:
        text += f" {str(shape[1]).replace('torch.', '')}"
    if shape[2] != other[2]:
        text += f" on {shape[2]}"
    return text


# --- mixed precision -------------------------------------------------------------------------------
# The autocast state a step runs under is part of the profile's key, as the input's shape is: per
# device type, the dtype autocast casts to, or None where it is off. Stages run under the state of
# their step's forward, recomputations included (as torch.utils.checkpoint does), with autocast's
# cast cache off: a weight cast once per stage run belongs to that run (its tape keeps it or it is
# freed), where the cache would keep every cast weight until the caller's autocast region ends;
# and a weight first cast in a no-grad forward (F_ck, F_none) would be cached without its graph,
# so that a recording forward after it would give that weight no gradient. The values are the
# same: a cast gives the same bits whether cached or not. What construction runs (fusing,
# tracing, discovering the parameters) runs so too, leaving nothing in the caller's cache.

_AUTOCAST_DEVICES = ("cpu", "cuda")

if hasattr(torch, "get_autocast_dtype"):  # torch 2.4 and later
    def _autocast_state():
        return tuple(torch.get_autocast_dtype(d) if torch.is_autocast_enabled(d) else None
                     for d in _AUTOCAST_DEVICES)
else:
    def _autocast_state():
        return (torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None,
                torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None)

_NO_AUTOCAST = (None,) * len(_AUTOCAST_DEVICES)


def _autocast_name(state):
    on = [f"{d} {str(t).replace('torch.', '')}" for d, t in zip(_AUTOCAST_DEVICES, state)
          if t is not None]
    return "autocast " + ", ".join(on) if on else "no autocast"


def _under(state):
    """A factory of contexts that run ops under autocast `state`, the cast cache off; a no-op
    where neither `state` nor the current state has autocast on."""
    now = _autocast_state()
    if state == _NO_AUTOCAST and now == _NO_AUTOCAST:
        return contextlib.nullcontext
    devices = [(d, t) for d, t, n in zip(_AUTOCAST_DEVICES, state, now)
               if t is not None or n is not None]

    def enter():
        stack = contextlib.ExitStack()
        for d, t in devices:
            stack.enter_context(torch.autocast(d, dtype=t, enabled=t is not None,
                                               cache_enabled=False))
        return stack
    return enter


def _recording_input(a):
    x = a.detach()
    if x.is_floating_point() or x.is_complex():
        x.requires_grad_(True)
    return x


def _accumulators(output, exclude):
    """The AccumulateGrad nodes of output's graph, with the tensor each accumulates into, but
    `exclude`'s."""
    # A node's Python object lives while something holds it, and its id may be reused after:
    # `seen` holds them, so that an id names one node.
    out, seen, stack = [], {}, []
    if output.grad_fn is not None:
        stack.append(output.grad_fn)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        v = getattr(node, "variable", None)
        if v is not None and type(node).__name__ == "AccumulateGrad":
            if v is not exclude:
                out.append((node, v))
            continue
        for nxt, _ in node.next_functions:
            if nxt is not None:
                stack.append(nxt)
    return out


def _leaves(output, exclude):
    """The tensors output's graph accumulates into, but `exclude`."""
    out = []
    _add_unique(out, [v for _, v in _accumulators(output, exclude)])
    return out


def _add_unique(lst, items):
    for t in items:
        if all(t is not o for o in lst):
            lst.append(t)


def _copy_into(dst, src):
    # Through .data: putting a buffer back must not bump its version, or a tape that saved it
    # (batch norm saves its running statistics) would refuse to run backward.
    with torch.no_grad():
        for d, s in zip(dst, src):
            d.data.copy_(s)


def _save_into(copies, tensors):
    # The copies are remat's own (no tape saved them): copied into as they are, in one call
    # where torch has _foreach_copy_ (2.1 on).
    with torch.no_grad():
        if _foreach_copy is not None:
            if copies:
                _foreach_copy(copies, tensors)
            return
        for d, s in zip(copies, tensors):
            d.copy_(s)


_foreach_copy = getattr(torch, "_foreach_copy_", None)


def _clones(tensors):
    with torch.no_grad():
        return [t.detach().clone() for t in tensors]


def _in_stage(k, what, fn, *args):
    try:
        out = fn(*args)
    except (ModelError, BudgetError):
        raise
    except Exception as e:  # libtorch's message, with where it happened
        raise ModelError(k, f"{what} failed: {e}") from e
    _reshard(fn)  # a forward of a stage sharded with fully_shard frees what it gathered
    return out


# --- FSDP2 -----------------------------------------------------------------------------------------
# A model sharded with fully_shard: an FSDP module gathers its parameters (all-gather) in its
# forward's pre-hook and in its backward's pre-hook, and frees them after. Each of a step's ops
# runs one stage, and what the stage gathers must belong to that op, as the profile measures it:
# after every forward of a stage its FSDP modules reshard (their hooks do not after a forward run
# inside a backward, a recomputation, nor after the forward of a root), and they prefetch nothing
# in the backward (FSDP would gather the module that ran forward before, which under a schedule
# is not the next to run backward). Each B(k) is one backward call, at whose end FSDP's own
# callback reduces the stage's gradients and frees its buffers. The gathers are collectives, so
# every rank must run the same schedule: the profiles of the ranks of the parameters' meshes are
# made one, each figure the most any rank measured.

def _fsdp_class():
    """FSDP2's FSDPModule where fully_shard has been imported (None otherwise: nothing is
    sharded)."""
    for name in ("torch.distributed.fsdp", "torch.distributed._composable.fsdp"):
        cls = getattr(sys.modules.get(name), "FSDPModule", None)
        if cls is not None:
            return cls
    return None


_sharded_in = weakref.WeakKeyDictionary()  # module -> the FSDP modules in it


def _sharded_modules(module):
    cls = _fsdp_class()
    if cls is None or not isinstance(module, torch.nn.Module):
        return ()
    found = _sharded_in.get(module)
    if found is None:
        found = _sharded_in[module] = tuple(m for m in module.modules() if isinstance(m, cls))
    return found


def _reshard(module):
    for m in _sharded_modules(module):
        m.reshard()


def _gathered(p):
    """Whether graph leaf `p` is a parameter FSDP gathered for a stage and freed after it (its
    storage is empty): the stage's parameter is the sharded one its module declares."""
    return p.numel() > 0 and _storage_bytes(p) == 0


def _prepare_sharded(model, stages):
    """The process groups whose ranks must run the same schedule (those of the meshes of the
    stages' sharded parameters; none where nothing is sharded). Lazily initializes a sharded
    `model` as FSDP's root (its own forward never runs, and a stage's would make itself a root),
    turns off the stages' FSDP modules' prefetching, and refuses a stage whose parameters no FSDP
    module within it gathers."""
    modules = [_sharded_modules(s) for s in stages]
    if not any(modules) and not _sharded_modules(model):
        return []
    if isinstance(model, _fsdp_class()):
        model._get_fsdp_state()._lazy_init()
    groups, meshes = [], []
    for k, (s, mine) in enumerate(zip(stages, modules)):
        gathered = {id(p) for m in mine for p in m.parameters()}
        outside = [n for n, p in s.named_parameters()
                   if id(p) not in gathered and getattr(p, "device_mesh", None) is not None]
        if outside:
            raise ModelError(k, f"its parameters {outside[:3]} are sharded by an FSDP module "
                                "outside the stage (the root's fully_shard?), which Checkpointed "
                                "does not run: fully_shard the stage, or the modules in it that "
                                "hold them")
        for m in mine:
            if hasattr(m, "set_modules_to_backward_prefetch"):  # FSDP2 with explicit prefetching
                m.set_modules_to_forward_prefetch([])
                m.set_modules_to_backward_prefetch([m])  # itself: gathered already, so nothing
            for p in m.parameters():
                mesh = getattr(p, "device_mesh", None)
                if mesh is not None and all(mesh is not n for n in meshes):
                    meshes.append(mesh)
    for mesh in meshes:
        for d in range(mesh.ndim):
            g = mesh.get_group(d)
            if all(g is not h for h in groups):
                groups.append(g)
    return groups


def _most(values):
    """The elementwise most of equally shaped JSON values (numbers, lists, dicts)."""
    first = values[0]
    if isinstance(first, dict):
        return {key: _most([v[key] for v in values]) for key in first}
    if isinstance(first, list):
        return [_most(list(v)) for v in zip(*values)]
    if isinstance(first, (int, float)) and not isinstance(first, bool):
        return max(values)
    return first


def _agree(profiled, plain, groups):
    """`profiled` and plain autograd's peak as every rank of `groups` has them: each size and
    time the most any rank measured (the max over each group in turn is the max over the mesh),
    each backward slack the least."""
    import torch.distributed as dist

    for g in groups:
        chain = json.loads(profiled.chain.to_json())
        for st in chain["stages"]:
            st.setdefault("recording_overhead", st["forward_overhead"])
        mine = (chain, profiled.backward_slack, profiled.option_slack, profiled.loss_beside,
                plain, profiled.loss_held)
        every = [None] * dist.get_world_size(g)
        dist.all_gather_object(every, mine, group=g)
        chain = _most([e[0] for e in every])
        slack = [min(v) for v in zip(*[e[1] for e in every])]
        option_slack = (None if profiled.option_slack is None else
                        [[min(v) for v in zip(*o)] for o in zip(*[e[2] for e in every])])
        plain = None if plain is None else max(e[4] for e in every)
        profiled = Profile(Chain.from_json(json.dumps(chain)), profiled.outputs, slack,
                           option_slack, max(e[3] for e in every), max(e[5] for e in every))
    return profiled, plain


def _storage_ptr(t):
    return _untyped_storage(t).data_ptr()


def _check_output(k, x, y):
    if not isinstance(y, torch.Tensor):
        raise ModelError(k, f"returns {type(y).__name__}, not a tensor; a stage maps one tensor "
                            "to one tensor")
    if y.numel() > 0 and x.numel() > 0 and _storage_ptr(y) == _storage_ptr(x):
        raise ModelError(k, "returns its input or a view of it; remat counts each stage's output "
                            "as its own memory: merge the stage with a neighbour or return a new "
                            "tensor")


def _check_loss(l):
    if not isinstance(l, torch.Tensor) or l.numel() != 1 or not l.requires_grad:
        shape = tuple(l.shape) if isinstance(l, torch.Tensor) else type(l).__name__
        raise ModelError("loss", f"must return a scalar that requires grad (got {shape})")


def _default_loss(y):
    return y.float().pow(2).mean() if y.is_floating_point() else y.sum()


# --- the model's state ----------------------------------------------------------------------------

@dataclass
class _State:
    """What the stages and the loss own: parameters (every leaf their graphs reach, declared or
    not; `loss_parameters` those the loss's graph reaches) and, per stage, the buffers its module
    declares."""
    parameters: list
    buffers: list  # per stage
    loss_parameters: list


def _discover(stages, sample, loss, rng):
    declared = [list(s.buffers()) for s in stages]
    every = []
    for bs in declared:
        _add_unique(every, bs)
    copies = _clones(every)
    saved_rng = rng.save()
    params = []
    try:
        a = sample
        for k, s in enumerate(stages):
            x = _recording_input(a)
            with torch.enable_grad():
                y = _in_stage(k, "forward (recording)", s, x)
            _check_output(k, x, y)
            if not y.requires_grad:
                raise ModelError(k, f"its output {tuple(y.shape)} does not require grad when "
                                    "recorded: the stage is not differentiable")
            _add_unique(params, list(s.parameters()))
            _add_unique(params, [p for p in _leaves(y, x) if not _gathered(p)])
            a = y.detach()
            del x, y
        leaf = a.detach().requires_grad_(a.is_floating_point())
        with torch.enable_grad():
            l = _in_stage("loss", "forward", loss, leaf)
        _check_loss(l)
        loss_params = _leaves(l, leaf)
        _add_unique(params, loss_params)
        del l, leaf, a
    finally:
        _copy_into(every, copies)
        rng.restore(saved_rng)
    return _State(params, declared, loss_params)


def _define_gradients(params):
    # Gradients are outside the budget: they exist before a measure starts (zero is what an
    # undefined gradient means).
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)


def _check_alternatives(stages, alternatives, sample, rng, buffers):
    """The alternatives that give plain autograd's results on the sample, and (stage, option,
    why) for the others: each runs once beside its stage's plain recording forward and backward
    on the stage's input, from the same buffers and generators, and its output, its input's
    gradient, its parameters' gradients and the buffers it leaves must be equal bit for bit.
    The model is left as it was."""
    every = []
    for bs in buffers:
        _add_unique(every, bs)
    copies = _clones(every)
    saved_rng = rng.save()
    kept, refused = [list(a) for a in alternatives], []
    try:
        a = sample
        for k, s in enumerate(stages):
            for o, alt in enumerate(alternatives[k], start=1):
                why = _differs(k, s, alt, a, rng, every)
                if why is not None:
                    refused.append((k, o, why))
                    kept[k].remove(alt)
            with torch.no_grad():
                a = _in_stage(k, "forward", s, a)
    finally:
        _copy_into(every, copies)
        rng.restore(saved_rng)
    return kept, refused


def _differs(k, s, alt, a, rng, buffers):
    """Why `alt` does not give what stage `s` gives on input `a` (None when it does)."""
    before, draws = _clones(buffers), rng.save()
    params = [p for p in s.parameters() if p.requires_grad]
    results = []
    for f in (s, alt):
        _copy_into(buffers, before)
        rng.restore(draws)
        x = _recording_input(a)
        wrt = ([x] if x.requires_grad else []) + params
        try:
            with torch.enable_grad():
                y = f(x)
                grads = torch.autograd.grad(y, wrt, torch.ones_like(y), allow_unused=True)
        except Exception as e:  # noqa: BLE001 - plain autograd's own failure is reported later
            if f is s:
                raise ModelError(k, f"forward (recording) failed: {e}") from e
            return f"it fails: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        results.append((y.detach(), grads, _clones(buffers)))
        del x, y, grads
    (y0, g0, b0), (y1, g1, b1) = results
    if _shape(y0) != _shape(y1):
        return (f"its output is {_describe(_shape(y1), _shape(y0))}, the block's "
                f"{_describe(_shape(y0), _shape(y1))}")
    if not torch.equal(y0, y1):
        return "its output differs from the block's"
    if any((g is None) != (h is None) or (g is not None and not torch.equal(g, h))
           for g, h in zip(g0, g1)):
        return "its gradients differ from plain autograd's"
    if any(not torch.equal(u, v) for u, v in zip(b0, b1)):
        return "it leaves other buffers than the block"
    return None


# --- profiling -------------------------------------------------------------------------------------

@dataclass
class Profile:
    """A measured chain (milliseconds, bytes) at one input shape, as remat::torch::profiled_chain:
    `backward_slack[k]` (the loss at index L) is how far below the model's op peak a backward
    really peaks (the model's overheads cannot be negative)."""
    chain: Chain
    outputs: list
    backward_slack: list = field(default_factory=list)
    # Per stage with options, the backward slack of each option's B (None: no stage has options).
    option_slack: list = None
    # What the loss's side held when its gradient reached the model's output, above what the
    # model held: the loss's scalar, the gradient autograd starts from, what the loss's backward
    # keeps until the backward ends, and the output's gradient, which autograd keeps until the
    # model's backward returns. A step holds this beside the schedule during its backward.
    loss_beside: int = 0
    # What the loss's forward left allocated (its value and what its backward keeps): on a
    # pipeline's last stage each micro-batch in flight holds it from its loss to its backward.
    loss_held: int = 0

    def expected_op_peaks(self, ops):
        """What running `ops` allocates at each op: the simulator's op peaks on the profiled chain,
        less the backward slack on each B (that of the option which recorded its tape) and on the
        loss (remat::torch::expected_op_peaks)."""
        if self.option_slack is not None:
            return self._expected_with_options(ops)
        c = self.chain
        fields = {"input_size": c.input_size, "loss_time": c.loss_time,
                  "loss_overhead": c.loss_overhead,
                  "stages": [{"forward_time": s.forward_time, "backward_time": s.backward_time,
                              "output_size": s.output_size, "tape_size": s.tape_size,
                              "forward_overhead": s.forward_overhead,
                              "backward_overhead": s.backward_overhead,
                              "recording_overhead": s.recording_overhead} for s in c.stages]}
        return _meter.expected_op_peaks(fields, [(o.kind, o.index, o.tensor) for o in ops],
                                        self.backward_slack)

    def _expected_with_options(self, ops):
        r = simulate(self.chain, ops)
        if not r.valid:
            raise ValueError(f"expected_op_peaks: {r.error}")
        peaks, recorded = list(r.op_peak), {}
        for i, o in enumerate(ops):
            if o.kind == "F_all":
                recorded[o.index] = o.option
            elif o.kind == "B":
                peaks[i] -= self.option_slack[o.index][recorded.get(o.index, 0)]
            elif o.kind == "loss":
                peaks[i] -= self.backward_slack[-1]
        return peaks


class _Capture(torch.autograd.Function):
    """The loss's side of the schedule, as Checkpointed sees it: the loss runs on this Function's
    output, and its backward ends where Checkpointed's backward would begin."""

    @staticmethod
    def forward(ctx, a, probe, on_backward):
        ctx.on_backward = on_backward
        return a.detach()

    @staticmethod
    def backward(ctx, g):
        ctx.on_backward(g)
        return None, None, None


def _profile(stages, sample, loss, meter, rng, warmup, runs, alternatives=None):
    """remat::torch::profile (remat._torch) of the stages, with the loss as Checkpointed runs
    it: on a Function's output, until the gradient reaches that Function's backward (after
    which nothing is allocated), so that the measured loss is the loss op of a step. A stage
    with alternatives (`alternatives[k]`, other ways to run its recording forward) gets one
    option each (_with_options)."""
    outputs = [None] * len(stages)
    passes = 1 + max((len(a) for a in alternatives), default=0) if alternatives else 1
    recording_ms = [[[] for _ in stages] for _ in range(passes)]

    def forward(k, s, pass_):
        def run(x):
            timed = torch.is_grad_enabled()
            t0 = time.perf_counter() if timed else 0.0
            y = _in_stage(k, "forward", s, x)
            meter.sync()  # a GPU's forward, timed to its end
            if timed:
                recording_ms[pass_][k].append((time.perf_counter() - t0) * 1e3)
            if isinstance(y, torch.Tensor):
                outputs[k] = _shape(y)
            return y
        return run

    reached = []
    beside, held = [0], [0]
    probe = torch.empty(0, requires_grad=True)

    def loss_as_run(leaf):
        start = meter.current()

        def on_backward(g):
            reached.append(True)
            beside[0] = max(beside[0], meter.current() - start)
        value = loss(_Capture.apply(leaf, probe, on_backward))
        held[0] = max(held[0], meter.current() - start)
        return value

    measured = []
    generators = rng.save()  # remat::torch puts back the CPU generator; this, a GPU's too
    try:
        for o in range(passes):
            chosen = [alternatives[k][o - 1] if o and o <= len(alternatives[k]) else s
                      for k, s in enumerate(stages)]
            measured.append(_meter.profile(
                [forward(k, s, o) for k, s in enumerate(chosen)],
                [list(s.parameters()) for s in stages], [list(s.buffers()) for s in stages],
                sample, loss_as_run, None if meter is cpu_meter else meter, warmup, runs))
    finally:
        rng.restore(generators)
    if not reached:
        raise ModelError("loss", "its gradient does not reach the model's output")
    p = measured[0]
    stage_fields = p["stages"]
    option_slack = None
    if passes > 1:
        stage_fields, option_slack = _with_options(measured, recording_ms, alternatives, runs)
    chain = Chain([Stage(**sp) for sp in stage_fields], input_size=p["input_size"],
                  loss_time=p["loss_time"], loss_overhead=p["loss_overhead"],
                  name="remat.torch profile", time_unit="ms", memory_unit="bytes")
    return Profile(chain, outputs, p["backward_slack"], option_slack, beside[0], held[0])


class _AtBackwardEnd(torch.autograd.Function):
    """The model's output as it is; `on_end` runs when the backward that reached it ends (an
    engine callback), when autograd has freed what the backward held."""

    @staticmethod
    def forward(ctx, y, on_end, probe):
        ctx.on_end = on_end
        ctx.probe = probe.grad_fn if probe is not None else None
        return y.view_as(y)

    @staticmethod
    def backward(ctx, g):
        _refuse_backwards_not_supported(ctx.on_end is None, ctx.probe)
        torch.autograd.Variable._execution_engine.queue_callback(ctx.on_end)
        ctx.on_end = None
        return g, None, None


def _plain_forward(stages, x, meter, new_gradients, on_end, probe=None):
    """Plain autograd's forward on `x` (the stages in sequence, with gradients): the output, whose
    backward (the caller's loss(y).backward()) runs the rest. `on_end(peak)` gets the step's
    peak above what was allocated before it, the input included, a parameter's new gradient
    outside it from the moment it is kept (`new_gradients`, a NewGradients or None, as a
    schedule's B measures it)."""
    meter.sync()
    meter.open_window()
    base = meter.current() - _nbytes(x)
    y = x
    for k, s in enumerate(stages):
        y = _in_stage(k, "forward", s, y)
    if new_gradients is not None:
        new_gradients.watch(y, x, base)

    def end():
        meter.sync()
        b, earlier = new_gradients.unwatch() if new_gradients is not None else (base, None)
        peak = meter.window_peak() - b
        on_end(peak if earlier is None else max(peak, earlier))
    return _AtBackwardEnd.apply(y, end, probe)


def _plain_step_peak(stages, x, loss, meter, rng, state):
    """The peak of plain autograd's step on `x` (_plain_forward), the parameters' gradients defined
    beforehand (they are outside the budget). Gradients, buffers and generators are put back."""
    params = state.parameters + state.loss_parameters
    grads = [p.grad for p in params]
    buffers = [b for bs in state.buffers for b in bs]
    saved = _clones(buffers)
    generators = rng.save()
    got = []
    try:
        for p in params:
            p.grad = torch.zeros_like(p)
        xa = x.detach().requires_grad_(x.requires_grad)
        with torch.enable_grad():
            loss(_plain_forward(stages, xa, meter, None, got.append)).backward()
    finally:
        for p, g in zip(params, grads):
            p.grad = g
        _copy_into(buffers, saved)
        rng.restore(generators)
    return got[0]


def _with_options(measured, recording_ms, alternatives, runs):
    """Stage fields with options from the profiles of each pass (pass o ran every stage's
    alternative o - 1 where it has one): option o's tape, overheads and backward time are those
    its pass measured, its forward time the no-grad forward's plus what recording with it took
    beyond recording plainly. Also each stage's backward slack per option."""
    def median(v):
        v = sorted(v[-runs:])
        return v[len(v) // 2] if v else 0.0

    def option(sp, base_forward, extra_ms):
        ro = sp.get("recording_overhead")
        return StageOption(forward_time=max(0.0, base_forward + extra_ms),
                           backward_time=sp["backward_time"], tape_size=sp["tape_size"],
                           forward_overhead=sp["forward_overhead"] if ro is None else ro,
                           backward_overhead=sp["backward_overhead"])

    fields, slack = [], []
    for k, sp in enumerate(measured[0]["stages"]):
        sp = dict(sp)
        slack.append([measured[0]["backward_slack"][k]])
        if alternatives[k]:
            plain = median(recording_ms[0][k])
            opts = [option(sp, sp["forward_time"], 0.0)]
            for o in range(1, len(alternatives[k]) + 1):
                opts.append(option(measured[o]["stages"][k], sp["forward_time"],
                                   median(recording_ms[o][k]) - plain))
                slack[k].append(measured[o]["backward_slack"][k])
            sp["options"] = opts
        fields.append(sp)
    return fields, slack


def profile(stages, sample, loss=None, warmup=1, runs=3):
    """Profiles `stages` (an nn.Sequential or a list of modules) on `sample` with `loss` (a
    function of the last stage's output returning a scalar; default the mean square): a Profile
    whose chain has times in milliseconds and sizes in bytes, under the current autocast state
    (the cast cache off, as Checkpointed runs stages). The model is left as it was: gradients,
    buffers, generator."""
    stages = _stage_list(stages)
    rng = _Rng(sample.device)
    loss = loss or _default_loss
    with _under(_autocast_state())():
        return _profile(stages, sample, loss, _meter_for(sample), rng, warmup, runs)


def _stage_list(stages):
    if isinstance(stages, torch.nn.Module) and not isinstance(
            stages, (torch.nn.Sequential, torch.nn.ModuleList)):
        raise TypeError("remat.torch takes an nn.Sequential or a list of modules (one stage each), "
                        f"not a {type(stages).__name__}: cut the model into stages")
    out = list(stages)
    if not out:
        raise ModelError(None, "no stages")
    for k, s in enumerate(out):
        if not isinstance(s, torch.nn.Module):
            raise TypeError(f"stage {k} is a {type(s).__name__}, not an nn.Module: remat must know "
                            "its buffers (wrap a function in a module)")
    return out


def _fuse_aliasing(stages, sample, rng):
    """The stages, each stage whose output is its input or a view of it (an in-place ReLU, a
    flatten) fused with the stage before it: such a stage cannot run alone on a detached input
    (a leaf that requires grad cannot be written in place) and holds no memory of its own. The
    stages run once without gradients to find them; buffers and generators are put back. Also
    the indices of the stages fused."""
    every = []
    for s in stages:
        _add_unique(every, list(s.buffers()))
    copies = _clones(every)
    saved_rng = rng.save()
    out, fused = [], []
    try:
        a = sample
        with torch.no_grad():
            for k, s in enumerate(stages):
                y = _in_stage(k, "forward", s, a)
                if (isinstance(y, torch.Tensor) and y.numel() > 0 and a.numel() > 0
                        and _storage_ptr(y) == _storage_ptr(a)):
                    if not out:
                        raise ModelError(k, "returns the model's input or a view of it (an "
                                            "in-place op on the input?); the step keeps the input "
                                            "as it is")
                    prev = out[-1]
                    out[-1] = torch.nn.Sequential(*(prev if k - 1 in fused else [prev]), s)
                    fused.append(k)
                else:
                    out.append(s)
                a = y
    finally:
        _copy_into(every, copies)
        rng.restore(saved_rng)
    return out, fused


def _budget_bytes(budget, store_all, least):
    """A budget as bytes: an int, a size string ("8GB", "512MiB", remat.parse_size's), a share
    of the store-all peak ("40%"), the least budget any schedule fits ("least"), or that plus a
    share of the span from it to the store-all peak ("least+40%": least + 0.4 * (store-all -
    least)). `store_all` and `least` give those figures when asked. Sizes depend on the machine
    that measures them (its CPU picks kernels, workspaces and layouts), so the last two forms are
    the ones that name a feasible budget on any machine."""
    if isinstance(budget, str):
        text = budget.strip()
        lowered = text.replace(" ", "").lower()
        if lowered == "least":
            return int(least())
        if lowered.startswith("least+") and lowered.endswith("%"):
            share = _share(lowered[len("least+"):-1])
            if not 0 <= share <= 100:
                raise ValueError(f"budget '{budget}': 'least+N%' takes a share from 0 to 100 of "
                                 "the span from the least budget to the store-all peak (e.g. "
                                 "'least+40%')")
            low, high = least(), store_all()
            return int(low + max(0, high - low) * share / 100)
        if text.endswith("%"):
            share = _share(text[:-1])
            if not 0 < share <= 1000:
                raise ValueError(f"budget '{budget}': a share of the store-all peak must be a "
                                 "number above 0 followed by % (e.g. '40%'); 'least' and "
                                 "'least+40%' are relative to the least budget")
            return int(store_all() * share / 100)
        return parse_size(text)
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise TypeError(f"budget must be bytes (an int), a size ('8GB', '512MiB'), a share of "
                        f"the store-all peak ('40%'), 'least' or 'least+40%', not "
                        f"{type(budget).__name__}")
    if budget < 0:
        raise ValueError(f"budget must be >= 0 (got {budget})")
    return int(budget)


def _share(text):
    """The number of a share ("40" of "40%"); -1 where it is none."""
    try:
        return float(text)
    except ValueError:
        return -1.0


# --- running a schedule ----------------------------------------------------------------------------

class _Schedule:
    """A schedule as the steps run it, worked out once per input shape and budget (a SolveResult's
    `ops` makes a new list of new Op objects at each access): the ops as (kind, stage) pairs,
    where the loss is, what each op should allocate, and what the model holds after the loss."""

    def __init__(self, profile, result, budget, reserve, plain_peak=None):
        self.result = result
        self.budget = budget  # the step's: the schedule's (result.budget) and the reserve
        self.reserve = reserve
        # Where the budget holds plain autograd's step (its peak, measured): the step runs
        # plainly, the fastest and never above plain autograd's peak. `result` is then store-all.
        self.plain = plain_peak is not None
        if self.plain:
            self.recomputed = [False] * len(profile.chain)
            self.expected = [plain_peak]
            return
        if not result.feasible:
            return
        ops = result.ops
        self.ops = [(o.kind, o.index, o.option) for o in ops]
        self.loss_index = [kind for kind, _, _ in self.ops].index("loss")
        forwards = [k for kind, k, _ in self.ops if kind in ("F_ck", "F_none", "F_all")]
        self.recomputed = [forwards.count(k) > 1 for k in range(len(profile.chain))]
        self.expected = profile.expected_op_peaks(ops)
        self.after_loss = simulate(profile.chain, ops).memory_after[self.loss_index]


class _Step:
    """One step's run of a schedule: the tensors the ops hold, and what was measured."""

    def __init__(self, owner, entry, x):
        self.owner, self.entry = owner, entry
        L = len(owner._stage_modules)
        self.a = [None] * (L + 1)
        self.t = [None] * (L + 1)  # (detached input, output carrying the stage's graph)
        self.g = [None] * (L + 1)
        self.a[0] = x
        self.forwarded = [False] * L
        self.first_draws = [None] * L  # the generators before a recomputed stage first ran
        self.op_peaks = []
        self.op_totals = []  # the same, with what autograd and the caller held beside
        self.op_steps = []  # the same, less the output the caller kept (its own tensor)
        self.caller_kept = 0
        self.residue = 0
        self.outside = 0
        self.earlier = None  # the op's peak before its latest new parameter gradient, above base
        self.new_gradients = None  # remat._torch.NewGradients, where parameters have none
        self.returned = lambda: None  # what the caller got (a weak reference)
        self.output_in_tape = False  # whether that is the output of the tape t_L
        self.under = contextlib.nullcontext  # the step's autocast state (_under)

    def input_of(self, k):
        return self.a[k] if self.a[k] is not None else self.t[k][1]

    def forward(self, k, x, option=0):
        o = self.owner
        s = self.entry.stages[k] if option == 0 else self.entry.alternatives[k][option - 1]
        if not self.forwarded[k]:
            self.forwarded[k] = True
            if self.schedule.recomputed[k]:  # the draws its recomputation must repeat
                self.first_draws[k] = o._rng.save()
            with self.under():
                y = _in_stage(k, "forward", s, x)
        else:  # a recomputation: the same draws, buffers untouched
            now = o._rng.save()
            o._rng.restore(self.first_draws[k])
            _save_into(o._recompute[k], o._state.buffers[k])  # keep the current values
            try:
                with self.under():  # the forward's autocast state
                    y = _in_stage(k, "forward", s, x)
            finally:
                _copy_into(o._state.buffers[k], o._recompute[k])
                o._rng.restore(now)
        _check_output(k, x, y)
        profiled = self.entry.profile.outputs[k]
        if _shape(y) != profiled:
            raise ModelError(k, f"its output is {_describe(_shape(y), profiled)}, profiled as "
                                f"{_describe(profiled, _shape(y))} (under "
                                f"{_autocast_name(self.entry.autocast)}); a stage must give the "
                                "same shape and dtype for the same input")
        return y

    def run(self, kind, k, option=0):
        if kind in ("F_ck", "F_none"):
            with torch.no_grad():
                y = self.forward(k, self.input_of(k))
            self.a[k + 1] = y
            if kind == "F_none":
                self.a[k] = None
        elif kind == "F_all":  # the parts run their ops with gradients enabled
            x = _recording_input(self.input_of(k))
            y = self.forward(k, x, option)
            if not y.requires_grad:
                raise ModelError(k, "its output does not require grad when recorded")
            self.t[k + 1] = (x, y)
        elif kind == "B":
            x, y = self.t[k + 1]
            gk = self.g[k + 1]
            self.t[k + 1] = None
            self.g[k + 1] = None
            # A parameter without a gradient gets the one its backward computed (where one
            # that exists is added to): plain autograd's cost, which a zero gradient defined
            # beforehand would double. Gradients are outside the budget: from the moment the new
            # one is kept, the op is measured above it (split in two, as the C++ executor does
            # for the loss's parameters).
            watch = self.new_gradients
            if watch is not None:
                watch.watch(y, x, self.base)
            try:
                _in_stage(k, "backward", torch.autograd.backward, y, gk)
            finally:
                if watch is not None:
                    self.base, self.earlier = watch.unwatch()
            self.g[k] = x.grad if x.requires_grad else None
            del x, y, gk
            self.a[k] = None
        else:
            raise ValueError(f"remat.torch runs schedules without offloading only (op {kind}"
                             f"({k}))")


def _refuse_backwards_not_supported(again, probe):
    """The backwards a Checkpointed's output refuses, whether it runs a schedule or runs plainly
    (the same at every budget): a second one (`again`), one that records a graph, one of some
    tensors only (`probe`'s node, which only a backward of every leaf runs; None: not checked)."""
    if again:
        raise RuntimeError("remat.torch: this output's schedule has already run its backward; "
                           "a second backward through it (retain_graph) is not supported")
    if torch.is_grad_enabled():  # the engine runs a create_graph backward with grad on
        raise RuntimeError(
            "remat.torch: a backward that records a graph of its own (create_graph=True, as "
            "a gradient penalty or a second derivative needs) is not supported: the "
            "schedule runs its backwards within this one, and the gradients they give carry "
            "no graph. Compute that loss on the model run plainly, or checkpoint it with "
            "torch.utils.checkpoint.checkpoint(..., use_reentrant=False), which supports it")
    if probe is not None and not torch._C._will_engine_execute_node(probe):
        raise RuntimeError(
            "remat.torch: torch.autograd.grad and backward(inputs=...) through a "
            "Checkpointed are not supported: the schedule's backwards accumulate every "
            "parameter's gradient into its .grad, as loss.backward() does, which these must "
            "not. Call loss.backward() and read the gradients from .grad (the input's too, "
            "where it requires grad)")


class _Run(torch.autograd.Function):
    @staticmethod
    def forward(ctx, owner, entry, schedule, x, probe):
        ctx.probe = probe.grad_fn
        step = _Step(owner, entry, x)
        step.schedule = schedule
        ctx.step = step
        owner._started = step
        return owner._forward_part(step)

    @staticmethod
    def backward(ctx, g):
        step = ctx.step
        _refuse_backwards_not_supported(step is None, ctx.probe)
        ctx.step = None
        gx = step.owner._backward_part(step, g)
        return None, None, None, gx, None


@dataclass
class _Entry:
    profile: Profile
    schedules: dict = field(default_factory=dict)  # (budget, solver, slots, plainly, K) -> _Schedule
    autocast: tuple = _NO_AUTOCAST  # the state the stages were profiled and run under
    alternatives: list = None  # per stage, options 1, 2, ... as checked under that state
    store_all_result: object = None  # the store-all schedule's SolveResult
    least_budgets: dict = field(default_factory=dict)  # (solver, slots, K) -> its least budget
    plain_peak: int = None  # plain autograd's step, measured where a loss is given
    stages: list = None  # the modules the steps run: the stages, or each compiled

    def store_all(self, in_flight=1):
        """What storing everything needs at this shape: its peak, plus K - 1 times what it holds
        at the loss with K = `in_flight` micro-batches in flight."""
        if self.store_all_result is None:
            self.store_all_result = solve(self.profile.chain, 1 << 62, solver="store-all")
        r = self.store_all_result
        return r.peak_memory + (in_flight - 1) * r.retained

    def least(self, solver, slots, in_flight=1):
        """The least budget `solver` fits at this shape with `in_flight` micro-batches in flight
        (what store-all needs where none does)."""
        key = (solver, slots, in_flight)
        if key not in self.least_budgets:
            least = solve(self.profile.chain, 0, solver=solver, slots=slots,
                          in_flight=in_flight).min_feasible_budget
            if least is None or least < 0 or least >= 1 << 62:
                least = self.store_all(in_flight)
            self.least_budgets[key] = least
        return self.least_budgets[key]


class Checkpointed(torch.nn.Module):
    """`model` run within `budget` bytes of activations, tapes, their gradients and workspace
    (the input included; parameters, their gradients and the optimizer's state outside it), by
    the schedule of `solver`.

    `model` is an nn.Sequential or a list of modules (one stage each; a stage whose output is
    its input or a view of it, such as an in-place ReLU, is fused with the stage before it), or
    any other nn.Module, which is traced with torch.fx and cut at its cut points into blocks,
    one stage each (docs/python.md, "Any model"; `leaf_modules`, qualified names or classes of
    submodules to keep whole; a submodule whose code cannot be traced is kept whole anyway).
    `sample` is what the model is called with at construction, where it is profiled: a tensor,
    a tuple of positional arguments or a dict of keyword arguments; the chain starts from the
    first tensor argument, and the other arguments must need no gradient. An input of another
    shape is profiled when it first comes.

    `budget`: bytes, a size string ("8GB", "512MiB"), a share of the store-all peak ("40%"),
    the least budget that fits ("least"), or that plus a share of the span up to the store-all
    peak ("least+40%"). Sizes are measured on the machine that runs the step: its CPU or GPU
    picks kernels, workspaces and layouts, so a budget in bytes or as a share of store-all that
    fits on one machine may not on another; "least" and "least+N%" fit on any.
    `loss` is the function you train with, of what the model returns; given, it is profiled
    (the prediction of the loss's memory is exact) and the budget bounds the whole step
    `loss(m(x)).backward()` as the allocator measures it: the schedule gets the budget less
    `loss_reserve`, what the loss's side holds beside it during the backward. Without it the
    profile uses the mean square and the budget bounds the schedule (`outside_schedule` says
    what was beside it). With `loss` given, the profile also measures plain autograd's step
    (`plain_peak`); at budgets that hold it the model runs plainly, the fastest step and never
    above plain autograd's peak (`run_plainly=False` runs the schedule at every budget). `slots`
    is passed to remat.solve. `compile=True` (or a dict of torch.compile's keyword arguments)
    runs each stage compiled by torch.compile (profiled as compiled, once per input signature);
    `torch.compile(Checkpointed(...))` does the same, dynamo leaving the schedule's runner out of
    its graph, and so does `Checkpointed(torch.compile(model))` (torch.compile's default
    options). `in_flight=K` solves for K micro-batches in flight, as on a pipeline stage
    (docs/pipelines.md): the schedule keeps its peak plus K - 1 times what it holds between its
    forward and its backward (`schedule.retained`) within the budget, and "least", "least+N%" and
    "N%" are in those terms (`micro_batches_in_flight` gives each stage's K); the model then runs
    no plain step.

    `m(x)` in training mode with gradients enabled runs the schedule's forward part and returns
    what the model returns; its backward (`loss(y).backward()`) runs the rest. Otherwise (eval
    mode or no_grad) the model simply runs. After a step: `schedule`, `expected_peak`,
    `measured_peak`, `expected_op_peaks`, `op_peaks`, `within_budget`, `as_predicted`,
    `outside_schedule`, `total_peak`, `step_peak`, and `report()`; at any time `budget_bytes`,
    `least_budget`, `store_all_peak` and `loss_reserve`.
    """

    def __init__(self, model, sample, budget, solver="optimal", loss=None, slots=None,
                 warmup=1, runs=3, enforce_budget=False, leaf_modules=(), block_options=True,
                 run_plainly=True, compile=False, in_flight=1):
        super().__init__()
        if isinstance(in_flight, bool) or not isinstance(in_flight, numbers.Integral):
            raise TypeError(f"in_flight must be an int (micro-batches in flight), not "
                            f"{type(in_flight).__name__}")
        if in_flight < 1:
            raise ValueError(f"in_flight must be >= 1 (got {in_flight})")
        self.in_flight = int(in_flight)
        original = getattr(model, "_orig_mod", None)
        if isinstance(original, torch.nn.Module) and type(model).__name__ == "OptimizedModule":
            # Checkpointed(torch.compile(model)): the model, each block compiled.
            model = original
            compile = compile or True
        self.split = None
        self.fused = []
        self._sharded_groups = []  # process groups whose ranks run one schedule (FSDP2)
        self._rng_device = None
        if isinstance(model, (torch.nn.Sequential, torch.nn.ModuleList, list, tuple)):
            if not isinstance(sample, torch.Tensor):
                raise TypeError("with stages (an nn.Sequential or a list of modules), the sample "
                                f"is one tensor, not {type(sample).__name__}")
            x = sample
            listed = _stage_list(model)
            self._sharded_groups = _prepare_sharded(
                model if isinstance(model, torch.nn.Module) else None, listed)
            with _under(_autocast_state())():
                stages, self.fused = _fuse_aliasing(listed, x, _Rng(x.device))
            self.user_loss = loss
            self.loss = loss or _default_loss
        elif isinstance(model, torch.nn.Module):
            if _sharded_modules(model):
                raise ModelError(None, "a model sharded with fully_shard (FSDP2) is not traced "
                                       "(torch.fx would run FSDP's hooks on its proxies): pass "
                                       "its blocks as an nn.Sequential or a list, each sharded")
            args, kwargs = _sample_args(sample)
            try:
                with _under(_autocast_state())():
                    self.split = _fx.split(model, args, kwargs, leaf_modules)
            except _fx._ModelError as e:
                raise ModelError(None, str(e)) from None
            self.model = model
            x = self._bind(args, kwargs, first=True)
            stages = self.split.blocks
            rebuild = self.split.rebuild
            self.user_loss = loss
            self.loss = (lambda y: loss(rebuild(y))) if loss is not None else _default_loss
            self._warn_few_cuts()
        else:
            raise TypeError("remat.torch takes an nn.Module, an nn.Sequential or a list of "
                            f"modules, not a {type(model).__name__}")
        self.stages = torch.nn.ModuleList(stages)
        self._stage_modules = list(self.stages)  # indexing a ModuleList costs a Python call
        # Per stage, the other ways to run its recording forward (options 1, 2, ...): kept in a
        # plain list, since they own nothing the stages do not.
        self._alternatives = [[] for _ in stages]
        self.option_refusals = []  # (block, option, why)
        self.block_options = block_options
        if self.split is not None and block_options and _selective.AVAILABLE:
            for k, block in enumerate(stages):
                alt, why = _selective.option_for(block)
                if alt is not None:
                    self._alternatives[k].append(alt)
                else:
                    self.option_refusals.append((k, 1, why))
        self.budget = budget
        self.solver = solver
        self.slots = slots
        self.warmup, self.runs = warmup, runs
        self.enforce_budget = enforce_budget
        self.run_plainly = run_plainly
        # (not self.compile: that is nn.Module.compile(), which works as torch.compile(m) does)
        self._compile_options = _compile_options(compile)
        self._compiled_stages = None  # torch.compile of each stage, made when first needed
        self._plain_watch = None  # the hooks of the latest plain step, until its backward ends
        self._shapes = {}
        self._state = None
        self._rng = _Rng(x.device)
        self._meter = _meter_for(x)
        self._probe = torch.empty(0, requires_grad=True)
        self.last = None
        compiled = self._compile_options is not None
        self._schedule_for(x, compiled)
        self._last_key = self._key(x, compiled)

    # -- traced models: arguments and output --

    def _bind(self, args, kwargs, first=False):
        """The chain's input among a call's arguments; the others go to the blocks' context."""
        split = self.split
        try:
            bound = _fx.bind(split.signature, args, kwargs)
        except TypeError as e:
            raise TypeError(f"{type(self.model).__name__}.forward: {e}") from None
        except _fx._ModelError as e:
            raise ModelError(None, str(e)) from None
        values = {}
        for name, p in split.signature.parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            values[name] = bound.arguments[name] if name in bound.arguments else p.default
        if first:
            self._traced_with = {n: v for n, v in values.items()
                                 if not isinstance(v, torch.Tensor)}
        for n, v in self._traced_with.items():
            if not (values[n] is v or (type(values[n]) is type(v) and values[n] == v)):
                raise ModelError(None, f"argument '{n}' is {values[n]!r}; the model was traced "
                                       f"with {v!r}, and its blocks hold that value")
        x = values[split.input_name]
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"argument '{split.input_name}' must be a tensor (the chain's input), "
                            f"not {type(x).__name__}")
        for name, key in split.extra_inputs:
            v = values[name]
            if isinstance(v, torch.Tensor) and v.requires_grad:
                raise ModelError(None, f"input '{name}' requires grad: only the first tensor "
                                       f"argument ('{split.input_name}') is the chain's input")
            split.context.values[key] = v
        self._extras = tuple(_shape(values[name]) if isinstance(values[name], torch.Tensor)
                             else None for name, _ in split.extra_inputs)
        return x

    def _key(self, x, compiled=False):
        """A profile's key: the input's shape, dtype and device, whether it requires grad (plain
        autograd's step computes its gradient only then), whether the stages run compiled, the
        other tensor inputs' (a traced model's), and the autocast state (last)."""
        state = _autocast_state()
        shape = (_shape(x), x.requires_grad, compiled)
        return (shape, self._extras, state) if self.split is not None else (shape, state)

    def _stages_for(self, compiled):
        if not compiled:
            return list(self.stages)
        if self._compiled_stages is None:
            options = self._compile_options if self._compile_options is not None else {}
            self._compiled_stages = [torch.compile(s, **options) for s in self.stages]
        return self._compiled_stages

    def _warn_few_cuts(self):
        shares = self.split.shares
        k = max(range(len(shares)), key=lambda i: shares[i])
        if shares[k] > 0.5:
            nodes = self.split.block_nodes[k]
            warnings.warn(
                f"{type(self.model).__name__}: block {k} of {len(shares)} (nodes '{nodes[0]}' .. "
                f"'{nodes[-1]}', {len(nodes)} of {self.split.nodes}) holds "
                f"{shares[k]:.0%} of the model's activation bytes: remat can only keep or "
                "recompute it whole, so budgets below its size are infeasible (the graph has "
                f"{self.split.cut_points} cut points)", FewCutsWarning, stacklevel=3)

    # -- profiles and schedules --

    def _discover(self, sample):
        if self._state is not None:
            return
        with _under(_autocast_state())():
            self._state = _discover(list(self.stages), sample, self.loss, self._rng)
        self._candidates = self._alternatives
        self._alternatives_by_state = {}
        self._alternatives = self._alternatives_under(_autocast_state(), sample)
        self._recompute = [_clones(bs) for bs in self._state.buffers]
        self._stage_buffers = [b for bs in self._state.buffers for b in bs]
        self._step_start = _clones(self._stage_buffers)

    def _alternatives_under(self, state, sample):
        """The alternatives that give plain autograd's results under autocast `state` (checked
        on `sample` when the state first comes: an option equal in float32 may not be under a
        cast)."""
        kept = self._alternatives_by_state.get(state)
        if kept is None:
            kept = self._candidates
            if any(kept):
                with _under(state)():
                    kept, refused = _check_alternatives(list(self.stages), kept, sample,
                                                        self._rng, self._state.buffers)
                if state != _NO_AUTOCAST:
                    refused = [(k, o, f"{why} (under {_autocast_name(state)})")
                               for k, o, why in refused]
                self.option_refusals += refused
            self._alternatives_by_state[state] = kept
        return kept

    def _schedule_for(self, x, compiled=False):
        self._discover(x)
        key = self._key(x, compiled)
        entry = self._shapes.get(key)
        if entry is None:
            state = key[-1]
            stages = self._stages_for(compiled)
            # Compiled blocks record as compiled; options inside them are not offered.
            alternatives = ([[] for _ in stages] if compiled
                            else self._alternatives_under(state, x))
            with _under(state)():
                profiled = _profile(stages, x, self.loss, self._meter, self._rng, self.warmup,
                                    self.runs, alternatives)
                plain = (_plain_step_peak(stages, x, self.loss, self._meter, self._rng,
                                          self._state)
                         if self.user_loss is not None else None)
            if self._sharded_groups:
                profiled, plain = _agree(profiled, plain, self._sharded_groups)
            entry = _Entry(profiled, autocast=state, alternatives=alternatives, plain_peak=plain,
                           stages=stages)
            self._shapes[key] = entry
        return entry, self._schedule_for_key(entry)

    @property
    def chain(self):
        """The profiled chain of the last input shape run (or of the sample)."""
        return self._current[0].profile.chain

    @property
    def schedule(self):
        """The SolveResult the steps run at the last input shape and the budget: its `ops`,
        `makespan`, `budget` (the schedule's share of the step's budget), `feasible`."""
        return self._current[1].result

    @property
    def plan(self):
        """Deprecated alias of `schedule`, kept for one release."""
        warnings.warn("Checkpointed.plan is deprecated: use Checkpointed.schedule (the same "
                      "SolveResult)", DeprecationWarning, stacklevel=2)
        return self.schedule

    @property
    def expected_peak(self):
        """What the schedule should allocate at most, by the profile (the model's peak, or below it
        by a backward's slack)."""
        entry, schedule = self._current
        if not schedule.result.feasible:
            return None
        return max([entry.profile.chain.input_size] + schedule.expected)

    @property
    def _current(self):
        entry = self._shapes[self._last_key]
        return entry, self._schedule_for_key(entry)

    @property
    def budget_bytes(self):
        """The budget in bytes at the last input shape ("40%" resolved against that shape's
        store-all peak)."""
        return self._budget_of(self._current[0])

    @property
    def loss_reserve(self):
        """Bytes of the budget kept for what the loss's side of the step holds beside the
        schedule during the backward, at the last input shape, where `loss` was given (0
        otherwise): the loss's scalar and the gradient autograd starts from, what the loss's
        backward keeps until the backward ends, and the output's gradient, which autograd keeps
        until the model's backward returns; with `in_flight` = K, also K - 1 times what a loss
        holds from its forward to its backward (on a pipeline's last stage each micro-batch's
        loss runs right after its forward). The schedule is solved for the budget less this."""
        return self._reserve(self._current[0])

    @property
    def least_budget(self):
        """The least budget any schedule of `solver` fits at the last input shape, in the
        budget's terms (the whole step's, with `loss_reserve`, where `loss` was given)."""
        entry = self._current[0]
        return entry.least(self.solver, self.slots, self.in_flight) + self._reserve(entry)

    @property
    def store_all_peak(self):
        """The peak of storing everything at the last input shape, in the budget's terms (the
        schedule's, with `loss_reserve` where `loss` was given; with `in_flight` = K, plus K - 1
        times what it holds at the loss): the budget "100%" names."""
        entry = self._current[0]
        return entry.store_all(self.in_flight) + self._reserve(entry)

    @property
    def plain_peak(self):
        """Plain autograd's step peak at the last input shape (the stages run in sequence, the
        loss, its backward; the parameters' gradients outside it), measured when the shape is
        profiled, where `loss` was given (None otherwise). At budgets from it up the model runs
        plainly: the fastest step, and never above plain autograd's peak."""
        return self._current[0].plain_peak

    def _reserve(self, entry):
        # With K in flight (a pipeline's last stage, which runs each micro-batch's loss right
        # after its forward), the K - 1 others each hold their loss until their backward.
        if self.user_loss is None:
            return 0
        return entry.profile.loss_beside + (self.in_flight - 1) * entry.profile.loss_held

    def _budget_of(self, entry):
        reserve = self._reserve(entry)
        K = self.in_flight
        return _budget_bytes(self.budget, lambda: entry.store_all(K) + reserve,
                             lambda: entry.least(self.solver, self.slots, K) + reserve)

    def _schedule_for_key(self, entry):
        budget = self._budget_of(entry)
        k = (budget, self.solver, self.slots, self.run_plainly, self.in_flight)
        if k not in entry.schedules:
            reserve = self._reserve(entry)
            # (Plain autograd's step is measured for one micro-batch; with several in flight the
            # schedules, store-all among them, are judged with what the others hold.)
            if (self.run_plainly and self.in_flight == 1 and entry.plain_peak is not None
                    and budget >= entry.plain_peak):
                result = solve(entry.profile.chain, 1 << 62, solver="store-all")
                entry.schedules[k] = _Schedule(entry.profile, result, budget, reserve,
                                               entry.plain_peak)
            else:
                result = solve(entry.profile.chain, max(0, budget - reserve), solver=self.solver,
                               slots=self.slots, in_flight=self.in_flight)
                entry.schedules[k] = _Schedule(entry.profile, result, budget, reserve)
        return entry.schedules[k]

    # -- running --

    def forward(self, *args, **kwargs):
        if self.split is None and (kwargs or len(args) != 1):
            raise TypeError("a Checkpointed of stages takes one tensor")
        if not (self.training and torch.is_grad_enabled()):
            if self.split is not None:
                return self.model(*args, **kwargs)
            x = args[0]
            for s in self.stages:
                x = s(x)
            return x
        # Under torch.compile(Checkpointed(...)), dynamo traces this far: the step runs outside
        # its graph (a schedule is Python state that changes at every op), the stages compiled.
        return self._step(args, kwargs, bool(self._compile_options is not None
                                             or _is_compiling()))

    @_outside_dynamo
    def _step(self, args, kwargs, compiled):
        x = args[0] if self.split is None else self._bind(args, kwargs)
        if self._plain_watch is not None:
            # A plain step whose backward did not run (or was refused): its hooks on the
            # parameters' gradient accumulators must not measure this one.
            self._plain_watch.unwatch()
            self._plain_watch = None
        entry, schedule = self._schedule_for(x, compiled)
        self._last_key = self._key(x, compiled)
        result = schedule.result
        if not (result.feasible or schedule.plain):
            least = result.min_feasible_budget
            if least is not None and 0 <= least < 1 << 62:
                least += schedule.reserve
            kept = (f" ({schedule.reserve} of them kept for the loss's side of the step)"
                    if schedule.reserve else "")
            raise BudgetError(
                f"no schedule fits {schedule.budget} bytes{kept} at input {tuple(x.shape)} "
                f"({result.solver}); the least is {least} bytes (sizes are measured on this "
                "machine; budget='least+N%' names a feasible budget on any)", least)
        self.last = None
        if schedule.plain:
            y = self._forward_plainly(entry, schedule, x)
            return y if self.split is None else self.split.rebuild(y)
        probe = self._probe.view_as(self._probe)  # a node that only a full backward runs
        y = _Run.apply(self, entry, schedule, x, probe)
        self._started.returned = weakref.ref(y)
        self._started = None
        return y if self.split is None else self.split.rebuild(y)

    def _forward_plainly(self, entry, schedule, x):
        """Plain autograd's forward (the budget holds its step): its backward measures the step
        whole, as the profile measured it."""
        step = _Step(self, entry, x)
        step.schedule, step.expected = schedule, schedule.expected
        step.a = step.t = step.g = None
        step.under = _under(entry.autocast)
        _define_gradients(self._state.loss_parameters)
        if self._sharded_groups:
            _define_gradients(self._state.parameters)
        watch = (_meter.NewGradients(_Windows(self._meter))
                 if any(p.grad is None for p in self._state.parameters) else None)
        step.t0 = time.perf_counter()

        def end(peak):
            # An output the caller kept through the backward is the caller's (as a schedule
            # counts it beside the schedule): plain autograd's step frees it after the loss.
            held = step.returned()
            step.caller_kept = _nbytes(held) if held is not None else 0
            del held
            step.op_peaks = step.op_steps = [peak - step.caller_kept]
            step.op_totals = [peak]
            step.measured_ms = (time.perf_counter() - step.t0) * 1e3
            step.new_gradients = None
            self._plain_watch = None
            self.last = step
        step.new_gradients = self._plain_watch = watch  # held until the backward ends
        probe = self._probe.view_as(self._probe)
        with step.under():  # the cast cache off, as the profile ran it
            y = _plain_forward(entry.stages, x, self._meter, watch, end, probe)
        step.returned = weakref.ref(y)
        return y

    def _measure(self, step, i, outside):
        total = self._meter.window_peak() - step.base
        if step.earlier is not None:
            total = max(total, step.earlier)
        peak = total - outside
        step.op_peaks.append(peak)
        step.op_totals.append(total)
        step.op_steps.append(total - step.caller_kept)
        if not self.enforce_budget:
            return
        schedule = step.schedule
        if peak > schedule.result.budget:
            raise BudgetError(f"op {i} ({schedule.result.ops[i]}) allocated {peak} bytes, above "
                              f"the schedule's budget of {schedule.result.budget}", None)
        if schedule.reserve and step.op_steps[-1] > schedule.budget:
            raise BudgetError(f"op {i} ({schedule.result.ops[i]}): the step held "
                              f"{step.op_steps[-1]} bytes with the loss's side, above the budget "
                              f"of {schedule.budget}", None)

    def _forward_part(self, step):
        schedule = step.schedule
        step.expected = schedule.expected
        step.under = _under(step.entry.autocast)
        # The stages' parameters get their gradients as in plain autograd (_Step.watch); the
        # loss's graph runs in the caller's backward, outside the schedule's ops.
        _define_gradients(self._state.loss_parameters)
        if self._sharded_groups:  # FSDP adds a stage's reduced gradients to the sharded ones
            _define_gradients(self._state.parameters)
        _save_into(self._step_start, self._stage_buffers)
        step.rng_at_start = self._rng.save()
        m = self._meter
        m.sync()
        step.base = m.current() - _nbytes(step.a[0])
        step.t0 = time.perf_counter()
        L = len(self._stage_modules)
        try:
            with torch.enable_grad():  # for F_all; F_ck and F_none disable it (a context each)
                for i in range(schedule.loss_index):
                    m.open_window()
                    step.run(*schedule.ops[i])
                    m.sync()
                    self._measure(step, i, 0)
        except BaseException:
            _copy_into(self._stage_buffers, self._step_start)
            self._rng.restore(step.rng_at_start)
            step.a = step.t = step.g = None
            raise
        # The loss op: a_L (or the output in t_L) goes to the caller, and its gradient comes
        # back to _Run.backward. The model frees a_L when the loss ends, and so does the
        # schedule: the caller may drop the output as soon as the loss's forward has read it
        # (`loss(m(x))`, with a loss that saves something else, as cross entropy saves its
        # softmax), which would make the loss's backward an a_L below the prediction. The
        # schedule holds an alias: the output itself will carry _Run's node, which holds the
        # step (a cycle).
        if step.a[L] is not None:
            y = step.a[L]
            step.a[L] = y.detach()
        else:
            y = step.t[L][1].detach()
            step.output_in_tape = True
        m.open_window()
        return y

    def _backward_part(self, step, g):
        m = self._meter
        m.sync()
        schedule, L = step.schedule, len(self._stage_modules)
        # Recomputations run under the forward's autocast state, whatever the caller's backward
        # runs under; the backwards run under the caller's, as plain autograd's do.
        step.under = _under(step.entry.autocast)
        # The loss op ran between the two parts: its peak is what the window since the forward
        # part ended reached.
        step.op_peaks.append(m.window_peak() - step.base)
        step.op_totals.append(step.op_peaks[-1])
        step.op_steps.append(step.op_peaks[-1])
        step.a[L] = None  # the loss has ended
        if (g.layout == torch.strided and g.is_contiguous()
                and _storage_bytes(g) == g.numel() * g.element_size()):
            step.engine_gradient_bytes = _nbytes(g)
        else:  # an expanded gradient (a sum's): the schedule's g_L is a dense copy of it
            step.engine_gradient_bytes = 0
            g = g.clone(memory_format=torch.contiguous_format)
        step.g[L] = g
        del g
        # What autograd and the caller hold beside the schedule from here on (the loss's scalar
        # and its gradient, the output if the caller kept it) is outside the schedule's budget:
        # measured once, and the backward ops are measured above it.
        step.residue = m.current() - step.base - schedule.after_loss
        step.outside = step.residue
        if any(p.grad is None for p in self._state.parameters):
            step.new_gradients = _meter.NewGradients(_Windows(self._meter))
        try:
            with torch.enable_grad():  # as in the forward part
                for i in range(schedule.loss_index + 1, len(schedule.ops)):
                    kind, k, option = schedule.ops[i]
                    m.open_window()
                    step.earlier = None
                    step.run(kind, k, option)
                    m.sync()
                    self._measure(step, i, step.residue)
                    if kind == "B" and k == L - 1:
                        # Autograd keeps the gradient it handed to _Run.backward until that
                        # returns; and an output the caller still holds outlives the tape it
                        # belonged to.
                        step.residue += step.engine_gradient_bytes
                        held = step.returned() if step.output_in_tape else None
                        if held is not None:
                            step.residue += _nbytes(held)
                            step.caller_kept = _nbytes(held)
                            del held
                    step.outside = max(step.outside, step.residue)
        finally:
            gx = step.g[0]
            step.a = step.t = step.g = None
        step.measured_ms = (time.perf_counter() - step.t0) * 1e3
        self.last = step
        return gx

    # -- what the last step measured --

    def _last(self, what):
        if self.last is None:
            raise RuntimeError(f"{what}: no step has completed its backward yet")
        return self.last

    @property
    def op_peaks(self):
        """What each op of the last step allocated at most, bytes above the step's start (the
        backward's ops: above what autograd and the caller held outside the schedule)."""
        return list(self._last("op_peaks").op_peaks)

    @property
    def expected_op_peaks(self):
        return list(self._last("expected_op_peaks").expected)

    @property
    def measured_peak(self):
        """The most the last step's schedule allocated (largest of op_peaks, or the input)."""
        s = self._last("measured_peak")
        return max([_nbytes_input(s)] + s.op_peaks)

    @property
    def within_budget(self):
        """Whether the last step kept its budget: the whole step (`step_peak`) where `loss` was
        given, the schedule's ops (`measured_peak`) otherwise."""
        s = self._last("within_budget")
        if self.measured_peak > s.schedule.result.budget:
            return False
        return s.schedule.reserve == 0 or self.step_peak <= s.schedule.budget

    @property
    def as_predicted(self):
        s = self._last("as_predicted")
        return s.op_peaks == s.expected

    @property
    def outside_schedule(self):
        """Bytes that autograd and the caller held beside the schedule during the last backward:
        the loss's scalar and its gradient, the output if the caller still held it, and from the
        last stage's backward on, the output's gradient, which autograd keeps until the whole
        backward returns."""
        return self._last("outside_schedule").outside

    @property
    def total_peak(self):
        """The most allocated during the last step, the schedule's and `outside_schedule`
        together: what a meter reset before `loss(m(x)).backward()` reads after it (with the
        input, less what was allocated before the step)."""
        s = self._last("total_peak")
        return max([_nbytes_input(s)] + s.op_totals)

    @property
    def step_peak(self):
        """`total_peak` less the output where the caller kept it through the backward (the
        caller's own tensor): what the budget bounds where `loss` was given."""
        s = self._last("step_peak")
        return max([_nbytes_input(s)] + s.op_steps)

    @property
    def measured_ms(self):
        return self._last("measured_ms").measured_ms

    def _options_line(self):
        if not self.block_options:
            return "one option per block (block_options=False)"
        if not _selective.AVAILABLE:
            return ("one option per block: this torch has no selective checkpointing "
                    "(torch 2.4 and later)")
        offered = sum(1 for a in self._alternatives if a)
        line = (f"options inside blocks (selective checkpointing): {offered} of "
                f"{len(self._alternatives)} blocks")
        if self.option_refusals:
            line += " (not offered: " + "; ".join(
                f"block {k}: {why}" for k, _, why in self.option_refusals[:4]) + (
                "; ..." if len(self.option_refusals) > 4 else "") + ")"
        return line

    def _measured_line(self, schedule):
        """report()'s line on the last step, where it ran `schedule` (None otherwise)."""
        if self.last is None or self.last.schedule is not schedule:
            return None
        return (f"measured peak {self.measured_peak} bytes in {self.last.measured_ms:.1f} ms ("
                + ("as predicted" if self.as_predicted else "not as predicted")
                + (", within the budget" if self.within_budget else ", ABOVE the budget") + ")")

    def report(self, file=None):
        """Prints (to `file`, default stdout) and returns the blocks (stages) as profiled at the
        last input shape, the chosen schedule, and the predicted peak against the measured one
        of the last step."""
        entry, schedule = self._current
        chain = entry.profile.chain
        lines = []
        split = self.split
        if split is not None:
            lines.append(
                f"{type(self.model).__name__}: traced with torch.fx, {split.nodes} activation "
                f"nodes, {split.cut_points} cut points, {len(split.blocks)} blocks"
                + (f" ({len(split.dropped_cuts)} cut points not used: " + "; ".join(
                    f"'{n}': {why}" for n, why in split.dropped_cuts[:4])
                   + ("; ..." if len(split.dropped_cuts) > 4 else "") + ")"
                   if split.dropped_cuts else ""))
            if split.leaves:
                lines.append("kept whole (their code cannot be traced or placed): "
                             + ", ".join(split.leaves))
            lines.append(self._options_line())
        elif self.fused:
            lines.append("stages fused with the one before (their output is their input or a "
                         "view of it): " + ", ".join(map(str, self.fused)))
        if entry.stages is self._compiled_stages:
            lines.append("each block runs compiled by torch.compile (profiled as compiled; no "
                         "options inside blocks)")
        lines.append(f"{'block':>5} {'fwd ms':>8} {'bwd ms':>8} {'output B':>11} {'tape B':>11}"
                     + ("  share  nodes" if split is not None else "  module"))
        for k, st in enumerate(chain.stages):
            row = (f"{k:>5} {st.forward_time:>8.3f} {st.backward_time:>8.3f} "
                   f"{st.output_size:>11} {st.tape_size:>11}")
            for o, opt in enumerate(st.options[1:], start=1):
                row += f"  [option {o}: bwd {opt.backward_time:.3f} ms, tape {opt.tape_size} B]"
            if split is not None:
                nodes = split.block_nodes[k]
                row += (f"  {split.shares[k]:>5.0%}  {len(nodes)}: {nodes[0]}"
                        + (f" .. {nodes[-1]}" if len(nodes) > 1 else ""))
            else:
                row += "  " + type(self._stage_modules[k]).__name__
            lines.append(row)
        result = schedule.result
        lines.append(f"budget {self.budget!r} = {schedule.budget} bytes; store-all peak "
                     f"{self.store_all_peak} bytes; solver {result.solver}")
        if schedule.reserve:
            lines.append(f"the budget bounds the whole step: {schedule.reserve} bytes kept for "
                         "the loss's side of the backward (its scalar, the gradients autograd "
                         f"holds), {result.budget} for the schedule")
        else:
            lines.append("the budget bounds the schedule; the loss's side of the backward is "
                         "beside it (pass loss= to bound the whole step)")
        if schedule.plain:
            lines.append(f"plain autograd's step peaks at {entry.plain_peak} bytes, within the "
                         "budget: the model runs plainly, without a schedule")
            lines.append(f"predicted peak {self.expected_peak} bytes")
            ran = self._measured_line(schedule)
            lines.append(ran or "measured peak: no step at this shape and budget yet")
        elif not result.feasible:
            lines.append(f"no schedule fits; the least budget is {result.min_feasible_budget} "
                         "bytes")
        else:
            recomputed = [k for k, r in enumerate(schedule.recomputed) if r]
            lines.append(f"schedule: {len(result.ops)} ops, predicted {result.makespan:.3f} ms, "
                         f"blocks recomputed: {recomputed if recomputed else 'none'}")
            lines.append("  " + " ".join(str(o) for o in result.ops))
            lines.append(f"predicted peak {self.expected_peak} bytes")
            ran = self._measured_line(schedule)
            if ran:
                lines.append(ran)
                lines.append(f"the whole step peaked at {self.total_peak} bytes, "
                             f"{self.outside_schedule} of them beside the schedule"
                             + (f" ({self.total_peak - self.step_peak} the output the caller "
                                "kept)" if self.total_peak != self.step_peak else ""))
            else:
                lines.append("measured peak: no step at this shape and budget yet")
        text = "\n".join(lines)
        print(text, file=file)
        return text


def _nbytes_input(step):
    return step.entry.profile.chain.input_size


def _sample_args(sample):
    """A sample as (args, kwargs): a tensor, a tuple or list of positional arguments, or a dict
    of keyword arguments."""
    if isinstance(sample, torch.Tensor):
        return (sample,), {}
    if isinstance(sample, (tuple, list)):
        return tuple(sample), {}
    if isinstance(sample, dict):
        return (), dict(sample)
    raise TypeError("sample must be a tensor, a tuple of positional arguments or a dict of "
                    f"keyword arguments, not {type(sample).__name__}")
