"""The array replay (:mod:`sim.engine.array_replay`) gives what the SimPy engine gives, bit
for bit: every result field of every engine reference case (``tests/engine_cases.py``),
run without records, through the compiled kernel, through its uncompiled code, and
through SimPy; and the reference digests of the cases that keep no records."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from engine_cases import REFERENCE, cases, outcome

from hetsim.sim.engine import array_replay
from hetsim.sim.engine import run as engine_run
from hetsim.sim.engine.array_kernel import replay as compiled
from hetsim.sim.engine.array_prep import fanout_tables, graph_arrays, plan_tables
from hetsim.sim.engine.prep import static_fanouts

ROOT = Path(__file__).resolve().parents[1]
CASES = [dataclasses.replace(c, options={**c.options, "record": False}) for c in cases()]
EXPECTED = json.loads(REFERENCE.read_text())


def _outcomes(monkeypatch: pytest.MonkeyPatch, chunk: list, kernel: object) -> tuple[list, list, int]:
    """Each case's outcome through SimPy, then through ``kernel``; how many the kernel ran."""
    with monkeypatch.context() as m:
        m.setattr(engine_run, "replayable", lambda run: False)
        simpy_runs = [outcome(c) for c in chunk]
    replayed = 0

    def counted(run: object) -> object:
        nonlocal replayed
        res = array_replay.replay_run(run, kernel)
        replayed += res is not None
        return res

    with monkeypatch.context() as m:
        m.setattr(array_replay, "MIN_OPS", 0)
        m.setattr(engine_run, "replay_run", counted)
        array_runs = [outcome(c) for c in chunk]
    return simpy_runs, array_runs, replayed


@pytest.mark.parametrize("index", range(0, len(CASES), 200))
def test_compiled_replay_equals_simpy(monkeypatch: pytest.MonkeyPatch, index: int) -> None:
    """Cases ``index .. index + 199``: each mismatch listed by case id."""
    chunk = CASES[index : index + 200]
    simpy_runs, array_runs, replayed = _outcomes(monkeypatch, chunk, compiled)
    wrong = {c.id: {"simpy": a, "arrays": b} for c, a, b in zip(chunk, simpy_runs, array_runs) if a != b}
    assert not wrong, json.dumps(wrong, indent=1)[:4000]
    assert replayed >= len(chunk) // 5  # static plans without noise or launching GPUs: a good share


UNCOMPILED = """
import dataclasses, json, sys
sys.path.insert(0, "tests")
from engine_cases import cases, outcome
from hetsim.sim.engine import array_replay, run as engine_run
chunk = [dataclasses.replace(c, options={**c.options, "record": False}) for c in cases(400)
         if c.graph.nx.number_of_nodes() <= 30][:120]
replayable = engine_run.replayable
engine_run.replayable = lambda run: False
simpy_runs = [outcome(c) for c in chunk]
engine_run.replayable = replayable
array_replay.MIN_OPS = 0
replayed = 0
def counted(run):
    global replayed
    res = array_replay.replay_run(run)
    replayed += res is not None
    return res
engine_run.replay_run = counted
array_runs = [outcome(c) for c in chunk]
print(json.dumps({"wrong": [c.id for c, a, b in zip(chunk, simpy_runs, array_runs) if a != b], "replayed": replayed}))
"""


def test_uncompiled_replay_equals_simpy() -> None:
    """The kernel's Python code, run by the interpreter (``NUMBA_DISABLE_JIT``), gives the
    same on the small cases."""
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", UNCOMPILED], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["wrong"] == []
    assert got["replayed"] >= 20


def test_reference_digests_of_unrecorded_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference cases that keep no records, through the kernel, match their digests."""
    monkeypatch.setattr(array_replay, "MIN_OPS", 0)
    chunk = [c for c in cases() if not c.options.get("record")]
    wrong = {c.id: {"expected": EXPECTED[c.id], "got": got} for c in chunk
             if (got := outcome(c)) != EXPECTED[c.id]}
    assert not wrong, json.dumps(wrong, indent=1)[:4000]
    assert len(chunk) > 200


def test_array_tables_equal_the_engines_fanouts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel's tables made on arrays (:func:`plan_tables`) are those of the engine's
    :class:`Fanout` objects (:func:`static_fanouts`), entry for entry, on every static case."""
    monkeypatch.setattr(array_replay, "MIN_OPS", 0)
    compared = []

    def check(run: object) -> object:
        prep = run.prep
        got = plan_tables(prep, run.platform, run.transfer_time, graph_arrays(prep.tables))
        fos = static_fanouts(prep, run.platform, run.transfer_time)
        want = fanout_tables(len(prep.names), prep.n_out, len(prep.dev_names), list(enumerate(fos)))
        for name in vars(want):
            a, b = getattr(got, name), getattr(want, name)
            if name == "fin_keys":
                a, b = np.sort(a), np.sort(b)
            assert np.array_equal(a, b), (name, a, b)
        compared.append(prep.n_ops)
        return array_replay.replay_run(run)

    monkeypatch.setattr(engine_run, "replay_run", check)
    for case in CASES:
        outcome(case)
    assert len(compared) > 300


def test_a_kernel_that_is_neither_compiled_nor_cached_is_compiled_behind_a_progress_bar(tmp_path):
    """``compiled`` reads numba's cache index: missing, the first call compiles (and the
    run shows a progress bar); present, or the kernel's plain Python function, it does not."""

    class Uncompiled:  # what replay_run reads of a numba dispatcher
        signatures: list = []
        _cache = type("Cache", (), {"cache_path": str(tmp_path)})()
        py_func = compiled.py_func

    assert not array_replay.compiled(Uncompiled())
    (tmp_path / f"array_kernel.{compiled.py_func.__qualname__}-47.py311.nbi").write_bytes(b"")
    assert array_replay.compiled(Uncompiled())
    assert array_replay.compiled(compiled.py_func)
