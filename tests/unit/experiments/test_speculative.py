"""Speculative decoding (issue 13, part 3): Leviathan et al.'s formulas against a hand table
and a Monte-Carlo simulation of i.i.d. acceptance; the live greedy decoding lossless on several
seeds and drafts; the cache's roll-back; the CLI."""

import json
import random

import pytest
import torch

from llama_lab import analysis
from llama_lab.analysis.speculative import expected_tokens_per_step, speculation, speedup
from llama_lab.cli import main
from llama_lab.config import PRESETS
from llama_lab.experiments import speculative as spec
from llama_lab.model import KVCache, build_model


@pytest.mark.parametrize(
    "alpha,gamma,tokens",
    [
        (0.0, 4, 1.0),
        (1.0, 4, 5.0),
        (0.5, 3, 1.875),  # (1 − 0.5⁴) / 0.5
        (0.8, 4, 3.3616),
        (0.6, 1, 1.6),
        (0.9, 2, 2.71),
    ],
)  # 1 + α + α²
def test_expected_tokens_by_hand(alpha, gamma, tokens):
    assert expected_tokens_per_step(alpha, gamma) == pytest.approx(tokens)


def test_speedup_and_the_best_gamma_by_hand():
    assert speedup(0.8, 4, 0.05) == pytest.approx(3.3616 / 1.2)
    best = speculation(0.8, 4, 0.05)
    brute = max(range(1, 65), key=lambda g: speedup(0.8, g, 0.05))
    assert best.best_gamma == brute and best.best_speedup == pytest.approx(speedup(0.8, brute, 0.05))
    # a useless draft (α = 0) never pays: every γ is slower than the target alone
    worthless = speculation(0.0, 3, 0.1)
    assert not worthless.worth_it and worthless.speedup == pytest.approx(1 / 1.3)


@pytest.mark.parametrize("alpha,gamma", [(0.3, 2), (0.7, 4), (0.95, 6)])
def test_the_formula_matches_a_simulation_of_iid_acceptance(alpha, gamma):
    """Each drafted token accepted with probability α until the first rejection; a step yields
    the accepted ones plus one token of the target's."""
    rng = random.Random(0)
    steps, total = 100_000, 0
    for _ in range(steps):
        n = 0
        while n < gamma and rng.random() < alpha:
            n += 1
        total += n + 1
    assert total / steps == pytest.approx(expected_tokens_per_step(alpha, gamma), rel=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("gamma", [1, 3, 5])
def test_speculative_greedy_equals_the_targets_greedy(seed, gamma):
    """Lossless on every seed and draft: an unrelated draft (α ≈ 0), the target itself (α = 1)
    and a shallower copy; the cache roll-back is exercised by every rejection."""
    cfg = PRESETS["debug"].replace(max_seq_len=128)
    target = build_model(cfg, seed=seed).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 12), generator=torch.Generator().manual_seed(seed))
    reference = spec.greedy(target, prompt, 24)
    for draft in (
        build_model(cfg, seed=seed + 100).eval(),
        target,
        build_model(cfg.replace(n_layers=1), seed=seed).eval(),
    ):
        counts = spec.speculative(target, draft, prompt, 24, gamma)
        assert counts.tokens == reference
        assert counts.accepted + counts.rejections <= counts.drafted
    same = spec.speculative(target, target, prompt, 24, gamma)
    assert same.rejections == 0 and same.tokens_per_verification == gamma + 1


def test_greedy_with_the_cache_equals_greedy_without_it():
    cfg = PRESETS["debug"]
    model = build_model(cfg, seed=0).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 8), generator=torch.Generator().manual_seed(0))
    out, seq = spec.greedy(model, ids, 10), ids
    with torch.no_grad():
        for _ in range(10):
            nxt = model(seq)[0, -1].argmax()
            seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
    assert out == seq[0, 8:].tolist()


def test_the_cache_goes_back_and_refuses_what_it_cannot():
    cfg = PRESETS["debug"]
    cache = KVCache(cfg, 1, 32)
    cache.length = 10
    cache.truncate(6)
    assert cache.length == 6
    with pytest.raises(ValueError, match="between 0 and the 6 tokens"):
        cache.truncate(7)
    window = KVCache(cfg.replace(sliding_window=4), 1, 32)
    window.length = 9
    with pytest.raises(ValueError, match="shifted out"):
        window.truncate(8)


@pytest.mark.slow
def test_the_cli_prints_the_formula_and_a_live_run(capsys):
    assert main(["speculate", "--alpha", "0.8", "--gamma", "4", "--cost-ratio", "0.05", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["expected_tokens_per_step"] == pytest.approx(3.3616)
    assert r["speedup"] == pytest.approx(3.3616 / 1.2) and r["best_gamma"] == 8
    assert main(["speculate", "--gamma", "2"]) == 2
    assert "needs --alpha and --cost-ratio" in capsys.readouterr().err
    assert (
        main(
            [
                "speculate",
                "--live",
                "--steps",
                "0",
                "--new-tokens",
                "8",
                "--gamma",
                "2",
                "--device",
                "cpu",
                "--json",
            ]
        )
        == 0
    )
    live = json.loads(capsys.readouterr().out)
    assert live["identical_to_target_greedy"] is True
    assert 0 <= live["measured_alpha"] <= 1 and live["measured_speedup"] > 0
    assert [d["label"] for d in live["drafts"]] == ["trained draft", "untrained draft"]
    assert analysis.speculation(live["measured_alpha"], 2, live["cost_ratio"]).speedup == pytest.approx(
        live["predicted_speedup"]
    )
    # the time split of one call: the three parts are shares of the whole
    for d in live["drafts"]:
        parts = (d["draft_share"], d["verify_share"], d["overhead_share"])
        assert all(0 <= p <= 1 for p in parts) and sum(parts) == pytest.approx(1)
    # the continuation shown is the target's greedy output, decoded
    assert len(live["target_text"].encode("utf-8", errors="surrogatepass")) >= 1
    assert 1 <= live["distinct_tokens"] <= 8


def test_the_time_split_adds_up_within_the_call():
    cfg = PRESETS["debug"].replace(max_seq_len=128)
    target, draft = build_model(cfg, seed=0).eval(), build_model(cfg, seed=1).eval()
    prompt = torch.randint(0, cfg.vocab_size, (1, 12), generator=torch.Generator().manual_seed(0))
    counts = spec.speculative(target, draft, prompt, 20, 3)
    assert 0 < counts.draft_s and 0 < counts.verify_s
    assert counts.draft_s + counts.verify_s <= counts.total_s
