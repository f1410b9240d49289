"""The cost model (docs/DESIGN.md section 4): pure functions, Tagged figures in, frozen
results out.

chunk (session cap, startup, steps per chunk, memory fit), quota (weekly quota with startup
charged, time to target), cadence (checkpoint interval under an overhead budget), failures
(GPU time lost per kill; Young/Daly), disk (checkpoint copies), go_no_go (preflight: GO /
NO-GO); :mod:`afford.planning.planner` gathers their inputs from a certificate, a platform and
a run and sequences them. Beside the plan: the scale ladder (scale_ladder), the measured
levers as rows (lever_rows), N devices beyond the measured node (scaling), predictions at a
shape (prediction) and cross-device reproduction (compare_laws). No I/O here: the command
line reads the files, and the API's ``afford.plan(...)`` is :func:`afford.api.plan`.
"""
