"""The check that a compiled model runs no unscheduled function (read from its TIR)."""

from graphtune.compiler import CompiledModel
from graphtune.x86.generic import SCHEDULE_ATTR, SCHEDULES, audit


def assert_scheduled(compiled: CompiledModel) -> None:
    """Every PrimFunc carries a graphtune schedule attribute and passes the structural audit.

    The audit: every block running >= 1024 iterations over >= 2 output
    points sits under a parallel loop, and a spatial one under a vectorised
    loop as well (see graphtune.x86.generic.audit).
    """
    assert compiled.functions, "no functions recorded"
    problems = {}
    for name, func in compiled.functions.items():
        kind = str(func.attrs[SCHEDULE_ATTR]) if func.attrs is not None \
            and SCHEDULE_ATTR in func.attrs else None
        found = ([] if kind in SCHEDULES else [f"schedule attribute {kind!r}"]) + audit(func)
        if found:
            problems[name] = found
    assert not problems, problems
    counted = sum(n for per_op in compiled.schedules.values() for n in per_op.values())
    assert counted == len(compiled.functions)
