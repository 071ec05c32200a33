"""What a ModelConfig holds: its fields (``ModelFields``: each with its default and what it
means) and the sizes and per-block flags derived from them. ``model_config.ModelConfig`` is the
class everything builds: it resolves the derived fields, checks every rule (``field_rules``,
``feature_rules``) and sets the per-block flags these properties read; the families
(``families``) and the config.json machinery (``hf``) read a config through this class, below
ModelConfig, so that ModelConfig can reach them without a circle. Never built alone.

Attention kinds, selected by ``n_kv_heads`` (litgpt's sketch)::

    MHA (n_kv_heads = n_heads)   GQA (1 < n_kv_heads < n_heads)   MQA (n_kv_heads = 1)
    q  q  q  q  q  q  q  q       q  q  q  q  q  q  q  q           q  q  q  q  q  q  q  q
    |  |  |  |  |  |  |  |       └──┬──┘  └──┬──┘ ... (groups)    └─────────┬──────────┘
    k  k  k  k  k  k  k  k          k        k                              k
    v  v  v  v  v  v  v  v          v        v                              v
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from .bounds import (
    FfnType,
    Init,
    MoeScoring,
    MoeStyle,
    NormPosition,
    NormType,
    PosEncoding,
    QkNormScope,
)
from .sparse import SparsePattern

# RoPE scalings transformers computes (ROPE_INIT_FUNCTIONS), each with the keys its config
# validation takes (required, then optional; rope_theta and partial_rotary_factor are fields)
ROPE_SCALING_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "linear": (frozenset({"factor"}), frozenset()),
    "dynamic": (frozenset({"factor"}), frozenset()),
    "llama3": (
        frozenset({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}),
        frozenset(),
    ),
    "yarn": (
        frozenset({"factor", "original_max_position_embeddings"}),
        frozenset({"attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"}),
    ),
    "longrope": (
        frozenset({"short_factor", "long_factor", "original_max_position_embeddings"}),
        frozenset({"attention_factor", "factor"}),
    ),
}


@dataclass(frozen=True)
class RopeScaling:
    """A scaled RoPE as transformers' ``rope_parameters`` holds it (less rope_theta and
    partial_rotary_factor, which are ModelConfig's own fields): its ``rope_type`` and that type's
    keys (``ROPE_SCALING_KEYS``), None where the file leaves one out (transformers' default then
    holds). Frozen, with tuples for LongRoPE's lists, so that a ModelConfig holding it hashes."""

    rope_type: str  # linear, dynamic, llama3, yarn or longrope
    factor: float | None = None  # context extension; yarn / longrope: None = max_seq_len / original
    original_max_position_embeddings: int | None = None  # the pre-training context
    low_freq_factor: float | None = None  # llama3: wavelengths beyond original / this are × factor
    high_freq_factor: float | None = None  # llama3: those below original / this are kept
    beta_fast: float | None = None  # yarn's ramp in rotations (None: 32 ...
    beta_slow: float | None = None  # ... and 1)
    mscale: float | None = None  # yarn (DeepSeek): the attention factor's numerator's scale
    mscale_all_dim: float | None = None  # yarn: its denominator's; MLA's scores × its mscale²
    attention_factor: float | None = None  # cos and sin × this (None: derived from factor)
    truncate: bool | None = None  # yarn: the ramp's ends rounded outwards (None: true)
    short_factor: tuple[float, ...] | None = None  # longrope: a divisor per frequency ...
    long_factor: tuple[float, ...] | None = None  # ... past original_max_position_embeddings

    def as_dict(self) -> dict[str, Any]:
        """The keys transformers reads (those set), LongRoPE's factors as lists."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


# The vision towers LLaMA Lab counts (``VisionTower.kind``) and their projectors; the per-kind
# rules (parameters, FLOPs, image tokens) are ``llama_lab.analysis.vision``'s
VISION_KINDS = ("clip", "siglip", "qwen2_5_vl", "pixtral", "llama4", "qwen3_5")
PROJECTOR_KINDS = ("llava", "gemma3", "qwen2_5_vl", "mistral3", "llama4", "qwen3_5")


@dataclass(frozen=True)
class VisionTower:
    """A multimodal model's image encoder and the projector into the text decoder, as its
    wrapper's ``vision_config`` builds it (transformers' module: CLIPVisionModel for LLaVA,
    SiglipVisionModel for Gemma 3, Qwen2_5_VisionTransformerPretrainedModel for Qwen2.5-VL,
    PixtralVisionModel for Mistral 3, Llama4VisionModel for Llama 4, Qwen3_5VisionModel for
    Qwen3.5).
    Frozen and flat (a tuple for the layer list) so that a ModelConfig holding it hashes."""

    # VISION_KINDS: clip (class token, pre-norm), siglip (no class token), qwen2_5_vl, pixtral,
    # llama4, qwen3_5
    kind: str
    hidden_size: int
    n_layers: int
    n_heads: int
    intermediate_size: int
    patch_size: int  # pixels of a patch's side
    # pixels of the image's side the tower is built for (its position table); Qwen2.5-VL has
    # none and Pixtral's is the longest side it takes (dynamic resolution): the side analyze
    # assumes unless told (--image-size)
    image_size: int
    # PROJECTOR_KINDS: llava (2-layer GELU MLP), gemma3 (pool, norm, matrix), qwen2_5_vl (its
    # merger), mistral3 (norm, patch merger, 2-layer GELU MLP), llama4 (pixel shuffle, MLP,
    # matrix), qwen3_5 (its merger)
    projector: str
    out_size: int  # the projector's output: the text decoder's hidden size
    channels: int = 3
    projector_bias: bool = True  # LLaVA, Mistral 3: multimodal_projector_bias
    feature_layers: int = 1  # LLaVA, Mistral 3: hidden states concatenated into the projector
    keep_class_token: bool = False  # LLaVA's vision_feature_select_strategy "full" (default: dropped)
    head: bool = False  # SigLIP's attention-pooling head (vision_use_head; Gemma 3: off)
    tokens_per_image: int = 0  # Gemma 3: mm_tokens_per_image, the pooled grid's tokens
    temporal_patch_size: int = 1  # Qwen2.5-VL: 2 frames per patch (an image is repeated)
    merge_size: int = 1  # Qwen2.5-VL, Mistral 3: merge_size² neighbouring patches merged into one token
    window_size: int = 0  # Qwen2.5-VL: a window's side in pixels (112); 0: every layer attends fully
    full_attention_layers: tuple[int, ...] = ()  # Qwen2.5-VL: fullatt_block_indexes
    # Llama 4's adapter after its pixel shuffle (ratio 1 / merge_size): fc1 (intermediate_size →
    # adapter_in), fc2 (adapter_out → adapter_out), then linear_1 (vision_output → d_model)
    adapter_in: int = 0  # projector_input_dim
    adapter_out: int = 0  # projector_output_dim
    vision_output: int = 0  # vision_output_dim
    max_tiles: int = 0  # Llama 4: the tiles of image_size an image may be split into (16)
    position_table: int = 0  # Qwen3.5: num_position_embeddings (a learned grid, interpolated)

    def as_dict(self) -> dict[str, Any]:
        """The fields a JSON object needs: those without a default, and those away from it
        (short enough for a link), the layer list as a list."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != f.default}
        if self.full_attention_layers:
            out["full_attention_layers"] = list(self.full_attention_layers)
        return out


@dataclass(frozen=True)
class ModelFields:
    # Defaults are the seed tutorial's demo model (section 八): a 4-layer GQA LLaMA.
    vocab_size: int = 32000  # LLaMA-1/2 SentencePiece vocabulary
    d_model: int = 512
    n_layers: int = 4
    n_heads: int = 8
    n_kv_heads: int = 2  # 4 query heads share each KV head (GQA)
    ffn_hidden: int = 1365  # int(8/3 · 512): SwiGLU's three matrices ≈ a 4d ReLU FFN's two
    max_seq_len: int = 128
    # "post" = the 2017 recipe: norm after the residual add; "sandwich" (Gemma 2/3): "pre" plus a
    # norm on each sublayer's output before the add, x + norm(f(norm(x))); "output" (OLMo 2):
    # that output norm alone, x + norm(f(x))
    norm_position: NormPosition = "pre"
    norm_type: NormType = "rmsnorm"
    pos_encoding: PosEncoding = "rope"
    ffn_type: FfnType = "swiglu"  # "geglu" (Gemma): the gate through tanh-approximated GELU
    bias: bool = False  # every linear layer (the 2017 recipe); the three below follow it
    final_norm: bool = True  # Pre-LN needs it: the last block's output is never normalised
    tie_embeddings: bool = False
    embed_scale: bool = False  # embeddings multiplied by √d_model (Vaswani et al. 2017, §3.4)
    init: Init = "normal"  # N(0, 0.02) as GPT-2 / LLaMA; "xavier" as the 2017 paper
    rope_theta: float = 10000.0
    # a scaled RoPE (Llama 3.1's llama3, YaRN, LongRoPE, linear, dynamic NTK); None: plain.
    # rope_scaling_local=False: the windowed layers rotate plain (Gemma 3's and Olmo 3's RoPE per
    # layer type scales the full-attention layers only)
    rope_scaling: RopeScaling | None = None
    rope_scaling_local: bool = True
    norm_eps: float = 1e-6  # the seed's RMSNorm; LLaMA-2 and later publish 1e-5
    # ---- today's families (Mistral, Mixtral, Qwen) ------------------------------------------
    # The four fields below and expert_ffn_hidden accept None, which __post_init__ resolves by
    # the rule in model_config.DERIVED: every reader sees the type named here, hence the one ignore each.
    head_dim: int = None  # type: ignore[assignment]  # None: d_model / n_heads; Qwen3 sets 128
    qkv_bias: bool = None  # type: ignore[assignment]  # None: follows bias; Qwen2: q/k/v only
    o_bias: bool = None  # type: ignore[assignment]  # the attention output projection's bias
    mlp_bias: bool = None  # type: ignore[assignment]  # the FFN's (or every expert's) biases
    qk_norm: bool = False  # Qwen3: an RMSNorm over head_dim on q and on k, before RoPE
    sliding_window: int = 0  # Mistral: a local layer attends its last W tokens; 0: none
    local_layers: str = "all"  # which layers the window applies to (see _layer_set)
    n_experts: int = 0  # Mixtral / Qwen3-MoE: routed experts per sparse layer; 0: dense
    experts_per_token: int = 0  # top-k experts each token is routed to
    expert_ffn_hidden: int = None  # type: ignore[assignment]  # an expert's FFN width; None: ffn_hidden
    moe_layers: str = "all"  # which layers are sparse (the others keep the dense FFN)
    moe_renormalize: bool = True  # renormalise the top-k router probabilities (Mixtral: yes)
    # ---- MLA and DeepSeekMoE (DeepSeek-V2/V3, Kimi K2) -------------------------------------
    # MLA (DeepSeek-V2 §2.1): every head's K and V are rebuilt from one latent of kv_lora_rank
    # values per token (the cache), plus one RoPE key of qk_rope_head_dim shared by all heads;
    # head_dim is a q/k head's width (qk_nope_head_dim + qk_rope_head_dim), v_head_dim a v head's.
    kv_lora_rank: int = 0  # 0: no MLA
    q_lora_rank: int = 0  # MLA: q through a rank-r bottleneck (q_a_proj, norm, q_b_proj); 0: q_proj
    qk_rope_head_dim: int = 0  # MLA: the rotated part of each q/k head
    v_head_dim: int = None  # type: ignore[assignment]  # None: head_dim (differs only under MLA)
    rope_interleave: bool = False  # RoPE rotates adjacent pairs (DeepSeek), not the two halves
    n_shared_experts: int = 0  # experts every token passes: one SwiGLU of n × expert_ffn_hidden
    moe_scoring: MoeScoring = "softmax"  # router scores: softmax, or sigmoid (DeepSeek-V3)
    moe_groups: int = 1  # experts in groups (n_group): a token picks from its best groups only
    moe_topk_groups: int = 1  # groups a token may pick from (topk_group)
    routed_scaling: float = 1.0  # routed experts' weights × this (routed_scaling_factor)
    moe_group_top2: bool = False  # softmax groups ranked by their two best scores (Mistral 4), not the best
    # ---- gpt-oss ---------------------------------------------------------------------------
    # attention sinks: one learned logit per query head joins every softmax (and is dropped
    # after it), so a head may attend to nothing; the gpt_oss expert block: a router with a
    # bias (softmax over the top-k logits), experts with biases and the clamped SwiGLU
    # (up.clamp(±limit) + 1) · g·σ(α·g), g = gate.clamp(max=limit)
    attention_sinks: bool = False
    moe_style: MoeStyle = "standard"  # "gpt_oss": the block above; "standard": Mixtral's
    swiglu_limit: float = 7.0  # gpt_oss experts' clamp
    swiglu_alpha: float = 1.702  # gpt_oss experts' gate slope (SiLU's is 1)
    # ---- Gemma 2 / 3 -----------------------------------------------------------------------
    norm_plus_one: bool = False  # every RMSNorm scales by (1 + γ), γ starting at 0 (Gemma)
    query_pre_attn_scalar: int = None  # type: ignore[assignment]  # scores × this^-½; None: head_dim
    rope_local_theta: float = None  # type: ignore[assignment]  # windowed layers' RoPE base; None: rope_theta
    attn_softcap: float = 0.0  # scores → cap · tanh(scores / cap) before the softmax (Gemma 2); 0: none
    logit_softcap: float = 0.0  # the same on the LM head's logits (Gemma 2: 30); 0: none
    # ---- OLMo 2, SmolLM3, Phi-3 / Phi-4-mini, GLM-4.5 ---------------------------------------
    qk_norm_scope: QkNormScope = "head"  # QK-norm per head (Qwen3) or over the projection (OLMo 2)
    nope_layers: str = "none"  # blocks that skip RoPE (NoPE: SmolLM3's every fourth)
    partial_rotary_factor: float = 1.0  # RoPE rotates the first factor × head_dim dims (Phi-3, GLM)
    fused_keys: bool = False  # checkpoint keys qkv_proj / gate_up_proj, fused (Phi-3)
    # ---- Qwen3-Next, Qwen3.5: Gated DeltaNet beside gated attention --------------------------
    # linear_layers mix tokens with Gated DeltaNet (Yang et al. 2024): per value head a state of
    # linear_k_head_dim × linear_v_head_dim updated by the gated delta rule, after a causal
    # depthwise convolution of linear_conv_kernel taps over q, k and v; a fixed-size state per
    # sequence instead of a growing KV cache. The other blocks attend as usual.
    linear_layers: str = "none"
    linear_k_heads: int = 16  # q/k heads of a linear layer (Qwen3-Next's and Qwen3.5's 16)
    linear_v_heads: int = 32  # value heads (and states); a multiple of linear_k_heads
    linear_k_head_dim: int = 128
    linear_v_head_dim: int = 128
    linear_conv_kernel: int = 4
    linear_grouped_proj: bool = False  # Qwen3-Next's in_proj_qkvz / in_proj_ba, grouped per key head
    attn_output_gate: bool = False  # q_proj also emits a gate per head and dim: output × σ(gate)
    shared_expert_gate: bool = False  # Qwen's shared_expert, scaled by σ(shared_expert_gate(x))
    # ---- Llama 4 ---------------------------------------------------------------------------
    # chunked_attention: the local_layers attend within fixed chunks of sliding_window positions
    # (attention_chunk_size: a query at p sees the earlier keys of chunk ⌊p/W⌋ only) instead of
    # the last W; qk_norm_scope="rope_l2": q and k of the rotated blocks RMS-normalised per head
    # after RoPE, with no γ; the attention temperature (Llama 4's NoPE blocks, every Mistral 4
    # block): the attn_temperature_layers scale q at position p by
    # 1 + attn_temperature_scale · ln(1 + ⌊(p + attn_temperature_offset) / attn_floor_scale⌋)
    # (offset 1: Llama 4; 0: Mistral 4); the llama4 expert block (moe_style): σ of the top-k
    # router logits scales each chosen expert's input (not its output), beside one shared expert
    chunked_attention: bool = False
    attn_temperature_layers: str = "none"
    attn_floor_scale: int = 8192
    attn_temperature_scale: float = 0.1
    attn_temperature_offset: int = 1
    # ---- Granite 3.x: its µP multipliers -----------------------------------------------------
    embedding_multiplier: float = 1.0  # the token embeddings × this (Granite 3: 12)
    residual_multiplier: float = 1.0  # each sublayer's output × this before the residual add (0.22)
    # the scores × this, in place of 1/√query_pre_attn_scalar (Granite 3: 1/head_dim)
    attention_multiplier: float = None  # type: ignore[assignment]  # None: query_pre_attn_scalar^-½
    logits_scaling: float = 1.0  # the logits ÷ this (Granite 3: 8 or 16)
    # ---- sparse attention patterns (Longformer, BigBird) on the windowed blocks -------------
    # They shape the local_layers' sliding window W (sliding_window > 0; a block without a window
    # sees every earlier key anyway). Query i sees key j ≤ i when any holds (config.sparse):
    # - the dilated window (Longformer): 0 ≤ i − j < W·d and (i − j) % d == 0, d = dilation: the W
    #   keys i, i − d, …, i − (W − 1)·d (d = 1: the sliding window, i − W < j ≤ i);
    # - global_tokens = G: the first G positions are seen by every later query and see every
    #   earlier key (Longformer's global attention, causal): j < G or i < G;
    # - random_blocks = r (BigBird): j lies in one of r blocks of sparse_block_size positions drawn
    #   for i's block among the earlier blocks wholly past the global tokens and wholly before the
    #   window of the block's first query (all when r or fewer), seeded by sparse_seed and the
    #   block's index (reproducible).
    global_tokens: int = 0
    random_blocks: int = 0
    sparse_block_size: int = 64  # BigBird's block (64 in its released configs)
    sparse_seed: int = 0
    dilation: int = 1
    # ---- DeepSeek Sparse Attention (DeepSeek-V3.2): the lightning indexer ------------------
    # Each MLA block gains an indexer (transformers' DeepseekV32Indexer): index_n_heads query
    # heads of index_head_dim from q's bottleneck (wq_b: q_lora_rank → Hi·Di), one key of
    # index_head_dim per token (wk, then a LayerNorm, ε 1e-6), its first qk_rope_head_dim
    # rotated on halves, and a weight per head (weights_proj: d_model → Hi). A query's score of
    # key j is Σ_h w_h · relu(q_h·k_j); the query attends only its index_topk best earlier keys.
    index_n_heads: int = 0  # 0: no indexer (every earlier key attended)
    index_head_dim: int = 128  # the indexer's q/k head width (its cached key per token and layer)
    index_topk: int = 2048  # keys a query attends at most
    # ---- encoder-only (BERT) -------------------------------------------------------------------
    # causal=False: every query sees every key (BERT's bidirectional attention, Devlin et al. 2019
    # §3) on the same blocks; such a model fills in and classifies, it does not generate: no KV
    # cache, no next-token loss. BertModel's embeddings: word + position + token type (segment A
    # or B: type_vocab_size rows; 0: none), then a LayerNorm (embed_norm); its pooler: tanh of a
    # biased C×C dense layer on the first token ([CLS]); lm_head=False: a bare encoder, whose
    # forward returns the last hidden state (BertModel has no output layer)
    causal: bool = True
    type_vocab_size: int = 0
    embed_norm: bool = False
    pooler: bool = False
    lm_head: bool = True
    # ---- the 2017 encoder-decoder (Vaswani et al.; transformers' MarianMTModel) --------------
    # encoder_layers > 0: an encoder of that many bidirectional blocks (the decoder's width,
    # heads and FFN) reads the source; each of the n_layers decoder blocks gains cross-attention
    # to its output. 0: decoder-only (everything else in LLaMA Lab)
    encoder_layers: int = 0

    # ---- multimodal models counted whole (LLaVA, Gemma 3, Qwen2.5-VL) ---------------------
    # the image encoder and its projector (None: a text-only model); the live model builds the
    # text decoder only, the analysis counts the tower (llama_lab.analysis.vision)
    vision: VisionTower | None = None

    if TYPE_CHECKING:  # set in __post_init__ (not fields: never compared, copied or written out)
        _local_flags: ClassVar[tuple[bool, ...]]
        _moe_flags: ClassVar[tuple[bool, ...]]
        _rope_flags: ClassVar[tuple[bool, ...]]
        _linear_flags: ClassVar[tuple[bool, ...]]
        _temperature_flags: ClassVar[tuple[bool, ...]]

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3): K and V rebuilt from a cached latent."""
        return self.kv_lora_rank > 0

    @property
    def has_indexer(self) -> bool:
        """DeepSeek Sparse Attention: every MLA block picks its keys with a lightning indexer."""
        return self.index_n_heads > 0

    @property
    def qk_nope_head_dim(self) -> int:
        """MLA: the part of a q/k head RoPE leaves alone (head_dim − qk_rope_head_dim)."""
        return self.head_dim - self.qk_rope_head_dim

    @property
    def rope_dim(self) -> int:
        """Dimensions RoPE rotates per head: head_dim (its first partial_rotary_factor share:
        Phi-3, GLM), or MLA's qk_rope_head_dim."""
        return self.qk_rope_head_dim if self.is_mla else int(self.head_dim * self.partial_rotary_factor)

    @property
    def rope_layer_flags(self) -> tuple[bool, ...]:
        """Per block: whether it rotates q and k (RoPE, and not one of nope_layers)."""
        return self._rope_flags

    @property
    def temperature_layer_flags(self) -> tuple[bool, ...]:
        """Per block: whether its queries get the attention temperature (Llama 4, Mistral 4)."""
        return self._temperature_flags

    @property
    def linear_layer_flags(self) -> tuple[bool, ...]:
        """Per block: whether it mixes tokens with Gated DeltaNet (a fixed-size state, no KV)."""
        return self._linear_flags

    @property
    def has_linear_attention(self) -> bool:
        return any(self._linear_flags)

    @property
    def linear_key_dim(self) -> int:
        """Width of a linear layer's q (and of its k): linear_k_heads · linear_k_head_dim."""
        return self.linear_k_heads * self.linear_k_head_dim

    @property
    def linear_value_dim(self) -> int:
        """Width of a linear layer's v (and of its output gate z): linear_v_heads · linear_v_head_dim."""
        return self.linear_v_heads * self.linear_v_head_dim

    @property
    def linear_conv_dim(self) -> int:
        """Channels of a linear layer's convolution: q, k and v."""
        return 2 * self.linear_key_dim + self.linear_value_dim

    @property
    def full_attention_layers(self) -> int:
        """Blocks that attend with softmax attention (and keep a KV cache)."""
        return self.n_layers - sum(self._linear_flags)

    @property
    def local_layer_flags(self) -> tuple[bool, ...]:
        """Per block: whether it attends through the sliding window."""
        return self._local_flags

    @property
    def moe_layer_flags(self) -> tuple[bool, ...]:
        """Per block: whether its FFN is a mixture of experts."""
        return self._moe_flags

    def window_of(self, layer: int) -> int | None:
        """The sliding window of block ``layer`` (None: it attends every earlier token)."""
        return self.sliding_window if self._local_flags[layer] else None

    @property
    def sparse_pattern(self) -> SparsePattern | None:
        """The windowed blocks' pattern beyond the plain sliding window (global tokens, random
        blocks, dilation); None: none (no window, or a plain one)."""
        if not self.sliding_window or (self.global_tokens, self.random_blocks, self.dilation) == (0, 0, 1):
            return None
        return SparsePattern(
            self.sliding_window,
            self.dilation,
            self.global_tokens,
            self.random_blocks,
            self.sparse_block_size,
            self.sparse_seed,
        )

    @property
    def local_cache_tokens(self) -> int | None:
        """Tokens a windowed block's cache keeps at most: its window W (or chunk), the first G
        and the dilated window's span under a sparse pattern, None when random blocks may reach
        any earlier block (it keeps everything)."""
        pattern = self.sparse_pattern
        return self.sliding_window if pattern is None else pattern.cache_tokens

    @property
    def is_encoder_decoder(self) -> bool:
        """An encoder before the decoder, whose blocks cross-attend to it (the 2017 Transformer)."""
        return self.encoder_layers > 0

    @property
    def is_moe(self) -> bool:
        return any(self.moe_layer_flags)

    @property
    def gated_ffn(self) -> bool:
        """A gated FFN (three matrices: gate, up, down): SwiGLU or GeGLU."""
        return self.ffn_type in ("swiglu", "geglu")

    @property
    def n_rep(self) -> int:
        """Query heads per KV head."""
        return self.n_heads // self.n_kv_heads

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def attention_kind(self) -> str:
        if self.is_mla:
            return "MLA"
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"

    @property
    def is_llama_style(self) -> bool:
        """True when a LLaMA-family decoder (pre-norm RMSNorm, RoPE, SwiGLU, final norm) can
        express the recipe; which transformers family fits the rest: ``hf.select.family_of``."""
        return (
            self.norm_position == "pre"
            and self.norm_type == "rmsnorm"
            and self.pos_encoding == "rope"
            and self.ffn_type == "swiglu"
            and self.final_norm
            and not self.embed_scale
            and not self.norm_plus_one
            and not (self.attn_softcap or self.logit_softcap)
            and self.query_pre_attn_scalar == self.head_dim
            and self.rope_local_theta == self.rope_theta
            and self.partial_rotary_factor == 1.0
            and self.nope_layers == "none"
            and self.qk_norm_scope == "head"
            and not self.has_linear_attention
            and not self.attn_output_gate
            and not self.shared_expert_gate
            and not self.chunked_attention
            and not any(self._temperature_flags)
            and self.moe_style != "llama4"
            and not self.has_granite_multipliers
            and not self.is_encoder_style
            and not self.is_encoder_decoder
        )

    @property
    def is_encoder_style(self) -> bool:
        """Any of BERT's encoder fields away from a decoder's: bidirectional attention, segment
        embeddings, an embedding norm, a pooler, or no LM head."""
        encoder_fields = (self.type_vocab_size, self.embed_norm, self.pooler)
        return not self.causal or not self.lm_head or any(encoder_fields)

    @property
    def has_granite_multipliers(self) -> bool:
        """Any of Granite's µP multipliers away from the plain model's (1, and the score scale
        1/√query_pre_attn_scalar)."""
        return (
            self.embedding_multiplier != 1.0
            or self.residual_multiplier != 1.0
            or self.logits_scaling != 1.0
            or self.attention_multiplier != self.query_pre_attn_scalar**-0.5
        )

    @property
    def qk_norm_widths(self) -> tuple[int, int]:
        """γ widths of the q and the k norm: a head (D each), or (OLMo 2) the whole projections
        (H·D, G·D); (0, 0) without QK-norm or with Llama 4's, which has no γ."""
        if not self.qk_norm or self.qk_norm_scope == "rope_l2":
            return 0, 0
        D = self.head_dim
        return (self.n_heads * D, self.kv_dim) if self.qk_norm_scope == "projection" else (D, D)
