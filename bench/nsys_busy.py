#!/usr/bin/env python3
"""Where a GPU run's time goes, from an Nsight Systems trace exported to SQLite.

    nsys profile --trace=cuda -o P expertquant generate --packed W/p --prompt "..." -n 160 --device cuda
    nsys export --type sqlite -o P.sqlite P.nsys-rep
    python3 bench/nsys_busy.py P.sqlite [--from 0.4] [--to 0.95] [--by-grid]

Takes the GPU's kernels and copies from the fraction --from to --to of them
(by start time: past the load and the prefill, before the teardown), and
prints the window's length, the time the GPU was busy in it (overlapping
activities counted once), the most frequent runtime calls and the kernels
that took the most time in it (with --by-grid, each kernel's launches of
each grid apart: a matrix's product, say, from another's).
"""
import argparse
import sqlite3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sqlite")
    ap.add_argument("--from", dest="lo", type=float, default=0.4)
    ap.add_argument("--to", dest="hi", type=float, default=0.95)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--by-grid", action="store_true", help="kernels by name and grid")
    a = ap.parse_args()
    db = sqlite3.connect(a.sqlite)
    kernels = db.execute("select start, end from CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
    copies = db.execute("select start, end from CUPTI_ACTIVITY_KIND_MEMCPY").fetchall()
    events = sorted(kernels + copies)
    events = events[int(len(events) * a.lo):int(len(events) * a.hi)]
    if not events:
        raise SystemExit("no GPU activity in the window")
    t0, t1 = events[0][0], max(e for _, e in events)
    busy, run_start, run_end = 0, None, None
    for s, e in events:
        if run_end is None or s > run_end:
            if run_end is not None:
                busy += run_end - run_start
            run_start, run_end = s, e
        else:
            run_end = max(run_end, e)
    busy += run_end - run_start
    print("window %.1f ms, GPU busy %.1f ms (%.0f%%)" % ((t1 - t0) / 1e6, busy / 1e6, 100.0 * busy / (t1 - t0)))
    grid = " || ' grid ' || t.gridX || 'x' || t.gridY" if a.by_grid else ""
    tables = (("runtime calls", "CUPTI_ACTIVITY_KIND_RUNTIME", "nameId", "", "count(*)"),
              ("kernels", "CUPTI_ACTIVITY_KIND_KERNEL", "shortName", grid, "sum(t.end - t.start)"))
    for what, table, name_id, suffix, order in tables:
        rows = db.execute(
            "select s.value%s as name, count(*), sum(t.end - t.start) from %s t join StringIds s on t.%s = s.id "
            "where t.start >= ? and t.end <= ? group by name order by %s desc" % (suffix, table, name_id, order),
            (t0, t1)).fetchall()
        print("%s (count, total ms, us each):" % what)
        for name, n, t in rows[:a.top]:
            print("  %-56s %8d %9.1f %7.2f" % (name[:56], n, t / 1e6, t / 1e3 / n))

if __name__ == "__main__":
    main()
