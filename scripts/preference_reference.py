#!/usr/bin/python3
"""A float64 reference of preference training's losses (numpy, from TRL 0.11's formulas): the oracle
of `ctest -R preference_reference` (docs/fine-tuning.md, "Preference training").

It writes a tiny random LLaMA (scripts/family_reference.py's, vocabulary 256 for the byte-level
tokenizer), a PEFT LoRA adapter with random A and B, and a file of prompt / chosen / rejected
pairs, then for each loss (dpo with and without label smoothing, ipo, simpo with and without the
CPO term, orpo) compares `meshtrain eval --method ...`'s loss and metrics (fp32; the policy is the
base with the adapter, dpo's and ipo's reference the base alone) with this script's: each
sequence's completion log-probability from family_reference's float64 forward of the merged
weights, then the loss of the pairs as TRL 0.11 writes it (DPOTrainer.dpo_loss, CPOTrainer.cpo_loss,
ORPOTrainer.odds_ratio_loss), within 1e-6 relative. Then one step of `meshtrain train --method` from
that adapter (lora.init_adapter; AdamW with eps = 1 so that the update -lr g / (|g| + 1) gives back
each gradient element) against central differences of this loss in elements of every adapter
tensor of the first layer, within 1e-4 relative.

Usage: preference_reference.py MESHTRAIN
Exit 0 when every loss agrees, 1 otherwise (one line per failure), 77 without numpy.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import numpy as np
    import family_reference as fr
except ImportError:
    print("preference_reference: numpy is not installed (apt-get install python3-numpy); skipped")
    sys.exit(77)

PAIRS = [
    ("Who is the baker? ", "Mira bakes bread.", "I do not know."),
    ("Name a colour: ", "green", "seven"),
    ("The river is ", "slow and wide.", "a kind of cheese!"),
    ("2 + 2 = ", "4", "five, or maybe six"),
    ("Say hi: ", "hi", "no"),
    ("Where is the mill? ", "By the river.", "Go away."),
]
RANK, ALPHA = 2, 4.0
TARGETS = ("q_proj", "v_proj", "down_proj")

# (method, beta, extra [preference] keys as eval's flags cannot give them: none here)
CASES = [("dpo", 0.1), ("dpo", 0.7), ("ipo", 0.3), ("simpo", 2.0), ("orpo", 0.1)]


def write_adapter(directory, cfg, rng):
    """Random A and B on TARGETS of every layer, as PEFT saves them; returns {module weight name: delta}."""
    os.makedirs(directory, exist_ok=True)
    C, I = cfg["hidden_size"], cfg["intermediate_size"]
    D = fr.head_dim(cfg)
    shapes = {"q_proj": (cfg["num_attention_heads"] * D, C), "v_proj": (cfg["num_key_value_heads"] * D, C),
              "down_proj": (C, I)}
    tensors, deltas = {}, {}
    for l in range(cfg["num_hidden_layers"]):
        for m in TARGETS:
            out, inp = shapes[m]
            module = f"model.layers.{l}.{'mlp' if m == 'down_proj' else 'self_attn'}.{m}"
            A = rng.normal(0.0, 0.3, (RANK, inp))
            B = rng.normal(0.0, 0.3, (out, RANK))
            tensors[f"base_model.model.{module}.lora_A.weight"] = A
            tensors[f"base_model.model.{module}.lora_B.weight"] = B
            # meshtrain reads the f32 file: the delta of the values it holds
            A32, B32 = A.astype(np.float32).astype(np.float64), B.astype(np.float32).astype(np.float64)
            deltas[module + ".weight"] = (ALPHA / RANK) * (B32 @ A32)
    fr.write_safetensors(os.path.join(directory, "adapter_model.safetensors"), tensors)
    with open(os.path.join(directory, "adapter_config.json"), "w") as f:
        json.dump({"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": RANK, "lora_alpha": ALPHA,
                   "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": False,
                   "target_modules": list(TARGETS)}, f)
    return deltas


def completion_logp(cfg, t, prompt, completion):
    """Sum of log p(token) over the completion's tokens (bytes) after the prompt's, and their count."""
    ids = list(prompt.encode()) + list(completion.encode())
    logits = fr.forward(cfg, t, ids[:-1])
    m = logits.max(axis=1, keepdims=True)
    logp = logits - (m + np.log(np.exp(logits - m).sum(axis=1, keepdims=True)))
    first = len(prompt.encode())  # the first completion token, predicted at position first - 1
    total = sum(logp[i - 1, ids[i]] for i in range(first, len(ids)))
    return float(total), len(ids) - first


def log_sigmoid(x):
    return -np.logaddexp(0.0, -x)


def trl_loss(method, beta, pol, ref):
    """The mean loss over the pairs and TRL's logged means, from (sum, count) per sequence."""
    mean = method != "dpo"  # ipo, simpo and orpo read the mean log-probability per token
    lp = lambda s: s[0] / s[1] if mean else s[0]
    pc = np.array([lp(p[0]) for p in pol]); pr = np.array([lp(p[1]) for p in pol])
    if method in ("dpo", "ipo"):
        rc = np.array([lp(r[0]) for r in ref]); rr = np.array([lp(r[1]) for r in ref])
    else:
        rc = rr = np.zeros_like(pc)
    if method == "dpo":
        losses = -log_sigmoid(beta * ((pc - pr) - (rc - rr)))
    elif method == "ipo":
        losses = ((pc - pr) - (rc - rr) - 1.0 / (2.0 * beta)) ** 2
    elif method == "simpo":
        losses = -log_sigmoid(beta * ((pc - pr) - 0.5 / beta))  # simpo_gamma 0.5, cpo_alpha 0
    else:  # orpo
        log_odds = (pc - pr) - (np.log1p(-np.exp(pc)) - np.log1p(-np.exp(pr)))
        nll = -sum(p[0][0] for p in pol) / sum(p[0][1] for p in pol)
        losses = nll - beta * log_sigmoid(log_odds)
    chosen, rejected = beta * (pc - rc), beta * (pr - rr)
    return {"loss": float(np.mean(losses)), "rewards/chosen": float(np.mean(chosen)),
            "rewards/rejected": float(np.mean(rejected)),
            "rewards/accuracies": float(np.mean(chosen > rejected)),
            "rewards/margins": float(np.mean(chosen - rejected)),
            "logps/chosen": float(np.mean(pc)), "logps/rejected": float(np.mean(pr))}


def pairs_loss(method, beta, cfg, base, policy_t):
    pol = [(completion_logp(cfg, policy_t, p, c), completion_logp(cfg, policy_t, p, r)) for p, c, r in PAIRS]
    ref = [(completion_logp(cfg, base, p, c), completion_logp(cfg, base, p, r)) for p, c, r in PAIRS]
    return trl_loss(method, beta, pol, ref)["loss"]


def check_first_update(meshtrain, work, method, beta, base_dir, adapter_dir, data, cfg, base, deltas_of):
    """One step of `meshtrain train --method` from the adapter (fp32, every pair in the batch, AdamW
    with eps = 1, no decay, clip or warm-up: the update -lr g / (|g| + 1) gives back each gradient
    element g) against central differences of this script's loss in a few elements of each B and
    A of the first layer."""
    out = os.path.join(work, "step_" + method + str(beta))
    lr = 1.0  # an update far above the f32 rounding of the weights it moves (B, A ~ 0.3)
    r = subprocess.run([meshtrain, "train", "--method", method, "--beta", str(beta), "--model", base_dir,
                        "--data", data, "--lora", "--out", out, "--set", "data.tokenizer=byte",
                        "--set", "lora.init_adapter=" + adapter_dir, "--set", "lora.rank=%d" % RANK,
                        "--set", "lora.alpha=%g" % ALPHA, "--set", 'lora.targets=["q","v","down"]',
                        "--set", "train.steps=1", "--set", "train.batch_size=%d" % (2 * len(PAIRS)),
                        "--set", "train.seq_len=64", "--set", "train.precision=fp32", "--set", "data.val_fraction=0",
                        "--set", "train.peak_gflops=100", "--set", "optim.lr=%g" % lr, "--set", "optim.eps=1",
                        "--set", "optim.weight_decay=0", "--set", "optim.warmup_steps=0", "--set", "optim.grad_clip=0",
                        "--set", "optim.schedule=constant", "--set", "preference.reference=adapters_off"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return [f"{method} beta {beta}: meshtrain train failed:\n{r.stdout}{r.stderr}"]
    before = fr.read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors"))
    after = fr.read_safetensors(os.path.join(out, "adapter", "adapter_model.safetensors"))
    failures = []
    worst = 0.0
    for name in sorted(before):
        if ".layers.0." not in name:
            continue
        for idx in [(0, 0), (1, 1), (-1, -1)]:
            u = (after[name][idx] - before[name][idx]) / -lr  # g / (|g| + 1)
            got = u / (1.0 - abs(u))
            h = 1e-6
            plus, minus = dict(before), dict(before)
            plus[name] = before[name].copy(); plus[name][idx] += h
            minus[name] = before[name].copy(); minus[name][idx] -= h
            lp = pairs_loss(method, beta, cfg, base, {k: v + deltas_of(plus).get(k, 0.0) for k, v in base.items()})
            lm = pairs_loss(method, beta, cfg, base, {k: v + deltas_of(minus).get(k, 0.0) for k, v in base.items()})
            want = (lp - lm) / (2 * h)
            worst = max(worst, abs(got - want) / max(abs(want), 1e-3))
            if abs(got - want) > 1e-4 * abs(want) + 1e-6:
                failures.append(f"{method} beta {beta}: first update of {name}{list(idx)}: gradient {got} reference {want}")
    print(f"{method} beta {beta}: first update, gradient within {worst:.1e} of the float64 reference")
    return failures


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    meshtrain = sys.argv[1]
    failures = []
    with tempfile.TemporaryDirectory(prefix="preference_reference.") as work:
        base_dir, adapter_dir = os.path.join(work, "base"), os.path.join(work, "adapter")
        fr.make_model("llama", base_dir, seed=35, vocab=256)
        with open(os.path.join(base_dir, "config.json")) as f:
            cfg = json.load(f)
        # family_reference's weights make the logits far from flat (for greedy text); a preference
        # loss reads differences of log-probability sums, so milder ones keep f32's rounding of the
        # sums (the model's, not the loss's) well below the 1e-6 the check asks.
        base = {k: v * (0.5 if v.ndim == 2 else 1.0)
                for k, v in fr.read_safetensors(os.path.join(base_dir, "model.safetensors")).items()}
        base = {k: v.astype(np.float32).astype(np.float64) for k, v in base.items()}
        fr.write_safetensors(os.path.join(base_dir, "model.safetensors"), base)
        deltas = write_adapter(adapter_dir, cfg, np.random.default_rng(36))
        policy_t = {k: v + deltas.get(k, 0.0) for k, v in base.items()}

        def deltas_of(ad):
            """{module weight name: (alpha / r) B A} of an adapter's tensors."""
            out = {}
            for name, A in ad.items():
                if name.endswith("lora_A.weight"):
                    module = name[len("base_model.model."):-len(".lora_A.weight")]
                    out[module + ".weight"] = (ALPHA / RANK) * (ad[name.replace("lora_A", "lora_B")] @ A)
            return out
        data = os.path.join(work, "pairs.jsonl")
        with open(data, "w") as f:
            for p, c, r in PAIRS:
                f.write(json.dumps({"prompt": p, "chosen": c, "rejected": r}) + "\n")
        pol = [(completion_logp(cfg, policy_t, p, c), completion_logp(cfg, policy_t, p, r)) for p, c, r in PAIRS]
        ref = [(completion_logp(cfg, base, p, c), completion_logp(cfg, base, p, r)) for p, c, r in PAIRS]
        for method, beta in CASES:
            want = trl_loss(method, beta, pol, ref)
            r = subprocess.run([meshtrain, "eval", "--model", base_dir, "--adapter", adapter_dir, "--data", data,
                                "--tokenizer", "byte", "--method", method, "--beta", str(beta), "--seq-len", "64",
                                "--precision", "fp32"], capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{method}: meshtrain eval failed:\n{r.stdout}{r.stderr}")
                continue
            got = {}
            for key in want:
                m = re.search(re.escape(key) + r" (-?[0-9.e+-]+|nan)", r.stdout)
                got[key] = float(m.group(1)) if m else None
            # The loss within 1e-6 relative. The metrics within 5e-6, relative or absolute below 1:
            # a reward is beta x a difference of two sums of some 30 log-probabilities each, which
            # f32's forward gives to about 1e-7 of their size (measured: 1.7e-6 of 1.4 at beta 0.7).
            for key, value in want.items():
                tol = 1e-6 * abs(value) if key == "loss" else 5e-6 * max(abs(value), 1.0)
                if got[key] is None or abs(got[key] - value) > tol:
                    failures.append(f"{method} beta {beta}: {key} meshtrain {got[key]} reference {value}")
            print(f"{method} beta {beta}: loss meshtrain {got['loss']} float64 {want['loss']:.9g}")
            failures += check_first_update(meshtrain, work, method, beta, base_dir, adapter_dir, data, cfg, base,
                                           deltas_of)
    for line in failures:
        print("preference_reference: " + line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
