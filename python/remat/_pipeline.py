"""Micro-batches in flight on each stage of a torch.distributed.pipelining schedule.

Under GPipe and 1F1B a pipeline stage runs the forwards of several micro-batches before the
backward of the first; their activations wait together. How many, K, sets the stage's budget
(docs/pipelines.md: a schedule fits when peak + (K - 1) * retained <= budget): for each stage, the
most micro-batches it has run forward and not yet backward, in the order the schedule runs them.
"""

from __future__ import annotations

import types
from typing import Any

__all__ = ["micro_batches_in_flight"]


def _stub_stages(multi: bool, ranks: int, stages_per_rank: int) -> Any:
    """Stand-ins for PipelineStage that give a schedule's constructor what its op order reads:
    the stage count, the group's size and rank. No process group is needed."""
    n = ranks * stages_per_rank

    def stage(index: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            num_stages=n, stage_index=index, group_size=ranks, group_rank=0,
            is_first=index == 0, is_last=index == n - 1, stage_index_to_group_rank={})

    if not multi:
        return stage(0)
    # Looped placement (rank r holds stages r, r + ranks, ...): what the interleaved schedules
    # expect of rank 0; the order of every rank is generated from the counts alone.
    return [stage(r * ranks) for r in range(stages_per_rank)]


def _order_of(schedule: Any, ranks: int | None, micro_batches: int | None,
              stages_per_rank: int) -> dict[int, list[Any]]:
    from torch.distributed.pipelining import schedules as pp

    if isinstance(schedule, type):
        if not issubclass(schedule, pp._PipelineSchedule):
            raise TypeError(f"{schedule.__name__} is not a torch.distributed.pipelining schedule")
        if ranks is None or micro_batches is None:
            raise TypeError("with a schedule class, give ranks= and micro_batches=")
        if ranks < 1 or micro_batches < 1 or stages_per_rank < 1:
            raise ValueError("ranks, micro_batches and stages_per_rank must be >= 1")
        multi = issubclass(schedule, pp.PipelineScheduleMulti)
        if not multi and stages_per_rank != 1:
            raise ValueError(f"{schedule.__name__} runs one stage per rank (stages_per_rank=1)")
        instance = schedule(_stub_stages(multi, ranks, stages_per_rank), micro_batches)
    else:
        instance = schedule
    order = getattr(instance, "pipeline_order", None)
    if not order:
        raise ValueError(
            f"{type(instance).__name__} has no op order (pipeline_order) to read the micro-batches "
            "in flight from; this torch's schedule does not publish one")
    return order


_ZERO_BUBBLE = ("ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble", "ScheduleDualPipeV")


def _refuse_split(name: str) -> None:
    raise ValueError(
        f"{name} splits each backward into input and weight parts (zero bubble); remat models a "
        "stage's backward as one op and does not support it")


def micro_batches_in_flight(schedule: Any, ranks: int | None = None,
                            micro_batches: int | None = None,
                            stages_per_rank: int = 1) -> dict[int, int]:
    """K for each stage of a pipeline schedule: ``{stage_index: K}``.

    ``schedule`` is a schedule built for a real pipeline (``Schedule1F1B(stage, n_microbatches)``)
    or a schedule class with ``ranks`` (pipeline ranks), ``micro_batches`` and, for the
    interleaved schedules, ``stages_per_rank``.

    * ``ScheduleGPipe``: every stage runs all forwards before any backward, K = micro_batches.
    * ``Schedule1F1B``: stage r of P runs min(M, P - r) forwards before its first backward, then
      one backward before each further forward: K = min(M, P - r). (These two run loops of their
      own; their published ``pipeline_order`` is not the order they run.)
    * The schedules with several stages per rank (``ScheduleInterleaved1F1B``,
      ``ScheduleLoopedBFS``) run their ``pipeline_order``: K is read from it, the most
      micro-batches a stage has run forward and not yet backward.

    Schedules that split a backward into its input and weight parts (the zero-bubble family)
    are refused: between the two parts a micro-batch holds part of its tape, which the model
    (one backward op per stage) does not describe.
    """
    from torch.distributed.pipelining import schedules as pp

    cls = schedule if isinstance(schedule, type) else type(schedule)
    name = cls.__name__
    if name in _ZERO_BUBBLE:
        _refuse_split(name)
    if not issubclass(cls, pp._PipelineSchedule):
        raise TypeError(f"{name} is not a torch.distributed.pipelining schedule")
    if issubclass(cls, pp.PipelineScheduleSingle):
        if isinstance(schedule, type):
            if ranks is None or micro_batches is None:
                raise TypeError("with a schedule class, give ranks= and micro_batches=")
            if stages_per_rank != 1:
                raise ValueError(f"{name} runs one stage per rank (stages_per_rank=1)")
            P, M, stages = ranks, micro_batches, range(ranks)
        else:
            P, M = schedule._num_stages, schedule._n_microbatches
            stages = [schedule._stage.stage_index]
        if P < 1 or M < 1:
            raise ValueError("ranks and micro_batches must be >= 1")
        if issubclass(cls, pp.ScheduleGPipe):
            return {r: M for r in stages}
        if issubclass(cls, pp.Schedule1F1B):
            return {r: min(M, P - r) for r in stages}
        raise ValueError(f"{name}: remat does not know in what order this schedule runs its "
                         "micro-batches (GPipe, 1F1B and the multi-stage schedules it does)")

    from torch.distributed.pipelining.schedules import _ComputationType as kind

    order = _order_of(schedule, ranks, micro_batches, stages_per_rank)
    outstanding: dict[int, set[int]] = {}
    most: dict[int, int] = {}
    for actions in order.values():
        for a in actions:
            if a is None:
                continue
            c = a.computation_type
            if c in (kind.BACKWARD_INPUT, kind.BACKWARD_WEIGHT):
                _refuse_split(name)
            if c not in (kind.FORWARD, kind.FULL_BACKWARD):
                continue  # communication, resharding, gradient reduction
            held = outstanding.setdefault(a.stage_index, set())
            if c == kind.FORWARD:
                held.add(a.microbatch_index)
                most[a.stage_index] = max(most.get(a.stage_index, 0), len(held))
            else:
                held.discard(a.microbatch_index)
    return dict(sorted(most.items()))
