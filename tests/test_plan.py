"""Plans: validation against a graph and a platform, JSON round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsim.graphs import Graph
from hetsim.sim import Plan, PlanError, Platform


@pytest.fixture
def platform() -> Platform:
    return Platform.preset("xeon-p2200")  # gpu has 5 GiB


@pytest.fixture
def chain() -> Graph:
    """a -> b -> c, 1 KiB tensors."""
    g = Graph(name="chain")
    for n in "abc":
        g.add_op(n, "relu", bytes=2048, param_bytes=100)
    g.add_edge("a", "b", bytes=1024)
    g.add_edge("b", "c", bytes=1024)
    return g


class Policy:
    name = "first"

    def select(self, node, view):  # noqa: ANN001, ANN201
        return "cpu"

    def to_dict(self):  # noqa: ANN201
        return {"name": self.name, "params": {"k": 1}}


def test_json_round_trip(tmp_path: Path, chain: Graph, platform: Platform):
    plan = Plan(
        placement={"a": "cpu", "b": "gpu", "c": "gpu"},
        priority={"a": 0, "b": 1.5, "c": 2},
        stages=[["a"], ["b", "c"]],
        microbatches=4,
        meta={"scheduler": "manual", "time_s": 0.01},
    )
    assert plan.validate(chain, platform) is plan
    path = plan.to_json(tmp_path / "plans" / "p.json")
    back = Plan.from_json(path)
    assert back == plan
    assert back.to_dict() == plan.to_dict()
    assert json.loads(path.read_text())["hetsim_plan"] == 1
    assert not list(path.parent.glob(".*tmp"))  # written atomically, no leftovers
    assert Plan.from_dict(Plan({"a": "cpu"}).to_dict()) == Plan({"a": "cpu"})


def test_policy_description_survives_in_meta(chain: Graph, platform: Platform):
    plan = Plan({"a": "cpu"}, policy=Policy())
    plan.validate(chain, platform)  # partial placement is fine with a policy
    data = plan.to_dict()
    assert data["policy"] == {"name": "first", "params": {"k": 1}}
    back = Plan.from_dict(data)
    assert back.policy is None and back.meta["policy"] == data["policy"]


def test_order_follows_priority_then_topology(chain: Graph):
    g = chain
    g.add_op("d", "relu", bytes=8)
    assert Plan({}, priority={"d": -1}).order(g) == ["d", "a", "b", "c"]
    assert Plan({}).order(g) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        (Plan({"a": "cpu", "b": "gpu"}), r"node 'c' has no device"),
        (
            Plan({"a": "cpu", "b": "tpu", "c": "cpu"}),
            r"node 'b' on unknown device 'tpu'; platform 'xeon-p2200' has \['cpu', 'gpu'\]",
        ),
        (Plan({"a": "cpu", "b": "cpu", "c": "cpu", "z": "cpu"}), r"unknown node 'z'"),
        (
            Plan(dict.fromkeys("abc", "gpu"), priority={"a": 2, "b": 1}),
            r"priority of node 'b' \(1\) is before its input 'a' \(2\) on device 'gpu'",
        ),
        (Plan(dict.fromkeys("abc", "gpu"), priority={"q": 1}), r"priority to unknown node 'q'"),
        (
            Plan(dict.fromkeys("abc", "gpu"), priority={"a": float("nan")}),
            r"node 'a': priority must be a number",
        ),
        (Plan(dict.fromkeys("abc", "gpu"), microbatches=0), r"microbatches must be an int in \[1, 1000000\]"),
        (
            Plan({"a": "cpu", "b": "gpu", "c": "gpu"}, stages=[["a", "b"], ["c"]]),
            r"stage 0 spans several devices",
        ),
        (Plan(dict.fromkeys("abc", "cpu"), stages=[["a"], ["b"]]), r"node 'c' is in no stage"),
        (
            Plan(dict.fromkeys("abc", "cpu"), stages=[["b", "c"], ["a"]]),
            r"edge 'a' -> 'b' goes backwards",
        ),
    ],
)
def test_invalid_plans_name_the_culprit(plan: Plan, match: str, chain: Graph, platform: Platform):
    with pytest.raises(PlanError, match=match):
        plan.validate(chain, platform)


def test_priority_across_devices_is_not_a_contradiction(chain: Graph, platform: Platform):
    Plan({"a": "cpu", "b": "gpu", "c": "gpu"}, priority={"a": 5, "b": 0, "c": 1}).validate(
        chain, platform
    )


def test_op_too_big_for_device_memory(platform: Platform):
    g = Graph(name="big")
    g.add_op("huge", "matmul", bytes=6 * 2**30)
    with pytest.raises(
        PlanError, match=r"node 'huge' needs 6.0 GiB but device 'gpu' has 5.0 GiB"
    ):
        Plan({"huge": "gpu"}).validate(g, platform)
    Plan({"huge": "cpu"}).validate(g, platform)
    w = Graph(name="weights")
    for i in range(3):
        w.add_op(f"w{i}", "matmul", bytes=8, param_bytes=2 * 2**30)
    with pytest.raises(PlanError, match=r"weights placed on device 'gpu' take 6.0 GiB"):
        Plan({f"w{i}": "gpu" for i in range(3)}).validate(w, platform)


def test_bad_plan_files(tmp_path: Path):
    with pytest.raises(PlanError, match="no such plan file"):
        Plan.from_json(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(PlanError, match="malformed plan JSON"):
        Plan.from_json(bad)
    with pytest.raises(PlanError, match="not a hetsim plan"):
        Plan.from_dict({"placement": {}})
    with pytest.raises(PlanError, match="schema version 9"):
        Plan.from_dict({"hetsim_plan": 9, "placement": {}})
    with pytest.raises(PlanError, match="'placement' must be a mapping"):
        Plan.from_dict({"hetsim_plan": 1, "placement": ["a"]})


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"stages": [["a", ["b"]], ["c"]]}, r"p\.json: stage 0 holds \['b'\], not a node id"),
        ({"stages": [[["a", "b", "c"]]]}, r"p\.json: stage 0 holds \['a', 'b', 'c'\], not a node id"),
        ({"microbatches": "4"}, r"p\.json: 'microbatches' must be an int in \[1, 1000000\], got '4'"),
        ({"microbatches": True}, r"p\.json: 'microbatches' must be an int in \[1, 1000000\], got True"),
        ({"priority": {"a": 10**400}}, r"p\.json: priority of node 'a' must be a number"),
        ({"placement": {"a": ["cpu"]}}, r"p\.json: 'placement' must be a mapping node -> device name"),
    ],
)
def test_plan_file_values_of_the_wrong_type(tmp_path: Path, change: dict, match: str):
    data = {"hetsim_plan": 1, "placement": {"a": "cpu", "b": "cpu", "c": "cpu"}, **change}
    with pytest.raises(PlanError, match=match):
        Plan.from_dict(data, source="p.json")


def test_plan_built_in_code_with_list_ids(chain: Graph, platform: Platform):
    with pytest.raises(PlanError, match=r"stage 0 holds \['b'\], not a node id"):
        Plan({"a": "cpu", "b": "cpu", "c": "cpu"}, stages=[["a", ["b"]], ["c"]]).validate(chain, platform)
    with pytest.raises(PlanError, match=r"plan places node 'a' on \['cpu'\], not a device name"):
        Plan({"a": ["cpu"], "b": "cpu", "c": "cpu"}).validate(chain, platform)


def test_plan_file_that_is_a_folder_or_huge(tmp_path: Path):
    with pytest.raises(PlanError, match=r": is a folder, not a plan file"):
        Plan.from_json(tmp_path)
    huge = tmp_path / "huge.json"
    huge.write_text('{"hetsim_plan": 1, "placement": {}, "microbatches": 1' + "0" * 5000 + "}")
    with pytest.raises(PlanError, match=r"huge\.json: malformed plan JSON \(ValueError: Exceeds the limit"):
        Plan.from_json(huge)
