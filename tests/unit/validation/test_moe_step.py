"""A mixture of experts' training step by structural term (analysis.experts, validation.moe_step):
each count by hand on a tiny MoE, the all-to-all bytes the layout's own, a dense model untouched,
and ``predict train``'s breakdown of seconds per token."""

import json

import pytest

from llama_lab.analysis import count_flops
from llama_lab.analysis.experts import (
    TRAIN_PASSES,
    all_to_all_bytes_per_token,
    dispatch_bytes_per_token,
    expert_flops_per_token,
    expert_gemms,
    rows_per_expert,
    train_passes,
)
from llama_lab.analysis.finetune import FinetuneSpec
from llama_lab.analysis.finetune_step import finetune_flops
from llama_lab.analysis.parallel import Layout, parallel_memory
from llama_lab.cli import main
from llama_lab.config import PRESETS
from llama_lab.runtime.hardware import GPUS
from llama_lab.validation import Efficiency, load_rows
from llama_lab.validation.efficiency import (
    finetune_seconds,
    train_peak_seconds_per_token,
    train_seconds_by_term,
    train_tokens_per_s_per_gpu,
)
from llama_lab.validation.moe_step import ep_link_bytes_per_s, moe_seconds_per_token
from llama_lab.validation.validate import regime_of

# d 64, 2 blocks, both sparse: 8 experts of width 32, top-2 (SwiGLU: gate, up, down)
MOE = PRESETS["debug"].replace(n_experts=8, experts_per_token=2, expert_ffn_hidden=32)
T, B = 16, 2  # tokens per sequence, sequences per micro-batch
LAYOUT = Layout(gpus=4, ep=4, micro_batch=B)  # 2 experts on each of 4 ranks
H100 = GPUS["H100 80GB"]
EFF = Efficiency()


def test_each_expert_receives_the_ep_ranks_tokens_times_k_over_e():
    # ep·B·T·k / E = 4 · 2 · 16 · 2 / 8
    assert rows_per_expert(MOE, LAYOUT, T) == 32


def test_the_expert_gemms_shapes_flops_and_intensity_by_hand():
    gemms = {g.name: g for g in expert_gemms(MOE, LAYOUT, T)}
    assert set(gemms) == {f"{w} {p}" for w in ("gate_up", "down") for p in TRAIN_PASSES}
    # gate/up forward: (32 rows × 64)·(64 × 2·32); its input gradient (32 × 64)·(64 × 64) back to
    # C; its weight gradient (64 × 32)·(32 × 64); down: (32 × 32)·(32 × 64)
    mnk = {name: (g.m, g.n, g.k) for name, g in gemms.items()}
    assert mnk["gate_up forward"] == (32, 64, 64) and mnk["gate_up input_grad"] == (32, 64, 64)
    assert mnk["gate_up weight_grad"] == (64, 64, 32) and mnk["down forward"] == (32, 64, 32)
    assert mnk["down input_grad"] == (32, 32, 64) and mnk["down weight_grad"] == (32, 64, 32)
    fwd = gemms["gate_up forward"]
    assert fwd.flops == 2 * 32 * 64 * 64 == 262_144
    # bf16: 2 bytes × (32·64 input + 64·64 weight) + 2 bytes × 32·64 output = 16,384
    assert fwd.bytes(2, 2) == 16_384 and fwd.intensity(2, 2) == 16
    # fp8 operands, bf16 output: 1 × 6,144 + 2 × 2,048
    assert fwd.bytes(1, 2) == 10_240
    # tensor parallelism splits the expert's width: gate/up C → 2·32/2
    assert next(iter(expert_gemms(MOE, Layout(gpus=8, tp=2, ep=4, micro_batch=B), T))).n == 32


def test_the_expert_flops_per_token_are_the_routed_part_of_count_flops():
    """3 × the forward's routed experts (count_flops' ffn here: every block sparse, no shared
    experts), whatever the split; one forward more under full recomputation."""
    routed_forward = count_flops(MOE, T).by_component["ffn"] / T
    for layout in (LAYOUT, Layout(gpus=8, tp=2, ep=4, micro_batch=B), Layout(micro_batch=1)):
        assert expert_flops_per_token(MOE, layout, T) == pytest.approx(3 * routed_forward)
    assert expert_flops_per_token(MOE, LAYOUT, T, train_passes("full")) == pytest.approx(4 * routed_forward)
    # 5 tokens · k = 2 over 8 experts: 1.25 rows each on average, the FLOPs still whole
    assert rows_per_expert(MOE, Layout(), 5) == 1.25
    five = count_flops(MOE, 5).by_component["ffn"] / 5
    assert expert_flops_per_token(MOE, Layout(), 5) == pytest.approx(3 * five)


# the tiny MoE as a Qwen3-MoE config.json (every block sparse, the experts 32 wide)
QWEN3_MOE = {
    "model_type": "qwen3_moe",
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
}


def test_the_expert_gemms_are_transformers_experts():
    """transformers' Qwen3-MoE on the tiny config, its experts run eagerly under FlopCounterMode:
    each expert's weights are the forward GEMMs' (k × n), and the experts' forward FLOPs over a
    batch are expert_flops_per_token's forward pass × its tokens."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoConfig, AutoModelForCausalLM

    from llama_lab.analysis.experts import FORWARD
    from llama_lab.config import ModelConfig

    ours = ModelConfig.from_hf_config(QWEN3_MOE)
    config = AutoConfig.for_model(**QWEN3_MOE)
    config._attn_implementation = config._experts_implementation = "eager"
    model = AutoModelForCausalLM.from_config(config).eval()
    experts = model.model.layers[0].mlp.experts
    gemms = {g.name: g for g in expert_gemms(ours, Layout(micro_batch=B), T, (FORWARD,))}
    # gate_up_proj (E, 2·Fe, C): C in, 2·Fe out; down_proj (E, C, Fe): Fe in, C out
    assert tuple(experts.gate_up_proj.shape[1:]) == (gemms["gate_up forward"].n, gemms["gate_up forward"].k)
    assert tuple(experts.down_proj.shape[1:]) == (gemms["down forward"].n, gemms["down forward"].k)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(torch.randint(0, 256, (B, T)))
    counted = sum(
        sum(by_op.values())
        for name, by_op in counter.get_flop_counts().items()
        if name.endswith("mlp.experts")
    )
    assert counted == expert_flops_per_token(ours, Layout(micro_batch=B), T, (FORWARD,)) * B * T


def test_the_all_to_all_bytes_per_token_are_the_layouts_count():
    # per block, dispatch and combine forward and backward: 4 × k·C values × 2 bytes × (ep − 1)/ep
    by_hand = 2 * 4 * 2 * 64 * 2 * 3 / 4
    assert by_hand == 1536
    assert all_to_all_bytes_per_token(MOE, LAYOUT, T) == pytest.approx(by_hand)
    layout = Layout(gpus=8, ep=4, micro_batch=B)  # dp 8: two expert-parallel groups
    counted = parallel_memory(MOE, layout, T).comm_by_kind["ep"] / (B * T)
    assert all_to_all_bytes_per_token(MOE, layout, T) == pytest.approx(counted)
    assert all_to_all_bytes_per_token(MOE, Layout(micro_batch=B), T) == 0


def test_narrow_experts_send_more_bytes_per_expert_flop():
    """Per token and MoE block the all-to-all sends 4·k·C values and the experts run 3·2·k·3·C·Fe
    FLOPs: bytes per expert FLOP go as 1/Fe, whatever k and C — Qwen3-30B-A3B's 768-wide experts
    send 2880/768 = 3.75 times gpt-oss-120b's per FLOP."""
    layout = Layout(gpus=8, ep=8)

    def per_flop(name):
        cfg = PRESETS[name]
        return all_to_all_bytes_per_token(cfg, layout, 4096) / expert_flops_per_token(cfg, layout, 4096)

    assert per_flop("qwen3-30b-a3b") / per_flop("gpt-oss-120b") == pytest.approx(2880 / 768)


def test_the_dispatch_copies_and_router_scores_by_hand():
    # per block, forward and backward: k = 2 routed rows × 4 copies (permute, chunk sort, unsort,
    # unpermute: 2 experts a rank) × read + write of C = 64 bf16 values, and 2 × 8 float32 scores
    per_pass = 2 * 4 * 2 * 64 * 2 + 2 * 4 * 8
    assert dispatch_bytes_per_token(MOE, LAYOUT) == 2 * 2 * per_pass == 8448
    one_each = 2 * 2 * 2 * 64 * 2 + 2 * 4 * 8  # ep = 8: one expert a rank, no chunk sort
    assert dispatch_bytes_per_token(MOE, Layout(gpus=8, ep=8, micro_batch=B)) == 2 * 2 * one_each


def test_the_moe_terms_in_seconds_by_hand():
    """Each expert GEMM at min(peak × dense share × moe_gemm, intensity × HBM × the bandwidth share);
    the all-to-all at tp_link of NVLink inside a node, of the inter-node link beyond."""
    hbm = H100.hbm_bytes_per_s * EFF.decode_bw["16-bit"]
    rate = H100.peak_bf16_flops * EFF.train_bf16 * EFF.moe_gemm
    gemms = expert_gemms(MOE, LAYOUT, T)
    # runs per token: 2 experts a rank × 2 blocks / (B·T = 32 tokens)
    matmuls = sum(max(g.flops / rate, g.bytes(2, 2) / hbm) for g in gemms) * 2 * 2 / 32
    terms = moe_seconds_per_token(MOE, H100, LAYOUT, T, "bf16", EFF.train_bf16, EFF, TRAIN_PASSES)
    assert terms["expert_matmuls"] == pytest.approx(matmuls)
    assert gemms[0].intensity(2, 2) * hbm < rate  # these tiny experts are memory-bound
    # the H100's NVLink 4: 900 GB/s both directions, 450e9 one way (hardware.NVLINK4_SXM)
    assert terms["expert_all_to_all"] == pytest.approx(1536 / (450e9 * EFF.tp_link))
    assert terms["dispatch_memory"] == pytest.approx(8448 / hbm)
    # 16 GPUs leave an 8-GPU HGX node: one 400 Gb/s NIC a GPU, 50e9
    assert ep_link_bytes_per_s(H100, Layout(gpus=16, tp=2, ep=8)) == 50e9


def test_a_moe_step_is_its_dense_matmuls_plus_its_own_terms():
    terms = train_seconds_by_term(MOE, H100, T, None, "bf16", EFF, ep=4, micro_batch=B)
    matmuls_s, scores_s = train_peak_seconds_per_token(MOE, H100, T, None, "bf16")
    dense = matmuls_s - expert_flops_per_token(MOE, LAYOUT, T) / H100.peak_bf16_flops
    assert terms["matmuls"] == pytest.approx(dense / EFF.train_bf16)
    assert terms["attention_scores"] == pytest.approx(scores_s / EFF.train_attention)
    own = moe_seconds_per_token(MOE, H100, LAYOUT, T, "bf16", EFF.train_bf16, EFF, TRAIN_PASSES)
    assert {k: terms[k] for k in own} == own
    rate = train_tokens_per_s_per_gpu(MOE, H100, T, None, "bf16", EFF, ep=4, micro_batch=B)
    assert rate.estimate == pytest.approx(1 / sum(terms.values()))


def test_a_dense_model_is_untouched_by_the_moe_path():
    cfg = PRESETS["debug"]
    matmuls_s, scores_s = train_peak_seconds_per_token(cfg, H100, T, None, "bf16")
    by_hand = matmuls_s / EFF.train_bf16 + scores_s / EFF.train_attention
    terms = train_seconds_by_term(cfg, H100, T, None, "bf16", EFF, ep=1, micro_batch=8)
    assert set(terms) == {"matmuls", "attention_scores", "tp_collectives"}
    assert sum(terms.values()) == pytest.approx(by_hand)
    spec = FinetuneSpec(method="full")
    work = finetune_flops(cfg, spec, T, B)
    peak = H100.peak_bf16_flops
    by_hand = work.matmuls / (peak * EFF.finetune_matmul) + work.scores / (peak * EFF.train_attention)
    assert finetune_seconds(cfg, H100, spec, T, B, EFF).estimate == pytest.approx(by_hand)


def test_a_moe_finetune_runs_its_experts_through_the_same_terms_on_one_gpu():
    """Full fine-tuning of the tiny MoE on one GPU: the dense matmuls at finetune_matmul, the
    experts' terms at that share (no all-to-all: every expert is local)."""
    spec = FinetuneSpec(method="full")
    step = finetune_seconds(MOE, H100, spec, T, B, EFF)
    one = Layout(micro_batch=B)
    terms = moe_seconds_per_token(MOE, H100, one, T, "bf16", EFF.finetune_matmul, EFF, TRAIN_PASSES)
    assert terms["expert_all_to_all"] == 0
    matmuls_s, scores_s = train_peak_seconds_per_token(MOE, H100, T, None, "bf16")
    dense = matmuls_s - expert_flops_per_token(MOE, one, T) / H100.peak_bf16_flops
    per_token = dense / EFF.finetune_matmul + scores_s / EFF.train_attention + sum(terms.values())
    assert step.estimate == pytest.approx(per_token * B * T)


def test_only_the_moe_training_rows_inform_moe_gemm():
    moe = [r for r in load_rows() if regime_of(r) == "moe_train"]
    assert moe and all(r.kind == "train" and r.config.is_moe for r in moe)
    # gpt-oss-120b, DeepSeek-V3, Qwen3-30B-A3B and Qwen3-235B-A22B in Megatron-Bridge's releases
    fit = [r for r in moe if r.half == "fit"]
    assert len(fit) >= 2 and {r.config.n_experts for r in fit} >= {128, 256}


def test_predict_train_shows_the_seconds_per_token_by_term(capsys):
    argv = ["predict", "train", "--preset", "gpt-oss-120b", "--gpu", "h100-80gb", "--gpus", "64"]
    assert main([*argv, "--pp", "4", "--ep", "8", "--seq-len", "4096", "--micro-batch", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    terms = out["seconds_per_token_by_term"]
    assert set(terms) == {
        "matmuls",
        "attention_scores",
        "tp_collectives",
        "expert_matmuls",
        "expert_all_to_all",
        "dispatch_memory",
        "pipeline_bubble",
    }
    assert sum(terms.values()) == pytest.approx(1 / out["tokens_per_s_per_gpu"]["estimate"])
    assert terms["expert_all_to_all"] > 0 and terms["pipeline_bubble"] > 0
    argv = ["predict", "train", "--preset", "debug", "--gpu", "h100-80gb", "--gpus", "1", "--json"]
    assert main(argv) == 0
    dense = json.loads(capsys.readouterr().out)["seconds_per_token_by_term"]
    assert set(dense) == {"matmuls", "attention_scores", "tp_collectives", "pipeline_bubble"}
