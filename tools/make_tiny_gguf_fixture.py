#!/usr/bin/python3
"""Writes tests/fixtures/tiny-random-gguf/: the tiny-random fixture model (tests/fixtures/tiny-random, 384 token
ids) as GGUF files, with a tokenizer of its size, for the JavaScript tests of GGUF loading (tests/js/gguf.test.js)
and the page's (tests/e2e/gguf.spec.js).

- vocab.json, merges.txt: GPT-2's first 383 tokens (the 256 byte tokens, then the results of GPT-2's first 127
  merges, which only use tokens made before them) and <|endoftext|> as id 383; the first 127 lines of GPT-2's
  merges.txt. With tiny-random's config.json and model.safetensors they make the same model as a folder.
- model-f32.gguf, model-q8_0.gguf: tools/convert_to_gguf.py of that folder (eos and bos: id 383). The F32 file
  holds exactly the safetensors weights, so both give the same tokens.

    /usr/bin/python3 tools/make_tiny_gguf_fixture.py [--out DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "fixtures", "tiny-random")
GPT2_VOCAB = os.path.join(ROOT, "tests", "fixtures", "gpt2-vocab")
N_VOCAB = 384
END_OF_TEXT = "<|endoftext|>"
TYPES = ["f32", "q8_0"]


def tiny_tokenizer():
    """(vocab.json object, merges.txt text) of N_VOCAB tokens."""
    with open(os.path.join(GPT2_VOCAB, "vocab.json"), encoding="utf-8") as f:
        gpt2_vocab = json.load(f)
    with open(os.path.join(GPT2_VOCAB, "merges.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    vocab = {token: i for token, i in gpt2_vocab.items() if i < N_VOCAB - 1}
    vocab[END_OF_TEXT] = N_VOCAB - 1
    merges = lines[: N_VOCAB - 1 - 256]
    for merge in merges:  # every merge's result is one of the tokens kept
        if merge.replace(" ", "") not in vocab:
            raise ValueError(f"merge {merge!r} makes a token outside the first {N_VOCAB - 1}")
    return vocab, "#version: 0.2\n" + "\n".join(merges) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tiny-random-gguf"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    vocab, merges = tiny_tokenizer()
    with open(os.path.join(args.out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(args.out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write(merges)
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(TINY, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
        config.update(eos_token_id=N_VOCAB - 1, bos_token_id=N_VOCAB - 1)
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f)
        shutil.copy(os.path.join(TINY, "model.safetensors"), folder)
        for name in ["vocab.json", "merges.txt"]:
            shutil.copy(os.path.join(args.out, name), folder)
        for type_ in TYPES:
            out = os.path.join(args.out, f"model-{type_}.gguf")
            subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert_to_gguf.py"), folder, "--type", type_,
                            "--name", "tiny-random", "-o", out], check=True)


if __name__ == "__main__":
    main()
