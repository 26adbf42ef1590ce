"""Exports a GPT-2 model folder (Hugging Face layout) to ONNX with an explicit KV cache, for the benchmark's
onnxruntime-web runtime (tools/bench/ort_runner.mjs), and verifies the exported file against our engine.

Tools only: needs Debian's python3-torch (1.13) and NumPy; neither CI nor npm test runs it.

    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.convert.export_onnx                       # build/models/gpt2-124m-random -> build/onnx/gpt2-124m-random/decoder.onnx
    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.convert.export_onnx --model DIR --out FILE.onnx [--verify-only]

The graph (opset 14, fp32):
  inputs   input_ids [1, seq] int64, position_ids [1, seq] int64,
           past_key_<i>, past_value_<i> [1, n_head, past, head_dim] float32 for each layer i (past may be 0)
  outputs  logits [1, n_vocab] of the last input token,
           present_key_<i>, present_value_<i> [1, n_head, past + seq, head_dim]
with dynamic seq and past, so one file serves the batched prefill (past 0) and every one-token decode step.
The weight matrices keep GPT-2's [in, out] layout (x @ W, a MatMul on a constant, as Hugging Face exports
do); the LM head gets its own transposed copy of wte for the same reason, so the file holds wte twice.

Verification (always, after exporting): the prompt's first half is prefilled in one call, the rest is fed one
token per call against the returned cache, and the last-token logits of every call are compared with
`build/native/gpt2 --dump-logits` on the whole prompt, for the PyTorch module and for the ONNX file run by
onnxruntime-web in Node (tools/bench/ort_logits.mjs: the runtime the benchmark uses; Debian has no Python
onnxruntime). Prints the max absolute differences; exits non-zero above --tolerance.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

from gpt2tools import REPO
from gpt2tools.safetensors_io import load_safetensors

DEFAULT_MODEL = os.path.join(REPO, "build", "models", "gpt2-124m-random")
OPSET = 14
# A fixed prompt of ordinary GPT-2 ids ("The quick brown fox jumps over the lazy dog. It was a sunny day").
VERIFY_PROMPT = [464, 2068, 7586, 21831, 18045, 625, 262, 16931, 3290, 13, 632, 373, 257, 27737, 1110]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=DEFAULT_MODEL, help="folder with config.json and model.safetensors")
    p.add_argument("--out", help="ONNX file to write (default: build/onnx/<model folder name>/decoder.onnx)")
    p.add_argument("--verify-only", action="store_true", help="check an existing --out file, do not export")
    p.add_argument("--tolerance", type=float, default=1e-3, help="max absolute logit difference accepted")
    args = p.parse_args()
    if args.out is None:
        args.out = os.path.join(REPO, "build", "onnx", os.path.basename(os.path.normpath(args.model)), "decoder.onnx")
    return args


def fail(message):
    print(f"export_onnx: {message}", file=sys.stderr)
    sys.exit(1)


class GPT2WithCache(torch.nn.Module):
    """GPT-2 (pre-LN blocks, tanh GELU, tied LM head) whose forward takes and returns the KV cache."""

    def __init__(self, config, tensors):
        super().__init__()
        self.n_layer, self.n_head, self.n_embd = config["n_layer"], config["n_head"], config["n_embd"]
        self.eps = config.get("layer_norm_epsilon", 1e-5)
        if config.get("activation_function", "gelu_new") != "gelu_new":
            raise ValueError(f"unsupported activation_function {config['activation_function']!r}")
        # Some exports prefix every name with "transformer."; the layout is otherwise the same.
        tensors = {name.removeprefix("transformer."): value for name, value in tensors.items()}
        missing = [name for name in self._names() if name not in tensors]
        if missing:
            raise ValueError(f"model.safetensors lacks {', '.join(missing[:5])}{' …' if len(missing) > 5 else ''}")
        self.weights = torch.nn.ParameterDict({
            name.replace(".", "_"): torch.nn.Parameter(torch.from_numpy(tensors[name]), requires_grad=False)
            for name in self._names()})
        # A contiguous [n_embd, n_vocab] copy: the LM head becomes a MatMul on a constant, like the other layers.
        self.lm_head = torch.nn.Parameter(self.weights["wte_weight"].detach().t().contiguous(), requires_grad=False)
        n_positions = config["n_positions"]
        # The causal mask of the new tokens against past + new keys is a slice of this (as in Hugging Face's GPT-2).
        self.register_buffer("causal", torch.tril(torch.ones(n_positions, n_positions, dtype=torch.bool)), persistent=False)

    def _names(self):
        names = ["wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"]
        for i in range(self.n_layer):
            for part in ["ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"]:
                names += [f"h.{i}.{part}.weight", f"h.{i}.{part}.bias"]
        return names

    def w(self, name):
        return self.weights[name.replace(".", "_")]

    def layer_norm(self, x, prefix):
        return torch.nn.functional.layer_norm(x, (self.n_embd,), self.w(prefix + ".weight"), self.w(prefix + ".bias"), self.eps)

    def linear(self, x, prefix):
        return x @ self.w(prefix + ".weight") + self.w(prefix + ".bias")

    def forward(self, input_ids, position_ids, *past):
        seq = input_ids.shape[1]
        head_dim = self.n_embd // self.n_head
        x = self.w("wte.weight")[input_ids] + self.w("wpe.weight")[position_ids]
        presents = []
        for i in range(self.n_layer):
            h = self.layer_norm(x, f"h.{i}.ln_1")
            q, k, v = self.linear(h, f"h.{i}.attn.c_attn").split(self.n_embd, dim=2)
            q, k, v = (t.view(1, seq, self.n_head, head_dim).transpose(1, 2) for t in (q, k, v))
            k = torch.cat([past[2 * i], k], dim=2)
            v = torch.cat([past[2 * i + 1], v], dim=2)
            presents += [k, v]
            total = k.shape[2]
            scores = (q @ k.transpose(2, 3)) / float(head_dim) ** 0.5
            mask = self.causal[total - seq:total, :total]
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            attended = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(1, seq, self.n_embd)
            x = x + self.linear(attended, f"h.{i}.attn.c_proj")
            h = self.layer_norm(x, f"h.{i}.ln_2")
            x = x + self.linear(torch.nn.functional.gelu(self.linear(h, f"h.{i}.mlp.c_fc"), approximate="tanh"), f"h.{i}.mlp.c_proj")
        last = self.layer_norm(x[:, -1, :], "ln_f")
        return (last @ self.lm_head, *presents)

    def empty_past(self):
        shape = (1, self.n_head, 0, self.n_embd // self.n_head)
        return [torch.zeros(shape) for _ in range(2 * self.n_layer)]


def input_names(n_layer):
    return ["input_ids", "position_ids"] + [f"past_{kind}_{i}" for i in range(n_layer) for kind in ("key", "value")]


def output_names(n_layer):
    return ["logits"] + [f"present_{kind}_{i}" for i in range(n_layer) for kind in ("key", "value")]


def export(model, path):
    n_layer = model.n_layer
    # Traced with a past of 2 and 3 new tokens so that no size is 1 or 0 (the tracer would specialize on them).
    ids = torch.tensor([[464, 2068, 7586]], dtype=torch.int64)
    positions = torch.tensor([[2, 3, 4]], dtype=torch.int64)
    past = [torch.zeros(1, model.n_head, 2, model.n_embd // model.n_head) for _ in range(2 * n_layer)]
    dynamic = {"input_ids": {1: "seq"}, "position_ids": {1: "seq"}}
    for i in range(n_layer):
        for kind in ("key", "value"):
            dynamic[f"past_{kind}_{i}"] = {2: "past"}
            dynamic[f"present_{kind}_{i}"] = {2: "past_plus_seq"}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model, (ids, positions, *past), path, input_names=input_names(n_layer),
                          output_names=output_names(n_layer), dynamic_axes=dynamic, opset_version=OPSET,
                          do_constant_folding=True)


def torch_cached_logits(model, prompt, n_prefill):
    """Last-token logits of the prefill of prompt[:n_prefill], then of each later token fed alone."""
    rows = []
    past = model.empty_past()
    position = 0
    with torch.no_grad():
        for chunk in [prompt[:n_prefill]] + [[token] for token in prompt[n_prefill:]]:
            ids = torch.tensor([chunk], dtype=torch.int64)
            positions = torch.arange(position, position + len(chunk), dtype=torch.int64)[None]
            logits, *past = model(ids, positions, *past)
            rows.append(logits[0].numpy())
            position += len(chunk)
    return np.stack(rows)


def engine_logits(model_dir, prompt, n_vocab, scratch):
    gpt2 = os.path.join(REPO, "build", "native", "gpt2")
    if not os.path.exists(gpt2):
        fail(f"{gpt2} is missing (run npm run build)")
    path = os.path.join(scratch, "engine.f32")
    result = subprocess.run([gpt2, "--model", model_dir, "--ids", ",".join(map(str, prompt)), "-n", "1",
                             "--kv-cache", "fp32", "--dump-logits", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        fail(f"build/native/gpt2 --dump-logits failed: {result.stderr.strip()}")
    return np.fromfile(path, dtype="<f4").reshape(len(prompt), n_vocab)


def onnx_logits(model_dir, onnx_path, prompt, n_prefill, n_vocab, scratch):
    path = os.path.join(scratch, "onnx.f32")
    script = os.path.join(REPO, "tools", "bench", "ort_logits.mjs")
    result = subprocess.run(["node", script, model_dir, onnx_path, str(n_prefill), ",".join(map(str, prompt)), path],
                            stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        fail(f"onnxruntime-web could not run {onnx_path}: {result.stderr.strip()}")
    return np.fromfile(path, dtype="<f4").reshape(-1, n_vocab)


def main():
    args = parse_args()
    torch.set_num_threads(1)  # the machines are shared
    with open(os.path.join(args.model, "config.json")) as f:
        config = json.load(f)
    model = GPT2WithCache(config, load_safetensors(os.path.join(args.model, "model.safetensors"))).eval()
    if args.verify_only:
        if not os.path.exists(args.out):
            fail(f"{args.out} does not exist (export it: drop --verify-only)")
    else:
        export(model, args.out)
        print(f"wrote {os.path.relpath(args.out)} ({os.path.getsize(args.out) / 2 ** 20:.1f} MiB)")

    prompt = [token % config["vocab_size"] for token in VERIFY_PROMPT]
    n_prefill = len(prompt) // 2
    with tempfile.TemporaryDirectory() as scratch:
        # Row n_prefill - 1 is the prefill's last token; each later row is one cached step.
        expected = engine_logits(args.model, prompt, config["vocab_size"], scratch)[n_prefill - 1:]
        torch_diff = np.abs(torch_cached_logits(model, prompt, n_prefill) - expected).max()
        onnx_diff = np.abs(onnx_logits(args.model, args.out, prompt, n_prefill, config["vocab_size"], scratch) - expected).max()
    print(f"max |logit difference| vs build/native/gpt2 over {len(expected)} positions (prefill {n_prefill} tokens, "
          f"then 1 per step): PyTorch {torch_diff:.2e}, ONNX in onnxruntime-web {onnx_diff:.2e} "
          f"(tolerance {args.tolerance:g})")
    if not (torch_diff <= args.tolerance and onnx_diff <= args.tolerance):
        fail("logits differ beyond the tolerance")


if __name__ == "__main__":
    main()
