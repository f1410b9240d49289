"""How hard each probe works, per precision setting and device (written into the result).

Sizes fill the device: an 8192^3 GEMM and a 1 GiB copy buffer on a large GPU (the sizes of
the plain-matmul ceilings in docs/REFERENCES.md), smaller on a small GPU and on the CPU. Counts
of timed calls follow the sweep's precision setting (``quick``, ``adaptive``, ``full``).
"""

from __future__ import annotations

from afford.schema.probes_section import ProbeProtocol

MiB = 2**20
GEMM_N = {"large-gpu": 8192, "small-gpu": 4096, "cpu": 1024}
COPY_BYTES = {"large-gpu": 1024 * MiB, "small-gpu": 256 * MiB, "cpu": 128 * MiB}
CALLS = {"quick": (2, 5), "adaptive": (3, 10), "full": (5, 30)}  # (warm-up, timed)
LADDER = {"quick": (0.02, 0.05, 5), "adaptive": (0.1, 0.2, 10),  # (warm-up s, floor s, steps)
          "full": (0.3, 1.0, 12)}
NVML_WINDOW = {"quick": 0.5, "adaptive": 1.0, "full": 2.0}
CHECKPOINT_WRITES = {"quick": 3, "adaptive": 3, "full": 5}

CUDA_CLOCK = "CUDA events around each call or step; one host sync per batch of calls"
HOST_CLOCK = "host perf_counter around each call or step (synchronous device)"


def probe_protocol(precision: str, device_type: str, device_class: str) -> ProbeProtocol:
    if precision not in CALLS:
        raise ValueError(f"unknown precision {precision!r} (full, adaptive, quick)")
    warm_calls, timed_calls = CALLS[precision]
    ladder_warm, ladder_floor, ladder_steps = LADDER[precision]
    return ProbeProtocol(
        precision=precision, gemm_n=GEMM_N[device_class], gemm_warmup_calls=warm_calls,
        gemm_timed_calls=timed_calls, gemm_reference_rows=64,
        copy_buffer_bytes=COPY_BYTES[device_class], copy_timed_calls=timed_calls,
        clock=CUDA_CLOCK if device_type == "cuda" else HOST_CLOCK,
        ladder_multipliers=[1, 2, 4], ladder_floor_seconds=ladder_floor,
        ladder_warmup_seconds=ladder_warm, ladder_min_steps=ladder_steps,
        nvml_hz=10.0, nvml_window_seconds=NVML_WINDOW[precision], nvml_settle_seconds=0.2,
        low_utilisation=0.05, checkpoint_writes=CHECKPOINT_WRITES[precision],
        startup_children=3)
