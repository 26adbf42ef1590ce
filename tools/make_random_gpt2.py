#!/usr/bin/python3
"""Writes a GPT-2-shaped model with deterministic random weights, for benchmarks (weights don't change speed).

The folder has the full Hugging Face layout (config.json, model.safetensors, vocab.json, merges.txt), so
the native tool, Node, the page and the benchmark load it like openai-community/gpt2. It is not
committed: 124M parameters are 500 MB in F32.

    /usr/bin/python3 tools/make_random_gpt2.py                    # GPT-2 124M shape -> build/models/gpt2-124m-random
    /usr/bin/python3 tools/make_random_gpt2.py --n-layer 6 --out build/models/distilgpt2-random
"""
import argparse
import json
import os
import shutil

import numpy as np

from safetensors_io import save_safetensors

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO, "build", "models", "gpt2-124m-random"))
    p.add_argument("--n-layer", type=int, default=12)
    p.add_argument("--n-head", type=int, default=12)
    p.add_argument("--n-embd", type=int, default=768)
    p.add_argument("--n-ctx", type=int, default=1024)
    p.add_argument("--vocab-size", type=int, default=50257)
    p.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    p.add_argument("--seed", type=int, default=124)
    return p.parse_args()


def random_weights(args):
    rng = np.random.default_rng(args.seed)
    d = args.n_embd
    normal = lambda *shape, std=0.02: rng.standard_normal(shape, dtype=np.float32) * np.float32(std)  # noqa: E731
    tensors = {"wte.weight": normal(args.vocab_size, d), "wpe.weight": normal(args.n_ctx, d, std=0.01)}
    for i in range(args.n_layer):
        p = f"h.{i}."
        tensors.update({
            p + "ln_1.weight": np.ones(d, np.float32), p + "ln_1.bias": np.zeros(d, np.float32),
            p + "attn.c_attn.weight": normal(d, 3 * d), p + "attn.c_attn.bias": np.zeros(3 * d, np.float32),
            p + "attn.c_proj.weight": normal(d, d), p + "attn.c_proj.bias": np.zeros(d, np.float32),
            p + "ln_2.weight": np.ones(d, np.float32), p + "ln_2.bias": np.zeros(d, np.float32),
            p + "mlp.c_fc.weight": normal(d, 4 * d), p + "mlp.c_fc.bias": np.zeros(4 * d, np.float32),
            p + "mlp.c_proj.weight": normal(4 * d, d), p + "mlp.c_proj.bias": np.zeros(d, np.float32),
        })
    tensors["ln_f.weight"] = np.ones(d, np.float32)
    tensors["ln_f.bias"] = np.zeros(d, np.float32)
    return tensors


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    save_safetensors(os.path.join(args.out, "model.safetensors"), random_weights(args), dtype=args.dtype)
    config = {"model_type": "gpt2", "vocab_size": args.vocab_size, "n_positions": args.n_ctx, "n_ctx": args.n_ctx,
              "n_embd": args.n_embd, "n_head": args.n_head, "n_layer": args.n_layer, "layer_norm_epsilon": 1e-5}
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    vocab_dir = os.path.join(REPO, "tests", "fixtures", "gpt2-vocab")
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(vocab_dir, name), os.path.join(args.out, name))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
