"""The sidebar config builder (llama_lab.ui): URL mirror, rules shown next to widgets, FFN
width rules, uploads and downloads — pure helpers directly, the widgets through AppTest."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from llama_lab import analysis, experiments, report, ui
from llama_lab.config import (
    PRESETS,
    ConfigError,
    ModelConfig,
    detect_ffn_rule,
    ffn_from_rule,
    live_config,
    small_training_config,
)
from llama_lab.config.grids import divisors
from llama_lab.errors import ExperimentError
from llama_lab.runtime import jobs
from llama_lab.train.budgets import CPU_FLOP_BUDGET, check_cpu_budget, guard
from llama_lab.ui import config_files, runs, state
from llama_lab.units import escape_markdown


def builder_script():
    import streamlit as st

    from llama_lab.ui import sidebar

    selection = sidebar.sidebar_config()
    if selection is None:
        st.markdown(f"INVALID: {sidebar.config_error()}")
    else:
        cfg = selection.cfg
        st.markdown(
            f"VALID d={cfg.d_model} heads={cfg.n_heads} kv={cfg.n_kv_heads} "
            f"ffn={cfg.ffn_hidden} norm={cfg.norm_type} seq={selection.seq_len} "
            f"batch={selection.batch} dtype={selection.dtype} preset={selection.preset}"
        )


def run_builder(query: dict | None = None) -> AppTest:
    at = AppTest.from_function(builder_script, default_timeout=60)
    at.query_params.update(query or {})
    at.run()
    assert not at.exception
    return at


def shown(at: AppTest) -> str:
    return at.markdown[-1].value


def widget(at: AppTest, kind: str, name: str):
    return getattr(at.sidebar, kind)(key=state.field_key(name) if "." not in name else name)


# ---- pure helpers -------------------------------------------------------------------------------
def test_query_holds_only_the_fields_that_differ_from_the_preset():
    cfg = PRESETS["llama-2-7b"].replace(n_kv_heads=8, norm_eps=1e-6, bias=True)
    query = state.query_for("llama-2-7b", cfg, 1024, 4, "fp16")
    assert query == {
        "preset": "llama-2-7b",
        "n_kv_heads": "8",
        "norm_eps": "1e-06",
        "bias": "true",
        "seq": "1024",
        "batch": "4",
        "dtype": "fp16",
    }


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_query_round_trips_every_preset_with_changes(preset):
    base = PRESETS[preset]
    cfg = base.replace(
        n_layers=base.n_layers + 1,
        tie_embeddings=not base.tie_embeddings and base.lm_head,  # (a bare encoder ties nothing)
        rope_theta=base.rope_theta * 2,
        init="xavier",
    )
    query = state.query_for(preset, cfg, 7, 3, "fp32")
    values, errors = state.values_from_query(query)
    assert errors == []
    assert state.config_from_values(values) == cfg
    assert (values[state.KEY_SEQ_LEN], values[state.KEY_BATCH], values[state.KEY_DTYPE]) == (7, 3, "fp32")


@pytest.mark.parametrize(
    "query,expected_error",
    [
        ({"preset": "gpt-5"}, "unknown preset 'gpt-5'"),
        ({"preset": "seed-demo", "n_kv_heads": "3"}, "n_heads=8 is not divisible by n_kv_heads=3"),
        ({"n_heads": "64", "d_model": "576"}, "head_dim=9"),
        ({"d_model": "abc"}, "d_model='abc' must be an integer"),
        ({"seq": "0"}, "seq=0 must be between 1 and 128"),
        ({"dtype": "fp64"}, "dtype='fp64' must be one of"),
        ({"weights": "int3"}, "weights='int3' must be one of fp32, bf16, fp16, fp8, int8, int4"),
        ({"kv": "nf4"}, "kv='nf4' must be one of"),
    ],
)
def test_bad_query_values_are_reported_and_fall_back(query, expected_error):
    values, errors = state.values_from_query(query)
    assert len(errors) == 1 and expected_error in errors[0]
    preset = query.get("preset") if query.get("preset") in PRESETS else state.DEFAULT_PRESET
    assert state.config_from_values(values) == PRESETS[preset]


def test_the_stored_formats_round_trip_and_only_appear_when_they_differ_from_dtype():
    cfg = PRESETS["seed-demo"]
    query = state.query_for("seed-demo", cfg, 128, 1, "bf16", weight_dtype="int4", kv_dtype="bf16")
    assert query["weights"] == "int4" and "kv" not in query
    values, errors = state.values_from_query(query)
    assert errors == [] and values[state.KEY_WEIGHT_DTYPE] == "int4"
    assert values[state.KEY_KV_DTYPE] == state.AS_DTYPE
    selection = state.Selection(cfg, 128, 1, "bf16", "seed-demo", weight_dtype="int4")
    assert (selection.weight_format, selection.kv_format) == ("int4", "bf16")
    # a link from before the formats were apart: dtype=int4 stored both, computing in bf16
    values, errors = state.values_from_query({"dtype": "int4", "kv": "fp8"})
    assert errors == [] and (
        values[state.KEY_DTYPE],
        values[state.KEY_WEIGHT_DTYPE],
        values[state.KEY_KV_DTYPE],
    ) == (
        "bf16",
        "int4",
        "fp8",
    )


def test_ffn_rule_is_detected_for_the_published_configs():
    assert detect_ffn_rule(PRESETS["seed-demo"]) == ("seed", 1, 0.0)  # ⌊8/3·512⌋
    assert detect_ffn_rule(PRESETS["llama-2-7b"]) == ("meta", 256, 0.0)  # 11008
    assert detect_ffn_rule(PRESETS["llama-3-8b"]) == ("meta", 1024, 1.3)  # 14336
    for name, cfg in PRESETS.items():  # whatever is detected reproduces the width
        rule, multiple_of, multiplier = detect_ffn_rule(cfg)
        if rule != "manual":
            assert ffn_from_rule(rule, cfg.d_model, multiple_of, multiplier or None) == cfg.ffn_hidden, name
    assert detect_ffn_rule(PRESETS["transformer-2017"]) == ("classic", 1, 0.0)
    assert detect_ffn_rule(PRESETS["seed-demo"].replace(ffn_hidden=1000))[0] == "manual"
    # the rules themselves: 8/3·768 = 2048; Meta: ⌈(2/3·4·768)/256⌉·256 = 2048; 4·768 = 3072
    assert ffn_from_rule("seed", 768, 1, None) == 2048
    assert ffn_from_rule("meta", 768, 256, None) == 2048
    assert ffn_from_rule("classic", 768, 1, None) == 3072
    assert ffn_from_rule("manual", 768, 1, None) is None


def test_kv_choices_are_the_divisors_of_n_heads_labelled_by_kind():
    assert divisors(12) == [1, 2, 3, 4, 6, 12]
    assert divisors(1) == [1]
    assert state.kv_label(8, 8).startswith("8 · MHA")
    assert state.kv_label(8, 2) == "2 · GQA (4 query heads per KV head)"
    assert state.kv_label(8, 1).startswith("1 · MQA")
    assert "does not divide" in state.kv_label(8, 3)


@pytest.mark.parametrize(
    "changes,field",
    [
        (dict(n_kv_heads=3), "n_heads"),
        (dict(n_heads=7), "d_model"),
        (dict(d_model=72), "n_heads"),  # head_dim 9, odd under RoPE
        (dict(norm_eps=2.0), "norm_eps"),
        (dict(ffn_hidden=0), "ffn_hidden"),
    ],
)
def test_errors_point_at_a_builder_field(changes, field):
    with pytest.raises(ConfigError) as info:
        ModelConfig(**{**ModelConfig().to_dict(), **changes})
    assert info.value.field is not None
    assert state.error_field(info.value) == field


def test_errors_are_shown_next_to_the_field_edited_last_when_the_rule_names_it():
    with pytest.raises(ConfigError) as info:
        ModelConfig(d_model=512, n_heads=7)
    assert info.value.fields == ("d_model", "n_heads")
    assert state.error_field(info.value) == "d_model"
    assert state.error_field(info.value, prefer="n_heads") == "n_heads"
    assert state.error_field(info.value, prefer="vocab_size") == "d_model"  # not tied in: blamed
    with pytest.raises(ConfigError) as info:
        ModelConfig(d_model=72, n_heads=8)  # head_dim 9, odd under RoPE
    assert state.error_field(info.value, prefer="pos_encoding") == "pos_encoding"
    assert state.error_field(info.value, prefer="d_model") == "d_model"
    assert state.error_field(ConfigError("something else entirely")) is None


def test_a_config_error_keeps_its_field_through_a_pickle():
    import pickle

    error = pickle.loads(pickle.dumps(ConfigError("n_layers=0 must be at least 1", field="n_layers")))
    assert str(error) == "n_layers=0 must be at least 1"
    assert (error.field, error.fields) == ("n_layers", ("n_layers",))


def sidebar_order(at: AppTest) -> list[str]:
    """Sidebar widget keys and error texts in the order drawn."""
    order = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if getattr(child, "type", None) == "error":
                order.append("ERROR")
            elif getattr(child, "key", None):
                order.append(child.key)
            walk(child)

    walk(at.sidebar)
    return order


def test_downloads_hold_both_configs_for_llama_and_explain_otherwise():
    downloads, refusal = config_files.config_downloads(PRESETS["llama-3-8b"])
    assert refusal is None and [d.file_name for d in downloads] == ["llama_lab_config.json", "config.json"]
    assert ModelConfig.from_dict(json.loads(downloads[0].data)) == PRESETS["llama-3-8b"]
    assert ModelConfig.from_hf_config(json.loads(downloads[1].data)) == PRESETS["llama-3-8b"]
    downloads, refusal = config_files.config_downloads(PRESETS["transformer-2017"])
    assert len(downloads) == 1 and "LLaMA-style" in refusal


# ---- the widgets --------------------------------------------------------------------------------
def test_default_view_is_the_seed_demo_and_is_mirrored_in_the_url():
    at = run_builder()
    assert shown(at) == (
        "VALID d=512 heads=8 kv=2 ffn=1365 norm=rmsnorm seq=128 batch=1 dtype=bf16 preset=seed-demo"
    )
    assert at.query_params == {"preset": "seed-demo", "seq": "128", "batch": "1", "dtype": "bf16"}
    stored = [at.sidebar.selectbox(key=key) for key in (state.KEY_WEIGHT_DTYPE, state.KEY_KV_DTYPE)]
    assert [box.value for box in stored] == [state.AS_DTYPE, state.AS_DTYPE]  # a choice, not a blank
    assert stored[0].format_func(state.AS_DTYPE) == "as dtype (bf16)"
    labels = widget(at, "selectbox", "n_kv_heads").options
    assert labels == [state.kv_label(8, kv) for kv in (1, 2, 4, 8)]


def test_d_model_follows_the_ffn_rule_and_the_url_follows_the_widgets():
    at = run_builder()
    widget(at, "number_input", "d_model").set_value(768).run()
    assert "d=768" in shown(at) and "ffn=2048" in shown(at)  # ⌊8/3·768⌋
    assert at.query_params["d_model"] == "768" and at.query_params["ffn_hidden"] == "2048"
    at.sidebar.radio(key=state.KEY_FFN_RULE).set_value("manual").run()
    widget(at, "number_input", "ffn_hidden").set_value(3000).run()
    assert "ffn=3000" in shown(at)
    assert "Edited from seed-demo: d_model, ffn_hidden" in [c.value for c in at.sidebar.caption]


def test_invalid_combination_shows_the_rule_next_to_the_widget():
    at = run_builder()
    widget(at, "number_input", "n_heads").set_value(7).run()
    assert shown(at).startswith("INVALID: d_model=512 is not divisible by n_heads=7")
    assert [e.value for e in at.sidebar.error] == [
        escape_markdown("d_model=512 is not divisible by n_heads=7")
    ]
    assert not at.exception
    order = sidebar_order(at)  # the rule sits right under the n_heads input
    assert order[order.index(state.field_key("n_heads")) + 1] == "ERROR"
    # a head count whose divisors exclude the current kv count keeps it, marked, with the rule
    widget(at, "number_input", "n_heads").set_value(16).run()
    assert "VALID" in shown(at)
    widget(at, "selectbox", "n_kv_heads").set_value(16).run()
    widget(at, "number_input", "n_heads").set_value(8).run()
    assert "INVALID: n_heads=8 is not divisible by n_kv_heads=16" in shown(at)
    assert "does not divide n_heads=8" in widget(at, "selectbox", "n_kv_heads").options[-1]


def test_odd_head_dim_with_rope_is_refused_until_positions_change():
    at = run_builder()
    widget(at, "number_input", "d_model").set_value(72).run()  # head_dim 9
    assert "INVALID: head_dim=9" in shown(at)
    assert any("must be even" in e.value for e in at.sidebar.error)
    widget(at, "selectbox", "pos_encoding").set_value("sinusoidal").run()
    assert "VALID d=72" in shown(at)


def test_sizes_out_of_range_are_refused_with_the_rule_not_clamped():
    at = run_builder()
    widget(at, "number_input", "d_model").set_value(262_144).run()
    assert not at.exception
    assert "INVALID: d_model=262144 exceeds the upper bound 131,072" in shown(at)
    widget(at, "number_input", "d_model").set_value(16).run()
    at.sidebar.number_input(key=state.KEY_FFN_MULTIPLE_OF).set_value(64).run()  # ⌊42.7/64⌋·64 = 0
    assert not at.exception
    assert "INVALID: ffn_hidden=0 must be at least 1" in shown(at)
    assert [e.value for e in at.sidebar.error] == [escape_markdown("ffn_hidden=0 must be at least 1")]


def test_link_reproduces_the_view_and_bad_links_fall_back_with_an_error():
    at = run_builder(
        {"preset": "llama-2-70b", "n_kv_heads": "64", "seq": "512", "batch": "8", "dtype": "fp16"}
    )
    assert (
        "d=8192 heads=64 kv=64 ffn=28672 norm=rmsnorm seq=512 batch=8 dtype=fp16 preset=llama-2-70b"
    ) in shown(at)
    at = run_builder({"preset": "llama-2-70b", "n_kv_heads": "3"})
    assert "kv=8" in shown(at) and "VALID" in shown(at)
    assert any(
        escape_markdown("n_heads=64 is not divisible by n_kv_heads=3") in e.value for e in at.sidebar.error
    )


def test_preset_change_loads_the_preset_and_keeps_the_workload():
    at = run_builder({"batch": "4"})
    at.sidebar.selectbox(key=state.KEY_PRESET).set_value("llama-3-8b").run()
    assert "VALID d=4096 heads=32 kv=8 ffn=14336 norm=rmsnorm seq=8192 batch=4" in shown(at)
    assert at.sidebar.radio(key=state.KEY_FFN_RULE).value == "meta"


def test_upload_of_an_hf_config_shows_its_notes_and_a_bad_one_its_error():
    at = run_builder()
    hf = {
        "model_type": "llama",
        "hidden_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "intermediate_size": 2816,
        "vocab_size": 1000,
        "max_position_embeddings": 256,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "attention_dropout": 0.1,
    }
    at.sidebar.file_uploader[0].set_value(("config.json", json.dumps(hf).encode(), "application/json")).run()
    assert "VALID d=1024 heads=16 kv=4 ffn=2816" in shown(at) and "seq=256" in shown(at)
    assert any(escape_markdown("attention_dropout") in w.value for w in at.sidebar.warning)
    # its RoPE scaling is the model's now (no note), and its link carries it as JSON
    assert at.query_params["rope_scaling"] == '{"rope_type":"linear","factor":2.0}'
    linked = run_builder(dict(at.query_params))
    scaling = linked.session_state[state.field_key("rope_scaling")]
    assert scaling.as_dict() == {"rope_type": "linear", "factor": 2.0}
    at.sidebar.file_uploader[0].set_value(("broken.json", b"{not json", "application/json")).run()
    assert any(escape_markdown("broken.json is not valid JSON") in e.value for e in at.sidebar.error)
    assert "VALID d=1024" in shown(at)  # the last good config stays
    ours = PRESETS["transformer-2017"].replace(n_layers=3)
    at.sidebar.file_uploader[0].set_value(
        ("mine.json", json.dumps(ours.to_dict()).encode(), "application/json")
    ).run()
    assert "VALID d=512 heads=8 kv=8 ffn=2048 norm=layernorm" in shown(at)
    assert at.query_params["n_layers"] == "3" and at.query_params["norm_position"] == "post"


def test_upload_of_each_family_builds_it_and_an_unsupported_one_is_refused_by_name():
    at = run_builder()
    mixtral = PRESETS["mixtral-8x7b"].to_hf_config()
    at.sidebar.file_uploader[0].set_value(
        ("config.json", json.dumps(mixtral).encode(), "application/json")
    ).run()
    assert "VALID d=4096 heads=32 kv=8 ffn=14336" in shown(at)
    assert at.sidebar.number_input(key=state.field_key("n_experts")).value == 8
    neox = {
        "model_type": "gpt_neox",
        "hidden_size": 512,
        "num_hidden_layers": 6,
        "num_attention_heads": 8,
        "intermediate_size": 2048,
        "vocab_size": 50304,
    }
    at.sidebar.file_uploader[0].set_value(
        ("pythia.json", json.dumps(neox).encode(), "application/json")
    ).run()
    assert not at.exception
    assert any(escape_markdown("model_type='gpt_neox' is not supported") in e.value for e in at.sidebar.error)
    assert "VALID d=4096" in shown(at)  # the last good config stays


def test_a_refused_upload_is_shown_at_the_top_of_the_page():
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "home.py"), default_timeout=60).run()
    gpt2 = {"model_type": "gpt2", "n_embd": 768}
    at.sidebar.file_uploader[0].set_value(("gpt2.json", json.dumps(gpt2).encode(), "application/json")).run()
    assert not at.exception
    refused = [e.value for e in at.main.error if "The uploaded file was refused" in e.value]
    assert refused and "gpt2" in refused[0] and "still the previous one" in refused[0]


def test_an_uploaded_multimodal_model_is_titled_as_its_text_decoder():
    at = AppTest.from_file(str(Path(__file__).resolve().parents[2] / "home.py"), default_timeout=60).run()
    # a wrapper LLaMA Lab does not count whole (LLaVA-NeXT's) is read as its text decoder
    text = {"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 8}
    wrapper = {"model_type": "llava_next", "_name_or_path": "org/Small-3", "text_config": text}
    at.sidebar.file_uploader[0].set_value(("config.json", json.dumps(wrapper).encode(), "application/json"))
    at.run()
    assert not at.exception
    assert any("the text decoder of " + escape_markdown("org/Small") in h.value for h in at.subheader)
    assert any("vision tower" in w.value for w in at.sidebar.warning)


def test_an_upload_error_names_the_file_once():
    at = run_builder()
    at.sidebar.file_uploader[0].set_value(("theta.json", b'{"rope_theta": 1e400}', "application/json")).run()
    (message,) = [e.value for e in at.sidebar.error if "theta" in e.value]
    assert message.count(escape_markdown("theta.json")) == 1 and "rope" in message, message


def test_download_buttons_hand_over_the_config_files(monkeypatch):
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    stored = []
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        stored.append((filename, path_or_data))
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    at = run_builder({"preset": "llama-2-7b"})
    assert [b.label for b in at.sidebar.download_button] == ["Config (LLaMA Lab JSON)", "HF config.json"]
    files = dict(stored)
    assert ModelConfig.from_dict(json.loads(files["llama_lab_config.json"])) == PRESETS["llama-2-7b"]
    assert json.loads(files["config.json"])["intermediate_size"] == 11008
    stored.clear()
    at = run_builder({"preset": "transformer-2017"})
    assert [name for name, _ in stored] == ["llama_lab_config.json"]
    assert any("No HF config.json" in c.value for c in at.sidebar.caption)


# ---- pages, experiment keys, live runs ----------------------------------------------------------
def test_every_page_file_is_registered_once_in_file_order():
    root = Path(__file__).resolve().parents[2]
    on_disk = [
        str(p.relative_to(root))
        for p in sorted(  # by number: 1, 2, …, 9, 10
            (root / "pages").glob("*.py"), key=lambda p: int(p.name.split("_")[0])
        )
    ]
    assert [page.path for page in ui.PAGES] == on_disk
    assert (root / ui.HOME_PAGE).is_file() and ui.HOME_PAGE not in on_disk


def test_experiment_keys_are_the_reports_and_every_kind_has_a_panel():
    assert state.EXPERIMENT_KEYS == {kind: report.experiment_state_key(kind) for kind in experiments.KINDS}
    assert len(set(state.EXPERIMENT_KEYS.values())) == 13
    assert (
        state.KEY_GRADNORMS,
        state.KEY_DEPTH_SWEEP,
        state.KEY_TRAINING,
        state.EXPERIMENT_KEYS["warmup"],
        state.KEY_ABLATION,
        state.KEY_LIVE_PASS,
        state.KEY_DECODE,
        state.EXPERIMENT_KEYS["quantize"],
        state.EXPERIMENT_KEYS["flash"],
        state.EXPERIMENT_KEYS["speculative"],
        state.EXPERIMENT_KEYS["distill"],
        state.EXPERIMENT_KEYS["shard"],
        state.EXPERIMENT_KEYS["finetune"],
    ) == tuple(state.EXPERIMENT_KEYS.values())
    import importlib

    for kind in experiments.KINDS.values():  # each kind's panel draws it
        assert callable(importlib.import_module(f"llama_lab.ui.panels.{kind.panel}").show)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_live_config_at_the_training_shape_is_claims_small_training_config(preset):
    small = small_training_config(PRESETS[preset])
    assert live_config(PRESETS[preset], n_layers=4) == small
    wide = live_config(PRESETS[preset], n_layers=2, d_model=128, seq_len=512)
    # a layer list is fitted to the copy's depth (gpt-oss's "0,2" on 4 blocks, "0" on 2)
    layer_sets = {
        name: getattr(small, name)
        for name in ("local_layers", "moe_layers", "nope_layers", "linear_layers", "attn_temperature_layers")
    }
    assert (wide.d_model, wide.n_layers, wide.max_seq_len, wide.vocab_size) == (128, 2, 512, 256)
    # MLA: its widths (latent, RoPE key, heads) follow d too
    mla = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "v_head_dim")
    assert (
        wide.replace(
            d_model=64,
            n_layers=4,
            ffn_hidden=small.ffn_hidden,
            expert_ffn_hidden=small.expert_ffn_hidden if small.is_moe else None,
            max_seq_len=64,
            # an explicit head_dim (GQA heads that do not divide d: llama-3.2-3b's 3 per KV head
            # as 6 heads) is the copy's own at each width
            head_dim=small.head_dim if small.d_model % small.n_heads or small.is_mla else None,
            # a score scale of its own (Gemma 3 27B's) keeps its ratio to head_dim at each width
            query_pre_attn_scalar=small.query_pre_attn_scalar,
            # a partial RoPE keeps an even rotated part at each width (Phi-4-mini, GLM-4.5)
            partial_rotary_factor=small.partial_rotary_factor,
            # LongRoPE keeps a factor per rotated pair at each width (Phi-4-mini)
            rope_scaling=small.rope_scaling,
            **({name: getattr(small, name) for name in mla} if small.is_mla else {}),
            # Gated DeltaNet heads of d / 4 (Qwen3-Next, Qwen3.5)
            linear_k_head_dim=small.linear_k_head_dim,
            linear_v_head_dim=small.linear_v_head_dim,
            **layer_sets,
        )
        == small
    )  # only the sizes changed


def test_live_config_ffn_follows_the_recipes_rule():
    # SwiGLU: ⌊8/3 · 128⌋ = 341; the 2017 ReLU FFN keeps its ratio 2048/512 = 4: 4 · 128 = 512
    assert live_config(PRESETS["seed-demo"], 2, d_model=128).ffn_hidden == 341
    assert live_config(PRESETS["transformer-2017"], 2, d_model=128).ffn_hidden == 512


def test_cpu_budget_refuses_above_three_tflop_with_the_hint():
    check_cpu_budget(3e12, "cpu", "this run", "go smaller")  # at the limit: runs
    with pytest.raises(
        ExperimentError,
        match=r"^this run needs about 3\.1 TFLOP; live runs on the CPU are "
        r"limited to 3 TFLOP \(about a minute\); go smaller$",
    ):
        check_cpu_budget(3.1e12, "cpu", "this run", "go smaller")


def test_guard_counts_passes_of_training_step_flops():
    cfg = PRESETS["debug"]
    # debug at B=1, T=16: count_flops' training step is 3 × forward; the budget allows
    # ⌊3e12 / step⌋ passes and refuses one more
    step = analysis.count_flops(cfg, 16, 1).training_step
    allowed = int(CPU_FLOP_BUDGET // step)
    guard(cfg, 16, 1, "cpu", passes=allowed, what="w", hint="h")
    with pytest.raises(ExperimentError, match="limited to 3 TFLOP"):
        guard(cfg, 16, 1, "cpu", passes=allowed + 1, what="w", hint="h")


def test_is_stale_compares_the_config_and_the_given_settings_only():
    cfg = PRESETS["debug"]
    entry = report.ExperimentEntry("gradnorms", None, cfg, {"seq_len": 16, "data": "x"})
    assert not runs.is_stale(entry, cfg, {"seq_len": 16})
    assert runs.is_stale(entry, cfg, {"seq_len": 32})
    assert runs.is_stale(entry, cfg.replace(n_layers=3), {"seq_len": 16})
    assert runs.is_stale(entry, cfg, {"batch": 2})  # a setting it did not record


def run_script():
    import streamlit as st

    from llama_lab.errors import ExperimentError
    from llama_lab.runtime import jobs
    from llama_lab.ui import runs

    def work(progress):
        progress(0.5, "half way")
        if st.session_state.get("refuse"):
            raise ExperimentError("too big, says the guard")
        return jobs.LIMITER.running  # runs held while the work runs

    st.markdown(f"RESULT {runs.run_with_status('Test run', work)}")


def test_run_with_status_holds_the_job_slot_and_shows_refusals():
    at = AppTest.from_function(run_script, default_timeout=30)
    at.run()
    assert not at.exception and at.markdown[-1].value == "RESULT 1"
    assert at.status[0].proto.label == "Test run: done" and not at.error
    at.session_state["refuse"] = True
    at.run()
    assert at.markdown[-1].value == "RESULT None"
    assert at.status[0].proto.label == "Test run: refused"
    # the reason is shown at once, escaped, below the (collapsed) status, not inside it
    assert [e.value for e in at.error] == [
        f"**Test run refused:** {escape_markdown('too big, says the guard')}"
    ]
    assert not at.status[0].error
    assert jobs.LIMITER.running == 0  # released after a refusal


def test_run_with_status_waits_for_the_slot_and_says_so_when_it_gives_up(monkeypatch):
    import threading

    class ShortWait(jobs.JobLimiter):
        def slot(self, on_wait=None, max_wait_s=jobs.MAX_WAIT_S, poll_s=0.25):
            return super().slot(on_wait, max_wait_s=0.2, poll_s=0.05)

    limiter, held, done = ShortWait(1), threading.Event(), threading.Event()
    monkeypatch.setattr(jobs, "LIMITER", limiter)

    def other_run():
        with limiter.slot():
            held.set()
            done.wait(30)

    thread = threading.Thread(target=other_run)
    thread.start()
    try:
        held.wait(10)
        at = AppTest.from_function(run_script, default_timeout=30)
        at.run()
    finally:
        done.set()
        thread.join()
    assert not at.exception and at.markdown[-1].value == "RESULT None"
    assert any("another run has held the machine" in e.value for e in at.error)
    assert limiter.running == 0 and limiter.waiting == 0
