"""Device probes: ceilings (GEMM per dtype, copy bandwidth), launch-boundness
(batch ladder + NVML utilisation), FLOPs of a step, checkpoint I/O, startup costs.

Everything that touches the device runs in one fresh child process
(:mod:`afford.measure.probes.probe_child`, spawned by :mod:`afford.measure.probes.runner`), in
the spawn style of :mod:`afford.measure.children`; the parent never initialises CUDA for
the probes. Startup costs are measured in further fresh children
(:mod:`afford.measure.probes.startup`).
"""
