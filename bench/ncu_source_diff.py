#!/usr/bin/env python3
"""Compares two Nsight Compute source pages (`ncu -i REP --page source --csv --print-source sass`) of one
kernel: the SASS opcodes executed a given number of times (by default the count accounting for the most
executed instructions: the main loop's body) with their counts and stall samples, side by side. Used for
the flex kernel without a mod and with ALiBi (bench/alibi_ncu_run.sh).

Usage: python3 bench/ncu_source_diff.py source_none.csv source_alibi.csv [--count N]
"""
import argparse
import collections
import csv


def load(path):
    rows = list(csv.reader(open(path)))
    head = rows[1]
    src, ex, smp = (head.index(k) for k in ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)"))
    out = []
    for r in rows[2:]:
        try:
            out.append((r[src].strip(), int(r[ex]), int(r[smp])))
        except (ValueError, IndexError):
            pass
    return out


def opcode(src):
    parts = src.split()
    return parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--count", type=int, default=0, help="execution count to select (0: the most frequent)")
    args = ap.parse_args()
    data = [load(args.a), load(args.b)]
    # The loop body: the execution count that accounts for the most executed instructions.
    totals = collections.Counter()
    for _, ex, _ in data[0]:
        totals[ex] += ex
    count = args.count or totals.most_common(1)[0][0]
    per = []
    for d in data:
        n, s = collections.Counter(), collections.Counter()
        for src, ex, smp in d:
            if ex == count:
                n[opcode(src)] += 1
                s[opcode(src)] += smp
        per.append((n, s))
        print(f"{sum(ex for _, ex, _ in d):>12} instructions executed, {sum(n.values())} in the body run {count} times")
    for op in sorted(set(per[0][0]) | set(per[1][0]), key=lambda k: -per[1][0][k]):
        print(f"{op:28s} {per[0][0][op]:4d} {per[1][0][op]:4d}   samples {per[0][1][op]:6d} {per[1][1][op]:6d}")


if __name__ == "__main__":
    main()
