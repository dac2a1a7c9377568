"""LLM placement policies (ngl, expert-offload, weight-streaming, llm-search) on tiny models."""

from __future__ import annotations

import pytest

from hetsim import schedulers
from hetsim.costmodel import Roofline
from hetsim.costmodel.platform import Device, Link, Platform
from hetsim.graphs.llm import llm_graph
from hetsim.schedulers import SchedulerError
from hetsim.schedulers.llm.residency import Residency, unit_bytes

GIB = 2**30


def box(gpu_bytes: int, host_bytes: int = 10**7, *, link_bw: float = 1e10) -> Platform:
    """A CPU + GPU machine with tiny memories (in bytes), for tiny models."""
    return Platform(
        "tinybox",
        (Device("cpu", "cpu", 1e11, 5e10, host_bytes, dispatch_s=1e-6),
         Device("gpu", "gpu", 1e13, 5e11, gpu_bytes, launch_overhead_s=1e-6, dispatch_s=1e-6)),
        (Link("cpu", "gpu", link_bw, 1e-6),),
    )


def tiny(model: str = "tiny", **kw):
    return llm_graph(model, phase="decode", kv_length=64, weights="f16", **kw)


def test_llm_policies_are_registered_apart_from_the_general_schedulers() -> None:
    assert schedulers.llm_names() == ["ngl", "expert-offload", "weight-streaming", "llm-search"]
    assert not set(schedulers.llm_names()) & set(schedulers.names())
    assert schedulers.get("ngl", n_gpu_layers=3).n_gpu_layers == 3
    with pytest.raises(SchedulerError, match="for LLMs: ngl, expert-offload"):
        schedulers.get("ngll")


@pytest.mark.parametrize("name", ["ngl", "expert-offload", "weight-streaming", "llm-search"])
def test_policies_decline_graphs_that_are_not_llms(name: str) -> None:
    from hetsim.graphs import Graph

    g = Graph(name="plain")
    g.add_op("a", "relu", outputs=[([1, 4], "float32")], flops=4)
    with pytest.raises(SchedulerError, match="'plain' is not an LLM graph"):
        schedulers.get(name).run(g, box(10**6), Roofline())


def test_ngl_puts_the_last_layers_on_the_gpu_and_fits_as_many_as_possible() -> None:
    g = tiny()
    ub = unit_bytes(g)
    layer = ub["blk.1.attn"] + ub["blk.1.ffn"]
    run = schedulers.get("ngl", reserve_bytes=5000).run(g, box(layer + 6000), Roofline())
    r = run.graph.meta["llm"]["residency"]["devices"]
    assert r["blk.1.attn"] == r["blk.1.ffn"] == "gpu"  # llama.cpp offloads the last layers
    assert r["blk.0.attn"] == r["blk.0.ffn"] == r["output"] == r["token_embd"] == "cpu"
    assert run.plan.placement["blk.1.attn_q"] == "gpu" and run.plan.placement["blk.0.attn_q"] == "cpu"
    assert run.result.peak_memory["gpu"] >= layer
    # everything fits: -ngl 3 (2 layers + output); the embedding stays on the CPU
    full = schedulers.get("ngl", reserve_bytes=0).run(g, box(10**6), Roofline())
    assert full.plan.placement["output"] == "gpu" and full.plan.placement["token_embd"] == "cpu"


def test_ngl_given_n_that_does_not_fit_says_what_is_needed() -> None:
    g = tiny()
    with pytest.raises(SchedulerError, match=r"ngl: -ngl 2 does not fit: cpu needs 65792 bytes, has 9.5 MiB; gpu needs 164864 bytes, has 100000 bytes"):
        schedulers.get("ngl", n_gpu_layers=2, reserve_bytes=0).run(g, box(100_000), Roofline())


def test_model_that_fits_nowhere() -> None:
    g = tiny()
    with pytest.raises(SchedulerError, match=r"fits nowhere, even with -ngl 0: cpu needs 230656 bytes, has 100000 bytes; gpu needs 0 bytes, has 1000 bytes"):
        schedulers.get("ngl", reserve_bytes=0).run(g, box(1000, host_bytes=100_000), Roofline())


def test_platform_without_host_memory_is_refused() -> None:
    gpu_only = Platform("gpus", (Device("gpu", "gpu", 1e13, 5e11, GIB),))
    with pytest.raises(SchedulerError, match="platform 'gpus' has no host memory: it needs a 'cpu' device"):
        schedulers.get("ngl").run(tiny(), gpu_only, Roofline())


def test_expert_offload_keeps_attention_on_the_gpu_and_experts_of_the_first_layers_on_the_cpu() -> None:
    g = tiny("tiny-moe")
    ub = unit_bytes(g)
    need = sum(ub.values()) - ub["token_embd"] - ub["blk.0.ffn_exps"]
    run = schedulers.get("expert-offload", reserve_bytes=5000).run(g, box(need + 6000), Roofline())
    r = run.graph.meta["llm"]["residency"]["devices"]
    assert r["blk.0.ffn_exps"] == "cpu" and r["blk.1.ffn_exps"] == "gpu"
    assert all(r[u] == "gpu" for u in ("blk.0.attn", "blk.0.ffn", "blk.1.attn", "output"))
    assert run.plan.placement["blk.0.ffn_down_exps"] == "cpu"
    with pytest.raises(SchedulerError, match="'tiny' has no experts"):
        schedulers.get("expert-offload").run(tiny(), box(10**6), Roofline())


def test_weight_streaming_runs_everything_on_the_gpu_and_moves_weights_over_the_link() -> None:
    g = tiny()
    ub = unit_bytes(g)
    gpu = ub["blk.0.attn"] + ub["output"] + 2 * ub["blk.1.ffn"] + 2 * 2 * 64 * 32 * 2 + 2000
    run = schedulers.get("weight-streaming", reserve_bytes=0).run(g, box(gpu), Roofline())
    res = run.graph.meta["llm"]["residency"]
    assert res["streamed"]  # not everything fits
    compute = {n: d for n, d in run.plan.placement.items() if not n.endswith(".weight")}
    assert {d for n, d in compute.items() if n != "token_embd"} == {"gpu"}
    streamed_bytes = sum(run.graph.nodes[n + ".weight"]["param_bytes"] for n in run.graph.meta["llm"]["streamed"])
    assert run.result.bytes_moved["cpu->gpu"] >= streamed_bytes
    assert run.result.peak_memory["gpu"] <= gpu


def test_search_is_never_slower_than_the_fixed_policies() -> None:
    g = tiny("tiny-moe")
    ub = unit_bytes(g)
    p = box(sum(ub.values()) // 2 + 20_000, link_bw=2e9)
    times = {}
    for name in ("ngl", "expert-offload", "weight-streaming", "llm-search"):
        try:
            times[name] = schedulers.get(name, reserve_bytes=20_000).run(g, p, Roofline()).result.makespan
        except SchedulerError:  # weight-streaming: the KV caches and a layer in flight do not fit
            continue
    assert len(times) >= 3
    assert times["llm-search"] <= min(times.values()) + 1e-15


def test_search_ttft_objective_prices_the_prefill() -> None:
    g = tiny()
    ub = unit_bytes(g)
    p = box(sum(ub.values()) // 2 + 200_000, link_bw=2e9)
    s = schedulers.get("llm-search", objective="ttft", prompt=64, reserve_bytes=200_000)
    r = s.residency(g, p, Roofline())
    pre = llm_graph("tiny", phase="prefill", tokens=64, context=64, weights="f16")
    g2, plan = r.apply(pre, p)
    from hetsim.sim import simulate

    best = simulate(g2, p, plan, Roofline()).makespan
    for name in ("ngl",):
        other = schedulers.get(name, reserve_bytes=200_000).residency(pre, p, Roofline())
        g3, plan3 = other.apply(pre, p)
        assert best <= simulate(g3, p, plan3, Roofline()).makespan + 1e-15
    with pytest.raises(SchedulerError, match="objective must be one of"):
        schedulers.get("llm-search", objective="speed")


def test_residency_round_trips_and_applies_to_either_phase() -> None:
    g = tiny()
    r = Residency({u: "gpu" for u in g.meta["llm"]["units"]} | {"token_embd": "cpu"}, {"blk.1.ffn"}, 1)
    assert Residency.from_dict(r.to_dict()) == r
    pre = llm_graph("tiny", phase="prefill", tokens=16, context=64, weights="f16")
    g2, plan = r.apply(pre, box(10**6))
    assert plan.placement["blk.1.ffn_up.weight"] == "cpu" and plan.placement["blk.1.ffn_up"] == "gpu"
    with pytest.raises(SchedulerError, match="streamed unit 'blk.0.attn' must be a unit on a GPU"):
        Residency({u: "cpu" for u in g.meta["llm"]["units"]}, {"blk.0.attn"}).apply(g, box(10**6))


def test_cpu_compute_and_weight_streaming_share_host_memory() -> None:
    """Layer 0 on the CPU while layer 1's weights stream to the GPU over PCIe: with the
    host memory declared as a contended domain (issue 18's mechanism) both slow down."""
    import dataclasses

    from hetsim.costmodel.memory_domain import MemoryDomain
    from hetsim.sim import simulate

    g = llm_graph("tiny", phase="decode", kv_length=64, weights="f16")
    plain = box(10**6, link_bw=5e10)
    shared = dataclasses.replace(plain, memory_domains=(MemoryDomain("dram", 5e10, {"cpu": "rate", "cpu<->gpu": "rate"}),))
    devices = {u: "gpu" for u in g.meta["llm"]["units"]} | {"token_embd": "cpu", "blk.0.attn": "cpu", "blk.0.ffn": "cpu"}
    g2, plan = Residency(devices, {"blk.1.attn", "blk.1.ffn"}).apply(g, plain)
    alone = simulate(g2, plain, plan, Roofline(), record=True)
    both = simulate(g2, shared, plan, Roofline(), record=True)
    assert both.makespan > alone.makespan
    link = lambda r: [x for x in r.records if x["kind"] == "transfer" and x["bytes"] > 10_000]  # noqa: E731
    assert sum(x["end"] - x["start"] for x in link(both)) > sum(x["end"] - x["start"] for x in link(alone))
