"""Building a model: the modules on the target device and dtype, then the initial weights.

A bf16 model is built in bf16: the modules are made on the meta device, given uninitialised
storage in the target dtype (``to_empty``), and each tensor is drawn in float32 one at a time
and copied in. The peak is the model in its dtype plus one float32 tensor, not a float32
model; and the weights equal a float32 build cast to the dtype (the same random stream).
A seed's stream is drawn on the CPU for a model of up to ``CPU_DRAW_PARAMS`` parameters
whatever its device, so such a seed gives the same weights on a GPU as on the CPU (a CUDA
generator's stream differs): live runs, and the pre-measured results, agree across devices. A
larger model draws on its own device: an 8B model's draws on the CPU did not finish in 60 s on an
H200's 16-core host (about 170 M draws a second on two cores).
"""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.nn as nn

from ..config import INIT_STD, ModelConfig
from .attention import Attention
from .decoder import CausalLM
from .delta_net import GatedDeltaNet, GatedRMSNorm
from .encoder_decoder import EncoderDecoderLM
from .fused import FusedLinear
from .mlp import ExpertLoop, GptOssExperts, SparseMoE
from .norms import RMSNorm

CPU_DRAW_PARAMS = 2**28  # about 1.6 s of draws on two cores


def generator_device(n_params: int, device: torch.device) -> torch.device:
    """Where a seeded model of ``n_params`` parameters on ``device`` draws its weights."""
    return torch.device("cpu") if n_params <= CPU_DRAW_PARAMS else device


def _draw_device(tensor: torch.Tensor, generator: torch.Generator | None) -> torch.device:
    """Where a draw happens: on the seeded generator's device (the CPU), else the tensor's."""
    return generator.device if generator is not None else tensor.device


def _draw(weight: torch.Tensor, init: str, generator: torch.Generator | None) -> None:
    """Fill ``weight`` as the recipe says, drawing in float32 (the stream does not depend on
    the dtype) and rounding once into the parameter's dtype."""
    draw = torch.empty(weight.shape, dtype=torch.float32, device=_draw_device(weight, generator))
    if init == "normal":
        nn.init.normal_(draw, mean=0.0, std=INIT_STD, generator=generator)
    else:
        nn.init.xavier_uniform_(draw, generator=generator)
    with torch.no_grad():
        weight.copy_(draw)


def init_weights(model: nn.Module, cfg: ModelConfig, generator: torch.Generator | None = None) -> None:
    """normal: every matrix N(0, 0.02) (GPT-2/LLaMA); xavier: Glorot-uniform (2017).
    Biases and attention sinks 0, norm gains 1 (a 1 + γ norm's γ 0)."""
    for module in model.modules():
        if isinstance(module, (nn.Linear, nn.Embedding)):
            if module.weight.is_meta:
                continue
            # a fused projection's parts each drawn as its own matrix (Glorot's fan-out is the
            # part's; the stream is that of separate layers)
            parts = (
                module.pieces(module.weight).values() if isinstance(module, FusedLinear) else (module.weight,)
            )
            for weight in parts:
                _draw(weight, cfg.init, generator)
            bias = getattr(module, "bias", None)  # an embedding has none
            if isinstance(bias, torch.Tensor):
                nn.init.zeros_(bias)
        elif isinstance(module, ExpertLoop) and not module.gate_up_proj.is_meta:
            for weight in (module.gate_up_proj, module.down_proj):  # each expert as a matrix
                for e in range(weight.shape[0]):
                    # gpt-oss and Llama 4 store them transposed (E, in, out): drawn as (out, in)
                    matrix = weight[e].T if module.transposed else weight[e]
                    _draw(matrix, cfg.init, generator)
            if isinstance(module, GptOssExperts):
                nn.init.zeros_(module.gate_up_proj_bias)
                nn.init.zeros_(module.down_proj_bias)
        elif isinstance(module, SparseMoE) and hasattr(module.gate, "e_score_correction_bias"):
            # learned by load balancing, from 0
            nn.init.zeros_(module.gate.get_buffer("e_score_correction_bias"))
        elif isinstance(module, Attention) and hasattr(module, "sinks") and not module.sinks.is_meta:
            nn.init.zeros_(module.sinks)  # a sink at logit 0: one more "key" of score 0
        elif isinstance(module, GatedDeltaNet) and not module.A_log.is_meta:
            _draw(module.conv1d.weight, cfg.init, generator)  # its in_proj / out_proj: nn.Linear
            nn.init.ones_(module.dt_bias)
            # decay rates A = exp(A_log) ~ U(0.01, 16), as Qwen3-Next initialises them
            decay = torch.empty(
                module.A_log.shape, dtype=torch.float32, device=_draw_device(module.A_log, generator)
            )
            with torch.no_grad():
                module.A_log.copy_(decay.uniform_(0.01, 16, generator=generator).log_())
        elif isinstance(module, GatedRMSNorm) and not module.weight.is_meta:
            nn.init.ones_(module.weight)
        elif isinstance(module, (RMSNorm, nn.LayerNorm)) and not module.weight.is_meta:
            # gain 1: γ = 1, or γ = 0 where the norm scales by 1 + γ (Gemma)
            (nn.init.zeros_ if getattr(module, "plus_one", False) else nn.init.ones_)(module.weight)
            bias = getattr(module, "bias", None)  # LayerNorm's
            if isinstance(bias, torch.Tensor):
                nn.init.zeros_(bias)


def build_model(cfg: ModelConfig, device=None, dtype=None, seed: int | None = 0) -> CausalLM:
    """Build and initialise the model on ``device`` in ``dtype`` (default float32).
    ``device="meta"`` allocates nothing (any size); ``seed`` makes the weights reproducible
    (None: torch's global RNG). An encoder-decoder config (``encoder_layers`` > 0) builds
    ``build_encoder_decoder``'s model: no CausalLM, which the surfaces that need one refuse
    first (``llama_lab.config.require_decoder_only``)."""
    if not isinstance(cfg, ModelConfig):
        raise TypeError(f"build_model needs a ModelConfig, got {type(cfg).__name__}")
    if cfg.is_encoder_decoder:
        return build_encoder_decoder(cfg, device, dtype, seed)  # type: ignore[return-value]
    with torch.device("meta"):
        model = CausalLM(cfg)
    return _materialise(model, cfg, device, dtype, seed)


def build_encoder_decoder(
    cfg: ModelConfig, device=None, dtype=None, seed: int | None = 0
) -> EncoderDecoderLM:
    """``build_model`` of the 2017 encoder-decoder: its weights drawn as a decoder's are,
    Marian's static sinusoidal tables then written in."""
    with torch.device("meta"):
        model = EncoderDecoderLM(cfg)
    model = _materialise(model, cfg, device, dtype, seed)
    if not model.lm_head.weight.is_meta:
        model.reset_fixed()
    return model


Built = TypeVar("Built", CausalLM, EncoderDecoderLM)


def _materialise(model: Built, cfg: ModelConfig, device, dtype, seed: int | None) -> Built:
    """``model``, built on the meta device, in ``dtype`` on ``device`` with its initial weights."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    if dtype is not None:
        model = model.to(dtype=dtype)  # on meta: no memory
    if device.type == "meta":
        return model
    model = model.to_empty(device=device)
    if cfg.tie_embeddings:  # to_empty gives each module its own tensor
        table = model.model.shared if isinstance(model, EncoderDecoderLM) else model.model.embed_tokens
        model.lm_head.weight = table.weight
    where = generator_device(sum(p.numel() for p in model.parameters()), device)
    generator = torch.Generator(device=where).manual_seed(seed) if seed is not None else None
    init_weights(model, cfg, generator)
    return model
