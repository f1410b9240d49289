"""The cost model (docs/DESIGN.md section 4): pure functions, Tagged figures in, frozen
results out.

chunk (session cap, startup, steps per chunk, memory fit), quota (weekly quota with startup
charged, time to target), cadence (checkpoint interval under an overhead budget), failures
(GPU time lost per kill; Young/Daly), disk (checkpoint copies), preflight (GO / NO-GO);
:mod:`afford.planning.planner` gathers their inputs from a certificate, a platform and a run and
sequences them. Beside the plan: the scale ladder (ladder), the measured levers as rows
(levers), and N devices beyond the measured node (scaling). No I/O here: the command line
reads the files.

The package is also the API's ``afford.plan(cert, platform, run=None, *, manifest=None)``
(:func:`afford.api.plan`, which reads the files; :mod:`afford.core.callable_package` says why a
package is callable).
"""

from afford.core.callable_package import make_callable

make_callable(__name__, "afford.api:plan")
