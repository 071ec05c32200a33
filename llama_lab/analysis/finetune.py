"""Fine-tuning one GPU: LoRA, QLoRA, DoRA and full fine-tuning — the recipe (``FinetuneSpec``),
the layers it targets as PEFT resolves them, the trainable parameters as PEFT counts them, the
frozen base's bytes at its format and the optimizer's states (a step's memory and FLOPs:
``analysis.finetune_step``).

Sources, read for these counts (the commits are the versions read):
- PEFT 0.21.2 (the wheel, ``peft/``): ``tuners/tuners_utils.py`` ``_maybe_include_all_linear_layers``
  (``all-linear`` = every ``nn.Linear`` but the output embeddings) and ``check_target_module_exists``
  (a target names a module whose full name is it or ends with ``.`` + it); ``tuners/lora/layer.py``
  (lora_A r × in, lora_B out × r, no bias); ``tuners/lora/dora.py`` (one magnitude per output;
  ``get_lora_weight`` builds B·A from an in × in identity each forward); ``tuners/lora/config.py``
  (r = 8, lora_alpha = 8 by default); ``tuners/tuners_utils.py`` ``cast_adapter_dtype``
  (``get_peft_model(autocast_adapter_dtype=True)``, the default, upcasts bf16/fp16 adapters to
  float32); ``peft_model.py`` ``get_nb_trainable_parameters`` (``named_parameters``: tied once).
- bitsandbytes 95f9af309d4d5793847169c39288dcd3fcbdf564 (github:bitsandbytes-foundation/
  bitsandbytes): ``bitsandbytes/functional.py`` ``quantize_4bit`` (blocks of 64; with
  ``compress_statistics`` the absmax minus its mean quantised by ``quantize_blockwise`` in blocks
  of 256 to uint8, a float32 absmax per block, the offset a float32), ``nn/modules.py``
  ``Params4bit`` (blocksize 64 by default); ``optim/optimizer.py`` ``Optimizer2State.init_state``
  (8-bit states: two uint8 per element and two float32 absmax per block of 256; tensors under
  ``min_8bit_size`` = 4096 elements keep float32 states; paged states of ≥ 1e5 elements are
  allocated in CUDA unified memory).
- transformers 5.25 ``integrations/bitsandbytes.py`` ``replace_with_bnb_linear`` (every module of
  type ``nn.Linear`` becomes a ``Linear4bit``) and ``quantizers/base.py``
  ``get_keys_to_not_convert`` (the output embeddings, tied weights and the last parameter stay):
  QLoRA's NF4 base is the blocks' linear layers; embeddings, head, norms, routers that are not
  ``nn.Linear`` and the fused expert tensors of transformers 5 stay in 16 bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ..config import ModelConfig
from ..config.hf.quant import StoredQuant
from ..errors import AnalysisError, ConfigError
from ..model.lora import ALL_LINEAR  # PEFT's shorthand: every nn.Linear but the output layer
from ..runtime.hardware import DTYPE_BYTES
from .activations import (
    LOSS_PATHS,
)
from .common import TRAINING_DTYPES, check_count, nbytes
from .params import count_params
from .quant import BNB_CODE_BYTES, BNB_NESTED_BLOCK, stored_weights, weights_bytes
from .scope import check_planned
from .shapes import Shapes

METHODS = ("lora", "qlora", "dora", "full")
OPTIMIZERS = ("adamw", "adamw8bit", "paged_adamw8bit")
DEFAULT_TARGETS = ("q_proj", "v_proj")  # PEFT's default for LLaMA-style models
PEFT_DEFAULT_ALPHA = 8  # LoraConfig.lora_alpha
ADAPTER_BYTES = 4  # PEFT upcasts 16-bit adapters to float32 (autocast_adapter_dtype=True)
NF4_BLOCK = 64  # values per absmax (Params4bit, quantize_4bit)
BNB_8BIT_BLOCK = 256  # values per absmax of an 8-bit optimizer state
BNB_MIN_8BIT_SIZE = 4096  # smaller tensors keep float32 states
BNB_MIN_PAGED_SIZE = 100_000  # a paged optimizer pages the states of tensors at least this large
ADAMW_STATES = 2  # m and v


@dataclass(frozen=True)
class FinetuneSpec:
    """One fine-tuning recipe. ``alpha`` None: PEFT's default (8); it scales the update
    (alpha / r, or alpha / √r with ``rslora``) and changes no count. ``loss``: "upcast" (the
    logits materialised and upcast to float32 before the cross-entropy, as transformers' models
    compute the loss with labels, ``ForCausalLMLoss``), "logits" (the same in the compute dtype)
    or "chunked" (the head and cross-entropy in chunks, never the N·V logits). ``pure_16bit``: every
    trainable tensor, its gradient and AdamW's states in ``dtype``, no float32 copy (torchtune's
    recipes; PEFT's benchmark's full fine-tuning); else adapters in float32 as PEFT creates them
    and full fine-tuning in mixed precision (float32 master weights and states)."""

    method: str = "lora"
    rank: int = 8
    alpha: float | None = None
    targets: tuple[str, ...] | str = DEFAULT_TARGETS
    optimizer: str = "adamw"
    grad_checkpointing: bool = False
    dtype: str = "bf16"  # what the base computes and is stored in (QLoRA: its compute dtype)
    rslora: bool = False
    loss: str = "upcast"
    pure_16bit: bool = False

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise AnalysisError(f"method={self.method!r} must be one of {', '.join(METHODS)}")
        if self.optimizer not in OPTIMIZERS:
            raise AnalysisError(f"optimizer={self.optimizer!r} must be one of {', '.join(OPTIMIZERS)}")
        if self.dtype not in TRAINING_DTYPES:
            raise AnalysisError(f"dtype={self.dtype!r} must be one of {', '.join(TRAINING_DTYPES)}")
        if self.loss not in LOSS_PATHS:
            raise AnalysisError(f"loss={self.loss!r} must be one of {', '.join(LOSS_PATHS)}")
        if self.method != "full":
            check_count("rank", self.rank, 1_048_576)
        if isinstance(self.targets, str) and self.targets != ALL_LINEAR:
            raise AnalysisError(f"targets={self.targets!r} must be {ALL_LINEAR!r} or a tuple of module names")
        if not isinstance(self.targets, str) and not self.targets:
            raise AnalysisError("targets=() must name at least one module (or be 'all-linear')")

    @property
    def adapters(self) -> bool:
        return self.method != "full"

    @property
    def scaling(self) -> float:
        """What the update B·A is multiplied by: alpha / r, or alpha / √r (rsLoRA)."""
        alpha = PEFT_DEFAULT_ALPHA if self.alpha is None else self.alpha
        return alpha / (math.sqrt(self.rank) if self.rslora else self.rank)


@dataclass(frozen=True)
class LinearModule:
    """``count`` nn.Linear modules of the blocks named ``path`` inside a block (transformers'
    names: ``self_attn.q_proj``, ``mlp.shared_experts.gate_proj``), ``inputs`` → ``outputs``.
    As an adapter target, ``rank_multiple`` × r is its adapter's rank: 1 for a Linear; a fused
    expert tensor (PEFT's ``ParamWrapper``) holds E experts' adapters in one, E × r (gate_up:
    2·E × r, its two v4 projections fused)."""

    path: str
    inputs: int
    outputs: int
    count: int
    rank_multiple: int = 1

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def params(self) -> int:
        return self.count * self.inputs * self.outputs


def _attention_linears(cfg: ModelConfig) -> list[tuple[str, int, int]]:
    """(path, in, out) of an attention block's projections (Phi-3: q, k, v fused in qkv_proj)."""
    s = Shapes.of(cfg)
    if cfg.fused_keys:
        return [("self_attn.qkv_proj", s.C, s.q_dim + 2 * s.kv_dim), ("self_attn.o_proj", s.q_dim, s.C)]
    # DSA's indexer matrices (Shapes' indexer_wq_b, …) live in the module self_attn.indexer
    return [
        (f"self_attn.{name.replace('indexer_', 'indexer.', 1)}", cols, rows)
        for name, rows, cols in s.attention
    ]


def _mixer_linears(cfg: ModelConfig) -> list[tuple[str, int, int]]:
    """A Gated DeltaNet block's input projections and out_proj (its conv1d is not a Linear)."""
    from ..model.delta_net import projection_parts

    C = cfg.d_model
    parts = [(f"linear_attn.{name}", C, rows) for name, rows in projection_parts(cfg)]
    return parts + [("linear_attn.out_proj", cfg.linear_value_dim, C)]


def _mlp(prefix: str, C: int, F: int, gated: bool, fused: bool) -> list[tuple[str, int, int]]:
    if fused:
        return [(f"{prefix}.gate_up_proj", C, 2 * F), (f"{prefix}.down_proj", F, C)]
    up = [f"{prefix}.gate_proj", f"{prefix}.up_proj"] if gated else [f"{prefix}.up_proj"]
    return [(path, C, F) for path in up] + [(f"{prefix}.down_proj", F, C)]


def _ffn_linears(cfg: ModelConfig, sparse: bool) -> list[tuple[str, int, int]]:
    """A block's FFN: the dense MLP, or of a mixture the nn.Linear parts only — Llama 4's router,
    the shared experts (Qwen, Llama 4: ``shared_expert``; DeepSeek, GLM: ``shared_experts``) and
    Qwen's shared-expert gate. The routed experts are fused 3-D tensors in transformers 5, and
    the other routers ``TopKRouter`` modules: no nn.Linear, so neither LoRA nor NF4 reaches them."""
    s = Shapes.of(cfg)
    ffn = "feed_forward" if cfg.moe_style == "llama4" else "mlp"
    if not sparse:
        return _mlp(ffn, s.C, s.F, cfg.gated_ffn, cfg.fused_keys)
    out = [(f"{ffn}.router", s.C, s.E)] if cfg.moe_style == "llama4" else []
    if s.Fs:
        single = cfg.shared_expert_gate or cfg.moe_style == "llama4"
        out += _mlp(f"{ffn}.shared_expert{'' if single else 's'}", s.C, s.Fs, True, False)
    if cfg.shared_expert_gate:
        out.append((f"{ffn}.shared_expert_gate", s.C, 1))
    return out


def linear_modules(cfg: ModelConfig) -> tuple[LinearModule, ...]:
    """Every nn.Linear of transformers' model for ``cfg`` but the output layer (lm_head), by
    path inside a block, counted over the blocks: what ``all-linear`` targets."""
    kinds = list(zip(cfg.moe_layer_flags, cfg.linear_layer_flags))
    counts: dict[tuple[str, int, int], int] = {}
    for sparse, linear in kinds:
        mixer = _mixer_linears(cfg) if linear else _attention_linears(cfg)
        for key in mixer + _ffn_linears(cfg, sparse):
            counts[key] = counts.get(key, 0) + 1
    return tuple(LinearModule(path, i, o, n) for (path, i, o), n in counts.items())


def nf4_modules(cfg: ModelConfig) -> tuple[LinearModule, ...]:
    """The linear layers QLoRA's base stores in NF4: those of type exactly nn.Linear
    (``replace_with_bnb_linear``), so not Llama 4's router, an nn.Linear subclass."""
    return tuple(m for m in linear_modules(cfg) if m.name != "router")


# PEFT 0.21.2 ``utils/transformers_weight_conversion.py`` ``_MOE_TARGET_MODULE_MAPPING``: in
# the mixtures whose transformers 5 class fuses the experts (transformers 5.25
# ``conversion_mapping._MODEL_TO_CONVERSION_PATTERN``: mixtral → "mixtral"; qwen3_moe,
# qwen3_next, deepseek_v2/v3/v32, glm4_moe, glm_moe_dsa → "qwen2_moe"), a target naming a v4
# expert or router Linear becomes a parameter target (``_convert_peft_config_moe``), and
# all-linear adds them all; the names it maps leave the module targets (so under "qwen2_moe"
# gate_proj, up_proj and down_proj reach the fused experts, not the dense or shared MLPs).
MOE_TARGET_MAPPING = {
    "mixtral": {"gate": "gate.weight", "w1": "gate_up_proj", "w3": "gate_up_proj", "w2": "down_proj"},
    "qwen2_moe": {
        "gate": "gate.weight",
        "gate_proj": "gate_up_proj",
        "up_proj": "gate_up_proj",
        "down_proj": "down_proj",
    },
}
MOE_CONVERSION = {"mixtral": "mixtral"} | dict.fromkeys(
    ("qwen3_moe", "qwen3_next", "deepseek_v2", "deepseek_v3", "deepseek_v32", "glm4_moe", "glm_moe_dsa"),
    "qwen2_moe",
)


@lru_cache(maxsize=256)
def moe_conversion(cfg: ModelConfig) -> dict[str, str]:
    """PEFT's v4 → v5 target mapping for ``cfg``'s family ({} where none applies)."""
    from ..config.families import FAMILY_LIST
    from ..config.hf.select import family_of

    if not cfg.is_moe:
        return {}
    try:
        model_type = family_of(cfg, FAMILY_LIST).model_type.name
    except ConfigError:  # no transformers family expresses it: no conversion either
        return {}
    return MOE_TARGET_MAPPING.get(MOE_CONVERSION.get(model_type, ""), {})


def expert_targets(cfg: ModelConfig, parameters: set[str]) -> tuple[LinearModule, ...]:
    """The fused tensors of every sparse block that ``parameters`` (PEFT's target_parameters)
    names: the router's weight (E × C), gate_up_proj (E × 2Fe × C), down_proj (E × C × Fe)."""
    s, n = Shapes.of(cfg), sum(cfg.moe_layer_flags)
    out = []
    if "gate.weight" in parameters:
        out.append(LinearModule("mlp.gate.weight", s.C, s.E, n))
    if "gate_up_proj" in parameters:
        out.append(LinearModule("mlp.experts.gate_up_proj", s.C, 2 * s.Fe, n, 2 * s.E))
    if "down_proj" in parameters:
        out.append(LinearModule("mlp.experts.down_proj", s.Fe, s.C, n, s.E))
    return tuple(out)


def _matches(path: str, target: str) -> bool:
    """PEFT's rule for a list of targets: the module's full name (``model.layers.0.`` + path)
    is the target or ends with ``.`` + target."""
    return f"model.layers.0.{path}".endswith(f".{target}")


def target_modules(
    cfg: ModelConfig, targets: tuple[str, ...] | str = DEFAULT_TARGETS
) -> tuple[LinearModule, ...]:
    """The layers ``targets`` reaches as PEFT 0.21.2 resolves them on transformers 5 (``all-linear``:
    every nn.Linear but the output layer; a mixture's experts and router by ``moe_conversion``);
    a target that reaches none is refused, naming the modules the family has."""
    modules = linear_modules(cfg)
    mapping = moe_conversion(cfg)
    names = sorted({m.name for m in modules} | set(mapping))
    if targets == ALL_LINEAR:
        wanted = {m.name for m in modules} | set(mapping)
    else:
        wanted = set(targets)
        for target in targets:
            if not any(_matches(m.path, target) for m in modules) and target not in mapping:
                raise AnalysisError(
                    f"target module {target!r} is not a linear layer of this model; "
                    f"it has: {', '.join(names)}"
                    + (
                        " (or 'all-linear'; lm_head, the output layer, is not offered)"
                        if target == "lm_head"
                        else ""
                    )
                )
    mapped = {t for t in wanted if any(t == old or t.endswith(f".{old}") for old in mapping)}
    fused = sorted(old for old, new in mapping.items() if new == "gate_up_proj")
    if mapped & set(fused) and not set(fused) <= mapped:
        raise AnalysisError(
            f"targets {', '.join(sorted(mapped & set(fused)))} without "
            f"{', '.join(sorted(set(fused) - mapped))}: transformers 5 fuses them into the experts' "
            "gate_up_proj, which PEFT targets whole"
        )
    parameters = {mapping[t.rsplit(".", 1)[-1]] for t in mapped}
    chosen = tuple(m for m in modules if any(_matches(m.path, t) for t in wanted - mapped))
    return chosen + expert_targets(cfg, parameters)


def check_finetune(cfg: ModelConfig, spec: FinetuneSpec, stored: StoredQuant | None = None) -> None:
    """The rules a recipe must keep for this model and checkpoint (each refusal names its rule)."""
    check_planned(cfg, "fine-tuning")
    if stored is not None and spec.method == "qlora":
        raise AnalysisError(
            f"method='qlora' quantises a 16-bit base to NF4, but this checkpoint is already stored as "
            f"{stored.label()}: use method='lora' (the adapters train over its stored weights)"
        )
    if stored is not None and spec.method == "full":
        raise AnalysisError(
            f"method='full' trains every weight, but this checkpoint is stored as {stored.label()}: "
            f"quantised weights cannot be trained (use method='lora')"
        )
    if not spec.adapters:
        return
    targets = target_modules(cfg, spec.targets)
    fused = [m.path for m in targets if m.path.startswith("mlp.gate.") or ".experts." in m.path]
    if spec.method == "dora" and fused:
        raise AnalysisError(
            f"method='dora' cannot target {', '.join(fused)}: transformers 5 keeps them as fused tensors and "
            f"PEFT's ParamWrapper does not work with use_dora=True (target the attention layers)"
        )
    if spec.targets != ALL_LINEAR:  # all-linear is PEFT's whole set, narrow gates included
        narrowest = min(targets, key=lambda m: min(m.inputs, m.outputs))
        width = min(narrowest.inputs, narrowest.outputs)
        if spec.rank > width:
            raise AnalysisError(
                f"rank={spec.rank} is above the narrowest targeted layer's width: {narrowest.path} is "
                f"{narrowest.inputs} → {narrowest.outputs} (B·A cannot exceed rank {width})"
            )


def adapter_tensors(cfg: ModelConfig, spec: FinetuneSpec) -> list[tuple[int, int]]:
    """The trainable tensors of an adapter recipe as (elements, how many): per targeted
    module lora_A (r × in), lora_B (out × r) and, for DoRA, the magnitude (out); a fused expert
    tensor's at its rank multiple."""
    tensors = []
    for m in target_modules(cfg, spec.targets):
        r = spec.rank * m.rank_multiple
        tensors += [(r * m.inputs, m.count), (m.outputs * r, m.count)]
        if spec.method == "dora":
            tensors.append((m.outputs, m.count))
    return tensors


def trainable_params(cfg: ModelConfig, spec: FinetuneSpec) -> int:
    """PEFT's ``get_nb_trainable_parameters()[0]``: r·(in + out) per targeted Linear (rsLoRA
    and QLoRA the same), + out per target for DoRA's magnitude; full: every parameter, tied once."""
    if not spec.adapters:
        return count_params(cfg).total
    return sum(n * count for n, count in adapter_tensors(cfg, spec))


def frozen_params(cfg: ModelConfig, spec: FinetuneSpec) -> int:
    """The base's parameters that stay frozen: all of them under an adapter, none under full."""
    return count_params(cfg).total if spec.adapters else 0


def nf4_bytes(elements: int) -> int:
    """One NF4 weight of n elements in memory with double quantisation (bitsandbytes
    ``quantize_4bit(compress_statistics=True)``): two codes a byte, a uint8 absmax per 64, a
    float32 absmax per 256 of those, the NF4 code (16 float32) and the float32 offset. The
    nested 256-value dynamic code is one table per device (``name2qmap``), not counted."""
    blocks = math.ceil(elements / NF4_BLOCK)
    nested = math.ceil(blocks / BNB_NESTED_BLOCK)
    return math.ceil(elements / 2) + blocks + 4 * nested + BNB_CODE_BYTES + 4


def frozen_weight_bytes(cfg: ModelConfig, spec: FinetuneSpec, stored: StoredQuant | None = None) -> int:
    """The frozen base at its format: a stored checkpoint's (``weights_bytes``), ``dtype``, or
    for QLoRA every block nn.Linear in NF4 and the rest in ``dtype``."""
    if not spec.adapters:
        return 0
    if stored is not None:
        return weights_bytes(cfg, stored_weights(stored)).total
    whole = weights_bytes(cfg, spec.dtype).total
    if spec.method != "qlora":
        return whole
    b = DTYPE_BYTES[spec.dtype]
    linears = nf4_modules(cfg)
    return (
        whole
        - sum(nbytes(m.params, b) for m in linears)
        + sum(m.count * nf4_bytes(m.inputs * m.outputs) for m in linears)
    )


def optimizer_state_bytes(tensors: list[tuple[int, int]], optimizer: str, state_bytes: float = 4) -> int:
    """AdamW's m and v for ``tensors`` ((elements, how many)): float32 (8 bytes an element;
    torch.optim.AdamW keeps them in the parameter's dtype, float32 here: adapters, or a mixed-
    precision master copy), or bitsandbytes' 8-bit (2 bytes + 2 float32 absmax per 256; float32
    under 4096 elements). Paged: the same bytes, in unified memory. ``state_bytes``: AdamW's
    bytes an element (2 for pure 16-bit training, whose states take the parameters' dtype)."""
    total = 0
    for n, count in tensors:
        if optimizer == "adamw" or n < BNB_MIN_8BIT_SIZE:
            total += math.ceil(count * ADAMW_STATES * state_bytes * n)
        else:
            total += count * ADAMW_STATES * (n + 4 * math.ceil(n / BNB_8BIT_BLOCK))
    return total


def paged_state_bytes(tensors: list[tuple[int, int]], optimizer: str) -> int:
    """The optimizer states a paged optimizer keeps in CUDA unified memory (its tensors of at
    least 1e5 elements, bitsandbytes ``Optimizer8bit.get_state_buffer``): outside PyTorch's
    allocator, paged to the host by the driver when the GPU is full — so in no peak PyTorch
    reports and in no fit."""
    if optimizer != "paged_adamw8bit":
        return 0
    large = [(n, count) for n, count in tensors if n >= BNB_MIN_PAGED_SIZE]
    return optimizer_state_bytes(large, optimizer)


def full_tensors(cfg: ModelConfig) -> list[tuple[int, int]]:
    """Every parameter tensor as (elements, how many), for the 8-bit optimizer's per-tensor rule:
    the weight tensors (``weight_tensors``); biases and norms are under 4096 elements mostly."""
    from .quant import weight_tensors

    return [(g.rows * g.cols, g.count) for g in weight_tensors(cfg)]


def default_targets(cfg: ModelConfig) -> tuple[str, ...] | str:
    """The targets a page offers first: PEFT's LLaMA default (q_proj, v_proj) where the model has
    both; else every projection of its attention (Phi-3's fused qkv_proj, MLA's q_a_proj …);
    else ``all-linear``."""
    names = {m.name for m in linear_modules(cfg)}
    if set(DEFAULT_TARGETS) <= names:
        return DEFAULT_TARGETS
    attention = tuple(sorted({m.name for m in linear_modules(cfg) if m.path.startswith("self_attn.")}))
    return attention or ALL_LINEAR


def target_choices(cfg: ModelConfig) -> tuple[str, ...]:
    """The module names ``targets`` may name for ``cfg`` (a mixture's v4 expert names too, which
    PEFT maps onto the fused experts), sorted, then ``all-linear``."""
    return (*sorted({m.name for m in linear_modules(cfg)} | set(moe_conversion(cfg))), ALL_LINEAR)
