"""BERT (``bert``): the encoder-only Transformer of Devlin et al. 2019, counted as transformers'
``BertModel`` (BertConfig; the pooler included, as ``BertModel`` builds it by default). The
lab's own blocks with the switches BERT needs: bidirectional attention (``causal=False``: every
token sees every other), word + learned position + segment (``type_vocab_size``) embeddings
summed and normalised (``embed_norm``), Post-LN blocks with LayerNorm (biases) and every linear
layer biased, the FFN through the exact (erf) GELU (``hidden_act`` "gelu", ``F.gelu`` without
approximation: the lab's ``ffn_type="gelu"``), no final norm, the pooler (tanh of a C×C dense
layer on the first token, ``pooler``) and no LM head (``lm_head=False``). Such a model fills in
and classifies; it does not generate, so it has no KV cache and no next-token loss
(``require_decoder_only`` refuses those surfaces by name)."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ..fields import ModelFields
from ..hf.family import Counts, Family, Feature, FieldGroup, FieldSpec, Note, Rounded, failing
from ..hf.keys import ModelType
from ..hf.reader import Reader
from ..hf.select import BLOCKS
from ..messages import shown

# BertConfig's keys the lab models beyond the common ones; dropout is training-time noise (a note)
DROPOUT = ("hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout")
# common keys BertConfig has no field for (no RoPE, no RMSNorm, no KV heads of their own): never
# written, and any value a file gives them (null too) is kept and never read
NOT_BERT = frozenset(
    {"num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters"}
)
BERT = ModelType(
    "bert",
    "BertModel",
    keys=frozenset({"type_vocab_size", "layer_norm_eps", "embedding_size", *DROPOUT}),
    nullable=frozenset({"classifier_dropout", "embedding_size", *NOT_BERT}),  # (no field: any value kept)
    block="bert",
    holds=frozenset({"encoder", "nope_blocks"}),  # (no block rotates: positions are learned)
    hidden_act="gelu",
    drops=NOT_BERT,
)
# The fields every BERT config holds: BertModel's block (Post-LN LayerNorm, learned positions,
# GELU, no final norm: select.BLOCKS["bert"]), its biases, embeddings and heads
BERT_BLOCK: dict[str, Any] = dict(
    **BLOCKS["bert"].fields,
    bias=True,
    tie_embeddings=False,
    causal=False,
    embed_norm=True,
    pooler=True,
    lm_head=False,
)


def key_notes(r: Reader) -> None:
    """What BertConfig reads that changes the model the lab would build: a position embedding
    other than absolute, and a decoder or cross-attention, are refused by name; dropout is a
    note."""
    kind = r.data.get("position_embedding_type", "absolute")
    if kind != "absolute":
        raise ConfigError(
            f"position_embedding_type={shown(kind)} is not modelled: LLaMA Lab's BERT has absolute "
            f"(learned) positions only",
            field="position_embedding_type",
        )
    for key, words in (("is_decoder", "a causal BERT decoder"), ("add_cross_attention", "cross-attention")):
        if r.data.get(key) is True:
            raise ConfigError(f"{key}=true ({words}) is not modelled for bert", field=key)
    if "embedding_size" in r.data:
        r.note(
            f"embedding_size={shown(r.data['embedding_size'])}: BertModel only checks that it exists "
            f"(to let num_attention_heads not divide hidden_size); its embeddings are hidden_size wide"
        )
    for key in DROPOUT:
        if r.data.get(key) not in (None, 0, 0.0):
            r.note(f"{key}={shown(r.data[key])} is training-time noise, not modelled (no dropout)")


def read(r: Reader) -> dict[str, Any]:
    return dict(
        **BERT_BLOCK,
        n_kv_heads=r.get("num_attention_heads"),  # every head its own K and V
        head_dim=None,  # d_model / n_heads (BertModel reads no head_dim)
        norm_eps=r.get("layer_norm_eps"),
        type_vocab_size=r.get("type_vocab_size"),
        rope_theta=ModelFields.rope_theta,  # no RoPE: the field's default, never used
        rope_scaling=None,
    )


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    return dict(
        hidden_act="gelu",
        layer_norm_eps=cfg.norm_eps,
        type_vocab_size=cfg.type_vocab_size,
        tie_word_embeddings=True,  # BertConfig's default; BertModel has no head to tie
    )


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """BertModel: BERT_BLOCK, multi-head attention of d_model / n_heads per head, at least one
    segment row (its embeddings always add token type 0)."""
    return failing(
        [
            *((getattr(cfg, name) != value, f"{name}={value!r}") for name, value in BERT_BLOCK.items()),
            (not cfg.qkv_bias or not cfg.o_bias or not cfg.mlp_bias, "biases on every linear layer"),
            (cfg.n_kv_heads != cfg.n_heads, "GQA/MQA"),
            (cfg.head_dim * cfg.n_heads != cfg.d_model, "heads spanning d_model exactly"),
            (cfg.type_vocab_size < 1, "type_vocab_size ≥ 1"),
            (cfg.qk_norm, "QK-norm"),
            (cfg.is_moe, "experts"),
        ]
    )


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    if cfg.causal:
        return []
    head = "an LM head" if cfg.lm_head else "no LM head (a bare encoder: the last hidden state is its output)"
    return [
        Note(
            "attention",
            f"**Bidirectional encoder** (BERT): every token attends to every other, later ones included "
            f"— it fills in and classifies rather than generates, so it keeps no KV cache; "
            f"{head}{', a pooler on the first token' if cfg.pooler else ''}.",
        )
    ]


FEATURES = (
    Feature(
        "encoder",
        "BERT's encoder (bidirectional attention, segment embeddings, an embedding norm, a pooler, "
        "no LM head)",
        lambda cfg: cfg.is_encoder_style,
    ),
)

_BERT: dict[str, Any] = dict(
    **BERT_BLOCK, vocab_size=30522, max_seq_len=512, type_vocab_size=2, norm_eps=1e-12
)

PRESETS: dict[str, dict[str, Any]] = {
    # google-bert/bert-base-uncased config.json: hidden 768, 12 layers, 12 heads, intermediate
    # 3072, gelu, 512 positions, 2 segment types, vocab 30,522, layer_norm_eps 1e-12. BertModel on
    # the meta device (pooler included): 109,482,240
    "bert-base-uncased": dict(**_BERT, d_model=768, n_layers=12, n_heads=12, n_kv_heads=12, ffn_hidden=3072),
    # google-bert/bert-large-uncased config.json: hidden 1024, 24 layers, 16 heads, intermediate
    # 4096, the rest as base. BertModel on the meta device: 335,141,888
    "bert-large-uncased": dict(
        **_BERT, d_model=1024, n_layers=24, n_heads=16, n_kv_heads=16, ffn_hidden=4096
    ),
}

# Devlin et al. 2019 §3: "BERT_BASE (L=12, H=768, A=12, Total Parameters=110M) and BERT_LARGE
# (L=24, H=1024, A=16, Total Parameters=340M)": BertModel's 109,482,240 and 335,141,888 rounded
# to two significant figures (the pre-training heads, cls.*, add 0.62M and 1.08M: 110.1M and
# 336.2M, which round the same)
PUBLISHED = {
    "bert-base-uncased": Rounded(110e6, 110e6, "BERT_BASE (L=12, H=768, A=12, Total Parameters=110M)"),
    "bert-large-uncased": Rounded(340e6, 340e6, "BERT_LARGE (L=24, H=1024, A=16, Total Parameters=340M)"),
}

FIELDS = FieldGroup(
    "Encoder-only (BERT)",
    (
        FieldSpec("causal", "causal attention (off: bidirectional, BERT)", "toggle"),
        FieldSpec(
            "type_vocab_size",
            "segment types (type_vocab_size; 0 = none)",
            "int",
            help="BERT: 2 (sentence A and B). Token type 0 is added to every token.",
            minimum=0,
        ),
        FieldSpec("embed_norm", "LayerNorm on the summed embeddings", "toggle"),
        FieldSpec("pooler", "pooler (tanh of a dense layer on the first token)", "toggle"),
        FieldSpec("lm_head", "LM head (off: a bare encoder, BertModel)", "toggle"),
    ),
)

FAMILY = Family(
    "BERT",
    (BERT,),
    read=read,
    write=write,
    lacks=lacks,
    notes=notes,
    key_notes=key_notes,
    features=FEATURES,
    presets=PRESETS,
    published=PUBLISHED,
    field_groups=(FIELDS,),
)
