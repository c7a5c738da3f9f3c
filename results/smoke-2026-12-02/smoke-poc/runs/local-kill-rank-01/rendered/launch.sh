#!/usr/bin/env bash
# Local baseline: one torchrun agent per node, on this machine.
set -euo pipefail
export GLOO_SOCKET_IFNAME=lo
export OMP_NUM_THREADS=1
export PYTHONUNBUFFERED=1
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1
$CACHE_DIR/venv-4c4ad7340eb7/bin/python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:29500 --rdzv_id=local-kill-rank-01 --max_restarts=3 --local_addr=127.0.0.1 $CHECKOUT/workloads/ddp_train.py --run-id local-kill-rank-01 --steps 40 --batch 64 --model-params 4M --layers 4 --ckpt-dir $STATE_DIR/local/smoke-poc/local-kill-rank-01/ckpt --ckpt-every 10 --sweep 1K:64M --sweep-iters 5 --sweep-warmup 2 --backend auto --events-dir $STATE_DIR/local/smoke-poc/local-kill-rank-01/events &
$CACHE_DIR/venv-4c4ad7340eb7/bin/python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:29500 --rdzv_id=local-kill-rank-01 --max_restarts=3 --local_addr=127.0.0.1 $CHECKOUT/workloads/ddp_train.py --run-id local-kill-rank-01 --steps 40 --batch 64 --model-params 4M --layers 4 --ckpt-dir $STATE_DIR/local/smoke-poc/local-kill-rank-01/ckpt --ckpt-every 10 --sweep 1K:64M --sweep-iters 5 --sweep-warmup 2 --backend auto --events-dir $STATE_DIR/local/smoke-poc/local-kill-rank-01/events &
wait
