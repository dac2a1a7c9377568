"""Import the NeuSight GPU kernel data set into hetsim profile folders, one per GPU.

The data set (Lee et al., "Forecasting GPU Performance for Deep Learning Training
and Inference", ASPLOS 2025; repository ``sitar-lab/NeuSight``, folder
``scripts/asplos/data/dataset/``, MIT licence) holds FP32 kernel latencies measured
with PyTorch 2.1 (CUDA 12.1, cuDNN 8.9) on NVIDIA GPUs::

    SOURCE/train/<op>/<GPU>.csv[.gz]    one file per operator and GPU
    SOURCE/test/<op>.csv[.gz]           held-out shapes, every GPU in one file
    SOURCE/device_configs/<GPU>.json    the GPUs' published figures
    SOURCE/LICENSE                      the MIT notice (copied into every profile)

Every row becomes one ``ops.csv`` row keyed by the operator signature a hetsim graph
carries for that operator (:func:`graphs.signature` of the node the TVM Relax
importer makes of the same PyTorch call; ``tests/test_neusight.py`` checks them
against the importer):

=========================  =====================================================
data set                   hetsim node
=========================  =====================================================
``linear`` B, M, N, K      ``matmul`` ``[B*M, N] x [N, K]`` (the bias, fused
                           into the GEMM in torch, is a separate ``add`` node)
``bmm`` B, M, N, K         ``matmul`` ``[B, M, N] x [B, N, K]``
``conv`` (3x3, s1, p1)     ``conv2d`` NCHW/OIHW ``[B, C, S, S] x [O, C, k, k]``
``ln`` B, H                ``layer_norm`` ``[B, H]`` (eps 1e-5, affine)
``softmax`` B, H           ``softmax`` over the last axis of ``[B, H]``
``add mul div pow``        ``add multiply divide power`` ``[B, H] x [B, H]``
``addu mulu divu powu``    the same with a scalar: ``[B, H] x []``
``relu gelu tanh``         ``relu gelu tanh`` ``[B, H]``
=========================  =====================================================

Besides the profile columns, each row keeps ``split`` (``train`` / ``test``: the
data set's own split, from the folder the row came from), ``source_op`` (the data
set's ``OPName``) and ``timer`` (``cuda_event``). ``time_s`` is the data set's
latency (the mean of the 5 fastest of 25 calls), ``repeats`` 25. Rows with the same
signature and split are merged (median); a test shape that is also a training
shape stays a training row. The manifest records the source, the licence, the GPU
and its published figures, the library versions and what the split holds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import hetsim
from hetsim.costmodel.base import CostModelError
from hetsim.graphs.features import features
from hetsim.graphs.graph import Graph

__all__ = [
    "DATASET_CAVEATS",
    "DATASET_SOURCE",
    "GPUS",
    "NeusightGPU",
    "gpu_by_name",
    "import_neusight",
    "neusight_node",
    "read_neusight",
]

#: where the data set comes from (recorded in every manifest)
DATASET_SOURCE = ("NeuSight kernel data set (Lee et al., ASPLOS 2025), github.com/sitar-lab/NeuSight, "
                  "scripts/asplos/data/dataset/")
#: latency column unit: milliseconds per call
_MS = 1e-3
_REPEATS = 25
_COMMON = ["OPName", "Latency", "Device"]
_SHAPE_COLUMNS: dict[str, list[str]] = {
    "linear": ["B", "M", "N", "K"],
    "bmm": ["B", "M", "N", "K"],
    "conv": ["B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride", "Padding"],
}
_VECTOR_OPS = ("ln", "softmax", "add", "addu", "mul", "mulu", "div", "divu", "pow", "powu", "relu", "gelu", "tanh")
#: data set operator -> (hetsim op kind, scalar second operand)
_ELEMENTWISE = {"add": ("add", False), "addu": ("add", True), "mul": ("multiply", False),
                "mulu": ("multiply", True), "div": ("divide", False), "divu": ("divide", True),
                "pow": ("power", False), "powu": ("power", True), "relu": ("relu", None),
                "gelu": ("gelu", None), "tanh": ("tanh", None)}
#: FLOPs per output element that TVM's TIR estimation gives these ops
_FLOPS_PER_ELEM = {"add": 1, "multiply": 1, "divide": 1, "power": 0, "relu": 1, "gelu": 4, "tanh": 0, "softmax": 4}
OPS = ("linear", "bmm", "conv", *_VECTOR_OPS)


@dataclass(frozen=True)
class NeusightGPU:
    """One GPU of the data set: hetsim's short name, the data set's device name, its
    board power (``tdp_w``, NVIDIA's datasheet; the data set does not state it), and
    ``corrections``: published figures that replace wrong ones of ``device_configs/``
    (``(key, value, reason)``)."""

    name: str
    device: str
    description: str
    tdp_w: float
    corrections: tuple[tuple[str, int | float, str], ...] = ()

    @property
    def stem(self) -> str:
        """The file stem the data set uses (``Tesla_T4``, ``NVIDIA_A100_80GB_PCIe``)."""
        return self.device.replace(" ", "_")

    @property
    def profile_name(self) -> str:
        return f"gpu-{self.name}"


#: the GPUs of the data set, by hetsim short name
GPUS: dict[str, NeusightGPU] = {g.name: g for g in (
    # board power: NVIDIA datasheets (T4: 70 W; Tesla P4: 75 W max; P100 PCIe: 250 W; V100 PCIe:
    # 250 W; A100 PCIe 40GB: 250 W; A100 80GB PCIe: 300 W; L4: 72 W; H100 SXM5: 700 W)
    NeusightGPU("t4", "Tesla T4", "NVIDIA T4 (Turing, 16 GB GDDR6, 70 W)", 70.0),
    NeusightGPU("p4", "Tesla P4", "NVIDIA Tesla P4 (Pascal, 8 GB GDDR5, 75 W)", 75.0, (
        ("sm_count", 20, "device_configs/Tesla_P4.json states 40 SMs x 64 cores; the P4's GP104 has 20 SMs x "
                         "128 cores (NVIDIA Tesla P4 datasheet: 2560 CUDA cores; Pascal GP104 whitepaper)"),
        ("cores_per_sm", 128, "see sm_count"))),
    NeusightGPU("p100", "Tesla P100-PCIE-16GB", "NVIDIA Tesla P100 PCIe 16 GB (Pascal, HBM2, 250 W)", 250.0),
    NeusightGPU("v100", "Tesla V100-PCIE-32GB", "NVIDIA Tesla V100 PCIe 32 GB (Volta, HBM2, 250 W)", 250.0),
    NeusightGPU("a100-40gb", "NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40 GB (Ampere, HBM2, 250 W)", 250.0),
    NeusightGPU("a100-80gb", "NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80 GB (Ampere, HBM2e, 300 W)", 300.0),
    NeusightGPU("l4", "NVIDIA L4", "NVIDIA L4 (Ada Lovelace, 24 GB GDDR6, 72 W)", 72.0),
    NeusightGPU("h100", "NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80 GB (Hopper, HBM3, 700 W)", 700.0),
)}


def gpu_by_name(name: str) -> NeusightGPU:
    """The GPU called ``name`` (hetsim short name, profile name or data set device name)."""
    key = str(name).strip()
    for g in GPUS.values():
        if key.lower() in (g.name, g.profile_name, g.device.lower(), g.stem.lower()):
            return g
    raise CostModelError(f"unknown GPU {name!r}; the data set's GPUs are {list(GPUS)}")


# ------------------------------------------------------------------ node building
def _tensor(shape: Sequence[int]) -> dict[str, Any]:
    return {"shape": [int(d) for d in shape], "dtype": "float32"}


def neusight_node(op: str, shape: Mapping[str, int]) -> dict[str, Any]:
    """The hetsim node (``Graph.add_op`` keyword arguments plus ``op``) of one data set row.

    Parameters
    ----------
    op
        The data set's ``OPName`` (``linear``, ``bmm``, ``conv``, ``ln``, ``addu``...).
    shape
        The row's shape columns (``B, M, N, K``; the conv columns; ``B, H``).

    Examples
    --------
    >>> n = neusight_node("linear", {"B": 1, "M": 128, "N": 768, "K": 3072})
    >>> n["op"], [t["shape"] for t in n["inputs"]], n["flops"]
    ('matmul', [[128, 768], [768, 3072]], 603979776.0)
    """
    if op in ("linear", "bmm"):
        b, m, n, k = (int(shape[c]) for c in ("B", "M", "N", "K"))
        if op == "linear":  # torch.nn.Linear(N, K) on B x M x N: one [B*M, N] x [N, K] GEMM
            # the [N, K] operand is the layer's weight: a parameter once the importer folds
            # its transpose (graphs.fold), as in every hetsim graph of an nn.Linear
            ins, out, batch, weight = [[b * m, n], [n, k]], [b * m, k], 1, 4 * n * k
            m = b * m
        else:
            ins, out, batch, weight = [[b, m, n], [b, n, k]], [b, m, k], b, 0
        return {"op": "matmul", "inputs": [_tensor(s) for s in ins], "outputs": [_tensor(out)],
                "attrs": {"out_dtype": "float32"}, "flops": 2.0 * batch * m * n * k, "param_bytes": weight}
    if op == "conv":
        b, c, o = int(shape["B"]), int(shape["Input_Channel"]), int(shape["Output_Channel"])
        k, s = int(shape["Kernel_Szie"]), int(shape["Input_Size"])
        stride, pad = int(shape["Stride"]), int(shape["Padding"])
        ho = (s + 2 * pad - k) // stride + 1
        if ho < 1:
            raise CostModelError(f"conv row {dict(shape)}: the output would be empty")
        attrs = {"data_layout": "NCHW", "dilation": [1, 1], "groups": 1, "kernel_layout": "OIHW",
                 "out_dtype": "float32", "out_layout": "NCHW", "padding": [pad] * 4, "strides": [stride] * 2}
        return {"op": "conv2d", "inputs": [_tensor([b, c, s, s]), _tensor([o, c, k, k])],
                "outputs": [_tensor([b, o, ho, ho])], "attrs": attrs,
                "flops": 2.0 * b * o * ho * ho * c * k * k, "param_bytes": 4 * o * c * k * k}
    if op not in _VECTOR_OPS:
        raise CostModelError(f"unknown data set operator {op!r}; known: {list(OPS)}")
    b, h = int(shape["B"]), int(shape["H"])
    x = _tensor([b, h])
    if op == "ln":
        return {"op": "layer_norm", "inputs": [x, _tensor([h]), _tensor([h])], "outputs": [_tensor([b, h])],
                "attrs": {"axes": [-1], "center": True, "epsilon": 1e-05, "scale": True},
                "flops": 11.0 * b * h + b, "param_bytes": 8 * h}
    if op == "softmax":
        return {"op": "softmax", "inputs": [x], "outputs": [_tensor([b, h])], "attrs": {"axis": -1},
                "flops": 4.0 * b * h, "param_bytes": 0}
    kind, scalar = _ELEMENTWISE[op]
    ins = [x] if scalar is None else [x, _tensor([] if scalar else [b, h])]
    return {"op": kind, "inputs": ins, "outputs": [_tensor([b, h])], "attrs": {},
            "flops": float(_FLOPS_PER_ELEM[kind] * b * h), "param_bytes": 0}


# ------------------------------------------------------------------- reading
def _find(folder: Path, stem: str) -> Path | None:
    for ext in (".csv.gz", ".csv"):
        p = folder / f"{stem}{ext}"
        if p.is_file():
            return p
    return None


def _read_file(path: Path, op: str | None) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path)
    except (OSError, EOFError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise CostModelError(f"{path}: cannot read it as a (gzip) CSV file ({type(e).__name__}: {e})") from None
    ops = [op] if op else sorted(set(frame["OPName"].astype(str))) if "OPName" in frame else []
    need = list(_COMMON) + sorted({c for o in ops for c in _SHAPE_COLUMNS.get(o, ["B", "H"])})
    missing = [c for c in need if c not in frame.columns]
    if missing:
        raise CostModelError(f"{path}: missing column(s) {missing} (columns: {list(frame.columns)})")
    lat = pd.to_numeric(frame["Latency"], errors="coerce")
    bad = ~np.isfinite(lat.to_numpy(float)) | (lat.to_numpy(float) <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CostModelError(f"{path}: row {i + 1}: column 'Latency' is {frame['Latency'].tolist()[i]!r} "
                             f"(need a positive number of milliseconds)")
    return frame


def read_neusight(source: str | os.PathLike[str], gpus: Iterable[str] | None = None) -> pd.DataFrame:
    """Every row of the data set at ``source`` for ``gpus`` (default: all), with a
    ``split`` column (``train``/``test``) and ``gpu`` (hetsim short name).

    Raises
    ------
    CostModelError
        ``source`` is not the data set's folder, a file lacks a column (naming the
        file and the column), a latency is not a positive number, an unknown GPU.
    """
    root = Path(source)
    if not (root / "train").is_dir() and not (root / "test").is_dir():
        raise CostModelError(f"{root}: not the NeuSight data set folder (no train/ or test/ inside)")
    wanted = [gpu_by_name(g) for g in gpus] if gpus is not None else list(GPUS.values())
    by_device = {g.device: g for g in wanted}
    frames = []
    for op in OPS:
        for g in wanted:
            path = _find(root / "train" / op, g.stem)
            if path is not None:
                frame = _read_file(path, op)
                frames.append(frame.assign(split="train", file=str(path.relative_to(root)),
                                           row=np.arange(1, len(frame) + 1)))
    for path in sorted((root / "test").glob("*.csv*")) if (root / "test").is_dir() else []:
        frame = _read_file(path, None)
        frame = frame.assign(split="test", file=str(path.relative_to(root)), row=np.arange(1, len(frame) + 1))
        frames.append(frame[frame["Device"].isin(by_device)])
    if not frames:
        raise CostModelError(f"{root}: no rows for GPU(s) {[g.name for g in wanted]}")
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[rows["Device"].isin(by_device) & rows["OPName"].isin(OPS)]
    rows["gpu"] = rows["Device"].map(lambda d: by_device[d].name)
    # test/ holds some rows in two files (vec.csv and habitat.csv repeat elem, ln, softmax)
    keys = [c for c in ["gpu", "OPName", "split", *sorted({c for v in _SHAPE_COLUMNS.values() for c in v}),
                        "H", "Latency"] if c in rows.columns]
    return rows.drop_duplicates(subset=keys).reset_index(drop=True)


def read_device_config(source: str | os.PathLike[str], gpu: NeusightGPU) -> dict[str, Any]:
    """The published figures of ``gpu`` from ``device_configs/`` in SI units:
    ``sm_count``, ``cores_per_sm``, ``clock_hz``, ``peak_flops`` (FP32),
    ``mem_bandwidth_bytes_per_s``, ``l2_bytes``, ``memory_bytes``, and ``tdp_w`` (from
    :data:`GPUS`: the data set does not state it), with ``gpu.corrections`` applied.
    Only ``tdp_w`` when the file is absent."""
    path = Path(source) / "device_configs" / f"{gpu.stem}.json"
    if not path.is_file():
        return {"tdp_w": gpu.tdp_w}
    try:
        raw = json.loads(path.read_text())
        spec = {"sm_count": int(raw["Num_Sm"]), "cores_per_sm": int(raw["Core_Per_SM"]),
                "clock_hz": float(raw["Freq"]) * 1e6, "peak_flops": float(raw["SingleFLOPs"]) * 1e9,
                "mem_bandwidth_bytes_per_s": float(raw["Mem_Bw"]) * 1e9,
                "l2_bytes": int(round(float(raw["L2Cache"]) * 2**20)), "memory_bytes": int(raw["Dev_Mem"]) * 2**30,
                "tdp_w": gpu.tdp_w}
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as e:
        raise CostModelError(f"{path}: malformed device config ({type(e).__name__}: {e})") from None
    spec.update({key: value for key, value, _ in gpu.corrections})
    return spec


# ------------------------------------------------------------------ converting
def _shape_of(row: Mapping[str, Any], op: str) -> dict[str, int]:
    return {c: int(row[c]) for c in _SHAPE_COLUMNS.get(op, ["B", "H"])}


def profile_rows(rows: pd.DataFrame, device: str = "gpu") -> pd.DataFrame:
    """``ops.csv`` rows (profile device ``device``) of one GPU's data set rows."""
    g = Graph(name="neusight")
    meta = []
    for row in rows.to_dict("records"):
        op = str(row["OPName"])
        node = neusight_node(op, _shape_of(row, op))
        kind = node.pop("op")
        name = f"{row['file']}:{row['row']}"
        g.add_op(name, kind, **node)
        batch = int(row["B"]) if op in ("bmm", "conv") else 1
        meta.append((name, op, row["split"], _round(float(row["Latency"]) * _MS), batch))
    feats = features(g).drop(columns=["step"])
    for col in ("intensity", "log_flops", "log_bytes"):  # 7 digits: the file stays compact
        feats[col] = feats[col].map(_round)
    info = pd.DataFrame(meta, columns=["node", "source_op", "split", "time_s", "batch"])
    out = pd.concat([info, feats.reset_index(drop=True)], axis=1)
    # one row per (signature, split): the median of repeated shapes; a shape measured in
    # both splits stays a training shape
    first = out.drop_duplicates(subset=["signature", "split"]).set_index(["signature", "split"])
    first["time_s"] = out.groupby(["signature", "split"])["time_s"].median()
    out = first.reset_index()
    train = set(out.loc[out["split"] == "train", "signature"])
    out = out[(out["split"] == "train") | ~out["signature"].isin(train)]
    out = out.assign(device=device, device_kind="gpu", backend="torch", model="neusight", models="neusight",
                     p10_s=out["time_s"], p90_s=out["time_s"], repeats=_REPEATS, timer="cuda_event")
    for col in out.columns:  # whole numbers without a trailing .0
        v = out[col]
        if v.dtype.kind == "f" and bool(np.all(np.isfinite(v))) and bool((v == np.round(v)).all()) \
                and float(v.abs().max()) < 2**53:
            out[col] = v.astype(np.int64)
    return out.sort_values(["split", "source_op", "node"], kind="stable").reset_index(drop=True)


def _round(v: float, digits: int = 7) -> float:
    """``v`` to ``digits`` significant digits (what the data set's latencies carry)."""
    return float(f"{v:.{digits - 1}e}")


def _libraries(rows: pd.DataFrame) -> dict[str, str]:
    libs = {}
    for col, key in (("Torch Version", "torch"), ("CUDA Version", "cuda"), ("CUDNN Version", "cudnn")):
        if col in rows:
            vals = sorted({str(v).lstrip("p") for v in rows[col].dropna()})
            if vals:
                libs[key] = ";".join(vals)

    libs["hetsim"] = str(getattr(hetsim, "__version__", "0"))
    return libs


def import_neusight(
    source: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    gpus: Iterable[str] | None = None,
    overwrite: bool = False,
    progress: bool = False,
) -> list[Path]:
    """Convert the data set at ``source`` into one profile folder per GPU under ``out``.

    Parameters
    ----------
    source
        The data set folder (``train/``, ``test/``, ``device_configs/``, ``LICENSE``):
        the shared copy or your own download of NeuSight's ``scripts/asplos/data/dataset``.
    out
        Parent folder; GPU ``t4`` goes to ``out/gpu-t4`` (``ops.csv.gz``,
        ``manifest.json``, ``LICENSE``).
    gpus
        Short names (:data:`GPUS`); default every GPU with rows.
    overwrite
        Replace existing profile folders (each is replaced only once its new copy
        is complete).
    progress
        Show a progress bar over the GPUs.

    Returns
    -------
    list of Path
        The profile folders written.

    Everything is read and checked before anything is written; each folder is
    written atomically, so a failure leaves the folders already there untouched.

    Examples
    --------
    >>> import_neusight("NeuSight/scripts/asplos/data/dataset", "out/profiles", gpus=["t4"])  # doctest: +SKIP
    [PosixPath('out/profiles/gpu-t4')]
    """
    # looked up when called: tests replace it on hetsim.costmodel.profile_writer
    from hetsim.costmodel.profile_writer import write_profile

    root = Path(source)
    rows = read_neusight(root, gpus)
    names = [gpu_by_name(g).name for g in gpus] if gpus is not None else [g for g in GPUS if (rows["gpu"] == g).any()]
    empty = [g for g in names if not (rows["gpu"] == g).any()]
    if empty:
        raise CostModelError(f"{root}: no rows for GPU(s) {empty}")
    targets = [Path(out) / GPUS[g].profile_name for g in names]
    if not overwrite:
        there = [str(t) for t in targets if t.exists()]
        if there:
            raise CostModelError(f"already exist: {there} (overwrite=True / --overwrite replaces them)")
    licence = (root / "LICENSE").read_text() if (root / "LICENSE").is_file() else None
    if licence is None:
        raise CostModelError(f"{root}/LICENSE: missing (the data set's MIT notice must travel with the profiles)")
    converted = []
    iterator: Any = names
    if progress:
        from tqdm import tqdm

        iterator = tqdm(names, desc="neusight import", unit="gpu")
    for g in iterator:
        gpu = GPUS[g]
        sub = rows[rows["gpu"] == g]
        ops = profile_rows(sub, device=g)
        converted.append((gpu, ops, _manifest(gpu, sub, ops, read_device_config(root, gpu))))
    written = []
    for (_, ops, manifest), target in zip(converted, targets):
        write_profile(target, manifest, ops, overwrite=overwrite, ops_name="ops.csv.gz",
                      extra_files={"LICENSE": licence})
        written.append(target)
    return written


#: what a user of the converted profiles must know about the data set (measured on it
#: when it was imported, November 2026; README "GPU cost models")
DATASET_CAVEATS = (
    "train/ and test/ were measured in different campaigns: on linear shapes above 3e11 FLOPs the median "
    "achieved TFLOP/s of train vs test rows is P4 0.87 vs 3.23 (train 3.7x slower: throttled), T4 3.14 vs "
    "3.86 (+23 %), V100 11.8 vs 13.6 (+15 %); a model fitted on train rows alone inherits that offset on the "
    "test rows",
    "conv rows are 3x3 kernels, stride 1, padding 1 only, all in train/ (no conv test file); shapes within "
    "5 % of each other differ in time per FLOP by a median 4-8 %",
    "ln and softmax test shapes are far larger than the training ones (B up to 4.2M rows vs 16k)",
    "linear rows are always B = 1 and their time includes the bias add (addmm), which a hetsim graph prices "
    "as a separate add node",
    "test/vec.csv and test/habitat.csv repeat the rows of elem, ln and softmax (merged here)",
)


def _manifest(gpu: NeusightGPU, raw: pd.DataFrame, ops: pd.DataFrame, spec: Mapping[str, Any]) -> dict[str, Any]:
    from datetime import UTC, datetime

    split: dict[str, Any] = {}
    for s in ("train", "test"):
        part = ops[ops["split"] == s]
        split[s] = {op: int(n) for op, n in part["source_op"].value_counts().sort_index().items()}
    return {
        "hetsim_profile": 1,
        "name": gpu.profile_name,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "source": DATASET_SOURCE,
        "licence": "MIT (Copyright (c) 2025 Georgia Institute of Technology and Microsoft Corporation); "
                   "LICENSE in this folder",
        "machine": {"gpu_model": gpu.device, "description": gpu.description, "driver": None},
        "libraries": _libraries(raw),
        "backend": "torch",
        "devices": [{"name": gpu.name, "kind": "gpu", "torch_device": "cuda:0", "gpu_model": gpu.device,
                     "spec": dict(spec)}],
        "models": ["neusight"],
        "granularity": "op",
        "dtype": "float32",
        "timer": "cuda_event: mean of the 5 fastest of 25 calls",
        "split": {"source": "the data set's train/ and test/ folders (column 'split')", "rows": split},
        "spec_source": "device_configs/ of the data set; tdp_w from NVIDIA's datasheets",
        "spec_corrections": {key: f"{value} ({why})" for key, value, why in gpu.corrections},
        "caveats": list(DATASET_CAVEATS),
        "notes": "node: the data set file and 1-based row the signature was first seen in; batch: B of "
                 "bmm and conv rows, 1 for the others (their B counts rows, not samples); linear rows are "
                 "keyed as the bias-free matmul node of the graph; their time includes the bias, which torch "
                 "fuses into the GEMM",
    }
