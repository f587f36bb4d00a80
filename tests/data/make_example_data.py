#!/usr/bin/env python3
"""Writes the committed calibration example (tests/data/example_*.json) from a real H200 run.

Inputs: the samples of `epo calibrate bench --quick` and two `epo run --json` measurements of the
same configuration (tiny model, 2 virtual ranks, alltoall, seq 1024, balanced routing) with
overlap off and on. The samples are copied whole; each measurement keeps its config, context,
run block and summary, and of its op records only rank 0's first step (the per-op means the
report shows come from them), without the embedded prediction (recomputed on load).
Then: epo calibrate fit tests/data/example_samples.json tests/data/example_measurement_*.json \
      --base h200-sxm --date 2026-11-29 --out tests/data/example_profile.json
Usage: python3 tests/data/make_example_data.py SAMPLES BASE_RUN OVERLAP_RUN
"""
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))


def trim(path):
    with open(path) as f:
        m = json.load(f)
    m.pop("prediction", None)
    m["ops"] = [o for o in m.get("ops", []) if o["rank"] == 0 and o["step"] == 0]
    return m


def write(name, obj):
    with open(os.path.join(here, name), "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.write("\n")


samples, base, overlap = sys.argv[1:4]
with open(samples) as f:
    write("example_samples.json", json.load(f))
write("example_measurement_base.json", trim(base))
write("example_measurement_overlap.json", trim(overlap))
