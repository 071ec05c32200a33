"""Every headline number's derivation (issue 14): its expression, evaluated from its own terms,
equals the lab's number for every preset and several workloads; each alternative convention
equals the counter's other figure (causal half, 6N with and without embeddings, sparse peak);
and a hand check of the seed demo's numbers. The pages opening them: tests/app/test_page_derivations.py."""

import math

import pytest

from llama_lab import analysis
from llama_lab.analysis import derive, derive_measured, derive_memory
from llama_lab.analysis.equations import LINE, NEW_LINE, visible_width
from llama_lab.config import PRESETS
from llama_lab.experiments import LiveSettings
from llama_lab.runtime.hardware import GPUS

PRESET_NAMES = sorted(PRESETS)


def holds(d: derive.Derivation) -> None:
    """``d`` evaluates to its value, and so do its alternatives and its terms' own derivations
    (each to the number the term holds in ``d``)."""
    assert d.evaluate() == pytest.approx(d.value, rel=1e-12), (d.title, d.substituted())
    for _, alt in d.alternatives:
        holds(alt)
    for part in d.where:
        holds(part)
        assert part.value == d.terms[part.term], (d.title, part.term)


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_every_derivation_evaluates_to_the_number_shown(name):
    cfg = PRESETS[name]
    T = min(2048, cfg.max_seq_len)
    for d in (
        derive.params_total(cfg),
        derive.params_per_block(cfg),
        derive.params_non_embedding(cfg),
        derive.forward_flops(cfg, T, 2),
        derive.forward_flops(cfg, T, 2, per_token=True),
        derive.training_flops(cfg, T, 2),
    ):
        holds(d)
    for kv_dtype in ("bf16", "fp8", "int8", "int4"):
        holds(derive_memory.kv_bytes_per_token(cfg, kv_dtype))
        holds(derive_memory.kv_cache(cfg, T, 3, kv_dtype))
        holds(derive_memory.kv_cache(cfg, cfg.max_seq_len, 1, kv_dtype))  # past any window
        holds(derive_memory.linear_state(cfg, kv_dtype))
    for weights in ("bf16", "int4", "int8", "fp8"):
        holds(derive_memory.weights_stored(cfg, weights))
        for gpu in ("H100 80GB", "L4"):
            holds(derive_memory.longest_context(cfg, gpu, 1, weights, "fp8"))
    holds(derive.palm_training_per_token(cfg, T))
    holds(derive.score_flops_per_token(cfg, T))
    holds(derive_memory.training_bytes(cfg, T, 2, "bf16"))
    for path in ("naive", "flash"):
        holds(derive_memory.attention_kept(cfg, T, 2, "bf16", path))
        holds(derive_memory.attention_kept(cfg, T, 1, "bf16", path, per_block=True))
    if cfg.is_mla:
        for absorbed in (False, True):
            holds(derive.mla_score_flops(cfg, absorbed))


@pytest.mark.parametrize("name", PRESET_NAMES)
def test_every_derivation_is_the_counters_figure(name):
    """Each derivation's value is the counter's own (not only its expression's): the pages print
    the counter's number after the equation."""
    cfg = PRESETS[name]
    T = min(2048, cfg.max_seq_len)
    assert derive_memory.kv_bytes_per_token(cfg, "int8").value == analysis.kv_cache_bytes_per_token(
        cfg, "int8"
    )
    assert derive_memory.kv_cache(cfg, T, 3, "int4").value == analysis.kv_cache_bytes(cfg, T, 3, "int4")
    assert derive_memory.linear_state(cfg, "bf16").value == analysis.state_bytes(cfg, "bf16")
    memory = analysis.attention_memory(cfg, T, 1, "bf16")
    assert derive_memory.attention_kept(cfg, T, 1, "bf16", "naive").value == memory.naive_bytes
    assert (
        derive_memory.attention_kept(cfg, T, 1, "bf16", "flash", per_block=True).value
        == memory.flash_layer_bytes
    )
    assert (
        derive_memory.training_bytes(cfg, T, 1, "bf16").value
        == analysis.training_memory(cfg, T, 1).total_bytes
    )
    flops = analysis.count_flops(cfg, T, 1)
    assert derive.palm_training_per_token(cfg, T).value == flops.palm_training_per_token
    assert derive.score_flops_per_token(cfg, T).value * T == flops.by_component["attention_scores"]
    assert derive.params_total(cfg).value == analysis.count_params(cfg).total


@pytest.mark.parametrize("kv_dtype", ["fp32", "bf16", "fp8", "int8", "int4"])
@pytest.mark.parametrize("width", [1, 63, 64, 576])
def test_a_vectors_bytes_by_its_format(kv_dtype, width):
    from llama_lab.analysis.quant import kv_head_bytes

    d = derive_memory.head_bytes(kv_dtype, width, "b_head")
    holds(d)
    assert d.value == kv_head_bytes(kv_dtype, width)
    assert ("s" in d.terms) == (kv_dtype in ("int8", "int4"))


def test_the_equation_is_the_formula_the_numbers_and_the_value():
    """One rendering: symbols = numbers = value, below the terms' own derivations; LaTeX for
    st.latex, plain text for the report and messages; a line too long for a page breaks before
    its numbers."""
    kv = derive_memory.kv_bytes_per_token(PRESETS["seed-demo"], "int8")
    assert kv.equation() == (
        r"b_{\text{head}} = D \cdot b + s = 64 \cdot 1 + 2 = 66 \\[0.4em] "
        r"\text{KV bytes/token} = 2 \cdot L \cdot G \cdot b_{\text{head}} = "
        r"2 \cdot 4 \cdot 2 \cdot 66 = 1,056"
    )
    assert (
        kv.text("KV bytes")
        == "b_head = D · b + s = 64 · 1 + 2 = 66; KV bytes = 2 · L · G · b_head = 2 · 4 · 2 · 66 = 1,056"
    )
    cache = derive_memory.kv_cache(PRESETS["seed-demo"], 100, 2, "bf16")
    assert cache.equation(omit=("b_tok",), note="12.5 KiB").endswith(
        r"\text{cache} = \text{bytes/token} \cdot B \cdot T = 2,048 \cdot 2 \cdot 100 = 409,600"
        r"\;(\text{12.5 KiB})"
    )
    ctx = derive_memory.longest_context(PRESETS["seed-demo"], "H100 80GB", 1, "bf16", "bf16")
    assert r"\left\lfloor \frac{" in ctx.equation() and "⌊(" in ctx.text()  # a floor division stays one
    total = derive.params_total(PRESETS["deepseek-v3"]).equation("N")
    lines = total.split(NEW_LINE)  # the symbols, then the numbers, each over lines that fit a page
    assert lines[0].startswith("N = L_") and lines[1].startswith(r"\qquad = 3 \cdot 583,483,392")
    assert all(visible_width(line) <= LINE for line in lines) and lines[-1].endswith("= 671,026,404,352")


def test_a_hybrids_attention_blocks_and_states_and_a_windows_blocks():
    qwen = derive_memory.kv_cache(PRESETS["qwen3-next-80b-a3b"], 4096, 2, "bf16")
    assert qwen.terms["S"] == analysis.state_bytes(PRESETS["qwen3-next-80b-a3b"], "bf16")
    assert dict(derive_memory.kv_bytes_per_token(PRESETS["qwen3-next-80b-a3b"], "bf16").terms)["L_attn"] == 12
    gpt_oss = derive_memory.kv_cache(PRESETS["gpt-oss-20b"], 4096, 1, "bf16")
    assert gpt_oss.terms["L_w"] == 12 and gpt_oss.terms["W"] == 128
    deepseek = derive_memory.attention_kept(PRESETS["deepseek-v3"], 1024, 1, "bf16", "flash")
    assert deepseek.terms["D_v"] == 128  # MLA's value heads


def test_the_speculative_figures_at_gamma_and_at_the_best_gamma():
    s = analysis.speculation(0.8, 4, 0.05)
    expected, at_gamma, best = derive_measured.speculative_gains(0.8, 4, 0.05)
    for d, value in ((expected, s.expected_tokens_per_step), (at_gamma, s.speedup), (best, s.best_speedup)):
        holds(d)
        assert d.value == value
    assert best.terms["gamma"] == s.best_gamma and f"= {s.best_gamma})" in best.equation()
    for alpha in (0.0, 1.0):
        for d in derive_measured.speculative_gains(alpha, 3, 0.1):
            holds(d)


def test_a_sliding_window_past_its_window_and_within_it():
    cfg = PRESETS["mistral-7b"].replace(sliding_window=1024)
    for T in (512, 1024, 4096):
        holds(derive_memory.kv_cache(cfg, T, 2, "bf16"))
    holds(derive_memory.longest_context(cfg, "H100 80GB", 4, "bf16", "bf16"))
    half = cfg.replace(local_layers="every:2")
    holds(derive_memory.longest_context(half, "H100 80GB", 4, "bf16", "bf16"))
    assert "W" in derive_memory.longest_context(half, "H100 80GB", 4, "bf16", "bf16").terms


def test_the_alternatives_are_the_other_conventions_figures():
    cfg = PRESETS["llama-3-8b"]
    flops = analysis.count_flops(cfg, 4096, 1)
    fwd = derive.forward_flops(cfg, 4096, 1)
    assert dict(fwd.alternatives)["causal half (T(T+1)/2 pairs)"].value == flops.forward_causal
    params = analysis.count_params(cfg)
    six = dict(derive.training_flops(cfg, 4096, 1).alternatives)
    assert six["6N, N without the embeddings"].value == 6 * params.non_embedding * 4096
    assert six["6N, N with the embeddings"].value == 6 * params.total * 4096
    m = derive_measured.mfu(400e12, 989e12, "H100")
    assert m.value == pytest.approx(400 / 989)
    assert dict(m.alternatives)["sparse peak (data sheet's 2:4 figure)"].value == pytest.approx(400 / 1978)


def test_the_seed_demo_by_hand():
    cfg = PRESETS["seed-demo"]
    total = derive.params_total(cfg)
    # 4 blocks × (512·512 + 2·512·128 + 512·512 + 3·512·1365 + 2·512) + 2 · 32000 · 512 + 512
    block = 512 * 512 * 2 + 2 * 512 * 128 + 3 * 512 * 1365 + 2 * 512
    assert total.value == 4 * block + 2 * 32000 * 512 + 512 == 43_780_608
    assert "4 · 2,753,024" in total.substituted()
    kv = derive_memory.kv_bytes_per_token(cfg, "bf16")
    assert kv.value == 2 * 4 * 2 * 64 * 2 and kv.substituted() == "2 · 4 · 2 · 128"
    assert derive.initial_loss(32000).value == pytest.approx(math.log(32000))
    holds(derive.initial_loss(32000))
    ctx = derive_memory.longest_context(cfg, GPUS["H100 80GB"], 1, "bf16", "bf16")
    assert (
        ctx.value == ((81_559 * 2**20 - 300 * 10**6) - 87_561_216) // 2048
    )  # H100: reported less the CUDA context


def test_an_expression_may_name_only_its_terms():
    bad = derive.Derivation("x", "", "__import__('os')", {}, 0, "")
    with pytest.raises(ValueError, match="beyond its terms"):
        bad.evaluate()


@pytest.mark.parametrize("name", ["seed-demo", "llama-3-8b", "qwen3-30b-a3b", "transformer-2017"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_attentions_kept_bytes_by_their_formulas(name, dtype):
    for path in ("naive", "flash"):
        holds(derive_memory.attention_kept(PRESETS[name], 1024, 2, dtype, path))


def test_a_measured_runs_derivations_are_its_definitions():
    from llama_lab.experiments import live_pass

    live = live_pass(PRESETS["debug"], 16, 2, LiveSettings(device="cpu", dtype="fp32", iters=1))
    holds(derive_measured.throughput(live.batch, live.seq_len, live.step_ms, live.tokens_per_s))
    holds(derive_measured.achieved_flops(live.training_flops, live.step_ms, live.achieved_tflops * 1e12))
    m = derive_measured.mfu(
        live.achieved_tflops * 1e12, live.peak_flops, live.peak_flops_source, sparse_quoted=False
    )
    assert m.value == pytest.approx(live.mfu) and m.alternatives == ()


@pytest.mark.parametrize("name", ["seed-demo", "llama-3-8b", "qwen3-8b"])
@pytest.mark.parametrize("T", [128, 1000, 8192])
def test_the_hbm_ratio_by_dao_et_als_counts(name, T):
    holds(derive_memory.hbm_ratio(PRESETS[name], T, 1, "bf16", "H100 80GB"))
    holds(derive_memory.hbm_ratio(PRESETS[name], T, 2, "fp32", "A100 80GB"))


@pytest.mark.parametrize("alpha", [0.0, 0.6, 1.0])
def test_the_speculative_speedup_and_its_formula(alpha):
    predicted = analysis.speculation(alpha, 4, 0.1).speedup
    d = derive_measured.speculative_speedup(0.4 / 0.25, 0.4, 0.25, alpha, 4, 0.1, predicted)
    holds(d)


def test_a_ratio_over_seeds_is_the_median_of_the_seeds_ratios():
    from llama_lab.experiments.seeds import median_of  # what the panel shows

    ratios = [2.1, 1.9, 2.5, 0.4, 3.0]
    holds(derive_measured.seed_median_ratio(ratios, median_of(ratios), "x"))
    assert derive_measured.seed_median_ratio([1.0, 3.0], median_of([1.0, 3.0]), "x").value == 2.0
    holds(derive_measured.quantised_share(488_528, 3_017_216, "int4"))
