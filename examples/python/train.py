#!/usr/bin/env python3
"""Trains torchvision's ResNet-18 (random weights, random data) within a memory budget with
remat.torch.Checkpointed: the model is cut into stages, profiled, solved, and each step runs the
schedule through autograd, reporting what it allocated against the prediction.

    PYTHONPATH=<build>/python python3 examples/python/train.py [--steps N] [--share F]

--share is the budget as a share of what storing every activation takes (default 0.5).
"""

import argparse

import torch
import torchvision

import remat
import remat.torch


def resnet18_stages(classes):
    net = torchvision.models.resnet18(num_classes=classes)
    stem = torch.nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
    blocks = [b for layer in (net.layer1, net.layer2, net.layer3, net.layer4) for b in layer]
    return [stem, *blocks, torch.nn.Sequential(net.avgpool, torch.nn.Flatten(), net.fc)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--share", type=float, default=0.5)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--image", type=int, default=64)
    a = ap.parse_args()

    torch.manual_seed(0)
    stages = resnet18_stages(classes=10)
    x = torch.randn(a.batch, 3, a.image, a.image)
    target = torch.randint(10, (a.batch,))
    loss = lambda y: torch.nn.functional.cross_entropy(y, target)

    # Profile once with an unreachable budget, then ask what fits. With `loss` given, budgets
    # bound the whole step (the loss's side of the backward included).
    m = remat.torch.Checkpointed(stages, x, budget=1 << 62, loss=loss)
    store_all = remat.solve(m.chain, 1 << 62, solver="store-all")
    least = m.least_budget
    m.budget = max(least, int(m.store_all_peak * a.share))
    schedule = m.schedule
    print(f"{len(m.chain)} stages; store-all {m.store_all_peak / 2**20:.1f} MiB, "
          f"{store_all.makespan:.1f} ms; least {least / 2**20:.1f} MiB")
    print(f"budget {m.budget / 2**20:.1f} MiB: {schedule.makespan:.1f} ms predicted, "
          f"{len(schedule.ops) - (2 * len(m.chain) + 1)} recomputations")

    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

    def train_step():
        opt.zero_grad()
        l = loss(m(x))  # m(x): the schedule's forward part
        l.backward()    # the loss's backward, then the schedule's recomputations and backwards
        opt.step()
        return l.item()

    for step in range(a.steps):
        value = train_step()
        print(f"step {step}: loss {value:.4f}, schedule's peak {m.measured_peak / 2**20:.2f} "
              f"MiB (predicted {m.expected_peak / 2**20:.2f}, as predicted: {m.as_predicted}), "
              f"whole step {m.step_peak / 2**20:.2f} MiB, {m.measured_ms:.0f} ms")
        if not (m.within_budget and m.as_predicted):
            raise SystemExit("the step did not keep to its prediction")

if __name__ == "__main__":
    main()
