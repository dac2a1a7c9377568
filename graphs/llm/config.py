"""Weight storage formats and KV-cache dtypes, in llama.cpp's vocabulary.

:data:`WEIGHT_FORMATS` are ggml's tensor types (``Q4_K``, ``Q8_0``, ``F16``...), in bits
per weight *including* the per-block scales; a llama.cpp *file type* (``Q4_K_M``) mixes
them per tensor (:mod:`graphs.llm.quant_recipe`). Names are matched without case
(``q4_K`` is ``Q4_K``).

>>> weight_format("q4").name
'Q4_K'
"""

from __future__ import annotations

from dataclasses import dataclass

from hetsim.graphs.graph import GraphError

__all__ = [
    "KV_DTYPES",
    "WEIGHT_FORMATS",
    "WeightFormat",
    "kv_dtype_bytes",
    "require_positive_ints",
    "weight_format",
]


@dataclass(frozen=True)
class WeightFormat:
    """How weights are stored: ``bits_per_weight`` including block scales.

    ``compute`` says what the kernels do with them: ``"float"`` (read and multiply at
    the storage precision) or ``"dequant"`` (blocks dequantised on the fly inside the
    matrix kernels; llama.cpp's ``mul_mat`` / MMQ): the FLOPs of a matrix product
    are the same ``2 m n k`` either way, the bytes read are the storage bytes.
    """

    name: str
    bits_per_weight: float
    compute: str
    source: str

    @property
    def bytes_per_weight(self) -> float:
        return self.bits_per_weight / 8.0


# Bits per weight from the block structs of ggml (ggml/src/ggml-common.h):
# block_q8_0 = fp16 scale + 32 int8 = 34 bytes / 32 weights; block_q4_0 = fp16 scale +
# 16 bytes / 32 weights = 18 / 32; block_q4_K = 2 fp16 + 12 bytes of 6-bit scales +
# 128 bytes / 256 weights = 144 / 256; block_q5_K = 176 / 256; block_q6_K = 210 / 256;
# block_q3_K = 110 / 256; block_q2_K = 84 / 256.
_GGML = "ggml/src/ggml-common.h block structs (llama.cpp)"
WEIGHT_FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat("F32", 32.0, "float", "IEEE binary32"),
        WeightFormat("F16", 16.0, "float", "IEEE binary16"),
        WeightFormat("BF16", 16.0, "float", "bfloat16"),
        WeightFormat("Q8_0", 34 * 8 / 32, "dequant", _GGML),
        WeightFormat("Q6_K", 210 * 8 / 256, "dequant", _GGML),
        WeightFormat("Q5_K", 176 * 8 / 256, "dequant", _GGML),
        WeightFormat("Q4_K", 144 * 8 / 256, "dequant", _GGML),
        WeightFormat("Q4_0", 18 * 8 / 32, "dequant", _GGML),
        WeightFormat("Q3_K", 110 * 8 / 256, "dequant", _GGML),
        WeightFormat("Q2_K", 84 * 8 / 256, "dequant", _GGML),
    )
}
_ALIASES = {"fp32": "F32", "fp16": "F16", "float16": "F16", "bfloat16": "BF16", "q8": "Q8_0",
            "q6": "Q6_K", "q5": "Q5_K", "q4": "Q4_K", "q3": "Q3_K", "q2": "Q2_K"}

#: KV-cache element types (llama.cpp ``--cache-type-k/-v``): bytes per element
KV_DTYPES: dict[str, float] = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q5_0": 22 / 32,
                               "q5_1": 24 / 32, "q4_0": 18 / 32, "q4_1": 20 / 32}


def weight_format(name: str | WeightFormat) -> WeightFormat:
    """The storage format called ``name`` (or an alias: ``fp16``, ``q8``, ``q4``...; a
    :class:`WeightFormat` is returned as it is).

    Raises
    ------
    GraphError
        naming the unknown format and listing the known ones.
    """
    if isinstance(name, WeightFormat):
        return name
    low = str(name).lower()
    key = _ALIASES.get(low, low).lower()
    for k, f in WEIGHT_FORMATS.items():
        if k.lower() == key:
            return f
    raise GraphError(
        f"unknown weight quantisation {name!r}; known: {', '.join(WEIGHT_FORMATS)} "
        f"(aliases: {', '.join(sorted(_ALIASES))})"
    )


def require_positive_ints(where: str, obj: object, names: tuple[str, ...]) -> None:
    """:class:`GraphError` naming the first of ``obj``'s attributes ``names`` that is not an int >= 1.

    >>> from types import SimpleNamespace
    >>> require_positive_ints("x", SimpleNamespace(layers=2), ("layers",))
    """
    for k in names:
        v = getattr(obj, k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise GraphError(f"{where}: {k!r} must be an int >= 1, got {v!r}")


def kv_dtype_bytes(name: str) -> float:
    """Bytes per KV-cache element of ``name`` (any case: ``F16``, ``q8_0``); :class:`GraphError`
    listing the known ones."""
    try:
        return KV_DTYPES[str(name).lower()]
    except KeyError:
        raise GraphError(f"unknown KV-cache dtype {name!r}; known: {', '.join(KV_DTYPES)}") from None
