#!/usr/bin/env python3
# Markdown tables of docs/benchmarks.md (moe_layer Results) from `bench/moe_layer --json` output:
#   build/bench/moe_layer --decode-max-tokens 8 --small-batch-max-tokens 64 --json > moe_layer.json
#   python3 bench/moe_layer_tables.py moe_layer.json
import json, sys
d = json.load(open(sys.argv[1]))
res = d["results"]; der = d["derived"]; ce = d["ceilings"]
triad, eig = ce["triad_gbs"], ce["eigen_gflops"]
shapes = []
for r in res:
    if r["shape"] not in shapes: shapes.append(r["shape"])
def cell(s, mix, disp, m):
    for r in res:
        if r["shape"] == s and r["mix"] == mix and r["dispatch"] == disp and r["m"] == m: return r
ms = sorted({r["m"] for r in res})
for s in shapes:
    mixes = []
    for r in res:
        if r["shape"] == s and r["mix"] not in mixes: mixes.append(r["mix"])
    print(f"\n**{s}**, sorted dispatch: median ms; M ≤ 8 as effective GB/s (% triad), M ≥ 64 as useful GFLOP/s (% Eigen)\n")
    print("| mix | layer GB × copies | " + " | ".join(f"M = {m}" for m in ms) + " |")
    print("|---|---:|" + "---:|" * len(ms))
    for mix in mixes:
        L = d["layers"].get(f"{s}/{mix}", {})
        row = f"| {mix} | {L.get('packed_gb', 0):.3f} × {L.get('copies', 1)} |"
        for m in ms:
            c = cell(s, mix, "sorted", m)
            if not c: row += " – |"; continue
            if m <= 8: row += f" {c['median_ms']:.4g} ms, {c['gbs']:.2f} GB/s ({100*c['gbs']/triad:.0f}%) |"
            else: row += f" {c['median_ms']:.4g} ms, {c['gflops']:.1f} GF/s ({100*c['gflops']/eig:.0f}%) |"
        print(row)
print("\n**mask-combine ÷ sorted** (auto ÷ sorted in brackets) and **mixed target** (mixed sorted ÷ (fp4_g32 sorted × active-bytes ratio), target ≤ 1.05)\n")
print("| shape | mix | " + " | ".join(f"M = {m}" for m in ms) + " |")
print("|---|---|" + "---:|" * len(ms))
for s in shapes:
    mixes = []
    for r in res:
        if r["shape"] == s and r["mix"] not in mixes: mixes.append(r["mix"])
    for mix in mixes:
        row = f"| {s} | {mix} |"
        for m in ms:
            so, mc, au = cell(s, mix, "sorted", m), cell(s, mix, "mask-combine", m), cell(s, mix, "auto", m)
            if not so: row += " – |"; continue
            t = f"{mc['median_ms']/so['median_ms']:.2f}×" if mc else "–"
            if au: t += f" [{au['median_ms']/so['median_ms']:.2f}]"
            for x in der:
                if x["shape"] == s and x["mix"] == mix and x["m"] == m and "mixed_over_bytes_scaled_fp4" in x:
                    t += f"; mixed {x['mixed_over_bytes_scaled_fp4']:.2f} " + ("met" if x["mixed_target_met"] else "**missed**")
            row += f" {t} |"
        print(row)
print(f"\nceilings: triad {triad:.1f} GB/s, eigen {eig:.1f} GFLOP/s; load {d['machine']['load_before']} -> {d['machine']['load_after']}")
