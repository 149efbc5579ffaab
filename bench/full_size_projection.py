#!/usr/bin/env python3
"""Projects profile and pack times of full-size checkpoints from the
per-layer figures of a full-size run (docs/benchmarks.md, "Full-size runs").

usage: bench/full_size_projection.py WORKDIR [--json]
WORKDIR is bench/full_size_run.sh's, after its profile, bandwidth and rates
phases: phases.txt (time -v per phase), bandwidth_mbs.txt, profile.json (the
default policy's classes) and rates/sensitivity.json.

Each phase takes max(CPU seconds / cores, bytes read / read bandwidth): the
full-size pack ran within a few percent of that bound. CPU seconds are scaled
from the measured Qwen3-30B-A3B-shaped layer: the calibration pass by the
parameters a token goes through in a layer (attention plus routed and shared
experts); the sensitivity measurement and pack by expert weights, at the
measured CPU seconds per weight of each format of the default mix.
"""
import collections
import json
import os
import sys

REF_EXPERT_WEIGHTS = 3 * 2048 * 768  # bench/synth_checkpoint's default shapes


def load_measured(w):
    phases = {}
    with open(os.path.join(w, "phases.txt")) as f:
        for line in f:
            name, wall, cpu, hwm, read = line.split()
            phases[name] = dict(wall=float(wall), cpu=float(cpu), hwm_kib=int(hwm), read=int(read))
    with open(os.path.join(w, "bandwidth_mbs.txt")) as f:
        read_mb_per_s = float(f.read())
    profile = json.load(open(os.path.join(w, "profile.json")))
    layers = len(profile["allocation"]["layers"])
    mix = collections.Counter(e.get("format", "pruned") for l in profile["allocation"]["layers"] for e in l["experts"])
    sens = json.load(open(os.path.join(w, "rates", "sensitivity.json")))
    per_format = sens["timing"]["sensitivity_seconds_per_format"]
    proxied = set(sens["policy"]["sensitivity"]["proxies"].keys())
    experts, calibration_experts = 16, 2
    direct = sum(v for k, v in per_format.items() if k not in proxied)
    trellis = sum(v for k, v in per_format.items() if k in proxied) / len(proxied)
    pack = {}
    for f, n in (("fp4_g32", 16), ("int8_row", 16), ("trellis2", 2)):
        pack[f] = phases["rates-pack-" + f]["cpu"] / (n * REF_EXPERT_WEIGHTS)
    for f in ("trellis3", "trellis4"):
        pack[f] = pack["trellis2"] * per_format[f] / per_format["trellis2"]
    budget_mix = collections.Counter(e.get("format", "pruned") for l in sens["allocation"]["layers"] for e in l["experts"])
    return {
        # A format's seconds are summed over the tasks that ran it (CPU seconds);
        # the trellis formats ran one matrix over the pool (wall seconds x 2 cores).
        "pass_cpu_s_per_layer": phases["profile"]["cpu"] / layers,
        "sensitivity_cpu_s_per_expert": direct / experts,
        "trellis_cpu_s_per_weight": trellis * 2 / (calibration_experts * REF_EXPERT_WEIGHTS),
        "pack_cpu_s_per_weight": pack,
        "threshold_mix": dict(mix),
        "budget_mix": dict(budget_mix),
        "read_mb_per_s": read_mb_per_s,
    }


def qwen3_attention(h, heads, kv_heads, head_dim):
    return 2 * h * heads * head_dim + 2 * h * kv_heads * head_dim


MODELS = [
    # name, MoE layers, experts, hidden, expert inter, routed top-k, shared experts,
    # attention params per layer, checkpoint bytes per weight (source dtype), total GB of the checkpoint
    dict(name="Qwen3-30B-A3B", layers=48, experts=128, hidden=2048, inter=768, top_k=8, shared=0,
         attention=qwen3_attention(2048, 32, 4, 128), checkpoint_gb=61),
    dict(name="Qwen3-235B-A22B", layers=94, experts=128, hidden=4096, inter=1536, top_k=8, shared=0,
         attention=qwen3_attention(4096, 64, 4, 128), checkpoint_gb=470),
    # MLA: q_a, q_b, kv_a, kv_b, o; FP8 source (one byte a weight).
    dict(name="DeepSeek-V3-671B", layers=58, experts=256, hidden=7168, inter=2048, top_k=8, shared=1,
         attention=7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168,
         checkpoint_gb=690),
    # 3 of 4 layers gated delta nets (in_proj_qkvz, in_proj_ba, out_proj), 1 of 4 gated attention.
    dict(name="Qwen3.5-397B-A17B", layers=60, experts=512, hidden=4096, inter=1024, top_k=10, shared=1,
         attention=(3 * (4096 * 20480 + 4096 * 128 + 8192 * 4096) + (4096 * 16384 + 2 * 4096 * 512 + 8192 * 4096)) // 4,
         checkpoint_gb=800),
]
REF = MODELS[0]


def per_layer_active(m):
    return m["attention"] + (m["top_k"] + m["shared"]) * 3 * m["hidden"] * m["inter"]


def project(m, cores, measured):
    expert_weights = 3 * m["hidden"] * m["inter"]
    ref_expert_weights = 3 * REF["hidden"] * REF["inter"]
    layer_weights = m["experts"] * expert_weights
    pass_cpu = measured["pass_cpu_s_per_layer"] * per_layer_active(m) / per_layer_active(REF) * m["layers"]
    sens_cpu = (measured["sensitivity_cpu_s_per_expert"] * expert_weights / ref_expert_weights
                * m["experts"] * m["layers"]
                + 12 * 3 * expert_weights * measured["trellis_cpu_s_per_weight"])
    def pack_cpu(mix):
        total = sum(mix.values())
        per_weight = sum(measured["pack_cpu_s_per_weight"][f] * n / total for f, n in mix.items() if f != "pruned")
        return per_weight * layer_weights * m["layers"]

    io = m["checkpoint_gb"] * 1e3 / measured["read_mb_per_s"]
    hours = lambda cpu: max(cpu / cores, io) / 3600
    return {
        "model": m["name"],
        "cores": cores,
        "expert_weights_G": round(layer_weights * m["layers"] / 1e9),
        "read_h": round(io / 3600, 2),
        "profile_pass_h": round(hours(pass_cpu), 2),
        "profile_sensitivity_h": round(sens_cpu / cores / 3600, 2),
        "pack_thresholds_h": round(hours(pack_cpu(measured["threshold_mix"])), 2),
        "pack_budget_h": round(hours(pack_cpu(measured["budget_mix"])), 2),
    }


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        sys.exit("usage: bench/full_size_projection.py WORKDIR [--json]")
    measured = load_measured(args[0])
    rows = [project(m, c, measured) for c in (2, 64) for m in MODELS]
    if "--json" in sys.argv:
        print(json.dumps({"measured": measured, "projections": rows}, indent=1))
        return
    print("measured: " + json.dumps(measured))
    print("| model | cores | expert weights | read once | profile pass | profile sensitivity "
          "| pack, threshold classes | pack, budget allocation |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['cores']} | {r['expert_weights_G']} G | {r['read_h']} h | {r['profile_pass_h']} h "
              f"| {r['profile_sensitivity_h']} h | {r['pack_thresholds_h']} h | {r['pack_budget_h']} h |")


if __name__ == "__main__":
    main()
