"""The solver's graph and the compiled module agree: the contract of issue 9.

For every zoo model (and the notebook's), under configs whose layouts differ
between neighbours (a random candidate for every graph node, joins included),
the layout transforms of the module ``compile`` builds are exactly the graph's
edges whose two ends got different layouts (boundary edges included): same
count and same (tensor, src layout, dst layout). One transform serves every
consumer of a tensor needing the same layout, so the graph side is
:meth:`LayoutGraph.transforms`, not one per edge.
"""

import re
import warnings
from collections import Counter

import numpy as np
import pytest
from tvm import relax

from graphtune import models, x86
from graphtune.compiler import compile
from graphtune.compiler.driver import rewrite_model
from graphtune.compiler.rewrite import TRANSFORM_ATTR
from graphtune.config import Config
from graphtune import extract
from graphtune.frontend import import_model
from graphtune.solve import Solution
from test_compile import assert_matches_ort

# every zoo model at its smallest size, and the notebook's model (resnet18) at its published size
CASES = [(name, models.info(name).min_image_size) for name in models.names()] + [("resnet18", 224)]


def _tensor(name: str) -> str:
    """Relax writes ``layer1.0.conv1`` as ``layer1_0_conv1`` in emitted variables."""
    return re.sub(r"\W", "_", name)


def module_transforms(mod) -> Counter:
    """``(tensor, src, dst)`` of every layout transform ``main`` calls, once per call."""
    found: Counter = Counter()

    def visit(expr):
        if isinstance(expr, relax.Call) and getattr(expr.op, "name", "") == "relax.call_tir":
            attrs = mod[expr.args[0]].attrs
            if attrs is not None and TRANSFORM_ATTR in attrs:
                src, dst = str(attrs[TRANSFORM_ATTR]).split("->")
                found[(_tensor(expr.args[1].fields[0].name), src, dst)] += 1

    relax.analysis.post_order_visit(mod["main"].body, visit)
    return found


def random_config(graph, seed: int) -> tuple[Config, dict]:
    """A config from a random candidate of every node (joins too), and that assignment."""
    rng = np.random.default_rng(seed)
    assignment = {n: int(rng.integers(len(graph.candidates(n)))) for n in graph.nodes}
    return Config.from_solution(graph, Solution(assignment, 1.0, 1.0, True, "brute", 0.0)), assignment


def check_contract(model, graph, config, assignment) -> tuple[Counter, Counter]:
    """The module's transforms and the graph's, asserted equal; both returned."""
    assert config.check(graph) == []
    new_mod, _, _ = rewrite_model(import_model(model), config, x86.host_target())
    got = module_transforms(new_mod)
    want = Counter((_tensor(t), src, dst) for _, t, src, dst in graph.transforms(assignment))
    assert sum(got.values()) == sum(want.values()), (got - want, want - got)
    assert got == want
    return got, want


@pytest.fixture(scope="module")
def graphs():
    cache = {}

    def get(name, size):
        if (name, size) not in cache:
            model = models.get(name, image_size=size)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[name, size] = model, extract(model, max_candidates=4)
        return cache[name, size]

    return get


@pytest.mark.parametrize("name, size", CASES)
@pytest.mark.parametrize("seed", [0, 5])
def test_module_transforms_are_the_graphs_differing_edges(graphs, name, size, seed):
    model, graph = graphs(name, size)
    config, assignment = random_config(graph, seed)
    got, _ = check_contract(model, graph, config, assignment)
    if len(graph) > 4:  # the configs really differ between neighbours
        assert sum(got.values()) > 0


@pytest.mark.parametrize("name, size", [("shufflenet_v2", 32), ("unet", 16)])
def test_joins_after_split_and_upsample_compile_as_configured(graphs, name, size):
    """The compiler once missed configured joins fed by a split or an upsample
    (found by producer names, which fixed ops did not have): found by name now."""
    model, graph = graphs(name, size)
    config, assignment = random_config(graph, 1)
    check_contract(model, graph, config, assignment)
    assert_matches_ort(model, compile(model, config))


def test_shared_transform_is_charged_once(graphs):
    """resnet18: a block input read by conv1 and the downsample conv (or the add) in one
    other layout runs one transform; the pairwise objective charges it per edge."""
    model, graph = graphs("resnet18", 32)
    graph.fill_edge_costs(lambda shape, src, dst: 1.0, overwrite=True)
    config, assignment = random_config(graph, 5)
    got, want = check_contract(model, graph, config, assignment)
    per_edge = sum(1 for u, v in graph.edges
                   if graph.candidates(u)[assignment[u]].out_layout
                   != graph.candidates(v)[assignment[v]].in_layout)
    assert sum(want.values()) < per_edge  # seed 5: two consumers share a transform
    assert sum(graph.transforms(assignment).values()) == sum(want.values())
