#!/usr/bin/python3
"""Saves a torchvision network in pieces, each a TorchScript module: the stages remat trains.

    /usr/bin/python3 export_pieces.py resnet18 OUT_DIR     # OUT_DIR/resnet18/00.pt, 01.pt, ...
    /usr/bin/python3 export_pieces.py mobilenet_v2 OUT_DIR

It also saves the whole network, scripted as one module, as OUT_DIR/resnet18.pt (or
mobilenet_v2.pt), for remat::torch::split_script to cut.

A piece is a block of the network (ResNet: the stem, each residual block, the head; MobileNetV2:
each block of `features`, the head), scripted with torch.jit.script and saved in training mode,
so batch norm updates its running statistics as it would in Python. Weights are random (seed 0):
nothing is downloaded. Needs torch and torchvision (Debian: python3-torch, python3-torchvision).
"""
import pathlib
import sys

import torch
import torchvision


def resnet18_pieces(net):
    stem = torch.nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
    blocks = [block for layer in (net.layer1, net.layer2, net.layer3, net.layer4)
              for block in layer]
    head = torch.nn.Sequential(net.avgpool, torch.nn.Flatten(), net.fc)
    return [stem, *blocks, head]


def mobilenet_v2_pieces(net):
    head = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), net.classifier)
    return [*net.features, head]


PIECES = {"resnet18": (torchvision.models.resnet18, resnet18_pieces),
          "mobilenet_v2": (torchvision.models.mobilenet_v2, mobilenet_v2_pieces)}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in PIECES:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(PIECES)}}} OUT_DIR")
    torch.manual_seed(0)
    out = pathlib.Path(sys.argv[2]) / sys.argv[1]
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.pt"):
        old.unlink()
    make, cut = PIECES[sys.argv[1]]
    net = make(num_classes=10)
    pieces = cut(net)
    for i, piece in enumerate(pieces):
        torch.jit.script(piece.train()).save(str(out / f"{i:02d}.pt"))
    whole = out.parent / f"{sys.argv[1]}.pt"
    torch.jit.script(net.train()).save(str(whole))
    print(f"{len(pieces)} pieces in {out}, the whole network in {whole}")


if __name__ == "__main__":
    main()
