"""Append the figures of a device run that are not in a certificate's headline readings to
the project's ledger (`lab/history.tsv`): certify wall time, levers, gates and the
determinism audit, memory held-out errors, collectives, the ladder.

    python lab/scripts/record_device_run.py --commit SHA [--bench J] [--levers CERT] [--gates J]
        [--memory CERT] [--dist CERT] [--ladder J] [--ledger lab/history.tsv]

Each input is optional; every reading names the run it was read off.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

from afford.figures import ledger
from afford.schema.cert import load_certificate


def _base(cert_env: dict, commit: str, command: str) -> dict:
    return {"device": cert_env["device_name"], "torch": cert_env["torch_version"],
            "commit": commit, "command": command,
            "date": datetime.fromisoformat(cert_env["started_at"])}


def _mode(row: dict) -> str:
    return "quick" if "--quick" in row["command"] else "full" if "--full" in row["command"] \
        else "default"


def bench_rows(path: Path, commit: str) -> list:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    out = []
    for r in rows:
        if "cert_elapsed_seconds" not in r:
            continue
        env = json.loads(Path(r["certificate"]).read_text())["environment"] \
            if Path(r["certificate"]).exists() else {"device_name": r["device"],
                                                     "torch_version": r["torch"],
                                                     "started_at": datetime.now().isoformat()}
        b = _base(env, commit, "python benches/bench_certify.py -- " + r["command"][15:])
        out.append(ledger.new_reading(quantity=f"certify/{_mode(r)}/wall_seconds",
                                      value=r["wall_seconds"], unit="s", **b))
        out.append(ledger.new_reading(quantity=f"certify/{_mode(r)}/elapsed_seconds",
                                      value=r["cert_elapsed_seconds"], unit="s", **b))
    return out


def levers_rows(path: Path, commit: str) -> list:
    cert = load_certificate(path)
    env = json.loads(path.read_text())["environment"]
    b = _base(env, commit, cert.environment.command)
    out = []
    for run in cert.levers.runs if cert.levers else []:
        for lv in run.levers:
            if isinstance(lv.speedup, (int, float)):
                out.append(ledger.new_reading(
                    quantity=f"levers/{run.workload}/{lv.name}/speedup", value=lv.speedup,
                    unit="x", tag="MODULE", config_fingerprint=f"{lv.a} -> {lv.b}; range "
                    f"{lv.speedup_min:.3f}..{lv.speedup_max:.3f}", **b))
    return out


def gates_rows(path: Path, commit: str, device: str, torch: str, date: datetime) -> list:
    doc = json.loads(path.read_text())
    b = {"device": device, "torch": torch, "commit": commit, "date": date,
         "command": "afford gate --device cuda --json"}
    out = []
    for g in doc["gates"]:
        if isinstance(g.get("delta"), (int, float)):
            out.append(ledger.new_reading(quantity=f"gate/{g['name']}/worst_delta",
                                          value=g["delta"], unit="", tag="MEASURED",
                                          config_fingerprint=f"tol={g['tolerance']};{g['status']}", **b))
    for run in (doc["sections"]["determinism"] or {}).get("runs", []):
        flag = "on" if run["deterministic"] else "off"
        for c in run["comparisons"]:
            q = c["quantity"].replace(" ", "_")
            out.append(ledger.new_reading(
                quantity=f"determinism/{run['workload']}/{flag}/{q}/max_abs_delta",
                value=c["max_abs_delta"], unit="", tag="MEASURED",
                config_fingerprint=f"repeats={run['repeats']};value={run['value']};"
                                   f"bitwise={c['bitwise_equal']}", **b))
    return out


def memory_rows(path: Path, commit: str) -> list:
    cert = load_certificate(path)
    env = json.loads(path.read_text())["environment"]
    b = _base(env, commit, cert.environment.command)
    out = []
    for law in cert.memory.laws if cert.memory else []:
        for h in law.heldout:
            for kind, err in (("allocated", h.error), ("reserved", h.reserved_error)):
                if isinstance(err, (int, float)):
                    out.append(ledger.new_reading(
                        quantity=f"memory/{law.workload}/{law.mode}/{h.role}/{kind}_rel_error",
                        value=err, unit="ratio", tag="MODULE", **b))
    return out


def dist_rows(path: Path, commit: str) -> list:
    doc = json.loads(path.read_text())
    b = _base(doc["environment"], commit, doc["environment"]["command"])
    d = doc["distributed"]
    out = []
    for pt in d["collectives"]["points"]:
        out.append(ledger.new_reading(
            quantity=f"collectives/{pt['op']}/{pt['bytes']}B/seconds", value=pt["seconds"],
            unit="s", config_fingerprint=f"world={d['world_size']};backend={d['backend']}", **b))
    for s in d["data_parallel"]:
        for r in s["runs"]:
            out.append(ledger.new_reading(
                quantity=f"dp/{s['strategy']}/w={r['world_size']}/step_seconds",
                value=r["step_seconds"], unit="s",
                step_indices=ledger.format_step_indices(r["step_indices"]), **b))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True)
    ap.add_argument("--ledger", type=Path, default=Path("lab/history.tsv"))
    for flag in ("bench", "levers", "gates", "memory", "dist"):
        ap.add_argument(f"--{flag}", type=Path)
    ns = ap.parse_args()
    rows = []
    if ns.bench:
        rows += bench_rows(ns.bench, ns.commit)
    if ns.levers:
        rows += levers_rows(ns.levers, ns.commit)
    if ns.memory:
        rows += memory_rows(ns.memory, ns.commit)
        if ns.gates:
            env = json.loads(ns.memory.read_text())["environment"]
            rows += gates_rows(ns.gates, ns.commit, env["device_name"], env["torch_version"],
                               datetime.fromisoformat(env["started_at"]))
    if ns.dist:
        rows += dist_rows(ns.dist, ns.commit)
    added = ledger.append(ns.ledger, rows)
    print(f"{len(added)} readings appended to {ns.ledger}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
