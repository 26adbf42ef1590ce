#!/usr/bin/env python3
"""Writes the GGUF reader's fuzz seeds (pure Python), written from ggml's docs/gguf.md:

  corpus/gguf/ok_*.gguf    valid GPT-2 GGUF files: the reader must read them (ok_gpt2_model is a whole model)
  corpus/gguf/bad_*.gguf   malformed files: tests/cpp/test_gguf.cpp lists the message for every one

Small on purpose (a few hundred bytes to 12 KB) so that the fuzzer mutates quickly. Deterministic: rerunning it
rewrites identical files. Usage: python3 tests/fuzz/make_gguf_corpus.py
"""
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "gguf")
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
F32_T, F16_T, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K = 0, 1, 2, 3, 6, 7, 8, 12, 13, 14
BLOCK = {F32_T: (1, 4), F16_T: (1, 2), Q4_0: (32, 18), Q4_1: (32, 20), Q5_0: (32, 22), Q5_1: (32, 24),
         Q8_0: (32, 34), Q4_K: (256, 144), Q5_K: (256, 176), Q6_K: (256, 210)}


def string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return string(key) + struct.pack("<I", vtype) + payload


def u32(key, v):
    return kv(key, U32, struct.pack("<I", v))


def strings(key, values):
    return kv(key, ARRAY, struct.pack("<IQ", STRING, len(values)) + b"".join(string(v) for v in values))


def gpt2_metadata(arch="gpt2"):
    return [
        kv("general.architecture", STRING, string(arch)),
        u32("gpt2.context_length", 8), u32("gpt2.embedding_length", 32), u32("gpt2.block_count", 1),
        u32("gpt2.attention.head_count", 2), kv("gpt2.attention.layer_norm_epsilon", F32, struct.pack("<f", 1e-5)),
        u32("gpt2.feed_forward_length", 128), kv("general.file_type", U32, struct.pack("<I", 7)),
        kv("general.quantized", BOOL, b"\x01"), kv("general.scale", F64, struct.pack("<d", 0.5)),
        kv("tokenizer.ggml.model", STRING, string("gpt2")),
        strings("tokenizer.ggml.tokens", ["a", "b", "ab", "<|endoftext|>"]),
        kv("tokenizer.ggml.token_type", ARRAY, struct.pack("<IQ", I32, 4) + struct.pack("<4i", 1, 1, 1, 3)),
        strings("tokenizer.ggml.merges", ["a b"]),
        u32("tokenizer.ggml.bos_token_id", 3), u32("tokenizer.ggml.eos_token_id", 3),
    ]


def model_bytes(ttype, count, seed):
    """Plausible values for a model seed: small finite F32, F16 0.0078, and blocks whose fp16 scales (the
    leading d, and m for Q4_1/Q5_1) are 0.0078 with patterned quants, so that the model loads and generates."""
    if ttype == F32_T:
        return struct.pack(f"<{count}f", *(((seed * 7 + k * 13) % 17 - 8) / 64 for k in range(count)))
    if ttype == F16_T:
        return b"\x00\x20" * count
    values, size = BLOCK[ttype]
    scales = 4 if ttype in (Q4_1, Q5_1) else 2
    block = b"\x00\x20" * (scales // 2) + bytes((seed * 31 + 7 * k) % 251 for k in range(size - scales))
    return block * (count // values)


def gguf(metadata, tensors, version=3, alignment=32, data_of=None):
    """tensors: (name, ne, type); bytes are patterned (or data_of(type, count, index)), offsets back to back
    padded to alignment."""
    pad = lambda n: (n + alignment - 1) // alignment * alignment
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata)) + b"".join(metadata)
    data, infos = b"", b""
    for i, (name, ne, ttype) in enumerate(tensors):
        count = 1
        for d in ne:
            count *= d
        values, size = BLOCK[ttype]
        nbytes = count // values * size
        infos += string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
        infos += struct.pack("<IQ", ttype, len(data))
        data += data_of(ttype, count, i) if data_of else bytes((i * 31 + 7 * k) % 251 for k in range(nbytes))
        data += b"\0" * (pad(len(data)) - len(data))
    out += infos
    return out + b"\0" * (pad(len(out)) - len(out)) + data


def main():
    os.makedirs(OUT, exist_ok=True)
    every_type = [(f"t.{t}", [256], t) for t in BLOCK]
    seeds = {
        "ok_tiny_gpt2": gguf(gpt2_metadata(), [("token_embd.weight", [32, 4], Q8_0), ("output_norm.weight", [32], F32_T)]),
        "ok_every_type": gguf(gpt2_metadata(), every_type),
        "ok_no_tensors": gguf(gpt2_metadata(), []),
        "ok_alignment_64": gguf(gpt2_metadata() + [u32("general.alignment", 64)],
                                [("a", [64], F16_T), ("b", [32], Q4_0)], alignment=64),
        "bad_version_2": gguf(gpt2_metadata(), [], version=2),
        "bad_llama": gguf(gpt2_metadata("llama"), []),
    }
    # a whole model (embedding 32, 1 block, 4 tokens) whose matrices use the 32-value block types: the reader,
    # the weights' placement and a forward pass
    model = [("token_embd.weight", [32, 4], Q8_0), ("position_embd.weight", [32, 8], F32_T)]
    for norm in ("attn_norm", "ffn_norm"):
        model += [(f"blk.0.{norm}.weight", [32], F32_T), (f"blk.0.{norm}.bias", [32], F16_T)]
    for name, n_in, n_out, ttype in (("attn_qkv", 32, 96, Q4_0), ("attn_output", 32, 32, Q5_1),
                                     ("ffn_up", 32, 128, Q4_1), ("ffn_down", 128, 32, Q5_0)):
        model += [(f"blk.0.{name}.weight", [n_in, n_out], ttype), (f"blk.0.{name}.bias", [n_out], F32_T)]
    model += [("output_norm.weight", [32], F32_T), ("output_norm.bias", [32], F32_T),
              ("output.weight", [32, 4], F16_T)]
    seeds["ok_gpt2_model"] = gguf(gpt2_metadata(), model, data_of=model_bytes)
    # an unsupported type: Q2_K (10), written by hand since the writer needs a block size
    q2k = gguf(gpt2_metadata(), [("x", [256], F32_T)])
    seeds["bad_q2_k"] = q2k.replace(string("x") + struct.pack("<IQI", 1, 256, F32_T),
                                    string("x") + struct.pack("<IQI", 1, 256, 10))
    seeds["bad_truncated"] = seeds["ok_tiny_gpt2"][:-40]
    for name, data in seeds.items():
        with open(os.path.join(OUT, name + ".gguf"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
