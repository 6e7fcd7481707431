"""remat: activation rematerialization schedules, solved exactly (the C++ library, compiled).

    import remat
    chain = remat.Chain([remat.Stage(forward_time=1, backward_time=2, output_size=4,
                                     tape_size=12)] * 8, input_size=4)
    r = remat.solve(chain, 40, slots="exact")
    print(r.makespan, r.peak_memory, " ".join(map(str, r.ops)))

Chains, solvers, the simulator, graphs and their cut points are remat's C++ library, bound with pybind11 (module
remat._core): results are the library's. remat.torch runs schedules on PyTorch models.
"""

from ._core import (
    Chain,
    Graph,
    GraphBlock,
    GraphNode,
    GraphValue,
    Linearization,
    Op,
    PipelineResult,
    PipelineStage,
    ReplayResult,
    SolveResult,
    Stage,
    StageOption,
    Transfer,
    __version__,
    checkpoint_every_stage,
    equal_starts,
    linearize,
    micro_batches_in_flight,
    needs_link,
    parse_size,
    read_chain,
    read_schedule,
    schedule_from_json,
    schedule_to_json,
    simulate,
    solve,
    solve_pipeline,
    solvers,
    split_pipeline,
    stage_chain,
    trade_off,
)
from . import _core


class ChainError(ValueError):
    """A chain whose values break the model. `stage_index` is the stage (None for a chain-level
    field), `field` the field as in the chain file (`tape_size`, `loss.backward_time`, ...)."""

    stage_index = None
    field = None


class ChainFileError(ChainError):
    """A chain file that cannot be read: `source` is the file, `stage_index` and `field` as for
    ChainError (both None when the problem is the whole file)."""

    source = None


class SolverError(ValueError):
    """A request a solver cannot honour (a chain too long for the exhaustive search, a table
    over the memory limit, a solver that needs a link on a chain without one); says what to
    change."""


class GraphError(ValueError):
    """A graph that breaks docs/graphs.md's rules: `node` and `value` are the offending node's and
    value's indices (None where the rule concerns neither)."""

    node = None
    value = None


_core._register_errors(ChainError, ChainFileError, SolverError, GraphError)

__all__ = [
    "Chain",
    "ChainError",
    "ChainFileError",
    "Graph",
    "GraphBlock",
    "GraphError",
    "GraphNode",
    "GraphValue",
    "Linearization",
    "Op",
    "PipelineResult",
    "PipelineStage",
    "ReplayResult",
    "SolveResult",
    "SolverError",
    "Stage",
    "StageOption",
    "Transfer",
    "__version__",
    "checkpoint_every_stage",
    "equal_starts",
    "linearize",
    "micro_batches_in_flight",
    "needs_link",
    "parse_size",
    "read_chain",
    "read_schedule",
    "schedule_from_json",
    "schedule_to_json",
    "simulate",
    "solve",
    "solve_pipeline",
    "solvers",
    "split_pipeline",
    "stage_chain",
    "trade_off",
]
