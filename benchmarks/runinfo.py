"""What a benchmark records about the run it made: the CPU, the threads, the command line.

Every benchmark names the CPU its figures come from (:func:`cpu_name`), writes its JSON after
each model so that a long run keeps what it finished (:func:`save_json`, :func:`run_models`),
and ends its output with the line a reader needs to reproduce it (:func:`footer`).

Examples
--------
>>> "family" in cpu_name() or bool(cpu_name())
True
>>> footer("Some CPU").startswith("CPU: Some CPU; TVM_NUM_THREADS=")
True
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["cpu_name", "command", "footer", "save_json", "run_models"]


def cpu_name() -> str:
    """The CPU as Linux names it: ``/proc/cpuinfo``'s model name, with its family and model
    numbers (``AMD EPYC (family 25 model 17)``); the platform's processor string elsewhere."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first CPU's block is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']} model {fields['model']})"
    return name


def command() -> str:
    """The running script's command line (its file name and arguments), quoted for a shell."""
    return shlex.join([os.path.basename(sys.argv[0]), *sys.argv[1:]])


def footer(cpu: str) -> str:
    """The closing line of a benchmark's output: the CPU, ``TVM_NUM_THREADS`` and the command."""
    return f"CPU: {cpu}; TVM_NUM_THREADS={os.environ.get('TVM_NUM_THREADS')}; command: {command()}"


def save_json(path: str, cpu: str, models: list[dict], **fields: Any) -> None:
    """Write ``models`` (the rows so far) to ``path`` with the CPU, the threads, the command and
    any further ``fields``."""
    with open(path, "w") as handle:
        json.dump({"cpu": cpu, "threads": os.environ.get("TVM_NUM_THREADS"), "command": command(),
                   **fields, "models": models}, handle, indent=2)


def run_models(names: list[str], run_one: Callable[[int, str], dict], table: Callable[[list[dict]], str],
               json_path: str | None, **fields: Any) -> tuple[str, list[dict]]:
    """``run_one(index, name)`` for each model, its table row printed and every row so far saved
    to ``json_path`` (when given, with ``fields``: :func:`save_json`) as it finishes; then the
    table of all rows. Returns the CPU (:func:`cpu_name`) and the rows.

    Examples
    --------
    >>> cpu, rows = run_models(["a", "b"], lambda i, name: {"model": name, "index": i},
    ...                        lambda rows: " ".join(r["model"] for r in rows), None)
    a
    b
    <BLANKLINE>
    a b
    >>> rows[1]
    {'model': 'b', 'index': 1}
    """
    cpu, rows = cpu_name(), []
    for index, name in enumerate(names):
        rows.append(run_one(index, name))
        print(table(rows[-1:]), flush=True)
        if json_path:  # after every model: a long run keeps what it finished
            save_json(json_path, cpu, rows, **fields)
    print()
    print(table(rows))
    return cpu, rows
