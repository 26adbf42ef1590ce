"""Prints, as JSON, what one decode step of a GPT-2 GGUF file reads from its weight matrices, for the benchmark's
bandwidth figures (tools/bench/bench.mjs): {"decode_bytes": bytes of every 2-D tensor but position_embd (one row of
it is read per token), "types": {ggml type: number of those tensors}}. Without output.weight, token_embd is also the LM
head and is read whole every step; with it, only a row of token_embd is read, and output.weight counts instead.

    PYTHONPATH=tools/python /usr/bin/python3 tools/bench/gguf_decode_bytes.py FILE.gguf
"""
import json
import sys

from gpt2tools.gguf_io import read_gguf


def main():
    _, tensors = read_gguf(sys.argv[1])
    matrices = {name: info for name, info in tensors.items() if len(info["ne"]) == 2 and name != "position_embd.weight"}
    if "output.weight" in matrices:
        del matrices["token_embd.weight"]
    types = {}
    for info in matrices.values():
        types[info["type"]] = types.get(info["type"], 0) + 1
    print(json.dumps({"decode_bytes": sum(len(info["data"]) for info in matrices.values()), "types": types}))


if __name__ == "__main__":
    main()
