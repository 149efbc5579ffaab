#!/usr/bin/env python3
"""Checks an `expertquant export` folder in HF transformers.

Loads the export with AutoModelForCausalLM (float32, eager attention), fails
when transformers reports a missing, unexpected or mismatched weight (the
loading info, and any such warning it logs), then scores a text with the
window rule of `expertquant perplexity` (non-overlapping windows of --ctx
tokens, the first token of each not scored) and compares the bits per byte
with expertquant's figure for the same export, given with --expertquant-bpb
or measured by running --expertquant BINARY. Prints one JSON line; exit 0
when both checks pass, 1 otherwise.

Byte-level models only (vocabulary 256: token id = byte), as the reference
models of ../shared are. A source released as MXFP4 (gpt-oss) is loaded with
Mxfp4Config(dequantize=True) (--dequantize-mxfp4), as its reference outputs
were computed. transformers 5.17 cannot load the DeepSeek FP8 layout of
../shared (its FP8 dequantization derives the block size from the scale grid;
see that model's README), so that export is checked by the CPU tests only.

  python3 bench/export_transformers_check.py --export OUT --text ../shared/corpus/eval_prose.txt \
      --max-bytes 65536 --ctx 512 --expertquant build/expertquant
"""

import argparse
import json
import logging
import math
import subprocess
import sys
import warnings

LOAD_WARNING_WORDS = ("not used", "newly initialized", "missing", "unexpected", "mismatch", "not initialized")


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def load(path, dequantize_mxfp4, device):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    handler = Collect()
    tf_logger = logging.getLogger("transformers")
    tf_logger.addHandler(handler)
    transformers.logging.set_verbosity_warning()
    kwargs = dict(dtype=torch.float32, attn_implementation="eager", output_loading_info=True)
    if dequantize_mxfp4:
        kwargs["quantization_config"] = transformers.Mxfp4Config(dequantize=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model, info = AutoModelForCausalLM.from_pretrained(path, experts_implementation="eager", **kwargs)
        except TypeError:  # a transformers without experts_implementation
            model, info = AutoModelForCausalLM.from_pretrained(path, **kwargs)
    tf_logger.removeHandler(handler)
    messages = handler.messages + [str(w.message) for w in caught]
    problems = {k: sorted(map(str, v)) for k, v in (info or {}).items() if hasattr(v, "__len__") and len(v)}
    load_warnings = [m for m in messages if any(w in m.lower() for w in LOAD_WARNING_WORDS)]
    # The MXFP4 dequantizer writes its experts in bf16 whatever dtype was
    # asked; the reference outputs are float32 of the dequantized weights.
    return model.float().to(device).eval(), problems, load_warnings


def bits_per_byte(model, data, ctx, device, batch=8):
    import torch

    windows = [data[i:i + ctx] for i in range(0, len(data), ctx)]
    windows = [w for w in windows if len(w) >= 2]
    nats, scored = 0.0, 0
    with torch.no_grad():
        for b in range(0, len(windows), batch):
            group = windows[b:b + batch]
            by_len = {}
            for w in group:
                by_len.setdefault(len(w), []).append(w)
            for n, same in by_len.items():
                ids = torch.tensor([list(w) for w in same], dtype=torch.long, device=device)
                logits = model(input_ids=ids).logits.float()
                logp = torch.log_softmax(logits[:, :-1, :], dim=-1)
                target = ids[:, 1:]
                nats -= logp.gather(-1, target.unsqueeze(-1)).sum().item()
                scored += target.numel()
    return nats / scored / math.log(2), scored


def expertquant_bpb(binary, export, text, max_bytes, ctx):
    cmd = [binary, "perplexity", "--model", export, "--text", text, "--ctx", str(ctx), "--json"]
    if max_bytes:
        cmd += ["--max-tokens", str(max_bytes)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    for key in ("bits_per_byte", "bits_per_token", "bits"):
        if key in j:
            return float(j[key])
    raise SystemExit("expertquant perplexity --json: no bits per byte in " + out[:200])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--export", required=True, help="folder written by expertquant export")
    ap.add_argument("--text", required=True, help="plain text (bytes are the tokens)")
    ap.add_argument("--max-bytes", type=int, default=65536, help="score only the first N bytes (0 = all)")
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--expertquant-bpb", type=float, help="expertquant's bits per byte on the same text")
    ap.add_argument("--expertquant", help="expertquant binary: measure that figure with `perplexity --json`")
    ap.add_argument("--tolerance", type=float, default=0.002)
    ap.add_argument("--dequantize-mxfp4", action="store_true", help="load MXFP4 experts dequantized")
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    a = ap.parse_args()

    import torch
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    with open(a.text, "rb") as f:
        data = f.read()
    if a.max_bytes:
        data = data[:a.max_bytes]
    model, problems, load_warnings = load(a.export, a.dequantize_mxfp4, device)
    if model.config.vocab_size != 256:
        raise SystemExit(f"{a.export}: vocabulary {model.config.vocab_size}, this check scores bytes (256)")
    bpb, scored = bits_per_byte(model, data, a.ctx, device)
    ours = a.expertquant_bpb
    if ours is None and a.expertquant:
        ours = expertquant_bpb(a.expertquant, a.export, a.text, a.max_bytes, a.ctx)
    diff = None if ours is None else abs(bpb - ours)
    ok = not problems and not load_warnings and (diff is None or diff <= a.tolerance)
    print(json.dumps({
        "export": a.export, "transformers": transformers.__version__, "torch": torch.__version__, "device": device,
        "model_class": type(model).__name__, "num_experts_config": {k: getattr(model.config, k) for k in
                                                                    ("num_experts", "num_local_experts",
                                                                     "n_routed_experts") if hasattr(model.config, k)},
        "loading_problems": problems, "load_warnings": load_warnings,
        "text": a.text, "scored_bytes": scored, "ctx": a.ctx,
        "bits_per_byte_transformers": bpb, "bits_per_byte_expertquant": ours, "abs_diff": diff,
        "tolerance": a.tolerance, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
