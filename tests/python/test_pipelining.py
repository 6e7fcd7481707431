"""remat.torch.Checkpointed as a pipeline stage (torch.distributed.pipelining), gloo on the CPU.

Each rank's stage is `Checkpointed(blocks, sample, budget, in_flight=K)`, K the micro-batches its
stage has in flight under the schedule (`micro_batches_in_flight`), wrapped in a PipelineStage;
GPipe and 1F1B, 2 and 4 processes, M = 2 * ranks micro-batches; the last stage is given the
pipeline's loss, so that its budget also holds the losses of its micro-batches in flight (the
pipeline runs each micro-batch's loss right after its forward). After a step, every gradient
equals that of the whole model run in one process, micro-batch by micro-batch in the same order,
bit for bit; each stage's schedule keeps peak + (K - 1) * retained within the budget less the
loss's reserve; and on every rank the memory the rank held at once across a whole step (the
second: the first also makes the stage's buffers), all its micro-batches together, measured by
the allocator, stayed within the budget, beside two things torch holds that no schedule decides:
under 1F1B one received boundary tensor (the schedule posts a receive ahead of its backward), and
on the last rank, until the step ends, every micro-batch's loss and, through its graph, the
stage's received input. The per-op figures are not asserted: gloo frees the buffers of sends and
receives on its worker thread, at a time of its own.

`micro_batches_in_flight` is also checked against the op order the stages actually run: each
stage records, from inside its module, the forwards and backwards it runs, and the most
micro-batches forward and not yet backward equals K.

Exit status 77 (a skip for ctest) where torch has no torch.distributed.pipelining or no gloo."""

import inspect
import socket
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

try:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
except Exception:  # noqa: BLE001 - ImportError on torch < 2.4
    print(f"torch {torch.__version__} has no torch.distributed.pipelining: skipped")
    sys.exit(77)
if not (dist.is_available() and dist.is_gloo_available()):
    print(f"torch {torch.__version__} has no torch.distributed with gloo: skipped")
    sys.exit(77)

import remat.torch as rt  # noqa: E402

DEPTH, DIM, ROWS = 8, 64, 8
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
# torch keeps every micro-batch's output until the step ends unless told not to (where it can be).
KEEP_NO_OUTPUTS = ({"return_outputs": False}
                   if "return_outputs" in inspect.signature(Schedule1F1B.step).parameters else {})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def blocks():
    torch.manual_seed(0)
    return torch.nn.Sequential(*[
        torch.nn.Sequential(torch.nn.Linear(DIM, 4 * DIM), torch.nn.GELU(),
                            torch.nn.Linear(4 * DIM, DIM)) for _ in range(DEPTH)])


def loss_fn(y, target):
    return (y - target).pow(2).sum()


def data(micro_batches):
    g = torch.Generator().manual_seed(7)
    return (torch.randn(micro_batches * ROWS, DIM, generator=g),
            torch.randn(micro_batches * ROWS, DIM, generator=g))


class Recorder(torch.nn.Module):
    """The stage's module: records the micro-batches its forwards and backwards run."""

    def __init__(self, inner, log):
        super().__init__()
        self.inner, self.log = inner, log

    def forward(self, x):
        index = len([e for e in self.log if e[0] == "F"])
        self.log.append(("F", index))
        y = self.inner(x)
        if y.requires_grad:
            y.register_hook(lambda g: self.log.append(("B", index)) or g)
        return y


def most_in_flight(log):
    held, most = set(), 0
    for kind, index in log:
        if kind == "F":
            held.add(index)
            most = max(most, len(held))
        else:
            held.discard(index)
    return most


def worker(rank, port, world, schedule, budget):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    torch.set_num_threads(1)
    try:
        M = 2 * world
        per = DEPTH // world
        model = blocks()
        part = model[rank * per:(rank + 1) * per]
        x, target = data(M)
        K = rt.micro_batches_in_flight(SCHEDULES[schedule], ranks=world, micro_batches=M)[rank]
        sample = x[:ROWS].clone().requires_grad_(rank > 0)
        # The last stage is given the pipeline's loss: the budget then also holds what each
        # micro-batch's loss keeps from its forward to its backward (the pipeline runs a
        # micro-batch's loss right after its forward), K of them.
        last = rank == world - 1
        ck = rt.Checkpointed(part, sample, budget=budget, in_flight=K, runs=1,
                             loss=(lambda y: loss_fn(y, target[:ROWS])) if last else None)
        log = []
        # Shapes given (static mode): the dynamic mode infers the gradients' shapes with
        # torch.autograd.grad, which a Checkpointed refuses (its backwards accumulate into .grad).
        stage = PipelineStage(Recorder(ck, log), rank, world, torch.device("cpu"),
                              input_args=(torch.empty(ROWS, DIM, requires_grad=rank > 0),),
                              output_args=(torch.empty(ROWS, DIM, requires_grad=True),))
        sched = SCHEDULES[schedule](stage, M, loss_fn=loss_fn, scale_grads=False)
        for p in part.parameters():
            p.grad = torch.zeros_like(p)  # allocated before the step: outside the budget
        where = f"rank {rank}/{world}, {schedule}, budget {budget}, K {K}"

        def step():
            if rank == 0:
                sched.step(x)
            elif rank == world - 1:
                # Without return_outputs=False torch keeps every micro-batch's output until the
                # step ends, to return them merged (what the budget cannot know of).
                sched.step(target=target, **KEEP_NO_OUTPUTS)
            else:
                sched.step()

        # The first step also makes the stage's buffers for receiving, kept for the next steps
        # (as the parameters' gradients are): the second is measured.
        step()
        log.clear()
        for p in part.parameters():
            p.grad.zero_()
        before = rt.cpu_meter.current()
        rt.cpu_meter.reset_peak()
        step()
        step_peak = rt.cpu_meter.peak() - before

        # The order the stage ran: K as micro_batches_in_flight said.
        assert most_in_flight(log) == K, f"{where}: ran {log}, {most_in_flight(log)} in flight"
        plan = ck.schedule
        need = plan.peak_memory + (K - 1) * plan.retained
        assert need <= ck.budget_bytes - ck.loss_reserve, f"{where}: {need} > {ck.budget_bytes}"

        # The whole model in one process, micro-batch by micro-batch, in the schedule's order.
        ref = blocks()
        for xs, ts in zip(x.chunk(M), target.chunk(M)):
            loss_fn(ref(xs), ts).backward()
        for (name, p), q in zip(part.named_parameters(),
                                list(ref.parameters())[rank * per * 4:(rank + 1) * per * 4]):
            assert torch.equal(p.grad, q.grad), f"{where}: {name}'s gradient differs"
        # The memory the rank held at once, all its micro-batches together (on the last rank
        # their losses too): within the budget.
        # (Under 1F1B a stage posts the receive of its next micro-batch's input, or of the next
        # output gradient, beside the backward it runs: one boundary tensor more than the K
        # counted, measured at tight budgets; docs/pipelines.md.)
        # (On the last rank torch keeps every micro-batch's loss until the step ends, and through
        # the loss's graph the stage's received input: M of each, beside the budget, measured.)
        boundary = ROWS * DIM * 4
        slack = boundary if schedule == "1f1b" else 0
        if last and rank > 0:
            slack += M * (boundary + 4)
        assert step_peak <= ck.budget_bytes + slack, (
            f"{where}: peak {step_peak} > {ck.budget_bytes} + {slack}")
        return step_peak, ck.budget_bytes
    finally:
        dist.destroy_process_group()


def run(rank, port, world, schedule, budget, results):
    try:
        step_peak, budget_bytes = worker(rank, port, world, schedule, budget)
    except BaseException:
        traceback.print_exc()  # every rank's, not only the first that spawn reports
        raise
    results[rank] = (step_peak, budget_bytes)


def check_micro_batches_in_flight():
    """The table of docs/pipelines.md, and the refusals by name."""
    from torch.distributed.pipelining import schedules
    assert rt.micro_batches_in_flight(ScheduleGPipe, ranks=4, micro_batches=8) == {
        0: 8, 1: 8, 2: 8, 3: 8}
    assert rt.micro_batches_in_flight(Schedule1F1B, ranks=4, micro_batches=8) == {
        0: 4, 1: 3, 2: 2, 3: 1}
    assert rt.micro_batches_in_flight(Schedule1F1B, ranks=4, micro_batches=2) == {
        0: 2, 1: 2, 2: 2, 3: 1}
    interleaved = rt.micro_batches_in_flight(schedules.ScheduleInterleaved1F1B, ranks=2,
                                             micro_batches=4, stages_per_rank=2)
    assert interleaved == {0: 4, 1: 3, 2: 2, 3: 1}, interleaved
    for name in ("ScheduleInterleavedZeroBubble", "ScheduleZBVZeroBubble"):
        cls = getattr(schedules, name, None)
        if cls is None:
            continue
        try:
            rt.micro_batches_in_flight(cls, ranks=2, micro_batches=4, stages_per_rank=2)
        except ValueError as e:
            assert name in str(e) and "zero bubble" in str(e), e
        else:
            raise AssertionError(f"{name} was not refused")


def main():
    check_micro_batches_in_flight()
    failures = 0
    # `test_pipelining.py RANKS SCHEDULE BUDGET` runs one case.
    cases = ([(int(sys.argv[1]), sys.argv[2], sys.argv[3])] if len(sys.argv) == 4 else
             [(2, "gpipe", "least"), (2, "1f1b", "least+50%"), (4, "1f1b", "least"),
              (4, "gpipe", "least+50%")])
    for world, schedule, budget in cases:
        if True:
            if True:
                with mp.Manager() as manager:
                    results = manager.dict()
                    try:
                        mp.spawn(run, args=(free_port(), world, schedule, budget, results),
                                 nprocs=world)
                    except Exception as e:  # noqa: BLE001 - a rank's assertion, reported
                        print(f"FAIL {world} ranks, {schedule}, {budget}: {e}")
                        failures += 1
                        continue
                    print(f"ok   {world} ranks, {schedule}, {budget}: "
                          + ", ".join(f"rank {r} peak {results[r][0]} of {results[r][1]}"
                                      for r in sorted(results.keys())))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
