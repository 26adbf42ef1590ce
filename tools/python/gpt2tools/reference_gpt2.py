"""Independent float64 NumPy reference of the GPT-2 forward pass, written from the model's math.

It shares no code with the C++ engine on purpose: the engine's parity tests compare against logits this
script produces, so a bug would have to be made twice, independently, to go unnoticed.

Reads a Hugging Face GPT-2 folder (config.json + model.safetensors, openai-community/gpt2 tensor names).
No KV cache: every call recomputes the whole sequence, which is the simplest thing that is obviously right.

usage: PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.reference_gpt2 --model DIR --ids 1,2,3 [--n-new 20] [--dump-logits FILE]
"""
import argparse
import json
import math
import os

import numpy as np

from gpt2tools.safetensors_io import load_safetensors


class ReferenceGPT2:
    def __init__(self, config, tensors):
        self.n_vocab = config["vocab_size"]
        self.n_positions = config["n_positions"]
        self.n_embd = config["n_embd"]
        self.n_head = config["n_head"]
        self.n_layer = config["n_layer"]
        self.eps = config.get("layer_norm_epsilon", 1e-5)
        if config.get("activation_function", "gelu_new") != "gelu_new":
            raise ValueError(f"unsupported activation_function {config['activation_function']!r}")
        # Some exports prefix every name with "transformer."; the layout is otherwise the same.
        tensors = {name.removeprefix("transformer."): value for name, value in tensors.items()}
        self.weights = {name: value.astype(np.float64) for name, value in tensors.items()
                        if name in ("wte.weight", "wpe.weight", "lm_head.weight") or name.startswith(("h.", "ln_f."))}
        self._check_shapes()

    @classmethod
    def from_folder(cls, model_dir, weights_file="model.safetensors"):
        with open(os.path.join(model_dir, "config.json")) as f:
            config = json.load(f)
        return cls(config, load_safetensors(os.path.join(model_dir, weights_file)))

    def _check_shapes(self):
        d, v, p = self.n_embd, self.n_vocab, self.n_positions
        expected = {"wte.weight": (v, d), "wpe.weight": (p, d), "ln_f.weight": (d,), "ln_f.bias": (d,)}
        if "lm_head.weight" in self.weights:
            expected["lm_head.weight"] = (v, d)
        for i in range(self.n_layer):
            expected.update({
                f"h.{i}.ln_1.weight": (d,), f"h.{i}.ln_1.bias": (d,),
                f"h.{i}.attn.c_attn.weight": (d, 3 * d), f"h.{i}.attn.c_attn.bias": (3 * d,),
                f"h.{i}.attn.c_proj.weight": (d, d), f"h.{i}.attn.c_proj.bias": (d,),
                f"h.{i}.ln_2.weight": (d,), f"h.{i}.ln_2.bias": (d,),
                f"h.{i}.mlp.c_fc.weight": (d, 4 * d), f"h.{i}.mlp.c_fc.bias": (4 * d,),
                f"h.{i}.mlp.c_proj.weight": (4 * d, d), f"h.{i}.mlp.c_proj.bias": (d,),
            })
        if d % self.n_head != 0:
            raise ValueError(f"n_embd {d} is not a multiple of n_head {self.n_head}")
        for name, shape in expected.items():
            if name not in self.weights:
                raise ValueError(f"missing tensor {name}")
            if self.weights[name].shape != shape:
                raise ValueError(f"{name}: shape {self.weights[name].shape}, expected {shape}")

    def layer_norm(self, x, prefix):
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as in torch.nn.LayerNorm
        normalized = (x - mean) / np.sqrt(variance + self.eps)
        return normalized * self.weights[prefix + ".weight"] + self.weights[prefix + ".bias"]

    @staticmethod
    def gelu_tanh(x):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def linear(self, x, prefix):
        # GPT-2's Conv1D stores weights as [in, out]: y = x @ W + b.
        return x @ self.weights[prefix + ".weight"] + self.weights[prefix + ".bias"]

    def attention(self, x, prefix):
        n_tokens = x.shape[0]
        head_dim = self.n_embd // self.n_head
        qkv = self.linear(x, prefix + ".c_attn")
        q, k, v = np.split(qkv, 3, axis=-1)  # [q | k | v], each n_embd wide
        # Heads are contiguous head_dim-wide slices: [T, n_embd] -> [n_head, T, head_dim].
        q, k, v = (m.reshape(n_tokens, self.n_head, head_dim).transpose(1, 0, 2) for m in (q, k, v))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(head_dim)
        future = np.triu(np.ones((n_tokens, n_tokens), dtype=bool), k=1)
        scores = np.where(future, -np.inf, scores)
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        heads = probs @ v  # [n_head, T, head_dim]
        merged = heads.transpose(1, 0, 2).reshape(n_tokens, self.n_embd)
        return self.linear(merged, prefix + ".c_proj")

    def mlp(self, x, prefix):
        return self.linear(self.gelu_tanh(self.linear(x, prefix + ".c_fc")), prefix + ".c_proj")

    def logits(self, ids):
        """Returns float64 logits [len(ids), n_vocab] for every position of `ids`."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or len(ids) == 0:
            raise ValueError("ids must be a non-empty 1-D sequence")
        if len(ids) > self.n_positions:
            raise ValueError(f"{len(ids)} tokens exceed n_positions {self.n_positions}")
        if ids.min() < 0 or ids.max() >= self.n_vocab:
            raise ValueError(f"token ids must be in [0, {self.n_vocab})")
        h = self.weights["wte.weight"][ids] + self.weights["wpe.weight"][: len(ids)]
        for i in range(self.n_layer):
            h = h + self.attention(self.layer_norm(h, f"h.{i}.ln_1"), f"h.{i}.attn")
            h = h + self.mlp(self.layer_norm(h, f"h.{i}.ln_2"), f"h.{i}.mlp")
        # the LM head: tied to wte unless the file has its own (a GGUF file's output.weight, via gguf_to_safetensors)
        return self.layer_norm(h, "ln_f") @ self.weights.get("lm_head.weight", self.weights["wte.weight"]).T

    def greedy(self, prompt, n_new):
        """Greedy continuation of `prompt`, recomputing the full sequence at every step (no cache)."""
        ids = list(prompt)
        generated = []
        for _ in range(n_new):
            if len(ids) >= self.n_positions:
                break
            # argmax takes the lowest id on exact ties, the rule the engine is expected to follow too.
            next_id = int(np.argmax(self.logits(ids)[-1]))
            ids.append(next_id)
            generated.append(next_id)
        return generated


def write_logits_f32(path, logits):
    """Writes logits as little-endian float32, row-major [n_tokens, n_vocab], no header."""
    np.asarray(logits, dtype="<f4").tofile(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="folder with config.json and model.safetensors")
    parser.add_argument("--weights", default="model.safetensors", help="weights file inside --model")
    parser.add_argument("--ids", required=True, help="comma-separated prompt token ids, e.g. 1,2,3")
    parser.add_argument("--n-new", type=int, default=20, help="number of greedy tokens to generate")
    parser.add_argument("--dump-logits", metavar="FILE",
                        help="write the prompt's logits as little-endian float32 [n_prompt, n_vocab]")
    args = parser.parse_args()

    prompt = [int(token) for token in args.ids.split(",") if token.strip()]
    model = ReferenceGPT2.from_folder(args.model, args.weights)
    if args.dump_logits:
        write_logits_f32(args.dump_logits, model.logits(prompt))
    print(",".join(str(token) for token in model.greedy(prompt, args.n_new)))


if __name__ == "__main__":
    main()
