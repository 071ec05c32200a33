"""Marian (``marian``): the 2017 Transformer as Vaswani et al. built it, an encoder-decoder, as
transformers' MarianMTModel holds it (MarianConfig in transformers 5): an encoder of
``encoder_layers`` bidirectional blocks over the source, a decoder of ``decoder_layers`` causal
blocks each cross-attending to the encoder's output, Post-LN LayerNorm (eps 1e-5) after every
sublayer and no final norm, static sinusoidal positions (``MarianSinusoidalPositionalEmbedding``:
sines in the first half of each row, cosines in the second), an ungated FFN, biases everywhere,
embeddings × √d (``scale_embedding``), one vocabulary shared by source, target and the tied head
(``share_encoder_decoder_embeddings``), and a ``final_logits_bias`` buffer added to the logits.
Its config.json names its own keys (d_model, encoder_ffn_dim, ...), not the decoders' hidden_size
and num_hidden_layers: ``ModelType.common`` is False and this module reads and writes every one."""

from __future__ import annotations

from typing import Any

from ...errors import ConfigError
from ..bounds import FAMILY_LIMITS, LIMITS
from ..fields import ModelFields
from ..hf.family import Counts, Family, Feature, FieldGroup, FieldSpec, Note, Rounded, failing
from ..hf.keys import ModelType
from ..hf.reader import Reader
from ..messages import shown

# MarianConfig's keys LLaMA Lab reads (the decoder's and the encoder's sizes, which must agree),
# and the training-time ones that change nothing at inference (dropout, layer drop, init scale)
SIZES = ("d_model", "encoder_layers", "decoder_layers", "max_position_embeddings", "vocab_size")
PAIRED = (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim"))
TRAINING = ("dropout", "activation_dropout", "encoder_layerdrop", "decoder_layerdrop", "init_std")
MARIAN = ModelType(
    "marian",
    "MarianMTModel",
    keys=frozenset(
        {
            *SIZES,
            *(key for pair in PAIRED for key in pair),
            *TRAINING,
            "activation_function",
            "scale_embedding",
            "share_encoder_decoder_embeddings",
            "decoder_vocab_size",
        }
    ),
    nullable=frozenset({"decoder_vocab_size"}),  # null: the source vocabulary
    block="marian",
    holds=frozenset({"encoder"}),
    common=False,
)
# activation_function → ffn_type (transformers' ACT2FN: "gelu" the exact erf GELU; "swish" and
# "silu" x·σ(x), ungated: the opus-mt checkpoints' "swish"); written back by the first name
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}
LAYERNORM_EPS = 1e-5  # MarianEncoderLayer's nn.LayerNorm: its default, not configurable


def _same(r: Reader, encoder_key: str, decoder_key: str) -> Any:
    """One size the encoder and the decoder share (LLaMA Lab builds them alike)."""
    encoder, decoder = r.get(encoder_key), r.get(decoder_key)
    if encoder != decoder:
        raise ConfigError(
            f"{encoder_key}={shown(encoder)} differs from {decoder_key}={shown(decoder)}: not modelled "
            f"(LLaMA Lab's encoder has the decoder's heads and FFN width)",
            field=encoder_key,
            also=(decoder_key,),
        )
    return decoder


def read(r: Reader) -> dict[str, Any]:
    act = r.get("activation_function")
    if act not in ACTIVATIONS:
        raise ConfigError(
            f"activation_function={shown(act)} is not modelled: LLaMA Lab's ungated FFN is "
            f"{' or '.join(ACTIVATIONS)}",
            field="activation_function",
        )
    vocab, target = r.get("vocab_size"), r.get("decoder_vocab_size")
    if not r.flag("share_encoder_decoder_embeddings", True):
        raise ConfigError(
            "share_encoder_decoder_embeddings=false (separate source and target embeddings) is not "
            "modelled: LLaMA Lab's encoder-decoder shares one vocabulary",
            field="share_encoder_decoder_embeddings",
        )
    if target is not None and target != vocab:
        raise ConfigError(
            f"decoder_vocab_size={shown(target)} differs from vocab_size={shown(vocab)}: not modelled "
            f"(one vocabulary shared by source and target)",
            field="decoder_vocab_size",
        )
    if not r.flag("tie_word_embeddings", True):
        raise ConfigError(
            "tie_word_embeddings=false is not modelled: MarianMTModel then keeps the shared "
            "table, the encoder's and the decoder's as three untied copies beside the head",
            field="tie_word_embeddings",
        )
    heads = _same(r, *PAIRED[0])
    return dict(
        vocab_size=vocab,
        d_model=r.get("d_model"),
        n_layers=r.count("decoder_layers", 1, LIMITS["n_layers"]),
        encoder_layers=r.count("encoder_layers", 1, FAMILY_LIMITS["encoder_layers"]),
        n_heads=heads,
        n_kv_heads=heads,
        ffn_hidden=_same(r, *PAIRED[1]),
        max_seq_len=r.get("max_position_embeddings"),
        ffn_type=ACTIVATIONS[act],
        embed_scale=r.flag("scale_embedding"),
        norm_position="post",
        norm_type="layernorm",
        norm_eps=LAYERNORM_EPS,
        pos_encoding="sinusoidal",
        bias=True,
        final_norm=False,
        tie_embeddings=True,
        init="normal",  # init_std: N(0, 0.02) by default
    )


def key_notes(r: Reader) -> None:
    for key in TRAINING[:4]:
        if r.data.get(key) not in (None, 0, 0.0):
            r.note(f"{key}={shown(r.data[key])} is training-time noise, not modelled (no dropout)")


def write(cfg: ModelFields, model_type: str) -> dict[str, Any]:
    act = next(name for name, ffn in ACTIVATIONS.items() if ffn == cfg.ffn_type)
    return dict(
        vocab_size=cfg.vocab_size,
        decoder_vocab_size=cfg.vocab_size,
        d_model=cfg.d_model,
        encoder_layers=cfg.encoder_layers,
        decoder_layers=cfg.n_layers,
        encoder_attention_heads=cfg.n_heads,
        decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.ffn_hidden,
        decoder_ffn_dim=cfg.ffn_hidden,
        activation_function=act,
        scale_embedding=cfg.embed_scale,
        max_position_embeddings=cfg.max_seq_len,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        # Marian's convention: the last id pads and starts the target (MarianConfig's default,
        # 58100, lies outside a smaller vocabulary)
        pad_token_id=cfg.vocab_size - 1,
        decoder_start_token_id=cfg.vocab_size - 1,
        init_std=0.02,
    )


def lacks(cfg: ModelFields, model_type: str) -> list[str]:
    """MarianConfig: the 2017 encoder-decoder (``feature_rules.check_encoder`` holds the rest)."""
    return failing(
        [
            (not cfg.is_encoder_decoder, "no encoder (encoder_layers = 0)"),
            (not cfg.tie_embeddings, "an untied head"),
            (cfg.n_kv_heads != cfg.n_heads, "GQA/MQA (n_kv_heads < n_heads)"),
            (cfg.norm_eps != LAYERNORM_EPS, f"a LayerNorm eps other than {LAYERNORM_EPS:g}"),
            (cfg.ffn_type not in ACTIVATIONS.values(), f"ffn_type={cfg.ffn_type!r}"),
        ]
    )


FEATURES = (Feature("encoder", "an encoder (encoder_layers > 0)", lambda cfg: cfg.is_encoder_decoder),)


def notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    if not cfg.is_encoder_decoder:
        return []
    positions = "static sinusoidal" if cfg.pos_encoding == "sinusoidal" else "learned"
    return [
        Note(
            "attention",
            f"**Encoder-decoder** (the 2017 Transformer): {cfg.encoder_layers} bidirectional encoder "
            f"blocks read the source; each of the {cfg.n_layers} decoder blocks attends causally to the "
            f"target, then cross-attends to the encoder's output (its K and V computed once per source).",
        ),
        Note(
            "positions",
            f"**Two {positions} position tables** of {cfg.max_seq_len} × {cfg.d_model} (encoder and "
            f"decoder), counted as parameters as MarianMTModel's `parameters()` holds them "
            f"({2 * cfg.max_seq_len * cfg.d_model:,}).",
        ),
    ]


_2017: dict[str, Any] = dict(
    vocab_size=37000,
    n_layers=6,
    encoder_layers=6,
    max_seq_len=512,
    norm_position="post",
    norm_type="layernorm",
    norm_eps=LAYERNORM_EPS,
    pos_encoding="sinusoidal",
    ffn_type="relu",
    bias=True,
    final_norm=False,
    tie_embeddings=True,
    embed_scale=True,
    init="normal",  # MarianMTModel's N(0, init_std = 0.02); the paper names no initialisation
)

PRESETS: dict[str, dict[str, Any]] = {
    # Vaswani et al. 2017, "Attention Is All You Need", Table 3 (base): N = 6 encoder and 6
    # decoder layers, d_model 512, d_ff 2048, h 8; §5.1 a shared source-target vocabulary of
    # about 37,000 tokens (WMT 2014 English-German BPE); §3.4 the embeddings × √d_model and
    # shared with the pre-softmax layer. MarianMTModel on the meta device: 63,606,784
    "transformer-2017-base": dict(**_2017, d_model=512, n_heads=8, n_kv_heads=8, ffn_hidden=2048),
    # the same Table 3 (big): d_model 1024, d_ff 4096, h 16. MarianMTModel: 215,293,952
    "transformer-2017-big": dict(**_2017, d_model=1024, n_heads=16, n_kv_heads=16, ffn_hidden=4096),
}

# Vaswani et al. 2017, Table 3, "params ×10⁶": 65 (base) and 213 (big), as issue 41 quotes them
# ("65M", "213M"). The lab counts what MarianMTModel's parameters() hold: 63,606,784 and
# 215,293,952, of which the two max_seq_len × d sinusoidal tables (524,288 and 1,048,576) are
# no parameters in the paper. The rest is the paper's own convention, which it does not spell
# out: a rounded figure over a vocabulary of "about 37000" tokens whose exact size is not
# published. No one vocabulary gives both figures: without the tables, 65M needs ≈ 40,745
# tokens at d = 512 and 213M ≈ 35,784 at d = 1024 (each token is d parameters)
PUBLISHED = {
    "transformer-2017-base": Rounded(65e6, 65e6, "Vaswani et al. 2017, Table 3, base: params ×10⁶ = 65"),
    "transformer-2017-big": Rounded(213e6, 213e6, "Vaswani et al. 2017, Table 3, big: params ×10⁶ = 213"),
}

FIELDS = FieldGroup(
    "Encoder-decoder (2017)",
    (
        FieldSpec(
            "encoder_layers",
            "encoder blocks (encoder_layers; 0 = decoder-only)",
            "int",
            help="The 2017 Transformer: 6. Each decoder block then cross-attends to the encoder's output.",
            minimum=0,
            maximum=FAMILY_LIMITS["encoder_layers"],
        ),
    ),
)

FAMILY = Family(
    "Marian",
    (MARIAN,),
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
