"""Measuring a node through torch.distributed, in processes that torchrun started:
``runtime`` (join, watch, leave), ``collectives`` (bandwidth sweep), ``ddp`` (DDP/FSDP
scaling of the tinylm step)."""
