"""Multimodal models counted whole (issue 41): LLaVA-1.5 (CLIP + the GELU MLP projector), Gemma 3
(SigLIP + its pooling projector), Qwen2.5-VL (its windowed ViT + patch merger), Llama 4 (its
tiled ViT + pixel-shuffle adapter), Qwen3.5 (its ViT + merger) and Mistral 3 (Pixtral + its patch
merger and MLP; tiny files only: no published config.json found) read from their
config.json into ModelConfig.vision; the parameters equal transformers' whole
...ForConditionalGeneration on the meta device (tiny and published files), the image tokens
equal a hand derivation and transformers' own image features, the encoder's FLOPs per image
equal FlopCounterMode over transformers' ``get_image_features``, and what is not modelled is
refused by name."""

import copy
import json
import warnings

import pytest
import torch
from hf_helpers import published

from llama_lab.analysis import count_params, count_params_module
from llama_lab.analysis.summary import analyze
from llama_lab.analysis.vision import image_tokens, parse_image_size, vision_flops
from llama_lab.cli import main
from llama_lab.config import PRESETS, PUBLISHED_ROUNDED, ConfigError, ModelConfig, read_hf_config
from llama_lab.errors import AnalysisError

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore", module="transformers")

TEXT = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
)
TINY = {
    "llava": dict(
        model_type="llava",
        text_config=dict(TEXT, model_type="llama"),
        vision_config=dict(
            model_type="clip_vision_model",
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=56,
            patch_size=14,
        ),
    ),
    "gemma3": dict(
        model_type="gemma3",
        text_config=dict(TEXT, model_type="gemma3_text", head_dim=16),
        vision_config=dict(
            model_type="siglip_vision_model",
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=56,
            patch_size=14,
            vision_use_head=False,
        ),
        mm_tokens_per_image=4,
    ),
    "qwen2_5_vl": dict(
        model_type="qwen2_5_vl",
        text_config=dict(TEXT, model_type="qwen2_5_vl_text"),
        vision_config=dict(
            depth=3,
            hidden_size=32,
            intermediate_size=48,
            num_heads=4,
            out_hidden_size=64,
            fullatt_block_indexes=[1],
            window_size=112,
        ),
    ),
    "mistral3": dict(
        model_type="mistral3",
        text_config=dict(TEXT, model_type="mistral"),
        vision_config=dict(
            model_type="pixtral",
            hidden_size=32,
            intermediate_size=48,
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=112,
            patch_size=14,
        ),
    ),
    "llama4": dict(
        model_type="llama4",
        text_config=dict(
            TEXT, model_type="llama4_text", head_dim=16, intermediate_size_mlp=128, num_local_experts=2
        ),
        vision_config=dict(
            model_type="llama4_vision_model",
            hidden_size=32,
            intermediate_size=128,  # the pixel shuffle's width: hidden_size / ratio²
            num_hidden_layers=2,
            num_attention_heads=4,
            image_size=56,
            patch_size=14,
            vision_output_dim=40,
            projector_input_dim=40,
            projector_output_dim=40,
        ),
    ),
    "qwen3_5": dict(
        model_type="qwen3_5",
        text_config=dict(
            TEXT,
            model_type="qwen3_5_text",
            num_hidden_layers=2,
            head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            full_attention_interval=2,
        ),
        vision_config=dict(
            depth=2,
            hidden_size=32,
            intermediate_size=48,
            num_heads=4,
            out_hidden_size=64,
            num_position_embeddings=16,
        ),
    ),
}
CLASSES = {
    "llava": "LlavaForConditionalGeneration",
    "gemma3": "Gemma3ForConditionalGeneration",
    "qwen2_5_vl": "Qwen2_5_VLForConditionalGeneration",
    "mistral3": "Mistral3ForConditionalGeneration",
    "llama4": "Llama4ForConditionalGeneration",
    "qwen3_5": "Qwen3_5ForConditionalGeneration",
    "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
}
# the published files (tests/families/published_configs, SOURCES.md) and their wrappers
FILES = {
    "llava-1.5-7b-hf": "llava",
    "gemma-3-27b-it": "gemma3",
    "qwen2.5-vl-7b-instruct": "qwen2_5_vl",
    "llama-4-scout-17b-16e": "llama4",
    "qwen3.5-0.8b-base": "qwen3_5",
    "qwen3.5-35b-a3b": "qwen3_5_moe",
}


def hf_model(data: dict, device: str = "meta"):
    config = transformers.AutoConfig.for_model(**copy.deepcopy(data))
    config._attn_implementation = "eager"
    with torch.device(device):
        return getattr(transformers, CLASSES[data["model_type"]])(config).eval()


def parts(model) -> tuple[int, int, int]:
    """(the whole module, the vision tower, the projector) as transformers holds them; Qwen2.5-VL's
    merger sits inside its visual module."""
    total = sum(p.numel() for p in model.parameters())
    if hasattr(model, "vision_model"):  # Llama 4: its adapter (in the vision model) and linear_1
        projector = sum(p.numel() for p in model.vision_model.vision_adapter.parameters())
        projector += sum(p.numel() for p in model.multi_modal_projector.parameters())
        adapter = sum(p.numel() for p in model.vision_model.vision_adapter.parameters())
        return total, sum(p.numel() for p in model.vision_model.parameters()) - adapter, projector
    inner = model.model
    if hasattr(inner, "visual"):
        projector = sum(p.numel() for p in inner.visual.merger.parameters())
        return total, sum(p.numel() for p in inner.visual.parameters()) - projector, projector
    tower = sum(p.numel() for p in inner.vision_tower.parameters())
    return total, tower, sum(p.numel() for p in inner.multi_modal_projector.parameters())


@pytest.mark.parametrize("kind", list(TINY))
def test_a_tiny_wrapper_is_counted_as_transformers_whole_module(kind):
    cfg, _ = read_hf_config(TINY[kind])
    total, tower, projector = parts(hf_model(TINY[kind]))
    counted = count_params(cfg)
    assert counted.total == total == count_params_module(cfg).total
    assert (counted.by_component["vision"], counted.by_component["projector"]) == (tower, projector)
    assert sum(counted.by_component.values()) == counted.total
    # the tower and projector are active: every image runs them whole
    assert counted.active - count_params(cfg.replace(vision=None)).active == tower + projector


@pytest.mark.parametrize("file", list(FILES))
def test_a_published_wrapper_is_counted_as_transformers_whole_module(file):
    data = published(file)
    cfg, notes = read_hf_config(data)
    assert not any("not counted" in note for note in notes)
    total, tower, projector = parts(hf_model(data))
    counted = count_params(cfg)
    assert counted.total == total
    assert (counted.by_component["vision"], counted.by_component["projector"]) == (tower, projector)
    if file == "qwen2.5-vl-7b-instruct":
        # the figure: the text decoder alone (Qwen2.5-7B's count) is 0.68 B short of the whole
        assert total - tower - projector == count_params(cfg.replace(vision=None)).total == 7_615_616_512
        assert tower + projector == 676_550_144 and round((tower + projector) / 1e9, 2) == 0.68
        top_level = {key: value for key, value in data.items() if key != "text_config"}
        assert read_hf_config(top_level)[0] == cfg  # the Hub's layout: text keys at the top level


def test_llava_1_5_preset_is_the_published_file_and_its_count():
    cfg, _ = read_hf_config(published("llava-1.5-7b-hf"))
    assert cfg == PRESETS["llava-1.5-7b"]
    counted = count_params(cfg)
    # by hand: Vicuna-7B 6,738,939,904 + CLIP ViT-L/14-336 303,507,456 + projector
    # 1024·4096 + 4096 + 4096² + 4096 = 20,979,712
    assert counted.by_component["projector"] == 1024 * 4096 + 4096 + 4096 * 4096 + 4096 == 20_979_712
    assert counted.total == 6_738_939_904 + 303_507_456 + 20_979_712 == 7_063_427_072
    total, _, _ = PUBLISHED_ROUNDED["llava-1.5-7b"]
    assert round(counted.total / 1e9, 2) == total / 1e9 == 7.06
    assert read_hf_config(cfg.to_hf_config())[0] == cfg  # written back as a llava wrapper


def test_image_tokens_by_hand():
    llava = PRESETS["llava-1.5-7b"].vision
    assert image_tokens(llava) == (336 // 14) ** 2 == 576  # 24² patches, the class token dropped
    gemma = read_hf_config(published("gemma-3-27b-it"))[0].vision
    assert image_tokens(gemma) == 256  # mm_tokens_per_image: 64×64 patches pooled 4×4
    qwen = read_hf_config(published("qwen2.5-vl-7b-instruct"))[0].vision
    assert image_tokens(qwen) == (448 // 14) * (448 // 14) // 4 == 256  # the default 448×448
    assert image_tokens(qwen, (448, 672)) == 32 * 48 // 4 == 384
    assert image_tokens(qwen, parse_image_size("1120x1680")) == 80 * 120 // 4 == 2400
    # Mistral Small 3.1's Pixtral (patch 14, merge 2, at most 1540 px a side): 55 rows of 55
    # merged patches, each row closed by [IMG_BREAK] ([IMG_END] last)
    pixtral = read_hf_config(
        {**TINY["mistral3"], "vision_config": {"model_type": "pixtral", "patch_size": 14, "image_size": 1540}}
    )[0].vision
    assert image_tokens(pixtral) == 55 * (55 + 1) == 3080
    assert image_tokens(pixtral, (1540, 784)) == 55 * (28 + 1)
    # Llama 4 Scout: 336-pixel tiles of (336/14)² / 2² = 144 tokens; one tile: markers + 144; a
    # 2 × 3 grid: its six tiles, 2·2 x- and 2 y-separators, the global tile, three markers
    # Qwen3.5: patches of 16, 2×2 merged: 256 tokens at the default 512×512
    qwen3_5 = read_hf_config(published("qwen3.5-0.8b-base"))[0].vision
    assert image_tokens(qwen3_5) == (512 // 16) ** 2 // 4 == 256
    assert image_tokens(qwen3_5, (448, 640)) == 28 * 40 // 4 == 280
    scout = read_hf_config(published("llama-4-scout-17b-16e"))[0].vision
    assert image_tokens(scout) == 144 + 3 == 147
    assert image_tokens(scout, (672, 1008)) == 6 * 144 + 2 * 2 + 2 + 144 + 3 == 1017


@pytest.mark.parametrize("kind", list(TINY))
def test_the_encoder_flops_and_tokens_equal_flop_counter_mode(kind):
    from torch.utils.flop_counter import FlopCounterMode

    cfg, _ = read_hf_config(TINY[kind])
    model = hf_model(TINY[kind], device="cpu")
    torch.manual_seed(0)
    dynamic = {
        "qwen2_5_vl": [(56, 56), (168, 280), (140, 84)],
        "mistral3": [(112, 112), (56, 84)],
        "llama4": [None, (112, 56)],
        "qwen3_5": [(64, 64), (96, 160)],
    }
    for size in dynamic.get(kind, [None]):
        if kind in ("qwen2_5_vl", "qwen3_5"):  # flattened patches of one image (two frames), its grid
            p = cfg.vision.patch_size
            rows, cols = size[0] // p, size[1] // p
            inputs = dict(
                pixel_values=torch.randn(rows * cols, 3 * 2 * p * p),
                image_grid_thw=torch.tensor([[1, rows, cols]]),
            )
        elif kind == "mistral3":  # one image at its own size
            inputs = dict(pixel_values=torch.randn(1, 3, *size), image_sizes=torch.tensor([size]))
        elif kind == "llama4":  # one image of 2 × 1 tiles: the two and the global one, each 56 px
            inputs = dict(pixel_values=torch.randn(3 if size else 1, 3, 56, 56))
        else:
            inputs = dict(pixel_values=torch.randn(1, 3, 56, 56))
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = getattr(model, "model", model).get_image_features(**inputs)
        features = out.pooler_output if hasattr(out, "pooler_output") else out
        features = features[0] if isinstance(features, (tuple, list)) else features
        assert counter.get_total_flops() == vision_flops(cfg.vision, size).total
        features = features.reshape(-1, 64).shape[0]
        if kind == "mistral3":  # each row of merged patches, then its [IMG_BREAK] / [IMG_END]
            features += size[0] // 28
        if kind == "llama4":  # <|image_start|>, <|image|>, <|image_end|>; tile separators (x: 0, y: 2)
            features += 3 + (2 if size else 0)
        assert features == image_tokens(cfg.vision, size)


def test_analyze_adds_the_images_tokens_and_the_encoders_flops():
    cfg = PRESETS["llava-1.5-7b"]
    plain = analyze(cfg, seq_len=100 + 2 * 576)
    with_images = analyze(cfg, seq_len=100, images=2)
    assert with_images["image_tokens"] == 576
    assert with_images["inputs"]["seq_len"] == 1252 and with_images["inputs"]["text_tokens"] == 100
    assert with_images["flops"]["forward"] == plain["flops"]["forward"]
    assert with_images["kv_cache"]["bytes"] == plain["kv_cache"]["bytes"]
    vision = with_images["vision"]
    assert vision["flops_all_images"] == 2 * vision["flops_per_image"]
    assert vision["prefill_with_images"] == plain["flops"]["forward"] + 2 * vision["flops_per_image"]
    # an image costs 576 tokens of cache: 32 layers × K and V × 4096 × 2 bytes each
    assert vision["kv_cache_bytes_per_image"] == 576 * 32 * 2 * 4096 * 2
    assert set(with_images["params"]["by_component"]) >= {"vision", "projector"}
    assert with_images["params"]["text_decoder"] == 6_738_939_904  # Vicuna-7B alone
    text_only = analyze(PRESETS["debug"], seq_len=16)
    assert "image_tokens" not in text_only and "vision" not in text_only["params"]["by_component"]


def test_analyze_cli_takes_images_and_an_image_size(capsys):
    code = main(["analyze", "--preset", "llava-1.5-7b", "--images", "1", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["image_tokens"] == 576 and result["inputs"]["seq_len"] == 2048 + 576
    code = main(["analyze", "--preset", "llava-1.5-7b", "--image-size", "448x448"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "resizes every image to 336x336" in err


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: analyze(PRESETS["debug"], seq_len=8, images=1), "no vision tower"),
        (lambda: analyze(PRESETS["llava-1.5-7b"], seq_len=8, images=-1), "images=-1"),
        (
            lambda: image_tokens(read_hf_config(TINY["qwen2_5_vl"])[0].vision, (100, 112)),
            "whole multiples of 28 pixels",
        ),
        (lambda: parse_image_size("big"), "must be HxW"),
    ],
)
def test_image_refusals(call, words):
    with pytest.raises(AnalysisError, match=words):
        call()


@pytest.mark.parametrize(
    "change, words",
    [
        (
            dict(vision_config=dict(TINY["llava"]["vision_config"], model_type="siglip_vision_model")),
            "LLaVA with its clip_vision_model tower only",
        ),
        (dict(projector_hidden_act="relu"), "projector_hidden_act='relu' is not modelled"),
        (dict(vision_feature_select_strategy="middle"), "'default' or 'full'"),
        (dict(vision_config=dict(TINY["llava"]["vision_config"], image_size=50)), "whole number of 14-pixel"),
        (dict(vision_config=dict(TINY["llava"]["vision_config"], num_attention_heads=5)), "not divisible"),
    ],
)
def test_llava_refusals_by_name(change, words):
    with pytest.raises(ConfigError, match=words):
        read_hf_config({**TINY["llava"], **change})


def test_the_vision_field_is_checked_and_round_trips():
    cfg = PRESETS["llava-1.5-7b"]
    assert ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert hash(cfg) == hash(ModelConfig.from_dict(cfg.to_dict()))
    assert cfg.replace(vision=None).vision is None
    with pytest.raises(ConfigError, match="out_size=4096 must equal d_model=512"):
        PRESETS["seed-demo"].replace(vision=cfg.vision)
    with pytest.raises(ConfigError, match="kind='vit' must be one of"):
        cfg.replace(vision={**cfg.vision.as_dict(), "kind": "vit"})
    with pytest.raises(ConfigError, match="unknown key"):
        cfg.replace(vision={**cfg.vision.as_dict(), "depth": 3})
    gemma = read_hf_config(TINY["gemma3"])[0]
    with pytest.raises(ConfigError, match="writes a LLaVA wrapper only"):
        gemma.to_hf_config()
    with pytest.raises(ConfigError, match="tokens_per_image=0 must be at least 1"):
        gemma.replace(vision={**gemma.vision.as_dict(), "tokens_per_image": 0})


def test_the_live_commands_run_the_text_decoder_and_say_so(capsys, tmp_path):
    tiny = read_hf_config(TINY["llava"])[0]
    path = tmp_path / "tiny_llava.json"
    path.write_text(json.dumps(tiny.to_dict()))
    code = main(["gradnorms", "--config", str(path), "--seq-len", "8", "--batch", "1", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and "the live model is the text decoder" in err
    assert len(json.loads(out)["pre"]["layer_grad_norm"]) == tiny.n_layers


@pytest.mark.parametrize(
    "command, surface",
    [
        (["predict", "decode", "--gpu", "h100-80gb"], "a parallel layout"),
        (["parallel", "--gpus", "8"], "a parallel layout"),
        (
            [
                "predict",
                "finetune",
                "--method",
                "lora",
                "--gpu",
                "h100-80gb",
                "--seq-len",
                "512",
                "--batch",
                "1",
            ],
            "fine-tuning",
        ),
    ],
)
def test_the_surfaces_that_model_the_text_decoder_alone_refuse_a_tower(capsys, command, surface):
    code = main([*command, "--preset", "llava-1.5-7b"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"{surface}" in err and "models the text decoder only" in err and "324,487,168 parameters" in err
    # its text decoder alone (vision=null) is answered
    assert main([*command, "--preset", "llava-1.5-7b", "--set", "vision=null", "--json"]) == 0
    capsys.readouterr()
