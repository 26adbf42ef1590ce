#!/usr/bin/env python3
"""Writes the fuzz seed corpus (pure Python, no NumPy):

  corpus/loader/ok_*.safetensors    valid models for the config in fuzz_model.h: they must load
  corpus/loader/bad_*.safetensors   malformed files: the loader must reject each with a specific message
                                    (tests/cpp/test_malformed.cpp lists the message for every one)
  corpus/config/ok_*.json, bad_*.json  the same for config.json (loaded with an ok_ model of matching size)

Deterministic: rerunning it rewrites identical files. Usage: python3 tests/fuzz/make_corpus.py
"""
import json
import os
import random
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
LOADER_DIR = os.path.join(HERE, "corpus", "loader")
CONFIG_DIR = os.path.join(HERE, "corpus", "config")


def fuzz_config():
    """The config.json of fuzz_model.h (single source for the fuzzers, the tests and these seeds)."""
    text = open(os.path.join(HERE, "fuzz_model.h")).read()
    return json.loads(re.search(r'R"\((.*?)\)"', text, re.S).group(1))


CONFIG = fuzz_config()
V, T, C, L = CONFIG["vocab_size"], CONFIG["n_positions"], CONFIG["n_embd"], CONFIG["n_layer"]


def gpt2_tensors(n_vocab=V, n_ctx=T, n_embd=C, n_layer=L, seed=1):
    """(name, shape, values) of a GPT-2 checkpoint with openai-community/gpt2's exact names, including its
    h.{i}.attn.bias causal-mask buffers, in name order like the safetensors library writes them. Values are
    k / 64 with |k| <= 64: exact in F32, F16 and BF16."""
    rng = random.Random(seed)

    def values(shape, lo=-64, hi=64):
        n = 1
        for d in shape:
            n *= d
        return [rng.randint(lo, hi) / 64 for _ in range(n)]

    tensors = [("wte.weight", [n_vocab, n_embd], values([n_vocab, n_embd])),
               ("wpe.weight", [n_ctx, n_embd], values([n_ctx, n_embd])),
               ("ln_f.weight", [n_embd], values([n_embd], 48, 80)),
               ("ln_f.bias", [n_embd], values([n_embd]))]
    for i in range(n_layer):
        h = f"h.{i}."
        tensors += [
            (h + "attn.bias", [1, 1, n_ctx, n_ctx],
             [1.0 if c <= r else 0.0 for r in range(n_ctx) for c in range(n_ctx)]),
            (h + "ln_1.weight", [n_embd], values([n_embd], 48, 80)),
            (h + "ln_1.bias", [n_embd], values([n_embd])),
            (h + "attn.c_attn.weight", [n_embd, 3 * n_embd], values([n_embd, 3 * n_embd])),
            (h + "attn.c_attn.bias", [3 * n_embd], values([3 * n_embd])),
            (h + "attn.c_proj.weight", [n_embd, n_embd], values([n_embd, n_embd])),
            (h + "attn.c_proj.bias", [n_embd], values([n_embd])),
            (h + "ln_2.weight", [n_embd], values([n_embd], 48, 80)),
            (h + "ln_2.bias", [n_embd], values([n_embd])),
            (h + "mlp.c_fc.weight", [n_embd, 4 * n_embd], values([n_embd, 4 * n_embd])),
            (h + "mlp.c_fc.bias", [4 * n_embd], values([4 * n_embd])),
            (h + "mlp.c_proj.weight", [4 * n_embd, n_embd], values([4 * n_embd, n_embd])),
            (h + "mlp.c_proj.bias", [n_embd], values([n_embd])),
        ]
    return sorted(tensors, key=lambda t: t[0])


def encode(values, dtype):
    if dtype == "F32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "F16":
        return struct.pack(f"<{len(values)}e", *values)
    if dtype == "BF16":  # the top half of the float32 bits (exact for these values, and for inf/nan)
        return b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in values)
    raise ValueError(dtype)


def container(header_text, data):
    """8-byte little-endian header length, the header padded with spaces to 8 bytes, the data."""
    header = header_text.encode("utf-8") if isinstance(header_text, str) else header_text
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


def safetensors(tensors, dtype="F32", prefix="", metadata={"format": "pt"}, edit=None):
    """tensors back to back; edit(header_dict, data) may change the header before it is written."""
    header = {"__metadata__": metadata} if metadata is not None else {}
    data = b""
    for name, shape, values in tensors:
        raw = encode(values, dtype)
        header[prefix + name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if edit:
        edit(header, data)
    return container(json.dumps(header, separators=(",", ":")), data)


def with_value(tensors, name, index, value):
    return [(n, s, v[:index] + [value] + v[index + 1:] if n == name else v) for n, s, v in tensors]


def write(directory, name, content):
    with open(os.path.join(directory, name), "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode("utf-8"))


def loader_seeds():
    model = gpt2_tensors()
    ok = safetensors(model)
    header_len = struct.unpack("<Q", ok[:8])[0]
    seeds = {
        "ok_gpt2_layout_f32": ok,
        "ok_transformer_prefix_tied_head_f16": safetensors(
            model + [("lm_head.weight", [V, C], dict((n, v) for n, _, v in model)["wte.weight"])],
            dtype="F16", prefix="transformer.", metadata=None),
        "ok_gpt2_layout_bf16": safetensors(model, dtype="BF16"),
        # finite weights whose activations overflow: loads, then generation reports non-finite logits
        "ok_overflowing_weights_f32": safetensors([(n, s, [3e38] * len(v) if n == "wte.weight" else v)
                                                   for n, s, v in model]),

        "bad_html_error_page": b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>"
                               b"<body>Entry not found</body></html>\n",
        "bad_git_lfs_pointer": b"version https://git-lfs.github.com/spec/v1\noid sha256:248dfc3911869ec493c76e65bf2f"
                               b"cf7f615828b0254c12b473182f0f81d3a707\nsize 548105171\n",
        "bad_json_error_body": b'{"error":"Entry not found"}',
        "bad_header_longer_than_file": struct.pack("<Q", len(ok) - 7) + ok[8:],
        "bad_header_over_cap": struct.pack("<Q", 100 * 1024 * 1024 + 1) + ok[8:],
        "bad_header_truncated_json": struct.pack("<Q", header_len // 2) + ok[8:],
        "bad_header_not_utf8": container(b'{"wte.weight\xff":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}', b""),
        "bad_header_overlong_utf8": container(b'{"\xc0\xafwte":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}', b""),
        "bad_header_not_json": container("{'wte.weight': {dtype: F32}}", b""),
        "bad_header_not_object": container("[1, 2, 3]", b""),
        "bad_header_too_deep": container("[" * 100 + "]" * 100, b""),
        "bad_entry_not_object": container('{"wte.weight": 5}', b""),
        "bad_metadata_not_object": container('{"__metadata__": ["pt"]}', b""),
        "bad_metadata_not_string": container('{"__metadata__": {"format": 1}}', b""),
        "bad_duplicate_tensor": container(
            '{"wte.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
            '"wte.weight":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', bytes(8)),
        "bad_unknown_dtype": safetensors(model, edit=lambda h, d: h["ln_f.bias"].update(dtype="F64")),
        # input text in a message is escaped, so that every error stays one line
        "bad_dtype_with_newline": safetensors(model, edit=lambda h, d: h["wpe.weight"].update(dtype="F32\n<b>")),
        "bad_duplicate_key_with_newline": container(
            '{"a\\nb":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},'
            '"a\\nb":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}', b""),
        "bad_integer_dtype": safetensors(model, edit=lambda h, d: h["wpe.weight"].update(dtype="I8")),
        "bad_missing_data_offsets": safetensors(model, edit=lambda h, d: h["ln_f.bias"].pop("data_offsets")),
        "bad_missing_shape": safetensors(model, edit=lambda h, d: h["ln_f.bias"].pop("shape")),
        "bad_inverted_offsets": container('{"wte.weight":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}}', bytes(8)),
        "bad_offsets_past_end": safetensors(
            model, edit=lambda h, d: h["wte.weight"].update(data_offsets=[len(d) - 16, len(d) + 16])),
        "bad_offsets_size_mismatch": safetensors(model, edit=lambda h, d: h["ln_f.bias"].update(shape=[C + 1])),
        "bad_overlapping_offsets": container(
            '{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},'
            '"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', bytes(16)),
        "bad_gap_between_tensors": container(
            '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
            '"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}', bytes(20)),
        "bad_trailing_bytes": ok + b"\x00" * 8,
        "bad_shape_overflow": container(
            '{"wte.weight":{"dtype":"F32","shape":[2, 18446744073709551614],"data_offsets":[0,0]}}', b""),
        "bad_shape_product_wraps": container(
            '{"wte.weight":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,0]}}', b""),
        "bad_negative_dim": safetensors(model, edit=lambda h, d: h["ln_f.bias"].update(shape=[-C])),
        "bad_fractional_dim": container('{"wte.weight":{"dtype":"F32","shape":[2.5],"data_offsets":[0,10]}}', bytes(10)),
        "bad_string_dim": container('{"wte.weight":{"dtype":"F32","shape":["8"],"data_offsets":[0,32]}}', bytes(32)),
        "bad_proto_tensor_name": safetensors(model + [("__proto__", [1], [0.0])]),
        "bad_control_char_name": container('{"wte\\n.weight":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}', b""),
        "bad_wrong_architecture_llama": safetensors(
            [("model.embed_tokens.weight", [V, C], [0.0] * (V * C)), ("model.norm.weight", [C], [1.0] * C)]),
        "bad_wrong_size": safetensors(gpt2_tensors(n_embd=2 * C)),
        "bad_missing_layer": safetensors([t for t in model if not t[0].startswith(f"h.{L - 1}.")]),
        "bad_same_parameter_twice": safetensors(model + [("transformer.wpe.weight", [T, C], [0.0] * (T * C))]),
        "bad_untied_lm_head": safetensors(model + [("lm_head.weight", [V, C], [0.5] * (V * C))]),
        "bad_nan_weight_f32": safetensors(with_value(model, "h.0.mlp.c_fc.weight", 37, float("nan"))),
        "bad_inf_weight_f16": safetensors(with_value(model, "wte.weight", 5, float("inf")), dtype="F16"),
        "bad_neg_inf_weight_bf16": safetensors(with_value(model, "h.1.attn.c_proj.weight", 9, float("-inf")),
                                               dtype="BF16"),
    }
    for n in range(8):  # too short to hold the header length
        seeds[f"bad_{n}_byte_file"] = ok[:n]
    return seeds


def config_seeds():
    hf = {  # openai-community/gpt2's config.json, with the fuzz model's sizes
        "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
        "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": C,
        "n_head": CONFIG["n_head"], "n_layer": L, "n_positions": T, "resid_pdrop": 0.1,
        "summary_activation": None, "summary_first_dropout": 0.1, "summary_proj_to_labels": True,
        "summary_type": "cls_index", "summary_use_proj": True,
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}}, "vocab_size": V}
    only_n_ctx = {k: v for k, v in hf.items() if k != "n_positions"}
    seeds = {
        "ok_fuzz_model": json.dumps(CONFIG),
        "ok_hf_gpt2_layout": json.dumps(hf, indent=2),
        "ok_n_ctx_only": json.dumps(only_n_ctx),
        "ok_unicode_and_escapes": json.dumps(dict(CONFIG, note="caf\u00e9 \U0001F600 \"q\" \\ \t"), ensure_ascii=True),
        "bad_empty": "",
        "bad_not_json": "vocab_size = 32\n",
        "bad_truncated": json.dumps(hf)[:100],
        "bad_top_level_array": "[32, 8, 8, 2, 2]",
        "bad_missing_vocab_size": json.dumps({k: v for k, v in CONFIG.items() if k != "vocab_size"}),
        "bad_string_n_embd": json.dumps(dict(CONFIG, n_embd="8")),
        "bad_fractional_n_head": json.dumps(dict(CONFIG, n_head=2.5)),
        "bad_zero_n_layer": json.dumps(dict(CONFIG, n_layer=0)),
        "bad_huge_vocab_size": json.dumps(dict(CONFIG, vocab_size=2 ** 40)),
        "bad_n_head_not_dividing": json.dumps(dict(CONFIG, n_head=3)),
        "bad_n_inner": json.dumps(dict(CONFIG, n_inner=3 * C)),
        "bad_negative_epsilon": json.dumps(dict(CONFIG, layer_norm_epsilon=-1e-5)),
        "bad_duplicate_key": json.dumps(CONFIG)[:-1] + ', "n_embd": 16}',
        "bad_lone_surrogate": json.dumps(CONFIG)[:-1] + ', "x": "\\ud800"}',
        "bad_duplicate_key_with_newline": json.dumps(CONFIG)[:-1] + ', "a\\nb": 1, "a\\nb": 2}',
        "bad_trailing_garbage": json.dumps(CONFIG) + " }",
        "bad_too_deep": "{\"a\":" * 80 + "1" + "}" * 80,
        "bad_wrong_sizes_for_the_weights": json.dumps(dict(CONFIG, n_embd=2 * C, n_head=2)),
    }
    return seeds


def main():
    for directory, seeds, ext in ((LOADER_DIR, loader_seeds(), ".safetensors"), (CONFIG_DIR, config_seeds(), ".json")):
        os.makedirs(directory, exist_ok=True)
        for old in os.listdir(directory):
            if old.startswith(("ok_", "bad_")):
                os.remove(os.path.join(directory, old))
        for name, content in seeds.items():
            write(directory, name + ext, content)
    total = sum(os.path.getsize(os.path.join(d, f)) for d in (LOADER_DIR, CONFIG_DIR) for f in os.listdir(d))
    print(f"wrote {len(os.listdir(LOADER_DIR))} loader and {len(os.listdir(CONFIG_DIR))} config seeds, {total} bytes")


if __name__ == "__main__":
    main()
