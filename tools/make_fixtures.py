"""Regenerates tests/fixtures/tiny-random/: a tiny random GPT-2 and the reference outputs the C++ tests use.

usage: python3 tools/make_fixtures.py [--out tests/fixtures/tiny-random]

Deterministic: weights and prompts come from numpy's legacy RandomState, whose streams NumPy keeps frozen
across versions (Generator streams may change). Every weight is rounded to a value that bfloat16 and
float16 both hold exactly, so model.safetensors (F32), model-f16.safetensors and model-bf16.safetensors
describe the very same model and one set of reference logits serves all three.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_gpt2 import ReferenceGPT2, write_logits_f32  # noqa: E402
from safetensors_io import (from_bf16_bits, load_safetensors, load_safetensors_metadata,  # noqa: E402
                            read_safetensors_header, save_safetensors, to_bf16_bits)

# Chosen (among the first few seeds) for varied greedy output with clear top-1 / top-2 gaps; see the checks.
SEED = 10
CONFIG = {
    "model_type": "gpt2", "vocab_size": 384, "n_positions": 320, "n_ctx": 320, "n_embd": 64, "n_head": 4,
    "n_layer": 2, "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new",
}
# GPT-2 initialises matrices with std 0.02. In a random model that small, the residual stream is
# dominated by the token's own embedding and the tied LM head then predicts the input token again, so
# greedy decoding repeats one token forever and attention is nearly uniform. Larger embeddings and
# matrices give peaked attention, non-trivial MLP activations and varied greedy output, which is what
# parity tests need to catch indexing mistakes.
WTE_STD = 0.25
WPE_STD = 0.25
MATRIX_STD = 0.2
BIAS_STD = 0.02
LAYER_NORM_WEIGHT_STD = 0.15  # around 1.0
LAYER_NORM_BIAS_STD = 0.05
F16_SMALLEST_NORMAL = 2.0 ** -14
SAFETENSORS_METADATA = {"format": "pt"}  # what Hugging Face writes; some loaders look for it
WEIGHT_FILES = {"model.safetensors": "F32", "model-f16.safetensors": "F16", "model-bf16.safetensors": "BF16"}
PROMPT_LENGTHS = {"one": 1, "short": 7, "long": 250}
GREEDY_CASE = "short"
GREEDY_NEW_TOKENS = 40
VARIETY_CHECK_TOKENS = 200
VARIETY_MIN_DISTINCT = 30
# Every greedy step of greedy.json wins by at least this logit gap, so an engine whose float32 (or
# reduced-precision) arithmetic differs slightly from the float64 reference still picks the same tokens.
GREEDY_MIN_MARGIN = 0.1


def representable_in_bf16_and_f16(values):
    """Rounds to bfloat16 (8 significant bits) and flushes what float16 would store as a subnormal to 0.

    A bfloat16 value whose magnitude lies in float16's normal range needs at most 8 of float16's 11
    significant bits, so both formats then hold it exactly. (Magnitudes here are far below f16's max.)
    """
    rounded = from_bf16_bits(to_bf16_bits(values.astype(np.float32)))
    return np.where(np.abs(rounded) < F16_SMALLEST_NORMAL, np.float32(0), rounded)


def random_weights(rng):
    d, n_layer = CONFIG["n_embd"], CONFIG["n_layer"]
    # GPT-2 scales residual output projections by 1/sqrt(2 * n_layer) so the residual stream does not grow.
    projection_std = MATRIX_STD / math.sqrt(2 * n_layer)
    tensors = {
        "wte.weight": rng.normal(0, WTE_STD, (CONFIG["vocab_size"], d)),
        "wpe.weight": rng.normal(0, WPE_STD, (CONFIG["n_positions"], d)),
    }

    def layer_norm(name):
        tensors[name + ".weight"] = 1.0 + rng.normal(0, LAYER_NORM_WEIGHT_STD, d)
        tensors[name + ".bias"] = rng.normal(0, LAYER_NORM_BIAS_STD, d)

    def conv1d(name, n_in, n_out, std):
        tensors[name + ".weight"] = rng.normal(0, std, (n_in, n_out))
        tensors[name + ".bias"] = rng.normal(0, BIAS_STD, n_out)

    for i in range(n_layer):
        layer_norm(f"h.{i}.ln_1")
        conv1d(f"h.{i}.attn.c_attn", d, 3 * d, MATRIX_STD)
        conv1d(f"h.{i}.attn.c_proj", d, d, projection_std)
        layer_norm(f"h.{i}.ln_2")
        conv1d(f"h.{i}.mlp.c_fc", d, 4 * d, MATRIX_STD)
        conv1d(f"h.{i}.mlp.c_proj", 4 * d, d, projection_std)
    layer_norm("ln_f")
    return {name: representable_in_bf16_and_f16(values) for name, values in tensors.items()}


def write_json(path, value):
    """Writes one top-level entry per line: readable diffs, yet token lists stay on one line."""
    if isinstance(value, list):
        text = "[\n" + ",\n".join(" " + json.dumps(item) for item in value) + "\n]\n"
    else:
        text = "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items()) + "\n}\n"
    with open(path, "w") as f:
        f.write(text)


def check_weight_files(out_dir, weights):
    """Reads every weight file back and checks it holds exactly `weights`, laid out like the official writer."""
    for file_name, dtype in WEIGHT_FILES.items():
        path = os.path.join(out_dir, file_name)
        with open(path, "rb") as f:
            header, data_start = read_safetensors_header(f.read())
        names = [name for name in header if name != "__metadata__"]
        assert names == sorted(weights), f"{file_name}: tensors missing or not in name order"
        assert data_start % 8 == 0, f"{file_name}: data section not 8-byte aligned"
        assert all(header[name]["dtype"] == dtype for name in names), f"{file_name}: expected {dtype}"
        assert load_safetensors_metadata(path) == SAFETENSORS_METADATA, f"{file_name}: metadata lost"
        loaded = load_safetensors(path)
        for name, values in weights.items():
            assert loaded[name].dtype == np.float32 and loaded[name].shape == values.shape, name
            assert np.array_equal(loaded[name].view(np.uint32), values.view(np.uint32)), \
                f"{file_name}: {name} differs from the generated values"


def top2_margin(logits_row):
    top2 = np.sort(logits_row)[-2:]
    return top2[1] - top2[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "tiny-random")
    parser.add_argument("--out", default=os.path.normpath(default_out), help="output folder")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)

    rng = np.random.RandomState(SEED)
    weights = random_weights(rng)
    prompts = {name: rng.randint(0, CONFIG["vocab_size"], size=length).tolist()
               for name, length in PROMPT_LENGTHS.items()}

    write_json(os.path.join(args.out, "config.json"), CONFIG)
    for file_name, dtype in WEIGHT_FILES.items():
        save_safetensors(os.path.join(args.out, file_name), weights, SAFETENSORS_METADATA, dtype=dtype)
    check_weight_files(args.out, weights)

    models = {file_name: ReferenceGPT2.from_folder(args.out, file_name) for file_name in WEIGHT_FILES}
    model = models["model.safetensors"]
    cases = []
    for name, ids in prompts.items():
        logits = model.logits(ids)
        for file_name, other in models.items():
            assert np.array_equal(other.logits(ids), logits), f"{file_name} gives different logits"
        logits_file = f"logits-{name}.f32"
        write_logits_f32(os.path.join(args.out, logits_file), logits)
        cases.append({"name": name, "ids": ids, "logits": logits_file})
        print(f"{name}: {len(ids)} tokens, logits std {logits.std():.3f}, "
              f"smallest top-2 margin {min(top2_margin(row) for row in logits):.2e}")
    write_json(os.path.join(args.out, "cases.json"), cases)

    prompt = prompts[GREEDY_CASE]
    long_run = model.greedy(prompt, VARIETY_CHECK_TOKENS)
    distinct = len(set(long_run))
    assert distinct >= VARIETY_MIN_DISTINCT, f"greedy output too repetitive ({distinct} distinct tokens)"
    generated = long_run[:GREEDY_NEW_TOKENS]  # greedy is prefix-stable: the first 40 of 200 are the 40
    write_json(os.path.join(args.out, "greedy.json"), {"prompt": prompt, "generated": generated})
    sequence = prompt + generated
    margins = [top2_margin(model.logits(sequence[:len(prompt) + step])[-1]) for step in range(GREEDY_NEW_TOKENS)]
    assert min(margins) >= GREEDY_MIN_MARGIN, f"a greedy step is a near tie (gap {min(margins):.2e})"
    print(f"greedy ({GREEDY_CASE}): {distinct} distinct tokens in {VARIETY_CHECK_TOKENS}; first "
          f"{GREEDY_NEW_TOKENS}: {generated}; smallest top-2 margin {min(margins):.3f}")

    total = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"wrote {args.out} ({total} bytes)")


if __name__ == "__main__":
    main()
