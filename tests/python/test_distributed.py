"""remat.torch.Checkpointed under data parallelism, two processes on gloo (CPU).

DDP: `DDP(Checkpointed(model))` against `DDP(model)`, the same initial parameters, each rank its
own data: at the least, a middle and the store-all budget, schedules forced (run_plainly=False)
and the model run plainly where the budget holds plain autograd's step, every gradient equal bit
for bit on every rank after every step, and every step as predicted and within its budget.

FSDP2 (torch 2.4 and later): a model of blocks, `fully_shard` on each block (or on each Linear in
it) and on the root, then `Checkpointed`: every rank runs the same schedule (the gathers are
collectives), and after every step every gradient shard equals FSDP2's without remat, bit for
bit; the root still runs plainly afterwards. A stage whose parameters the root's `fully_shard`
gathers is refused naming them, and so is a sharded model that would be traced. The meter's
per-op figures are not asserted under FSDP2: gloo frees a collective's buffers on its worker
thread, at a time of its own (docs/python.md, "Distributed: DDP and FSDP2").

Exit status 77 (a skip for ctest) where torch has no torch.distributed or no gloo."""

import copy
import gc
import socket
import sys
import unittest

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import remat.torch as rt

if not (dist.is_available() and dist.is_gloo_available()):
    print(f"torch {torch.__version__} has no torch.distributed with gloo: skipped")
    sys.exit(77)

try:
    from torch.distributed.fsdp import fully_shard  # torch 2.6 and later
except Exception:  # noqa: BLE001 - ImportError; on Python 3.11, torch 1.13's fsdp raises ValueError
    try:
        from torch.distributed._composable.fsdp import fully_shard  # torch 2.4, 2.5
    except Exception:  # noqa: BLE001
        fully_shard = None

BUDGETS = ("least", "least+50%", "100%")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(worker, *args):
    mp.spawn(worker, args=(free_port(),) + args, nprocs=2)


def init(rank, port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=2)
    torch.set_num_threads(1)


def blocks(depth=6, dim=64):
    torch.manual_seed(0)
    return torch.nn.Sequential(*[
        torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                            torch.nn.Linear(4 * dim, dim)) for _ in range(depth)])


def loss(y):
    return y.pow(2).mean()


def rank_data(rank, steps=2):
    g = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
    return [torch.randn(32, 64, generator=g) for _ in range(steps)]


def every_rank(value):
    out = [None, None]
    dist.all_gather_object(out, value)
    return out


def ddp_worker(rank, port):
    init(rank, port)
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = blocks()
        # DDP(model)'s gradients first: its steps, run between Checkpointed's, would free
        # tensors of their own during them, which as_predicted sees (and so would its buckets,
        # dropped: it is kept to the end).
        ref = DDP(copy.deepcopy(model))
        want = []
        for x in rank_data(rank):
            ref.zero_grad()
            loss(ref(x)).backward()
            want.append([p.grad.clone() for p in ref.parameters()])
        checkpointed = rt.Checkpointed(model, rank_data(rank)[0], budget="least", loss=loss,
                                       runs=1)
        m = DDP(checkpointed)
        # DDP's first two iterations find the order its buckets fill in and rebuild them, which
        # broadcasts a tensor that gloo's worker thread frees when it gets to it.
        for x in rank_data(rank):
            loss(m(x)).backward()
        for budget in BUDGETS:
            for plainly in (False, True):
                checkpointed.budget, checkpointed.run_plainly = budget, plainly
                for i, x in enumerate(rank_data(rank)):
                    gc.collect()  # garbage of earlier steps, not freed during this one
                    m.zero_grad()
                    loss(m(x)).backward()
                    where = f"rank {rank}, budget {budget}, run_plainly={plainly}, step {i}"
                    for (name, p), g in zip(model.named_parameters(), want[i]):
                        assert torch.equal(p.grad, g), f"{where}: {name}'s gradient differs"
                    assert checkpointed.as_predicted, (
                        f"{where}: {checkpointed.op_peaks} != {checkpointed.expected_op_peaks}")
                    assert checkpointed.within_budget, (
                        f"{where}: {checkpointed.step_peak} > {checkpointed.budget_bytes}")
                plain = checkpointed._current[1].plain
                assert plain == (plainly and budget == "100%"), f"{where}: ran plainly: {plain}"
    finally:
        dist.destroy_process_group()


def shard(model, per_linear):
    for block in model:
        if per_linear:
            for layer in block:
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer)
        else:
            fully_shard(block)
    fully_shard(model)
    return model


def local_gradients(model):
    return [p.grad.to_local() for p in model.parameters()]


def fsdp_worker(rank, port, per_linear):
    init(rank, port)
    try:
        model = blocks()
        ref = shard(copy.deepcopy(model), per_linear)
        net = shard(model, per_linear)
        m = rt.Checkpointed(net, rank_data(rank)[0], budget="least", loss=loss, runs=1)
        for budget in BUDGETS:
            for plainly in (False, True):
                m.budget, m.run_plainly = budget, plainly
                for i, x in enumerate(rank_data(rank)):
                    ref.zero_grad()
                    m.zero_grad()
                    loss(ref(x)).backward()
                    loss(m(x)).backward()
                    where = f"rank {rank}, budget {budget}, run_plainly={plainly}, step {i}"
                    for k, (g, h) in enumerate(zip(local_gradients(net), local_gradients(ref))):
                        assert torch.equal(g, h), f"{where}: parameter {k}'s gradient differs"
                    ops = None if m._current[1].plain else [str(o) for o in m.schedule.ops]
                    mine, other = every_rank(ops)
                    assert mine == other, f"{where}: the ranks ran {mine} and {other}"
        # The root was initialized as FSDP's root: the model still runs plainly through it.
        x = rank_data(rank)[0]
        ref.zero_grad()
        net.zero_grad()
        loss(ref(x)).backward()
        loss(net(x)).backward()
        for g, h in zip(local_gradients(net), local_gradients(ref)):
            assert torch.equal(g, h), f"rank {rank}: the root run plainly after remat differs"
    finally:
        dist.destroy_process_group()


class Traced(torch.nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = blocks

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def fsdp_refusal_worker(rank, port):
    init(rank, port)
    try:
        model = blocks(depth=3)
        fully_shard(model[0])
        fully_shard(model[2])
        fully_shard(model)  # gathers block 1's parameters, in a forward Checkpointed never runs
        try:
            rt.Checkpointed(model, rank_data(rank)[0], budget="least", loss=loss, runs=1)
        except rt.ModelError as e:
            assert e.stage_index == 1 and "outside the stage" in str(e) and "0.weight" in str(e), e
        else:
            raise AssertionError("a stage whose parameters the root gathers was accepted")
        traced = Traced(blocks(depth=2))
        for b in traced.blocks:
            fully_shard(b)
        fully_shard(traced)
        try:
            rt.Checkpointed(traced, rank_data(rank)[0], budget="least", loss=loss, runs=1)
        except rt.ModelError as e:
            assert "not traced" in str(e) and "nn.Sequential" in str(e), e
        else:
            raise AssertionError("a sharded model to trace was accepted")
    finally:
        dist.destroy_process_group()


class DistributedDataParallel(unittest.TestCase):
    def test_gradients_bitwise_at_three_budgets_as_predicted(self):
        spawn(ddp_worker)


@unittest.skipIf(fully_shard is None, f"torch {torch.__version__} has no FSDP2 (fully_shard: "
                                      "torch 2.4 and later)")
class FullyShardedDataParallel2(unittest.TestCase):
    def test_sharded_blocks_gradients_bitwise_one_schedule(self):
        spawn(fsdp_worker, False)

    def test_sharded_linears_gradients_bitwise_one_schedule(self):
        spawn(fsdp_worker, True)

    def test_a_stage_gathered_by_the_root_and_a_traced_model_are_refused(self):
        spawn(fsdp_refusal_worker)


if __name__ == "__main__":
    unittest.main()
