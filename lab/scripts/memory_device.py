"""Issue 20 on a GPU: the memory stage with the allocator replay, timed, on the default
workloads and on transformers models run as user workloads; the expandable-segments peaks
of the held-out shapes; and a what-if budget enforced with
``torch.cuda.set_per_process_memory_fraction``.

    PYTHONPATH=src:lab/scripts python3 lab/scripts/memory_device.py OUT_DIR [--budget-gib 16]

Writes into OUT_DIR:

- ``section-default.json``, ``section-hf.json``: the memory sections (raw shapes with their
  allocator histories, the law, the replay's validation, held-out errors, breakdown), with
  the stage's wall time; the default set (softmax, scan, tinylm) and hf_models:gpt2 +
  hf_models:llama, each in fp32 and bf16. Each stage's child is spawned ahead, as certify
  spawns it while its sweep's last child runs (here: both at the start, while the cuda
  tests run).
- ``expandable.json``: the held-out shapes of tinylm, GPT-2 and Llama measured again in a
  child under ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.
- ``budget.json``: per workload and mode, the largest batch afford predicts under the
  budget (replay and law), then batches run under the cap from the predicted one upward
  until one runs out of memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

GIB = 2 ** 30
HF = ["hf_models:gpt2", "hf_models:llama"]
BUDGET_SEQ = {"tinylm": 2048, "hf_models:gpt2": 1024, "hf_models:llama": 1024}
MAX_TRIES = 14


def stage(workloads: list[str], ahead) -> tuple[object, float]:
    from afford.certify.stage_memory import memory_stage
    from afford.certify.request import CertifyRequest, StageContext, resolve
    from afford.measure import env as envmod

    device = envmod.choose_device("cuda")
    env = envmod.capture(device, "lab/scripts/memory_device.py", datetime.now(timezone.utc))
    req = CertifyRequest(workloads=workloads, modes=["fp32", "bf16"], device="cuda")
    plan = resolve(req, device.type, env.device_class, str(device))
    ctx = StageContext(req=req, env=env, plan=plan, results=[], on_event=lambda e: None,
                       ahead={"memory": ahead} if ahead is not None else {})
    t0 = time.perf_counter()
    section = memory_stage(ctx)["memory"]
    return section, time.perf_counter() - t0


def expandable(sections: list) -> dict:
    """The held-out shapes of tinylm, GPT-2 and Llama again, under expandable segments."""
    from afford.measure.memory_sweep import run_memory_child

    items = []
    for sec in sections:
        for law in sec.laws:
            if law.workload not in BUDGET_SEQ:
                continue
            warm = next(s for s in law.shapes if s.role == "warmup")
            for s in [warm] + [s for s in law.shapes if s.role.startswith("heldout")]:
                items.append({"key": f"{law.workload}|{law.mode}|{s.role}", "role": s.role,
                              "workload": law.workload, "mode": law.mode, "shape": s.shape,
                              "dims": s.dims, "steps": 3})
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    try:
        t0 = time.perf_counter()
        rec = run_memory_child(items, device="cuda", device_class="large-gpu", seed=0)
    finally:
        del os.environ["PYTORCH_CUDA_ALLOC_CONF"]
    return {"seconds": time.perf_counter() - t0, "items": items, "records": rec}


def predictions(sections: list, budget: float) -> list[dict]:
    """The largest batch under ``budget`` by the law and by the replay (with its safety
    margin), each law's replay rebuilt from its raw records by this afford."""
    from afford.certify.stage_replay import build_replay, use_replay
    from afford.figures import replay_figures as fr
    from afford.fit.memory import sizing

    out = []
    for sec in sections:
        for law in sec.laws:
            if law.workload not in BUDGET_SEQ:
                continue
            law = law.model_copy(update={"replay": build_replay(law)})
            s = BUDGET_SEQ[law.workload]
            row = {"workload": law.workload, "mode": law.mode, "seq": s,
                   "law": int(sizing.max_batch(law, {"s": s}, budget, "bench").value),
                   "safety_margin": law.replay.safety_margin}
            row["replay"] = int(fr.max_batch(law, s, budget, False).value)
            row["replay_expandable"] = int(fr.max_batch(law, s, budget, True).value)
            row["uses_replay"] = use_replay(law.replay)
            row["predicted"] = row["replay"] if row["uses_replay"] else row["law"]
            shape = dict(next(x for x in law.shapes if x.role == "base").shape)
            row["shape"] = {**shape, law.dim_keys["s"]: s}
            row["batch_key"] = law.dim_keys["B"]
            out.append(row)
    return out


def budget_child(job_path: str) -> None:
    """Run in a fresh process: the cap set, each (workload, mode) from its predicted batch
    upward until out of memory."""
    import torch

    from afford.measure.memory_sweep import run_item
    from afford.workloads import resolve

    job = json.loads(Path(job_path).read_text())
    device = torch.device("cuda", 0)
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(job["budget"] / total, device)
    results = []
    for row in job["rows"]:
        w = resolve(row["workload"], "large-gpu")
        tried = []
        b = max(1, row["predicted"])
        while len(tried) < MAX_TRIES:
            shape = {**row["shape"], row["batch_key"]: b}
            item = {"workload": row["workload"], "mode": row["mode"], "shape": shape,
                    "steps": 3}
            rec = run_item({row["workload"]: w}, item, device, 0)
            ok = rec.get("error") is None
            tried.append({"B": b, "ok": ok, "oom": rec.get("oom", False),
                          "error": rec.get("error"),
                          "peak_reserved": (rec.get("reserved_by_step") or [None])[-1],
                          "peak_allocated": (rec.get("allocated_by_step") or [None])[-1]})
            print(row["workload"], row["mode"], b, ok, flush=True)
            if not ok:
                break
            b += 1
        results.append({**row, "tried": tried,
                        "largest_ok": max((t["B"] for t in tried if t["ok"]), default=0)})
    Path(job["out"]).write_text(json.dumps({"budget": job["budget"], "total": total,
                                            "fraction": job["budget"] / total,
                                            "results": results}, indent=1))


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--budget-child":
        budget_child(argv[1])
        return
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    gib = float(argv[argv.index("--budget-gib") + 1]) if "--budget-gib" in argv else 16.0
    if "--budget-only" in argv:  # the sections of an earlier run of this bench
        from afford.schema.memory_section import MemorySection

        src = Path(argv[argv.index("--budget-only") + 1])
        sections = [MemorySection.model_validate_json((src / f"section-{n}.json").read_text())
                    for n in ("default", "hf")]
        budget_run(out, sections, gib)
        return
    from afford.measure.memory_sweep import spawn_memory_child

    a = spawn_memory_child("cuda", overlapped=True)
    b = spawn_memory_child("cuda", overlapped=True)
    if "--tests" in argv:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "-m", "cuda", "tests/test_memory_stage.py"],
                           capture_output=True, text=True)
        (out / "pytest-cuda-memory.txt").write_text(r.stdout[-5000:] + r.stderr[-3000:])
    else:
        time.sleep(12)
    sections = []
    for name, workloads, ahead in (("default", [], a), ("hf", HF, b)):
        sec, secs = stage(workloads, ahead)
        sections.append(sec)
        (out / f"section-{name}.json").write_text(sec.model_dump_json())
        print(f"memory stage {name}: {secs:.1f} s (section wall {sec.wall_seconds:.1f} s)",
              flush=True)
        for law in sec.laws:
            rp = law.replay
            print(f"  {law.workload} {law.mode}: trusted {rp and rp.trusted} better "
                  f"{rp and rp.better} replay {rp and rp.replay_worst_reserved_error} law "
                  f"{rp and rp.law_worst_reserved_error} fit {rp and rp.fit_seconds:.2f}s",
                  flush=True)
        for n in sec.not_executable:
            print("  NOT EXECUTABLE", n.what, n.reason[:300], flush=True)
    exp = expandable(sections)
    (out / "expandable.json").write_text(json.dumps(exp))
    print(f"expandable child: {exp['seconds']:.1f} s", flush=True)
    budget_run(out, sections, gib)


def budget_run(out: Path, sections: list, gib: float) -> None:
    rows = predictions(sections, gib * GIB)
    job = out / "budget-job.json"
    job.write_text(json.dumps({"budget": gib * GIB, "rows": rows,
                               "out": str(out / "budget.json")}))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--budget-child", str(job)], check=False)
    print(f"budget child: {time.perf_counter() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
