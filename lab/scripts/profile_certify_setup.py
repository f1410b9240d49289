"""Where certify's parent spends the time before its sweep's first job (2026-12-06: an
``hf:`` workload reached the sweep 16.3 s after the command began on an H100, the default
5.3 s). Runs ``afford certify ARGS`` as the console script does (the first child spawned
early), with the sweep replaced by an exit, under cProfile:

    python3 -m cProfile -o OUT.prof lab/scripts/profile_certify_setup.py -w SPEC --out X.json
"""

import sys
import time

T0 = time.perf_counter()


def stop(*args, **kwargs):
    print(f"sweep reached {time.perf_counter() - T0:.2f} s after the script began",
          file=sys.stderr, flush=True)
    raise SystemExit(0)


def main() -> None:
    sys.argv = ["afford", "certify", *sys.argv[1:]]
    from afford._entry import main as entry
    import afford.measure.children as children

    children.run_children = stop  # before afford.certification imports it by name
    entry()


main()
