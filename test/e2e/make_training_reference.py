"""Reference outputs for megc's training loop, computed independently with
PyTorch and transformers: 20 AdamW steps of the `llama` fixture
(test/e2e/hf-fixtures) on consecutive windows of a token file, with
Megatron's warmup + cosine learning-rate schedule (written out below, not
taken from megc), torch.nn.utils.clip_grad_norm_ at a norm that clips
some steps and not others, and each global batch of 8 rows run as 4
micro-batches of 2 whose gradients accumulate (each loss divided by 4, as
Megatron does). Writes, into --out (default
test/e2e/training-reference):

  tokens.bin              the token file (uint16), as megc-run --data reads it
  steps.json              the settings, and per step loss, grad_norm (before
                          clipping, as clip_grad_norm_ returns it) and lr
  final.safetensors       every parameter after the last step (f32)

Run by hand where torch and transformers are installed (test/e2e/
train_schedule.py, run by CI, compares megc against these files):

  build/bench-venv/bin/python test/e2e/make_training_reference.py
"""
import argparse
import json
import math
import os

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))

SETTINGS = dict(steps=20, batch=8, micro_batches=4, seq=8, lr=0.01, min_lr=0.001, warmup=3,
                decay=20, betas=[0.9, 0.95], eps=1e-8, weight_decay=0.1,
                clip_grad=1.8)


def megatron_lr(n, s):
    """Megatron's warmup + cosine decay for update n (from 0)."""
    if s["warmup"] > 0 and n <= s["warmup"]:
        return s["lr"] * n / s["warmup"]
    if n > s["decay"]:
        return s["min_lr"]
    r = (n - s["warmup"]) / (s["decay"] - s["warmup"])
    return s["min_lr"] + 0.5 * (math.cos(math.pi * r) + 1) * (s["lr"] - s["min_lr"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(HERE, "training-reference"))
    options = parser.parse_args()
    os.makedirs(options.out, exist_ok=True)
    torch.set_num_threads(1)
    s = SETTINGS

    rng = np.random.default_rng(7)
    model = transformers.LlamaForCausalLM.from_pretrained(
        os.path.join(HERE, "hf-fixtures", "llama"), attn_implementation="eager")
    vocab = model.config.vocab_size
    windows = s["steps"] * s["batch"]
    tokens = rng.integers(0, vocab, windows * s["seq"] + 1).astype(np.uint16)
    tokens.tofile(os.path.join(options.out, "tokens.bin"))

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=s["lr"], betas=tuple(s["betas"]),
                                  eps=s["eps"], weight_decay=s["weight_decay"])
    steps = []
    ids_all = torch.from_numpy(tokens.astype(np.int64))
    for n in range(s["steps"]):
        rows = []
        for r in range(s["batch"]):
            w = n * s["batch"] + r
            rows.append(ids_all[w * s["seq"]:w * s["seq"] + s["seq"] + 1])
        window = torch.stack(rows)
        lr = megatron_lr(n, s)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad()
        micro = s["batch"] // s["micro_batches"]
        loss = 0.0
        for k in range(s["micro_batches"]):
            part = window[k * micro:(k + 1) * micro]
            ids, labels = part[:, :-1], part[:, 1:]
            logits = model(ids).logits
            micro_loss = torch.nn.functional.cross_entropy(
                logits.reshape(-1, vocab), labels.reshape(-1))
            (micro_loss / s["micro_batches"]).backward()
            loss += micro_loss.item() / s["micro_batches"]
        norm = torch.nn.utils.clip_grad_norm_(params, s["clip_grad"])
        optimizer.step()
        steps.append(dict(loss=loss, grad_norm=norm.item(), lr=lr))

    clipped = sum(step["grad_norm"] > s["clip_grad"] for step in steps)
    assert 0 < clipped < len(steps), f"clipping active on {clipped} steps"
    with open(os.path.join(options.out, "steps.json"), "w") as f:
        json.dump(dict(settings=s, steps=steps,
                       torch=torch.__version__,
                       transformers=transformers.__version__), f, indent=1)
    save_file({name: p.detach().contiguous() for name, p in
               model.named_parameters()},
              os.path.join(options.out, "final.safetensors"))
    print(f"{len(steps)} steps, clipping active on {clipped}; loss "
          f"{steps[0]['loss']:.4f} -> {steps[-1]['loss']:.4f}")


if __name__ == "__main__":
    main()
