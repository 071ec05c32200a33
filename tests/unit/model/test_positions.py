"""RoPE's scalings, function by function, against transformers' ROPE_INIT_FUNCTIONS on the same
config (dynamic NTK past max_position_embeddings too, which no forward of the lab reaches)."""

import pytest
import torch

from llama_lab.config import ModelConfig
from llama_lab.model.positions import scaled_rope

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402

SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0},
    "llama3": {
        "rope_type": "llama3",
        "factor": 8.0,
        "original_max_position_embeddings": 64,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
    },
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 64},
    "yarn-deepseek": {
        "rope_type": "yarn",
        "factor": 40.0,
        "original_max_position_embeddings": 64,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
    },
    "yarn-no-truncate": {
        "rope_type": "yarn",
        "factor": 32.0,
        "original_max_position_embeddings": 64,
        "truncate": False,
    },
    "longrope": {
        "rope_type": "longrope",
        "original_max_position_embeddings": 64,
        "short_factor": [1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 4.0, 6.0],
        "long_factor": [1.0, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0, 30.0],
    },
}
MAX = 256  # max_position_embeddings


@pytest.mark.parametrize("seq_len", [32, 200, 1000])  # within the original context, past it, past MAX
@pytest.mark.parametrize("name", sorted(SCALINGS))
def test_each_scaling_is_transformers_rope_init_function(name, seq_len):
    scaling = SCALINGS[name]
    config = transformers.LlamaConfig(
        hidden_size=64,
        num_attention_heads=4,
        max_position_embeddings=MAX,
        rope_parameters={**scaling, "rope_theta": 10000.0},
    )
    theirs, their_scale = ROPE_INIT_FUNCTIONS[scaling["rope_type"]](config, "cpu", seq_len=seq_len)
    cfg = ModelConfig(d_model=64, n_heads=4, n_kv_heads=4, max_seq_len=MAX, rope_scaling=scaling)
    ours, our_scale = scaled_rope(cfg.rope_dim, cfg.rope_theta, cfg.rope_scaling, seq_len, MAX)
    torch.testing.assert_close(ours, theirs.float(), rtol=1e-6, atol=0)
    assert our_scale == pytest.approx(their_scale, rel=1e-12)
    if name == "dynamic":  # the base grows only past max_position_embeddings
        plain, _ = scaled_rope(cfg.rope_dim, cfg.rope_theta, None, seq_len, MAX)
        assert torch.equal(ours, plain) == (seq_len <= MAX)
