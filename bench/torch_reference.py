"""Checks megc's llama against PyTorch: Hugging Face transformers'
LlamaForCausalLM, an implementation written independently of megc, loaded
with the same weights and run in float64 on the CPU.

For the cases that bench/gpu_prepare.py marks with a llama configuration:
- `grad`: the loss and every grad.<parameter> of megc (the CPU runtime's
  outputs in ref/, and the GPU's in gpu/ when bench/gpu_compare.py ran)
  against torch autograd;
- `train_step`: the parameters after megc's steps against the same number
  of torch.optim.AdamW steps (same lr, betas, eps, weight decay). For a bf16
  model the policy is written in PyTorch too: bf16 weights computing in
  bf16, f32 master weights updated by AdamW from the f32-cast gradients,
  weights re-rounded from the masters after each step (bf16 tolerance).
Prints one line per case and comparison; exit status 1 if any relative
error is above --tolerance. Needs torch, transformers and numpy (the GPU
machine has them; this machine does not).

Usage: python3 bench/torch_reference.py [--cases .gpucheck/cases]
"""
import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import e2e_util  # noqa: E402


def build_model(cfg, weights):
    import torch
    from transformers import LlamaForCausalLM
    from torch_llama import llama_config
    config = llama_config(
        cfg, attention="eager", rms_norm_eps=cfg["eps"],
        rope_theta=cfg["theta"], attention_bias=False, mlp_bias=False,
        attention_dropout=0.0)
    model = LlamaForCausalLM(config).double()
    state = {name: torch.tensor(value, dtype=torch.float64)
             for name, value in weights.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [m for m in missing if "rotary_emb" not in m]
    if missing or unexpected:
        sys.exit(f"weights do not match the model: missing {missing}, "
                 f"unexpected {unexpected}")
    return model


def loss_of(model, ids, labels):
    import torch
    logits = model(input_ids=ids).logits
    # megc's loss: mean token cross-entropy, labels not shifted.
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def check_grad(case, cfg, tolerance):
    import torch
    weights = e2e_util.read_safetensors(os.path.join(case, "initial.safetensors"))
    model = build_model(cfg, weights)
    ids = torch.tensor(np.load(os.path.join(case, "inputs", "input_ids.npy")),
                       dtype=torch.int64)
    labels = torch.tensor(np.load(os.path.join(case, "inputs", "labels.npy")),
                          dtype=torch.int64)
    loss = loss_of(model, ids, labels)
    loss.backward()
    want = {"loss.npy": loss.detach().numpy()}
    for name, param in model.named_parameters():
        want[f"grad.{name}.npy"] = param.grad.numpy()
    rows = []
    for source in ("ref", "gpu"):
        folder = os.path.join(case, source)
        if not os.path.isdir(folder):
            continue
        errors = {file: e2e_util.relative_error(
            e2e_util.read_output(os.path.join(folder, file)), value)
            for file, value in want.items()}
        worst = max(errors, key=errors.get)
        rows.append((f"megc {'cpu' if source == 'ref' else 'cuda'} grad vs "
                     f"torch autograd ({len(errors)} tensors)",
                     worst, errors[worst]))
    return rows


def check_train(case, cfg, tolerance):
    import torch
    spec = json.load(open(os.path.join(case, "case.json")))
    weights = e2e_util.read_safetensors(os.path.join(case, "initial.safetensors"))
    model = build_model(cfg, weights)
    if cfg.get("dtype") == "bf16":
        return check_master_train(case, cfg, spec, model)
    ids = torch.tensor(np.load(os.path.join(case, "inputs", "input_ids.npy")),
                       dtype=torch.int64)
    labels = torch.tensor(np.load(os.path.join(case, "inputs", "labels.npy")),
                          dtype=torch.int64)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg["lr"], betas=tuple(cfg["betas"]),
        eps=cfg["adam_eps"], weight_decay=cfg["weight_decay"])
    for _ in range(spec["steps"]):
        optimizer.zero_grad()
        loss_of(model, ids, labels).backward()
        optimizer.step()
    rows = []
    for source, file in (("ref", "ref_state.safetensors"),
                         ("gpu", "gpu_state.safetensors")):
        path = os.path.join(case, file)
        if not os.path.exists(path):
            continue
        got = e2e_util.read_safetensors(path)
        errors = {name: e2e_util.relative_error(got[name],
                                                param.detach().numpy())
                  for name, param in model.named_parameters()}
        worst = max(errors, key=errors.get)
        rows.append((f"megc {'cpu' if source == 'ref' else 'cuda'} "
                     f"{spec['steps']} train_steps vs torch.optim.AdamW "
                     f"({len(errors)} parameters)", worst, errors[worst]))
    return rows


def check_master_train(case, cfg, spec, model):
    """bf16 weights with f32 master weights, as megc's policy says."""
    import torch
    masters = {name: p.detach().float().clone()
               for name, p in model.named_parameters()}
    model = model.to(torch.bfloat16)
    ids = torch.tensor(np.load(os.path.join(case, "inputs", "input_ids.npy")),
                       dtype=torch.int64)
    labels = torch.tensor(np.load(os.path.join(case, "inputs", "labels.npy")),
                          dtype=torch.int64)
    master_params = [torch.nn.Parameter(m) for m in masters.values()]
    optimizer = torch.optim.AdamW(
        master_params, lr=cfg["lr"], betas=tuple(cfg["betas"]),
        eps=cfg["adam_eps"], weight_decay=cfg["weight_decay"])
    named = dict(model.named_parameters())
    for _ in range(spec["steps"]):
        model.zero_grad()
        logits = model(input_ids=ids).logits.float()
        torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), labels.reshape(-1)).backward()
        for name, master in zip(masters, master_params):
            master.grad = named[name].grad.float()
        optimizer.step()
        with torch.no_grad():
            for name, master in zip(masters, master_params):
                named[name].copy_(master.to(torch.bfloat16))
    rows = []
    for source, file in (("ref", "ref_state.safetensors"),
                         ("gpu", "gpu_state.safetensors")):
        path = os.path.join(case, file)
        if not os.path.exists(path):
            continue
        got = e2e_util.read_safetensors(path)
        errors = {name: e2e_util.relative_error(
            got[f"optimizer.main_param.{name}"], master.detach().double().numpy())
            for name, master in zip(masters, master_params)}
        worst = max(errors, key=errors.get)
        rows.append((f"megc {'cpu' if source == 'ref' else 'cuda'} "
                     f"{spec['steps']} bf16/f32-master train_steps vs the "
                     f"policy in PyTorch ({len(errors)} master weights)",
                     worst, errors[worst], 2e-2))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", default=os.path.join(ROOT, ".gpucheck",
                                                        "cases"))
    parser.add_argument("--tolerance", type=float, default=1e-4)
    options = parser.parse_args()
    failed = False
    for name in sorted(os.listdir(options.cases)):
        case = os.path.join(options.cases, name)
        spec = json.load(open(os.path.join(case, "case.json")))
        cfg = spec.get("torch_llama")
        if not cfg:
            continue
        check = check_train if spec["entry"] == "train_step" else check_grad
        for what, worst, error, *tolerance in check(case, cfg,
                                                    options.tolerance):
            ok = error <= (tolerance[0] if tolerance else options.tolerance)
            failed |= not ok
            print(f"{name}: {'PASS' if ok else 'FAIL'} {what}: worst "
                  f"{worst} {error:.2e}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
