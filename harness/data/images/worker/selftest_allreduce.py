"""Build-time check of the worker image: torchrun + c10d rendezvous + a gloo all_reduce."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(8) * (dist.get_rank() + 1)
dist.all_reduce(t)
n = dist.get_world_size()
assert torch.allclose(t, torch.full_like(t, n * (n + 1) / 2)), t
print(f"selftest rank {dist.get_rank()}/{n}: all_reduce ok, torch {torch.__version__}", flush=True)
dist.barrier()
dist.destroy_process_group()
