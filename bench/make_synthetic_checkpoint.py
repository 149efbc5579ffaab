#!/usr/bin/env python3
"""Writes a random bf16 Qwen3-MoE checkpoint of a chosen size (standard library
only), for benchmarks that need a large model: verify and pack throughput.
Values are finite bf16 with |w| < 2 (the high byte is drawn from a range that
excludes Inf/NaN exponents).

  bench/make_synthetic_checkpoint.py OUT [--hidden 2048] [--inter 768]
      [--experts 32] [--layers 2] [--top-k 4]
"""
import argparse, json, os, struct

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--hidden", type=int, default=2048)
p.add_argument("--inter", type=int, default=768)
p.add_argument("--experts", type=int, default=32)
p.add_argument("--layers", type=int, default=2)
p.add_argument("--top-k", type=int, default=4)
a = p.parse_args()
H, I, E, L = a.hidden, a.inter, a.experts, a.layers
heads, hd, vocab = 16, 128, 256

# high byte -> 0x3c..0x3f with the random sign bit: exponents of 2^-7 .. 2^0
table = bytes(0x3C | (b & 3) | (b & 0x80) for b in range(256))


def rand_bf16(n):
    d = bytearray(os.urandom(2 * n))
    d[1::2] = bytes(d[1::2]).translate(table)
    return bytes(d)


tensors = [("model.embed_tokens.weight", [vocab, H]), ("model.norm.weight", [H]), ("lm_head.weight", [vocab, H])]
for l in range(L):
    pre = f"model.layers.{l}."
    tensors += [(pre + "input_layernorm.weight", [H]), (pre + "post_attention_layernorm.weight", [H]),
                (pre + "self_attn.q_proj.weight", [heads * hd, H]), (pre + "self_attn.k_proj.weight", [4 * hd, H]),
                (pre + "self_attn.v_proj.weight", [4 * hd, H]), (pre + "self_attn.o_proj.weight", [H, heads * hd]),
                (pre + "self_attn.q_norm.weight", [hd]), (pre + "self_attn.k_norm.weight", [hd]),
                (pre + "mlp.gate.weight", [E, H])]
    for e in range(E):
        for proj, shape in (("gate_proj", [I, H]), ("up_proj", [I, H]), ("down_proj", [H, I])):
            tensors.append((f"{pre}mlp.experts.{e}.{proj}.weight", shape))

header, off = {}, 0
for name, shape in tensors:
    n = 1
    for d in shape:
        n *= d
    header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + 2 * n]}
    off += 2 * n
hb = json.dumps(header, separators=(",", ":")).encode()
hb += b" " * (-len(hb) % 8)
os.makedirs(a.out, exist_ok=True)
with open(os.path.join(a.out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb)
    for name, shape in tensors:
        n = 1
        for d in shape:
            n *= d
        f.write(rand_bf16(n))
config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": vocab, "hidden_size": H,
          "intermediate_size": I, "moe_intermediate_size": I, "num_hidden_layers": L, "num_attention_heads": heads,
          "num_key_value_heads": 4, "head_dim": hd, "num_experts": E, "num_experts_per_tok": a.top_k,
          "norm_topk_prob": True, "rms_norm_eps": 1e-6, "rope_theta": 1e6, "tie_word_embeddings": False,
          "max_position_embeddings": 4096, "dtype": "bfloat16"}
with open(os.path.join(a.out, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
print(f"{a.out}: {off / 2**20:.0f} MiB of bf16 weights")
