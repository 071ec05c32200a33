"""torchtitan's training step as it runs (analysis.torchtitan): its operator-level selective
recomputation and its float32 loss, by hand and against torch itself on the CPU — the policy of
torchtitan's parallelize_llama.py (9dec370 / e7c0cae) on a copy of its Llama block — and the
stated pipeline schedule's bubble of a validation row, by hand."""

from collections import defaultdict

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from llama_lab.analysis.activations import head_saved
from llama_lab.analysis.parallel import Layout, parallel_memory
from llama_lab.analysis.torchtitan import loss_bytes, op_sac_block_saved
from llama_lab.config import PRESETS
from llama_lab.errors import AnalysisError
from llama_lab.runtime.memory import AllocatedPeak
from llama_lab.validation.rows import load_rows
from llama_lab.validation.validate import stated_bubble

# a torchtitan-shaped block, small: C 64, 4 query heads of 16, 2 KV heads, F 96
CFG = PRESETS["debug"].replace(
    d_model=64, n_heads=4, n_kv_heads=2, ffn_hidden=96, n_layers=2, vocab_size=512, max_seq_len=64
)
B, T = 2, 16
N = B * T


def test_op_sac_keeps_the_odd_matmuls_and_attention_by_hand():
    C, H, G, D, F_ = 64, 4, 2, 16, 96
    b = 2
    assert op_sac_block_saved(CFG, B, T, b) == {
        "block_input": N * C * b,  # the checkpoint's argument
        "wq": N * H * D * b,  # mm 1
        "wv": N * G * D * b,  # mm 3
        "attention": N * H * D * b + 4 * B * H * T,  # flash: output, float32 logsumexp
        "w1": N * F_ * b,  # mm 5
        "w2": N * C * b,  # mm 7
        "reduce_scatter": 0,
    }
    # tp = 2 with sequence parallelism: heads, KV heads and F halved, the block input and the
    # two reduce-scatters' outputs over T/2 positions, w2's partial sum C wide
    assert op_sac_block_saved(CFG, B, T, b, tp=2, sequence_parallel=True) == {
        "block_input": N // 2 * C * b,
        "wq": N * 2 * D * b,
        "wv": N * 1 * D * b,
        "attention": N * 2 * D * b + 4 * B * 2 * T,
        "w1": N * F_ // 2 * b,
        "w2": N * C * b,
        "reduce_scatter": 2 * N // 2 * C * b,
    }


class RMSNorm(nn.Module):  # torchtitan/models/norms.py at 9dec370
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)) * self.weight


class Block(nn.Module):
    """torchtitan/models/llama/model.py's TransformerBlock at 9dec370 (RoPE left out: it adds no
    matmul and nothing the policy keeps)."""

    def __init__(self, C: int, H: int, G: int, F_: int):
        super().__init__()
        self.H, self.G, self.D = H, G, C // H
        self.attention_norm, self.ffn_norm = RMSNorm(C), RMSNorm(C)
        self.wq, self.wk = nn.Linear(C, H * self.D, bias=False), nn.Linear(C, G * self.D, bias=False)
        self.wv, self.wo = nn.Linear(C, G * self.D, bias=False), nn.Linear(H * self.D, C, bias=False)
        self.w1, self.w3 = nn.Linear(C, F_, bias=False), nn.Linear(C, F_, bias=False)
        self.w2 = nn.Linear(F_, C, bias=False)

    def attention(self, x):
        bs, t, _ = x.shape
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        q, k, v = (y.view(bs, t, -1, self.D) for y in (q, k, v))
        n_rep = self.H // self.G  # repeat_kv
        k, v = (y.repeat_interleave(n_rep, dim=2) for y in (k, v))
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, T, D)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bs, t, -1))

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        y = self.ffn_norm(h)
        return h + self.w2(F.silu(self.w1(y)) * self.w3(y))  # FeedForward.forward


# parallelize_llama.py's _save_list (e7c0cae), with the CPU's flash kernel standing for CUDA's
SAVE_LIST = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops.aten.max.default,
}


def op_sac_context():
    """torchtitan's _get_custom_policy: keep the listed ops' outputs except every second mm."""
    meta: dict[str, int] = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in SAVE_LIST and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

    return create_selective_checkpoint_contexts(policy)


def test_op_sac_count_is_what_torch_keeps():
    """The bytes a forward under torchtitan's policy leaves allocated (the policy's cache), plus
    the block input the checkpoint holds, equal the count (float32: the CPU kernels' own dtype)."""
    torch.manual_seed(0)
    block = Block(64, 4, 2, 96)
    x = torch.randn(B, T, 64, requires_grad=True)
    with AllocatedPeak() as allocated:
        # as ptd_checkpoint_wrapper(..., preserve_rng_state=False) runs it
        y = checkpoint(block, x, use_reentrant=False, context_fn=op_sac_context, preserve_rng_state=False)
        loss = y.sum()
        del y
    assert allocated.net_bytes is not None
    kept = allocated.net_bytes - loss.nbytes + x.nbytes  # x was allocated before
    assert kept == sum(op_sac_block_saved(CFG, B, T, 4).values())
    loss.backward()  # and the policy recomputes what it did not keep
    assert x.grad is not None


def test_eager_float32_loss_holds_three_float32_logits_at_its_peak():
    """torchtitan's eager loss (train.py at 9dec370): after `del pred`, log_softmax keeps its
    float32 output; its backward writes the log-probabilities' gradient and then the logits'
    beside it — 3 × 4·N·V bytes, measured as the CPU allocator's peak."""
    V, C = 2048, 32
    h = torch.randn(256, C, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(V, C, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (256,))
    with AllocatedPeak() as allocated:
        pred = h @ w.T  # the head's bf16 logits
        loss = F.cross_entropy(pred.float(), labels)
        del pred
        loss.backward()
    by_hand = 3 * 4 * 256 * V
    assert allocated.bytes is not None
    assert by_hand <= allocated.bytes <= by_hand * 1.02
    cfg = CFG.replace(vocab_size=V)
    kept, added = loss_bytes(cfg, 256, 2, "eager")
    assert added == 2 * 4 * 256 * V  # the two float32 gradients
    assert kept == head_saved(cfg, 256, 2, "upcast") - 2 * 256 * V  # no bf16 logits


def test_compiled_loss_keeps_the_bf16_logits_by_hand():
    """Compiled (e7c0cae): the bf16 logits and a float32 max and log-sum-exp per row are kept,
    the softmax recomputed in backward, which writes the logits' bf16 gradient."""
    V = 512
    kept, added = loss_bytes(CFG, N, 2, "compiled")
    assert kept == head_saved(CFG, N, 2, "upcast") - 4 * N * V + 2 * 4 * N
    assert added == 2 * N * V


@pytest.mark.slow
def test_compiled_float32_loss_holds_the_bf16_logits_and_their_gradient():
    """The same loss under torch.compile (Inductor on the CPU, compiled once before measuring):
    its peak is the kept bf16 logits and their bf16 gradient, 2 × 2·N·V bytes (eager: 12·N·V)."""
    V, C, n = 2048, 32, 256

    def loss_fn(pred, labels):  # torchtitan/components/loss.py at e7c0cae
        return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))

    compiled = torch.compile(loss_fn)
    h = torch.randn(1, n, C, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(V, C, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, V, (1, n))
    compiled(h @ w.T, labels).backward()  # compile outside the measurement
    with AllocatedPeak() as allocated:
        pred = h @ w.T
        loss = compiled(pred, labels)
        del pred
        loss.backward()
    by_hand = 2 * 2 * n * V
    assert allocated.bytes is not None
    assert by_hand <= allocated.bytes <= by_hand * 1.05
    assert loss_bytes(CFG.replace(vocab_size=V), n, 2, "compiled")[1] == 2 * n * V


def test_parallel_memory_counts_the_op_policy_and_the_loss_peak():
    layout = Layout(gpus=1, recompute="op", loss="eager")
    est = parallel_memory(CFG, layout, T, "bf16")
    stage = est.stages[0]
    blocks = 2 * sum(op_sac_block_saved(CFG, 1, T, 2).values())
    kept, added = loss_bytes(CFG, T, 2, "eager")
    parts = stage["activation_per_micro_batch"]
    assert parts["blocks"] == blocks and parts["head_and_loss"] == kept
    assert stage["activation_bytes"] == blocks + kept + 8 * T + added  # + the int64 token ids


def test_op_policy_is_refused_for_other_blocks():
    with pytest.raises(AnalysisError, match="torchtitan's operator-level recomputation"):
        parallel_memory(PRESETS["qwen3-30b-a3b"], Layout(gpus=8, recompute="op"), 128, "bf16")


def test_the_405b_row_bubble_is_its_interleaved_schedule_by_hand():
    """torchtitan 9dec370's defaults: 8 micro-batches (the pp degree), 2 stages per rank:
    (p − 1)/(v·m + p − 1) = 7/(2·8 + 7)."""
    rows = {r.id: r for r in load_rows()}
    assert stated_bubble(rows["torchtitan-llama31-405b-3d-interleaved-512xh100"]) == pytest.approx(7 / 23)
    assert stated_bubble(rows["megatron-bridge-llama3-70b-fp8-64xh100"]) == pytest.approx(7 / (5 * 64 + 7))
    assert stated_bubble(rows["megatron-bridge-gpt-oss-120b-bf16-64xh100-2602"]) == 0  # VP not stated
