"""Inside the model (issue 14): the trace is the model's own forward pass — attention maps equal
reference_attention on the block's own q and k and reproduce its output, the logit lens at the
last block is the model's logits, RoPE's score depends only on the offset. The page that opens
it for every kind of recipe: tests/app/test_page_inside.py."""

import pytest
import torch
import torch.nn.functional as F

from llama_lab.config import PRESETS
from llama_lab.experiments import inside
from llama_lab.model import apply_rope, reference_attention

TEXT = "def f(x):\n    return x + 1  # one"


def traced(preset: str, **changes):
    cfg = inside.inside_config(PRESETS[preset]).replace(**changes)
    model = inside.inside_model(cfg, 0)
    ids = inside.text_tokens(TEXT, cfg)
    return model, ids, inside.trace(model, ids)


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset", ["seed-demo", "transformer-2017", "qwen3-8b", "mixtral-8x7b", "seed-demo-mha"]
)
def test_the_attention_maps_are_the_models_own(preset):
    model, ids, t = traced(preset)
    cfg, T = model.cfg, ids.shape[1]
    with torch.no_grad():  # block 0 by hand, from the embeddings
        x = model.model.embed_tokens(ids)
        if cfg.embed_scale:
            x = x * cfg.d_model**0.5
        if cfg.pos_encoding == "sinusoidal":
            x = x + model.model.position_tables.get(T, x.device)[0][:T]
        layer = model.model.layers[0]
        h = layer.input_layernorm(x) if layer.pre_norm else x
        attn = layer.self_attn
        B, H, G, D = 1, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        sd = attn.state_dict()  # the checkpoint's q_proj, k_proj, v_proj

        def proj(name):
            return F.linear(h, sd[f"{name}.weight"], sd.get(f"{name}.bias"))

        q = proj("q_proj").view(B, T, H, D)
        k = proj("k_proj").view(B, T, G, D)
        if cfg.qk_norm:
            q, k = attn.q_norm(q), attn.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = proj("v_proj").view(B, T, G, D).transpose(1, 2)
        if cfg.pos_encoding == "rope":
            cos, sin = model.model.position_tables.get(T, x.device)
            q, k = apply_rope(q, cos[:T], sin[:T]), apply_rope(k, cos[:T], sin[:T])
        _, weights = reference_attention(q, k, v, cfg.n_rep, attn.window)
    assert torch.allclose(t.layers[0].attention, weights[0], atol=1e-6)
    for layer in t.layers:
        w = layer.attention
        assert w.shape == (H, T, T)
        assert torch.allclose(w.sum(-1), torch.ones(H, T), atol=1e-5)  # rows sum to 1
        assert float(w.triu(1).abs().max()) == 0.0  # causal mask
        assert layer.max_attention_error < 1e-5  # o_proj(w·v) = output
    assert t.layers[0].kv_head_of == [h // cfg.n_rep for h in range(H)]


def test_a_sliding_window_layer_sees_only_its_window():
    model, ids, t = traced("mistral-7b")
    W = model.cfg.sliding_window
    assert W == inside.INSIDE_WINDOW and ids.shape[1] > W
    w = t.layers[0].attention[0]
    T = w.shape[0]
    outside = torch.tensor([[j <= i - W for j in range(T)] for i in range(T)])
    assert float(w[outside].abs().max()) == 0.0 and t.layers[0].window == W


@pytest.mark.parametrize("preset", ["seed-demo", "transformer-2017"])
def test_the_logit_lens_at_the_last_block_is_the_models_logits(preset):
    model, ids, t = traced(preset)
    with torch.no_grad():
        logits = model(ids)[0]
    assert torch.equal(t.lens_logits[-1], logits.float()) and torch.equal(t.logits, logits.float())
    top = logits[-1].softmax(-1).topk(5)
    assert [tok for tok, _ in t.final[-1]] == top.indices.tolist()
    assert len(t.lens_logits) == model.cfg.n_layers


def test_rope_scores_depend_only_on_the_offset_and_added_positions_do_not():
    model, ids, t = traced("seed-demo")
    r = t.rope
    assert r["max_spread"] < 1e-5 * r["score_scale"]
    own, other = t.positions["rope (this model's)"], t.positions["sinusoidal (for comparison)"]
    assert own["spread"] < 1e-5 * own["scale"] and other["spread"] > 1e-2 * other["scale"]
    # each pair turns by θ_i per position: the angle between positions m and m + 1 is θ_i
    for n, (_pair, (xs, ys)) in enumerate(r["trajectory"].items()):
        a0, a1 = (
            torch.atan2(torch.tensor(ys[0]), torch.tensor(xs[0])),
            torch.atan2(torch.tensor(ys[1]), torch.tensor(xs[1])),
        )
        turn = float((a1 - a0 + torch.pi) % (2 * torch.pi) - torch.pi)
        assert turn == pytest.approx(r["theta"][n], abs=1e-5)


def test_a_mixture_shows_the_routing_the_router_chose():
    model, ids, t = traced("mixtral-8x7b")
    block = model.model.layers[0]
    with torch.no_grad():
        x = model.model.embed_tokens(ids)
        chosen = block.mlp.route(
            block.post_attention_layernorm(
                x
                + block.self_attn(
                    block.input_layernorm(x),
                    tuple(p[: ids.shape[1]] for p in model.model.position_tables.get(ids.shape[1], x.device)),
                    None,
                )
            )[0]
        )[1]
    assert torch.equal(t.layers[0].experts, chosen)
    assert t.layers[0].experts.shape == (ids.shape[1], model.cfg.experts_per_token)


def test_the_gate_share_and_the_norm_effect_are_measured():
    model, ids, t = traced("seed-demo")
    with torch.no_grad():
        x = model.model.embed_tokens(ids)
        layer = model.model.layers[0]
        gate = F.linear(
            layer.post_attention_layernorm(
                x
                + layer.self_attn(
                    layer.input_layernorm(x),
                    tuple(p[: ids.shape[1]] for p in model.model.position_tables.get(ids.shape[1], x.device)),
                    None,
                )
            ),
            layer.mlp.state_dict()["gate_proj.weight"],
        )
    assert t.layers[0].gate_closed_share == pytest.approx(float((gate < 0).float().mean()))
    # RMSNorm with γ = 1: x / sqrt(ms + eps) has RMS sqrt(ms / (ms + eps)) per token
    ms = x[0].float().pow(2).mean(-1)
    expected = float((ms / (ms + model.cfg.norm_eps)).sqrt().mean())
    assert t.layers[0].norm_out["rms"] == pytest.approx(expected, rel=1e-5)
    _, _, post = traced("transformer-2017")
    assert post.layers[0].gate_closed_share is None
    assert post.layers[1].norm_out["std"] == pytest.approx(1.0, abs=1e-2)  # LayerNorm
    assert post.layers[1].norm_out["mean"] < 1e-5


@pytest.mark.parametrize("text,rule", [("", "at least one token"), ("x" * 97, "at most 96")])
def test_texts_the_model_cannot_read_are_refused(text, rule):
    with pytest.raises(ValueError, match=rule):
        inside.text_tokens(text, inside.inside_config(PRESETS["seed-demo"]))


@pytest.mark.slow
def test_the_typed_text_reaches_the_figures_as_text_not_markup():
    from llama_lab.figures import inside as figures

    cfg = inside.inside_config(PRESETS["seed-demo"])
    model = inside.inside_model(cfg, 0)
    t = inside.trace(model, inside.text_tokens("<b>x</b>&", cfg))
    title = figures.final_figure(t).layout.title.text
    assert "&lt;b&gt;x&lt;/b&gt;&amp;" in title and "<b>" not in title
    ticks = figures.attention_figure(t, 0).layout.xaxis.ticktext
    assert "&lt;" in ticks and "<" not in ticks


def test_quotes_in_the_text_are_shown_as_quotes_not_entities():
    from llama_lab.figures import inside as figures

    assert figures.token_label('"') == '"' and figures.token_label("'") == "'"
    assert figures.token_label("<") == "&lt;"  # markup stays escaped


def test_attention_map_ticks_stay_legible_at_the_longest_text():
    """At 96 positions a head's map is labelled every k-th position, at most 32 / heads per row
    labels an axis (at least 6); the hover still names every cell."""
    from llama_lab.figures import inside as figures

    cfg = inside.inside_config(PRESETS["seed-demo"])
    model = inside.inside_model(cfg, 0)
    t = inside.trace(model, inside.text_tokens("abcdefgh" * 12, cfg))
    axis = figures.attention_figure(t, 0).layout.xaxis
    assert len(axis.tickvals) <= max(6, 32 // min(figures.HEADS_PER_ROW, cfg.n_heads))
    assert axis.tickvals[0] == 0 and len(axis.tickvals) == len(axis.ticktext)
