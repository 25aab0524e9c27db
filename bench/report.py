"""The Python benchmarks' report, in the shape of //bench:report (report.h): one row per figure
with its baseline measured in the same run, the ratio, the target and whether it is met; or
JSON lines with --json. finish() returns the exit status (1 when a target is missed)."""

import json
import sys


def format_number(value):
    if value != value or value in (float("inf"), float("-inf")):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 100:
        return "%.0f" % value
    if magnitude >= 1:
        return "%.2f" % value
    return "%.3g" % value


class Reporter:
    def __init__(self, name, json_output):
        self.name = name
        self.json = json_output
        self.figures = []

    def add(self, metric, value, unit, baseline=None, target=None, met=None):
        ratio = value / baseline if baseline else None
        self.figures.append(dict(metric=metric, value=value, unit=unit, baseline=baseline,
                                 ratio=ratio, target=target, met=met))

    def finish(self):
        if self.json:
            for f in self.figures:
                line = {"bench": self.name}
                line.update({k: v for k, v in f.items() if v is not None})
                print(json.dumps(line), flush=True)
        else:
            rows = [("METRIC", "VALUE", "UNIT", "BASELINE", "RATIO", "TARGET", "MET")]
            for f in self.figures:
                rows.append((f["metric"], format_number(f["value"]), f["unit"],
                             "-" if f["baseline"] is None else format_number(f["baseline"]),
                             "-" if f["ratio"] is None else format_number(f["ratio"]) + "x",
                             f["target"] or "-",
                             "-" if f["met"] is None else ("yes" if f["met"] else "NO")))
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
            print("# " + self.name)
            for r in rows:
                print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                for i, (c, w) in enumerate(zip(r, widths))).rstrip())
            sys.stdout.flush()
        return 1 if any(f["met"] is False for f in self.figures) else 0
