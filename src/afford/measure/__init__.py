"""Everything that touches a device: environment, timing, child processes, memory, probes.

Only this package runs workloads; fitting, planning and rendering never do.
"""
