#!/usr/bin/env python3
"""Every Megatron-LM CI argument list of a runs file through `epo predict --mlm-args`.

Each row of megatron_ci_runs.jsonl carries the arguments Megatron-LM's functional test ran with
("args": flag -> value; true for a store-true flag). This writes each as the command line a user
would have (one flag per continued line), runs `epo predict --mlm-args FILE --gpus N --hardware H
--fast` on it, and counts what the reader says: flags read, ignored (no effect on the prediction),
not modelled (they change the real run where the model does not follow), unknown, and whether a
prediction came out (exit 0) or the configuration was refused (exit 3) or not read (exit 2), with
the first line of the reason.

  EPO_BIN=build/cli/epo python3 bench/megatron_ci_args.py megatron_ci_runs.jsonl [--json OUT]
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

HARDWARE = {"dgx_h100": "dgx-h100", "dgx_gb200": "gb200-nvl72", "dgx_a100": "h100-sxm"}


def command_line(args):
    parts = ["python pretrain_gpt.py"]
    for flag, value in args.items():
        if value is True:
            parts.append(flag)
        elif value is False or value is None:
            continue
        elif isinstance(value, list):
            parts.append(flag + " " + " ".join(str(v) for v in value))
        else:
            text = str(value)
            parts.append(flag + " " + (text if re.fullmatch(r"[^\s'\"|()*]+", text) else
                                       "'" + text.replace("'", "'\\''") + "'"))
    return " \\\n  ".join(parts) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs")
    ap.add_argument("--json", help="write one record per row here")
    opts = ap.parse_args()
    epo = os.environ.get("EPO_BIN", "build/cli/epo")
    records = []
    totals = collections.Counter()
    unknown_names = collections.Counter()
    unmodelled_names = collections.Counter()
    with open(opts.runs) as f, tempfile.TemporaryDirectory() as tmp:
        for n, line in enumerate(f):
            row = json.loads(line)
            path = os.path.join(tmp, "args_%d.sh" % n)
            with open(path, "w") as out:
                out.write(command_line(row.get("args", {})))
            hw = HARDWARE.get(row.get("platform", ""), "dgx-h100")
            # Rows whose recipe does not state the GPU count: the smallest world the parallel
            # sizes imply.
            gpus = row.get("gpus") or (row.get("derived") or {}).get(
                "min_world_size_implied_by_parallelism") or 8
            cmd = [epo, "predict", "--mlm-args", path, "--gpus", str(gpus), "--hardware", hw,
                   "--fast"]
            p = subprocess.run(cmd, capture_output=True, text=True)
            text = p.stdout + p.stderr
            m = re.search(r"(\d+) read, (\d+) ignored \(no effect on the prediction\), "
                          r"(\d+) not modelled, (\d+) unknown", text)
            read, ignored, unmodelled, unknown = (int(x) for x in m.groups()) if m else (0,) * 4
            for name in re.findall(r"warning: not modelled: (\S+) =", text):
                unmodelled_names[name] += 1
            for listed in re.findall(r"not known to EPO \(not read\): (.*)", text):
                for u in listed.split(","):
                    unknown_names[u.strip()] += 1
            reason = ""
            if p.returncode != 0:
                errors = [l for l in text.splitlines() if l.startswith("epo: error")]
                reason = errors[0] if errors else text.strip().splitlines()[-1]
            totals["rows"] += 1
            totals["exit_%d" % p.returncode] += 1
            totals["read"] += read
            totals["ignored"] += ignored
            totals["not_modelled"] += unmodelled
            totals["unknown"] += unknown
            records.append({"id": row.get("id"), "exit": p.returncode, "read": read,
                            "ignored": ignored, "not_modelled": unmodelled, "unknown": unknown,
                            "reason": reason})
    print("rows %d: predicted %d, refused by a rule %d, not read %d, other %d" % (
        totals["rows"], totals["exit_0"], totals["exit_3"], totals["exit_2"],
        totals["rows"] - totals["exit_0"] - totals["exit_3"] - totals["exit_2"]))
    rows = max(1, totals["rows"])
    print("flags: %d read, %d ignored, %d not modelled, %d unknown (per row %.1f / %.1f / %.1f / "
          "%.1f)" % (totals["read"], totals["ignored"], totals["not_modelled"], totals["unknown"],
                     totals["read"] / rows, totals["ignored"] / rows,
                     totals["not_modelled"] / rows, totals["unknown"] / rows))
    for name, count in unmodelled_names.most_common():
        print("  not modelled %s: %d rows" % (name, count))
    for name, count in unknown_names.most_common():
        print("  unknown %s: %d rows" % (name, count))
    reasons = collections.Counter(r["reason"] for r in records if r["exit"] != 0)
    for reason, count in reasons.most_common():
        print("  %3d x %s" % (count, reason[:200]))
    if opts.json:
        with open(opts.json, "w") as out:
            json.dump({"rows": records, "totals": dict(totals)}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
