"""Scheduler hyper-parameters are checked against their declared types, in one place
(:mod:`schedulers.hyperparams`), for every registered scheduler."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_schedulers import GRAPHS

from hetsim import schedulers
from hetsim.experiments.cli.main import main
from hetsim.schedulers.base import SchedulerError
from hetsim.schedulers.hyperparams import check_params, declared_types, parse_bool

ALL = [*schedulers.names(), *schedulers.llm_names()]


def registered_class(name: str) -> type:
    return type(schedulers.get(name))


@pytest.mark.parametrize("text", ["False", "false", "no", "OFF", "0"])
def test_a_bool_written_as_a_word_is_parsed(text: str) -> None:
    assert schedulers.get("heft", insertion=text).insertion is False
    assert parse_bool(text) is False


def test_values_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(SchedulerError, match=r"^heft: hyper-parameter 'insertion' must be true or false, got 'maybe'$"):
        schedulers.get("heft", insertion="maybe")
    with pytest.raises(SchedulerError, match=r"^optimal: hyper-parameter 'time_limit_s' must be a finite number >= 0, got -1$"):
        schedulers.get("optimal", time_limit_s=-1)
    with pytest.raises(SchedulerError, match=r"'time_limit_s' must be a finite number >= 0, got nan"):
        schedulers.get("optimal", time_limit_s=math.nan)
    with pytest.raises(SchedulerError, match=r"'max_nodes' must be an int >= 0, got 2.5"):
        schedulers.get("optimal", max_nodes=2.5)
    with pytest.raises(SchedulerError, match=r"'seed' must be an int >= 0 or None, got 'x'"):
        schedulers.get("random", seed="x")


def test_a_scheduler_states_the_smallest_value_of_a_count() -> None:
    with pytest.raises(SchedulerError, match=r"^antichain-dp: hyper-parameter 'microbatches' must be an int >= 1, got 0$"):
        schedulers.get("antichain-dp", microbatches=0)
    with pytest.raises(SchedulerError, match=r"^optimal: hyper-parameter 'requests' must be an int >= 1 or None, got 0$"):
        schedulers.get("optimal", requests=0)
    assert schedulers.get("antichain-dp", microbatches=1).microbatches == 1


def test_values_are_converted_to_the_declared_type() -> None:
    opt = schedulers.get("optimal", time_limit_s="2", max_nodes=12.0, executable="yes", requests="none")
    assert (opt.time_limit_s, opt.max_nodes, opt.executable, opt.requests) == (2.0, 12, True, None)
    assert type(opt.time_limit_s) is float and type(opt.max_nodes) is int


@pytest.mark.parametrize("name", ALL)
def test_every_registered_scheduler_checks_every_declared_hyper_parameter(name: str) -> None:
    cls = registered_class(name)
    declared = declared_types(cls.__init__.__wrapped__)
    assert set(declared) == set(schedulers.get(name).get_params())  # every one has a simple declared type
    for key in declared:
        with pytest.raises(SchedulerError, match=rf"^{cls.name or cls.__name__}: hyper-parameter '{key}' must be "):
            cls(**{key: object()})


def test_check_params_leaves_undeclared_names_to_the_constructor() -> None:
    def init(self, *, k: int = 1, other: list | None = None) -> None: ...  # noqa: ANN001

    assert check_params("x", init, {"k": "3", "other": [1], "unknown": 2}) == {"k": 3, "other": [1], "unknown": 2}


def test_the_command_line_parses_a_bool_word(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = GRAPHS["diamond"]().to_json(tmp_path / "g.json")
    rows = {}
    for word in ("False", "no", "false", "true"):
        argv = ["simulate", str(path), "--platform", "xeon-p2200", "--scheduler", "heft",
                "--scheduler-arg", f"insertion={word}", "--cost", "roofline", "--json"]
        assert main(argv) == 0
        rows[word] = json.loads(capsys.readouterr().out)["makespan_s"]
    expect = schedulers.get("heft", insertion=False).run(GRAPHS["diamond"](), "xeon-p2200", "roofline")
    assert rows["False"] == rows["no"] == rows["false"] == expect.result.makespan
