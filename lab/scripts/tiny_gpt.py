"""The tiny GPT-2 shape of docs/REFERENCES.md as a user workload for the device bench:
d=64, L=2, H=2, batch 4 x seq 256 (6.7 ms/step at 15 % NVML utilisation on an H200:
launch-bound). Named ``tiny_gpt:tiny`` with ``lab/scripts/`` on PYTHONPATH; the probes run at
its smallest sweep value, seq 256.
"""

from afford.workloads.tinylm import TinyLM, TinyLMConfig


def tiny() -> TinyLM:
    return TinyLM(TinyLMConfig(d=64, L=2, H=2, seq=256, batch=4, sweep=(256, 512)))
