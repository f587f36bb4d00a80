#!/usr/bin/env python3
"""Megatron-Core's own host time per training step outside the layers: the gradient finish, the
distributed optimizer's step and the buffers' reset, measured by running them on one GPU.

The cost model's framework_step_host_us stands for what a step costs the host once the last
backward op is issued: Megatron's DistributedDataParallel finishing the gradient sync, the
distributed optimizer copying gradients into its fp32 shards, the gradient norm and clipping, the
Adam update, the copy back into the bf16 parameters and the buffers' reset. Most of it is Python
that loops over parameter tensors, so it grows with their count, not their size. This builds
Megatron-Core's GPT model (its local layer spec, MLA with a shared expert as Moonlight, experts as
separate linears: one weight per expert per projection, as Transformer Engine's grouped linear
holds them) at small hidden size, wraps it in Megatron's DDP and distributed optimizer on one rank
and times, after each forward and backward, the step's remaining calls: median host time until
they return (the gradient norm's .item() waits for the device, which has little to do at this
size). Fitted over the cases: host time = a + b x parameter tensors.

  MEGATRON_PATH=DIR python3 bench/megatron_step_oracle.py [--json OUT.json]

Without Transformer Engine or Apex, Megatron's Adam is PyTorch's AdamW (multi-tensor, like theirs).
"""
import argparse
import json
import os
import statistics
import sys
import time


def build(layers, experts, vocab, seq):
    import torch
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    hidden = 256
    cfg = MLATransformerConfig(
        num_layers=layers, hidden_size=hidden, num_attention_heads=4, kv_channels=64,
        ffn_hidden_size=4 * hidden, num_moe_experts=experts, moe_ffn_hidden_size=128,
        moe_router_topk=min(6, experts), moe_token_dispatcher_type="alltoall",
        moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
        moe_grouped_gemm=False, moe_shared_expert_intermediate_size=256, gated_linear_unit=True,
        activation_func=torch.nn.functional.silu, normalization="RMSNorm", add_bias_linear=False,
        bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
        hidden_dropout=0.0, attention_dropout=0.0, q_lora_rank=None, kv_lora_rank=256,
        qk_head_dim=64, qk_pos_emb_head_dim=32, v_head_dim=64, rope_type="rope")
    spec = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False,
                                    normalization="RMSNorm", multi_latent_attention=True)
    from megatron_host_oracle import sdpa_core_attention
    spec.submodules.self_attention.submodules.core_attention = sdpa_core_attention()
    model = GPTModel(config=cfg, transformer_layer_spec=spec, vocab_size=vocab,
                     max_sequence_length=seq, position_embedding_type="rope")
    return cfg, model.cuda().to(torch.bfloat16)


def time_case(args, layers, experts):
    import torch
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.moe.moe_logging import destroy_moe_metrics_tracker

    destroy_moe_metrics_tracker()
    cfg, model = build(layers, experts, args.vocab, args.seq)
    tensors = sum(1 for _ in model.parameters())
    ddp = DistributedDataParallel(
        config=cfg, module=model,
        ddp_config=DistributedDataParallelConfig(
            grad_reduce_in_fp32=True, overlap_grad_reduce=True, use_distributed_optimizer=True,
            check_for_nan_in_grad=True))
    opt = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=1e-4, weight_decay=0.1, bf16=True,
                        params_dtype=torch.bfloat16, use_distributed_optimizer=True,
                        clip_grad=1.0), [ddp])
    s = args.seq
    tokens = torch.randint(0, args.vocab, (1, s), device="cuda")
    pos = torch.arange(s, device="cuda").unsqueeze(0)
    mask = torch.triu(torch.ones(s, s, device="cuda", dtype=torch.bool), 1).view(1, 1, s, s)
    labels = torch.randint(0, args.vocab, (1, s), device="cuda")
    hosts, steps = [], []
    for i in range(args.warmup + args.iters):
        ddp.zero_grad_buffer()
        opt.zero_grad()
        loss = ddp(tokens, pos, mask, labels=labels).float().mean()
        loss.backward()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        ddp.finish_grad_sync()
        opt.step()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        if i >= args.warmup:
            hosts.append((t1 - t0) * 1e6)
            steps.append((t2 - t0) * 1e6)
    del opt, ddp, model
    torch.cuda.empty_cache()
    return {"layers": layers, "experts": experts, "parameter_tensors": tensors,
            "host_us_median": statistics.median(hosts), "step_us_median": statistics.median(steps)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 9, 27])
    ap.add_argument("--experts", type=int, nargs="+", default=[8, 64])
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from megatron_host_oracle import finish_megatron, init_megatron
    out = init_megatron("29513")
    for experts in args.experts:
        for layers in args.layers:
            try:
                case = time_case(args, layers, experts)
            except Exception as e:  # report and go on: one case's failure says what is missing
                case = {"layers": layers, "experts": experts, "error": f"{type(e).__name__}: {e}"}
            out["cases"].append(case)
            print(json.dumps({k: (round(v, 1) if isinstance(v, float) else v)
                              for k, v in case.items()}), flush=True)
    ok = [c for c in out["cases"] if "error" not in c]
    if len(ok) >= 2:  # least squares: host time = a + b x parameter tensors
        xs = [c["parameter_tensors"] for c in ok]
        ys = [c["host_us_median"] for c in ok]
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
        out["fit"] = {"host_us_fixed": my - b * mx, "host_us_per_tensor": b}
        print(json.dumps(out["fit"]), flush=True)
    finish_megatron(out, args.json)


if __name__ == "__main__":
    main()
