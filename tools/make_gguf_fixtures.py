#!/usr/bin/env python3
"""Writes tests/fixtures/tiny-gguf/: a tiny random GPT-2 as one GGUF file whose matrices use every tensor type
the engine reads (F32, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), with an untied output head, and the
float64 reference logits of its dequantized weights, so the C++ tests can check a whole forward pass over
quantized weights against an independent implementation.

- model.gguf: vocab 384 (the 256 byte-level tokens, 127 merged pairs, <|endoftext|>), 64 positions,
  n_embd 256 (a multiple of the K-quants' 256-value super-blocks), 4 heads, 2 layers. Quantized by
  gguf_blocks.quantize (ggml's quantize_row_*_ref), written by gguf_io.write_gguf, llama.cpp's gpt2 names.
- cases.json: the prompt ids, the matrix types, and the reference's top-1 tokens.
- logits.f32: reference_gpt2.py's logits of the prompt, float32 [n_prompt, n_vocab], computed in float64
  from the weights gguf_blocks.dequantize decodes (what remains between it and the engine is the engine's
  quantization of the activations).

Deterministic (NumPy's legacy RandomState, fixed seed).

    /usr/bin/python3 tools/make_gguf_fixtures.py [--out DIR]
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_blocks  # noqa: E402
from gguf_io import write_gguf  # noqa: E402
from reference_gpt2 import ReferenceGPT2, write_logits_f32  # noqa: E402

SEED = 20261130
CONFIG = {"vocab_size": 384, "n_positions": 64, "n_embd": 256, "n_head": 4, "n_layer": 2,
          "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new"}
# One type per matrix, every type once: (GGUF name, type).
MATRIX_TYPES = {
    "token_embd.weight": "F16",
    "blk.0.attn_qkv.weight": "F32", "blk.0.attn_output.weight": "Q8_0",
    "blk.0.ffn_up.weight": "Q4_0", "blk.0.ffn_down.weight": "Q4_1",
    "blk.1.attn_qkv.weight": "Q5_0", "blk.1.attn_output.weight": "Q5_1",
    "blk.1.ffn_up.weight": "Q4_K", "blk.1.ffn_down.weight": "Q5_K",
    "output.weight": "Q6_K",
}
PROMPT_LENGTH = 24
EOS_ID = 383


def byte_level_chars():
    """GPT-2's byte -> printable character table (bytes_to_unicode), in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def vocabulary(rng):
    chars = byte_level_chars()
    tokens, merges = list(chars), []
    letters = [ord(c) for c in "etaoinshrdlu "]
    while len(tokens) < EOS_ID:
        a, b = chars[letters[rng.randint(len(letters))]], chars[letters[rng.randint(len(letters))]]
        if a + b not in tokens:
            tokens.append(a + b)
            merges.append(f"{a} {b}")
    return tokens + ["<|endoftext|>"], merges


def random_tensors(rng):
    """GGUF name -> float32 values as the file stores them (matrices [out, in])."""
    d, v, p = CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["n_positions"]
    def normal(shape, std):
        return rng.normal(0, std, shape).astype(np.float32)
    t = {"token_embd.weight": normal((v, d), 0.5), "position_embd.weight": normal((p, d), 0.1)}
    for i in range(CONFIG["n_layer"]):
        b = f"blk.{i}."
        for norm in ("attn_norm", "ffn_norm"):
            t[b + norm + ".weight"] = (1.0 + normal((d,), 0.15)).astype(np.float32)
            t[b + norm + ".bias"] = normal((d,), 0.05)
        for name, n_out, n_in, std in (("attn_qkv", 3 * d, d, 0.12), ("attn_output", d, d, 0.06),
                                       ("ffn_up", 4 * d, d, 0.06), ("ffn_down", d, 4 * d, 0.03)):
            t[b + name + ".weight"] = normal((n_out, n_in), std)
            t[b + name + ".bias"] = normal((n_out,), 0.02)
    t["output_norm.weight"] = (1.0 + normal((d,), 0.15)).astype(np.float32)
    t["output_norm.bias"] = normal((d,), 0.05)
    t["output.weight"] = normal((v, d), 0.5)
    return t


def hf_name(name):
    """GGUF name -> (Hugging Face name, stored transposed as Conv1D)."""
    top = {"token_embd.weight": "wte.weight", "position_embd.weight": "wpe.weight",
           "output_norm.weight": "ln_f.weight", "output_norm.bias": "ln_f.bias", "output.weight": "lm_head.weight"}
    if name in top:
        return top[name], False
    parts = {"attn_norm": "ln_1", "attn_qkv": "attn.c_attn", "attn_output": "attn.c_proj", "ffn_norm": "ln_2",
             "ffn_up": "mlp.c_fc", "ffn_down": "mlp.c_proj"}
    _, layer, part, kind = name.split(".")
    return f"h.{layer}.{parts[part]}.{kind}", kind == "weight" and part not in ("attn_norm", "ffn_norm")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "tiny-gguf"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.RandomState(SEED)
    tokens, merges = vocabulary(rng)
    tensors = random_tensors(rng)

    plan, dequantized = [], {}
    for name, values in tensors.items():
        type_ = MATRIX_TYPES.get(name, "F32")
        raw = gguf_blocks.quantize(type_, values)
        dequantized[name] = gguf_blocks.dequantize(type_, raw, values.size).reshape(values.shape)
        plan.append((name, type_, list(reversed(values.shape)), lambda raw=raw: raw))
    metadata = [
        ("general.architecture", "string", "gpt2"),
        ("general.name", "string", "tiny-gguf (random, every tensor type)"),
        ("gpt2.block_count", "uint32", CONFIG["n_layer"]),
        ("gpt2.context_length", "uint32", CONFIG["n_positions"]),
        ("gpt2.embedding_length", "uint32", CONFIG["n_embd"]),
        ("gpt2.feed_forward_length", "uint32", 4 * CONFIG["n_embd"]),
        ("gpt2.attention.head_count", "uint32", CONFIG["n_head"]),
        ("gpt2.attention.layer_norm_epsilon", "float32", CONFIG["layer_norm_epsilon"]),
        ("tokenizer.ggml.model", "string", "gpt2"),
        ("tokenizer.ggml.tokens", ("array", "string"), tokens),
        ("tokenizer.ggml.merges", ("array", "string"), merges),
        ("tokenizer.ggml.eos_token_id", "uint32", EOS_ID),
        ("tokenizer.ggml.bos_token_id", "uint32", EOS_ID),
    ]
    write_gguf(os.path.join(args.out, "model.gguf"), metadata, plan)

    hf = {}
    for name, values in dequantized.items():
        hf_key, transpose = hf_name(name)
        hf[hf_key] = values.T if transpose else values
    reference = ReferenceGPT2(CONFIG, hf)
    prompt = rng.randint(0, CONFIG["vocab_size"], size=PROMPT_LENGTH).tolist()
    logits = reference.logits(prompt)
    write_logits_f32(os.path.join(args.out, "logits.f32"), logits)
    with open(os.path.join(args.out, "cases.json"), "w") as f:
        json.dump({"prompt": prompt, "matrix_types": MATRIX_TYPES, "top1": np.argmax(logits, axis=1).tolist(),
                   "made_by": "tools/make_gguf_fixtures.py"}, f, indent=2)
        f.write("\n")
    spread = float(np.std(logits))
    print(f"wrote {args.out}: model.gguf {os.path.getsize(os.path.join(args.out, 'model.gguf'))} bytes, "
          f"logits std {spread:.3f}")


if __name__ == "__main__":
    main()
