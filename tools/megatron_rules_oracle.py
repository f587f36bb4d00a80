#!/usr/bin/env python3
"""Megatron-LM's own verdict on the configurations EPO's validate is tested against.

Reads the JSON lines that `EPO_MEGATRON_CASES=FILE build/tests/planner/test_planner_rules` writes
(each case: the Megatron-LM arguments and environment `epo` emits for it, and epo's first error or
"" when it accepts the configuration), runs Megatron-LM's argument parser, validate_args and
TransformerConfig (core_transformer_config_from_args) on each, and prints both verdicts side by
side: agree when both accept or both refuse. Megatron's message is printed for the refusals, to
compare with the check epo names.

  MEGATRON_PATH=DIR python3 tools/megatron_rules_oracle.py CASES.jsonl [--json OUT.json]
      [--record VERDICTS.jsonl]

--record writes Megatron's verdict alone, one line per case ({"what", "megatron": its message or
"accepted"}): the recorded oracle tests/planner/test_megatron_random.cpp compares epo against.

DIR holds the megatron/ package of a Megatron-LM checkout (megatron/core and megatron/training).
Needs PyTorch; no GPU work is done (world size and rank come from the case). Where Transformer
Engine is not installed, Megatron is told it is TE 2.12 (the version epo's rules assume) with its
fused permutation kernels present, so that the checks compared are the configuration's, not the
machine's.
"""
import argparse
import contextlib
import io
import json
import os
import shlex
import sys
import traceback

# What a training script adds that the emitted arguments leave out (data, tokenizer, schedule).
EXTRA = ["--mock-data", "--tokenizer-type", "NullTokenizer", "--train-iters", "10",
         "--lr", "1e-4", "--max-position-embeddings", "4096"]


def args_of(text):
    lines = [l for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    return shlex.split(" ".join(l.rstrip().rstrip("\\") for l in lines))


def env_of(text):
    out = {}
    for l in text.splitlines():
        l = l.strip()
        if l.startswith("export ") and "=" in l:
            k, v = l[len("export "):].split("=", 1)
            out[k] = v
    return out


def megatron_verdict(case):
    from megatron.training.arguments import parse_args, validate_args
    try:
        from megatron.training.argument_utils import core_transformer_config_from_args
    except ImportError:  # core_v0.15 and before keep it in arguments.py
        from megatron.training.arguments import core_transformer_config_from_args
    argv = args_of(case["args"])
    if "--vocab-size" not in argv:
        argv += ["--vocab-size", "32000"]
    saved_env = dict(os.environ)
    os.environ.update(env_of(case["env"]))
    os.environ["WORLD_SIZE"] = str(case["world_size"])
    os.environ["RANK"] = "0"
    sys.argv = ["megatron"] + argv + EXTRA
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            args = parse_args()
            validate_args(args, {})
            core_transformer_config_from_args(args)
        return "", ""
    except SystemExit as e:  # argparse: an argument Megatron does not know
        return "refused", ("argparse exit %s: " % e.code) + sink.getvalue().strip()[-300:]
    except BaseException as e:  # noqa: BLE001 (assertions and ValueErrors alike)
        frame = traceback.extract_tb(e.__traceback__)[-1]
        where = "%s:%d" % (os.path.basename(frame.filename), frame.lineno)
        return "refused", "%s %s: %s" % (where, type(e).__name__, str(e).strip()[:300])
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


def pretend_transformer_engine(version="2.12.0"):
    import megatron.core.utils as mu
    from packaging.version import Version
    try:
        import transformer_engine  # noqa: F401
        return False
    except ImportError:
        pass
    mu._te_version = Version(version)
    import megatron.core.transformer.moe.moe_utils as moe_utils
    for name in ("fused_permute", "fused_permute_with_probs", "fused_sort_chunks_by_index",
                 "fused_sort_chunks_by_index_with_probs", "fused_unpermute"):
        if getattr(moe_utils, name, None) is None:
            setattr(moe_utils, name, lambda *a, **k: None)
    # TE's fused RoPE (apply_rope_fusion, on by default).
    import megatron.core.models.common.embeddings.rope_utils as rope_utils
    for name in ("fused_apply_rotary_pos_emb", "fused_apply_rotary_pos_emb_thd"):
        if getattr(rope_utils, name, None) is None:
            setattr(rope_utils, name, lambda *a, **k: None)
    return True


def use_megatron():
    """Puts MEGATRON_PATH on the path and, without Transformer Engine, pretends TE 2.12."""
    sys.path.insert(0, os.environ.get("MEGATRON_PATH", ".devcarry/megatron"))
    if pretend_transformer_engine():
        print("# Transformer Engine not installed: Megatron told it is TE 2.12 with fused permutation")


def cases_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("--json")
    ap.add_argument("--record")
    return ap.parse_args()


def main():
    a = cases_args()
    use_megatron()
    rows, agree = [], 0
    for line in open(a.cases):
        case = json.loads(line)
        verdict, message = megatron_verdict(case)
        epo = case["epo_first_error"]
        same = (verdict == "") == (epo == "")
        agree += same
        rows.append({"what": case["what"], "epo": epo or "accepted",
                     "megatron": "accepted" if not verdict else message, "agree": same})
        print("%-6s %-70s epo: %-38s megatron: %s" % ("agree" if same else "DIFFER", case["what"][:70],
                                                      epo or "accepted",
                                                      "accepted" if not verdict else message))
    print("# %d of %d cases: the same verdict" % (agree, len(rows)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"agree": agree, "cases": rows}, f, indent=1)
    if a.record:
        with open(a.record, "w") as f:
            for r in rows:
                f.write(json.dumps({"what": r["what"], "megatron": r["megatron"]}) + "\n")


if __name__ == "__main__":
    main()
