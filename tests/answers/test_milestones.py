"""Milestones: eval readings refused without step or window, bars judged only on their own
window, curves compared at equal tokens (interpolated, never at equal steps), tokens a rung
needs beside a plan's tokens a week, and the CLI's exit codes."""

import json
import math
from datetime import datetime, timezone

import pytest
from typer.testing import CliRunner

from afford.bars import milestone_verdicts as ms
from afford.cli import app
from afford.core.errors import InputError
from afford.core.provenance import Tag, module
from afford.schema import ledger
from afford.schema.bars_file import BarsFile, EvalReading, Ladder, Rung

runner = CliRunner()
W = "ab" * 32          # the bars' window
OTHER = "cd" * 32      # another window
DATE = datetime(2026, 9, 28, 12, 0, tzinfo=timezone.utc)


def bars_file(values: dict[str, float], window: str = W, pinned: bool = True) -> BarsFile:
    """A bars file with the given bars (label 'kneser-ney:5' -> BPB) on ``window``."""
    bars = []
    for label, v in values.items():
        smoothing, order = label.split(":")
        bpb = module(v, "bit/B", f"test bar {label}")
        bars.append(dict(order=int(order), smoothing=smoothing, window_sha256=window,
                         bits=v * 102_400, bytes_scored=102_400,
                         bpb=bpb.model_copy(update={"provisional": not pinned})))
    return BarsFile.model_validate(dict(
        created_at=DATE, afford_version="0.1.0", command="afford bars (test)",
        data=dict(path="train.bin", sha256="ef" * 32, size_bytes=10**7, pinned=pinned),
        window=dict(sha256=window, offset_bytes=10**7 - 102_400, length_bytes=102_400,
                    spec="batches:10x10x1024", cut="eval_batches x batch x seq_len",
                    eval_batches=10, batch=10, seq_len=1024,
                    arithmetic="10 x 10 x 1024 = 102,400 bytes"),
        train_bytes=10**7 - 102_400, train_segments=[(0, 10**7 - 102_400)],
        counting=dict(method="exact", seconds=1.0), provisional=not pinned, bars=bars))


def ev(run, step, tokens, bpb, window=W):
    return EvalReading(run=run, step=step, tokens=tokens, bpb=bpb, window=window,
                       source="test")


def rung(**kw) -> Rung:
    return Rung(**{"name": "r", "run": "7.5M", **kw})


# ---------------------------------------------------------------- readings


def test_eval_reading_round_trips_through_the_ledger(tmp_path):
    p = tmp_path / "h.tsv"
    r = ms.eval_ledger_reading("7.5M", 1200, 61_440_000, 4.997, W, date=DATE,
                               device="RTX 4000", command="train.py")
    assert r.quantity == "7.5M/tokens=61440000/eval_bpb" and r.step_indices == "1200"
    ledger.append(p, [r])
    got, struck = ms.from_ledger(ledger.load(p), "h.tsv")
    assert struck == 0
    assert (got[0].run, got[0].step, got[0].tokens, got[0].bpb, got[0].window) == \
        ("7.5M", 1200, 61_440_000, 4.997, W)


def _line(**kw):
    base = dict(date=DATE, device="RTX 4000", command="train.py", unit="bit/B",
                quantity="7.5M/tokens=1000/eval_bpb", value=5.0, step_indices="10",
                config_fingerprint=f"window={W[:12]}")
    return ledger.new_reading(**{**base, **kw})


@pytest.mark.parametrize("kw,match", [
    (dict(step_indices=""), "without its step index"),
    (dict(step_indices="10-12"), "without its step index"),
    (dict(config_fingerprint=""), "without its window"),
    (dict(config_fingerprint="abc"), "without its window"),
    (dict(quantity="7.5M/eval_bpb"), "tokens=N"),
    (dict(unit=""), "bit/B"),
])
def test_ledger_eval_reading_without_step_window_or_tokens_is_refused(kw, match):
    with pytest.raises(InputError, match=match):
        ms.from_ledger([_line(**kw)], "h.tsv")


def test_struck_eval_readings_are_left_out_and_counted():
    r = _line().model_copy(update={"status": "withdrawn", "reason": "wrong window"})
    other = ledger.new_reading(date=DATE, device="x", command="c", quantity="a/step0_seconds",
                               value=1.0, unit="s", step_indices="0")
    assert ms.from_ledger([r, other, _line(value=4.0)], "h")[1] == 1
    assert [x.bpb for x in ms.from_ledger([r, _line(value=4.0)], "h")[0]] == [4.0]


def test_log_formats_tsv_json_and_json_lines():
    tsv = f"# a trainer's eval log\nstep\ttokens\tbpb\twindow\n100\t51200\t6.49\t{W}\n" \
          f"200\t102400\t5.90\t{W[:12]}\n"
    js = json.dumps([{"step": 100, "tokens": 51200, "bpb": 6.49, "window_sha256": W}])
    jl = "\n".join(json.dumps({"run": "a", "step": s, "tokens": s * 512, "val_bpb": 6.0,
                               "window": W}) for s in (1, 2))
    assert [(r.step, r.tokens, r.bpb) for r in ms.parse_log(tsv, "log.tsv", "a")] == \
        [(100, 51200, 6.49), (200, 102400, 5.90)]
    assert ms.parse_log(js, "log.json", "a")[0].window == W
    assert [r.run for r in ms.parse_log(jl, "log.jsonl")] == ["a", "a"]


@pytest.mark.parametrize("text,match", [
    (f"tokens\tbpb\twindow\n51200\t6.49\t{W}\n", "without its step index"),
    ("step\ttokens\tbpb\n100\t51200\t6.49\n", "without its window"),
    (f"step\ttokens\tbpb\twindow\n\t51200\t6.49\t{W}\n", "without its step index"),
    (json.dumps([{"step": 1, "tokens": 5, "bpb": 6.0}]), "without its window"),
    (json.dumps([{"step": 1, "tokens": 5, "bpb": 6.0, "window": "xyz"}]), "window"),
    (json.dumps([{"step": 1.5, "tokens": 5, "bpb": 6.0, "window": W}]), "whole"),
    (f"step\ttokens\tbpb\twindow\n1\t5\tnan\t{W}\n", "bpb"),
])
def test_log_reading_without_step_or_window_is_refused(text, match):
    with pytest.raises(InputError, match=match):
        ms.parse_log(text, "log", "a")


def test_log_without_a_run_name_is_refused():
    with pytest.raises(InputError, match="which run"):
        ms.parse_log(f"step\ttokens\tbpb\twindow\n1\t5\t6.0\t{W}\n", "log")


# ---------------------------------------------------------------- bar rungs


def test_bar_rung_passes_at_the_first_reading_below_the_bar():
    bf = bars_file({"kneser-ney:5": 2.572, "kneser-ney:1": 5.170})
    rs = [ev("7.5M", 100, 51_200, 6.49), ev("7.5M", 2000, 1_024_000, 5.10),
          ev("7.5M", 3000, 1_536_000, 4.997)]
    uni = ms.judge_bar(rung(bar="kn:1"), bf, rs)
    assert uni.status == "PASSED" and uni.step == 2000 and uni.tokens.value == 1_024_000
    assert uni.margin.value == pytest.approx(5.170 - 5.10)
    five = ms.judge_bar(rung(bar="kneser-ney:5"), bf, rs)
    assert five.status == "NOT YET" and five.step == 3000
    assert five.margin.value == pytest.approx(2.572 - 4.997)     # -2.425: not close
    assert five.bar.value == 2.572 and five.window_sha256 == W


def test_readings_on_another_window_are_never_compared():
    bf = bars_file({"kneser-ney:5": 2.572})
    rs = [ev("7.5M", 100, 51_200, 2.0, window=OTHER)]
    r = ms.judge_bar(rung(bar="kn:5"), bf, rs)
    assert r.status == "NOT YET" and r.reading is None and r.margin is None
    assert r.readings_other_windows == 1 and "not compared" in r.reason


def test_a_window_prefix_names_the_same_window():
    assert ms.same_window(W, W[:12]) and not ms.same_window(W, OTHER[:12])


def test_provisional_bar_makes_a_provisional_verdict():
    bf = bars_file({"kneser-ney:1": 5.170}, pinned=False)
    r = ms.judge_bar(rung(bar="kn:1"), bf, [ev("7.5M", 10, 5120, 5.0)])
    assert r.status == "PASSED" and r.provisional and r.margin.provisional


def test_bars_file_refuses_provisional_out_of_step_with_the_pin():
    raw = json.loads(bars_file({"kneser-ney:1": 5.0}).to_json())
    raw["provisional"] = True
    with pytest.raises(ValueError, match="provisional"):
        BarsFile.model_validate(raw)


# ---------------------------------------------------------------- curves at equal tokens


def test_interpolation_is_linear_in_log_tokens():
    c = [ev("b", 1, 1000, 6.0), ev("b", 2, 100_000, 4.0)]
    assert ms.interpolate(c, 10_000) == pytest.approx(5.0)   # halfway in log tokens
    assert ms.interpolate(c, 1000) == 6.0
    assert ms.interpolate(c, 999) is None and ms.interpolate(c, 100_001) is None


def test_curve_rung_compares_at_equal_tokens_not_equal_steps():
    """The 25M run uses batch 2 (1,024 tokens a step), the 7.5M run batch 8 (4,096). At
    step 1000 the 7.5M run has seen 4x the tokens and a lower BPB: at equal steps the 25M
    run looks worse. At equal tokens (1,024,000) the 7.5M curve, interpolated, is higher:
    the 25M run beats it."""
    small = [ev("7.5M", 100, 409_600, 5.8), ev("7.5M", 1000, 4_096_000, 4.6)]
    big = [ev("25M", 500, 512_000, 5.7), ev("25M", 1000, 1_024_000, 5.2)]
    at_equal_steps = big[1].bpb < small[1].bpb
    assert not at_equal_steps                                    # 5.2 vs 4.6
    r = ms.judge_curve(rung(run="25M", beats_run="7.5M"), W, small + big)
    f = math.log(1_024_000 / 409_600) / math.log(4_096_000 / 409_600)
    expected_small = 5.8 + f * (4.6 - 5.8)                       # 5.32
    assert r.tokens.value == 1_024_000 and r.step == 1000
    assert r.baseline.value == pytest.approx(expected_small)
    assert r.margin.value == pytest.approx(expected_small - 5.2)
    assert r.status == "PASSED" and "never at equal steps" in r.reason


def test_curves_that_do_not_overlap_are_not_extrapolated():
    rs = [ev("7.5M", 10, 10_000_000, 4.0), ev("7.5M", 20, 20_000_000, 3.8),
          ev("25M", 1, 1000, 7.0), ev("25M", 2, 2000, 6.5)]
    r = ms.judge_curve(rung(run="25M", beats_run="7.5M"), W, rs)
    assert r.status == "NOT YET" and "never extrapolated" in r.reason


def test_a_curve_with_two_values_at_one_token_count_is_refused():
    with pytest.raises(InputError, match="two eval readings"):
        ms.curve([ev("a", 1, 1000, 5.0), ev("a", 2, 1000, 4.0)])


def test_curve_rung_window_must_match_its_bars_file():
    lad = Ladder(rungs=[rung(run="25M", beats_run="7.5M", window=OTHER)])
    with pytest.raises(InputError, match="never compared"):
        ms.evaluate(lad, "l.toml", [bars_file({"kneser-ney:1": 5.0})], [])


# ---------------------------------------------------------------- beside the plan


def test_tokens_needed_default_to_chinchilla_and_weeks_follow_the_plan():
    per_week = module(50_000_000, "tokens", "plan: tokens a week")
    cols = ms.plan_columns(rung(bar="kn:5", params="7.5M"), per_week, "l.toml")
    assert cols["tokens_needed"].value == 150_000_000 and cols["tokens_needed"].tag == Tag.MODULE
    assert cols["weeks_needed"].value == pytest.approx(3.0)
    cols = ms.plan_columns(rung(bar="kn:5", params="7.5M", tokens="600M"), None, "l.toml")
    assert cols["tokens_needed"].value == 600_000_000 and cols["weeks_needed"] is None


def _plan_doc(tokens_per_week: float | None = None) -> dict:
    """A whole plan (afford plan --json) of the synthetic P100, its tokens a week set."""
    from afford.planning.planner import plan
    from tests.plan_helpers import make_cert, make_platform, make_run

    doc = json.loads(plan(make_cert(), make_platform(), make_run()).to_json())
    if tokens_per_week is None:
        doc["quota"] = None
    else:
        doc["quota"]["tokens_per_week"]["value"] = tokens_per_week
    return doc


def test_tokens_per_week_is_read_from_a_plan():
    assert ms.tokens_per_week(_plan_doc(1e9), "p.json").value == 1e9
    assert ms.tokens_per_week(_plan_doc(None), "p") is None
    with pytest.raises(InputError):
        ms.tokens_per_week({"schema": "afford.cert/1"}, "p.json")


@pytest.mark.parametrize("value,match", [(-5e7, "out of range"), ("many", "not a number")])
def test_a_plan_is_read_whole_and_bounded(value, match):
    """The plan goes through the plan reader report --plan uses (issue 33): a negative or
    non-numeric figure is refused, never divided by."""
    with pytest.raises(InputError, match=match):
        ms.tokens_per_week(_plan_doc(value), "p.json")


@pytest.mark.parametrize("kw", [dict(), dict(bar="kn:1", beats_run="x"),
                                dict(beats_run="7.5M")])
def test_a_rung_is_a_bar_or_a_curve(kw):
    with pytest.raises(ValueError):
        rung(**kw)


# ---------------------------------------------------------------- the command line


LADDER = """schema = "afford.milestones/1"
bars = "bars.json"

[[rungs]]
name = "7.5M beats the unigram counter"
run = "7.5M"
bar = "kneser-ney:1"
params = "7.5M"

[[rungs]]
name = "7.5M beats the 5-gram counter"
run = "7.5M"
bar = "kn:5"
params = "7.5M"
"""


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "bars.json").write_text(bars_file({"kneser-ney:1": 5.170,
                                                   "kneser-ney:5": 2.572}).to_json())
    (tmp_path / "ladder.toml").write_text(LADDER)
    return tmp_path


def _log(path, rows):
    path.write_text("step\ttokens\tbpb\twindow\n" +
                    "".join(f"{s}\t{t}\t{b}\t{w}\n" for s, t, b, w in rows))
    return path


def test_cli_not_yet_exits_1_and_prints_margins(setup):
    log = _log(setup / "run.tsv", [(100, 51_200, 6.49, W), (3000, 1_536_000, 4.997, W)])
    r = runner.invoke(app, ["milestones", str(setup / "ladder.toml"), "--log",
                            f"7.5M={log}", "--json"])
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "afford.milestones-result/1"
    assert [x["status"] for x in doc["rungs"]] == ["PASSED", "NOT YET"]
    assert doc["rungs"][1]["margin"]["value"] == pytest.approx(2.572 - 4.997)


def test_cli_all_passed_exits_0_with_the_plan_beside(setup):
    log = _log(setup / "run.tsv", [(9000, 4_608_000, 2.4, W)])
    (setup / "plan.json").write_text(json.dumps(_plan_doc(50_000_000)))
    r = runner.invoke(app, ["milestones", str(setup / "ladder.toml"), "--log",
                            f"7.5M={log}", "--plan", str(setup / "plan.json")])
    assert r.exit_code == 0, r.output
    assert "PASSED" in r.stdout and "NOT YET" not in r.stdout and W[:12] in r.stdout
    plan_rows = [line.split() for line in r.stdout.splitlines() if "150M C" in line]
    assert plan_rows == [[i, "7.5M", "I", "150M", "C", "50M", "C", "3", "C"] for i in "12"]


def test_cli_reads_eval_readings_from_the_ledger(setup):
    h = setup / "history.tsv"
    ledger.append(h, [ms.eval_ledger_reading("7.5M", 9000, 4_608_000, 2.4, W, date=DATE,
                                             device="RTX 4000", command="train.py")])
    r = runner.invoke(app, ["milestones", str(setup / "ladder.toml"), "--history", str(h)])
    assert r.exit_code == 0, r.output
    assert "PASSED" in r.stdout and W[:12] in r.stdout  # judged on the ledger's reading


@pytest.mark.parametrize("rows,match", [
    ([(None, 51_200, 6.49, W)], "step index"),
    ([(100, 51_200, 6.49, "")], "window"),
])
def test_cli_eval_reading_without_step_or_window_exits_2(setup, rows, match):
    log = setup / "run.tsv"
    log.write_text("step\ttokens\tbpb\twindow\n" + "".join(
        f"{'' if s is None else s}\t{t}\t{b}\t{w}\n" for s, t, b, w in rows))
    r = runner.invoke(app, ["milestones", str(setup / "ladder.toml"), "--log", f"7.5M={log}"])
    assert r.exit_code == 2, r.output
    assert match in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("args,match", [
    ([], "no eval readings"),
    (["--log", "=x.tsv"], "RUN=PATH"),
    (["--log", "7.5M=missing.tsv"], "no such file"),
])
def test_cli_bad_input_exits_2(setup, args, match):
    r = runner.invoke(app, ["milestones", str(setup / "ladder.toml"), *args])
    assert r.exit_code == 2, r.output
    assert match in r.output


def test_cli_bad_ladder_exits_2(tmp_path):
    (tmp_path / "l.toml").write_text('schema = "afford.milestones/1"\n[[rungs]]\nname = "x"\n')
    r = runner.invoke(app, ["milestones", str(tmp_path / "l.toml"), "--log", "a=b"])
    assert r.exit_code == 2 and "run" in r.output
