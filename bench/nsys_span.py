#!/usr/bin/env python3
"""How long the GPU takes from one kernel to another, from an Nsight Systems trace exported to SQLite.

    python3 bench/nsys_span.py P.sqlite --after route_kernel --before combine_kernel [--from 0.4] [--to 0.95]

For every launch of the kernel named by --after (a short name) in the window
(the fraction --from to --to of the kernels, by start time), the span from its
end to the start of the next launch named by --before: with route_kernel and
combine_kernel, the routed experts' part of a MoE layer in a decode step.
Prints the spans' count, median and quartiles, and the kernels that ran inside
them (count a span, median µs each, by name and grid), in the order they start.
"""
import argparse
import sqlite3
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sqlite")
    ap.add_argument("--after", required=True)
    ap.add_argument("--before", required=True)
    ap.add_argument("--from", dest="lo", type=float, default=0.4)
    ap.add_argument("--to", dest="hi", type=float, default=0.95)
    a = ap.parse_args()
    db = sqlite3.connect(a.sqlite)
    rows = db.execute(
        "select t.start, t.end, s.value, t.gridX, t.gridY from CUPTI_ACTIVITY_KIND_KERNEL t "
        "join StringIds s on t.shortName = s.id order by t.start").fetchall()
    rows = rows[int(len(rows) * a.lo):int(len(rows) * a.hi)]
    spans, inside = [], {}
    open_at, members = None, []
    for start, end, name, gx, gy in rows:
        if name == a.after:
            open_at, members = end, []
        elif open_at is not None and name == a.before:
            spans.append(start - open_at)
            for key, us in members:
                inside.setdefault(key, []).append(us)
            open_at = None
        elif open_at is not None:
            members.append(((name, gx, gy), (end - start) / 1e3))
    if not spans:
        raise SystemExit("no span from %s to %s in the window" % (a.after, a.before))
    q = statistics.quantiles(spans, n=4) if len(spans) > 1 else [spans[0]] * 3
    print("%d spans from %s to %s: median %.2f us (quartiles %.2f, %.2f)" %
          (len(spans), a.after, a.before, q[1] / 1e3, q[0] / 1e3, q[2] / 1e3))
    print("kernels inside (a span, median us each):")
    for (name, gx, gy), us in inside.items():
        print("  %-48s grid %6dx%-5d %6.2f %7.2f" % (name[:48], gx, gy, len(us) / len(spans), statistics.median(us)))


if __name__ == "__main__":
    main()
