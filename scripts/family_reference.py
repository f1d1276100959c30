#!/usr/bin/python3
"""An independent float64 forward of the families meshtrain loads (qwen2, qwen3, mistral, llama,
gemma3, gpt2, and the mixtures of experts mixtral, qwen3_moe and olmoe), written from the math of
transformers' modeling_qwen2.py / modeling_qwen3.py / modeling_mistral.py / modeling_gemma3.py /
modeling_gpt2.py / modeling_mixtral.py / modeling_qwen3_moe.py / modeling_olmoe.py with numpy alone, reading the
safetensors itself: the oracle of `ctest -R family_reference` (docs/model-families.md).

For each family it writes a tiny random model in that family's HF layout (config.json and
model.safetensors, f32), then checks through the meshtrain binary:
  * `meshtrain eval`'s mean loss (fp32) against this forward's, within 1e-6 relative;
  * `meshtrain generate`'s greedy text against this forward's greedy tokens, detokenized by meshtrain.

Usage: family_reference.py MESHTRAIN TOKENIZER [family ...]
Exit 0 when every family agrees, 1 otherwise (one line per failure), 77 without numpy.

       family_reference.py --write FAMILY DIR VOCAB [KEY=JSON ...]
writes one such random model (a vocabulary of VOCAB, config keys overridden by KEY=JSON) and
nothing else: the starting point of scripts/check_llamacpp.sh's family models.
"""
import json
import os
import re
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:  # Debian's python3-numpy (scripts/setup.sh)
    print("family_reference: numpy is not installed (apt-get install python3-numpy); skipped")
    sys.exit(77)

VOCAB = 512  # the tokenizer the check uses: stories260K's tok512.model

# Tiny shapes that still exercise each family's parts: GQA everywhere; Qwen2 with q/k/v biases,
# tied embeddings and a window on its upper layers only; Qwen3 with q/k norms and head_dim != C/H;
# Mistral with a window on every layer and an explicit head_dim; Gemma 3 with its four (1 + w) norms,
# q/k norms, GeGLU, the sqrt(hidden) embedding scale, query_pre_attn_scalar != head_dim, and
# sliding layers (window 5 < the 32-token sequences; every third layer global) whose RoPE base
# differs from the global layers' (which have linear rope_scaling).
BASE = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": VOCAB,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-6, "hidden_act": "silu",
        "bos_token_id": 1, "eos_token_id": 2}
FAMILIES = {
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "rope_theta": 1000000.0,
              "tie_word_embeddings": True, "use_sliding_window": True, "sliding_window": 5,
              "max_window_layers": 1},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "rope_theta": 1000000.0,
              "tie_word_embeddings": False, "head_dim": 24, "attention_bias": False,
              "use_sliding_window": False, "sliding_window": None, "max_window_layers": 3},
    "mistral": {"architectures": ["MistralForCausalLM"], "model_type": "mistral", "rope_theta": 10000.0,
                "tie_word_embeddings": False, "sliding_window": 6, "head_dim": 32},
    "llama": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "rope_theta": 500000.0,
              "tie_word_embeddings": False},
    "gemma3": {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "rope_theta": 1000000.0,
               "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
               "tie_word_embeddings": True, "head_dim": 24, "query_pre_attn_scalar": 20,
               "sliding_window": 5, "sliding_window_pattern": 3, "hidden_act": None,
               "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False,
               "final_logit_softcapping": None, "attn_logit_softcapping": None},
    # Mixtures of experts (model/moe.h): Mixtral's attention is Mistral's, every layer sparse, the k
    # chosen renormalised; Qwen3-MoE's is Qwen3's, with a dense layer (mlp_only_layers) and its
    # chosen weights left as softmax probabilities (norm_topk_prob false). Routing losses off, as
    # the published configs ship (output_router_logits false).
    "mixtral": {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "rope_theta": 1000000.0,
                "tie_word_embeddings": False, "sliding_window": None, "num_local_experts": 4,
                "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02, "output_router_logits": False},
    "qwen3_moe": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "rope_theta": 1000000.0,
                  "tie_word_embeddings": False, "head_dim": 24, "attention_bias": False,
                  "use_sliding_window": False, "sliding_window": None, "max_window_layers": 3,
                  "num_experts": 6, "num_experts_per_tok": 3, "moe_intermediate_size": 40,
                  "norm_topk_prob": False, "decoder_sparse_step": 1, "mlp_only_layers": [1],
                  "router_aux_loss_coef": 0.001, "output_router_logits": False},
    # OLMoE: LLaMA's attention with RMSNorms over the whole q and k projections, every layer sparse
    # (experts intermediate_size wide), the chosen weights left unnormalised.
    "olmoe": {"architectures": ["OlmoeForCausalLM"], "model_type": "olmoe", "rope_theta": 10000.0,
              "tie_word_embeddings": False, "num_experts": 5, "num_experts_per_tok": 2,
              "norm_topk_prob": False, "clip_qkv": None, "attention_bias": False,
              "router_aux_loss_coef": 0.01, "output_router_logits": False},
}
GEMMA = "gemma3_text"
# GPT-2 has its own config keys (GPT2Config): n_inner null is 4 * n_embd.
GPT2 = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 64, "n_layer": 3,
        "n_head": 4, "n_inner": None, "n_positions": 128, "n_ctx": 128, "vocab_size": VOCAB,
        "layer_norm_epsilon": 1e-5, "activation_function": "gelu_new", "scale_attn_weights": True,
        "attn_pdrop": 0.1, "embd_pdrop": 0.1, "resid_pdrop": 0.1, "bos_token_id": 1, "eos_token_id": 2}
FAMILY_NAMES = list(FAMILIES) + ["gpt2"]


# ---- safetensors ---------------------------------------------------------------------------

def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    kinds = {"F32": "<f4", "F64": "<f8", "F16": "<f2"}
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in kinds:
            raise SystemExit(f"{path}: {name} is {info['dtype']}, this reader knows F32/F64/F16")
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=kinds[info["dtype"]]).reshape(info["shape"]).astype(np.float64)
    return out


# ---- a random model in the family's HF layout ----------------------------------------------

def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def make_gpt2_model(directory, seed, vocab=VOCAB, overrides=None):
    """GPT2LMHeadModel's layout: transformer.* names, Conv1D weights stored [in, out], q, k and v
    fused in c_attn, LayerNorms with biases, learned positions wpe, the head tied to wte; and the
    causal-mask buffer attn.bias that older files carry (not a parameter)."""
    cfg = {**GPT2, "vocab_size": vocab, **(overrides or {})}
    rng = np.random.default_rng(seed)
    C, L, P = cfg["n_embd"], cfg["n_layer"], cfg["n_positions"]
    I = cfg["n_inner"] or 4 * C
    conv = lambda i, o: rng.normal(0.0, 1.5 / np.sqrt(i), (i, o))  # [in, out]
    near_one = lambda n: 1.0 + rng.normal(0.0, 0.2, n)
    bias = lambda n: rng.normal(0.0, 0.3, n)
    wte = rng.normal(0.0, 1.0, (vocab, C))
    wte *= 2.0 / np.linalg.norm(wte, axis=1, keepdims=True)  # tied head: rows of one norm
    t = {"transformer.wte.weight": wte, "transformer.wpe.weight": rng.normal(0.0, 0.5, (P, C)),
         "transformer.ln_f.weight": near_one(C), "transformer.ln_f.bias": bias(C)}
    for l in range(L):
        p = f"transformer.h.{l}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = near_one(C), bias(C)
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = conv(C, 3 * C), bias(3 * C)
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = conv(C, C), bias(C)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = near_one(C), bias(C)
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = conv(C, I), bias(I)
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = conv(I, C), bias(C)
        t[p + "attn.bias"] = np.tril(np.ones((P, P)))[None, None]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(directory, "model.safetensors"), t)


def make_model(family, directory, seed, vocab=VOCAB, overrides=None):
    if family == "gpt2":
        return make_gpt2_model(directory, seed, vocab, overrides)
    # A None in a family's entry drops BASE's key (Gemma has hidden_activation, not hidden_act).
    cfg = {k: v for k, v in {**BASE, **FAMILIES[family], "vocab_size": vocab, **(overrides or {})}.items()
           if v is not None or k not in BASE}
    gemma = cfg["model_type"] == GEMMA
    rng = np.random.default_rng(seed)
    C, I, H, KV, D = (cfg["hidden_size"], cfg["intermediate_size"], cfg["num_attention_heads"],
                      cfg["num_key_value_heads"], head_dim(cfg))
    # Large enough weights that the logits are far from flat: greedy choices with clear margins.
    mat = lambda o, i: rng.normal(0.0, 1.5 / np.sqrt(i), (o, i))
    # Gemma stores its norm weights as w and applies 1 + w: near zero there.
    near_one = lambda n: (0.0 if gemma else 1.0) + rng.normal(0.0, 0.2, n)
    # A tied head reads the embedding: rows of one norm, so that no token's row outweighs the others
    # and greedy text does not settle on one token.
    embed = rng.normal(0.0, 1.0, (vocab, C))
    if cfg["tie_word_embeddings"]:
        # Gemma scales the lookup by sqrt(hidden) (8 here): rows of norm 0.5 keep the token's own
        # row from outweighing the layers' output, which greedy text would then just repeat.
        embed *= (0.5 if gemma else 2.0) / np.linalg.norm(embed, axis=1, keepdims=True)
    t = {"model.embed_tokens.weight": embed,
         "model.norm.weight": near_one(C)}
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = mat(vocab, C) * 2.0
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        t[p + "input_layernorm.weight"] = near_one(C)
        t[p + "post_attention_layernorm.weight"] = near_one(C)
        if gemma:
            t[p + "pre_feedforward_layernorm.weight"] = near_one(C)
            t[p + "post_feedforward_layernorm.weight"] = near_one(C)
        for name, o, i in (("q", H * D, C), ("k", KV * D, C), ("v", KV * D, C), ("o", C, H * D)):
            t[p + f"self_attn.{name}_proj.weight"] = mat(o, i)
            if family == "qwen2" and name != "o":
                t[p + f"self_attn.{name}_proj.bias"] = rng.normal(0.0, 0.5, o)
        if family in ("qwen3", "gemma3", "qwen3_moe"):
            t[p + "self_attn.q_norm.weight"] = near_one(D)
            t[p + "self_attn.k_norm.weight"] = near_one(D)
        if family == "olmoe":  # over the whole projections
            t[p + "self_attn.q_norm.weight"] = near_one(H * D)
            t[p + "self_attn.k_norm.weight"] = near_one(KV * D)
        if moe_layer(cfg, l):
            E, Ie = moe_sizes(cfg)
            mlp = "block_sparse_moe." if family == "mixtral" else "mlp."
            names = ("w1", "w3", "w2") if family == "mixtral" else ("gate_proj", "up_proj", "down_proj")
            t[p + mlp + "gate.weight"] = mat(E, C) * 2.0  # routers with clear preferences
            for e in range(E):
                t[p + mlp + f"experts.{e}.{names[0]}.weight"] = mat(Ie, C)
                t[p + mlp + f"experts.{e}.{names[1]}.weight"] = mat(Ie, C)
                t[p + mlp + f"experts.{e}.{names[2]}.weight"] = mat(C, Ie)
            continue
        t[p + "mlp.gate_proj.weight"] = mat(I, C)
        t[p + "mlp.up_proj.weight"] = mat(I, C)
        t[p + "mlp.down_proj.weight"] = mat(C, I)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(directory, "model.safetensors"), t)


# ---- the forward, in float64 ---------------------------------------------------------------

def moe_layer(cfg, l):
    """Whether layer l is sparse: every layer of Mixtral; Qwen3-MoE's every decoder_sparse_step-th
    outside mlp_only_layers."""
    if cfg["model_type"] in ("mixtral", "olmoe"):
        return True
    if cfg["model_type"] != "qwen3_moe":
        return False
    return l not in cfg.get("mlp_only_layers", []) and (l + 1) % cfg.get("decoder_sparse_step", 1) == 0


def moe_sizes(cfg):
    if cfg["model_type"] == "mixtral":
        return cfg["num_local_experts"], cfg["intermediate_size"]
    if cfg["model_type"] == "olmoe":
        return cfg["num_experts"], cfg["intermediate_size"]
    return cfg["num_experts"], cfg["moe_intermediate_size"]


def moe_mlp(cfg, t, p, n):
    """MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock: softmax over the experts, the top k (ties to
    the lower index, as torch.topk), renormalised for Mixtral and with norm_topk_prob, and each
    token's sum of its experts' SwiGLU outputs times those weights."""
    mixtral = cfg["model_type"] == "mixtral"
    E, _ = moe_sizes(cfg)
    k = cfg.get("num_experts_per_tok", 2)
    renorm = mixtral or cfg.get("norm_topk_prob", False)
    mlp = "block_sparse_moe." if mixtral else "mlp."
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    w = lambda e, i: t[p + mlp + f"experts.{e}.{names[i]}.weight"]
    logits = n @ t[p + mlp + "gate.weight"].T
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    out = np.zeros_like(n)
    for i in range(n.shape[0]):
        chosen = np.argsort(-probs[i], kind="stable")[:k]
        weights = probs[i, chosen] / (probs[i, chosen].sum() if renorm else 1.0)
        for e, wt in zip(chosen, weights):
            gate = n[i] @ w(e, 0).T
            out[i] += wt * ((gate / (1.0 + np.exp(-gate)) * (n[i] @ w(e, 1).T)) @ w(e, 2).T)
    return out


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def layer_windows(cfg):
    """Each layer's sliding window (0: none), by transformers' configuration rules."""
    L = cfg["num_hidden_layers"]
    w = cfg.get("sliding_window") or 0
    if cfg["model_type"] in ("mistral", "mixtral"):
        return [w] * L
    if cfg["model_type"] in ("qwen2", "qwen3", "qwen3_moe") and cfg.get("use_sliding_window") and w:
        return [w if l >= cfg.get("max_window_layers", 28) else 0 for l in range(L)]
    if cfg["model_type"] == GEMMA:  # Gemma3TextConfig: every sliding_window_pattern-th layer global
        return [w if (l + 1) % cfg.get("sliding_window_pattern", 6) else 0 for l in range(L)]
    return [0] * L


def rope(theta, D, T, linear_factor=1.0):
    """cos, sin [T, 1, D] of the rotate_half pairing; linear scaling divides every frequency."""
    inv_freq = 1.0 / (theta ** (np.arange(0, D, 2, dtype=np.float64) / D)) / linear_factor
    angles = np.outer(np.arange(T, dtype=np.float64), inv_freq)
    return (np.concatenate([np.cos(angles)] * 2, axis=-1)[:, None, :],
            np.concatenate([np.sin(angles)] * 2, axis=-1)[:, None, :])


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def layer_norm(x, w, b, eps):
    m = np.mean(x, axis=-1, keepdims=True)
    return (x - m) / np.sqrt(np.mean((x - m) ** 2, axis=-1, keepdims=True) + eps) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def gpt2_forward(cfg, t, ids):
    """GPT2LMHeadModel's logits [T, V] of one sequence, positions 0..T-1 (modeling_gpt2.py)."""
    T, C, H, eps = len(ids), cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    D = C // H
    g = lambda name: t["transformer." + name]
    conv = lambda name, v: v @ g(name + ".weight") + g(name + ".bias")  # Conv1D: x W + b, W [in, out]
    x = g("wte.weight")[ids] + g("wpe.weight")[np.arange(T)]
    causal = np.arange(T)[None, :] <= np.arange(T)[:, None]
    for l in range(cfg["n_layer"]):
        p = f"h.{l}."
        n = layer_norm(x, g(p + "ln_1.weight"), g(p + "ln_1.bias"), eps)
        q, k, v = np.split(conv(p + "attn.c_attn", n), 3, axis=-1)
        att = np.empty((T, C))
        for h in range(H):
            cols = slice(h * D, (h + 1) * D)
            s = np.where(causal, (q[:, cols] @ k[:, cols].T) / np.sqrt(D), -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, cols] = (s / s.sum(axis=1, keepdims=True)) @ v[:, cols]
        x = x + conv(p + "attn.c_proj", att)
        n = layer_norm(x, g(p + "ln_2.weight"), g(p + "ln_2.bias"), eps)
        x = x + conv(p + "mlp.c_proj", gelu_new(conv(p + "mlp.c_fc", n)))
    x = layer_norm(x, g("ln_f.weight"), g("ln_f.bias"), eps)
    return x @ g("wte.weight").T


def forward(cfg, t, ids):
    """Logits [T, V] of one sequence, positions 0..T-1."""
    if cfg["model_type"] == "gpt2":
        return gpt2_forward(cfg, t, ids)
    T = len(ids)
    C, H, KV, D = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    eps, fam = cfg["rms_norm_eps"], cfg["model_type"]
    gemma = fam == GEMMA
    scaling = cfg.get("rope_scaling") or {}
    cos, sin = rope(cfg["rope_theta"], D, T, scaling.get("factor", 1.0) if scaling.get("rope_type") == "linear" else 1.0)
    if gemma:  # the sliding layers' tables: rope_local_base_freq, no scaling
        local_cos, local_sin = rope(cfg["rope_local_base_freq"], D, T)
    # Gemma's norm weights apply as 1 + w (Gemma3RMSNorm).
    norm = (lambda v, name: rms_norm(v, 1.0 + t[name], eps)) if gemma else (lambda v, name: rms_norm(v, t[name], eps))
    # Gemma: the attention scale is query_pre_attn_scalar^-1/2, the embedding scaled by sqrt(hidden)
    # (the scale a float32 tensor, as transformers keeps it).
    scale = cfg["query_pre_attn_scalar"] ** -0.5 if gemma else 1.0 / np.sqrt(D)
    x = t["model.embed_tokens.weight"][ids] * (float(np.float32(np.sqrt(C))) if gemma else 1.0)
    for l, window in enumerate(layer_windows(cfg)):
        p = f"model.layers.{l}."
        lin = lambda name, v: v @ t[p + name + ".weight"].T + t.get(p + name + ".bias", 0.0)
        n = norm(x, p + "input_layernorm.weight")
        q = lin("self_attn.q_proj", n)
        k = lin("self_attn.k_proj", n)
        if fam == "olmoe":  # OlmoeRMSNorm over the whole projections, before the heads are split
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        q = q.reshape(T, H, D)
        k = k.reshape(T, KV, D)
        v = lin("self_attn.v_proj", n).reshape(T, KV, D)
        if fam in ("qwen3", GEMMA, "qwen3_moe"):  # per-head RMSNorm of q and k, before the rotation
            q = norm(q, p + "self_attn.q_norm.weight")
            k = norm(k, p + "self_attn.k_norm.weight")
        c, s_ = (local_cos, local_sin) if gemma and window else (cos, sin)
        q = q * c + rotate_half(q) * s_
        k = k * c + rotate_half(k) * s_
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        visible = (j <= i) & ((window == 0) | (j > i - window))
        att = np.empty((T, H, D))
        for h in range(H):
            g = h // (H // KV)
            s = (q[:, h, :] @ k[:, g, :].T) * scale
            s = np.where(visible, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            att[:, h, :] = (s / s.sum(axis=1, keepdims=True)) @ v[:, g, :]
        o = lin("self_attn.o_proj", att.reshape(T, H * D))
        if gemma:  # Gemma's post_attention_layernorm normalises the attention's output
            x = x + norm(o, p + "post_attention_layernorm.weight")
            n = norm(x, p + "pre_feedforward_layernorm.weight")
            gate = lin("mlp.gate_proj", n)
            x = x + norm(lin("mlp.down_proj", gelu_tanh(gate) * lin("mlp.up_proj", n)),
                         p + "post_feedforward_layernorm.weight")
            continue
        x = x + o
        n = norm(x, p + "post_attention_layernorm.weight")
        if moe_layer(cfg, l):
            x = x + moe_mlp(cfg, t, p, n)
            continue
        gate = lin("mlp.gate_proj", n)
        x = x + lin("mlp.down_proj", gate / (1.0 + np.exp(-gate)) * lin("mlp.up_proj", n))
    x = norm(x, "model.norm.weight")
    head = t["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else t["lm_head.weight"]
    return x @ head.T


def mean_loss(cfg, t, tokens, seq):
    """meshtrain eval's windows: consecutive windows of seq inputs, each predicting the next token."""
    total, count = 0.0, 0
    for start in range(0, len(tokens) - 1, seq):
        inputs = tokens[start:start + seq]
        targets = tokens[start + 1:start + seq + 1]
        logits = forward(cfg, t, inputs)[:len(targets)]
        m = logits.max(axis=1, keepdims=True)
        lse = (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True)))[:, 0]
        total += float(np.sum(lse - logits[np.arange(len(targets)), targets]))
        count += len(targets)
    return total / count


def greedy(cfg, t, prompt, n):
    """Greedy continuation, and the smallest gap between the best and second-best logit."""
    ids, margin = list(prompt), np.inf
    for _ in range(n):
        logits = forward(cfg, t, ids)[-1]
        order = np.argsort(logits)
        margin = min(margin, logits[order[-1]] - logits[order[-2]])
        ids.append(int(order[-1]))
        if ids[-1] == cfg["eos_token_id"]:
            break
    return ids[len(prompt):], margin


# ---- the checks through the binary ---------------------------------------------------------

def run(args):
    """The command's standard output as bytes (random tokens need not decode as UTF-8)."""
    r = subprocess.run(args, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(" ".join(args) + " failed:\n" + (r.stdout + r.stderr).decode(errors="replace"))
    return r.stdout


# The evaluated text: a few windows of 32 tokens, the last one partial.
TEXT = ("Once upon a time there was a little girl named Lily. She liked to play in the park with her "
        "dog. One day the sun was hot and the dog was tired, so they sat under a big tree and ate "
        "an apple. Lily said thank you to the tree, and the dog wagged its tail.\n")


def check_family(meshtrain, tokenizer, family, work):
    directory = os.path.join(work, family)
    make_model(family, directory, seed=sum(map(ord, family)))
    cfg = json.load(open(os.path.join(directory, "config.json")))
    t = read_safetensors(os.path.join(directory, "model.safetensors"))
    failures = []

    seq = 32
    text_file = os.path.join(work, "text.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        f.write(TEXT)
    tokens = json.loads(run([meshtrain, "tokenize", "--tokenizer", tokenizer, "--bos", "--text", TEXT]))
    want = mean_loss(cfg, t, tokens, seq)
    out = run([meshtrain, "eval", "--model", directory, "--tokenizer", tokenizer, "--data", text_file,
               "--seq-len", str(seq), "--batch", "2"])
    got = float(re.search(rb"mean loss ([0-9.eE+-]+)", out).group(1))
    rel = abs(got - want) / abs(want)
    print(f"{family}: eval loss meshtrain {got:.9f}, float64 reference {want:.9f}, relative {rel:.2e}")
    if not rel <= 1e-6:
        failures.append(f"{family}: eval loss {got} vs reference {want} (relative {rel:.2e} > 1e-6)")

    prompt_text, n = "Once upon a time", 24
    prompt = json.loads(run([meshtrain, "tokenize", "--tokenizer", tokenizer, "--bos", "--text", prompt_text]))
    ids, margin = greedy(cfg, t, prompt, n)
    want_text = run([meshtrain, "detokenize", "--tokenizer", tokenizer, "--ids", " ".join(map(str, ids))])
    got_text = run([meshtrain, "generate", "--model", directory, "--tokenizer", tokenizer, "--prompt",
                    prompt_text, "--max-new-tokens", str(n)])
    print(f"{family}: greedy {len(ids)} tokens (smallest top-2 logit gap {margin:.3g}): {want_text.strip()!r}")
    if want_text.strip() not in got_text:
        failures.append(f"{family}: generate printed {got_text.strip()!r}, the reference's greedy tokens "
                        f"{ids} read {want_text.strip()!r}")
    return failures


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "--write":
        family, directory, vocab = sys.argv[2], sys.argv[3], int(sys.argv[4])
        overrides = {k: json.loads(v) for k, v in (a.split("=", 1) for a in sys.argv[5:])}
        make_model(family, directory, seed=sum(map(ord, family)), vocab=vocab, overrides=overrides)
        return 0
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    meshtrain, tokenizer = sys.argv[1:3]
    if not os.path.exists(tokenizer):
        print(f"family_reference: {tokenizer} is not present (the shared data); skipped")
        return 77
    families = sys.argv[3:] or FAMILY_NAMES
    failures = []
    with tempfile.TemporaryDirectory(prefix="family_reference_") as work:
        for family in families:
            failures += check_family(meshtrain, tokenizer, family, work)
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
