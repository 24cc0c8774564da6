"""Reference outputs for a loss that ignores padding, computed independently
with PyTorch and transformers: the `llama` fixture (test/e2e/hf-fixtures)
on one batch of 4 rows x 8 tokens whose labels hold -100 in different
numbers per row (0, 1, 5 and 7 of 8: the halves of the batch count 15 and
4 labels), scored with torch.nn.functional.cross_entropy(...,
ignore_index=-100) over the whole batch (labels not shifted, as megc's loss takes them), then one
torch.optim.AdamW step on it. Writes, into --out (default
test/e2e/ignore-index-reference):

  batch.safetensors      input_ids and labels (I32 [4, 8]), and loss (F32)
  grads.safetensors      the gradient of every parameter (F32)
  stepped.safetensors    every parameter after the AdamW step (F32)
  settings.json          the AdamW settings and the library versions

Run by hand where torch and transformers are installed (test/e2e/
ignore_index.py, run by CI, compares megc against these files on one rank,
with micro-batches and on two data-parallel ranks):

  build/bench-venv/bin/python test/e2e/make_ignore_index_reference.py
"""
import argparse
import json
import os

import numpy as np
import torch
import transformers
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))

SETTINGS = dict(batch=4, seq=8, ignored_per_row=[0, 1, 5, 7], lr=0.01,
                betas=[0.9, 0.95], eps=1e-8, weight_decay=0.1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out",
                        default=os.path.join(HERE, "ignore-index-reference"))
    options = parser.parse_args()
    os.makedirs(options.out, exist_ok=True)
    torch.set_num_threads(1)
    s = SETTINGS
    model = transformers.LlamaForCausalLM.from_pretrained(
        os.path.join(HERE, "hf-fixtures", "llama"), attn_implementation="eager")
    vocab = model.config.vocab_size

    rng = np.random.default_rng(11)
    ids = rng.integers(0, vocab, (s["batch"], s["seq"])).astype(np.int32)
    labels = rng.integers(0, vocab, (s["batch"], s["seq"])).astype(np.int32)
    for row, ignored in enumerate(s["ignored_per_row"]):
        labels[row, rng.choice(s["seq"], ignored, replace=False)] = -100

    logits = model(torch.from_numpy(ids.astype(np.int64))).logits
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, vocab),
        torch.from_numpy(labels.astype(np.int64)).reshape(-1),
        ignore_index=-100)
    loss.backward()
    grads = {name: p.grad.detach().clone().contiguous()
             for name, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=s["lr"],
                                  betas=tuple(s["betas"]), eps=s["eps"],
                                  weight_decay=s["weight_decay"])
    optimizer.step()

    save_file({"input_ids": torch.from_numpy(ids),
               "labels": torch.from_numpy(labels),
               "loss": loss.detach().reshape(())},
              os.path.join(options.out, "batch.safetensors"))
    save_file(grads, os.path.join(options.out, "grads.safetensors"))
    save_file({name: p.detach().contiguous()
               for name, p in model.named_parameters()},
              os.path.join(options.out, "stepped.safetensors"))
    with open(os.path.join(options.out, "settings.json"), "w") as f:
        json.dump(dict(settings=s, torch=torch.__version__,
                       transformers=transformers.__version__), f, indent=1)
    print(f"loss {loss.item():.6f} over {(labels != -100).sum()} of "
          f"{labels.size} labels")


if __name__ == "__main__":
    main()
