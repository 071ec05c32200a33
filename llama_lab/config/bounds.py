"""The bounds and choices a ModelConfig is validated against, and the other fixed numbers of a
config's world (the init scale, the largest batch).
"""

from typing import Literal, get_args

# Upper bounds well beyond any published model, so a typo cannot hang or exhaust the machine.
LIMITS = {
    "vocab_size": 4_194_304,
    "d_model": 131_072,
    "n_layers": 4_096,
    "n_heads": 131_072,
    "n_kv_heads": 131_072,
    "ffn_hidden": 1_048_576,
    "max_seq_len": 16_777_216,
}
# Bounds of the family fields (checked once they are resolved).
FAMILY_LIMITS = {
    "head_dim": 131_072,
    "sliding_window": 16_777_216,  # 0: no window
    "n_experts": 4_096,  # 0: a dense FFN
    "experts_per_token": 4_096,
    "expert_ffn_hidden": 1_048_576,
    "kv_lora_rank": 131_072,  # 0: no MLA
    "q_lora_rank": 131_072,  # 0: q from one matrix
    "qk_rope_head_dim": 131_072,
    "v_head_dim": 131_072,
    "n_shared_experts": 4_096,
    "moe_groups": 4_096,
    "query_pre_attn_scalar": 1_048_576,
    "linear_k_heads": 131_072,
    "linear_v_heads": 131_072,
    "linear_k_head_dim": 131_072,
    "linear_v_head_dim": 131_072,
    "linear_conv_kernel": 1_024,
    "attn_floor_scale": 16_777_216,
    "random_blocks": 4_096,  # BigBird's released configs: 3
    "sparse_block_size": 16_777_216,
    "sparse_seed": 2**32 - 1,
    "dilation": 16_777_216,
    "index_n_heads": 131_072,  # 0: no indexer
    "index_head_dim": 131_072,
    "index_topk": 16_777_216,
    "type_vocab_size": 4_194_304,  # 0: no segment embeddings (BERT: 2)
    "encoder_layers": 4_096,  # 0: decoder-only
}
MINIMUMS = {"vocab_size": 2}

# The choice fields' types (ModelConfig annotates its fields with them); CHOICES lists each
# one's values, read off the type.
NormPosition = Literal["pre", "post", "sandwich", "output"]
NormType = Literal["rmsnorm", "layernorm"]
PosEncoding = Literal["rope", "sinusoidal", "learned", "none"]
FfnType = Literal["swiglu", "geglu", "relu", "gelu", "silu"]  # silu: ungated (Marian's "swish")
Init = Literal["normal", "xavier"]
MoeScoring = Literal["softmax", "sigmoid"]
MoeStyle = Literal["standard", "gpt_oss", "llama4"]
QkNormScope = Literal["head", "projection", "rope_l2"]
CHOICES: dict[str, tuple[str, ...]] = {
    "norm_position": get_args(NormPosition),
    "norm_type": get_args(NormType),
    "pos_encoding": get_args(PosEncoding),
    "ffn_type": get_args(FfnType),
    "init": get_args(Init),
    "moe_scoring": get_args(MoeScoring),
    "moe_style": get_args(MoeStyle),
    "qk_norm_scope": get_args(QkNormScope),
}

INIT_STD = 0.02  # init="normal": every matrix N(0, 0.02) (GPT-2 / LLaMA)

# Workload bounds: sequences in one batch (analysis, sidebar and live pages alike).
MAX_BATCH = 1_048_576
