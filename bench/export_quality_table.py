#!/usr/bin/env python3
"""The markdown tables of bench/export_quality.sh's WORKDIR: per model, bits per
byte, KL against the unpruned model and top-1 agreement of every export, with
the dropped experts' share of the routed slots and of the REAP score (the mean
over MoE layers, from each export's --json-out summary)."""
import collections
import json
import os
import re
import sys


def main(work):
    rows = [json.loads(l) for l in open(os.path.join(work, "results.jsonl"))]
    refused_path = os.path.join(work, "refused.jsonl")
    refused = [json.loads(l) for l in open(refused_path)] if os.path.exists(refused_path) else []
    base, by_model = {}, collections.OrderedDict()
    for r in rows:
        name = os.path.basename(r["model"].rstrip("/"))
        m = re.match(r"(.+)-(0\.125|0\.25|0\.5)-(reap|usage|random)$", name)
        if not m:
            base[name] = r
            by_model.setdefault(name, [])
        else:
            by_model.setdefault(m.group(1), []).append((float(m.group(2)), m.group(3), r, name))
    out = []
    for model, exports in by_model.items():
        b = base[model]
        out.append(f"**{model}** (unpruned: {b['bits_per_byte']:.4f} bits per byte)\n")
        out.append("| pruned | rank by | experts | bits/byte | Δ bits/byte | KL (nats) | top-1 agree | dropped usage | dropped REAP |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for fraction, rank, r, name in exports:
            s = json.load(open(os.path.join(work, name + ".json")))
            layers = s["layers"]
            usage = sum(l["dropped_usage_share"] for l in layers) / len(layers)
            reap = sum(l["dropped_reap_share"] for l in layers) / len(layers)
            out.append(f"| {fraction * 100:g}% | {rank} | {s['experts_before']} → {s['experts_after']} | "
                       f"{r['bits_per_byte']:.4f} | {r['bits_per_byte'] - b['bits_per_byte']:+.4f} | "
                       f"{r['kl_nats']:.4f} | {r['top1_agree'] * 100:.1f}% | {usage * 100:.1f}% | {reap * 100:.1f}% |")
        for x in refused:
            if os.path.basename(x["model"]).startswith(model + "-"):
                out.append(f"\n`{os.path.basename(x['model'])}` refused: {x['refused']}")
        out.append("")
    print("\n".join(out))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: export_quality_table.py WORKDIR")
    main(sys.argv[1])
