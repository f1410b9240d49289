"""Reading a certificate into tagged figures: what plans, ladders and reports read from it,
one tagged figure per function, in one module per part of the certificate read.

This is the contract between the measuring side (certify and its stages) and the planning
and rendering side. Each function returns a :class:`~afford.core.provenance.Tagged` value (or
``None`` when the certificate holds nothing to answer with); callers that need a figure
anyway tag their fallback ASSUMED with the reason. A section a stage did not write
(``cert.probes`` absent, say) gives ``None``, never a default dressed as a reading.

Where a certificate is read:

- :mod:`~afford.figures.cert_lookup`: its workloads, their points and its environment (the
  lookups every reader starts from), and the figures read straight off a measured point;
- :mod:`~afford.figures.time_figures`: a warm step at any shape (measured, the step-time
  model, the throughput law) and the time verdict's reasons;
- :mod:`~afford.figures.noise`: why it is noisy, and a point's children's spread;
- :mod:`~afford.figures.memory_figures`: memory at a shape by workload name, the largest
  batch that fits, ``afford size`` (answered by :mod:`~afford.figures.memory_at`, with the
  allocator replay of :mod:`~afford.figures.replay_figures`);
- :mod:`~afford.figures.probes_figures`: the device's ceilings, each workload's FLOPs and
  boundness; :mod:`~afford.figures.session_costs`: start-up and checkpoint costs;
  :mod:`~afford.figures.probes_detail`: the probes' records for the report;
- :mod:`~afford.figures.gates_figures`: the gates, the determinism audit, the noise floor;
- :mod:`~afford.figures.distributed_figures`: a node's collectives and data-parallel scaling;
- :mod:`~afford.figures.summary`: the certify summary's headline per workload;
- :mod:`~afford.figures.cert_readings`: its figures as ledger readings.

This package holds no code: callers import from the module that reads what they need. The
names below are the figures by workload name, as they were first read from here.
"""

from afford.figures.cert_lookup import (
    certified_at,
    device_memory,
    device_name,
    device_type,
    params,
    peak_bytes,
    point,
    point_status,
    shape_at,
    step0_over_warm,
    step0_seconds,
    sweep_param,
    sweep_values,
    tokens_per_step,
    torch_version,
    workload,
    workload_keys,
    workload_probes,
)
from afford.figures.memory_figures import (
    max_batch,
    memory_answer,
    predicted_memory,
    predicted_params,
)
from afford.figures.noise import children_slow_end
from afford.figures.probes_figures import (
    boundness,
    copy_bandwidth,
    datasheet_bandwidth,
    datasheet_peak,
    gemm_rate,
    host_link,
    step_flops,
)
from afford.figures.session_costs import checkpoint_bytes, checkpoint_write_seconds, startup_seconds
from afford.figures.time_figures import step_seconds

__all__ = [
    "boundness", "certified_at", "checkpoint_bytes", "checkpoint_write_seconds",
    "children_slow_end", "copy_bandwidth", "datasheet_bandwidth", "datasheet_peak",
    "device_memory", "device_name", "device_type", "gemm_rate", "host_link", "max_batch",
    "memory_answer", "params", "peak_bytes", "point", "point_status", "predicted_memory",
    "predicted_params", "shape_at", "startup_seconds", "step0_over_warm", "step0_seconds",
    "step_flops", "step_seconds", "sweep_param", "sweep_values", "tokens_per_step",
    "torch_version", "workload", "workload_keys", "workload_probes",
]
