"""The integration lane: afford with what it runs beside: the loop guard (afford.track) in
plain loops, transformers and Lightning under SIGKILL (tests/track_child.py,
tests/track_ddp_child.py), torch.distributed ranks, the HTML report in Chromium."""
