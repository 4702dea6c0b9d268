"""TVM-free layout graphs shaped like real CNNs, with layout-like costs, for solver tests and benchmarks.

Each generator returns a :class:`~graphtune.graph.LayoutGraph` whose conv
nodes have ``n_candidates`` candidates (knobs ``ic_bn``, ``oc_bn``, ``reg_n``,
``unroll_kw``; layouts ``NCHW{ic_bn}c`` -> ``NCHW{oc_bn}c``, blocks dividing
the channels) with kernel costs from the FLOP count, a block-dependent
efficiency and seeded noise; add/concat are ``join`` nodes with one candidate
per common layout; graph input and outputs are ``NCHW`` boundaries. Edge costs
come from :func:`transform_ms`: 0 when layouts match, else growing with the
tensor size.

Topologies follow the real networks: ResNet-50 (bottlenecks 3-4-6-3),
Inception-v3 (A x3, B, C x4, D, E x2 with split branches), DenseNet-201
(6-12-48-32 layers, growth 32) either with one concat join per layer
(``incremental``) or with an edge from every earlier feature map into each
layer (``all_pairs``, treewidth ~ block size), SSD-ResNet50-512 (backbone,
extra layers, loc/conf heads per feature map) and random graphs.

Examples
--------
>>> g = resnet50(n_candidates=8, seed=0)
>>> g.validate()
>>> len(g) > 70, max(len(g.candidates(n)) for n in g.nodes)
(True, 8)
"""

from __future__ import annotations

import itertools
from typing import Callable

import networkx as nx
import numpy as np

from .graph import Candidate, LayoutGraph
from .layouts import PLAIN, block_of, data_layout

__all__ = [
    "transform_ms",
    "resnet50",
    "inception_v3",
    "densenet201",
    "ssd_resnet50",
    "random_graph",
    "INSTANCES",
]

_BLOCKS = (0, 4, 8, 16, 32, 64)
_EFFICIENCY = {0: 2.4, 4: 1.6, 8: 1.25, 16: 1.0, 32: 1.02, 64: 1.12}
_REG_N = {2: 1.3, 4: 1.1, 8: 1.0, 16: 1.05}
_GFLOPS = 100.0


def transform_ms(shape: list[int], src: str, dst: str) -> float:
    """Modelled ms of ``layout_transform`` of a float32 tensor of logical NCHW ``shape``.

    0 when ``src == dst``; otherwise a launch overhead plus bytes over an
    effective bandwidth, slower when (un)blocking to or from plain ``NCHW``.

    Examples
    --------
    >>> transform_ms([1, 64, 56, 56], "NCHW16c", "NCHW16c")
    0.0
    >>> transform_ms([1, 64, 56, 56], "NCHW", "NCHW16c") > transform_ms([1, 64, 28, 28], "NCHW", "NCHW16c")
    True
    """
    if src == dst:
        return 0.0
    nbytes = 4.0 * float(np.prod(shape))
    a, b = block_of(src), block_of(dst)
    penalty = 1.6 if 0 in (a, b) else 1.0 + 0.1 * abs(np.log2(a) - np.log2(b))
    return 0.004 + nbytes / 6e6 * penalty


class _Builder:
    """Adds conv / join / boundary nodes while tracking the tensor each node produces."""

    def __init__(self, n_candidates: int, seed: int, batch: int = 1) -> None:
        self.graph = LayoutGraph()
        self.rng = np.random.default_rng(seed)
        self.k = n_candidates
        self.batch = batch
        self.shape: dict[str, list[int]] = {}

    def boundary_in(self, name: str, channels: int, size: int) -> str:
        self.graph.add_node(name, [Candidate({}, PLAIN, PLAIN, 0.0)], op="boundary")
        self.shape[name] = [self.batch, channels, size, size]
        return name

    def boundary_out(self, name: str, src: str) -> str:
        self.graph.add_node(name, [Candidate({}, PLAIN, PLAIN, 0.0)], op="boundary")
        self.link(src, name)
        return name

    def link(self, src: str, dst: str) -> None:
        self.graph.add_edge(src, dst, shape=self.shape[src])

    def conv(self, name: str, srcs: str | list[str], cout: int, kernel: tuple[int, int] = (1, 1),
             stride: int = 1) -> str:
        srcs = [srcs] if isinstance(srcs, str) else srcs
        n, _, h, w = self.shape[srcs[0]]
        cin = sum(self.shape[s][1] for s in srcs)
        ho, wo = -(-h // stride), -(-w // stride)
        flops = 2.0 * n * cout * ho * wo * cin * kernel[0] * kernel[1]
        base = flops / (_GFLOPS * 1e6)
        ins = [b for b in _BLOCKS if b == 0 or cin % b == 0]
        outs = [b for b in _BLOCKS if b == 0 or cout % b == 0]
        combos = list(itertools.product(ins, outs, sorted(_REG_N), (False, True)))
        picks = self.rng.choice(len(combos), size=min(self.k, len(combos)), replace=False)
        cands = []
        for p in sorted(picks):
            ic, oc, reg, unroll = combos[p]
            eff = (_EFFICIENCY[ic] + 2 * _EFFICIENCY[oc]) / 3 * _REG_N[reg] * (0.97 if unroll else 1.0)
            cost = base * eff * float(self.rng.lognormal(0.0, 0.08))
            knobs = {"ic_bn": ic, "oc_bn": oc, "reg_n": reg, "unroll_kw": unroll}
            cands.append(Candidate(knobs, data_layout(ic), data_layout(oc), cost))
        workload = {"data": [n, cin, h, w], "kernel": [cout, cin, kernel[0], kernel[1]],
                    "strides": [stride, stride],
                    "padding": [kernel[0] // 2, kernel[1] // 2] * 2, "dilation": [1, 1], "groups": 1,
                    "dtype": "float32"}
        self.graph.add_node(name, cands, op="conv2d", workload=workload)
        self.shape[name] = [n, cout, ho, wo]
        for s in srcs:
            self.link(s, name)
        return name

    def join(self, name: str, srcs: list[str], concat: bool) -> str:
        shapes = [self.shape[s] for s in srcs]
        channels = [s[1] for s in shapes]
        out = list(shapes[0])
        out[1] = sum(channels) if concat else channels[0]
        blocks = [b for b in _BLOCKS if all(b == 0 or c % b == 0 for c in channels)]
        nbytes = 4.0 * float(np.prod(out))
        cost = 0.0 if concat else nbytes / 1e7
        layouts = [data_layout(b) for b in blocks]
        cands = [Candidate({}, lay, lay, cost * (1.2 if b == 0 else 1.0)) for b, lay in zip(blocks, layouts)]
        self.graph.add_node(name, cands, op="join")
        self.shape[name] = out
        for s in srcs:
            self.link(s, name)
        return name

    def finish(self) -> LayoutGraph:
        self.graph.fill_edge_costs(transform_ms)
        return self.graph


def _pooled(b: _Builder, src: str, stride: int = 2) -> str:
    """A pooling op after ``src``: layout-agnostic, so later edges start at ``src`` with the pooled shape."""
    n, c, h, w = b.shape[src]
    b.shape[src] = [n, c, -(-h // stride), -(-w // stride)]
    return src


def _resnet_backbone(b: _Builder, stages: tuple[int, ...], image: int) -> list[str]:
    x = b.boundary_in("input", 3, image)
    x = b.conv("conv1", x, 64, (7, 7), 2)
    x = _pooled(b, x)
    outs = []
    width = 64
    for si, blocks in enumerate(stages):
        for bi in range(blocks):
            stride = 2 if bi == 0 and si > 0 else 1
            pre = f"layer{si + 1}.{bi}"
            y = b.conv(f"{pre}.conv1", x, width, (1, 1))
            y = b.conv(f"{pre}.conv2", y, width, (3, 3), stride)
            y = b.conv(f"{pre}.conv3", y, width * 4, (1, 1))
            short = b.conv(f"{pre}.downsample", x, width * 4, (1, 1), stride) if bi == 0 else x
            x = b.join(f"{pre}.add", [y, short], concat=False)
        outs.append(x)
        width *= 2
    return outs


def resnet50(n_candidates: int = 8, seed: int = 0, image_size: int = 224) -> LayoutGraph:
    """ResNet-50: stem, 3-4-6-3 bottlenecks with residual-add joins, NCHW output boundary.

    Examples
    --------
    >>> resnet50(n_candidates=8).nx.number_of_nodes()
    71
    """
    b = _Builder(n_candidates, seed)
    outs = _resnet_backbone(b, (3, 4, 6, 3), image_size)
    b.boundary_out("output", outs[-1])
    return b.finish()


def inception_v3(n_candidates: int = 8, seed: int = 0, image_size: int = 299) -> LayoutGraph:
    """Inception-v3: stem, blocks A x3, B, C x4, D, E x2 with concat joins and split branches.

    Examples
    --------
    >>> g = inception_v3(n_candidates=8)
    >>> sum(g.op(n) == "join" for n in g.nodes)
    11
    """
    b = _Builder(n_candidates, seed)
    x = b.boundary_in("input", 3, image_size)
    x = b.conv("conv1a", x, 32, (3, 3), 2)
    x = b.conv("conv2a", x, 32, (3, 3))
    x = b.conv("conv2b", x, 64, (3, 3))
    x = _pooled(b, x)
    x = b.conv("conv3b", x, 80, (1, 1))
    x = b.conv("conv4a", x, 192, (3, 3))
    x = _pooled(b, x)

    def chain(pre: str, src: str, spec: list[tuple[int, tuple[int, int], int]]) -> str:
        for k, (c, kern, stride) in enumerate(spec):
            src = b.conv(f"{pre}.{k}", src, c, kern, stride)
        return src

    for i, pool_c in enumerate((32, 64, 64)):
        p = f"mixed5{'bcd'[i]}"
        branches = [chain(f"{p}.b1", x, [(64, (1, 1), 1)]),
                    chain(f"{p}.b5", x, [(48, (1, 1), 1), (64, (5, 5), 1)]),
                    chain(f"{p}.b3", x, [(64, (1, 1), 1), (96, (3, 3), 1), (96, (3, 3), 1)]),
                    chain(f"{p}.pool", x, [(pool_c, (1, 1), 1)])]
        x = b.join(f"{p}.concat", branches, concat=True)
    branches = [chain("mixed6a.b3", x, [(384, (3, 3), 2)]),
                chain("mixed6a.b3d", x, [(64, (1, 1), 1), (96, (3, 3), 1), (96, (3, 3), 2)])]
    x = b.join("mixed6a.concat", branches + [_pooled(b, x)], concat=True)
    for i, c7 in enumerate((128, 160, 160, 192)):
        p = f"mixed6{'bcde'[i]}"
        branches = [chain(f"{p}.b1", x, [(192, (1, 1), 1)]),
                    chain(f"{p}.b7", x, [(c7, (1, 1), 1), (c7, (1, 7), 1), (192, (7, 1), 1)]),
                    chain(f"{p}.b7d", x, [(c7, (1, 1), 1), (c7, (7, 1), 1), (c7, (1, 7), 1), (c7, (7, 1), 1),
                                          (192, (1, 7), 1)]),
                    chain(f"{p}.pool", x, [(192, (1, 1), 1)])]
        x = b.join(f"{p}.concat", branches, concat=True)
    branches = [chain("mixed7a.b3", x, [(192, (1, 1), 1), (320, (3, 3), 2)]),
                chain("mixed7a.b7", x,
                      [(192, (1, 1), 1), (192, (1, 7), 1), (192, (7, 1), 1), (192, (3, 3), 2)])]
    x = b.join("mixed7a.concat", branches + [_pooled(b, x)], concat=True)
    for p in ("mixed7b", "mixed7c"):
        b3 = chain(f"{p}.b3", x, [(384, (1, 1), 1)])
        d3 = chain(f"{p}.b3d", x, [(448, (1, 1), 1), (384, (3, 3), 1)])
        branches = [chain(f"{p}.b1", x, [(320, (1, 1), 1)]),
                    b.conv(f"{p}.b3.a", b3, 384, (1, 3)), b.conv(f"{p}.b3.b", b3, 384, (3, 1)),
                    b.conv(f"{p}.b3d.a", d3, 384, (1, 3)), b.conv(f"{p}.b3d.b", d3, 384, (3, 1)),
                    chain(f"{p}.pool", x, [(192, (1, 1), 1)])]
        x = b.join(f"{p}.concat", branches, concat=True)
    b.boundary_out("output", x)
    return b.finish()


def densenet201(n_candidates: int = 8, seed: int = 0, concat: str = "incremental",
                image_size: int = 224, blocks: tuple[int, ...] = (6, 12, 48, 32)) -> LayoutGraph:
    """DenseNet-201 (growth 32, bottleneck 128).

    Parameters
    ----------
    concat : {"incremental", "all_pairs"}
        ``incremental``: each layer's output is concatenated onto a running
        ``join`` (treewidth 2). ``all_pairs``: every layer reads an edge from
        every earlier feature map of its block (treewidth ~ block size).

    Examples
    --------
    >>> densenet201(8, blocks=(2, 2)).nx.number_of_edges()
    19
    """
    if concat not in ("incremental", "all_pairs"):
        raise ValueError(f"concat must be 'incremental' or 'all_pairs', got {concat!r}")
    b = _Builder(n_candidates, seed)
    x = b.boundary_in("input", 3, image_size)
    x = _pooled(b, b.conv("conv0", x, 64, (7, 7), 2))
    for bi, layers in enumerate(blocks):
        feats = [x]
        for li in range(layers):
            pre = f"block{bi + 1}.layer{li + 1}"
            src = feats if concat == "all_pairs" else feats[-1]
            y = b.conv(f"{pre}.conv1", src, 128, (1, 1))
            y = b.conv(f"{pre}.conv2", y, 32, (3, 3))
            if concat == "all_pairs":
                feats.append(y)
            else:
                feats.append(b.join(f"{pre}.concat", [feats[-1], y], concat=True))
        channels = sum(b.shape[f][1] for f in feats) if concat == "all_pairs" else b.shape[feats[-1]][1]
        src = feats if concat == "all_pairs" else feats[-1]
        if bi < len(blocks) - 1:
            x = _pooled(b, b.conv(f"transition{bi + 1}", src, channels // 2, (1, 1)))
        elif concat == "all_pairs":
            x = b.join("final.concat", feats, concat=True)
        else:
            x = feats[-1]
    b.boundary_out("output", x)
    return b.finish()


def ssd_resnet50(n_candidates: int = 8, seed: int = 0, image_size: int = 512) -> LayoutGraph:
    """SSD-ResNet50-512: ResNet-50 layers 1-3, extra feature layers, loc/conf heads per map.

    Examples
    --------
    >>> g = ssd_resnet50(8)
    >>> sum(g.op(n) == "boundary" for n in g.nodes)
    13
    """
    b = _Builder(n_candidates, seed)
    outs = _resnet_backbone(b, (3, 4, 6), image_size)
    sources = [outs[-1]]
    x = outs[-1]
    for i, (mid, out) in enumerate(((256, 512), (256, 512), (128, 256), (128, 256), (128, 256))):
        y = b.conv(f"extra{i + 1}.conv1", x, mid, (1, 1))
        x = b.conv(f"extra{i + 1}.conv2", y, out, (3, 3), 2)
        sources.append(x)
    for i, src in enumerate(sources):
        for head, per in (("loc", 4), ("conf", 81)):
            y = b.conv(f"head{i}.{head}", src, 6 * per, (3, 3))
            b.boundary_out(f"head{i}.{head}.out", y)
    return b.finish()


def random_graph(n_nodes: int = 200, n_edges: int = 300, n_states: int = 8, seed: int = 0) -> LayoutGraph:
    """Random connected-ish graph with uniform random unary and pairwise costs.

    Examples
    --------
    >>> g = random_graph(10, 12, 3, seed=1)
    >>> len(g), len(g.edges)
    (10, 12)
    """
    rng = np.random.default_rng(seed)
    skeleton = nx.gnm_random_graph(n_nodes, n_edges, seed=int(rng.integers(2**31)))
    g = LayoutGraph()
    for v in skeleton.nodes:
        g.add_node(f"n{v}", costs=rng.uniform(0.0, 1.0, n_states).tolist())
    for u, v in skeleton.edges:
        g.add_edge(f"n{u}", f"n{v}", cost=rng.uniform(0.0, 1.0, (n_states, n_states)))
    return g


INSTANCES: dict[str, Callable[..., LayoutGraph]] = {
    "resnet50": resnet50,
    "inception_v3": inception_v3,
    "densenet201": densenet201,
    "densenet201_allpairs":
        lambda n_candidates=8, seed=0: densenet201(n_candidates, seed, concat="all_pairs"),
    "ssd_resnet50_512": ssd_resnet50,
}
"""CNN-shaped generators by name, each ``f(n_candidates, seed) -> LayoutGraph``."""
