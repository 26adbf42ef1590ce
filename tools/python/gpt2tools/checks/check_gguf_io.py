"""Self-checks of gpt2tools.gguf_io and gpt2tools.convert.convert_to_gguf. Exits non-zero on a failure.

1. Every metadata value type (scalars, numeric and string arrays) and tensors of several types survive a
   write -> read round trip; the writer is deterministic; data offsets honour the alignment (32 and 64).
2. The converter's file for a Hugging Face folder reads back with llama.cpp's tensor names and shapes
   (ne[0] = in), the Conv1D matrices transposed, the gpt2.* keys from config.json and the whole tokenizer.

The converter's model is tests/fixtures/tiny-random with the 384-token tokenizer of tests/fixtures/tiny-random-gguf
(gpt2tools.fixtures.make_tiny_gguf_fixture), or `--model`, any Hugging Face GPT-2 folder.

    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.checks.check_gguf_io [--model public/models/tiny-shakespeare]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from gpt2tools import gguf_blocks
from gpt2tools.gguf_io import read_gguf, tensor_values, write_gguf
from gpt2tools.fixtures.make_tiny_gguf_fixture import write_model_folder
from gpt2tools.safetensors_io import load_safetensors

ALL_VALUE_TYPES = [
    ("t.uint8", "uint8", 255), ("t.int8", "int8", -128), ("t.uint16", "uint16", 65535), ("t.int16", "int16", -32768),
    ("t.uint32", "uint32", 4294967295), ("t.int32", "int32", -2147483648), ("t.float32", "float32", 0.5),
    ("t.bool", "bool", True), ("t.string", "string", "ÿ Ġ<|endoftext|>"), ("t.uint64", "uint64", 2 ** 64 - 1),
    ("t.int64", "int64", -2 ** 63), ("t.float64", "float64", 1e-300),
    ("t.array.int32", ("array", "int32"), [1, -2, 3]), ("t.array.float32", ("array", "float32"), [0.25, -1.0]),
    ("t.array.uint8", ("array", "uint8"), []), ("t.array.bool", ("array", "bool"), [True, False]),
    ("t.array.string", ("array", "string"), ["a", "", "Ġt he"]),
]


def check_round_trip(folder, alignment):
    """Writes every value type and four tensors twice, reads them back; returns a failure message or None."""
    rng = np.random.default_rng(alignment)
    matrix = rng.standard_normal((3, 64)).astype(np.float32)
    cube = rng.standard_normal((2, 2, 256)).astype(np.float32)
    tensors = [
        ("vector", "F32", [5], np.arange(5, dtype=np.float32).tobytes()),
        ("matrix.q8_0", "Q8_0", [64, 3], gguf_blocks.quantize("Q8_0", matrix)),
        ("cube.q6_k", "Q6_K", [256, 2, 2], lambda: gguf_blocks.quantize("Q6_K", cube)),
        ("matrix.f16", "F16", [64, 3], gguf_blocks.quantize("F16", matrix)),
    ]
    metadata = list(ALL_VALUE_TYPES)
    if alignment != 32:
        metadata.append(("general.alignment", "uint32", alignment))
    paths = [os.path.join(folder, f"rt{i}-{alignment}.gguf") for i in range(2)]
    for path in paths:
        write_gguf(path, metadata, tensors, alignment=alignment)
    with open(paths[0], "rb") as a, open(paths[1], "rb") as b:
        if a.read() != b.read():
            return "two writes of the same content differ"
    read_meta, read_tensors = read_gguf(paths[0])
    for key, value_type, value in metadata:
        got_type, got = read_meta[key]
        if got_type != value_type or got != value:
            return f"{key}: wrote {value_type} {value!r}, read {got_type} {got!r}"
    if list(read_tensors) != [name for name, _, _, _ in tensors]:
        return "tensor order changed"
    for name, type_, ne, data in tensors:
        info = read_tensors[name]
        raw = data() if callable(data) else data
        if info["type"] != type_ or info["ne"] != ne or bytes(info["data"]) != raw or info["offset"] % alignment:
            return f"{name}: type, shape, bytes or alignment changed"
    if not np.array_equal(tensor_values(read_tensors["matrix.f16"]), matrix.astype(np.float16).astype(np.float32)):
        return "matrix.f16 does not read back as [3, 64]"
    return None


def expected_names(n_layer):
    names = ["token_embd.weight", "position_embd.weight"]
    for i in range(n_layer):
        for part in ("attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"):
            names += [f"blk.{i}.{part}.weight", f"blk.{i}.{part}.bias"]
    return names + ["output_norm.weight", "output_norm.bias"]


def check_converter(folder, model):
    """Converts `model` to F32 and Q4_K_M and checks what reads back; returns a list of failure messages."""
    with open(os.path.join(model, "config.json")) as f:
        config = json.load(f)
    d, n_layer, n_vocab = config["n_embd"], config["n_layer"], config["vocab_size"]
    failures = []
    out = {}
    for type_ in ("f32", "q4_k_m"):
        out[type_] = os.path.join(folder, f"model-{type_}.gguf")
        subprocess.run([sys.executable, "-m", "gpt2tools.convert.convert_to_gguf", model, "--type", type_,
                        "-o", out[type_], "--quiet"], check=True)
    meta, tensors = read_gguf(out["f32"])
    if list(tensors) != expected_names(n_layer):
        failures.append(f"tensor names: {list(tensors)[:6]} ...")
    shapes = {"token_embd.weight": [d, n_vocab], "blk.0.attn_qkv.weight": [d, 3 * d],
              "blk.0.attn_output.weight": [d, d], "blk.0.ffn_up.weight": [d, 4 * d],
              "blk.0.ffn_down.weight": [4 * d, d], "blk.0.attn_qkv.bias": [3 * d]}
    failures += [f"{n}: ne {tensors[n]['ne']}, expected {ne}" for n, ne in shapes.items() if tensors[n]["ne"] != ne]
    hf = load_safetensors(os.path.join(model, "model.safetensors"))
    if not np.array_equal(tensor_values(tensors["blk.0.attn_qkv.weight"]), hf["h.0.attn.c_attn.weight"].T):
        failures.append("blk.0.attn_qkv.weight is not c_attn.weight transposed")
    if not np.array_equal(tensor_values(tensors["token_embd.weight"]), hf["wte.weight"]):
        failures.append("token_embd.weight is not wte.weight")
    wanted = {"general.architecture": "gpt2", "gpt2.block_count": n_layer, "gpt2.embedding_length": d,
              "gpt2.feed_forward_length": 4 * d, "gpt2.attention.head_count": config["n_head"],
              "gpt2.context_length": config["n_ctx"], "tokenizer.ggml.model": "gpt2",
              "tokenizer.ggml.eos_token_id": config["eos_token_id"], "general.file_type": 0}
    failures += [f"{k}: {meta.get(k)}" for k, v in wanted.items() if meta.get(k, (None, None))[1] != v]
    tokens = meta["tokenizer.ggml.tokens"][1]
    with open(os.path.join(model, "vocab.json")) as f:
        vocab = json.load(f)
    if len(tokens) != n_vocab or any(tokens[i] != t for t, i in vocab.items()):
        failures.append("tokenizer.ggml.tokens is not vocab.json by id")
    token_types = meta["tokenizer.ggml.token_type"][1]
    if len(token_types) != n_vocab or token_types[vocab["<|endoftext|>"]] != 3:
        failures.append("tokenizer.ggml.token_type: wrong length or <|endoftext|> not CONTROL")
    with open(os.path.join(model, "merges.txt")) as f:
        n_merges = sum(1 for line in f if line.strip() and not line.startswith("#version"))  # "# #" is a merge
    if len(meta["tokenizer.ggml.merges"][1]) != n_merges:
        failures.append("tokenizer.ggml.merges: wrong count")
    _, quantized = read_gguf(out["q4_k_m"])
    types = {name: info["type"] for name, info in quantized.items()}
    if types["position_embd.weight"] != "F32" or types["blk.0.attn_qkv.bias"] != "F32":
        failures.append("q4_k_m: position_embd or a bias is not F32")
    if d % 256 and (types["blk.0.ffn_up.weight"] != "Q5_0" or types["token_embd.weight"] != "Q8_0"):
        failures.append(f"q4_k_m: rows of {d} do not fall back as llama.cpp's do: {types}")
    return failures


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="a Hugging Face GPT-2 folder (default: the tiny-random fixture)")
    args = p.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as folder:
        for alignment in (32, 64):
            problem = check_round_trip(folder, alignment)
            print(f"round trip, alignment {alignment}: {problem or 'ok'}")
            failures += [problem] if problem else []
        model = args.model
        if model is None:
            model = os.path.join(folder, "tiny-random")
            os.mkdir(model)
            write_model_folder(model)
        converter = check_converter(folder, model)
        print(f"converter on {args.model or 'the tiny-random fixture'}: {'; '.join(converter) or 'ok'}")
        failures += converter
    print("all checks passed" if not failures else f"{len(failures)} checks failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
