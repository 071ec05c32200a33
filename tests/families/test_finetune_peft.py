"""Trainable parameters against PEFT (a test dependency) on transformers' module of every
family's small config (tests/families/test_families.py's cases), built on the meta device:
LoRA on PEFT's default targets and on all-linear, DoRA and full fine-tuning; and the linear
layers LLaMA Lab lists are exactly transformers' nn.Linear modules but the output layer."""

import warnings

import pytest
import torch
from test_families import CASES, hf_config, hf_model

from llama_lab.analysis.finetune import (
    ALL_LINEAR,
    FinetuneSpec,
    check_finetune,
    linear_modules,
    target_modules,
    trainable_params,
)
from llama_lab.config import read_hf_config
from llama_lab.errors import AnalysisError

peft = pytest.importorskip("peft")
warnings.filterwarnings("ignore")


def ours_and_theirs(case: str):
    config = hf_config(case)
    cfg, _ = read_hf_config(config.to_dict())
    return cfg, hf_model(config, "meta")


def peft_count(model, spec: FinetuneSpec) -> int:
    """PEFT's get_nb_trainable_parameters()[0] for the recipe (full: every parameter)."""
    if spec.method == "full":
        return sum(p.numel() for p in model.parameters())
    targets = spec.targets if isinstance(spec.targets, str) else list(spec.targets)
    config = peft.LoraConfig(r=spec.rank, target_modules=targets, use_dora=spec.method == "dora")
    return peft.get_peft_model(model, config).get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_linear_modules_are_transformers_nn_linear_but_the_head(case):
    cfg, model = ours_and_theirs(case)
    theirs: dict[tuple[str, int, int], int] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":  # PEFT's rule
            path = name.split(".", 3)[3]  # model.layers.{i}.<path>
            key = (path, module.in_features, module.out_features)
            theirs[key] = theirs.get(key, 0) + 1
    ours = {(m.path, m.inputs, m.outputs): m.count for m in linear_modules(cfg)}
    assert ours == theirs


SPECS = {
    "lora-q-v": FinetuneSpec(rank=4),
    "lora-all-linear": FinetuneSpec(rank=2, targets=ALL_LINEAR),
    "dora-all-linear": FinetuneSpec(method="dora", rank=2, targets=ALL_LINEAR),
    "full": FinetuneSpec(method="full"),
}
NO_Q_V = {"phi3", "phi3-top-level-factor"}  # qkv_proj fused: no q_proj / v_proj
MLA_CASES = {case for case in CASES if "deepseek" in case or "mistral4" in case}


def spec_for(case: str, name: str) -> FinetuneSpec:
    spec = SPECS[name]
    if name == "lora-q-v" and case in NO_Q_V:
        return FinetuneSpec(rank=4, targets=("qkv_proj",))
    if name == "lora-q-v" and case in MLA_CASES:
        return FinetuneSpec(rank=4, targets=("kv_b_proj", "o_proj"))
    return spec


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_trainable_params_equal_peft(case, name):
    """Equal counts, or both refuse (DoRA on transformers 5's fused experts: PEFT's ParamWrapper
    does not work with use_dora=True)."""
    cfg, model = ours_and_theirs(case)
    spec = spec_for(case, name)
    if cfg.has_indexer:  # DeepSeek Sparse Attention: fine-tuning refuses it in one line
        with pytest.raises(AnalysisError, match="fine-tuning does not model DeepSeek Sparse Attention"):
            check_finetune(cfg, spec)
        return
    try:
        ours = trainable_params(cfg, spec)
        check_finetune(cfg, spec)
    except AnalysisError as refusal:
        with pytest.raises(ValueError, match="use_dora"):
            peft_count(model, spec)
        assert "use_dora" in str(refusal)
        return
    assert ours == peft_count(model, spec)


@pytest.mark.parametrize("case", ["qwen3_moe", "deepseek_v3", "glm4_moe"])
def test_named_ffn_targets_reach_the_fused_experts_as_peft_maps_them(case):
    """Under PEFT's v4 → v5 mapping gate_proj, up_proj and down_proj name the fused experts (at
    rank 2r for gate_up_proj); one of gate_proj / up_proj alone is refused by both."""
    cfg, model = ours_and_theirs(case)
    spec = FinetuneSpec(rank=2, targets=("gate_proj", "up_proj", "down_proj"))
    assert trainable_params(cfg, spec) == peft_count(model, spec)
    with pytest.raises(AnalysisError, match="gate_up_proj"):
        target_modules(cfg, ("gate_proj",))
    with pytest.raises(ValueError, match="fused"):
        peft_count(ours_and_theirs(case)[1], FinetuneSpec(rank=2, targets=("gate_proj",)))
