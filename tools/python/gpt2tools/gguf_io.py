"""GGUF v3 writer and reader in pure Python + NumPy (no `gguf` package needed).

File layout (ggml's docs/gguf.md), all little-endian:

    u32 magic "GGUF"; u32 version (3); u64 tensor_count; u64 metadata_kv_count
    metadata_kv_count x { string key; u32 value_type; value }
    tensor_count x { string name; u32 n_dims; u64 ne[n_dims]; u32 ggml type; u64 offset }
    zero padding to `general.alignment` (default 32)
    data: each tensor at its offset from the data start, a multiple of the alignment, zero-padded between

A string is a u64 byte length then UTF-8 bytes; an array is u32 element type, u64 count, then the elements.
ne[0] is the fastest-varying dimension: a PyTorch/NumPy [rows, cols] matrix is ne = [cols, rows].

The writer is deterministic: metadata and tensors are written in the order given, padding is zeros.
Metadata values are given with their GGUF type, e.g. ("gpt2.block_count", "uint32", 12) or
("tokenizer.ggml.tokens", ("array", "string"), [...]).
"""
import struct

import numpy as np

from gpt2tools import gguf_blocks

MAGIC = b"GGUF"
VERSION = 3
DEFAULT_ALIGNMENT = 32

# GGUF value type -> (id, struct format for scalars; None for string/array)
VALUE_TYPES = {
    "uint8": (0, "<B"), "int8": (1, "<b"), "uint16": (2, "<H"), "int16": (3, "<h"),
    "uint32": (4, "<I"), "int32": (5, "<i"), "float32": (6, "<f"), "bool": (7, "<?"),
    "string": (8, None), "array": (9, None), "uint64": (10, "<Q"), "int64": (11, "<q"), "float64": (12, "<d"),
}
VALUE_TYPE_OF_ID = {type_id: name for name, (type_id, _) in VALUE_TYPES.items()}


# ---- writing ----

def _string(text):
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _scalar(type_name, value):
    type_id, fmt = VALUE_TYPES[type_name]
    if type_name == "string":
        return _string(value)
    if fmt is None:
        raise ValueError(f"not a scalar GGUF type: {type_name}")
    return struct.pack(fmt, value)


def _array(element_type, values):
    type_id, fmt = VALUE_TYPES[element_type]
    head = struct.pack("<IQ", type_id, len(values))
    if element_type == "string":
        return head + b"".join(_string(v) for v in values)
    if fmt is None:
        raise ValueError("nested GGUF arrays are not supported")
    return head + np.asarray(values, dtype=np.dtype(fmt)).tobytes()


def encode_value(value_type, value):
    """(GGUF type, value) -> u32 type id + the value's bytes. value_type is a scalar type name or
    ("array", element type name)."""
    if isinstance(value_type, tuple):
        if value_type[0] != "array":
            raise ValueError(f"unknown GGUF value type {value_type!r}")
        return struct.pack("<I", VALUE_TYPES["array"][0]) + _array(value_type[1], value)
    return struct.pack("<I", VALUE_TYPES[value_type][0]) + _scalar(value_type, value)


def _padding(size, alignment):
    return b"\0" * (-size % alignment)


def write_gguf(path, metadata, tensors, alignment=DEFAULT_ALIGNMENT):
    """Writes a GGUF v3 file.

    metadata: [(key, value_type, value)] in file order; a `general.alignment` entry must match `alignment`.
    tensors: [(name, ggml type name, ne, data)] in file order; ne lists dimensions fastest first; data is the
    tensor's bytes in that type or a function returning them (called when the tensor is written, so only one
    tensor needs to be in memory)."""
    keys = [key for key, _, _ in metadata]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate metadata key")
    names = [name for name, _, _, _ in tensors]
    if len(set(names)) != len(names):
        raise ValueError("duplicate tensor name")
    header = bytearray(MAGIC + struct.pack("<IQQ", VERSION, len(tensors), len(metadata)))
    for key, value_type, value in metadata:
        header += _string(key) + encode_value(value_type, value)
    offset = 0
    sizes = []
    for name, type_, ne, _ in tensors:
        n_values = int(np.prod(ne, dtype=np.int64))
        if ne[0] % gguf_blocks.TYPES[gguf_blocks.type_name(type_)][1]:
            raise ValueError(f"{name}: row of {ne[0]} is not a whole number of {type_} blocks")
        size = gguf_blocks.row_bytes(type_, n_values)
        header += _string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        header += struct.pack("<IQ", gguf_blocks.TYPES[gguf_blocks.type_name(type_)][0], offset)
        sizes.append(size)
        offset += size + (-size % alignment)
    header += _padding(len(header), alignment)
    with open(path, "wb") as f:
        f.write(header)
        for (name, _, _, data), size in zip(tensors, sizes):
            raw = data() if callable(data) else data
            if len(raw) != size:
                raise ValueError(f"{name}: {len(raw)} bytes of data, its type and shape need {size}")
            f.write(raw)
            f.write(_padding(size, alignment))


# ---- reading ----

class _Cursor:
    """Reads little-endian values from a bytes-like object, failing with the offset on truncation."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"file ends at byte {len(self.data)}, inside a value at byte {self.pos}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return bytes(self.take(self.unpack("<Q"))).decode("utf-8")


def _read_value(cur, type_id):
    name = VALUE_TYPE_OF_ID.get(type_id)
    if name is None:
        raise ValueError(f"unknown metadata value type {type_id}")
    if name == "string":
        return name, cur.string()
    if name == "array":
        element_id, count = cur.unpack("<I"), cur.unpack("<Q")
        element = VALUE_TYPE_OF_ID.get(element_id)
        if element is None or element == "array":
            raise ValueError(f"unsupported array element type {element_id}")
        if element == "string":
            return ("array", "string"), [cur.string() for _ in range(count)]
        dtype = np.dtype(VALUE_TYPES[element][1])
        values = np.frombuffer(cur.take(count * dtype.itemsize), dtype=dtype)
        return ("array", element), values.tolist()
    return name, cur.unpack(VALUE_TYPES[name][1])


def read_gguf(path):
    """Reads a GGUF file -> (metadata {key: (value_type, value)} in file order,
    tensors {name: {"type", "ne", "offset", "data"}} in file order; data is a read-only memoryview of the
    tensor's bytes)."""
    with open(path, "rb") as f:
        data = memoryview(f.read())
    cur = _Cursor(data)
    if bytes(cur.take(4)) != MAGIC:
        raise ValueError("not a GGUF file (bad magic)")
    version = cur.unpack("<I")
    if version != VERSION:
        raise ValueError(f"GGUF version {version} is not supported (only 3)")
    n_tensors, n_kv = cur.unpack("<Q"), cur.unpack("<Q")
    metadata = {}
    for _ in range(n_kv):
        key = cur.string()
        if key in metadata:
            raise ValueError(f"duplicate metadata key {key}")
        metadata[key] = _read_value(cur, cur.unpack("<I"))
    alignment = metadata.get("general.alignment", ("uint32", DEFAULT_ALIGNMENT))[1]
    tensors = {}
    for _ in range(n_tensors):
        name = cur.string()
        n_dims = cur.unpack("<I")
        ne = [cur.unpack("<Q") for _ in range(n_dims)]
        type_name = gguf_blocks.type_name(cur.unpack("<I"))
        offset = cur.unpack("<Q")
        if name in tensors:
            raise ValueError(f"duplicate tensor {name}")
        if offset % alignment:
            raise ValueError(f"{name}: offset {offset} is not a multiple of the alignment {alignment}")
        tensors[name] = {"type": type_name, "ne": ne, "offset": offset}
    data_start = cur.pos + (-cur.pos % alignment)
    for name, info in tensors.items():
        size = gguf_blocks.row_bytes(info["type"], int(np.prod(info["ne"], dtype=np.int64)))
        begin = data_start + info["offset"]
        if begin + size > len(data):
            raise ValueError(f"{name}: data ends at byte {begin + size}, past the file's end ({len(data)})")
        info["data"] = data[begin:begin + size]
    return metadata, tensors


def tensor_values(info):
    """A tensor from read_gguf -> float32 NumPy array shaped [ne[-1], ..., ne[0]] (dequantized)."""
    n_values = int(np.prod(info["ne"], dtype=np.int64))
    return gguf_blocks.dequantize(info["type"], info["data"], n_values).reshape(list(reversed(info["ne"])))
