#!/usr/bin/python3
"""Writes a GPT-2-shaped model with deterministic random weights, for benchmarks (weights don't change speed).

The folder has the full Hugging Face layout (config.json, model.safetensors, vocab.json, merges.txt), so
the native tool, Node, the page and the benchmark load it like openai-community/gpt2. It is not
committed: 124M parameters are 500 MB in F32. Tensors are made and written one at a time (each from its own
generator, seeded with --seed and its name), so even GPT-2 XL's shape needs only one tensor's memory.

    /usr/bin/python3 tools/make_random_gpt2.py                    # GPT-2 124M shape -> build/models/gpt2-124m-random
    /usr/bin/python3 tools/make_random_gpt2.py --n-layer 6 --out build/models/distilgpt2-random
    /usr/bin/python3 tools/make_random_gpt2.py --shape 1558m --dtype F16 --out build/models-local/gpt2-1558m-random
"""
import argparse
import json
import os
import shutil
import zlib

import numpy as np

from safetensors_io import save_safetensors_one_at_a_time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# (n_layer, n_head, n_embd) of the released GPT-2 sizes.
SHAPES = {"124m": (12, 12, 768), "355m": (24, 16, 1024), "774m": (36, 20, 1280), "1558m": (48, 25, 1600)}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(REPO, "build", "models", "gpt2-124m-random"))
    p.add_argument("--shape", choices=SHAPES, default="124m",
                   help="n_layer, n_head and n_embd of a GPT-2 size (each overridable below)")
    p.add_argument("--n-layer", type=int)
    p.add_argument("--n-head", type=int)
    p.add_argument("--n-embd", type=int)
    p.add_argument("--n-ctx", type=int, default=1024)
    p.add_argument("--vocab-size", type=int, default=50257)
    p.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    p.add_argument("--seed", type=int, default=124)
    args = p.parse_args()
    for key, value in zip(("n_layer", "n_head", "n_embd"), SHAPES[args.shape]):
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def weight_shapes(args):
    """name -> shape of every tensor, in the Hugging Face layout (Conv1D weights [in, out])."""
    d = args.n_embd
    shapes = {"wte.weight": (args.vocab_size, d), "wpe.weight": (args.n_ctx, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
    for i in range(args.n_layer):
        p = f"h.{i}."
        shapes.update({
            p + "ln_1.weight": (d,), p + "ln_1.bias": (d,),
            p + "attn.c_attn.weight": (d, 3 * d), p + "attn.c_attn.bias": (3 * d,),
            p + "attn.c_proj.weight": (d, d), p + "attn.c_proj.bias": (d,),
            p + "ln_2.weight": (d,), p + "ln_2.bias": (d,),
            p + "mlp.c_fc.weight": (d, 4 * d), p + "mlp.c_fc.bias": (4 * d,),
            p + "mlp.c_proj.weight": (4 * d, d), p + "mlp.c_proj.bias": (d,),
        })
    return shapes


def random_tensor(args, name, shape):
    """Layernorm weights 1, biases 0, matrices N(0, 0.02) (wpe N(0, 0.01)), from a generator seeded with
    --seed and the name, so that any tensor can be made on its own."""
    if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
        return np.ones(shape, np.float32)
    if len(shape) == 1:
        return np.zeros(shape, np.float32)
    rng = np.random.default_rng([args.seed, zlib.crc32(name.encode())])
    std = 0.01 if name == "wpe.weight" else 0.02
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    shapes = weight_shapes(args)
    save_safetensors_one_at_a_time(os.path.join(args.out, "model.safetensors"), shapes,
                                   lambda name: random_tensor(args, name, shapes[name]), args.dtype)
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
