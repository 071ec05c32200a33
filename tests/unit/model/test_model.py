import itertools
import json
import math

import pytest
import torch
import torch.nn.functional as F

from llama_lab import model as model_mod
from llama_lab.config import PRESETS, PUBLISHED_PARAMS, ConfigError
from llama_lab.model import build_model, load_checkpoint, reference_attention


def n_params(m):
    return sum(p.numel() for p in m.parameters())


def tokens(cfg, B=2, T=16, seed=0):
    return torch.randint(0, cfg.vocab_size, (B, T), generator=torch.Generator().manual_seed(seed))


# ---- against transformers' LlamaForCausalLM ---------------------------------------------------
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["MHA", "GQA", "MQA"])
@pytest.mark.parametrize("extra", [{}, {"bias": True, "tie_embeddings": True}], ids=["plain", "bias-tied"])
def test_logits_equal_transformers(n_kv_heads, extra):
    transformers = pytest.importorskip("transformers")
    cfg = PRESETS["debug"].replace(n_kv_heads=n_kv_heads, rope_theta=500000.0, norm_eps=1e-5, **extra)
    ours = build_model(cfg, seed=1).eval()
    hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg.to_hf_config())).eval()
    # same key names both ways
    assert set(hf.state_dict()) == set(ours.state_dict())
    hf.load_state_dict(ours.state_dict(), strict=True)
    x = tokens(cfg, T=24)
    with torch.no_grad():
        torch.testing.assert_close(ours(x), hf(x).logits, rtol=1e-5, atol=1e-5)
    # and back: transformers' weights into ours
    other = build_model(cfg, seed=2)
    other.load_state_dict(hf.state_dict(), strict=True)
    with torch.no_grad():
        torch.testing.assert_close(other(x), hf(x).logits, rtol=1e-5, atol=1e-5)
    assert n_params(ours) == n_params(hf)


# ---- the seed's figures -----------------------------------------------------------------------
def test_seed_demo_parameter_counts():
    assert n_params(build_model(PRESETS["seed-demo"], device="meta")) == 43_780_608
    assert n_params(build_model(PRESETS["seed-demo-mha"], device="meta")) == 45_353_472
    assert 45_353_472 - 43_780_608 == 1_572_864


def test_seed_demo_initial_loss_near_ln_vocab():
    cfg = PRESETS["seed-demo"]
    m = build_model(cfg, seed=0)
    x = tokens(cfg, B=2, T=16)
    with torch.no_grad():
        logits = m(x)
    assert logits.shape == (2, 16, 32000)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, 32000), x[:, 1:].reshape(-1)).item()
    # Logits have std ≈ 0.02·√512 ≈ 0.45 at init, so E[loss] ≈ ln V + σ²/2 ≈ 10.47.
    assert abs(loss - math.log(32000)) < 0.3
    assert loss > math.log(32000) - 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_builds_on_meta(name):
    cfg = PRESETS[name]
    m = build_model(cfg, device="meta")
    assert all(p.is_meta for p in m.parameters())
    if name in PUBLISHED_PARAMS:
        assert n_params(m) == PUBLISHED_PARAMS[name]
    out = m(torch.zeros(1, 4, dtype=torch.long, device="meta"))
    # a bare encoder (BertModel: lm_head=False) returns its last hidden state
    assert out.shape == (1, 4, cfg.vocab_size if cfg.lm_head else cfg.d_model)


# ---- behaviour --------------------------------------------------------------------------------
@pytest.mark.parametrize("pos", ["rope", "sinusoidal", "learned", "none"])
@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_causal(pos, norm_position):
    cfg = PRESETS["debug"].replace(pos_encoding=pos, norm_position=norm_position)
    m = build_model(cfg).eval()
    x = tokens(cfg, T=20)
    y = x.clone()
    y[:, 12:] = (y[:, 12:] + 7) % cfg.vocab_size
    with torch.no_grad():
        a, b = m(x), m(y)
    torch.testing.assert_close(a[:, :12], b[:, :12])
    assert not torch.allclose(a[:, 12:], b[:, 12:])


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"n_kv_heads": 1},
        {"n_kv_heads": 4},
        {"pos_encoding": "learned"},
        {"pos_encoding": "sinusoidal", "norm_position": "post", "norm_type": "layernorm"},
        {"ffn_type": "gelu", "bias": True},
    ],
)
def test_kv_cache_decode_equals_full_forward(overrides):
    cfg = PRESETS["debug"].replace(**overrides)
    m = build_model(cfg).eval()
    x = tokens(cfg, B=3, T=30)
    with torch.no_grad():
        full = m(x)
        cache = m.new_cache(3, 30)
        parts = [m(x[:, :10], cache)]  # prefill
        for t in range(10, 20):  # one token at a time
            parts.append(m(x[:, t : t + 1], cache))
        parts.append(m(x[:, 20:], cache))  # a chunk after the cache
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-5, atol=1e-5)
    assert cache.length == 30
    assert cache.nbytes() == 2 * cfg.n_layers * 3 * 30 * cfg.n_kv_heads * cfg.head_dim * 4


@pytest.mark.parametrize("chunks", [[1] * 24, [5, 1, 1, 3, 1, 7, 1, 1, 2, 1, 1], [2, 9, 1, 12]])
def test_a_window_cache_is_a_ring_that_decodes_as_the_full_forward(chunks):
    """Window 4 on one layer: the ring wraps many times; chunks before and after it fills."""
    cfg = PRESETS["debug"].replace(sliding_window=4, local_layers="0")
    m = build_model(cfg).eval()
    x = tokens(cfg, B=2, T=sum(chunks))
    with torch.no_grad():
        full = m(x)
        cache, parts, at = m.new_cache(2, sum(chunks)), [], 0
        for n in chunks:
            parts.append(m(x[:, at : at + n], cache))
            at += n
    torch.testing.assert_close(torch.cat(parts, 1), full, rtol=1e-5, atol=1e-5)
    assert cache.k0.shape[2] == 4 and cache.held(0) == 4


class _Allocations(torch.utils._python_dispatch.TorchDispatchMode):
    """The operators that run, for the cache's update: views and in-place copies only."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("overrides", [{}, {"sliding_window": 4, "local_layers": "all"}])
def test_a_decode_step_allocates_nothing_in_the_cache(overrides):
    cfg = PRESETS["debug"].replace(**overrides)
    m = build_model(cfg).eval()
    cache = m.new_cache(2, 32)
    with torch.no_grad():
        m(tokens(cfg, B=2, T=9), cache)  # past the window: the ring wraps
        k = torch.randn(2, cfg.n_kv_heads, 1, cfg.head_dim)
        counter = _Allocations()
        with counter:
            for layer in range(cfg.n_layers):
                cache.update(layer, k, k)
    assert counter.ops <= {"slice", "copy_", "alias"}, counter.ops


def test_generate_matches_argmax_of_full_forward():
    cfg = PRESETS["debug"]
    m = build_model(cfg).eval()
    x = tokens(cfg, B=2, T=5)
    out = m.generate(x, 6)
    assert out.shape == (2, 11)
    with torch.no_grad():
        full = m(out[:, :-1])
    torch.testing.assert_close(full[:, 4:].argmax(-1), out[:, 5:])


def test_sequence_longer_than_max_refused():
    cfg = PRESETS["debug"]
    m = build_model(cfg)
    with pytest.raises(ValueError, match="exceeds max_seq_len=64"):
        m(torch.zeros(1, 65, dtype=torch.long))


COMBOS = list(
    itertools.product(
        ["pre", "post"],
        ["rmsnorm", "layernorm"],
        ["rope", "sinusoidal", "learned", "none"],
        ["swiglu", "relu", "gelu"],
    )
)


@pytest.mark.parametrize("i", range(len(COMBOS)))
def test_every_option_combination_runs_forward_backward(i):
    norm_position, norm_type, pos, ffn = COMBOS[i]
    # cycle the boolean and init options through the combinations so each value is covered
    bias, final_norm, tie, init = (i % 2 == 0), (i % 3 != 0), (i % 4 < 2), ("normal", "xavier")[i % 2]
    cfg = PRESETS["debug"].replace(
        norm_position=norm_position,
        norm_type=norm_type,
        pos_encoding=pos,
        ffn_type=ffn,
        bias=bias,
        final_norm=final_norm,
        tie_embeddings=tie,
        init=init,
        n_kv_heads=(1, 2, 4)[i % 3],
    )
    m = build_model(cfg)
    x = tokens(cfg, T=12)
    logits = m(x)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, cfg.vocab_size), x[:, 1:].reshape(-1))
    loss.backward()
    assert torch.isfinite(loss)
    grads = [p.grad for p in m.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert ("model.norm.weight" in m.state_dict()) == final_norm
    assert (m.lm_head.weight is m.model.embed_tokens.weight) == tie


def test_weights_reproducible_and_init_rules():
    cfg = PRESETS["debug"]
    a, b = build_model(cfg, seed=3), build_model(cfg, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    std = a.state_dict()["model.layers.0.mlp.up_proj.weight"].std().item()
    assert abs(std - 0.02) < 0.002
    xavier = build_model(cfg.replace(init="xavier"), seed=3).state_dict()
    for name in ("up_proj", "gate_proj"):  # each part of the fused gate/up its own Glorot
        x = xavier[f"model.layers.0.mlp.{name}.weight"]
        fan_in, fan_out = x.shape[1], x.shape[0]
        assert abs(x.std().item() - math.sqrt(2 / (fan_in + fan_out))) < 0.01
    x = xavier["model.layers.0.self_attn.k_proj.weight"]
    fan_in, fan_out = x.shape[1], x.shape[0]
    assert abs(x.std().item() - math.sqrt(2 / (fan_in + fan_out))) < 0.01


def test_rmsnorm_matches_definition():
    norm = model_mod.RMSNorm(8, 1e-6)
    x = torch.randn(3, 8)
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), expected)


def test_sinusoidal_table_matches_paper():
    pe = model_mod.sinusoidal_table(50, 16)
    p, i = 7, 3
    assert math.isclose(pe[p, 2 * i].item(), math.sin(p / 10000 ** (2 * i / 16)), rel_tol=1e-5)
    assert math.isclose(pe[p, 2 * i + 1].item(), math.cos(p / 10000 ** (2 * i / 16)), rel_tol=1e-5)


@pytest.mark.parametrize("n_rep", [1, 4])
def test_fused_attention_equals_reference_with_and_without_gqa(n_rep):
    q = torch.randn(2, 4, 9, 8)
    k = torch.randn(2, 4 // n_rep, 9, 8)
    v = torch.randn(2, 4 // n_rep, 9, 8)
    ref, weights = reference_attention(q, k, v, n_rep)
    torch.testing.assert_close(model_mod.causal_attention(q, k, v, n_rep), ref, rtol=1e-5, atol=1e-5)
    assert torch.all(weights.triu(1) == 0)


# ---- checkpoints ------------------------------------------------------------------------------
def save_checkpoint(folder, m, cfg, shards=1):
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg.to_hf_config()))
    state = {k: v.contiguous().clone() for k, v in m.state_dict().items()}
    if cfg.tie_embeddings:
        state.pop("lm_head.weight")
    if shards == 1:
        save_file(state, str(folder / "model.safetensors"))
        return
    keys = sorted(state)
    weight_map = {}
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: state[k] for k in keys[s::shards]}
        save_file(part, str(folder / name))
        weight_map.update({k: name for k in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


@pytest.mark.parametrize("shards,tie", [(1, False), (3, False), (2, True)])
def test_load_checkpoint_gives_same_logits(tmp_path, shards, tie):
    cfg = PRESETS["debug"].replace(tie_embeddings=tie, norm_eps=1e-5)
    m = build_model(cfg, seed=5).eval()
    save_checkpoint(tmp_path / "ckpt", m, cfg, shards)
    loaded = load_checkpoint(tmp_path / "ckpt")
    assert loaded.config == cfg and len(loaded.files) == shards
    x = tokens(cfg)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model.eval()(x), m(x))


def test_load_checkpoint_refuses_pickles_and_broken_files(tmp_path):
    cfg = PRESETS["debug"].replace(norm_eps=1e-5)
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg.to_hf_config()))
    (folder / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(ConfigError, match="pickle checkpoints are never loaded"):
        load_checkpoint(folder)
    (folder / "model.safetensors").write_bytes(b'\x10\x00\x00\x00\x00\x00\x00\x00{"a":')
    with pytest.raises(ConfigError, match="not a readable safetensors file"):
        load_checkpoint(folder)
    with pytest.raises(ConfigError, match="does not exist"):
        load_checkpoint(tmp_path / "missing")


def test_load_checkpoint_shape_mismatch(tmp_path):
    cfg = PRESETS["debug"].replace(norm_eps=1e-5)
    save_checkpoint(tmp_path / "c", build_model(cfg), cfg)
    (tmp_path / "c" / "config.json").write_text(json.dumps(cfg.replace(ffn_hidden=100).to_hf_config()))
    with pytest.raises(ConfigError, match="has shape"):
        load_checkpoint(tmp_path / "c")


def test_load_checkpoint_refuses_integer_weights_by_name(tmp_path):
    from safetensors.torch import save_file

    cfg = PRESETS["debug"]
    folder = tmp_path / "c"
    folder.mkdir()
    state = {k: torch.zeros(v.shape, dtype=torch.int32) for k, v in build_model(cfg).state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg.to_hf_config()))
    with pytest.raises(
        ConfigError, match=r"^tensor model\.embed_tokens\.weight is int32, not a float"
    ) as info:
        load_checkpoint(folder)
    assert "\n" not in str(info.value)


def test_build_model_rejects_non_config():
    with pytest.raises(TypeError):
        build_model({"d_model": 3})


def test_rope_frequencies_stay_float32_under_bf16():
    m = build_model(PRESETS["debug"], dtype=torch.bfloat16)
    freqs = m.model.position_tables.inv_freq
    assert freqs.dtype == torch.float32
    torch.testing.assert_close(freqs, model_mod.rope_inv_freq(16, 10000.0))


# ---- issue 9: position tables once, models built in their dtype, last-position prefill ----------
@pytest.mark.parametrize("pos_encoding", ["rope", "sinusoidal", "gemma3"])
def test_position_tables_are_built_once_for_a_whole_decode(pos_encoding, monkeypatch):
    from llama_lab.model import positions

    local_base = (
        dict(sliding_window=6, local_layers="0", rope_local_theta=500.0) if pos_encoding == "gemma3" else {}
    )
    cfg = PRESETS["debug"].replace(pos_encoding="rope" if local_base else pos_encoding, **local_base)
    model = build_model(cfg).eval()
    builds = []
    original = positions.PositionTables._build
    monkeypatch.setattr(
        positions.PositionTables,
        "_build",
        lambda self, n, *rest: builds.append(n) or original(self, n, *rest),
    )
    prompt = torch.randint(0, cfg.vocab_size, (2, 8))
    out = model.generate(prompt, max_new_tokens=20)
    # the cache's length, once, at prefill (Gemma 3: the windowed layers' own base, a second)
    assert builds == ([28, 28] if local_base else [28])
    # and the tokens are those of greedy decoding without a cache
    ids = prompt
    with torch.no_grad():
        for _ in range(20):
            ids = torch.cat([ids, model(ids)[:, -1:].argmax(-1)], dim=1)
    assert torch.equal(out, ids)


def test_position_tables_equal_the_per_call_formulas_and_stay_float32():
    from llama_lab.model.positions import PositionTables

    cfg = PRESETS["debug"]
    tables = PositionTables(cfg)
    cos, sin = tables.get(40, torch.device("cpu"))
    ref_cos, ref_sin = model_mod.rope_cos_sin(torch.arange(40), model_mod.rope_inv_freq(16, 10000.0))
    assert torch.equal(cos, ref_cos) and torch.equal(sin, ref_sin) and cos.dtype == torch.float32
    assert tables.get(10, torch.device("cpu"))[0] is cos  # shorter: the same tables
    assert tables.get(41, torch.device("cpu"))[0].shape[0] == 64  # longer: grown 2×, ≤ max_seq_len
    sinus = PositionTables(cfg.replace(pos_encoding="sinusoidal")).get(30, torch.device("cpu"))[0]
    assert torch.equal(sinus, model_mod.sinusoidal_table(30, cfg.d_model))


def test_a_bf16_model_is_built_in_bf16_not_cast_from_fp32():
    cfg = PRESETS["debug"].replace(vocab_size=4096)
    n = sum(p.numel() for p in build_model(cfg, device="meta").parameters())
    largest = cfg.vocab_size * cfg.d_model  # the embedding (and the head)
    from profiling import profiled_peak_bytes

    peak = profiled_peak_bytes(lambda: build_model(cfg, dtype=torch.bfloat16))
    # bf16 weights plus one float32 draw at a time; a build-then-cast would peak at 4n + 2n
    assert peak <= 2 * n + 4 * largest + 64 * 1024
    assert peak < 4 * n
    fp32 = build_model(cfg)
    bf16 = build_model(cfg, dtype=torch.bfloat16)
    for (name, a), b in zip(fp32.state_dict().items(), bf16.state_dict().values()):
        assert b.dtype == torch.bfloat16 and torch.equal(a.to(torch.bfloat16), b), name


def test_prefill_computes_only_the_last_positions_logits():
    cfg = PRESETS["debug"]
    model = build_model(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (3, 12))
    seen = []
    model.lm_head.register_forward_hook(lambda module, args, out: seen.append(tuple(out.shape)))
    model.generate(ids, max_new_tokens=3)
    assert seen == [(3, 1, cfg.vocab_size)] * 3  # prefill, then two one-token steps
    with torch.no_grad():
        last = model(ids, last_only=True)
        torch.testing.assert_close(last, model(ids)[:, -1:])  # one GEMM row vs T rows: ulps


def test_loss_is_transformers_next_token_cross_entropy():
    cfg = PRESETS["debug"]
    model = build_model(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 10))
    logits = model(ids)
    expected = torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, cfg.vocab_size), ids[:, 1:].reshape(-1)
    )
    torch.testing.assert_close(model.loss(ids), expected)


def test_tables_built_under_inference_mode_serve_a_later_training_step():
    model = build_model(PRESETS["debug"])
    ids = torch.randint(0, 256, (2, 16))
    with torch.inference_mode():
        model(ids)  # builds and caches the RoPE tables
    model.loss(ids).backward()  # saves them for backward: ordinary tensors
    assert model.lm_head.weight.grad is not None


# ---- the 2017 recipe's embeddings (Vaswani et al. 2017, §3.4) -----------------------------------
@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_embed_scale_multiplies_the_embeddings_by_sqrt_d(tie):
    """With embed_scale the block stack sees √d · E[x] (plus the positions): the same weights
    without the scale, their embedding multiplied by √d by hand, give the same block inputs;
    with the input/output embeddings tied as in the paper the head still reads E unscaled."""
    base = PRESETS["debug"].replace(pos_encoding="sinusoidal", tie_embeddings=tie)
    scaled = build_model(base.replace(embed_scale=True), seed=1)
    plain = build_model(base, seed=1)
    assert all(torch.equal(p, q) for p, q in zip(scaled.parameters(), plain.parameters()))
    x = tokens(base)
    seen = {}
    for name, m in (("scaled", scaled), ("plain", plain)):
        m.model.layers[0].register_forward_pre_hook(lambda mod, args, n=name: seen.__setitem__(n, args[0]))
    scaled(x)
    with torch.no_grad():
        plain.model.embed_tokens.weight.mul_(math.sqrt(base.d_model))
    plain(x)
    assert torch.allclose(seen["scaled"], seen["plain"], rtol=1e-6, atol=1e-6)
    assert (scaled.lm_head.weight is scaled.model.embed_tokens.weight) == tie
    loss = F.cross_entropy(scaled(x).reshape(-1, base.vocab_size), x.reshape(-1))
    loss.backward()
    assert torch.isfinite(loss) and scaled.model.embed_tokens.weight.grad is not None


def test_the_2017_preset_and_recipe_scale_their_embeddings_and_llama_does_not():
    from llama_lab.config import recipe_2017, recipe_llama

    assert PRESETS["transformer-2017"].embed_scale
    assert recipe_2017(PRESETS["seed-demo"]).embed_scale
    assert not recipe_llama(PRESETS["transformer-2017"]).embed_scale
    # beside the 2017 recipe only Gemma scales its embeddings (by √d, rounded to the dtype)
    scaled = {
        name for name in PRESETS if PRESETS[name].embed_scale and not name.startswith("transformer-2017")
    }
    assert scaled == {name for name in PRESETS if name.startswith("gemma")}
    # no transformers family scales LLaMA-style embeddings: exporting one is refused by name
    with pytest.raises(ConfigError, match="embed_scale=True"):
        PRESETS["seed-demo"].replace(embed_scale=True).to_hf_config()
    with pytest.raises(ConfigError, match="embed_scale='yes' must be true or false"):
        PRESETS["seed-demo"].replace(embed_scale="yes")
