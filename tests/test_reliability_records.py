"""Issue 13: the records file never loses a measurement and never trusts a corrupt value."""

import json
import math
import subprocess
import sys
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphtune.measure import Record, Records, Task

pytestmark = pytest.mark.unit

TARGET = {"kind": "llvm", "mcpu": "znver5", "num-cores": 2, "vector_bits": 512, "threads": 2}
TORN = '{"target": {"ki'


def task(c):
    return Task("transform", {"shape": [1, c, 4, 4], "src": "NCHW", "dst": "NCHW8c",
                              "dtype": "float32"})


def ok(c, ms=0.5):
    return Record.success(task(c), TARGET, [ms], threads=2)


def medians(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {r.workload["shape"][1]: r.median_ms for r in Records.load(path)}


def test_two_records_on_a_torn_file_keep_each_others_lines(tmp_path):
    """Failure 1: the second Records used to truncate the file back over the first's appends."""
    path = tmp_path / "shared.records.jsonl"
    path.write_text(ok(1).to_json() + "\n" + TORN)
    with pytest.warns(UserWarning, match="torn last line 2"):
        a = Records(path)
    with pytest.warns(UserWarning, match="torn last line 2"):
        b = Records(path)
    a.append(ok(2))
    a.append(ok(3))
    b.append(ok(4))
    assert medians(path) == {1: 0.5, 2: 0.5, 3: 0.5, 4: 0.5}
    assert TORN not in path.read_text()  # the torn write was cut off exactly once
    assert b.get(task(2), TARGET) is not None  # b read what a appended before writing


_WRITER = """
import sys
from graphtune.measure import Record, Records, Task
path, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
recs = Records(path)
for c in range(first, first + count):
    t = Task("transform", {"shape": [1, c, 4, 4], "src": "NCHW", "dst": "NCHW8c",
                           "dtype": "float32"})
    recs.append(Record.success(t, {"kind": "llvm", "vector_bits": 512}, [0.5], threads=2))
"""


@pytest.mark.integration
def test_concurrent_processes_lose_nothing(tmp_path):
    """Two real processes append to one torn records file at the same time."""
    path = tmp_path / "shared.records.jsonl"
    path.write_text(ok(1).to_json() + "\n" + TORN)
    count = 60
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", "-c", _WRITER, str(path),
                               str(first), str(count)])
             for first in (100, 200, 300)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    lines = path.read_text().splitlines()
    assert len(lines) == 1 + 3 * count
    assert all(json.loads(line) for line in lines)  # no interleaved or torn line


@pytest.mark.parametrize("median, reason", [
    (0.0, "median_ms must be a positive finite number, got 0.0"),
    (-1.0, "median_ms must be a positive finite number, got -1.0"),
    (math.nan, "median_ms must be a positive finite number, got nan"),
    (math.inf, "median_ms must be a positive finite number, got inf"),
    ("fast", "median_ms must be a positive finite number, got 'fast'"),
])
def test_corrupt_medians_are_skipped_naming_file_and_line(tmp_path, median, reason):
    path = tmp_path / "a.records.jsonl"
    bad = json.loads(ok(2).to_json())
    bad["median_ms"] = median
    path.write_text(ok(1).to_json() + "\n" + json.dumps(bad) + "\n" + ok(3).to_json() + "\n")
    with pytest.warns(UserWarning) as caught:
        recs = Records(path)
    [message] = [str(w.message) for w in caught]
    assert f"{path}: skipping unreadable line 2" in message and reason in message
    assert recs.get(task(2), TARGET) is None and len(recs) == 2


def test_bad_repeat_times_are_skipped(tmp_path):
    path = tmp_path / "a.records.jsonl"
    bad = json.loads(ok(2).to_json())
    bad["ms"] = [0.5, -3]
    path.write_text(json.dumps(bad) + "\n")
    with pytest.warns(UserWarning, match="line 1 .*ms must hold positive finite times"):
        assert len(Records(path)) == 0


def test_complete_unreadable_last_line_is_kept(tmp_path):
    """A last line that ends in a newline was written whole: skip it, never delete it."""
    path = tmp_path / "a.records.jsonl"
    path.write_text(ok(1).to_json() + "\n{not a record}\n")
    with pytest.warns(UserWarning, match="unreadable line 2"):
        recs = Records(path)
    recs.append(ok(2))
    assert path.read_text().splitlines()[1] == "{not a record}"
    assert medians(path) == {1: 0.5, 2: 0.5}


def test_records_path_that_cannot_be_written_fails_at_once(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    from graphtune.errors import MeasureError

    with pytest.raises(MeasureError, match="folder .* does not exist"):
        Records(blocker / "a.records.jsonl")  # a path under a regular file: even root cannot
    with pytest.raises(MeasureError, match="cannot be opened for writing"):
        Records("/proc/graphtune.records.jsonl")


_lines = st.one_of(
    st.just(ok(1).to_json()),
    st.builds(lambda d: json.dumps(d), st.dictionaries(
        st.sampled_from(list(json.loads(ok(1).to_json()))),
        st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=5),
                  st.lists(st.floats(), max_size=3)), max_size=12)),
    st.builds(lambda v: json.dumps({**json.loads(ok(5).to_json()), "median_ms": v}),
              st.one_of(st.floats(), st.text(max_size=3), st.none(), st.booleans())),
    st.text(max_size=30),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_lines, max_size=6), newline=st.booleans())
def test_fuzz_records_files_load_or_warn(tmp_path, lines, newline):
    """Whatever a records file holds, loading it warns or yields only valid records."""
    path = tmp_path / "fuzz.records.jsonl"
    text = "\n".join(line.replace("\n", " ") for line in lines)
    path.write_text(text + ("\n" if newline else ""))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = Records(path)
        for rec in recs:
            assert rec.ok and math.isfinite(rec.median_ms) and rec.median_ms > 0 or \
                not rec.ok and rec.median_ms is None
        recs.append(ok(9))
        assert Records.load(path).get(task(9), TARGET) is not None


@pytest.mark.parametrize("value, ok_value", [(0.0, True), (0.37, True), (None, True), (-0.1, False),
                                             (math.nan, False), ("busy", False), (True, False)])
def test_contention_is_kept_and_checked(tmp_path, value, ok_value):
    path = tmp_path / "a.records.jsonl"
    line = json.loads(Record.success(task(2), TARGET, [0.5], threads=2, contention=0.2).to_json())
    assert line["contention"] == 0.2
    line["contention"] = value
    path.write_text(json.dumps(line) + "\n")
    if ok_value:
        assert Records(path).get(task(2), TARGET).contention == value
    else:
        with pytest.warns(UserWarning, match="line 1 .*contention must be null or a finite number >= 0"):
            assert len(Records(path)) == 0


def test_records_without_contention_read_as_unknown(tmp_path):
    path = tmp_path / "a.records.jsonl"
    line = json.loads(ok(2).to_json())
    del line["contention"]
    path.write_text(json.dumps(line) + "\n")
    assert Records(path).get(task(2), TARGET).contention is None


def test_a_disturbed_record_is_measured_again_unless_retakes_are_off(monkeypatch):
    recs = Records()
    recs.append(Record.success(task(2), TARGET, [0.9], threads=2, contention=0.3))
    recs.append(Record.success(task(3), TARGET, [0.5], threads=2, contention=0.01))
    monkeypatch.delenv("GRAPHTUNE_CONTENTION_RETRIES", raising=False)
    assert recs.reusable(task(2), TARGET) is None  # a rerun on a quieter machine heals it
    assert recs.reusable(task(3), TARGET).median_ms == 0.5
    assert recs.get(task(2), TARGET).median_ms == 0.9  # still there for whoever reads it
    monkeypatch.setenv("GRAPHTUNE_CONTENTION_RETRIES", "0")
    assert recs.reusable(task(2), TARGET).median_ms == 0.9
