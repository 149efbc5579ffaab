#!/usr/bin/env python3
"""Machine-code bytes of each GPU function of one .cu file, from its built object.

    python3 bench/cuda_code_size.py BUILD lib/quant/cuda/gemv_mixed.cu [--match mixed] [--top N]

Reads the object that BUILD/compile_commands.json names for the file (a
-DEQ_CUDA=ON build, built), takes the device code out of its .nv_fatbin
section (objcopy), and prints the size of every .text section of its first
device image (one a function), largest first, with the mangled names (c++filt
turns them into C++). --match keeps the names that contain the text.
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
    ap.add_argument("--top", type=int, default=0)
    a = ap.parse_args()
    args, directory = compile_entry(a.build, a.source)
    obj = args[args.index("-o") + 1]
    if not os.path.isabs(obj):
        obj = os.path.join(directory, obj)
    if not os.path.exists(obj):
        sys.exit("%s is not built" % obj)
    with tempfile.TemporaryDirectory() as tmp:
        fatbin, cubin = os.path.join(tmp, "fatbin"), os.path.join(tmp, "cubin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", obj, fatbin], check=True)
        data = open(fatbin, "rb").read()
        start = data.find(b"\x7fELF")
        if start < 0:
            sys.exit("%s holds no device image" % obj)
        open(cubin, "wb").write(data[start:])
        out = subprocess.run(["readelf", "-SW", cubin], capture_output=True, text=True).stdout
    sizes = []
    for line in out.splitlines():
        m = re.search(r"\]\s+\.text\.(\S+)\s+\S+\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and a.match in m.group(1):
            sizes.append((int(m.group(2), 16), m.group(1)))
    sizes.sort(reverse=True)
    if a.top:
        sizes = sizes[:a.top]
    for size, name in sizes:
        print("%9d  %s" % (size, name))


if __name__ == "__main__":
    main()
