"""The executor's correctness check (references and comparisons), and its errors.

The first run of a plan is compared (a) node by node with a single-device run of
the graph (every node in topological order on the host's memory, same kernels),
naming the first node that differs, and (b) on its graph outputs with the zoo
model's own torch module (its ``forward`` as written). (a) catches any wrong
execution of the plan -- an input read too early, from the wrong producer, a lost
copy --, (b) a wrong wiring or kernel mapping; (a) matters because some randomly
initialised zoo models (GoogLeNet, SqueezeNet) give nearly the same logits for any
input, which (b) alone would not notice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.runtime.backends.base import BackendError, to_numpy
from hetsim.runtime.executor.setup import ExecutionError, Wiring, build_calls, plan_devices
from hetsim.sim.engine.simulator import simulate

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.base import Backend
    from hetsim.runtime.backends.tvm_backend import RelaxModel
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Platform

__all__ = ["check_run", "compare_outputs", "is_oom", "reference_outputs", "run_in_order", "sequential_reference", "tolerance",
           "translate_error"]


def tolerance(dtype: str, *, gpu: bool) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing a plan's outputs with the single-device reference.

    float32 on CPUs: rtol 1e-4, atol 1e-5 x the largest reference magnitude (the
    same kernels, summed in another order, differ by a few ulps per layer). With a
    GPU, whose convolutions use TF32 by default (cuDNN; compared with a CPU
    reference, layer after layer): rtol 2e-2, atol 5e-3 x -- still far below the
    O(1) errors of a tensor read from the wrong producer or too early; set
    ``torch.backends.cudnn.allow_tf32 = False`` and pass tighter ones for a strict
    check. Half precision: rtol 2e-2, atol 1e-2 x.
    """
    if dtype in ("float16", "bfloat16"):
        return 2e-2, 1e-2
    if gpu:
        return 2e-2, 5e-3
    return 1e-4, 1e-5


def reference_outputs(graph: Graph, model: RelaxModel | None) -> list[np.ndarray] | None:
    """Graph outputs of the model's own torch module on the CPU (its forward as written,
    on the model's example inputs: the exported module of ``model.program``, else the
    zoo model the graph names), or None when there is no such module or its outputs do
    not line up with ``meta["outputs"]``."""
    meta = graph.meta
    name = meta.get("model")
    outs_meta = meta.get("outputs") or []
    program = getattr(model, "program", None)
    if (not name and program is None) or not outs_meta:
        return None
    if program is not None:  # the exported module's own forward, outputs flattened alike
        arrays = program.reference_outputs()
        if arrays is None:  # no module to compare with (ONNX): the single-device run
            return None
    else:
        import torch

        # lazy: at the top it would load torch with this module (the tvm backend runs without it)
        from hetsim.graphs import zoo

        try:
            module, inputs = zoo.build(
                str(name), batch=int(meta.get("batch") or 1), seed=int(meta.get("zoo_seed", 0)),
                **dict(meta.get("zoo_kwargs") or {}),
            )
        except Exception:  # noqa: BLE001 - not a zoo model after all: the caller falls back
            return None
        with torch.no_grad():
            out = module(*inputs)
        flat = [out] if isinstance(out, torch.Tensor) else list(_flatten(out))
        arrays = [t.detach().cpu().numpy() for t in flat]
    if len(arrays) != len(outs_meta):
        return None
    for a, spec in zip(arrays, outs_meta):
        if "shape" in spec and list(a.shape) != list(spec["shape"]):
            return None
    return arrays


def _flatten(obj: Any) -> Any:
    if isinstance(obj, tuple | list):
        for o in obj:
            yield from _flatten(o)
    elif isinstance(obj, Mapping):
        for o in obj.values():
            yield from _flatten(o)
    else:
        yield obj


def compare_outputs(
    got: Sequence[np.ndarray], want: Sequence[np.ndarray], rtol: float, atol_rel: float, names: Sequence[str]
) -> tuple[float, str | None]:
    """Largest error relative to the tolerance and, if it exceeds it, why.

    An element passes when ``|got - want| <= atol_rel * max|want| + rtol * |want|``, or
    when both are the same non-finite value (the ``-inf`` of an attention mask).
    """
    worst = 0.0
    for g, w, name in zip(got, want, names):
        g = np.asarray(g, dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return float("inf"), f"output {name}: shape {list(g.shape)} != reference {list(w.shape)}"
        same = (g == w) | (np.isnan(g) & np.isnan(w))  # -inf mask entries, NaN padding
        bad = ~np.isfinite(g) & ~same
        if bad.any():
            return float("inf"), f"output {name}: {int(bad.sum())} non-finite values"
        g, w = np.where(same, 0.0, g), np.where(same, 0.0, w)
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        allowed = atol_rel * max(scale, 1e-30) + rtol * np.abs(w)
        err = np.abs(g - w)
        ratio = float(np.max(err / allowed)) if w.size else 0.0
        worst = max(worst, ratio)
        if ratio > 1.0:
            i = int(np.argmax(err / allowed))
            return ratio, (
                f"output {name}: max abs error {float(err.max()):.3g} (element {i}: {float(g.flat[i]):.6g} "
                f"vs reference {float(w.flat[i]):.6g}); tolerance rtol={rtol:g}, atol={atol_rel:g} x "
                f"max|reference| ({scale:.3g})"
            )
    return worst, None


def sequential_reference(graph: Graph, engine: Any, wiring: Wiring, bk: Backend,
                          specs: Mapping[str, Any]) -> list[tuple[np.ndarray, ...]]:
    """Every node's outputs, all nodes run in topological order on the host's memory."""
    host = engine.host_mem
    spec = specs[engine.platform.host]
    calls = engine.calls[host]
    missing = [engine.names[u] for u in range(engine.n) if calls[u] is None]
    if missing:
        index = engine.index
        bk.configure(spec)
        extra = build_calls(graph, wiring, bk, spec, missing, index)
        calls = list(calls)
        for name, call in extra.items():
            calls[index[name]] = call
    bk.configure(spec)
    vals = run_in_order(calls, engine.n, [(value,) for value in engine.input_values])
    return [tuple(np.array(to_numpy(o), copy=True) for o in vals[u]) for u in range(engine.n)]


def run_in_order(calls: Sequence[Any], n: int, inputs: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Every node's outputs, ``calls[u]`` run for ``u`` in ``range(n)`` (a topological
    order) with the values its slots name: node ``p < n``'s outputs, or for ``p >= n``
    the graph input ``inputs[p - n]`` (a tuple of one value)."""
    vals: list[Any] = [None] * n + list(inputs)
    for u in range(n):
        call = calls[u]
        args = call.tmpl.copy()
        for i, p, k in call.slots:
            args[i] = vals[p][k]
        vals[u] = call(args, 0)
    return vals


def check_run(graph: Graph, engine: Any, ref: tuple[list, list | None] | None,
           rtol: float | None, atol: float | None, gpu: bool) -> dict[str, Any] | None:
    """Compare the first run (request 0) with the references: every node's outputs
    with the single-device run (the first node that differs is named), then the
    graph outputs with the torch module (else with the single-device run)."""
    if ref is None:
        return None
    nodes_ref, module_ref = ref
    dtype = str((graph.meta.get("outputs") or [{}])[0].get("dtype", "float32"))
    r0, a0 = tolerance(dtype, gpu=gpu)
    rtol = r0 if rtol is None else rtol
    atol = a0 if atol is None else atol
    st = engine.reqs[0]
    node_err = 0.0
    for u in range(engine.n):
        name = engine.names[u]
        got = [np.array(to_numpy(o), copy=True) for o in st.vals[u]]
        want = nodes_ref[u]
        if len(got) != len(want):
            raise ExecutionError(f"node {name!r} gave {len(got)} outputs, the single-device run {len(want)}")
        err, why = compare_outputs(got, want, rtol, atol, [f"{name}[{k}]" for k in range(len(want))])
        node_err = max(node_err, err)
        if why is not None:
            dev = engine.dev_names[st.loc[u]]
            raise ExecutionError(
                f"node {name!r} (run on {dev!r}) differs from the same node in a single-device run "
                f"of the graph: {why}. The plan was executed wrongly; no timing is reported"
            )
    out_names = [f"{o['node']}[{o.get('output', 0)}]" for o in graph.meta.get("outputs") or []]
    got = [np.array(to_numpy(x), copy=True) for x in engine.outputs()]
    if module_ref is not None:
        kind, want = "torch module", module_ref
    else:
        kind = "single device"
        want = [nodes_ref[u][k] for u, k in engine.out_keys]
    err, why = compare_outputs(got, want, rtol, atol, out_names)
    if why is not None:
        raise ExecutionError(
            f"the plan's outputs differ from the {kind} reference: {why}. The plan was executed "
            f"wrongly (or a kernel is wrong for this device); no timing is reported"
        )
    return {"reference": kind, "rtol": rtol, "atol": atol, "error": err, "node_error": node_err,
            "nodes_checked": engine.n}


# ------------------------------------------------------------------------- errors
def is_oom(e: BaseException) -> bool:
    text = str(e).lower()
    return type(e).__name__ == "OutOfMemoryError" or isinstance(e, MemoryError) or (
        isinstance(e, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text)
    )


def translate_error(exc: BaseException, where: str, graph: Graph, platform: Platform, plan: Plan,
               cost: Any) -> Exception:
    """A worker's exception as the error :func:`execute` raises."""
    if isinstance(exc, BackendError | ExecutionError):
        return type(exc)(f"{where}: {exc}")
    if is_oom(exc):
        return ExecutionError(f"{where}: out of memory ({type(exc).__name__}: {_first_line(exc)}); "
                              + _predicted_peak(graph, platform, plan, cost))
    return ExecutionError(f"{where}: {type(exc).__name__}: {_first_line(exc)}")


def _predicted_peak(graph: Graph, platform: Platform, plan: Plan, cost: Any) -> str:
    try:
        res = simulate(graph, platform, plan, cost, check_memory=False)
    except Exception as e:  # noqa: BLE001 - the OOM report matters more
        return f"(the simulator could not predict the peak: {e})"
    parts = [f"{d} {res.peak_memory[d] / 2**20:.1f} MiB of {res.memory_capacity[d] / 2**20:.0f} MiB"
             for d in plan_devices(plan, platform)]
    return "the simulator predicts peak memory " + ", ".join(parts) + " for this plan"


def _first_line(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""
