"""Turns a GPT-2 GGUF file back into a Hugging Face folder with its weights dequantized to F32 (gguf_blocks.py),
so that the native engine and reference_gpt2.py can run exactly the weights a quantized file holds: the
inverse of convert_to_gguf.py (matrices transposed back to Conv1D [in, out], keys to config.json, the
tokenizer to vocab.json and merges.txt).

    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.convert.gguf_to_safetensors model-q4_k_m.gguf -o build/gguf-check/q4_k_m-dequantized
"""
import argparse
import json
import os

from gpt2tools.gguf_io import read_gguf, tensor_values
from gpt2tools.safetensors_io import save_safetensors

# GGUF block part -> (Hugging Face name inside h.N., stored transposed)
BLOCK_PARTS = {"attn_norm": ("ln_1", False), "attn_qkv": ("attn.c_attn", True),
               "attn_output": ("attn.c_proj", True), "ffn_norm": ("ln_2", False),
               "ffn_up": ("mlp.c_fc", True), "ffn_down": ("mlp.c_proj", True)}
TOP_LEVEL = {"token_embd.weight": "wte.weight", "position_embd.weight": "wpe.weight",
             "output_norm.weight": "ln_f.weight", "output_norm.bias": "ln_f.bias"}


def hf_name(name):
    """GGUF tensor name -> (Hugging Face name, whether the matrix is transposed back)."""
    if name in TOP_LEVEL:
        return TOP_LEVEL[name], False
    if name == "output.weight":
        return "lm_head.weight", False
    _, layer, part, kind = name.split(".")
    base, transposed = BLOCK_PARTS[part]
    return f"h.{layer}.{base}.{kind}", transposed and kind == "weight"


def value(metadata, key):
    if key not in metadata:
        raise KeyError(f"the GGUF file has no {key}")
    return metadata[key][1]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("gguf")
    p.add_argument("-o", "--out", required=True, help="output folder")
    args = p.parse_args()
    metadata, tensors = read_gguf(args.gguf)
    if value(metadata, "general.architecture") != "gpt2":
        raise ValueError(f"{args.gguf}: architecture is not gpt2")
    weights = {}
    for name, info in tensors.items():
        target, transposed = hf_name(name)
        values = tensor_values(info)
        weights[target] = values.T.copy() if transposed else values
    tokens = value(metadata, "tokenizer.ggml.tokens")
    n_ctx = value(metadata, "gpt2.context_length")
    config = {"model_type": "gpt2", "vocab_size": len(tokens), "n_positions": n_ctx, "n_ctx": n_ctx,
              "n_embd": value(metadata, "gpt2.embedding_length"),
              "n_head": value(metadata, "gpt2.attention.head_count"),
              "n_layer": value(metadata, "gpt2.block_count"),
              "layer_norm_epsilon": value(metadata, "gpt2.attention.layer_norm_epsilon"),
              "bos_token_id": value(metadata, "tokenizer.ggml.bos_token_id"),
              "eos_token_id": value(metadata, "tokenizer.ggml.eos_token_id")}
    os.makedirs(args.out, exist_ok=True)
    save_safetensors(os.path.join(args.out, "model.safetensors"), weights, dtype="F32")
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({token: i for i, token in enumerate(tokens)}, f, ensure_ascii=False)
    with open(os.path.join(args.out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(m + "\n" for m in value(metadata, "tokenizer.ggml.merges")))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
