"""An uploaded config.json that keeps some modules unconverted (Meta's Llama-3.1 "-FP8" files keep
attention in bf16): the sidebar's "weights stored as" says which, and the Inference systems page
counts them module by module and names their bytes."""

import json
from pathlib import Path

from apptest_helpers import errors, metrics
from streamlit.testing.v1 import AppTest

from llama_lab import analysis
from llama_lab.analysis import stored_weights
from llama_lab.analysis.quant import unconverted_bytes
from llama_lab.config import PRESETS
from llama_lab.config.files import parse_config_json, stored_quant_of
from llama_lab.units import human_bytes

ROOT = Path(__file__).resolve().parents[2]
KEPT = ["lm_head"] + [f"model.layers.{i}.self_attn" for i in range(2)]  # as the 405B file lists them
QC = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0, "modules_to_not_convert": KEPT}
TEXT = json.dumps({**PRESETS["debug"].to_hf_config(), "torch_dtype": "bfloat16", "quantization_config": QC})


def test_the_inference_page_names_the_unconverted_modules_and_their_bytes():
    at = AppTest.from_file(str(ROOT / "pages/8_Inference_systems.py"), default_timeout=240)
    at.run()
    at.sidebar.file_uploader[0].set_value(("config.json", TEXT.encode(), "application/json")).run()
    assert not at.exception and not errors(at), errors(at)
    cfg, _ = parse_config_json(TEXT)
    quant = stored_weights(stored_quant_of(TEXT))
    label = "fp8 rows (fbgemm), attention kept in bf16"
    assert str(quant) == label
    assert metrics(at)[f"weights at {label}"] == human_bytes(analysis.weight_bytes(cfg, quant))
    kept = 2 * 2 * (2 * 64 * 64 + 2 * 32 * 64)  # q, o 64×64 and k, v 32×64 in bf16, two blocks
    assert unconverted_bytes(cfg, quant) == kept
    captions = " ".join(c.value for c in at.caption)
    assert f"Weights stored as **{label}** ({human_bytes(kept)} of linear layers unconverted)" in captions
