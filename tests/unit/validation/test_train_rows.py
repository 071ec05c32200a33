"""The public training-throughput rows read back from their quoted lines: Megatron-Bridge's and
NeMo 24.07's performance tables (every column the row carries is the quoted line's) and Megatron-Core's MoE
model zoo (its tokens per second per GPU derived from the printed step time)."""

import re

import pytest

from llama_lab.validation import load_rows

TRAIN = [r for r in load_rows() if r.kind == "train"]
BRIDGE = [r for r in TRAIN if r.data["source"]["repo"] == "NVIDIA-NeMo/Megatron-Bridge"]
ZOO = [r for r in TRAIN if r.data["source"]["repo"] == "yanring/Megatron-MoE-ModelZoo"]
NEMO = [r for r in TRAIN if r.data["source"]["repo"] == "NVIDIA/NeMo"]
# the tables' precision labels → the format the row's matmuls run in (MXFP8 as --dtype fp8)
# a line whose GA breaks GBS = MBS · dp · GA as printed (its notes say so)
MISPRINTED_GA = {"megatron-bridge-gpt-oss-120b-bf16-64xh100"}
MATMULS = {"BF16": "bf16", "FP8": "fp8", "FP8-CS": "fp8", "FP8-MX": "fp8", "MXFP8": "fp8"}


def cells(quote: str) -> list[str]:
    return [c.strip() for c in quote.strip().strip("|").split("|")]


def first_or_bracketed(cell: str, bracketed: bool) -> str:
    """'37556 (36108)' → '37556', or '36108' for the row that is the bracketed figure."""
    m = re.fullmatch(r"(.+?)\s*\((.+)\)", re.sub(r"\[\^[^\]]+\]", "", cell).strip())
    if not m:
        return re.sub(r"\[\^[^\]]+\]", "", cell).strip()
    return m.group(2) if bracketed else m.group(1)


def test_the_tables_hold_at_least_the_moe_rows_on_each_system():
    assert len(BRIDGE) >= 100 and len(ZOO) == 6 and len(NEMO) == 5
    moe = {
        (r.data["hardware"]["gpu"], r.data["model"]["name"].split(" (")[0])
        for r in BRIDGE
        if r.workload.get("ep")
    }
    for gpu in ("H100 80GB", "B200", "GB200"):
        assert {"GPT OSS 120B", "Qwen3_30B_a3B", "Qwen3_235B_a22B"} <= {m for g, m in moe if g == gpu}, gpu
    assert all(r.why_not is None for r in BRIDGE + ZOO)


@pytest.mark.parametrize("row", BRIDGE, ids=lambda r: r.id)
def test_a_megatron_bridge_row_is_its_quoted_line(row):
    """#-GPUs, GBS, MBS, sequence length, TP, PP, CP, VP, EP, GA and the two figures as printed
    (columns by the table's order: 'System' or 'Model' first, then #-GPUs, Precision, GBS, MBS,
    Sequence Length, [FSDP], TP, PP, CP, VP, EP, [GA], Tokens/sec/GPU, Model TFLOP/sec/GPU);
    dp = GPUs / (TP · PP · CP) and GBS = MBS · dp · GA (Megatron's rule)."""
    c, w, count = cells(row.data["quote"]), row.workload, row.data["hardware"]["count"]
    has_fsdp, has_ga = len(c) in (14, 15), len(c) == 15  # with FSDP; with FSDP and GA
    bracketed = "normal parentheses" in row.data["notes"] or "The parenthesised figures" in row.data["notes"]
    tp, pp, cp, vp, ep = c[6 + has_fsdp : 11 + has_fsdp]
    assert int(c[1]) == count and (int(c[3]), int(c[4]), int(c[5])) == (
        w["global_batch"],
        w["micro_batch"],
        w["seq_len"],
    )
    assert (int(tp), int(pp), int(cp)) == (w["tp"], w["pp"], w["cp"])
    for printed, field in ((vp, "vp"), (ep, "ep")):  # 'n/a' and 1 alike: one stage, no expert split
        assert (w.get(field) or 1) == (1 if printed == "n/a" else int(printed)), field
    if has_ga:
        assert int(c[12]) == w["grad_accum"]
    assert w["dp"] * w["tp"] * w["pp"] * w["cp"] == count
    rule = w["micro_batch"] * w["dp"] * w["grad_accum"] == w["global_batch"]
    assert rule != (row.id in MISPRINTED_GA) and (rule or "misprinted" in row.data["notes"])
    assert int(first_or_bracketed(c[-2], bracketed)) == row.measured
    assert int(first_or_bracketed(c[-1], bracketed)) == row.data["metric"]["model_tflops_per_gpu"]
    assert row.matmuls_in == MATMULS[first_or_bracketed(c[2], bracketed)]
    release = re.search(r"container ([\d.]+)\)", row.data["software"])
    assert release and row.data["source"]["table"].startswith(f"{release.group(1)} NeMo Container")


@pytest.mark.parametrize("row", ZOO, ids=lambda r: r.id)
def test_a_model_zoo_rows_rate_is_its_step_time_per_token(row):
    """tokens / s / GPU = GBS · SEQ LEN / (Step time · #GPUs), the step time as printed."""
    c, w = cells(row.data["quote"]), row.workload
    gpus, seq, gbs, step = int(c[4]), int(c[5]), int(c[16]), float(c[19])
    assert (gpus, seq, gbs) == (row.data["hardware"]["count"], w["seq_len"], w["global_batch"])
    printed = (int(c[6]), int(c[7]), int(c[8]), int(c[9]), int(c[13]))
    assert printed == (w["tp"], w["cp"], w["ep"], w["pp"], w["dp"])  # TP, CP, EP, PP, DP
    assert w["dp"] * w["tp"] * w["pp"] * w["cp"] == gpus
    assert row.measured == pytest.approx(gbs * seq / (step * gpus), abs=0.05)
    assert row.data["metric"]["step_time_s"] == step and row.matmuls_in == "bf16"


@pytest.mark.parametrize("row", NEMO, ids=lambda r: r.id)
def test_a_nemo_row_is_its_quoted_line(row):
    """Model, #-GPUs, GBS, MBS, Sequence Length, TP, PP, CP, VP, Tokens/sec/GPU, Model TFLOP/sec/GPU
    as printed; dp and GA derived by GBS = MBS · dp · GA."""
    c, w = cells(row.data["quote"]), row.workload
    gpus, gbs, mbs, seq, tp, pp, cp, vp, tokens, tflops = map(int, c[1:11])
    assert (gpus, gbs, mbs, seq) == (
        row.data["hardware"]["count"],
        w["global_batch"],
        w["micro_batch"],
        w["seq_len"],
    )
    assert (tp, pp, cp, vp) == (w["tp"], w["pp"], w["cp"], w.get("vp") or 1)
    assert (tokens, tflops) == (row.measured, row.data["metric"]["model_tflops_per_gpu"])
    assert w["dp"] * tp * pp * cp == gpus and mbs * w["dp"] * w["grad_accum"] == gbs
    assert row.matmuls_in == "fp8" and row.why_not is None
