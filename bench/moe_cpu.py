"""Benchmark: a DeepSeek-V3 mixture-of-experts model against a dense model
with the same active parameters, on 4 CPU ranks, in one run on one machine.

Both are `megc gen deepseek` models (4 layers x 256, 4 heads, MLA with
kv_lora_rank 64, a plain q_proj, qk_nope 32, qk_rope 16, v 32; vocab 512,
seq 128, global batch 8, f32) trained data-parallel on 4 ranks
(`--mesh dp_shard=4`, replicated parameters) under
`mpirun -n 4 --oversubscribe`. The dense model (the baseline) has a SwiGLU
MLP of width 768 in every layer; the MoE model routes each token to 2 of 8
experts of width 256 plus 1 shared expert of width 256 (768 active, like
the dense MLP), with room for every token in each expert
(`--moe-capacity-factor 0`: nothing dropped) and with a capacity factor of
1.25 (each expert holds 1.25x its even share of a rank's 512 routed
choices). Reported per model: tokens per second over the global batch
(rank 0's median train_step after warm-up), its ratio to the dense model,
the bytes each rank sends per step as `megc inspect` counts them against
the textbook gradient all-reduce (ring: 2 (g - 1) / g of the parameter
bytes), and the weights each rank holds. Without expert parallelism every
rank holds every expert, so the MoE model's gradient all-reduce carries
all 8 experts. With expert parallelism (`--mesh ep=4`) each rank holds 2
of the 8 experts, and two all-to-alls per MoE layer carry each rank's
expert slots (8 experts x capacity x 256, f32) to the experts' ranks and
the outputs back, forward and backward: the textbook volume per rank is
(g - 1) / g of those slots per all-to-all, plus the all-reduce of the
parameters that are not experts. Four ranks share this machine's cores.

Usage: python3 bench/moe_cpu.py --build build [--steps 6]
"""
import argparse
import os
import shutil
import tempfile

from mpi_bench import Bench

LAYERS, HIDDEN, HEADS, VOCAB, SEQ, BATCH, RANKS = 4, 256, 4, 512, 128, 8, 4
KV_LORA, NOPE, ROPE, V = 64, 32, 16, 32
EXPERTS, TOP_K, SHARED, MOE_FFN = 8, 2, 1, 256
DENSE_FFN = (TOP_K + SHARED) * MOE_FFN
MB = 1e6


def parameters(moe):
    """Parameter count of the model."""
    attention = (HIDDEN * HEADS * (NOPE + ROPE) + HIDDEN * (KV_LORA + ROPE)
                 + KV_LORA + KV_LORA * HEADS * (NOPE + V)
                 + HEADS * V * HIDDEN)
    mlp = (3 * HIDDEN * MOE_FFN * (EXPERTS + SHARED) + HIDDEN * EXPERTS
           if moe else 3 * HIDDEN * DENSE_FFN)
    return 2 * VOCAB * HIDDEN + HIDDEN + LAYERS * (attention + mlp + 2 * HIDDEN)


def expert_parameters():
    """Parameter count of the routed experts of every layer."""
    return LAYERS * 3 * HIDDEN * MOE_FFN * EXPERTS


def capacity(factor):
    """Slots per expert for one rank's tokens (meg.moe_assign's rule)."""
    tokens = BATCH // RANKS * SEQ
    if factor == 0:
        return tokens
    return min(tokens, -(-tokens * TOP_K * factor // EXPERTS))


def textbook(is_moe, ep, factor):
    """Bytes each rank sends per step: the ring all-reduce of the
    gradients of what the data-parallel group replicates, and under expert
    parallelism four all-to-alls per MoE layer (dispatch and combine,
    forward and backward)."""
    replicated = parameters(is_moe) - (expert_parameters() if ep > 1 else 0)
    sent = 2 * (RANKS - 1) / RANKS * 4 * replicated
    if ep > 1:
        slots = EXPERTS * capacity(factor) * HIDDEN * 4
        sent += LAYERS * 4 * (ep - 1) / ep * slots
    return sent


def held(is_moe, ep):
    """Weight bytes each rank holds."""
    return 4 * (parameters(is_moe) - expert_parameters() * (ep - 1) / ep
                if ep > 1 else parameters(is_moe))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--steps", type=int, default=6)
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="moe-bench-")
    bench = Bench(options.build, tmp, ranks=RANKS, vocab=VOCAB, batch=BATCH,
                  seq=SEQ)
    common = ["--layers", str(LAYERS), "--hidden", str(HIDDEN), "--heads",
              str(HEADS), "--vocab", str(VOCAB), "--seq", str(SEQ),
              "--batch", str(BATCH), "--q-lora-rank", "0", "--kv-lora-rank",
              str(KV_LORA), "--qk-nope-dim", str(NOPE), "--qk-rope-dim",
              str(ROPE), "--v-head-dim", str(V), "--train"]
    data = ["--mesh", f"dp_shard={RANKS}"]
    expert = ["--mesh", f"ep={RANKS}"]
    moe = ["--ffn", str(DENSE_FFN), "--dense-layers", "0", "--experts",
           str(EXPERTS), "--top-k", str(TOP_K), "--expert-groups", "1",
           "--top-groups", "1", "--shared-experts", str(SHARED), "--moe-ffn",
           str(MOE_FFN)]
    capped = ["--moe-capacity-factor", "1.25"]
    # (name, MoE, ep, capacity factor, flags)
    models = [
        ("dense, ffn 768", False, 1, 0, data + ["--ffn", str(DENSE_FFN),
                                                "--dense-layers",
                                                str(LAYERS)]),
        ("MoE 2 of 8 + 1 shared", True, 1, 0, data + moe),
        ("MoE, capacity 1.25", True, 1, 1.25, data + moe + capped),
        (f"MoE, ep={RANKS}", True, RANKS, 0, expert + moe),
        (f"MoE, ep={RANKS}, cap 1.25", True, RANKS, 1.25,
         expert + moe + capped),
    ]
    rows = []
    for index, (name, is_moe, ep, factor, flags) in enumerate(models):
        artifact, figures = bench.compile(f"model{index}", common + flags,
                                          preset="deepseek")
        median, peak = bench.train(artifact, options.steps)
        tokens_per_s = BATCH * SEQ / (median / 1e3)
        rows.append((name, median, tokens_per_s, figures["sent"],
                     textbook(is_moe, ep, factor) / MB, figures["weights"],
                     held(is_moe, ep) / MB, peak))
    base = rows[0]
    print(f"deepseek {LAYERS} x {HIDDEN}, {HEADS} heads (MLA), vocab {VOCAB}, "
          f"seq {SEQ}, global batch {BATCH}, f32, {RANKS} ranks on "
          f"{os.cpu_count()} cores; x: ratio to {base[0]}")
    print(f"{'model':24s} {'step ms':>8s} {'tokens/s':>9s} {'x':>5s} "
          f"{'sent MB':>8s} {'textbook':>8s} {'weights MB':>10s} "
          f"{'textbook':>8s} {'peak RSS MB':>11s}")
    for name, median, rate, sent, want, weights, want_w, peak in rows:
        print(f"{name:24s} {median:8.1f} {rate:9.0f} {rate / base[2]:5.2f} "
              f"{sent:8.3f} {want:8.3f} {weights:10.3f} {want_w:8.3f} "
              f"{peak:11.1f}")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
