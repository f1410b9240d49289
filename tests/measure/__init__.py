"""The measure lane: real measurement on this machine: certify's child processes, the
probes, the gates' audits, the watchdog, timing under load (conftest's ``cpu_cert`` is one
real certify, made once a session); the CUDA paths are marked ``cuda``."""
