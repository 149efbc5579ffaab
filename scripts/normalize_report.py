#!/usr/bin/env python3
"""Prints a command's output file with what differs between identical runs removed,
for scripts/compare-outputs: the run's own folder (replaced by "<RUN>") and the checkout it ran from ("<CHECKOUT>"), and in
JSON the measured times, rates and memory figures (keys below). Any other file is
printed unchanged, byte for byte."""
import json
import re
import sys

# Keys whose values are measurements of this run, not results.
# profile_xxh64: the manifest's hash of profile.json, which holds the profile's timing.
VOLATILE = re.compile(r"(profile_xxh64|seconds|_s$|^s$|wall|cpu|elapsed|tok_per_s|tokens_per_s|per_s|rss|peak|"
                      r"bytes_read|read_bytes|experts_per_s|eta|ms$|_ms|time|date|phases)", re.I)
# Text lines that report speed or memory.
VOLATILE_LINE = re.compile(r"(tok/s|\bs\b.*elapsed|seconds|peak RSS|MiB/s|GB/s|experts/s|\d+(\.\d+)? ?s\b|"
                           r"\d+(\.\d+)? ?ms\b)")


def scrub(value):
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items() if not VOLATILE.search(k)}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


def main():
    path, run_dir = sys.argv[1], sys.argv[2]
    checkout = sys.argv[3] if len(sys.argv) > 3 else None
    data = open(path, "rb").read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        sys.stdout.buffer.write(data)
        return
    text = text.replace(run_dir, "<RUN>")
    if checkout:
        text = text.replace(checkout, "<CHECKOUT>")
    if path.endswith((".json", ".stdout")):
        try:
            doc = json.loads(text)
            if isinstance(doc, dict):
                # manifest.json's checksum covers its timing fields.
                doc.pop("checksum", None)
            print(json.dumps(scrub(doc), indent=1, sort_keys=True))
            return
        except ValueError:
            pass
    if path.endswith((".stdout", ".stderr", ".txt")):
        text = "\n".join("<timing line>" if VOLATILE_LINE.search(line) else line for line in text.split("\n"))
    sys.stdout.write(text)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # cmp stops reading at the first difference
        sys.exit(0)
