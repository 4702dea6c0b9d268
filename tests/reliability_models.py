"""Tiny hand-built ONNX models for the reliability tests (compile in well under a second), and a
records file of failures for them."""

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_blocks import onnx_model


def _conv(nodes, inits, rng, name, src, cin, cout, kernel):
    inits.append(numpy_helper.from_array(
        (rng.standard_normal((cout, cin, *kernel)) * 0.2).astype(np.float32), name + ".w"))
    inits.append(numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32),
                                         name + ".b"))
    nodes.append(helper.make_node("Conv", [src, name + ".w", name + ".b"], [name], name=name,
                                  kernel_shape=list(kernel), pads=[k // 2 for k in kernel] * 2))

def residual(dims=(1, 8, 8, 8)) -> onnx.ModelProto:
    """input -> conv a (8->16) -> conv b (16->16) -> join sum = a + b -> relu -> output."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    _conv(nodes, inits, rng, "a", "input", 8, 16, (3, 3))
    _conv(nodes, inits, rng, "b", "a", 16, 16, (3, 3))
    nodes.append(helper.make_node("Add", ["a", "b"], ["sum"], name="sum"))
    nodes.append(helper.make_node("Relu", ["sum"], ["output"], name="act"))
    return onnx_model(nodes, inits, "residual", dims)

def conv_nd(rank: int) -> onnx.ModelProto:
    """One Conv of ``rank`` spatial dimensions (1: Conv1d, 3: Conv3d), then Relu."""
    rng = np.random.default_rng(1)
    nodes, inits = [], []
    _conv(nodes, inits, rng, f"conv{rank}d", "input", 4, 8, (3,) * rank)
    nodes.append(helper.make_node("Relu", [f"conv{rank}d"], ["output"], name="act"))
    return onnx_model(nodes, inits, f"conv{rank}d", (1, 4) + (6,) * rank)

def all_failed_records(path, model, max_candidates: int = 2) -> None:
    """A records file in which every candidate of convs a and b of ``model`` timed out.

    ``max_candidates`` must be the budget of the tuning that reads the file.
    """
    from graphtune.measure import LocalRunner, Record, Records, Task  # TVM: load on use only
    from graphtune.pipeline import extract

    runner = LocalRunner()
    target = runner.resolve_target(None)
    key = runner.target_key(target)
    graph = extract(model, target, max_candidates)
    recs = Records(path)
    for node in ("a", "b"):
        for cand in graph.candidates(node):
            task = Task(graph.op(node), graph.workload(node), cand.knobs)
            recs.append(Record.failure(task, key, "run: timed out after 60 s"))


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """``graphtune`` with ``argv`` in this process: exit status, stdout, stderr."""
    from graphtune import cli

    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(status: int, err: str, *fragments: str) -> None:
    """A refusal as the CLI must give it: exit 2, one line, no internal error, naming ``fragments``."""
    assert status == 2, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("graphtune: error: ") and "internal error" not in err, err
    for fragment in fragments:
        assert fragment in err, err
