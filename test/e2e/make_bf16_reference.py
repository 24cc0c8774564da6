"""Reference outputs of bf16 training arithmetic, computed independently
with PyTorch: the `llama-bf16` fixture (test/e2e/hf-fixtures) loaded in
torch.bfloat16 (every weight, activation and gradient bf16; PyTorch's CPU
kernels accumulate matrix products and reductions in f32 and round each
op's result to bf16), on the fixture's reference batch, scored with
cross_entropy over all tokens (labels not shifted, as megc's loss takes
them). Writes --out (default test/e2e/bf16-reference/reference.safetensors):

  logits, loss        the bf16 values, stored as F32
  grad.<name>         the bf16 gradient of every parameter, stored as F32

Run by hand where torch and transformers are installed (test/e2e/
bf16_reference.py, run by CI, compares megc's bf16 grad entry with it):

  build/bench-venv/bin/python test/e2e/make_bf16_reference.py
"""
import argparse
import json
import os

import torch
import transformers
from safetensors.torch import load_file, save_file

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "hf-fixtures", "llama-bf16")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.join(
        HERE, "bf16-reference", "reference.safetensors"))
    options = parser.parse_args()
    os.makedirs(os.path.dirname(options.out), exist_ok=True)
    torch.set_num_threads(1)
    model = transformers.LlamaForCausalLM.from_pretrained(
        FIXTURE, attn_implementation="eager", dtype=torch.bfloat16)
    batch = load_file(os.path.join(FIXTURE, "reference.safetensors"))
    ids = batch["input_ids"].long()
    labels = batch["labels"].long()
    logits = model(ids).logits
    assert logits.dtype == torch.bfloat16
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    loss.backward()
    out = {"logits": logits.detach().float().contiguous(),
           "loss": loss.detach().float().reshape(())}
    for name, p in model.named_parameters():
        assert p.grad.dtype == torch.bfloat16, name
        out["grad." + name] = p.grad.float().contiguous()
    save_file(out, options.out, metadata={
        "torch": torch.__version__, "transformers": transformers.__version__,
        "settings": json.dumps({"fixture": "llama-bf16", "dtype": "bfloat16"})})
    print(f"loss {loss.item():.4f} (bf16), {len(out) - 2} gradients")


if __name__ == "__main__":
    main()
