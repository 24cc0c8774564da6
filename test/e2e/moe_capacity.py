"""End to end: DeepSeek-V3 with static expert capacity. megc imports the
deepseek-v3 Hugging Face fixture with --moe-capacity-factor and
--moe-drop-policy, megc-run computes the logits and the dropped-token count
with the fixture's checkpoint, and both are compared against a NumPy
forward of the model (float64) that drops tokens by the stated policy:
each expert keeps at most `capacity = ceil(T * k / E * factor)` of the
choices routed to it, those of the largest routing weight (`probs`, ties to
the earlier token) or of the earliest tokens (`position`); the weights of
the kept choices are not renormalised.

The NumPy forward is itself checked first: without a capacity limit it
must reproduce transformers' logits in the fixture's reference. Last, with
--moe-aux-loss-coeff, the sequence-wise balance loss (DeepSeek-V3's
`alpha sum_i f_i P_i` per sequence, averaged over the sequences) that
`forward` returns and the `loss` entry adds equal NumPy's."""
import argparse
import json
import math
import os
import sys

import numpy as np

import e2e_util

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "hf-fixtures", "deepseek-v3")


def rms_norm(x, weight, eps):
    return weight * (x / np.sqrt((x * x).mean(-1, keepdims=True) + eps))


def silu(x):
    return x / (1.0 + np.exp(-x))


def rope(x, cos, sin, interleave):
    """transformers' DeepSeek RoPE on x [B, H, S, d]."""
    if interleave:
        b, h, s, d = x.shape
        x = x.reshape(b, h, s, d // 2, 2).swapaxes(3, 4).reshape(b, h, s, d)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def route(x, p, prefix, c):
    """Expert indices [T, k] and weights [T, k] as DeepseekV3TopkRouter."""
    experts, k = c["n_routed_experts"], c["num_experts_per_tok"]
    groups, top_groups = c["n_group"], c["topk_group"]
    scores = 1.0 / (1.0 + np.exp(-(x @ p[prefix + "gate.weight"].T)))
    biased = scores + p[prefix + "gate.e_score_correction_bias"]
    per_group = biased.reshape(len(x), groups, experts // groups)
    group_scores = np.sort(per_group, axis=-1)[..., -2:].sum(-1)
    kept = np.argsort(-group_scores, axis=-1, kind="stable")[:, :top_groups]
    mask = np.zeros((len(x), groups), bool)
    np.put_along_axis(mask, kept, True, axis=1)
    choice = np.where(np.repeat(mask, experts // groups, axis=1), biased,
                      -np.inf)
    index = np.argsort(-choice, axis=-1, kind="stable")[:, :k]
    weights = np.take_along_axis(scores, index, axis=1)
    if c["norm_topk_prob"]:
        weights = weights / (weights.sum(-1, keepdims=True) + 1e-20)
    return index, weights * c["routed_scaling_factor"], scores


def keep_within_capacity(index, weights, experts, capacity, policy):
    """Which choices [T, k] survive: per expert, the `capacity` first by
    weight (ties: earlier token) or by token."""
    kept = np.zeros(index.shape, bool)
    for e in range(experts):
        tokens, slots = np.nonzero(index == e)
        if policy == "probs":
            order = sorted(range(len(tokens)),
                           key=lambda i: (-weights[tokens[i], slots[i]],
                                          tokens[i]))
        else:
            order = sorted(range(len(tokens)), key=lambda i: tokens[i])
        for i in order[:capacity]:
            kept[tokens[i], slots[i]] = True
    return kept


def balance_loss(index, scores, batch, seq, experts, k):
    """sum_i f_i P_i of each sequence, averaged over the sequences."""
    counts = np.zeros((batch, experts))
    for t, e in np.ndindex(*index.shape):
        counts[t // seq, index[t, e]] += 1
    share = counts * experts / (k * seq)
    normalized = scores / scores.sum(-1, keepdims=True)
    mean_score = normalized.reshape(batch, seq, experts).mean(1)
    return float((share * mean_score).sum(-1).mean())


def forward(p, c, ids, capacity, policy, routed=None):
    """Logits, the dropped choices and the balance loss (sum over the MoE
    layers, without its coefficient) of DeepseekV3ForCausalLM; `routed`
    collects each MoE layer's (prefix, router input, chosen experts)."""
    batch, seq = ids.shape
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rot, v_dim = (c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                        c["v_head_dim"])
    eps = c["rms_norm_eps"]
    theta = c["rope_parameters"]["rope_theta"]
    inv = 1.0 / theta ** (np.arange(0, rot, 2) / rot)
    freqs = np.arange(seq)[:, None] * inv[None, :]
    emb = np.concatenate([freqs, freqs], axis=-1)
    cos, sin = np.cos(emb), np.sin(emb)
    causal = np.triu(np.full((seq, seq), -np.inf), 1)
    x = p["model.embed_tokens.weight"][ids]
    dropped, balance = 0, 0.0
    for layer in range(c["num_hidden_layers"]):
        pre = f"model.layers.{layer}."
        a = pre + "self_attn."
        h = rms_norm(x, p[pre + "input_layernorm.weight"], eps)
        q = rms_norm(h @ p[a + "q_a_proj.weight"].T,
                     p[a + "q_a_layernorm.weight"], 1e-6)
        q = (q @ p[a + "q_b_proj.weight"].T).reshape(batch, seq, heads, -1)
        q = q.transpose(0, 2, 1, 3)
        compressed = h @ p[a + "kv_a_proj_with_mqa.weight"].T
        latent, k_rot = np.split(compressed, [c["kv_lora_rank"]], axis=-1)
        kv = rms_norm(latent, p[a + "kv_a_layernorm.weight"], 1e-6)
        kv = (kv @ p[a + "kv_b_proj.weight"].T).reshape(batch, seq, heads, -1)
        kv = kv.transpose(0, 2, 1, 3)
        k_nope, value = np.split(kv, [nope], axis=-1)
        q_nope, q_rot = np.split(q, [nope], axis=-1)
        k_rot = k_rot.reshape(batch, 1, seq, rot)
        q_rot = rope(q_rot, cos, sin, c["rope_interleave"])
        k_rot = rope(k_rot, cos, sin, c["rope_interleave"])
        k_rot = np.broadcast_to(k_rot, (batch, heads, seq, rot))
        query = np.concatenate([q_nope, q_rot], axis=-1)
        key = np.concatenate([k_nope, k_rot], axis=-1)
        s = query @ key.swapaxes(-1, -2) * (nope + rot) ** -0.5 + causal
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        out = (s @ value).transpose(0, 2, 1, 3).reshape(batch, seq, -1)
        x = x + out @ p[a + "o_proj.weight"].T

        h = rms_norm(x, p[pre + "post_attention_layernorm.weight"], eps)
        m = pre + "mlp."

        def mlp(prefix, inp):
            gate = silu(inp @ p[prefix + "gate_proj.weight"].T)
            return (gate * (inp @ p[prefix + "up_proj.weight"].T)) @ \
                p[prefix + "down_proj.weight"].T

        if layer < c["first_k_dense_replace"]:
            x = x + mlp(m, h)
            continue
        flat = h.reshape(batch * seq, hidden)
        index, weights, scores = route(flat, p, m, c)
        if routed is not None:
            routed.append((m, flat, index))
        balance += balance_loss(index, scores, batch, seq,
                                c["n_routed_experts"], index.shape[1])
        kept = keep_within_capacity(index, weights, c["n_routed_experts"],
                                    capacity, policy)
        dropped += int((~kept).sum())
        routed = np.zeros_like(flat)
        for t in range(len(flat)):
            for j in range(index.shape[1]):
                if kept[t, j]:
                    routed[t] += weights[t, j] * mlp(
                        f"{m}experts.{index[t, j]}.", flat[t])
        x = x + routed.reshape(batch, seq, hidden) + mlp(m + "shared_experts.",
                                                         h)
    x = rms_norm(x, p["model.norm.weight"], eps)
    return x @ p["lm_head.weight"].T, dropped, balance


def cross_entropy(logits, labels):
    shifted = logits - logits.max(-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    return float(-np.take_along_axis(logp, labels[..., None], -1).mean())


def balance_gradient(params, config, routed, coeff, batch, seq):
    """d(coeff * balance loss) / d router weight of each MoE layer by
    central differences (the choices held, as the counts are constants)."""
    grads = {}
    for prefix, flat, index in routed:
        weight = params[prefix + "gate.weight"]
        def loss(w):
            scores = 1.0 / (1.0 + np.exp(-(flat @ w.T)))
            return coeff * balance_loss(index, scores, batch, seq,
                                        config["n_routed_experts"],
                                        index.shape[1])
        grad = np.zeros_like(weight)
        step = 1e-6
        for i in np.ndindex(*weight.shape):
            up, down = weight.copy(), weight.copy()
            up[i] += step
            down[i] -= step
            grad[i] = (loss(up) - loss(down)) / (2 * step)
        grads[prefix + "gate.weight"] = grad
    return grads


def check_balance_loss(tmp, ids, reference, logits, balance, params, config,
                       routed):
    """The balance loss with coefficient 0.1: forward's moe_aux_loss and the
    loss entry (cross-entropy plus it) against NumPy, and its gradient with
    respect to the router weights (megc's gradient with the loss minus its
    gradient without) against central differences."""
    coeff = 0.1
    labels = reference["labels"].astype(np.int32)
    np.save(os.path.join(tmp, "labels.npy"), labels)
    batch, seq = ids.shape
    case = os.path.join(tmp, "aux")
    e2e_util.run(["megc", "import", FIXTURE, "--seq", str(seq), "--batch",
                  str(batch), "--moe-aux-loss-coeff", str(coeff), "-o",
                  case + ".mlir"])
    e2e_util.run(["megc", case + ".mlir", "-o", case + ".megc"])
    common = ["megc-run", case + ".megc", "--params", FIXTURE, "--input",
              f"input_ids={tmp}/ids.npy", "--output-dir", case]
    e2e_util.run(common + ["--entry", "forward"])
    got_aux = float(e2e_util.read_output(os.path.join(case,
                                                      "moe_aux_loss.npy")))
    e2e_util.run(common + ["--entry", "loss", "--input",
                           f"labels={tmp}/labels.npy"])
    got_loss = float(e2e_util.read_output(os.path.join(case, "loss.npy")))
    want_aux = coeff * balance
    want_loss = cross_entropy(logits, labels) + want_aux
    aux_error = abs(got_aux - want_aux) / want_aux
    loss_error = abs(got_loss - want_loss) / want_loss
    print(f"balance loss (coefficient {coeff}): {got_aux:.6f} vs NumPy "
          f"{want_aux:.6f} (relative error {aux_error:.3g}); loss "
          f"{got_loss:.6f} vs {want_loss:.6f} ({loss_error:.3g})")
    failures = []
    if aux_error > 1e-5 or loss_error > 1e-5:
        failures.append("the balance loss")
    grads = {}
    for tag, flags in (("with", ["--moe-aux-loss-coeff", str(coeff)]),
                       ("without", [])):
        out = os.path.join(tmp, "grad-" + tag)
        e2e_util.run(["megc", "import", FIXTURE, "--seq", str(seq),
                      "--batch", str(batch), "--train", *flags, "-o",
                      out + ".mlir"])
        e2e_util.run(["megc", out + ".mlir", "-o", out + ".megc"])
        e2e_util.run(["megc-run", out + ".megc", "--params", FIXTURE,
                      "--entry", "grad", "--input",
                      f"input_ids={tmp}/ids.npy", "--input",
                      f"labels={tmp}/labels.npy", "--output-dir", out])
        grads[tag] = out
    for name, want in balance_gradient(params, config, routed, coeff, batch,
                                       seq).items():
        got = (e2e_util.read_output(os.path.join(grads["with"],
                                                 f"grad.{name}.npy"))
               - e2e_util.read_output(os.path.join(grads["without"],
                                                   f"grad.{name}.npy")))
        error = e2e_util.relative_error(got, want)
        print(f"balance loss gradient of {name}: relative error "
              f"{error:.3g} (norm {np.linalg.norm(want):.3g})")
        if error > 1e-3:
            failures.append(f"the balance loss's gradient of {name}")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tmp", required=True)
    options = parser.parse_args()
    config = json.load(open(os.path.join(FIXTURE, "config.json")))
    params = {k: v.astype(np.float64) for k, v in e2e_util.read_safetensors(
        os.path.join(FIXTURE, "model.safetensors")).items()}
    reference = e2e_util.read_safetensors(
        os.path.join(FIXTURE, "reference.safetensors"))
    ids = reference["input_ids"].astype(np.int32)
    batch, seq = ids.shape
    tokens = batch * seq
    k, experts = config["num_experts_per_tok"], config["n_routed_experts"]

    failures = []
    routed = []
    logits, dropped, balance = forward(params, config, ids, tokens, "probs",
                                       routed)
    error = e2e_util.relative_error(logits, reference["logits"])
    print(f"NumPy forward without a capacity limit vs transformers: logits "
          f"relative error {error:.3g}, {dropped} dropped")
    if error > 1e-5 or dropped:
        failures.append("the NumPy reference does not reproduce transformers")

    os.makedirs(options.tmp, exist_ok=True)
    np.save(os.path.join(options.tmp, "ids.npy"), ids)
    by_factor = {}
    for factor, policy in [(1.0, "probs"), (1.0, "position"),
                           (0.5, "probs"), (0.5, "position")]:
        capacity = math.ceil(tokens * k / experts * factor)
        want, want_dropped, _ = forward(params, config, ids, capacity, policy)
        case = os.path.join(options.tmp, f"{policy}-{factor}")
        model, artifact = case + ".mlir", case + ".megc"
        e2e_util.run(["megc", "import", FIXTURE, "--seq", str(seq), "--batch",
                      str(batch), "--moe-capacity-factor", str(factor),
                      "--moe-drop-policy", policy, "-o", model])
        e2e_util.run(["megc", model, "-o", artifact])
        e2e_util.run(["megc-run", artifact, "--params", FIXTURE, "--entry",
                      "forward", "--input",
                      f"input_ids={options.tmp}/ids.npy", "--output-dir",
                      case])
        got = e2e_util.read_output(os.path.join(case, "logits.npy"))
        got_dropped = float(e2e_util.read_output(
            os.path.join(case, "dropped_tokens.npy")))
        error = e2e_util.relative_error(got, want)
        print(f"capacity factor {factor} ({capacity} slots per expert), "
              f"policy {policy}: dropped {got_dropped:g} (NumPy "
              f"{want_dropped}), logits relative error {error:.3g}")
        if got_dropped != want_dropped or error > 1e-5:
            failures.append(f"factor {factor}, policy {policy}")
        if not want_dropped:
            failures.append(f"factor {factor} drops nothing: a weak case")
        by_factor.setdefault(factor, []).append(want)
    for factor, outputs in by_factor.items():
        if np.array_equal(*outputs):
            failures.append(f"factor {factor}: both policies drop the same "
                            "choices, so neither is tested")
    failures += check_balance_loss(options.tmp, ids, reference, logits,
                                   balance, params, config, routed)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
