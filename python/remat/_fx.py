"""Any nn.Module as a chain of blocks, for remat.torch.Checkpointed (docs/python.md, "Any
model").

The model is traced with torch.fx, run once on the sample node by node to learn each value
(tensor sizes, which outputs alias an input), described as a remat.Graph and cut at the cut
points that remat.linearize finds (the C++ definition, docs/graphs.md); the fx graph is then
split at those cut points into one GraphModule per block, each a stage mapping the activation
that crosses the cut to the next one.

What each fx node is:

* the chain's input: the model's first tensor argument;
* an activation: a node that reads an activation (or the input) and gives tensors; a node of
  remat's graph, in its block;
* meta: a node that reads activations and gives no tensor (`x.shape[0]`, `x.size(1)`): not in
  remat's graph (it holds no memory); computed in the block that can compute it first, and kept
  in the shared context for later blocks that read it;
* free: a node that reads no activation (parameters, buffers and constants through get_attr,
  the other inputs, tensors made from them or from meta values): a global of remat's graph,
  recomputed inside each block that reads it (the other inputs come from the context).

An op whose output is one of its inputs (an in-place op such as ReLU(inplace=True), or one that
returns its input such as `contiguous()`) is an in-place node of remat's graph; later readers of
the input are pointed at the op's output (the same tensor). A cut that torch cannot run as a
stage is not used (the two blocks become one): a cut whose value the next block writes in place
or a view of (a leaf that requires grad cannot be), a cut whose value is no single tensor, and a block whose
output is its input or a view of it.
"""

from __future__ import annotations

import dataclasses
import dis
import inspect
import operator
import os
import sys
import traceback
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from ._core import Graph, linearize

_Tensor = torch.Tensor


# --- tracing ----------------------------------------------------------------------------------

class _Untraceable(Exception):
    """A model that cannot be traced even with its failing submodules as leaves."""

    def __init__(self, message):
        super().__init__(message)


# Reading these from a tensor gives its metadata, not its data (a branch on them depends only on
# the input's shapes and types). Not requires_grad: the tracer computes values without
# gradients, so the sample's would not be the step's.
_META_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "element_size", "stride",
                 "get_device", "is_floating_point", "is_complex", "is_contiguous"}
_META_ATTRIBUTES = {"shape", "dtype", "device", "ndim", "layout", "is_cuda", "is_sparse",
                    "is_quantized", "is_meta"}


def _traced_as(value, expected, where):
    """A guard the tracer puts in the graph where the model's code branched on its input's
    shapes: the blocks hold the branch the sample took."""
    if bool(value) != expected:
        raise RuntimeError(f"remat.torch: at {where} the model was traced with this condition "
                           f"{expected}, and this input makes it {not expected}: the blocks hold "
                           "the other branch; make a Checkpointed with a sample of this shape")


def _length_is(value, expected, where):
    if len(value) != expected:
        raise RuntimeError(f"remat.torch: at {where} the model was traced iterating over "
                           f"{expected} values, and this input gives {len(value)}; make a "
                           "Checkpointed with a sample of this shape")


class _Tracer(fx.Tracer):
    """fx's tracer with (1) `leaves`, qualified names of submodules traced as one node each (a
    module called that is not a submodule of the model is traced through), (2)
    the qualified name of the innermost submodule being traced kept on every node
    (node.meta["remat_module"]) and on an exception raised inside it (`_remat_module`), (3)
    _proxy_iter in place of Proxy.__iter__ while it traces, where that is needed, and (4) with
    `inputs` (the sample's values by parameter name), each node's value on the sample, so that
    code that branches or loops on its input's shapes (`if x.shape[0] != n`, as transformers'
    mask functions do) is traced along the sample's branch, with a guard node (_traced_as,
    _length_is) that makes an input taking another branch an error. Branches on a tensor's data
    are not followed: they stay fx's TraceError (the submodule becomes a leaf)."""

    def __init__(self, leaves, inputs=None):
        super().__init__()
        self.leaves = set(leaves)
        self.stack = []
        self.inputs = inputs
        self.values = {}  # node -> its value on the sample, where it could be computed
        self.static = set()  # nodes whose value derives from shapes and constants, not data
        self.evaluating = False  # while _evaluate runs a node on the sample
        self.dict_types = {}
        self.depth = 0

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        if self.evaluating:  # a parameter read by a leaf run on the sample: its value
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def is_leaf_module(self, m, module_qualified_name):
        return module_qualified_name in self.leaves or super().is_leaf_module(
            m, module_qualified_name)

    def call_module(self, m, forward, args, kwargs):
        if self.evaluating:  # a leaf's own submodules, run on the sample: not traced
            return forward(*args, **kwargs)
        try:
            name = self.path_of_module(m)
        except NameError:
            # A module that is not a submodule of the model (held in a global or made in the
            # forward: transformers' kernel-replaceable functions are such modules): traced
            # through, as the function it is.
            return forward(*args, **kwargs)
        self.stack.append(name)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception as e:
            if not hasattr(e, "_remat_module"):
                e._remat_module = name
            raise
        finally:
            self.stack.pop()

    def _evaluate(self, n):
        """n's value on the sample, from its inputs' values (none where one is unknown or the op
        fails: a branch on it is then fx's error)."""
        ins = _arg_nodes(n)
        if any(m not in self.values for m in ins):
            return
        get = lambda a: fx.node.map_aggregate(  # noqa: E731
            a, lambda x: self.values[x] if isinstance(x, fx.Node) else x)
        self.evaluating = True
        try:
            with torch.no_grad():
                if n.op == "placeholder":
                    if n.target not in self.inputs:
                        return
                    v = self.inputs[n.target]
                elif n.op == "get_attr":
                    v = self.root
                    for atom in n.target.split("."):
                        v = getattr(v, atom)
                elif n.op == "call_function":
                    v = n.target(*get(n.args), **get(n.kwargs))
                elif n.op == "call_method":
                    args = get(n.args)
                    v = getattr(args[0], n.target)(*args[1:], **get(n.kwargs))
                elif n.op == "call_module":
                    v = self.root.get_submodule(n.target)(*get(n.args), **get(n.kwargs))
                else:
                    return
        except Exception:
            return
        finally:
            self.evaluating = False
        self.values[n] = v
        if _tensors(v):
            return
        reads_metadata = (
            (n.op == "call_method" and n.target in _META_METHODS)
            or (n.op == "call_function" and n.target is getattr and len(n.args) > 1
                and n.args[1] in _META_ATTRIBUTES))
        if n.op in ("placeholder", "get_attr") or reads_metadata or all(
                m in self.static for m in ins):
            self.static.add(n)

    def create_arg(self, a):
        """fx makes every dict an immutable_dict: the classes of the dicts in the last value
        converted at the top level (the model's output, when the output node is made) are kept
        in self.dict_types, by path (transformers' ModelOutput). The model's output may also
        hold dataclasses, which fx cannot carry: each becomes the dict of its fields, its class
        kept the same way."""
        classes = {}
        if self.depth == 0 and sys._getframe(1).f_code is _TRACE_CODE:  # the output's value
            a = _without_dataclasses(a, (), classes)
        self.depth += 1
        try:
            return super().create_arg(a)
        finally:
            self.depth -= 1
            if self.depth == 0:
                self.dict_types = {**_dict_classes(a), **classes}

    def create_node(self, kind, *args, **kwargs):
        node = super().create_node(kind, *args, **kwargs)
        node.meta["remat_module"] = self.stack[-1] if self.stack else ""
        if kind == "output":
            node.meta["remat_dict_types"] = self.dict_types
        elif self.inputs is not None:
            self._evaluate(node)
        return node

    def to_bool(self, obj):
        n = obj.node
        if n not in self.static:
            return super().to_bool(obj)
        v = bool(self.values[n])
        self.create_proxy("call_function", _traced_as, (obj, v, _user_line()), {})
        return v

    def length(self, obj):
        """len() of a Proxy (fx has no tracer hook for it): the sample's, where it derives from
        shapes (`(*x.shape[:-1], -1)` takes the length of a slice of a shape)."""
        n = obj.node
        v = self.values.get(n)
        if n not in self.static or not isinstance(v, (tuple, list)):
            raise RuntimeError("'len' of a value computed from a tensor's data cannot be traced")
        self.create_proxy("call_function", _length_is, (obj, len(v), _user_line()), {})
        return len(v)

    def iter(self, obj):
        n = obj.node
        v = self.values.get(n)
        if n not in self.static or not isinstance(v, (tuple, list)):
            return super().iter(obj)
        self.create_proxy("call_function", _length_is, (obj, len(v), _user_line()), {})
        return iter([obj[i] for i in range(len(v))])


def _proxy_len(self):
    return self.tracer.length(self)


def _user_line():
    """file:line of the model's code that is being traced (the innermost frame outside torch and
    remat)."""
    torch_dir = os.path.dirname(torch.__file__)
    here = os.path.dirname(__file__)
    for f in reversed(traceback.extract_stack()):
        if not f.filename.startswith(torch_dir) and not f.filename.startswith(here):
            return f"{f.filename}:{f.lineno}"
    return "?"


def _proxy_iter(self):
    """Proxy.__iter__ for torch before 2.0 on Python 3.11, whose own looks up the instruction
    that iterates the Proxy by an index that 3.11's frames no longer give (an IndexError, or the
    wrong instruction): unpacking (`n, c, h, w = x.shape`) gives one Proxy per name."""
    frame = inspect.currentframe().f_back
    for inst in dis.get_instructions(frame.f_code):
        if inst.offset == frame.f_lasti and inst.opname == "UNPACK_SEQUENCE":
            return (self[i] for i in range(inst.argval))
    return self.tracer.iter(self)


_PATCH_PROXY_ITER = (sys.version_info >= (3, 11)
                     and int(torch.__version__.split(".")[0]) < 2)


def _user_frame(e):
    """The last frame of e's traceback outside torch: where the model's code failed."""
    torch_dir = os.path.dirname(torch.__file__)
    here = os.path.dirname(__file__)
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if not f.filename.startswith(torch_dir) and not f.filename.startswith(here)]
    if not frames:
        return ""
    f = frames[-1]
    return f" ({f.filename}:{f.lineno}: {(f.line or '').strip()})"


_HOW = ("pass its stages by hand instead: an nn.Sequential or a list of modules, each mapping one "
        "tensor to one tensor (docs/python.md)")


_TRACED_FORWARD = "_remat_traced_forward"


def _needs_named_forward(model):
    """Whether fx must trace `model` through a forward of its named parameters: fx cannot trace
    a forward that takes *args or **kwargs behind a decorator (transformers' models: fx patches
    the wrapper's code with the wrapped function's argument count, "co_varnames is too small")."""
    forward = type(model).forward
    inner = inspect.unwrap(forward)
    return inner.__code__.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) != 0 \
        and inner is not forward


def _named_forward(params):
    """A function (self, <params>) that calls self.forward with them: what fx traces in place of
    a decorated forward with *args or **kwargs (the placeholders keep the parameters' names)."""
    names = [n for n, _ in params]
    passed = [n if p.kind == p.POSITIONAL_ONLY else f"{n}={n}" for n, p in params]
    source = (f"def {_TRACED_FORWARD}(self, {', '.join(names)}):\n"
              f"    return self.forward({', '.join(passed)})\n")
    scope = {}
    exec(compile(source, f"<remat: {_TRACED_FORWARD}>", "exec"), scope)
    return scope[_TRACED_FORWARD]


def _trace(model, concrete, leaves, params, values):
    """(GraphModule, leaves): traced with `leaves` and, each time the code of a submodule fails,
    that submodule as a leaf besides. `params`: forward's named parameters, (name, Parameter);
    `values`: the sample's, by name (the tracer follows branches on their shapes)."""
    leaves = set(leaves)
    made_leaves = []
    named = _named_forward(params) if _needs_named_forward(model) else None
    buffers = list(model.buffers())
    saved_buffers = [b.detach().clone() for b in buffers]
    rng = torch.get_rng_state()
    while True:
        # The tracer runs the model's ops on the sample (a copy of its tensors): buffers and the
        # generator are put back after each try.
        inputs = {k: v.detach().clone() if isinstance(v, _Tensor) else v
                  for k, v in values.items()}
        tracer = _Tracer(leaves, inputs)
        if named is not None:
            # fx traces getattr(type(root), tracer.traced_func_name); set only while it traces.
            tracer.traced_func_name = _TRACED_FORWARD
            setattr(type(model), _TRACED_FORWARD, named)
        own_iter, own_len = fx.Proxy.__iter__, fx.Proxy.__len__
        if _PATCH_PROXY_ITER:
            fx.Proxy.__iter__ = _proxy_iter
        fx.Proxy.__len__ = _proxy_len
        try:
            graph = tracer.trace(model, concrete_args=concrete or None)
        except Exception as e:
            name = getattr(e, "_remat_module", None)
            if not name or name in leaves:
                where = f"submodule '{name}'" if name else type(model).__name__
                raise _Untraceable(
                    f"torch.fx cannot trace {where}{_user_frame(e)}: {type(e).__name__}: "
                    f"{str(e).splitlines()[0] if str(e) else ''}; {_HOW}") from e
            leaves.add(name)
            made_leaves.append(name)
            continue
        finally:
            fx.Proxy.__iter__, fx.Proxy.__len__ = own_iter, own_len
            if named is not None:
                delattr(type(model), _TRACED_FORWARD)
            tracer.values.clear()
            with torch.no_grad():
                for b, v in zip(buffers, saved_buffers):
                    b.data.copy_(v)
            torch.set_rng_state(rng)
        return fx.GraphModule(tracer.root, graph, type(model).__name__), made_leaves, tracer


# --- what each node is ------------------------------------------------------------------------

_META_TYPES = (bool, int, float, complex, str, bytes, type(None), torch.Size, torch.dtype,
               torch.device, torch.memory_format, torch.layout, slice, type(Ellipsis))


def _tensors(v):
    """The tensors in v (nested tuples, lists and dicts), in order."""
    if isinstance(v, _Tensor):
        return [v]
    if isinstance(v, (tuple, list)):
        return [t for x in v for t in _tensors(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _tensors(x)]
    return []


def _is_meta(v):
    if isinstance(v, (tuple, list)):
        return all(_is_meta(x) for x in v)
    return isinstance(v, _META_TYPES)


def _arg_nodes(node):
    out = []

    def visit(a):
        if isinstance(a, fx.Node):
            out.append(a)
        return a
    fx.node.map_aggregate(node.args, visit)
    fx.node.map_aggregate(node.kwargs, visit)
    return out


def _storages(v):
    return {t.untyped_storage().data_ptr() if hasattr(t, "untyped_storage")
            else t.storage().data_ptr() for t in _tensors(v) if t.numel() > 0}


def _new_bytes(out, inputs):
    """The bytes of out's tensors whose storage none of `inputs` holds (views take none)."""
    held = set()
    for v in inputs:
        held |= _storages(v)
    seen, total = set(), 0
    for t in _tensors(out):
        if t.numel() == 0:
            continue
        s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        p = s.data_ptr()
        if p in held or p in seen:
            continue
        seen.add(p)
        total += s.nbytes()
    return total


# --- the split --------------------------------------------------------------------------------

class Context(torch.nn.Module):
    """What blocks share besides the activation: the model's other inputs (set before each
    step) and meta values one block computes for later ones. It holds no tensor of its own."""

    def __init__(self):
        super().__init__()
        self.values = {}

    def forward(self, key, *value):
        if value:
            self.values[key] = value[0]
            return value[0]
        try:
            return self.values[key]
        except KeyError:
            raise RuntimeError(f"remat.torch: block reads '{key}' before the block that computes "
                               "it has run") from None


@dataclass
class Split:
    """A model cut into blocks."""
    traced: fx.GraphModule
    blocks: list  # GraphModules, one stage each
    context: Context
    block_nodes: list  # per block, the fx node names of its activation nodes
    input_name: str  # the chain input's parameter
    extra_inputs: list  # (parameter name, context key) of the other tensor arguments
    signature: inspect.Signature
    rebuild: object  # the model's output from the last block's tensor
    cut_points: int  # those remat.linearize found (the last node included)
    nodes: int  # activation nodes
    dropped_cuts: list = field(default_factory=list)  # (node name, why)
    leaves: list = field(default_factory=list)  # submodules made leaves because they failed
    shares: list = field(default_factory=list)  # per block, its share of activation bytes


def _fail(message):
    raise _ModelError(message)


class _ModelError(ValueError):
    pass


def bind(signature, args, kwargs):
    """The tensor the chain starts from, by parameter name, and the others."""
    bound = signature.bind(*args, **kwargs)
    for name, p in signature.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and bound.arguments.get(name):
            _fail(f"forward takes *{name}: remat traces named parameters only; {_HOW}")
    return bound


_TRACE_CODE = fx.Tracer.trace.__code__


def _without_dataclasses(value, path, classes):
    """value with each dataclass instance (not a dict's) in it, inside plain tuples, lists and
    dicts, made the dict of its fields, and classes[path] its class."""
    if dataclasses.is_dataclass(value) and not isinstance(value, (type, dict)):
        classes[path] = type(value)
        return {f.name: _without_dataclasses(getattr(value, f.name), path + (f.name,), classes)
                for f in dataclasses.fields(value) if f.init}
    if type(value) in (tuple, list):
        return type(value)(_without_dataclasses(v, path + (i,), classes)
                           for i, v in enumerate(value))
    if type(value) is dict:
        return {k: _without_dataclasses(v, path + (k,), classes) for k, v in value.items()}
    return value


def _dict_classes(value, path=()):
    """{path in value (keys and indices): class} for the dicts in value that are not plain
    dicts."""
    found = {}
    if isinstance(value, dict):
        if type(value) is not dict:
            found[path] = type(value)
        for k, v in value.items():
            found.update(_dict_classes(v, path + (k,)))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            found.update(_dict_classes(v, path + (i,)))
    return found


def _rebuild_fn(structure, out_node, dict_types):
    """A function of the last block's tensor giving the model's output structure (a dict of the
    class the model returned: `dict_types`, by path)."""
    def build(v, y, path=()):
        if v is out_node:
            return y
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return type(v)(*[build(x, y, path + (i,)) for i, x in enumerate(v)])
        if isinstance(v, (tuple, list)):
            return type(v)(build(x, y, path + (i,)) for i, x in enumerate(v))
        if isinstance(v, dict):
            cls = dict_types.get(path, dict)
            items = [(k, build(x, y, path + (k,))) for k, x in v.items()]
            if all(isinstance(k, str) for k, _ in items):
                return cls(**dict(items))  # a dataclass's fields (ModelOutput) or a dict's keys
            return cls(items)
        return v
    return lambda y: build(structure, y)


def split(model, args, kwargs, leaf_modules=()):
    """Traces `model` called as model(*args, **kwargs), finds its cut points with
    remat.linearize and returns a Split. Errors are _ModelError (the model as a whole)."""
    signature = inspect.signature(model.forward)
    bound = bind(signature, args, kwargs)
    params = [(n, p) for n, p in signature.parameters.items()
              if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    concrete, values = {}, {}
    input_name = None
    for name, p in params:
        if name in bound.arguments:
            v = bound.arguments[name]
        elif p.default is not p.empty:
            v = p.default
        else:
            _fail(f"forward's parameter '{name}' has no value in the sample and no default")
        values[name] = v
        if isinstance(v, _Tensor):
            if input_name is None:
                input_name = name
            elif v.requires_grad:
                _fail(f"input '{name}' requires grad: only the first tensor argument "
                      f"('{input_name}') is the chain's input; the others must need no gradient")
        else:
            concrete[name] = v
    if input_name is None:
        _fail("no tensor argument: the chain starts from the first one")

    leaves = [n for n in leaf_modules if isinstance(n, str)]
    leaf_types = tuple(t for t in leaf_modules if isinstance(t, type))
    if leaf_types:
        leaves += [n for n, m in model.named_modules() if n and isinstance(m, leaf_types)]
    was_training = model.training
    model.train()
    try:
        while True:
            try:
                traced, made, _ = _trace(model, concrete, leaves, params, values)
            except _Untraceable as e:
                _fail(str(e))
            culprit = _analyse_or_culprit(traced, params, values, input_name)
            if isinstance(culprit, _Analysis):
                break
            name, why = culprit
            if not name or name in leaves:
                _fail(f"{why}; remat cannot place it in a block even as a leaf of "
                      f"{'the model' if not name else repr(name)}: {_HOW}")
            leaves.append(name)
    finally:
        model.train(was_training)
    a = culprit
    a.leaves = sorted(set(made) | (set(leaves) - {n for n in leaf_modules if isinstance(n, str)}))
    return _cut(traced, a, signature, input_name)


@dataclass
class _Analysis:
    order: dict
    kind: dict  # node -> "input" | "act" | "meta" | "free"
    value: dict  # node -> the value it gave on the sample
    alias_of: dict  # node -> the node whose output it is (in-place)
    nbytes: dict  # act node -> new bytes
    acts: list  # activation nodes, in order, up to the output's
    out_node: fx.Node
    structure: object
    placeholders: dict  # placeholder node -> parameter name
    dict_types: dict  # path of a dict in `structure` -> the class the model returned
    leaves: list = field(default_factory=list)


def _analyse_or_culprit(traced, params, values, input_name):
    """Runs the traced model node by node on the sample; returns an _Analysis, or
    (submodule, why) for a node remat cannot place (to trace that submodule as a leaf)."""
    graph = traced.graph
    nodes = list(graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    placeholders = [n for n in nodes if n.op == "placeholder"]
    if len(placeholders) != len(params):
        _fail(f"the trace has {len(placeholders)} inputs for forward's {len(params)} parameters")
    ph_name = {n: params[i][0] for i, n in enumerate(placeholders)}

    kind, value, alias_of, nbytes = {}, {}, {}, {}
    interp = fx.Interpreter(traced)
    buffers = [b for b in traced.buffers()]
    saved_buffers = [b.detach().clone() for b in buffers]
    rng = torch.get_rng_state()
    try:
        with torch.no_grad():
            for n in nodes:
                if n.op == "placeholder":
                    v = values[ph_name[n]]
                    kind[n] = "input" if ph_name[n] == input_name else "free"
                    value[n] = interp.env[n] = v
                    continue
                if n.op == "output":
                    break
                a, kw = interp.fetch_args_kwargs_from_env(n)
                v = getattr(interp, n.op)(n.target, a, kw)
                interp.env[n] = v
                value[n] = v
                ins = _arg_nodes(n)
                reads_act = any(kind[m] in ("input", "act") for m in ins)
                reads_meta = any(kind[m] == "meta" for m in ins)
                has_tensor = bool(_tensors(v))
                if n.op == "get_attr":
                    kind[n] = "free"
                elif reads_act and (has_tensor or not _is_meta(v)):
                    kind[n] = "act"
                elif reads_act or (reads_meta and _is_meta(v)):
                    kind[n] = "meta" if _is_meta(v) else "act"
                else:
                    kind[n] = "free"
                # An op whose output is one of its inputs: in place (or the input returned).
                direct = [m for m in ins if value[m] is v and isinstance(v, _Tensor)]
                writes = _writes_in_place(n, v, ins, value)
                if kind[n] == "act":
                    if direct:
                        alias_of[n] = direct[0]
                        nbytes[n] = 0
                    else:
                        nbytes[n] = _new_bytes(v, [value[m] for m in ins])
                    if writes is not None and writes not in direct:
                        return (n.meta.get("remat_module", ""),
                                f"node '{n.name}' ({n.format_node()}) writes in place into "
                                f"'{writes.name}' without returning it")
                elif writes is not None and kind.get(writes) != "act":
                    return (n.meta.get("remat_module", ""),
                            f"node '{n.name}' writes in place into '{writes.name}', which needs no "
                            "gradient (blocks recompute such values)")
    finally:
        with torch.no_grad():
            for b, s in zip(buffers, saved_buffers):
                b.data.copy_(s)
        torch.set_rng_state(rng)
        interp.env.clear()

    # Later readers of an aliased input read the alias (the same tensor).
    for n in nodes:
        if n in alias_of:
            t = alias_of[n]
            for u in list(t.users):
                if u is not n and order[u] > order[n]:
                    u.replace_input_with(t, n)
    output = next(n for n in nodes if n.op == "output")
    structure = output.args[0]
    dict_types = output.meta.get("remat_dict_types", {})
    outs = []
    fx.node.map_aggregate(structure, lambda v: outs.append(v) if isinstance(v, fx.Node) else v)
    act_outs = [o for o in outs if kind.get(o) in ("act", "input")]
    if len(act_outs) != 1 or any(o not in act_outs for o in outs):
        names = ", ".join(o.name for o in outs)
        _fail(f"the model returns {len(act_outs)} values computed from its input and "
              f"{len(outs) - len(act_outs)} others ({names}): remat's chain ends in one tensor "
              "that the loss reads; wrap the model so that its forward returns one tensor (in "
              "any tuple, list or dict), or pass stages by hand")
    out_node = act_outs[0]
    if kind[out_node] == "input" or not isinstance(value[out_node], _Tensor):
        _fail("the model's output is its input, or no tensor")
    acts = [n for n in nodes if kind.get(n) == "act" and order[n] <= order[out_node]]
    return _Analysis(order, kind, value, alias_of, nbytes, acts, out_node, structure,
                     {n: ph_name[n] for n in placeholders}, dict_types)


def _writes_in_place(n, v, ins, value):
    """The input node n writes into without making it its output's tensor: operator.setitem
    (returns None), or a method ending in '_' whose result is not its self."""
    if n.op == "call_function" and n.target is operator.setitem and ins:
        return ins[0] if isinstance(n.args[0], fx.Node) else None
    if n.op == "call_method" and isinstance(n.target, str) and n.target.endswith("_") \
            and not n.target.endswith("__") and isinstance(n.args[0], fx.Node):
        return n.args[0]
    return None


def _cut(traced, a, signature, input_name):
    kind, value, order = a.kind, a.value, a.order
    g = Graph()
    vid = {}
    input_node = next(n for n, k in kind.items() if k == "input")
    t = value[input_node]
    vid[input_node] = g.input(input_node.name, t.numel() * t.element_size())
    globals_ = {}

    def global_of(key, name, nbytes):
        if key not in globals_:
            globals_[key] = g.add_global(name, nbytes)
        return globals_[key]

    for n in a.acts:
        reads = []
        for m in _arg_nodes(n):
            if kind[m] in ("act", "input"):
                if m not in vid:
                    _fail(f"node '{n.name}' reads '{m.name}', which comes after the output")
                if vid[m] not in reads:
                    reads.append(vid[m])
            elif kind[m] == "free":
                for x in _tensors(value[m]):
                    reads.append(global_of(id(x), m.name, x.numel() * x.element_size()))
        if n.op == "call_module":
            mod = traced.get_submodule(n.target)
            for pn, p in list(mod.named_parameters()) + list(mod.named_buffers()):
                reads.append(global_of(id(p), f"{n.target}.{pn}", p.numel() * p.element_size()))
        seen, unique = set(), []
        for r in reads:
            if r not in seen:
                seen.add(r)
                unique.append(r)
        if n in a.alias_of:
            target = vid[a.alias_of[n]]
            if kind[a.alias_of[n]] == "input":
                _fail(f"node '{n.name}' writes in place into the model's input "
                      f"('{input_node.name}'); the step keeps the input as it is")
            vid[n] = g.apply_in_place(n.name, target, [r for r in unique if r != target])
        else:
            vid[n] = g.apply(n.name, unique, a.nbytes[n])
    lin = linearize(g)

    # The cuts torch can run as stages.
    node_at = a.acts
    written = {a.alias_of[n] for n in a.alias_of}
    cuts, dropped = [], []
    start = input_node
    for c in lin.cut_nodes:
        n = node_at[c]
        last = c == len(node_at) - 1
        if not last:
            if not isinstance(value[n], _Tensor):
                dropped.append((n.name, "its output is no single tensor"))
                continue
            if n in written:
                dropped.append((n.name, "the next op writes into its output in place"))
                continue
            # A later op that writes into a view of it (a flatten, then an in-place dropout).
            mine = _storages(value[n])
            if any(a.order[w] > a.order[n] and _storages(value[t]) & mine
                   for w, t in a.alias_of.items()):
                dropped.append((n.name, "a later op writes into a view of its output in place"))
                continue
        if _storages(value[n]) & _storages(value[start]):
            if last and cuts:
                prev = cuts.pop()
                dropped.append((node_at[prev].name, "the last block would return a view of its "
                                                     "input"))
                start = node_at[cuts[-1]] if cuts else input_node
                cuts.append(c)
                continue
            if not last:
                dropped.append((n.name, "the block would return its input or a view of it"))
                continue
            _fail("the model's output is a view of its input")
        cuts.append(c)
        start = n

    context = Context()
    traced.add_submodule("remat_context", context)
    ranges, first = [], 0
    for c in cuts:
        ranges.append((first, c + 1))
        first = c + 1
    block_of = {}
    for b, (lo, hi) in enumerate(ranges):
        for i in range(lo, hi):
            block_of[node_at[i]] = b
    # Where each meta node is computed: the first block that holds everything it reads.
    home = {}
    for n in traced.graph.nodes:
        if kind.get(n) == "meta":
            h = 0
            for m in _arg_nodes(n):
                if kind[m] == "act":
                    h = max(h, block_of.get(m, len(ranges) - 1))
                elif kind[m] == "meta":
                    h = max(h, home[m])
            home[n] = h
    exported = set()
    blocks, block_nodes = [], []
    for b, (lo, hi) in enumerate(ranges):
        bin_ = input_node if b == 0 else node_at[ranges[b - 1][1] - 1]
        bout = node_at[hi - 1]
        gm, reads = _block(traced, a, b, bin_, bout, block_of, home)
        exported |= reads
        blocks.append(gm)
        block_nodes.append([n.name for n in node_at[lo:hi]])
    # The meta values later blocks read are stored by their home block: rebuild those blocks.
    if exported:
        for b in range(len(ranges)):
            lo, hi = ranges[b]
            bin_ = input_node if b == 0 else node_at[ranges[b - 1][1] - 1]
            blocks[b], _ = _block(traced, a, b, bin_, node_at[hi - 1], block_of, home, exported)
    shares = []
    for lo, hi in ranges:
        shares.append(sum(lin.activation_share(k) for k in range(len(lin.blocks))
                          if lo <= lin.blocks[k].first < hi))
    extra = [(name, f"input:{name}") for n, name in a.placeholders.items()
             if kind[n] != "input"]
    value.clear()  # the sample's values: freed now, not by a later garbage collection
    return Split(traced, blocks, context, block_nodes, input_name, extra, signature,
                 _rebuild_fn(a.structure, a.out_node, a.dict_types), len(lin.cut_nodes),
                 len(node_at), dropped, a.leaves, shares)


def _block(traced, a, b, bin_, bout, block_of, home, exported=frozenset()):
    """Block b as a GraphModule of one argument; and the meta nodes it reads from the context."""
    kind, value = a.kind, a.value
    g = fx.Graph()
    env = {bin_: g.placeholder("x")}
    from_context = set()

    def get(m):
        if m in env:
            return env[m]
        k = kind[m]
        if m.op == "placeholder":
            env[m] = g.call_module("remat_context", (f"input:{a.placeholders[m]}",))
        elif k == "meta" and home[m] != b:
            from_context.add(m)
            env[m] = g.call_module("remat_context", (f"meta:{m.name}",))
        elif k in ("free", "meta"):
            env[m] = g.node_copy(m, get)
            env[m].meta = dict(m.meta)
        else:
            raise RuntimeError(f"remat.torch: block {b} reads '{m.name}', which another block "
                               "makes (not at a cut)")
        return env[m]

    for n in traced.graph.nodes:
        if n is bin_ or n.op in ("placeholder", "output"):
            continue
        if (kind.get(n) == "act" and block_of.get(n) == b) or (
                kind.get(n) == "meta" and home[n] == b):
            env[n] = g.node_copy(n, get)
            if n in exported:
                env[n] = g.call_module("remat_context", (f"meta:{n.name}", env[n]))
    g.output(env[bout])
    gm = fx.GraphModule(traced, g, f"block{b}")
    # `get` refers to itself: a cycle that would hold the sample's values (through `a`) until the
    # garbage collector runs, in the middle of a measured step.
    get = None
    return gm, from_context

