"""Fuse Conv2d -> BatchNorm2d -> LeakyReLU chains into nn.ConvBNLeakyReLU2d.

nn.Sequential containers are rewritten in place (the fused module takes the conv's name, so
parameter names change from "<i>.weight" to "<i>.0.weight"); other models go through torch.fx
when they trace. The fused modules hold the original Parameter objects, so an optimizer built
before the conversion keeps updating the right tensors. A chain is fused only when the conv's and
the BN's outputs have no other user.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from .nn.activation import LeakyReLU, RReLU
from .nn.conv_bn import ConvBNLeakyReLU2d


class _Tracer(torch.fx.Tracer):
    """Keeps our own modules as single calls in the graph (their forwards check argument values)."""

    def is_leaf_module(self, module: nn.Module, qualified_name: str) -> bool:
        return isinstance(module, (ConvBNLeakyReLU2d, LeakyReLU, RReLU)) or super().is_leaf_module(module, qualified_name)


def _fusable(conv, bn, act) -> bool:
    return (type(conv) is nn.Conv2d and conv.padding_mode == "zeros" and type(bn) is nn.BatchNorm2d
            and bn.num_features == conv.out_channels and isinstance(act, nn.LeakyReLU))


def fuse_sequentials(model: nn.Module) -> int:
    """Fuses chains inside every nn.Sequential of `model`, in place; returns how many."""
    fused = 0
    for module in list(model.modules()):
        if not isinstance(module, nn.Sequential):
            continue
        items = list(module._modules.items())
        rebuilt, i = OrderedDict(), 0
        while i < len(items):
            window = [m for _, m in items[i:i + 3]]
            if len(window) == 3 and _fusable(*window):
                rebuilt[items[i][0]] = ConvBNLeakyReLU2d.from_modules(*window)
                fused, i = fused + 1, i + 3
            else:
                rebuilt[items[i][0]] = items[i][1]
                i += 1
        module._modules = rebuilt
    return fused


def fuse_graph(model: nn.Module) -> nn.Module:
    """Fuses chains in the torch.fx graph of `model`; returns a GraphModule, or `model` when none fused."""
    graph_module = torch.fx.GraphModule(model, _Tracer().trace(model))
    modules = dict(graph_module.named_modules())

    def single_module_user(node, kind):
        return node.op == "call_module" and isinstance(modules.get(node.target), kind) and len(node.users) == 1

    fused = 0
    for node in list(graph_module.graph.nodes):
        if node.op != "call_module" or not isinstance(modules.get(node.target), nn.LeakyReLU):
            continue
        bn_node = node.args[0]
        if not (isinstance(bn_node, torch.fx.Node) and single_module_user(bn_node, nn.BatchNorm2d)):
            continue
        conv_node = bn_node.args[0]
        if not (isinstance(conv_node, torch.fx.Node) and single_module_user(conv_node, nn.Conv2d)):
            continue
        conv, bn, act = modules[conv_node.target], modules[bn_node.target], modules[node.target]
        if not _fusable(conv, bn, act):
            continue
        name = conv_node.target.replace(".", "_") + "_bn_leaky_relu"
        graph_module.add_submodule(name, ConvBNLeakyReLU2d.from_modules(conv, bn, act))
        with graph_module.graph.inserting_before(node):
            replacement = graph_module.graph.call_module(name, conv_node.args, conv_node.kwargs)
        node.replace_all_uses_with(replacement)
        for dead in (node, bn_node, conv_node):
            graph_module.graph.erase_node(dead)
        fused += 1
    if fused == 0:
        return model
    graph_module.graph.lint()
    graph_module.delete_all_unused_submodules()
    graph_module.recompile()
    return graph_module
