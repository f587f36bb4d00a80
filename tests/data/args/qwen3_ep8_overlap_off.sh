# Qwen3-30B-A3B on 16 GPUs, EP 8, all-to-all dispatcher; the architecture comes from --model.
torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py \
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 \
    --expert-model-parallel-size 8 --moe-token-dispatcher-type alltoall \
    --moe-grouped-gemm --moe-permute-fusion \
    --micro-batch-size 1 --global-batch-size 256 --seq-length 4096 \
    --bf16 --use-distributed-optimizer --overlap-grad-reduce
