#!/usr/bin/python3
"""Makes a tiny random dense Qwen3NextForCausalLM and what transformers 5.x computes for it.

usage: qwen3_next_reference.py SHARED_DIR OUT_DIR
  SHARED_DIR  the fixtures folder (its models/tiny-qwen3.5 gives the tokenizer and the prompts of
              reference/tiny-qwen3.5/cases.json)
  OUT_DIR     gets models/tiny-qwen3-next (config.json, model.safetensors in bf16, tokenizer files) and
              reference/tiny-qwen3-next (cases.json with last_logits, hidden_states and greedy steps, in the layout
              of reference/tiny-qwen3.5: raw little-endian float32 files beside it)

Every layer is dense (num_experts 0) and there is no MTP head, so foldserve loads it. Weights are random; norms
and the DeltaNet decay parameters are moved off their initial values so that a misapplied weight shows. As for
tiny-qwen3.5, the forward runs in float32 from the bf16 weights, without a cache, on the GPU when there is one.
"""
import json
import shutil
import sys
from pathlib import Path

import torch
import transformers
from transformers import AutoTokenizer, Qwen3NextConfig, Qwen3NextForCausalLM

GREEDY_STEPS = 24


def make_config():
    return Qwen3NextConfig(
        vocab_size=151936,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        hidden_act="silu",
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
        attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        linear_conv_kernel_dim=4,
        linear_key_head_dim=16,
        linear_value_head_dim=8,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
        num_experts=0,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        bos_token_id=151643,
        eos_token_id=151645,
        initializer_range=0.15,
    )


def make_model(config):
    torch.manual_seed(20261201)
    model = Qwen3NextForCausalLM(config).to(torch.bfloat16).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name.endswith("_norm.weight") or name == "model.norm.weight":
                p.copy_(torch.randn_like(p) * 0.1)  # (1 + w) norms, stored near 0
            elif name.endswith("linear_attn.norm.weight"):
                p.copy_(1.0 + torch.randn_like(p) * 0.1)  # the gated norm's plain weight
            elif name.endswith("dt_bias"):
                p.copy_(torch.randn_like(p) * 0.5)
            elif name.endswith("A_log"):
                p.copy_(torch.rand_like(p) * 2.0)
    assert not any(k.startswith("mtp.") for k in model.state_dict())
    return model


def cases_of(shared):
    source = json.loads((shared / "reference" / "tiny-qwen3.5" / "cases.json").read_text())
    return [{k: c[k] for k in ("name", "text", "messages", "add_special_tokens", "ids")} for c in source["cases"]]


def write_f32(path, tensor):
    path.write_bytes(tensor.detach().to(torch.float32).contiguous().cpu().numpy().astype("<f4").tobytes())


def run_case(model, case, out, device):
    ids = torch.tensor([case["ids"]], device=device)
    with torch.no_grad():
        result = model(input_ids=ids, output_hidden_states=True, use_cache=False)
    logits = result.logits[0].float()
    hidden = torch.stack([h[0].float() for h in result.hidden_states])
    last = logits[-1]
    write_f32(out / f"{case['name']}.last_logits.f32", last)
    write_f32(out / f"{case['name']}.hidden_states.f32", hidden)
    prompt_top5 = []
    for row in logits:
        v, i = torch.topk(row, 5)
        prompt_top5.append([[int(a), float(b)] for a, b in zip(i, v)])
    greedy, seq = [], ids
    for _ in range(GREEDY_STEPS):
        with torch.no_grad():
            row = model(input_ids=seq, use_cache=False).logits[0, -1].float()
        v, i = torch.topk(row, 5)
        greedy.append({"id": int(i[0]), "top5": [[int(a), float(b)] for a, b in zip(i, v)],
                       "margin": float(v[0] - v[1])})
        seq = torch.cat([seq, i[:1].view(1, 1)], dim=1)
    return dict(case, greedy=greedy, prompt_top5=prompt_top5,
                last_logits={"file": f"{case['name']}.last_logits.f32", "shape": list(last.shape)},
                hidden_states={"file": f"{case['name']}.hidden_states.f32", "shape": list(hidden.shape),
                               "note": "index 0 = embeddings, i = after layer i, last = after final norm"})


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    shared, out = Path(sys.argv[1]), Path(sys.argv[2])
    model_dir = out / "models" / "tiny-qwen3-next"
    ref_dir = out / "reference" / "tiny-qwen3-next"
    model_dir.mkdir(parents=True, exist_ok=True)
    ref_dir.mkdir(parents=True, exist_ok=True)

    model = make_model(make_config())
    model.save_pretrained(model_dir, safe_serialization=True)
    tokenizer_from = shared / "models" / "tiny-qwen3.5"
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        shutil.copy(tokenizer_from / name, model_dir / name)
    AutoTokenizer.from_pretrained(model_dir)  # the copied tokenizer loads

    # Computed as tiny-qwen3.5's reference: float32 from the bf16 weights just saved.
    device = "cuda" if torch.cuda.is_available() else "cpu"
    reloaded = Qwen3NextForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
    cases = [run_case(reloaded, c, ref_dir, device) for c in cases_of(shared)]
    saved = json.loads((model_dir / "config.json").read_text())
    (ref_dir / "cases.json").write_text(json.dumps({
        "model": "tiny-qwen3-next",
        "compute": "float32 from the bf16 weights",
        "transformers": transformers.__version__,
        "config_as_saved_by_transformers": saved,
        "cases": cases,
    }, indent=1))
    print(f"wrote {model_dir} and {ref_dir} ({len(cases)} cases, transformers {transformers.__version__})")


if __name__ == "__main__":
    main()
