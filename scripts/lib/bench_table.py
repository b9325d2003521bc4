"""Prints the figures one run of scripts/bench recorded as one table, and writes them as JSON.

Usage: bench_table.py RECORD JSON_OUT [PREVIOUS_JSON]

RECORD holds one JSON object a line, as the benchmarks append them (figure, measured, floor,
ratio, goal, and where a figure sums up several rounds, its spread: the lowest and highest ratio
of those rounds); JSON_OUT receives them as one document a later run can be compared with; when
PREVIOUS_JSON is given, the table adds that run's ratio beside each figure it also has. The
spread column appears only when some figure has one.
"""

import json
import sys
import time


def meets(ratio, goal):
    if not goal:
        return ""
    op, bound = goal.split()
    bound = float(bound)
    ok = ratio <= bound if op == "<=" else ratio >= bound
    return "yes" if ok else "NO"


def main():
    record, out = sys.argv[1], sys.argv[2]
    previous = {}
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as file:
            for row in json.load(file)["figures"]:
                previous[(row["group"], row["figure"])] = row["ratio"]
    with open(record) as file:
        rows = [json.loads(line) for line in file if line.strip()]
    with open(out, "w") as file:
        json.dump({"finished_at": int(time.time()), "figures": rows}, file, indent=1)
        file.write("\n")
    header = ["group", "figure", "measured", "floor", "ratio", "goal", "met"]
    spreads = any("spread" in row for row in rows)
    if spreads:
        header.insert(5, "spread")
    if previous:
        header.append("previous ratio")
    table = [header]
    for row in rows:
        line = [
            row["group"],
            row["figure"],
            f"{row['measured']:.1f} {row['unit']}",
            f"{row['floor']:.1f} {row['unit']} ({row['floor_name']})",
            f"{row['ratio']:.2f}x",
            row["goal"] or "",
            meets(row["ratio"], row["goal"]),
        ]
        if spreads:
            spread = row.get("spread")
            line.insert(5, "" if spread is None else f"{spread[0]:.2f}x to {spread[1]:.2f}x")
        if previous:
            before = previous.get((row["group"], row["figure"]))
            line.append("" if before is None else f"{before:.2f}x")
        table.append(line)
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for n, line in enumerate(table):
        print("| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)) + " |")
        if n == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


main()
