"""The model's custom autograd Functions (llama_lab/model/kernels.py) against their plain
references: the same values and gradients, and fewer bytes kept for backward (measured with
saved-tensor hooks, against a hand count)."""

import pytest
import torch

from llama_lab.model import rms_norm, rms_norm_reference, swiglu, swiglu_reference
from llama_lab.model.kernels import gated, gated_reference


def saved_bytes(fn, *inputs, params=()) -> int:
    """Bytes of the distinct storages autograd keeps for backward of ``fn(*inputs, *params)``,
    the parameters' own excluded."""
    leaves = {t.untyped_storage().data_ptr() for t in params}
    kept: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in leaves:
            kept[ptr] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs, *params)
    return sum(kept.values())


def grads(fn, *inputs):
    out = fn(*inputs)
    upstream = torch.randn_like(out, generator=torch.Generator().manual_seed(1))
    return out, torch.autograd.grad(out, inputs, upstream)


@pytest.mark.parametrize("plus_one", [False, True], ids=["gamma", "one-plus-gamma"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_rms_norm_equals_the_reference_in_value_and_gradients(dtype, plus_one):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 48, generator=g).to(dtype).requires_grad_()
    w = (1 + 0.1 * torch.randn(48, generator=g)).to(dtype).requires_grad_()
    out, (dx, dw) = grads(lambda x, w: rms_norm(x, w, 1e-6, plus_one), x, w)
    ref, (rdx, rdw) = grads(lambda x, w: rms_norm_reference(x, w, 1e-6, plus_one), x, w)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out, ref, **tol)
    torch.testing.assert_close(dx, rdx, **tol)
    torch.testing.assert_close(dw, rdw, **tol)


def test_gemma_norm_is_transformers_gemma3_rms_norm():
    transformers = pytest.importorskip("transformers")
    norm = transformers.models.gemma3.modeling_gemma3.Gemma3RMSNorm(48, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_(0, 0.3)
    x = torch.randn(3, 48).to(torch.bfloat16)
    assert torch.equal(rms_norm(x, norm.weight.bfloat16(), 1e-6, plus_one=True), norm.bfloat16()(x))


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_gated_units_equal_the_reference_in_value_and_gradients(dtype, activation):
    gate_up = torch.randn(4, 7, 2 * 24, generator=torch.Generator().manual_seed(0)).to(dtype)
    gate_up.requires_grad_()
    out, (d,) = grads(lambda t: gated(t, activation), gate_up)
    ref, (rd,) = grads(lambda t: gated_reference(t, activation), gate_up)
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out, ref, **tol)
    torch.testing.assert_close(d, rd, **tol)


def test_the_kernels_keep_fewer_bytes_than_the_composite_by_hand():
    N, C, F = 6 * 5, 64, 96  # tokens, width, FFN width; float32: 4 bytes a value
    x = torch.randn(6, 5, C).requires_grad_()
    w = torch.ones(C, requires_grad=True)
    assert saved_bytes(lambda x, w: rms_norm(x, w, 1e-6), x, params=[w]) == 4 * (N * C + N)  # x, rstd
    # the composite keeps x, rstd and the normalised x (its x² input is x itself)
    assert saved_bytes(lambda x, w: rms_norm_reference(x, w, 1e-6), x, params=[w]) == 4 * (2 * N * C + N)
    gate_up = torch.randn(N, 2 * F).requires_grad_()
    assert saved_bytes(swiglu, gate_up) == 4 * N * 2 * F  # gate/up only
    assert saved_bytes(swiglu_reference, gate_up) == 4 * N * 3 * F  # gate/up and silu(gate)
    assert saved_bytes(lambda t: gated(t, "gelu_tanh"), gate_up) == 4 * N * 2 * F  # GeGLU the same


def test_without_autograd_the_kernels_are_the_formula():
    x, w = torch.randn(2, 8), torch.rand(8)
    with torch.no_grad():
        torch.testing.assert_close(rms_norm(x, w, 1e-5), rms_norm_reference(x, w, 1e-5))
        torch.testing.assert_close(swiglu(x), swiglu_reference(x))
