"""The header of a GGUF file: its metadata and every tensor's name, shape and type.

Only the header is read, as a stream from the start of the file: a 40 GB model is
described in milliseconds and the tensor data is never touched (``gguf.GGUFReader``
maps the whole file and builds a view of every tensor, which needs the data to be
there). The layout is GGUF's (versions 2 and 3, little-endian): magic ``GGUF``,
``uint32`` version, ``uint64`` tensor count, ``uint64`` metadata count, the metadata
key/value pairs, then per tensor its name, dimension count, dimensions (innermost
first), ``ggml_type`` and data offset. Type codes, block sizes and value types are the
``gguf`` package's (:data:`gguf.GGML_QUANT_SIZES`, :class:`gguf.GGMLQuantizationType`).

>>> import tempfile, os, numpy as np, gguf
>>> path = os.path.join(tempfile.mkdtemp(), "m.gguf")
>>> w = gguf.GGUFWriter(path, "llama")
>>> w.add_block_count(1)
>>> w.add_tensor("output.weight", np.zeros((4, 32), dtype=np.float16))
>>> w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
>>> h = read_gguf_header(path)
>>> h.metadata["llama.block_count"], h.tensors[0].shape, h.tensors[0].type_name, h.tensors[0].nbytes
(1, (32, 4), 'F16', 256)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from hetsim.graphs.graph import GraphError

__all__ = ["GGUFHeader", "TensorInfo", "read_gguf_header", "tensor_nbytes"]

_MAGIC = b"GGUF"
_VERSIONS = (2, 3)
# GGUF metadata value types (gguf.GGUFValueType): struct format of the scalars
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class TensorInfo:
    """One tensor: GGUF name, shape (GGUF order: innermost dimension first) and ggml type."""

    name: str
    shape: tuple[int, ...]
    type_name: str

    @property
    def elements(self) -> int:
        """Weights in the tensor."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor at its type's block size (exact, scales included)."""
        return tensor_nbytes(self.type_name, self.elements)


def tensor_nbytes(type_name: str, elements: int) -> int:
    """Bytes of ``elements`` weights stored as ggml type ``type_name`` (``Q4_K``, ``F16``...).

    >>> tensor_nbytes("Q4_K", 256), tensor_nbytes("Q8_0", 64), tensor_nbytes("MXFP4", 32)
    (144, 68, 17)
    """
    import gguf

    try:
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[type_name]]
    except KeyError:
        known = ", ".join(t.name for t in gguf.GGMLQuantizationType)
        raise GraphError(f"unknown ggml type {type_name!r}; known: {known}") from None
    return elements * size // block


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file says about its model: ``metadata`` (key -> value; arrays longer
    than 64 items are kept as their length) and ``tensors`` in file order."""

    path: str
    version: int
    metadata: dict[str, Any]
    tensors: tuple[TensorInfo, ...]

    @property
    def architecture(self) -> str:
        """``general.architecture``; :class:`GraphError` when absent."""
        arch = self.metadata.get("general.architecture")
        if not isinstance(arch, str):
            raise GraphError(f"{self.path}: GGUF metadata has no general.architecture")
        return arch


class _Stream:
    """Reads little-endian values; a short read is a :class:`GraphError` saying what was read."""

    def __init__(self, fh: BinaryIO, path: str, size: int) -> None:
        self.fh, self.path, self.read_so_far, self.size = fh, path, "nothing", size

    def left(self) -> int:
        """Bytes of the file not read yet."""
        return self.size - self.fh.tell()

    def check_count(self, what: str, count: int) -> None:
        """A count of items the rest of the file cannot hold even at a byte each is corrupt: an
        error before anything is allocated for them (a shorter shortfall reads as truncated)."""
        if count > self.left():
            raise GraphError(f"{self.path}: corrupt GGUF file: {what} of {count} items after {self.read_so_far} "
                             f"(the file has {self.left()} bytes left)")

    def take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise GraphError(f"{self.path}: truncated GGUF file: ended after {self.read_so_far}")
        return data

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > 1 << 24:
            raise GraphError(f"{self.path}: corrupt GGUF file: a {n}-byte string after {self.read_so_far}")
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            itype, count = self.unpack("<I"), self.unpack("<Q")
            self.check_count("an array", count)
            if itype in _SCALARS and count > 64:  # vocabularies: skip, keep the length
                self.take(count * struct.calcsize(_SCALARS[itype]))
                return count
            items = [self.value(itype) for _ in range(count)]
            return items if count <= 64 else count
        raise GraphError(f"{self.path}: corrupt GGUF file: unknown metadata value type {vtype} after "
                         f"{self.read_so_far}")


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """Read the header of the GGUF file ``path`` (metadata and tensor table, not the data).

    Raises
    ------
    GraphError
        the file is missing, not GGUF, of a version other than 2 or 3, truncated (naming
        what was read before it ended), counts more items than its bytes can hold (checked
        before anything is allocated), names a tensor twice, or holds a tensor of a ggml type
        this ``gguf`` package does not know (naming the tensor and the type code).
    """
    import gguf

    path = Path(path)
    if not path.is_file():
        raise GraphError(f"{path}: no such GGUF file")
    with path.open("rb") as fh:
        s = _Stream(fh, str(path), path.stat().st_size)
        magic = fh.read(4)
        if magic != _MAGIC:
            raise GraphError(f"{path}: not a GGUF file (starts with {magic!r}, expected b'GGUF')")
        s.read_so_far = "the magic"
        version = s.unpack("<I")
        if version not in _VERSIONS:
            raise GraphError(f"{path}: GGUF version {version} is not supported (read versions "
                             f"{', '.join(map(str, _VERSIONS))})")
        s.read_so_far = f"the version ({version})"
        n_tensors, n_kv = s.unpack("<Q"), s.unpack("<Q")
        s.read_so_far = f"the version ({version}) and counts ({n_tensors} tensors, {n_kv} metadata entries)"
        s.check_count("a metadata table", n_kv)
        s.check_count("a tensor table", n_tensors)
        metadata: dict[str, Any] = {}
        for i in range(n_kv):
            key = s.string()
            metadata[key] = s.value(s.unpack("<I"))
            s.read_so_far = f"{i + 1} of {n_kv} metadata entries (last {key!r})"
        tensors = []
        seen: set[str] = set()
        for i in range(n_tensors):
            name = s.string()
            n_dims = s.unpack("<I")
            if n_dims > 8:
                raise GraphError(f"{path}: corrupt GGUF file: tensor {name!r} has {n_dims} dimensions")
            shape = tuple(s.unpack("<Q") for _ in range(n_dims))
            code = s.unpack("<I")
            s.unpack("<Q")  # data offset
            try:
                type_name = gguf.GGMLQuantizationType(code).name
            except ValueError:
                raise GraphError(f"{path}: tensor {name!r} has unknown quantisation type {code} "
                                 f"(gguf {_gguf_version()} knows {len(gguf.GGMLQuantizationType)} types)") from None
            if name in seen:
                raise GraphError(f"{path}: corrupt GGUF file: tensor name {name!r} appears twice")
            seen.add(name)
            tensors.append(TensorInfo(name, shape, type_name))
            s.read_so_far = f"all {n_kv} metadata entries and {i + 1} of {n_tensors} tensor records (last {name!r})"
    return GGUFHeader(str(path), version, metadata, tuple(tensors))


def _gguf_version() -> str:
    from importlib.metadata import version

    return version("gguf")
