"""Converts a Hugging Face GPT-2 folder (config.json, model.safetensors, vocab.json, merges.txt) to one GGUF file
that llama.cpp (and this project's GGUF loader) reads as a complete model: weights, hyper-parameters, tokenizer.

    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.convert.convert_to_gguf public/models/tiny-shakespeare --type q8_0 -o tiny-q8_0.gguf
    npm run convert -- DIR --type q4_k_m -o gpt2.Q4_K_M.gguf      # the same, for site owners (Python 3 + NumPy)

What is written follows llama.cpp's convert_hf_to_gguf.py (GPT2Model) and, for the quantized types,
llama-quantize's choice of type per tensor (src/llama-quant.cpp):

- architecture `gpt2`; tensors token_embd, position_embd, blk.N.{attn_norm, attn_qkv, attn_output, ffn_norm,
  ffn_up, ffn_down}.{weight, bias}, output_norm.{weight, bias}; output.weight only when the checkpoint's
  lm_head differs from wte (GPT-2 ties them). Conv1D matrices [in, out] are stored transposed, as [out, in]
  rows with ne = [in, out].
- keys general.architecture, general.type, general.name, gpt2.context_length, gpt2.embedding_length,
  gpt2.feed_forward_length, gpt2.block_count, gpt2.attention.head_count, gpt2.attention.layer_norm_epsilon,
  general.file_type, general.quantization_version, tokenizer.ggml.{model, pre, tokens, token_type, merges,
  bos_token_id, eos_token_id}.
- types: 1-D tensors (norms, biases) and position_embd stay F32. `f32`/`f16`: every other matrix in that
  type. `q8_0`, `q4_0`, `q4_1`, `q5_0`, `q5_1`: every other matrix in that type, except token_embd, which is
  also the output matrix and gets Q6_K (Q8_0 when its row is not a multiple of 256), as llama-quantize does.
  `q4_k_m`: Q4_K, with attn_qkv and ffn_down in Q6_K on the layers llama.cpp's use_more_bits picks (the first
  and last eighth and every third between) and token_embd in Q6_K. `q4_k`, `q5_k`, `q6_k`: every matrix in
  that type (llama-quantize --pure). `--pure` turns the token_embd rule off for the legacy types too.
- a K-quant whose row (ne[0]) is not a multiple of 256 falls back as llama-quantize does: Q4_K -> Q5_0,
  Q5_K -> Q5_1, Q6_K -> Q8_0; a 32-block type whose row is not a multiple of 32 falls back to F16, as
  convert_hf_to_gguf.py does. The bundled model (n_embd 192) thus has Q5_0 and Q8_0 matrices in q4_k_m.
"""
import argparse
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("convert_to_gguf.py needs NumPy: apt-get install python3-numpy (or pip install numpy)")

from gpt2tools import gguf_blocks
from gpt2tools.gguf_io import write_gguf
from gpt2tools.safetensors_io import load_safetensors

# --type -> (llama_ftype written as general.file_type, default ggml type of the matrices, uses the mixture)
FILE_TYPES = {
    "f32": (0, "F32", False), "f16": (1, "F16", False),
    "q4_0": (2, "Q4_0", True), "q4_1": (3, "Q4_1", True), "q8_0": (7, "Q8_0", True),
    "q5_0": (8, "Q5_0", True), "q5_1": (9, "Q5_1", True), "q4_k_m": (15, "Q4_K", True),
    "q4_k": (14, "Q4_K", False), "q5_k": (16, "Q5_K", False), "q6_k": (18, "Q6_K", False),
}
QUANTIZATION_VERSION = 2               # GGML_QNT_VERSION
TOKEN_TYPE_NORMAL, TOKEN_TYPE_CONTROL = 1, 3
K_QUANT_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="Hugging Face GPT-2 folder")
    p.add_argument("--type", choices=FILE_TYPES, default="f16")
    p.add_argument("--pure", action="store_true", help="no per-tensor mixture: every matrix in --type's type")
    p.add_argument("-o", "--out", help="output file (default: MODEL/model-TYPE.gguf)")
    p.add_argument("--name", help="general.name (default: the folder's name)")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args()


def use_more_bits(i_layer, n_layer):
    """llama.cpp's choice of the layers that get more bits in the _M mixes."""
    return i_layer < n_layer // 8 or i_layer >= 7 * n_layer // 8 or (i_layer - n_layer // 8) % 3 == 2


def mixture_type(name, file_type, default, n_layer, has_output):
    """The type llama-quantize's mixture picks for a quantizable matrix, before any fallback."""
    # GPT-2 has no output.weight: token_embd is the output matrix too and gets the output's rule.
    if name == "output.weight" or (name == "token_embd.weight" and not has_output):
        return "Q8_0" if default == "Q8_0" else "Q6_K"
    # llama.cpp counts attn_qkv as an attn_v tensor and counts both per layer.
    if (file_type == "q4_k_m" and name.endswith(("attn_qkv.weight", "ffn_down.weight"))
            and use_more_bits(int(name.split(".")[1]), n_layer)):
        return "Q6_K"
    return default


def tensor_type(name, ne, args, n_layer, has_output):
    """The ggml type a tensor is stored in (see the module docstring)."""
    _, default, mixed = FILE_TYPES[args.type]
    if len(ne) < 2 or not name.endswith(".weight") or name == "position_embd.weight":
        return "F32"
    chosen = mixture_type(name, args.type, default, n_layer, has_output) if mixed and not args.pure else default
    if ne[0] % gguf_blocks.TYPES[chosen][1] == 0:
        return chosen
    fallback = K_QUANT_FALLBACK.get(chosen, "F16")
    return fallback if ne[0] % gguf_blocks.TYPES[fallback][1] == 0 else "F16"


def gguf_tensors(hf, n_layer):
    """Hugging Face tensors (Conv1D [in, out]) -> [(GGUF name, float32 array as stored: [out, in])]."""
    def get(name):
        for key in (name, "transformer." + name):
            if key in hf:
                return hf[key]
        raise KeyError(f"model.safetensors has no tensor {name}")

    out = [("token_embd.weight", get("wte.weight")), ("position_embd.weight", get("wpe.weight"))]
    for i in range(n_layer):
        h = f"h.{i}."
        for gguf_name, hf_name, matrix in (
                ("attn_norm", "ln_1", False), ("attn_qkv", "attn.c_attn", True),
                ("attn_output", "attn.c_proj", True), ("ffn_norm", "ln_2", False),
                ("ffn_up", "mlp.c_fc", True), ("ffn_down", "mlp.c_proj", True)):
            weight = get(h + hf_name + ".weight")
            out.append((f"blk.{i}.{gguf_name}.weight", weight.T if matrix else weight))
            out.append((f"blk.{i}.{gguf_name}.bias", get(h + hf_name + ".bias")))
    out += [("output_norm.weight", get("ln_f.weight")), ("output_norm.bias", get("ln_f.bias"))]
    lm_head = hf.get("lm_head.weight")
    if lm_head is not None and not np.array_equal(lm_head, get("wte.weight")):
        out.append(("output.weight", lm_head))
    return [(name, np.ascontiguousarray(values, dtype=np.float32)) for name, values in out]


def tokenizer_metadata(folder, n_vocab, eos_id, bos_id):
    """The tokenizer.ggml.* entries from vocab.json and merges.txt, as convert_hf_to_gguf.py's _set_vocab_gpt2
    writes them: tokens by id (ids the vocabulary lacks, up to n_vocab, become [PADn]), `<|endoftext|>` and
    other <|...|> tokens as CONTROL, merges as "left right" strings."""
    with open(os.path.join(folder, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    by_id = {int(i): token for token, i in vocab.items()}
    if len(by_id) != len(vocab) or max(by_id) >= n_vocab:
        raise ValueError(f"vocab.json: ids are not unique or exceed vocab_size {n_vocab}")
    tokens = [by_id.get(i, f"[PAD{i}]") for i in range(n_vocab)]
    types = [TOKEN_TYPE_CONTROL if t.startswith("<|") and t.endswith("|>") else TOKEN_TYPE_NORMAL for t in tokens]
    with open(os.path.join(folder, "merges.txt"), encoding="utf-8") as f:
        merges = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    if any(len(m.split(" ")) != 2 for m in merges):
        raise ValueError("merges.txt: a merge is not two tokens separated by one space")
    return [
        ("tokenizer.ggml.model", "string", "gpt2"),
        ("tokenizer.ggml.pre", "string", "gpt-2"),
        ("tokenizer.ggml.tokens", ("array", "string"), tokens),
        ("tokenizer.ggml.token_type", ("array", "int32"), types),
        ("tokenizer.ggml.merges", ("array", "string"), merges),
        ("tokenizer.ggml.bos_token_id", "uint32", bos_id),
        ("tokenizer.ggml.eos_token_id", "uint32", eos_id),
    ]


def model_metadata(config, args, name):
    """general.* and gpt2.* entries, in convert_hf_to_gguf.py's order."""
    n_embd = config["n_embd"]
    return [
        ("general.architecture", "string", "gpt2"),
        ("general.type", "string", "model"),
        ("general.name", "string", name),
        ("gpt2.block_count", "uint32", config["n_layer"]),
        ("gpt2.context_length", "uint32", config.get("n_ctx", config.get("n_positions"))),
        ("gpt2.embedding_length", "uint32", n_embd),
        ("gpt2.feed_forward_length", "uint32", config.get("n_inner") or 4 * n_embd),
        ("gpt2.attention.head_count", "uint32", config["n_head"]),
        ("gpt2.attention.layer_norm_epsilon", "float32", config.get("layer_norm_epsilon", 1e-5)),
        ("general.file_type", "uint32", FILE_TYPES[args.type][0]),
        ("general.quantization_version", "uint32", QUANTIZATION_VERSION),
    ]


def encode(type_, values):
    """A function that quantizes a tensor when the writer asks for it (one tensor in memory at a time)."""
    return lambda: gguf_blocks.quantize(type_, values)


def main():
    args = parse_args()
    with open(os.path.join(args.model, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    n_layer, n_vocab = config["n_layer"], config["vocab_size"]
    eos_id = config.get("eos_token_id", 50256)
    bos_id = config.get("bos_token_id", eos_id)
    name = args.name or os.path.basename(os.path.normpath(args.model))
    metadata = model_metadata(config, args, name) + tokenizer_metadata(args.model, n_vocab, eos_id, bos_id)
    tensors = gguf_tensors(load_safetensors(os.path.join(args.model, "model.safetensors")), n_layer)
    has_output = any(n == "output.weight" for n, _ in tensors)
    plan = []
    for tensor_name, values in tensors:
        ne = list(reversed(values.shape))
        type_ = tensor_type(tensor_name, ne, args, n_layer, has_output)
        plan.append((tensor_name, type_, ne, encode(type_, values)))
    out = args.out or os.path.join(args.model, f"model-{args.type}.gguf")
    write_gguf(out, metadata, plan)
    if not args.quiet:
        counts = {}
        for _, type_, _, _ in plan:
            counts[type_] = counts.get(type_, 0) + 1
        summary = ", ".join(f"{n} {t}" for t, n in sorted(counts.items()))
        print(f"wrote {out}: {os.path.getsize(out)} bytes, {len(plan)} tensors ({summary})", file=sys.stderr)


if __name__ == "__main__":
    main()
