#!/usr/bin/python3
"""How far transformers' own bfloat16 forward lands from a fixture's float32 reference answers.

usage: bf16_gap.py MODEL_DIR REFERENCE_DIR
  MODEL_DIR      a text fixture's checkpoint (e.g. ../shared/models/tiny-qwen3.5)
  REFERENCE_DIR  its reference answers (e.g. ../shared/reference/tiny-qwen3.5: cases.json with last_logits,
                 hidden_states and greedy steps, raw little-endian float32 files beside it)

For each case it prints the relative L2 error of the last logits and of every hidden state, and the first greedy
step whose id differs with the reference margin there: the yardstick for a bf16 backend's tolerance (the CUDA
backend's conformance bound is 2e-2). The float32 pass comes first and must print zeros.
"""
import json
import sys

import numpy as np
import torch
from transformers import AutoModelForCausalLM


def rel_l2(got, want):
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def main(model_dir, reference_dir):
    cases = json.load(open(f"{reference_dir}/cases.json"))["cases"]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    for dtype in (torch.float32, torch.bfloat16):
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(device).eval()
        for case in cases:
            ids = torch.tensor([case["ids"]], device=device)
            with torch.no_grad():
                out = model(ids, output_hidden_states=True)
            logits = out.logits[0, -1].float().cpu().numpy()
            want = np.fromfile(f"{reference_dir}/{case['last_logits']['file']}", dtype=np.float32)
            states = case["hidden_states"]
            want_states = np.fromfile(f"{reference_dir}/{states['file']}", dtype=np.float32).reshape(states["shape"])
            hidden = [rel_l2(h[0].float().cpu().numpy(), want_states[i]) for i, h in enumerate(out.hidden_states)]
            steps = case["greedy"]
            greedy = model.generate(ids, max_new_tokens=len(steps), do_sample=False)[0, ids.shape[1]:].tolist()
            differ = next((i for i, (a, s) in enumerate(zip(greedy, steps)) if a != s["id"]), None)
            margin = f" (reference margin {steps[differ]['margin']:.3g})" if differ is not None else ""
            print(f"{str(dtype):15s} {case['name']:15s} last logits {rel_l2(logits, want):.4g}, hidden states "
                  f"{' '.join(f'{e:.3g}' for e in hidden)}, first greedy difference at step {differ}{margin}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
