"""torchtitan's Llama 3 training step as it runs, for the bytes its public memory rows measure:
what its operator-level selective activation checkpointing keeps per block, and what its
float32 loss holds at its peak. Read from pytorch/torchtitan at the rows' commits: 9dec370
(2024-12-26: ``train.py``, ``torchtitan/parallelisms/parallelize_llama.py``,
``torchtitan/models/llama/model.py``) and e7c0cae (2025-06-11: ``torchtitan/train.py``,
``torchtitan/components/loss.py``, ``torchtitan/models/llama3/parallelize_llama.py``).

Operator-level SAC (``activation_checkpoint.mode = "selective"``, ``selective_ac_option =
"op"``, the llama3 train configs' setting): every block runs under ``checkpoint`` with
``create_selective_checkpoint_contexts``; an op's outputs are kept (MUST_SAVE) when it is in
``_save_list`` — ``aten.mm``, ``aten._scaled_dot_product_flash_attention``,
``aten._scaled_dot_product_efficient_attention``, ``_c10d_functional.reduce_scatter_tensor``,
``aten.max`` (and ``aten.abs`` at 9dec370: float8's amax, not called by a bf16 run) — "except
every second mm", counted per block forward; everything else is recomputed in backward. A
torchtitan block calls its seven matmuls in the order wq, wk, wv, wo, w1, w3, w2, so the odd
ones are kept: wq's output (q), wv's (v), w1's (the gate, before SiLU) and w2's (the block's FFN
output); wk, wo and w3 are recomputed. Float8 linears (torchao) call ``torch.mm`` on
``Float8Tensor`` arguments: the SAC mode sees the same ``aten.mm`` and keeps the same bf16
outputs. Under tensor parallelism (Megatron's split with sequence parallelism, torchtitan's
plan) each rank's mm outputs are its shards, and the two reduce-scatters (wo's and w2's partial
sums onto each rank's T/t positions) are kept too.

Full AC (``mode = "full"``: ``checkpoint_wrapper`` around each block) keeps each block's input
only: the lab's ``recompute="full"``, the same count.

The loss: ``cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))`` with ``del pred``
before ``loss.backward()``. Run eagerly (9dec370 never compiles it), the bf16 logits go with
``del pred``, the float32 copy once cross-entropy returns; ``log_softmax`` keeps its float32
output for backward, and backward's first two kernels write the gradient of those
log-probabilities and then of the float32 logits beside it: three float32 N·V tensors at the
loss's backward, every block's saved tensors still alive. Compiled (e7c0cae with
``training.compile``: ``build_cross_entropy_loss`` wraps it in ``torch.compile``), the min-cut
partition keeps the bf16 logits and two float32 values per row (the row max and log-sum-exp)
and recomputes the softmax inside the backward kernel, which writes the bf16 gradient of the
logits: two bf16 N·V tensors (AOTAutograd's partition with Inductor's decompositions, and
Inductor's CPU code, whose backward allocates only that gradient and a float32 value per row,
read on torch 2.13; the rows ran torch 1963fc8 and 2.8). Tests measure both peaks on the CPU
allocator (the compiled one in the slow tier)."""

from __future__ import annotations

import math

from ..config import ModelConfig
from ..errors import AnalysisError
from .activations import head_saved
from .common import STATS_BYTES, nbytes
from .kv import kv_heads_per_gpu
from .shapes import Shapes

# torchtitan's loss, as the row's commit runs it: eager (9dec370; or no training.compile) or compiled
LOSSES = ("eager", "compiled")


def check_llama_block(cfg: ModelConfig) -> None:
    """torchtitan's op-level policy is modelled for the block its Llama 3 runs — RMSNorm,
    attention with RoPE and grouped KV heads through SDPA, a SwiGLU FFN, no biases — as its
    matmuls come in that order: refuse anything else by name."""
    rules = [
        (cfg.norm_type != "rmsnorm" or cfg.norm_position != "pre", "norm_type", "Pre-LN RMSNorm"),
        (cfg.ffn_type != "swiglu", "ffn_type", "a SwiGLU FFN"),
        (cfg.bias or cfg.qkv_bias or cfg.o_bias or cfg.mlp_bias, "bias", "no biases"),
        (cfg.is_moe, "n_experts", "no experts"),
        (cfg.is_mla, "kv_lora_rank", "no MLA"),
        (cfg.has_linear_attention, "linear_layers", "no linear-attention blocks"),
        (cfg.sliding_window > 0, "sliding_window", "no sliding window"),
        (cfg.qk_norm or cfg.attn_output_gate, "qk_norm", "no QK-norm or output gate"),
        (cfg.attention_sinks or cfg.attn_softcap > 0, "attention_sinks", "fused attention"),
        (cfg.logit_softcap > 0, "logit_softcap", "no logit soft-capping"),
    ]
    for broken, name, rule in rules:
        if broken:
            raise AnalysisError(
                f"torchtitan's operator-level recomputation is modelled for its Llama block ({rule}): "
                f"{name}={getattr(cfg, name)!r}"
            )


def op_sac_block_saved(
    cfg: ModelConfig, B: int, T: int, b: float, tp: int = 1, sequence_parallel: bool = False
) -> dict[str, int]:
    """What one block keeps for backward under torchtitan's op-level SAC, by op (see the
    module's docstring), on one of ``tp`` ranks: the block's input (the checkpoint's
    argument; T/t positions under sequence parallelism), the outputs of the odd matmuls — wq
    (H/t heads), wv (G/t KV heads, at least one), w1 (F/t), w2 (the C-wide partial sum) —,
    flash attention's output and float32 logsumexp, and under sequence parallelism the two
    reduce-scatters' outputs (C wide, T/t positions)."""
    check_llama_block(cfg)
    s = Shapes.of(cfg)
    N, C, D = B * T, s.C, s.D
    H, G = s.H // tp, kv_heads_per_gpu(cfg, tp)
    n_rep = math.ceil(N / tp) if sequence_parallel else N  # rows of the sequence-sharded tensors
    return {
        "block_input": nbytes(n_rep * C, b),
        "wq": nbytes(N * H * D, b),  # mm 1
        "wv": nbytes(N * G * D, b),  # mm 3 (wk, mm 2, recomputed)
        "attention": nbytes(N * H * D, b) + STATS_BYTES * B * H * T,  # SDPA: output, logsumexp
        "w1": nbytes(N * s.F // tp, b),  # mm 5 (wo, mm 4, recomputed)
        "w2": nbytes(N * C, b),  # mm 7 (w3, mm 6, recomputed)
        "reduce_scatter": 2 * nbytes(n_rep * C, b) if sequence_parallel and tp > 1 else 0,
    }


def loss_bytes(cfg: ModelConfig, N: int, b: float, loss: str, tp: int = 1) -> tuple[int, int]:
    """(what torchtitan's loss head keeps for backward, what its backward adds at the loss's
    peak) over N tokens on one of ``tp`` ranks (loss parallel: V/t logits each). Kept: the final
    norm's tensors, the head's input and the targets (``activations.head_saved``), and eager the
    float32 log-probabilities, compiled the bf16 logits and a float32 max and log-sum-exp per
    row. Added: eager the float32 gradients of the log-probabilities and of the logits,
    compiled the logits' bf16 gradient (the module's docstring)."""
    if loss not in LOSSES:
        raise AnalysisError(f"loss={loss!r} must be one of {', '.join(LOSSES)}")
    NV = N * math.ceil(Shapes.of(cfg).V / tp)
    upcast = head_saved(cfg, N, b, "upcast", tp)  # + the logits in b and float32 log-probs
    if loss == "eager":
        return upcast - nbytes(NV, b), 2 * nbytes(NV, STATS_BYTES)  # `del pred`
    return upcast - nbytes(NV, STATS_BYTES) + 2 * STATS_BYTES * N, nbytes(NV, b)
