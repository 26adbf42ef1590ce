"""Minimal safetensors writer and reader in pure Python + NumPy (no `safetensors` package needed).

File layout (https://github.com/huggingface/safetensors): an 8-byte little-endian u64 header length N,
N bytes of JSON header, then the raw little-endian tensor data. The header maps each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the start of the data section) and
may hold an optional "__metadata__" dict of str -> str.

The writer mirrors the official library's choices so that the files look like the ones found in the wild:
tensors are stored in name order, contiguously, and the JSON header is padded with spaces so the data
section starts on an 8-byte boundary.

Supported dtypes: F32, F16 and BF16. NumPy has no bfloat16, so BF16 tensors are produced from float
arrays with `save_safetensors(..., dtype="BF16")` (or by hand with `to_bf16_bits`), and are read back as
float32.
"""
import json
import struct

import numpy as np

HEADER_ALIGNMENT = 8
# Upper bound on the JSON header; the official library rejects headers above 100 MB too.
MAX_HEADER_BYTES = 100_000_000
BYTES_PER_ELEMENT = {"F32": 4, "F16": 2, "BF16": 2}


def to_bf16_bits(values):
    """float32 array -> uint16 bfloat16 bit patterns, rounding to nearest even (what torch does)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    # Adding 0x7FFF plus the lowest kept bit rounds half-way cases to the even neighbour.
    rounding_bias = np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    rounded = ((bits + rounding_bias) >> np.uint32(16)).astype(np.uint16)
    # The bias would turn a NaN with only low mantissa bits into infinity; keep it a (quiet) NaN.
    quiet_nan = ((bits >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return np.where(np.isnan(bits.view(np.float32)), quiet_nan, rounded)


def from_bf16_bits(bits):
    """uint16 bfloat16 bit patterns -> float32 (exact: bf16 is the top half of a float32)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _encode_tensor(name, array, dtype):
    """Returns (safetensors dtype string, little-endian bytes) for one tensor."""
    if dtype is None:
        if array.dtype == np.float32:
            dtype = "F32"
        elif array.dtype == np.float16:
            dtype = "F16"
        else:
            raise TypeError(f"{name}: unsupported array dtype {array.dtype}; "
                            "pass float32/float16 arrays or dtype='F32'/'F16'/'BF16'")
    if dtype == "F32":
        data = np.asarray(array, dtype="<f4")
    elif dtype == "F16":
        data = np.asarray(array, dtype="<f2")
    elif dtype == "BF16":
        data = to_bf16_bits(np.asarray(array, dtype=np.float32)).astype("<u2")
    else:
        raise ValueError(f"{name}: unsupported safetensors dtype {dtype!r}")
    return dtype, np.ascontiguousarray(data).tobytes()


def _header_bytes(entries, metadata):
    """The JSON header for entries [(name, dtype, shape, nbytes)] stored back to back in that order, padded so
    the data section starts on an 8-byte boundary."""
    header = {}
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise TypeError("safetensors metadata must map str to str")
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, st_dtype, shape, nbytes in entries:
        header[name] = {"dtype": st_dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    return header_bytes + b" " * (-(8 + len(header_bytes)) % HEADER_ALIGNMENT)


def save_safetensors(path, tensors, metadata=None, dtype=None):
    """Writes `tensors` (name -> np.ndarray) to `path`.

    dtype=None stores each array in its own dtype (float32 -> F32, float16 -> F16); dtype="F32", "F16" or
    "BF16" converts every tensor to that type (round to nearest even). `metadata` is an optional
    str -> str dict stored as "__metadata__".
    """
    entries, chunks = [], []
    for name in sorted(tensors):
        array = np.asarray(tensors[name])
        st_dtype, data = _encode_tensor(name, array, dtype)
        entries.append((name, st_dtype, array.shape, len(data)))
        chunks.append(data)
    header_bytes = _header_bytes(entries, metadata)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for data in chunks:
            f.write(data)


def save_safetensors_one_at_a_time(path, shapes, make_tensor, dtype, metadata=None):
    """Writes the tensors named in `shapes` (name -> shape), in name order like save_safetensors, calling
    make_tensor(name) for each only when it is written, so that one tensor at a time is in memory: for models
    of several GB. dtype: "F32", "F16" or "BF16"."""
    names = sorted(shapes)
    entries = [(name, dtype, shapes[name], int(np.prod(shapes[name], dtype=np.int64)) * BYTES_PER_ELEMENT[dtype])
               for name in names]
    header_bytes = _header_bytes(entries, metadata)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for name, _, shape, nbytes in entries:
            array = np.asarray(make_tensor(name))
            if tuple(array.shape) != tuple(shape):
                raise ValueError(f"{name}: made shape {array.shape}, declared {tuple(shape)}")
            _, data = _encode_tensor(name, array, dtype)
            assert len(data) == nbytes
            f.write(data)


def read_safetensors_header(file_bytes):
    """Parses and validates the header; returns (header dict, offset of the data section)."""
    if len(file_bytes) < 8:
        raise ValueError("safetensors file shorter than its 8-byte header length")
    (header_len,) = struct.unpack_from("<Q", file_bytes, 0)
    if header_len > MAX_HEADER_BYTES or 8 + header_len > len(file_bytes):
        raise ValueError(f"bad safetensors header length {header_len}")
    header = json.loads(file_bytes[8:8 + header_len].decode("utf-8"))
    data_start = 8 + header_len
    data_len = len(file_bytes) - data_start
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in BYTES_PER_ELEMENT:
            raise ValueError(f"{name}: unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        expected = int(np.prod(info["shape"], dtype=np.int64)) * BYTES_PER_ELEMENT[info["dtype"]]
        if not (0 <= begin <= end <= data_len) or end - begin != expected:
            raise ValueError(f"{name}: data_offsets {info['data_offsets']} do not fit shape "
                             f"{info['shape']} {info['dtype']} in {data_len} data bytes")
    return header, data_start


def load_safetensors(path):
    """Reads `path`; returns name -> float32 np.ndarray (F16 and BF16 are converted exactly)."""
    with open(path, "rb") as f:
        file_bytes = f.read()
    header, data_start = read_safetensors_header(file_bytes)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = file_bytes[data_start + begin:data_start + end]
        if info["dtype"] == "F32":
            values = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif info["dtype"] == "F16":
            values = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        else:
            values = from_bf16_bits(np.frombuffer(raw, dtype="<u2"))
        tensors[name] = values.reshape(info["shape"])
    return tensors


def load_safetensors_metadata(path):
    """Returns the "__metadata__" dict of `path` ({} when absent)."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        if header_len > MAX_HEADER_BYTES:
            raise ValueError(f"bad safetensors header length {header_len}")
        return json.loads(f.read(header_len).decode("utf-8")).get("__metadata__", {})
