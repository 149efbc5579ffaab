#!/usr/bin/env python3
"""Registers and spills of each GPU function of one .cu file, as ptxas reports them.

    python3 bench/ptxas_usage.py BUILD lib/quant/cuda/gemv_mixed.cu [--match mixed]

Takes the file's compile command from BUILD/compile_commands.json (a -DEQ_CUDA=ON
build), runs it again with `-Xptxas -v` into a temporary object, and prints one
line per kernel and, under it, one per function it calls as a call (e.g.
__noinline__): registers, stack frame, spill stores and loads in bytes a
thread. --match keeps the kernels whose mangled name contains the text.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

from compile_entry import compile_entry


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("source")
    ap.add_argument("--match", default="")
    a = ap.parse_args()
    args, directory = compile_entry(a.build, a.source)
    with tempfile.TemporaryDirectory() as tmp:
        args[args.index("-o") + 1] = os.path.join(tmp, "out.o")
        r = subprocess.run([args[0], "-Xptxas", "-v"] + args[1:], cwd=directory, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])
    # ptxas prints a kernel's own figures, then those of each function it calls (once a kernel).
    records, entry = [], None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '([A-Za-z0-9_]+)'", line)
        if m:
            entry = m.group(1)
            continue
        m = re.search(r"Function properties for ([A-Za-z0-9_]+)", line)
        if m:
            records.append({"name": m.group(1), "kernel": entry, "called": m.group(1) != entry})
            continue
        if not records:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            records[-1].update(stack=m.group(1), stores=m.group(2), loads=m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            records[-1]["registers"] = m.group(1)
    for u in records:
        if a.match in (u["kernel"] or "") and "stores" in u:
            prefix = "  called: " if u["called"] else ""
            print("%-90s registers %3s stack %4s spill stores %4s loads %4s" %
                  (prefix + u["name"][-(90 - len(prefix)):], u.get("registers", "-"), u["stack"], u["stores"],
                   u["loads"]))

if __name__ == "__main__":
    main()
