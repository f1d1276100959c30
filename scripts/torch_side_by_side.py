#!/usr/bin/python3
"""The PyTorch side of scripts/torch_side_by_side.sh: a LLaMA-family model in plain PyTorch eager
(written here from the HF LLaMA math: RMSNorm, RoPE with rotate-half, grouped-query attention,
SwiGLU, an untied head), loaded from a model directory meshtrain also loads, so that both programs
can be checked on the same weights and batch before either is timed.

  torch_side_by_side.py loss MODEL_DIR SHARD BATCH SEQ
      prints the fp32 mean loss of the batch (the first BATCH x SEQ + 1 tokens of SHARD, llm.c's
      token-shard format as scripts/llmc_inputs.py writes it; row b reads tokens [b SEQ, (b + 1) SEQ)
      and predicts the next token of each, as `meshtrain eval` does).

  torch_side_by_side.py time MODEL_DIR SHARD BATCH SEQ STEPS full|lora RANK bf16|fp32
      trains on that batch in bf16 mixed precision (torch.autocast on the CPU: the matrix products
      in bf16, the weights, AdamW's moments and the norms' statistics in f32, as meshtrain's bf16
      mixed) or in fp32, gradient norm clipped at 1.0, AdamW (foreach); `lora` freezes the base and trains
      rank-RANK adapters (alpha 2 RANK) on q, k, v, o, gate, up and down as meshtrain bench does.
      One warm-up step, then STEPS timed steps; prints ms/step (their mean), tokens/s and the
      process's peak RSS.

Threads: torch.set_num_threads(OMP_NUM_THREADS) (default: every core).
"""
import json
import math
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from family_reference import read_safetensors
except ImportError as e:
    sys.exit(f"torch_side_by_side: {e} (apt-get install python3-torch python3-numpy)")

SHARD_HEADER_BYTES = 256 * 4


def read_batch(shard, batch, seq):
    ids = np.fromfile(shard, dtype="<u2", offset=SHARD_HEADER_BYTES).astype(np.int64)
    need = batch * seq + 1
    if ids.size < need:
        sys.exit(f"torch_side_by_side: {shard} holds {ids.size} tokens, {need} are needed")
    ids = torch.from_numpy(ids[:need])
    return ids[:-1].view(batch, seq), ids[1:].view(batch, seq)


class Adapter(torch.nn.Module):
    """y = x W^T + (alpha / r) B A x: A random, B zero (PEFT's initialisation)."""

    def __init__(self, base, rank):
        super().__init__()
        self.base = base
        self.scale = 2.0  # alpha = 2 rank
        self.A = torch.nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
        self.B = torch.nn.Parameter(torch.zeros(base.out_features, rank))

    def forward(self, x):
        return self.base(x) + self.scale * F.linear(F.linear(x, self.A), self.B)


class RMSNorm(torch.nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()  # the statistics in f32 under autocast too, as HF's LlamaRMSNorm
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * y.to(x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, I = cfg["hidden_size"], cfg["intermediate_size"]
        self.H, self.KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
        self.D = cfg.get("head_dim") or C // self.H
        lin = lambda i, o: torch.nn.Linear(i, o, bias=False)
        self.q, self.k, self.v = lin(C, self.H * self.D), lin(C, self.KV * self.D), lin(C, self.KV * self.D)
        self.o = lin(self.H * self.D, C)
        self.gate, self.up, self.down = lin(C, I), lin(C, I), lin(I, C)
        self.norm1 = RMSNorm(C, cfg["rms_norm_eps"])
        self.norm2 = RMSNorm(C, cfg["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        B, T, _ = x.shape
        n = self.norm1(x)
        q = self.q(n).view(B, T, self.H, self.D).transpose(1, 2)
        k = self.k(n).view(B, T, self.KV, self.D).transpose(1, 2)
        v = self.v(n).view(B, T, self.KV, self.D).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.H // self.KV  # kv head j serves query heads [j rep, (j + 1) rep)
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.D) + mask
        p = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        a = torch.matmul(p, v).transpose(1, 2).reshape(B, T, self.H * self.D)
        x = x + self.o(a)
        n = self.norm2(x)
        return x + self.down(F.silu(self.gate(n)) * self.up(n))


class Llama(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = torch.nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.blocks = torch.nn.ModuleList(Block(cfg) for _ in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.head = torch.nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)

    def forward(self, ids):
        T = ids.shape[1]
        D = self.blocks[0].D
        inv = 1.0 / (self.cfg.get("rope_theta", 10000.0) ** (torch.arange(0, D, 2, dtype=torch.float32) / D))
        ang = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        emb = torch.cat((ang, ang), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((T, T), float("-inf")).triu(1)
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return self.head(self.norm(x))


def load(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") != "llama" or cfg.get("tie_word_embeddings"):
        sys.exit(f"torch_side_by_side: {model_dir} is not an untied llama model")
    if cfg.get("rope_scaling"):
        sys.exit(f"torch_side_by_side: {model_dir} has rope_scaling, which this model does not implement")
    model = Llama(cfg)
    w = read_safetensors(os.path.join(model_dir, "model.safetensors"))
    t = lambda name: torch.from_numpy(w.pop(name).astype(np.float32))
    with torch.no_grad():
        model.embed.weight.copy_(t("model.embed_tokens.weight"))
        for i, b in enumerate(model.blocks):
            p = f"model.layers.{i}."
            for mine, hf in (("q", "self_attn.q_proj"), ("k", "self_attn.k_proj"), ("v", "self_attn.v_proj"),
                             ("o", "self_attn.o_proj"), ("gate", "mlp.gate_proj"), ("up", "mlp.up_proj"),
                             ("down", "mlp.down_proj")):
                getattr(b, mine).weight.copy_(t(p + hf + ".weight"))
            b.norm1.weight.copy_(t(p + "input_layernorm.weight"))
            b.norm2.weight.copy_(t(p + "post_attention_layernorm.weight"))
        model.norm.weight.copy_(t("model.norm.weight"))
        model.head.weight.copy_(t("lm_head.weight"))
    if w:
        sys.exit(f"torch_side_by_side: {model_dir}: tensors this model does not read: {sorted(w)[:3]}")
    return model


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.reshape(-1))


def main():
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    torch.manual_seed(0)
    if len(sys.argv) == 6 and sys.argv[1] == "loss":
        model = load(sys.argv[2])
        x, y = read_batch(sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        with torch.no_grad():
            print(f"{loss_of(model, x, y).item():.7f}")
        return
    if len(sys.argv) != 10 or sys.argv[1] != "time" or sys.argv[7] not in ("full", "lora") or \
            sys.argv[9] not in ("bf16", "fp32"):
        sys.exit(__doc__)
    model = load(sys.argv[2])
    batch, seq, steps, what, rank = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], int(sys.argv[8])
    bf16 = sys.argv[9] == "bf16"
    x, y = read_batch(sys.argv[3], batch, seq)
    if what == "lora":
        for p in model.parameters():
            p.requires_grad_(False)
        for b in model.blocks:
            for name in ("q", "k", "v", "o", "gate", "up", "down"):
                setattr(b, name, Adapter(getattr(b, name), rank))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, weight_decay=0.1, foreach=True)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_of(model, x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()

    step()  # warm-up: allocations, oneDNN's kernel choices
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    ms = 1000 * sum(times) / len(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    print(f"torch {what} {sys.argv[9]}: {ms:.0f} ms/step, {batch * seq / (ms / 1000):.1f} tokens/s, "
          f"steps {' '.join(f'{1000 * t:.0f}' for t in times)} ms, peak RSS {rss:.2f} GiB, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, {sum(p.numel() for p in params)} trained")


if __name__ == "__main__":
    main()
