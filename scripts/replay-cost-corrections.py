#!/usr/bin/env python3
"""Replays a multi-pass render's cost-map corrections from its `--stats` files, per device.

    scripts/replay-cost-corrections.py STATS.tiles.csv STATS.costmap.csv[.gz] WIDTH HEIGHT

For each pass after the first it rebuilds the costs the pass would have been planned with had
the measured costs of the passes before corrected the cost map (`CostMap::corrected`, with
`measured_costs_by_group`'s normalisation, one group per device), and prints, per device, the
Spearman rank correlation of those costs and of the raw estimate with the seconds measured
on that device's tiles. The first block checks the replay: for a render whose passes were
planned with corrected costs, the rebuilt costs match the CSV's `predicted` column.

This is what `sched::measured_costs_carry_over` rests on (docs in src/sched/mod.rs). Plain
Python 3, no packages.
"""
import csv
import gzip
import math
import sys


def spearman(a, b):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2.0
            i = j + 1
        return r

    if len(a) < 2:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else float("nan")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    tiles_csv, map_csv, width, height = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    opener = gzip.open if map_csv.endswith(".gz") else open
    with opener(map_csv, "rt") as f:
        cells = list(csv.DictReader(f))
    mw = max(int(c["x"]) for c in cells) + 1
    mh = max(int(c["y"]) for c in cells) + 1
    estimate = [0.0] * (mw * mh)
    for c in cells:
        estimate[int(c["y"]) * mw + int(c["x"])] = float(c["cost"])
    sx, sy = mw / width, mh / height

    def cover(t):
        x, y, w, h = t
        cx0, cy0, cx1, cy1 = x * sx, y * sy, (x + w) * sx, (y + h) * sy
        for cy in range(int(math.floor(cy0)), min(int(math.ceil(cy1)), mh)):
            fy = max(0.0, min(cy1, cy + 1) - max(cy0, cy))
            for cx in range(int(math.floor(cx0)), min(int(math.ceil(cx1)), mw)):
                fx = max(0.0, min(cx1, cx + 1) - max(cx0, cx))
                yield cy * mw + cx, fx * fy

    def cost(m, t):
        return sum(m[c] * f for c, f in cover(t))

    def corrected(m, tiles, measured):
        factor, flat = [0.0] * len(m), [0.0] * len(m)
        for t, v in zip(tiles, measured):
            e = cost(m, t)
            area = t[2] * sx * t[3] * sy
            for c, f in cover(t):
                if e > 0:
                    factor[c] += f * v / e
                elif area > 0:
                    flat[c] += f * v / area
        return [v * k + u for v, k, u in zip(m, factor, flat)]

    with open(tiles_csv) as f:
        rows = list(csv.DictReader(f))
    stats_csv = tiles_csv.replace(".tiles.csv", ".csv")
    device_of = {}
    try:
        with open(stats_csv) as f:
            for r in csv.DictReader(f):
                device_of[(r.get("rank", "0"), r["worker"])] = r["device"]
    except OSError:
        pass
    passes = sorted({int(r["pass"]) for r in rows})
    by_pass = {p: sorted((r for r in rows if int(r["pass"]) == p), key=lambda r: int(r["task"])) for p in passes}

    def device(r):
        return device_of.get((r.get("rank", "0"), r["worker"]), "worker-" + r["worker"])

    plan = estimate
    for p in passes:
        rs = by_pass[p]
        tiles = [(int(r["x"]), int(r["y"]), int(r["w"]), int(r["h"])) for r in rs]
        predicted = [cost(plan, t) for t in tiles]
        seconds = [float(r["measured_s"]) for r in rs]
        worst = max(abs(a - float(r["predicted"])) / max(float(r["predicted"]), 1e-12) for a, r in zip(predicted, rs))
        line = [f"pass {p + 1}: replayed costs against the CSV's predicted: largest relative difference {worst:.1e}"]
        for d in sorted({device(r) for r in rs}):
            idx = [i for i, r in enumerate(rs) if device(r) == d]
            line.append(
                f"  {d} ({len(idx)} tiles): corrected {spearman([predicted[i] for i in idx], [seconds[i] for i in idx]):.3f}, "
                f"estimate {spearman([float(rs[i]['estimated']) for i in idx], [seconds[i] for i in idx]):.3f}"
            )
        print("\n".join(line))
        # measured_costs_by_group: a device's speed is its planned cost over its seconds.
        speed = {}
        for d in {device(r) for r in rs}:
            idx = [i for i, r in enumerate(rs) if device(r) == d]
            s = sum(seconds[i] for i in idx)
            speed[d] = sum(predicted[i] for i in idx) / s if s > 0 else 1.0
        plan = corrected(plan, tiles, [seconds[i] * speed[device(r)] for i, r in enumerate(rs)])


if __name__ == "__main__":
    main()
