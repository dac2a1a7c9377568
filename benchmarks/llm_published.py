"""Predicted against published llama.cpp speeds (experiments/llm_published), with the targets.

Every row of ``measurements.csv`` is predicted with :func:`costmodel.llamacpp.predict` from
the model preset of its ``model`` (``graphs/llm/configs``) at its ``quant``, the GPU's cited
figures (``gpus.csv``, as many GPUs as the row ran on; the backend the row names), the host
of ``hosts.csv`` and the row's flags (``-ngl``, ``--n-cpu-moe``, ``-ot``, ``-fa``,
``-b``/``-ub``, ``-nkvo``, ``-d``, threads, harness; llama-bench's defaults where the row
gives none: ``-ngl 99``, ``-ub 512``, ``-b 2048``, pp512 / tg128). A row the planner cannot
express (a model without a preset, a GPU without cited figures, a prompt length not stated)
is not skipped: it counts as failed, at an |error| of 100 %.

Validation is k-fold by source (default 5 folds, ``crc32(source_id) % K``): each fold's rows
are predicted by rates fitted on the other folds' rows, so no row is predicted by a fit
that saw its source. The rates of each backend are fitted on that backend's rows (least
squares of ``log(predicted / measured)``; CUDA together with the CPU-only rows, which fix
the CPU figures every backend shares; every other backend's GPU figures drawn towards
CUDA's where its rows say little). Beside it, a rule of thumb on the same rows: decode at
0.6 x memory bandwidth / bytes each token reads (the weights a token uses on each device,
GPU and CPU parts added), prompt processing at 0.6 x the device's dense FP16 rate / 2 FLOPs
per active weight.

Published runs that are not rows of the data set (``external.csv``, the same columns: other
prompt and generation lengths of a source's runs) are predicted too, each by the rates of the
fold that did not see its source, into ``external_results.csv``.

Writes ``cross_validation.csv`` (every row, held out) and ``results.csv`` (every row by the
rates fitted on all rows: the shipped ones with ``--fit``), the figure
``predicted_vs_measured.png`` (held-out predictions, a panel per backend), and prints the
figures per backend and test with the targets.

Run: ``python benchmarks/llm_published.py [--fit] [--folds 5]``
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import re
import subprocess
import sys
import time
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from hetsim.costmodel.base import CostModelError  # noqa: E402
from hetsim.costmodel.llamacpp import (  # noqa: E402
    MEMORY_CLASSES,
    AchievedRates,
    BackendRates,
    LlamaCppRun,
    Machine,
    place,
    predict,
)
from hetsim.experiments.llm_machine import find_gpu, machine_from_flags  # noqa: E402
from hetsim.graphs.graph import GraphError  # noqa: E402
from hetsim.graphs.llm.model_source import load_model  # noqa: E402
from hetsim.graphs.llm.presets import canonical_preset  # noqa: E402
from hetsim.schedulers import SchedulerError  # noqa: E402

DATA = ROOT / "experiments" / "llm_published"
BACKENDS = ("cuda", "vulkan", "rocm", "sycl", "metal", "cpu")

#: hosts of the rows (``hosts.csv``, matched by the start of a row's ``cpu`` and ``ram``):
#: physical cores, the threads llama.cpp runs by default (its P-cores on a hybrid Intel),
#: DRAM peak (transfer rate x 8 bytes x channels; 0: not known), PCIe generation of the GPU slot
with (DATA / "hosts.csv").open() as _fh:
    HOSTS = [dict(cpu=r["cpu"], ram=r["ram"], cores=int(r["cores"]), threads=int(r["default_threads"]),
                  ram_bw=float(r["ram_bw_gb_s"] or 0) * 1e9, pcie=int(r["pcie_gen"] or 0))
             for r in csv.DictReader(_fh)]
#: models of the same architecture as a preset: Qwen3-30B-A3B's fine-tunes (Instruct-2507, Coder,
#: VL's language model) and DeepSeek-Coder-V2-Lite (further trained from DeepSeek-V2-Lite); models
#: a row names only as llama-bench prints them, whose architecture, parameter count and layers fix
#: the dimensions: ``llama 7B`` of 7.24 B parameters is Mistral 7B's shape (LLaMA 7B has 6.74 B),
#: ``qwen2 14B`` of 14.77 B in 48 layers is Qwen2.5-14B's (Qwen1.5-14B: 14.2 B in 40); Qwen3.8-27B's
#: text config is Qwen3.5-27B's (the same class and sizes; its GGUF's 0.42 B parameters more are the
#: multi-token-prediction layer, which llama-bench's decoding does not run)
MODEL_ALIASES = {"qwen3-30b-a3b-instruct-2507": "qwen3-30b-a3b", "qwen3-vl-30b-a3b": "qwen3-30b-a3b",
                 "qwen3-coder-30b-a3b": "qwen3-30b-a3b", "deepseek-coder-v2-lite": "deepseek-v2-lite",
                 "llama-7.24b": "mistral-7b", "qwen2-14b": "qwen2.5-14b", "qwen3.8-27b": "qwen3.5-27b"}
DEFAULT_TOKENS = {"pp": 512, "tg": 128}
#: harnesses whose timings are llama-bench's own (llama-sweep-bench and llama-batched-bench time
#: the same decode calls); the others add a front end's work
BENCH_HARNESSES = ("", "llama-bench", "sweep-bench", "llama-batched-bench")
with (DATA / "sources.csv").open() as _fh:
    SOURCE_DATES = {r["source_id"]: r["date"] for r in csv.DictReader(_fh)}
#: llama.cpp's Metal backend ran the whole model on the GPU for any ``-ngl`` above 0 ("any value
#: larger than 0 will offload the computation to the GPU", its 2023 README) until the ggml-backend
#: integration (PR #4766, merged 2024-01-12) made partial offload per layer possible
METAL_PARTIAL_OFFLOAD = "2024-01-12"
#: a failed row's |error|
FAILED_ERROR = 1.0


def _num(v: str | None) -> float | None:
    return float(v) if v not in ("", None) else None


def _host(row: dict) -> dict | None:
    return next((h for h in HOSTS if row["cpu"].startswith(h["cpu"]) and row["ram"].startswith(h["ram"])), None)


def _ram_gb(row: dict) -> float | None:
    """The host memory the row states (``64 GB``, ``128 GiB unified``), in GB."""
    m = re.search(r"(\d+(?:\.\d+)?)\s*(GB|GiB)\b", row["ram"])
    if m is None:
        return None
    return float(m.group(1)) * (2**30 / 1e9 if m.group(2) == "GiB" else 1.0)


def backend(row: dict) -> str:
    """The row's llama.cpp backend in the rates file's names."""
    b = row["backend"].strip().lower()
    return {"hip": "rocm"}.get(b, b)


def case(row: dict) -> tuple[object, Machine, LlamaCppRun, str, int] | str:
    """(model, machine, run, test, tokens) of a row, or why the planner cannot express it."""
    b = backend(row)
    if b not in BACKENDS:
        return f"backend {row['backend']!r} unknown"
    if not row["quant"]:
        return "weight type not stated"
    name = canonical_preset(MODEL_ALIASES.get(row["model"], row["model"]))
    if name is None:
        return f"no preset for {row['model']!r}"
    try:
        model = load_model(name, row["quant"])
    except GraphError as e:
        return str(e)
    if row["test"] == "pp" and not row["tokens"]:
        return "prompt length not stated (an average over lengths)"
    tokens = int(_num(row["tokens"]) or DEFAULT_TOKENS[row["test"]])
    host = _host(row) if row["cpu"] else None
    threads = int(_num(row["threads"]) or (host["threads"] if host else 0))
    cores = host["cores"] if host else threads
    gpu = row["gpu"] if b != "cpu" else ""
    ngl = int(_num(row["ngl"]) if row["ngl"] != "" else (99 if gpu else 0))
    if b == "metal" and ngl >= 1 and date(row)[:10] < METAL_PARTIAL_OFFLOAD:
        ngl = 999  # the whole model on the GPU (see METAL_PARTIAL_OFFLOAD)
    run = LlamaCppRun(ngl=ngl, cuda_graphs=b == "cuda" and cuda_graphs(row), mmq=b != "cuda" or mmq(row),
                      cpu_tiled_gemm=date(row) >= "2024-04", n_cpu_moe=int(_num(row["n_cpu_moe"]) or 0),
                      override_cpu=tuple(p for p in row["override_tensor"].split(";") if p),
                      ubatch=int(_num(row["ubatch"]) or 512), batch=int(_num(row["batch"]) or 2048),
                      flash_attn=bool(_num(row["flash_attn"])),
                      kv_offload=(row.get("no_kv_offload") or "0") != "1",
                      depth=int(_num(row.get("depth")) or 0), threads=threads,
                      harness="llama-bench" if row.get("harness", "") in BENCH_HARNESSES else "other")
    try:
        if gpu:
            g = find_gpu(gpu)
            unified = not g["pcie_gen"]
            ram_gb = _ram_gb(row)
            if unified and not g["memory_gib"] and ram_gb is None:
                # one pool of a size the row does not state: at least what the run placed (it ran)
                need = place(model, run, run.depth + tokens, gpus=1).memory
                ram_gb = sum(need.values()) / 1e9
            host_bw = host["ram_bw"] if host and host["ram_bw"] else (
                float(g["mem_bandwidth_gb_s"] or 0) * 1e9 if unified else 0.0)
            if unified and not host_bw:
                return (f"the memory bandwidth of {gpu!r} is not known (it shares the host's memory, which the row "
                        "does not state)")
            pcie = None
            if not unified:
                gen = min(int(g["pcie_gen"]), host["pcie"]) if host and host["pcie"] else int(g["pcie_gen"])
                pcie = f"{gen}x{g['pcie_lanes']}"
            machine = machine_from_flags(gpu, ram_gb=ram_gb or 64, ram_bw=host_bw / 1e9 if host_bw else 1.0,
                                         threads=cores, pcie=pcie, gpus=int(float(row["gpu_count"] or 1)), backend=b)
            if not host_bw:
                machine = replace(machine, host_bandwidth=0.0)  # not known: an error where the run reads host memory
            if ram_gb is None:
                machine = replace(machine, host_memory=0.0)
        else:
            if host is None:
                return f"host {row['cpu']!r} with {row['ram']!r} not in hosts.csv"
            machine = machine_from_flags(None, ram_gb=_ram_gb(row) or 64, ram_bw=host["ram_bw"] / 1e9 or 1.0,
                                         threads=cores)
            if not host["ram_bw"]:
                machine = replace(machine, host_bandwidth=0.0)
    except (SchedulerError, CostModelError) as e:
        return str(e).split(";")[0]
    if machine.has_gpu and not machine.unified_memory:
        weights = place(model, run, run.depth + tokens, gpus=machine.gpu_count).breakdown["gpu"]["weights"]
        if weights > machine.gpu_memory:
            return ("the GPU's weights alone exceed its memory: the planner refuses the placement (the driver "
                    "spilled them to host memory)")
    return model, machine, run, row["test"], tokens


def cuda_graphs(row: dict) -> bool:
    """Whether the row's llama.cpp replayed generation as CUDA graphs: builds from June 2024
    on (PR #6766 merged in May 2024) on Ampere or newer GPUs (Volta, Turing and Pascal ran
    without them)."""
    older = any(p in row["gpu"] for p in ("RTX 20", "Quadro RTX", "T4", "V100", "P40", "GTX 10"))
    return date(row)[:7] >= "2024-06" and not older


def mmq(row: dict) -> bool:
    """Whether the row's llama.cpp multiplied quantised weights with its MMQ kernels in
    prompt processing: the default from PR #8075 (merged 2024-06-23) on; builds before it
    dequantised to F16 for cuBLAS at micro-batches above 32 rows on GPUs with tensor cores
    (a GPU without them, Pascal, ran MMQ on ``dp4a``)."""
    return date(row)[:10] >= "2024-06-23" or bool(row["gpu"]) and not find_gpu(row["gpu"])["fp16_tensor_tflops_dense"]


def date(row: dict) -> str:
    """The date of the row's source, as ``sources.csv`` gives it (``YYYY-MM[-DD]`` first)."""
    return SOURCE_DATES.get(row["source_id"], "")


def rows(name: str = "measurements.csv") -> list[dict]:
    """The rows of ``measurements.csv`` (or of ``external.csv``, the same columns)."""
    with (DATA / name).open() as fh:
        return list(csv.DictReader(fh))


def rule_of_thumb(model, machine: Machine, run: LlamaCppRun, test: str, tokens: int) -> float:
    """Tokens/s by the rule of thumb (see the module docstring; NaN for prompt processing on a CPU)."""
    pl = place(model, run, run.depth + tokens, has_gpu=machine.has_gpu, gpus=machine.gpu_count)
    a = model.arch
    if test == "tg":
        read = {"gpu": 0.0, "host": 0.0}
        for i, groups in enumerate(pl.layers):
            by = model.layer_bytes[i]
            for kind in ("attn", "ffn", "exps"):
                share = a.top_k / a.experts if kind == "exps" and a.is_moe else 1.0
                read["gpu" if groups[kind] == "gpu" else "host"] += getattr(by, kind) * share
        read[pl.output_device] += model.output_bytes
        seconds = read["gpu"] / (0.6 * machine.gpu_bandwidth) if read["gpu"] else 0.0
        if read["host"]:
            seconds += read["host"] / (0.6 * (machine.host_bandwidth or machine.gpu_bandwidth))
        return 1.0 / seconds
    if not machine.has_gpu:
        return math.nan  # a CPU has no cited peak here
    elements = sum(le.attn + le.ffn + le.exps * (a.top_k / a.experts if a.is_moe else 1.0)
                   for le in model.layer_elements)
    return 0.6 * machine.gpu_flops / (2 * elements)


#: the figures a prediction's seconds are a sum of terms in: each term is a coefficient of the row
#: times one of these (the reciprocal of a rate, an overhead, or a product of both)
BASIS = ("1/gpu_bw_frac", *(f"1/{name}" for _, name in MEMORY_CLASSES), "1/gemm_frac_quant", "half/gemm_frac_quant",
         "1/gemm_frac_float", "half/gemm_frac_float", "1/cpu_bw", "1/cpu_thread_flops", "1/cpu_tiled_flops", "1/cpu_attn_flops",
         "1/pcie_frac", "gpu_token_s", "gpu_layer_s", "graph_layer_s", "switch_s", "server_request_s",
         "server_token_s")


def _probe(term: str) -> AchievedRates:
    """Rates at which a prediction's seconds are exactly the coefficient of ``term``."""
    inf = math.inf
    v = dict(gpu_bw_frac=inf, **{name: inf for _, name in MEMORY_CLASSES}, gpu_token_s=0.0, gpu_layer_s=0.0,
             graph_layer_s=0.0, gemm_frac_quant=inf, gemm_frac_float=inf, expert_rows_half=0.0, cpu_bw_frac=inf, cpu_thread_bw=inf, cpu_thread_flops=inf,
             cpu_tiled_flops=inf, pcie_frac=inf, switch_s=0.0, cpu_attn_flops=inf, server_request_s=0.0,
             server_token_s=0.0)
    name = term.split("/")[-1]
    if term == "1/cpu_bw":
        v["cpu_bw_frac"] = 1.0  # seconds x host bandwidth: the bytes read from host memory
    elif term.startswith("half/"):
        v[name], v["expert_rows_half"] = 1.0, 1.0
    elif term.startswith("1/"):
        v[name] = 1.0
    else:
        v[name] = 1.0
    return AchievedRates(**v)


def linearise(case: tuple) -> np.ndarray:
    """The coefficient of each :data:`BASIS` term in the row's predicted seconds (per token for
    tg, for the whole prompt for pp), found by predicting at :func:`_probe`'s rates."""
    model, machine, run, test, tokens = case
    pl = place(model, run, run.context or run.depth + tokens, has_gpu=machine.has_gpu, gpus=machine.gpu_count)
    coef = []
    for term in BASIS:
        c = sum(predict(model, machine, run, test, tokens, _probe(term), pl).seconds.values())
        if term.startswith("half/"):
            c -= coef[BASIS.index("1/" + term.split("/")[1])]
        coef.append(c)
    return np.array(coef)


def basis_values(rates: AchievedRates, machine: Machine, threads: int) -> np.ndarray:
    """Each :data:`BASIS` term at ``rates`` on ``machine``."""
    r = rates
    cpu_bw = min(machine.host_bandwidth * r.cpu_bw_frac, threads * r.cpu_thread_bw) if machine.host_bandwidth else 0
    return np.array([1 / r.gpu_bw_frac, *(1 / r.gpu_bandwidth_fraction(prefix) for prefix, _ in MEMORY_CLASSES),
                     1 / r.gemm_frac_quant, r.expert_rows_half / r.gemm_frac_quant,
                     1 / r.gemm_frac_float, r.expert_rows_half / r.gemm_frac_float,
                     machine.host_bandwidth / cpu_bw if cpu_bw else 0.0, 1 / r.cpu_thread_flops,
                     1 / r.cpu_tiled_flops, 1 / (r.cpu_attn_flops or r.cpu_thread_flops), 1 / r.pcie_frac,
                     r.gpu_token_s, r.gpu_layer_s, r.graph_layer_s, r.switch_s, r.server_request_s,
                     r.server_token_s])


class Linear:
    """The rows of a fit as coefficients: predicted seconds = coefficients x basis values."""

    def __init__(self, table: list) -> None:
        self.table = table
        self.coef = np.array([linearise(c) for _, c, _ in table]) if table else np.zeros((0, len(BASIS)))
        self.work = np.array([c[4] if c[3] == "pp" else 1 for _, c, _ in table], dtype=float)
        self.measured = np.array([m for _, _, m in table], dtype=float)

    def log_errors(self, rates: AchievedRates) -> np.ndarray:
        """``log(predicted / measured)`` of every row."""
        phi = np.array([basis_values(rates, c[1], _threads(c)) for _, c, _ in self.table])
        seconds = (self.coef * phi).sum(axis=1)
        return np.log(self.work / seconds / self.measured)


def _threads(case: tuple) -> int:
    machine, run = case[1], case[2]
    return min(run.threads, machine.threads) if run.threads and machine.threads else run.threads or machine.threads


def evaluate(cases: list, rates: AchievedRates) -> np.ndarray:
    """``log(predicted / measured)`` of each ``(row, case, measured)``."""
    out = []
    for _, (model, machine, run, test, tokens), measured in cases:
        p = predict(model, machine, run, test, tokens, rates)
        out.append(math.log(p.tokens_per_s / measured))
    return np.array(out)


#: fractions of another class of GPU memory than ``gpu_bw_frac``'s (0: ``gpu_bw_frac``)
MEMORY_FRACTIONS = tuple(name for _, name in MEMORY_CLASSES)
FRACTIONS = ("gpu_bw_frac", *MEMORY_FRACTIONS, "gemm_frac_quant", "gemm_frac_float", "cpu_bw_frac", "pcie_frac")
#: figures every backend shares: the CPU's (fitted with CUDA and the CPU-only rows)
CPU_FIGURES = ("cpu_bw_frac", "cpu_thread_bw", "cpu_thread_flops", "cpu_tiled_flops", "cpu_attn_flops")
#: bounds other than the defaults (fractions 0.01..1, other figures 1e-9..1e15); a front end's work per
#: request (tokenising, the HTTP exchange, the prompt cache) is at most half a second, a hand-over
#: between CPU and GPU (a synchronisation and one token's hidden state, kilobytes) at most 50 us
HIGH = {"switch_s": 5e-5, "server_request_s": 0.5, "server_token_s": 0.1, "gpu_token_s": 0.1,
        "gpu_layer_s": 1e-2, "graph_layer_s": 1e-2}

#: a figure that cannot exceed another: a step replayed as a CUDA graph launches nothing of its own
NOT_ABOVE = {"graph_layer_s": "gpu_layer_s"}

START = AchievedRates(gpu_bw_frac=0.7, **{name: 0.7 for _, name in MEMORY_CLASSES}, gpu_token_s=1e-4,
                      gpu_layer_s=2e-5, graph_layer_s=2e-5, gemm_frac_quant=0.15, gemm_frac_float=0.4, expert_rows_half=16, cpu_bw_frac=0.6, cpu_thread_bw=8e9,
                      cpu_thread_flops=3e10, cpu_tiled_flops=3e10, pcie_frac=0.7, switch_s=1e-4,
                      cpu_attn_flops=3e10, server_request_s=0.05, server_token_s=1e-3)


def fit_one(cases: Linear, start: AchievedRates, free: list[str], prior: AchievedRates | None = None,
            prior_weight: float = 0.3, fitted_on: str = "") -> AchievedRates:
    """Least squares of log errors over ``cases`` in the figures ``free`` (log space, within
    bounds); with ``prior``, each free figure is drawn towards the prior's in log space."""
    from scipy.optimize import least_squares

    names = AchievedRates.names()
    base = start.to_dict()
    # a figure bounded by another (NOT_ABOVE) is fitted as its ratio to it, at most 1
    ratio = {n: of for n, of in NOT_ABOVE.items() if n in free and of in free}

    def initial(r: dict, n: str) -> float:
        return max(r[n], 1e-9) / (max(r[ratio[n]], 1e-9) if n in ratio else 1.0)

    lo = {n: (0.01 if n in FRACTIONS else 1e-9 if n not in ratio else 1e-3) for n in free}
    hi = {n: (1.0 if n in FRACTIONS or n in ratio else HIGH.get(n, 1e15)) for n in free}
    lb = np.log([lo[n] for n in free])
    ub = np.log([hi[n] for n in free])
    x0 = np.clip(np.log([min(initial(base, n), hi[n]) for n in free]), lb + 1e-9, ub - 1e-9)
    p0 = np.log([initial(prior.to_dict(), n) for n in free]) if prior is not None else None

    def rates_at(x: np.ndarray) -> AchievedRates:
        fitted = dict(zip(free, np.exp(x), strict=True))
        for n, of in ratio.items():
            fitted[n] *= fitted[of]
        return AchievedRates(**({n: base[n] for n in names} | fitted))

    def residual(x: np.ndarray) -> np.ndarray:
        r = cases.log_errors(rates_at(x))
        if p0 is not None:
            r = np.concatenate([r, math.sqrt(prior_weight) * (x - p0)])
        return r

    res = least_squares(residual, x0, bounds=(lb, ub), loss="soft_l1", f_scale=0.1, max_nfev=60 * len(free))
    values = {n: float(f"{v:.4g}") for n, v in rates_at(res.x).to_dict().items() if n in names}
    jac = np.abs(res.jac[: len(cases.table)]).sum(axis=0)
    undetermined = [n for n, col in zip(free, jac, strict=True) if col < 1e-9]
    if prior is None:  # CUDA's own: an undetermined figure at its physical bound
        for n in undetermined:
            values[n] = 1.0 if n in FRACTIONS else 0.0
        for n in MEMORY_FRACTIONS:  # no row of that memory: the other GPUs' fraction
            if n in undetermined:
                values[n] = values["gpu_bw_frac"]
        if "graph_layer_s" in undetermined:
            values["graph_layer_s"] = values["gpu_layer_s"]
        for n, other in (("cpu_tiled_flops", "cpu_thread_flops"), ("cpu_thread_flops", "cpu_tiled_flops"),
                         ("cpu_attn_flops", "cpu_thread_flops")):
            if n in undetermined and other not in undetermined:
                values[n] = values[other]
        if "cpu_thread_bw" in undetermined:
            values["cpu_thread_bw"] = 1e15
    else:  # another backend: an undetermined figure is CUDA's
        for n in undetermined:
            values[n] = getattr(prior, n)
        for n in MEMORY_FRACTIONS:
            if n in undetermined and "gpu_bw_frac" not in undetermined and prior.gpu_bw_frac:
                # a memory's own fraction is the memory's: CUDA's ratio of the two on this backend's own
                values[n] = float(f"{values['gpu_bw_frac'] * getattr(prior, n) / prior.gpu_bw_frac:.4g}")
    return AchievedRates(**values, undetermined=tuple(undetermined), fitted_on=fitted_on)


def fit(table: list, what: str = "every row", linear: dict | None = None) -> BackendRates:
    """The rates of every backend fitted on ``table`` (see the module docstring); ``linear``:
    each row id's :func:`linearise` coefficients, computed once for every fit."""
    names = AchievedRates.names()
    by_backend: dict[str, list] = {}
    for t in table:
        by_backend.setdefault(backend(t[0]), []).append(t)

    def lin(rows_: list) -> Linear:
        out = Linear.__new__(Linear)
        out.table = rows_
        out.coef = (np.array([linear[t[0]["id"]] for t in rows_]) if linear is not None
                    else Linear(rows_).coef) if rows_ else np.zeros((0, len(BASIS)))
        out.work = np.array([c[4] if c[3] == "pp" else 1 for _, c, _ in rows_], dtype=float)
        out.measured = np.array([m for _, _, m in rows_], dtype=float)
        return out

    base = by_backend.get("cuda", []) + by_backend.get("cpu", [])
    note = f"experiments/llm_published ({what}), benchmarks/llm_published.py"
    cuda = fit_one(lin(base), START, names, fitted_on=note) if base else START
    out = {"cuda": cuda, "cpu": cuda}
    gpu_figures = [n for n in names if n not in CPU_FIGURES]
    for b in ("vulkan", "rocm", "sycl", "metal"):
        rows_ = by_backend.get(b, [])
        out[b] = fit_one(lin(rows_), cuda, gpu_figures, prior=cuda, fitted_on=note) if rows_ else cuda
    return BackendRates(out, note)


def predict_rows(table: list, failed: list, rates_of, name: str = "measurements.csv") -> list[dict]:
    """One output row per data row: predicted (by ``rates_of(row)``) or failed."""
    out = []
    for r, (model, machine, run, test, tokens), measured in table:
        try:
            pred = predict(model, machine, run, test, tokens, rates_of(r)).tokens_per_s
            rule = rule_of_thumb(model, machine, run, test, tokens)
        except CostModelError as e:
            failed.append((r, str(e).split(": ", 1)[-1]))
            continue
        out.append(dict(id=r["id"], source_id=r["source_id"], backend=backend(r), test=test, tokens=tokens,
                        measured=measured, predicted=round(pred, 2), error=round(pred / measured - 1, 4),
                        rule="" if math.isnan(rule) else round(rule, 2),
                        rule_error="" if math.isnan(rule) else round(rule / measured - 1, 4), failed=""))
    for r, why in failed:
        out.append(dict(id=r["id"], source_id=r["source_id"], backend=backend(r), test=r["test"],
                        tokens=r["tokens"], measured=float(r["tokens_per_s"]), predicted="", error="", rule="",
                        rule_error="", failed=why))
    order = {r["id"]: i for i, r in enumerate(rows(name))}
    return sorted(out, key=lambda d: order[d["id"]])


def summary(out: list[dict]) -> list[dict]:
    """Per backend and test: rows, failed, mean / max |error| (a failed row at 100 %), the rule's."""
    res = []
    for b in BACKENDS:
        for test in ("pp", "tg"):
            sel = [r for r in out if r["backend"] == b and r["test"] == test]
            if not sel:
                continue
            err = [abs(r["error"]) if not r["failed"] else FAILED_ERROR for r in sel]
            rule = [abs(r["rule_error"]) if not r["failed"] else FAILED_ERROR for r in sel if r["rule_error"] != ""
                    or r["failed"]]
            res.append(dict(backend=b, test=test, rows=len(sel), failed=sum(1 for r in sel if r["failed"]),
                            mean=100 * float(np.mean(err)), median=100 * float(np.median(err)),
                            max=100 * float(np.max(err)),
                            rule_mean=100 * float(np.mean(rule)) if rule else math.nan))
    return res


def write_csv(path: Path, out: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(out[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(out)


def plot(out: list[dict]) -> Path:
    """Predicted (held out) against measured tokens/s, a panel per backend, decode and prefill."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [b for b in BACKENDS if any(r["backend"] == b for r in out)]
    fig, axes = plt.subplots(2, (len(shown) + 1) // 2, figsize=(3.2 * ((len(shown) + 1) // 2), 6.4), squeeze=False)
    for ax, b in zip(axes.flat, shown, strict=False):
        for test, colour in (("pp", "tab:blue"), ("tg", "tab:orange")):
            sel = [r for r in out if r["backend"] == b and r["test"] == test and not r["failed"]]
            if sel:
                ax.scatter([r["measured"] for r in sel], [r["predicted"] for r in sel], s=10, c=colour,
                           label=f"{test} ({len(sel)})", alpha=0.7)
        lo = min([r["measured"] for r in out if r["backend"] == b] + [1.0])
        hi = max(r["measured"] for r in out if r["backend"] == b)
        xs = np.array([lo / 2, hi * 2])
        ax.plot(xs, xs, "k-", lw=0.8)
        ax.fill_between(xs, xs * 0.7, xs * 1.3, color="grey", alpha=0.15, lw=0)
        ax.set_xscale("log")
        ax.set_yscale("log")
        failed = sum(1 for r in out if r["backend"] == b and r["failed"])
        ax.set_title(f"{b}" + (f" ({failed} failed)" if failed else ""), fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        ax.set_xlabel("measured (tokens/s)", fontsize=8)
        ax.set_ylabel("predicted, held out (tokens/s)", fontsize=8)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    fig.suptitle("llama.cpp: predicted by rates fitted without the row's source, against published", fontsize=10)
    fig.tight_layout()
    path = DATA / "predicted_vs_measured.png"
    fig.savefig(path, dpi=150, metadata={"Software": None})
    return path


def cases(name: str = "measurements.csv") -> tuple[list, list]:
    """``(table, failed)``: the expressible rows of ``name`` as ``(row, case, measured)``, the others
    with why (a case the cost model refuses, e.g. host figures a run needs that are not known, too)."""
    table, failed = [], []
    for r in rows(name):
        c = case(r)
        if not isinstance(c, str):
            try:
                predict(*c, START)
            except CostModelError as e:
                c = str(e).split(": ", 1)[-1]
        if isinstance(c, str):
            failed.append((r, c))
        else:
            table.append((r, c, float(r["tokens_per_s"])))
    return table, failed


def fold(source_id: str, k: int) -> int:
    """The fold of a source: ``crc32(source_id) % k``."""
    return zlib.crc32(source_id.encode()) % k


def cross_validate(table: list, failed: list, k: int) -> tuple[list[dict], dict]:
    """Every row predicted by rates fitted without its fold of sources; and each fold's rates."""
    from tqdm import tqdm

    if k < 2:
        raise SystemExit(f"--folds needs K >= 2, got {k}")
    fold_of = {r["source_id"]: fold(r["source_id"], k) for r in rows()}
    linear = {t[0]["id"]: linearise(t[1]) for t in tqdm(table, desc="rows", unit="row")}
    fits = {f: fit([t for t in table if fold_of[t[0]["source_id"]] != f], f"all folds but {f} of {k}", linear)
            for f in tqdm(range(k), desc="folds", unit="fit")}
    out = predict_rows(table, list(failed), lambda r: fits[fold_of[r["source_id"]]])
    for o in out:
        o["fold"] = fold_of[o["source_id"]]
    return out, fits


def external_check(fits: dict, k: int) -> list[dict]:
    """The published runs of ``external.csv`` (never rows of the data set), each predicted by the
    rates fitted without its source's fold, as :func:`cross_validate` predicts a row."""
    table, failed = cases("external.csv")
    return predict_rows(table, failed, lambda r: fits[fold(r["source_id"], k)], "external.csv")


def main(argv: list[str] | None = None) -> int:
    """Cross-validate, predict every row with the shipped rates (refitted with ``--fit``), print the targets."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="fit the rates on every row and save them as the shipped ones")
    ap.add_argument("--folds", type=int, default=5, metavar="K", help="folds of sources (default 5)")
    ap.add_argument("--no-timing", action="store_true", help="skip timing hetsim llm plan")
    args = ap.parse_args(argv)
    table, failed = cases()
    held, fits = cross_validate(table, failed, args.folds)
    write_csv(DATA / "cross_validation.csv", held)
    external = external_check(fits, args.folds)
    write_csv(DATA / "external_results.csv", external)
    plot(held)
    if args.fit:
        rates = fit(table)
        rates.save()
    rates = BackendRates.load()
    full = predict_rows(table, list(failed), lambda r: rates)
    write_csv(DATA / "results.csv", full)
    n_failed = sum(1 for r in held if r["failed"])
    print(f"{len(held)} rows from {len({r['source_id'] for r in held})} sources, {n_failed} failed "
          f"(counted at |error| {100 * FAILED_ERROR:.0f} %); {args.folds}-fold by source:")
    print(f"  {'backend':8s} {'test':4s} {'rows':>4s} {'failed':>6s} {'mean':>7s} {'median':>7s} {'max':>7s} "
          f"{'rule mean':>9s}")
    s = summary(held)
    for r in s:
        print(f"  {r['backend']:8s} {r['test']:4s} {r['rows']:4d} {r['failed']:6d} {r['mean']:6.1f}% "
              f"{r['median']:6.1f}% {r['max']:6.1f}% {r['rule_mean']:8.1f}%")
    tg_all = [abs(r["error"]) if not r["failed"] else FAILED_ERROR for r in held if r["test"] == "tg"]
    rule_all = [abs(r["rule_error"]) if not r["failed"] else FAILED_ERROR for r in held if r["test"] == "tg"]
    targets = []
    for r in s:
        if r["rows"] < 10:
            continue
        if r["test"] == "tg":
            targets.append((f"{r['backend']} decode mean |error| <= 10 %", r["mean"] <= 10, f"{r['mean']:.1f} %"))
            targets.append((f"{r['backend']} decode max |error| <= 30 %", r["max"] <= 30, f"{r['max']:.1f} %"))
        else:
            targets.append((f"{r['backend']} prefill mean |error| <= 20 %", r["mean"] <= 20, f"{r['mean']:.1f} %"))
    for test, what in (("tg", "decode"), ("pp", "prefill")):
        sel = [r for r in external if r["test"] == test]
        err = [abs(r["error"]) if not r["failed"] else FAILED_ERROR for r in sel]
        rule = [abs(r["rule_error"]) if not r["failed"] else FAILED_ERROR for r in sel if r["rule_error"] != ""
                or r["failed"]]
        if sel:
            print(f"  external.csv (runs never in the data set, rates fitted without their source): {what} "
                  f"mean |error| {100 * np.mean(err):.1f} % over {len(sel)} runs (rule of thumb "
                  f"{100 * np.mean(rule):.1f} %)")
    ratio = np.mean(tg_all) / np.mean(rule_all)
    targets.append(("decode error <= 0.6 x the rule of thumb's (all rows)", ratio <= 0.6,
                    f"{100 * np.mean(tg_all):.1f} % vs {100 * np.mean(rule_all):.1f} % ({ratio:.2f}x)"))
    if not args.no_timing:
        for name in ("llama-3-70b", "qwen3-235b-a22b"):
            cmd = [sys.executable, "-m", "hetsim", "llm", "plan", name, "--gpu", "RTX 4090", "--ram-gb", "256",
                   "--ram-bw", "75GB/s", "--threads", "16", "--out", str(ROOT / "out" / f"bench-plan-{name}.json")]
            # as an installed package runs: bytecode compiled once (cached under out/), then timed
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(ROOT / "out" / "pycache"))
            subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=env)
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT, env=env)
            dt = time.perf_counter() - t0
            targets.append((f"hetsim llm plan {name} in < 5 s", dt < 5, f"{dt:.2f} s"))
    for name, ok, value in targets:
        print(f"  {'met   ' if ok else 'MISSED'} {name}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
