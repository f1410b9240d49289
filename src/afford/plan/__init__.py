"""The cost model (DESIGN section 4): pure functions, Tagged figures in, frozen results out.

chunk (session cap, startup, steps per chunk, memory fit), quota (weekly quota with startup
charged, time to target), cadence (checkpoint interval under an overhead budget), failures
(GPU time lost per kill; Young/Daly), disk (checkpoint copies), preflight (GO / NO-GO).
No I/O here: :mod:`afford.planner` gathers the inputs from a certificate, a platform and a run.
"""
