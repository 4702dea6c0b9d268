"""benchmarks/precision_cost.py: the candidate sets it times are the ones ``tune`` measures."""

import json
from collections import Counter

import pytest

import graphtune
import precision_cost  # benchmarks/precision_cost.py
from e2e import calibration_data
from graphtune import models
from graphtune.ops import INT8_OPS

pytestmark = pytest.mark.unit


def test_an_int8_model_splits_into_int8_kernels_and_their_fp32_alternatives():
    model = models.get("resnet18", image_size=32)
    qdq = graphtune.quantize(model, calibration_data(model, count=2))
    sets = precision_cost.split_by_precision(precision_cost.kernel_tasks(qdq, None, 1))
    assert sets["int8"] and sets["fp32 alternatives"]
    assert all(t.kind in INT8_OPS for t in sets["int8"])
    assert not any(t.kind in INT8_OPS for t in sets["fp32 alternatives"])
    # every int8 kernel writes uint8, as tune times it; its node's fp32 alternative is a float32 op
    assert {t.workload["out_dtype"] for t in sets["int8"]} == {"uint8"}
    assert {t.workload["dtype"] for t in sets["fp32 alternatives"]} == {"float32"}
    fp32_shapes = {(t.workload["data"][1], t.workload.get("kernel", [None])[0])
                   for t in sets["fp32 alternatives"]}
    assert {(t.workload["data"][1], t.workload.get("kernel", [None])[0]) for t in sets["int8"]} <= fp32_shapes


def test_the_fp32_model_has_each_candidate_once_and_at_most_max_candidates_per_workload():
    tasks = precision_cost.kernel_tasks(models.get("resnet18", image_size=32), None, 2)
    assert len(tasks) == len(set(tasks))
    assert {t.kind for t in tasks} <= {"conv2d", "dense"}
    per_workload = Counter(json.dumps([t.kind, t.workload], sort_keys=True) for t in tasks)
    assert len(per_workload) > 5 and set(per_workload.values()) <= {1, 2}
