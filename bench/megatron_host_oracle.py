#!/usr/bin/env python3
"""Megatron-Core's own host time per MoE layer, measured by running its GPT model on one GPU.

The cost model's framework_op_host_us stands for the Python and autograd work Megatron does per
layer op outside the kernels. This runs Megatron-Core itself (its local, non-Transformer-Engine
layer spec, alltoall dispatcher, one rank) with a hidden size small enough that the GPU waits for
the host, and times a training step (forward, backward) at two layer counts: the difference per
layer is the host time of one MoE layer's forward and backward. A second, GPU-bound size checks
that the same model is then limited by the device. With --recompute, the host-bound 8-expert case
runs again with each selective recompute module: what the recomputed forward's rerun inside the
backward adds to the host time per layer (--recompute-ab: each module beside the same layer
without it, their steps interleaved, in GQA and MLA forms; --gc: what a full garbage collection
costs a process holding such a model; --experts-sweep: the same layer at 4 to 64 experts, what each
local expert adds without grouped GEMM). With --structure, the host-bound layer is timed in four
forms instead — grouped-query or multi-latent attention (MLA, as DeepSeek-V3 and Moonlight), with
or without a shared expert — alternating them --repeats times, so that the ratio of their host
times says how much a layer's makeup adds, independent of the run-to-run spread.

  MEGATRON_PATH=DIR python3 bench/megatron_host_oracle.py [--layers 2 6] [--json OUT.json]

DIR holds the megatron/ package of a Megatron-LM checkout (only megatron/core is imported).
Times: median of --iters steps after --warmup, wall clock with a device synchronisation at the
end of each step ("step"), and the host's own time until backward() returned ("issue").
"""
import argparse
import json
import os
import statistics
import sys
import time


def sdpa_core_attention():
    """A core attention for both attention forms (Megatron's local one takes no separate key and
    value widths, which MLA needs): PyTorch's fused SDPA, causal. The layer's own Python around it
    (projections, norms, rotary, MLA's split and concatenation) is Megatron's."""
    import torch
    import torch.nn.functional as F

    class SdpaCoreAttention(torch.nn.Module):
        def __init__(self, config, layer_number, attn_mask_type, attention_type=None,
                     attention_dropout=None, softmax_scale=None, **unused):
            super().__init__()
            self.scale = softmax_scale

        def forward(self, query, key, value, attention_mask=None, attn_mask_type=None,
                    attention_bias=None, packed_seq_params=None, **unused):
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # [b, heads, s, d]
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale,
                                               enable_gqa=q.shape[1] != k.shape[1])
            return o.permute(2, 0, 1, 3).reshape(o.shape[2], o.shape[0], -1)

    return SdpaCoreAttention


def build(args, layers, hidden, experts, ffn, recompute=None, mla=False, shared=0):
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import (MLATransformerConfig,
                                                               TransformerConfig)

    heads = max(1, hidden // 64)
    extra = {}
    if mla:  # Moonlight's form: no query compression, a 512-wide key/value latent
        extra = dict(q_lora_rank=None, kv_lora_rank=min(512, hidden), qk_head_dim=128,
                     qk_pos_emb_head_dim=64, v_head_dim=128, rope_type="rope")
    if shared:
        extra["moe_shared_expert_intermediate_size"] = shared
    cls = MLATransformerConfig if mla else TransformerConfig
    cfg = cls(
        num_layers=layers, hidden_size=hidden, num_attention_heads=heads,
        num_query_groups=max(1, heads // 4), kv_channels=64, ffn_hidden_size=4 * hidden,
        num_moe_experts=experts, moe_ffn_hidden_size=ffn, moe_router_topk=args.topk,
        moe_token_dispatcher_type="alltoall", moe_router_load_balancing_type="aux_loss",
        moe_aux_loss_coeff=1e-3, moe_grouped_gemm=False, gated_linear_unit=True,
        activation_func=torch.nn.functional.silu, normalization="RMSNorm",
        add_bias_linear=False, bf16=True, params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16, hidden_dropout=0.0, attention_dropout=0.0,
        recompute_granularity="selective" if recompute else None,
        recompute_modules=[recompute] if recompute else None, **extra)
    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False,
                                    normalization="RMSNorm", multi_latent_attention=mla)
    if args.structure:  # the same core attention in every form
        spec.submodules.self_attention.submodules.core_attention = sdpa_core_attention()
    model = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=args.vocab,
                     max_sequence_length=args.seq, position_embedding_type="rope")
    return model.cuda().to(torch.bfloat16)


def time_steps(args, model):
    import torch
    s, b = args.seq, args.mbs
    tokens = torch.randint(0, args.vocab, (b, s), device="cuda")
    pos = torch.arange(s, device="cuda").unsqueeze(0).expand(b, s)
    mask = torch.triu(torch.ones(s, s, device="cuda", dtype=torch.bool), 1).view(1, 1, s, s)
    labels = torch.randint(0, args.vocab, (b, s), device="cuda")
    steps, issues = [], []
    for i in range(args.warmup + args.iters):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(tokens, pos, mask, labels=labels).float().mean()
        loss.backward()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        if i >= args.warmup:
            issues.append((t1 - t0) * 1e6)
            steps.append((t2 - t0) * 1e6)
    return statistics.median(steps), statistics.median(issues)


def recompute_ab(args, out):
    """Each selective recompute module beside the same host-bound layer without it: one model per
    form (the larger layer count), their steps interleaved (form after form, --iters rounds) so that
    drift of the host's speed falls on all alike; the difference of the forms' median issue times
    per layer is what the module's checkpoint adds."""
    import torch
    from megatron.core.transformer.moe.moe_logging import destroy_moe_metrics_tracker
    args.structure = True  # the SDPA core attention in every form (MLA needs it)
    layers = args.layers[1]
    forms = [("GQA", None, False), ("GQA", "core_attn", False), ("MLA", None, True),
             ("MLA", "mla_up_proj", True), ("MLA", "core_attn", True)]
    models, issues = {}, {}
    for f, m, mla in forms:
        destroy_moe_metrics_tracker()
        models[(f, m)] = build(args, layers, 256, 8, 256, m, mla, 0)
        issues[(f, m)] = []
    one = argparse.Namespace(**vars(args))
    one.warmup, one.iters = 0, 1
    for r in range(args.warmup + args.iters):
        for key, model in models.items():
            issue = time_steps(one, model)[1]
            if r >= args.warmup:
                issues[key].append(issue)
    base = {f: statistics.median(issues[(f, None)]) for f, _, _ in forms}
    for f, m, _ in forms:
        med = statistics.median(issues[(f, m)])
        case = {"case": f"host-bound, 8 experts, {f}, recompute {m or 'none'}", "layers": layers,
                "issue_us_median": med, "rounds": args.iters,
                "added_per_layer_us": (med - base[f]) / layers}
        out["cases"].append(case)
        print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in case.items()}),
              flush=True)


def time_gc(args, out):
    """A full collection (Megatron's --manual-gc, Bridge's train.manual_gc) in a process holding a
    Moonlight-like model (27 layers, MLA, a shared expert) after training steps, with automatic
    collection off as Megatron turns it off: median of five gc.collect() calls."""
    import gc
    import torch
    from megatron.core.transformer.moe.moe_logging import destroy_moe_metrics_tracker
    args.structure = True
    for experts in (8, 64):
        destroy_moe_metrics_tracker()
        model = build(args, 27, 256, experts, 256, None, True, 256)
        time_steps(args, model)
        gc.disable()
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            gc.collect()
            times.append((time.perf_counter() - t0) * 1e3)
        case = {"case": f"gc.collect(), 27 MLA layers, {experts} experts",
                "objects": len(gc.get_objects()), "gc_ms_median": statistics.median(times),
                "gc_ms": times}
        out["cases"].append(case)
        print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in case.items()}),
              flush=True)
        gc.enable()
        del model
        torch.cuda.empty_cache()


def init_megatron(port):
    """One rank of Megatron-Core on GPU 0 (MEGATRON_PATH or .devcarry/megatron on the path):
    the process group, model-parallel state and RNG; returns the report's header."""
    sys.path.insert(0, os.environ.get("MEGATRON_PATH", ".devcarry/megatron"))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", port)
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(123)
    return {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "cases": []}


def finish_megatron(out, path):
    """Writes the report to `path` (if given) and leaves the process group."""
    import torch.distributed as dist
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, nargs=2, default=[2, 6])
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--mbs", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--recompute", nargs="*", default=["core_attn", "layernorm", "moe"],
                    help="selective recompute modules timed on the host-bound 8-expert case")
    ap.add_argument("--structure", action="store_true",
                    help="time GQA / MLA attention with and without a shared expert instead")
    ap.add_argument("--recompute-ab", action="store_true",
                    help="time the host-bound layer without and with each selective recompute "
                         "module (GQA and MLA forms), alternating them --repeats times")
    ap.add_argument("--gc", action="store_true",
                    help="time gc.collect() in this process after training steps of a 27-layer "
                         "MLA model with a shared expert (8 and 64 experts), as a manual GC pays it")
    ap.add_argument("--experts-sweep", action="store_true",
                    help="time the host-bound layer at 4 to 64 experts (top-4, Megatron's "
                         "SequentialMLP: one set of linears a local expert), alternating them "
                         "--repeats times: the host time a local expert adds without grouped GEMM")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    out = init_megatron("29512")
    import torch
    from megatron.core.transformer.moe.moe_logging import destroy_moe_metrics_tracker
    # (name, hidden, experts, moe ffn, recompute): host-bound small layers, then a GPU-bound one,
    # then the first again with each recompute module.
    cases = [("host-bound, 8 experts", 256, 8, 256, None),
             ("host-bound, 64 experts", 256, 64, 128, None),
             ("device-bound, 8 experts", 4096, 8, 4096, None)]
    cases += [("host-bound, 8 experts, recompute " + m, 256, 8, 256, m) for m in args.recompute]
    cases = [c + (False, 0) for c in cases]
    if args.structure:
        forms = [("GQA", False, 0), ("MLA", True, 0), ("GQA + shared expert", False, 256),
                 ("MLA + shared expert", True, 256)]
        cases = [(f"host-bound, 8 experts, {f} (run {r + 1})", 256, 8, 256, None, mla, shared)
                 for r in range(args.repeats) for f, mla, shared in forms]
    if args.experts_sweep:
        args.topk = 4
        cases = [(f"host-bound, {e} experts, top-4 (run {r + 1})", 256, e, 128, None, False, 0)
                 for r in range(args.repeats) for e in (4, 8, 16, 32, 64)]
    if args.recompute_ab:
        recompute_ab(args, out)
        cases = []
    if args.gc:
        time_gc(args, out)
        cases = []
    for name, hidden, experts, ffn, recompute, mla, shared in cases:
        res = {}
        try:
            for layers in args.layers:
                destroy_moe_metrics_tracker()  # sized by the first model's layer count otherwise
                model = build(args, layers, hidden, experts, ffn, recompute, mla, shared)
                res[layers] = time_steps(args, model)
                del model
                torch.cuda.empty_cache()
        except Exception as e:  # a module this layer spec cannot recompute without TE
            out["cases"].append({"case": name, "error": f"{type(e).__name__}: {e}"})
            print(json.dumps(out["cases"][-1]), flush=True)
            continue
        lo, hi = args.layers
        per_layer_step = (res[hi][0] - res[lo][0]) / (hi - lo)
        per_layer_issue = (res[hi][1] - res[lo][1]) / (hi - lo)
        case = {"case": name, "hidden": hidden, "experts": experts, "topk": args.topk,
                "recompute": recompute, "mla": mla, "shared_expert": shared,
                "seq": args.seq, "layers": [lo, hi],
                "step_us": [res[lo][0], res[hi][0]], "issue_us": [res[lo][1], res[hi][1]],
                "per_layer_step_us": per_layer_step, "per_layer_issue_us": per_layer_issue}
        out["cases"].append(case)
        print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v) for k, v in case.items()}),
              flush=True)
    finish_megatron(out, args.json)


if __name__ == "__main__":
    main()
