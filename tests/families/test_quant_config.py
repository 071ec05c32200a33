"""quantization_config read as the weights' stored format (config.hf.quant.stored_quant) and counted
tensor by tensor (analysis.quant.stored_weights): GPTQ and bitsandbytes derived here by hand from
the shapes their own code registers, two published GPTQ checkpoints matched to the byte against
their file sizes, and every unmodelled value refused by name in one line.

Sources of the per-module shapes (read, not remembered; see ``stored_weights``' docstring):
GPTQ — AutoGPTQ ``auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py`` / ``qlinear_exllama.py``
``QuantLinear.__init__`` and GPTQModel ``gptqmodel/nn_modules/qlinear/__init__.py``
``GPTQQuantLinear._register_gptq_buffers`` (qweight, qzeros, scales, g_idx, bias) and
``pack_block`` (g_idx registered for every layer, scales and bias cast to float16);
bitsandbytes — ``functional.py`` ``QuantState.as_dict(packed=True)`` and ``quantize_4bit``,
``_ops.py`` (the shapes), ``nn/modules.py`` ``Linear4bit._save_to_state_dict`` and
``Linear8bitLt._save_to_state_dict``, ``utils.pack_dict_to_tensor``.
"""

import json
import math

import pytest
from hf_helpers import GPTQ, QWEN2_SMALL

from llama_lab import analysis
from llama_lab.analysis import AnalysisError, TensorGroup, stored_weights, weights_bytes
from llama_lab.config import PRESETS, ConfigError, read_hf_config
from llama_lab.config.files import stored_quant_of
from llama_lab.config.hf.quant import StoredQuant, stored_quant

# ---- hand derivations, one linear module of K inputs and N outputs --------------------------------


def gptq_module(K: int, N: int, bits: int, group: int) -> int:
    """qweight int32 (K // 32 · bits, N) + qzeros int32 (⌈K/g⌉, N // 32 · bits) + scales fp16
    (⌈K/g⌉, N) + g_idx int32 (K,); g = K for group_size -1."""
    g = K if group == -1 else group
    groups = math.ceil(K / g)
    return (K // 32 * bits) * N * 4 + groups * (N // 32 * bits) * 4 + groups * N * 2 + K * 4


def bnb4_module(K: int, N: int, kind: str, dtype: str, storage: int = 1, double: bool = False) -> int:
    """weight ((n+1) // (2·itemsize), 1) of quant_storage; absmax float32 per 64 values (double
    quant: uint8, plus nested_absmax float32 per 256 of them and the 256-value float32
    nested_quant_map); quant_map float32 (16,); the quant_state JSON, one uint8 per character."""
    n = N * K
    blocks = math.ceil(n / 64)
    state = {"quant_type": kind, "blocksize": 64, "dtype": dtype, "shape": [N, K]}
    if double:
        state.update({"nested_blocksize": 256, "nested_dtype": "float32"})
        # nested_offset: a float32 mean of the absmax; its repr's length depends on the weights.
        # APPROXIMATE: LLaMA Lab assumes 19 characters (the usual length for an offset in
        # [0.01, 0.1)); a real file differs by a few bytes per module
        blob = len(json.dumps({**state, "nested_offset": 0.0})) - 3 + 19
        stats = blocks + math.ceil(blocks / 256) * 4 + 256 * 4
    else:
        blob = len(json.dumps(state))
        stats = blocks * 4
    return (n + 1) // (2 * storage) * storage + stats + 16 * 4 + blob


def bnb8_module(K: int, N: int) -> int:
    """weight int8 (N, K) + SCB float32 (N,) + weight_format uint8 (a 0-d tensor)."""
    return N * K + N * 4 + 1


def counted(data: dict) -> int:
    cfg, _ = read_hf_config(data)
    return analysis.weight_bytes(cfg, stored_weights(stored_quant(data)))


def qwen2_small_gptq(bits: int, group: int, lm_head: bool) -> int:
    C, F, V, L, D = 256, 512, 1000, 2, 64
    q, kv = 4 * D, 2 * D
    linears = [(C, q), (C, kv), (C, kv), (q, C), (C, F), (C, F), (F, C)]  # q k v o gate up down
    block = sum(gptq_module(K, N, bits, group) for K, N in linears)
    block += (q + 2 * kv) * 2 + 2 * C * 2  # q/k/v biases fp16 (QuantLinear's), two norms fp16
    head = gptq_module(C, V, bits, group) if lm_head else V * C * 2
    return L * block + V * C * 2 + C * 2 + head  # fp16 embeddings, final norm, the head


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"bits": 8},
        {"group_size": 32},
        {"group_size": -1},
        {"desc_act": True},  # act-order: the same tensors (g_idx is stored either way)
        {"sym": False},  # asymmetric: the same tensors (qzeros are stored either way)
        {"checkpoint_format": "gptq_v2"},  # v2: the zeros without v1's -1 offset, the same bytes
        {"format": "gptq", "lm_head": True},  # GPTQModel's key names; the head quantised too
    ],
)
def test_gptq_is_counted_tensor_by_tensor(extra):
    qc = {**GPTQ, **extra}
    expected = qwen2_small_gptq(qc["bits"], qc["group_size"], qc.get("lm_head", False))
    assert counted({**QWEN2_SMALL, "quantization_config": qc}) == expected


def test_gptq_g_idx_and_the_tensor_bytes_keys():
    data = {**QWEN2_SMALL, "quantization_config": GPTQ}
    cfg, _ = read_hf_config(data)
    stored = weights_bytes(cfg, stored_weights(stored_quant(data)))
    inputs_per_block = 256 * 6 + 512  # q k v o gate up read d_model (o: H·D = 256); down reads F
    assert stored.other == 2 * inputs_per_block * 4  # g_idx int32, one per input of every module
    quant = stored_weights(stored_quant(data))
    parts = quant.tensor_bytes(TensorGroup("down_proj", "linear", 2, 256, 512))
    assert parts == {
        "data": 2 * (512 // 32 * 4) * 256 * 4,
        "scales": 2 * 4 * 256 * 2,
        "zero_points": 2 * 4 * (256 // 32 * 4) * 4,
        "other": 2 * 512 * 4,
    }
    assert quant.stored_as("bias") == "fp16" and quant.to_dict()["layout"] == "gptq"


def test_gptq_counts_every_expert_of_a_mixture_and_keeps_the_router():
    """A GPTQModel checkpoint of Qwen3-30B-A3B: its config.json as posted verbatim in a GPTQModel
    GitHub issue (find_string id 69846854025; a third-party quantisation, no size published).
    Each expert is three linear modules (gate, up, down); the router stays fp16."""
    data = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "decoder_sparse_step": 1,
        "eos_token_id": 151645,
        "head_dim": 128,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "initializer_range": 0.02,
        "intermediate_size": 6144,
        "max_position_embeddings": 40960,
        "max_window_layers": 48,
        "mlp_only_layers": [],
        "model_type": "qwen3_moe",
        "moe_intermediate_size": 768,
        "norm_topk_prob": True,
        "num_attention_heads": 32,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 48,
        "num_key_value_heads": 4,
        "output_router_logits": False,
        "quantization_config": {
            "bits": 4,
            "checkpoint_format": "gptq",
            "damp_percent": 0.01,
            "desc_act": False,
            "group_size": 128,
            "model_file_base_name": None,
            "model_name_or_path": None,
            "quant_method": "gptq",
            "static_groups": False,
            "sym": True,
            "true_sequential": True,
        },
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.001,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "transformers_version": "4.51.3",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    }
    C, L, H, G, D, E, Fe, V = 2048, 48, 32, 4, 128, 128, 768, 151936
    attention = [(C, H * D), (C, G * D), (C, G * D), (H * D, C)]
    experts = [(C, Fe), (C, Fe), (Fe, C)]
    block = sum(gptq_module(K, N, 4, 128) for K, N in attention)
    block += E * sum(gptq_module(K, N, 4, 128) for K, N in experts)
    block += E * C * 2 + 2 * C * 2 + 2 * D * 2  # router fp16, two norms, q_norm and k_norm
    assert counted(data) == L * block + 2 * V * C * 2 + C * 2


# ---- two published GPTQ checkpoints, to the byte -----------------------------------------------
# Qwen/Qwen2.5-Coder-{1.5B,3B}-Instruct-GPTQ-Int4, from a third-party write-up that fetched them
# (find_string id 63241653895): its quantization_config verbatim (from the 1.5B's config.json; the
# 3B's "byte-identical in every field that matters"), "torch_dtype": "float16", the dense
# Qwen2ForCausalLM shapes (28 layers, hidden 1536, intermediate 8960, GQA 12/2; 36 layers, 2048,
# 11008, 16/2), the Hub API's parameter counts (I32, F16) and the one model.safetensors' size.
# vocab_size 151936 and tied embeddings are not in that text: the F16 count pins them (it is the
# embedding table, the norms and the q/k/v biases exactly, and no head). Other keys take Qwen2Config's
# defaults; none of them changes a stored tensor.
QWEN_GPTQ_CONFIG = {
    "batch_size": 1,
    "bits": 4,
    "block_name_to_quantize": None,
    "cache_block_outputs": True,
    "damp_percent": 0.01,
    "dataset": None,
    "desc_act": False,
    "exllama_config": {"version": 1},
    "group_size": 128,
    "max_input_length": None,
    "model_seqlen": None,
    "module_name_preceding_first_block": None,
    "modules_in_block_to_quantize": None,
    "pad_token_id": None,
    "quant_method": "gptq",
    "sym": True,
    "tokenizer": None,
    "true_sequential": True,
    "use_cuda_fp16": False,
    "use_exllama": True,
}
PUBLISHED_GPTQ = {
    # name: ((layers, hidden, intermediate, heads, kv heads), (I32, F16 parameters, file bytes))
    "Qwen2.5-Coder-1.5B-Instruct-GPTQ-Int4": (
        (28, 1536, 8960, 12, 2),
        (1_310_195_712, 233_518_592, 1_149_862_960),
    ),
    "Qwen2.5-Coder-3B-Instruct-GPTQ-Int4": (
        (36, 2048, 11008, 16, 2),
        (2_774_532_096, 311_406_592, 2_067_756_448),
    ),
}


def _qwen_gptq_tensors(L: int, C: int, F: int, H: int, G: int, V: int = 151936) -> dict:
    """Every tensor such a checkpoint holds, by its name: safetensors dtype and shape."""
    D = C // H
    tensors = {"model.embed_tokens.weight": ("F16", [V, C]), "model.norm.weight": ("F16", [C])}
    modules = {
        "self_attn.q_proj": (C, H * D, True),
        "self_attn.k_proj": (C, G * D, True),
        "self_attn.v_proj": (C, G * D, True),
        "self_attn.o_proj": (H * D, C, False),
        "mlp.gate_proj": (C, F, False),
        "mlp.up_proj": (C, F, False),
        "mlp.down_proj": (F, C, False),
    }
    for i in range(L):
        layer = f"model.layers.{i}."
        tensors[layer + "input_layernorm.weight"] = ("F16", [C])
        tensors[layer + "post_attention_layernorm.weight"] = ("F16", [C])
        for name, (K, N, bias) in modules.items():
            groups = math.ceil(K / 128)
            tensors[f"{layer}{name}.qweight"] = ("I32", [K // 32 * 4, N])
            tensors[f"{layer}{name}.qzeros"] = ("I32", [groups, N // 32 * 4])
            tensors[f"{layer}{name}.scales"] = ("F16", [groups, N])
            tensors[f"{layer}{name}.g_idx"] = ("I32", [K])
            if bias:
                tensors[f"{layer}{name}.bias"] = ("F16", [N])
    return tensors


def _safetensors_file_bytes(tensors: dict) -> int:
    """The file safetensors writes: 8 bytes of header length, the JSON header (compact, padded
    with spaces to a multiple of 8; metadata {"format": "pt"}), then the data in its order (by
    dtype alignment, I32 before F16, then by name: checked against the installed safetensors in
    ``test_the_safetensors_header_rule_is_the_installed_libraries``)."""
    size = {"F16": 2, "I32": 4}
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name in sorted(tensors, key=lambda name: (tensors[name][0] != "I32", name)):
        dtype, shape = tensors[name]
        n = size[dtype] * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":"))
    return 8 + len(text) + (-len(text)) % 8 + offset


def test_the_safetensors_header_rule_is_the_installed_libraries():
    torch = pytest.importorskip("torch")
    from safetensors.torch import save

    tensors = {"b.x": ("F16", [3]), "a.y": ("I32", [2, 2]), "c.z": ("F16", [5]), "a.a": ("I32", [1])}
    dtypes = {"F16": torch.float16, "I32": torch.int32}
    real = {name: torch.zeros(shape, dtype=dtypes[dtype]) for name, (dtype, shape) in tensors.items()}
    assert len(save(real, metadata={"format": "pt"})) == _safetensors_file_bytes(tensors)


@pytest.mark.parametrize("name", list(PUBLISHED_GPTQ))
def test_a_published_gptq_checkpoint_is_counted_to_the_byte(name):
    (L, C, F, H, G), (int32_params, fp16_params, file_bytes) = PUBLISHED_GPTQ[name]
    data = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": C,
        "intermediate_size": F,
        "num_hidden_layers": L,
        "num_attention_heads": H,
        "num_key_value_heads": G,
        "vocab_size": 151936,
        "tie_word_embeddings": True,
        "torch_dtype": "float16",
        "quantization_config": QWEN_GPTQ_CONFIG,
    }
    cfg, notes = read_hf_config(data)
    assert notes[0].startswith("quantization_config: GPTQ int4 weights in groups of 128 inputs")
    stored = weights_bytes(cfg, stored_weights(stored_quant(data)))
    by_format: dict[str, int] = {}
    for row in stored.by_tensor:
        params = row["count"] * math.prod(row["shape"])
        by_format[row["stored_as"]] = by_format.get(row["stored_as"], 0) + params
    # the Hub's counts: every quantised weight once (I32), every other parameter (F16)
    assert by_format == {"int4": int32_params, "fp16": fp16_params}
    tensors = _qwen_gptq_tensors(L, C, F, H, G)
    sizes = {"F16": 2, "I32": 4}
    assert stored.total == sum(sizes[dtype] * math.prod(shape) for dtype, shape in tensors.values())
    # the published model.safetensors: the header and exactly these tensors. Without g_idx (stored
    # with desc_act false too) it would be 2 MB short, without qzeros (sym true) 5 MB
    assert _safetensors_file_bytes(tensors) == file_bytes


# ---- bitsandbytes, by hand on PRESETS["debug"] ------------------------------------------------------
BF16 = "bfloat16"
DEBUG = {**PRESETS["debug"].to_hf_config(), "torch_dtype": BF16}
DEBUG_LINEARS = [(64, 64), (64, 32), (64, 32), (64, 64), (64, 172), (64, 172), (172, 64)]  # (K, N)
DEBUG_KEPT = 2 * 2 * 64 * 2 + 64 * 2 + 256 * 64 * 2  # bf16: norms, final norm, embeddings


def _bnb(**qc) -> dict:
    return {**DEBUG, "quantization_config": {"quant_method": "bitsandbytes", **qc}}


@pytest.mark.parametrize(
    "qc,module,head_quantised",
    [
        (
            {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
            lambda K, N: bnb4_module(K, N, "nf4", BF16),
            False,
        ),
        ({"load_in_4bit": True}, lambda K, N: bnb4_module(K, N, "fp4", BF16), False),  # fp4: the default
        (
            {"load_in_4bit": True, "bnb_4bit_quant_type": "fp4", "bnb_4bit_quant_storage": "bfloat16"},
            lambda K, N: bnb4_module(K, N, "fp4", "bfloat16", storage=2),
            False,
        ),
        (
            {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True},
            lambda K, N: bnb4_module(K, N, "nf4", "bfloat16", double=True),
            False,
        ),
        (
            {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "llm_int8_skip_modules": []},
            lambda K, N: bnb4_module(K, N, "nf4", "bfloat16"),
            True,  # a skip list replaces transformers' default one (the head): the head is quantised
        ),
        ({"load_in_8bit": True}, bnb8_module, False),
        ({"load_in_8bit": True, "llm_int8_skip_modules": ["lm_head"]}, bnb8_module, False),
        ({"load_in_8bit": True, "llm_int8_skip_modules": []}, bnb8_module, True),
    ],
)
def test_bitsandbytes_is_counted_tensor_by_tensor(qc, module, head_quantised):
    block = sum(module(K, N) for K, N in DEBUG_LINEARS)
    head = module(64, 256) if head_quantised else 256 * 64 * 2
    assert counted(_bnb(**qc)) == 2 * block + DEBUG_KEPT + head


def test_bitsandbytes_as_transformers_saves_it(tmp_path):
    """Where bitsandbytes (and accelerate) are installed: a tiny Llama quantised by transformers
    and saved; its safetensors hold exactly the bytes counted — double quant to within the
    nested_offset's digits (a few bytes per module). Skipped without them (not a dependency)."""
    pytest.importorskip("bitsandbytes")
    pytest.importorskip("accelerate")
    import torch
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

    from llama_lab.config.files import parse_config_json

    hf = LlamaConfig(
        vocab_size=1000,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(hf).to(torch.bfloat16).save_pretrained(tmp_path / "base")
    cases = {
        "nf4": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4"),
        "nf4-dq": BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True
        ),
        "int8": BitsAndBytesConfig(load_in_8bit=True),
    }
    for name, config in cases.items():
        model = AutoModelForCausalLM.from_pretrained(
            tmp_path / "base", quantization_config=config, dtype=torch.bfloat16, device_map="cpu"
        )
        model.save_pretrained(tmp_path / name)
        real = 0
        for path in (tmp_path / name).glob("*.safetensors"):
            with safe_open(str(path), "pt") as f:
                real += sum(f.get_tensor(k).numel() * f.get_tensor(k).element_size() for k in f.keys())
        text = (tmp_path / name / "config.json").read_text()
        cfg, _ = parse_config_json(text)
        predicted = analysis.weight_bytes(cfg, stored_weights(stored_quant_of(text)))
        modules = 2 * 7
        assert abs(real - predicted) <= (2 * modules if name.endswith("dq") else 0), name


# ---- describe, label, refusals ------------------------------------------------------------------
@pytest.mark.parametrize(
    "data,label,words",
    [
        ({**QWEN2_SMALL, "quantization_config": GPTQ}, "GPTQ int4, g128", "g_idx per input"),
        (
            {**QWEN2_SMALL, "quantization_config": {**GPTQ, "group_size": -1, "desc_act": True, "bits": 8}},
            "GPTQ int8, one group per row, act-order",
            "one group over all of a row's inputs",
        ),
        (_bnb(load_in_4bit=True, bnb_4bit_quant_type="nf4"), "bitsandbytes nf4", "float32 absmax per 64"),
        (
            _bnb(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True),
            "bitsandbytes nf4, double quant",
            "double quant",
        ),
        (_bnb(load_in_8bit=True), "bitsandbytes int8 (LLM.int8)", "one float32 scale (SCB) per output row"),
    ],
)
def test_the_stored_format_is_said_in_words(data, label, words):
    stored = stored_quant(data)
    assert stored.label() == label and words in stored.describe()
    assert str(stored_weights(stored)) == label
    assert read_hf_config(data)[1][0].startswith("quantization_config: " + stored.describe()[:20])


@pytest.mark.parametrize(
    "qc,match",
    [
        ({**GPTQ, "bits": 3}, "GPTQ bits=3 is not modelled"),
        ({**GPTQ, "bits": 2}, "GPTQ bits=2 is not modelled"),
        ({**GPTQ, "bits": "4"}, "GPTQ bits='4' must be 4 or 8"),
        ({**GPTQ, "bits": True}, "GPTQ bits=True must be 4 or 8"),
        ({**GPTQ, "group_size": 0}, "group_size=0 must be at least 1"),
        ({**GPTQ, "group_size": "128"}, "group_size='128' must be an integer"),
        ({**GPTQ, "desc_act": "yes"}, "desc_act='yes' must be true or false"),
        ({**GPTQ, "sym": 1}, "sym=1 must be true or false"),
        ({**GPTQ, "lm_head": "true"}, "lm_head='true' must be true or false"),
        ({**GPTQ, "checkpoint_format": "marlin"}, "checkpoint_format='marlin' is not modelled"),
        ({**GPTQ, "pack_dtype": "int16"}, "pack_dtype='int16' is not modelled"),
        ({**GPTQ, "dynamic": {"-:.*mlp.*": {}}}, "dynamic="),
        ({**GPTQ, "modules_in_block_to_quantize": [["self_attn.q_proj"]]}, "modules_in_block_to_quantize="),
        (
            {**GPTQ, "modules_to_not_convert": ["model.layers.0.mlp"]},
            "keeps 'model.layers.0.mlp' unquantised",
        ),
        ({"quant_method": "bitsandbytes"}, "load_in_4bit=None, load_in_8bit=None: exactly one must be true"),
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True},
            "exactly one must be true",
        ),
        ({"quant_method": "bitsandbytes", "load_in_4bit": "yes"}, "load_in_4bit='yes' must be true or false"),
        ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "int4"}, "'int4'"),
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_storage": "int4"},
            "bnb_4bit_quant_storage='int4' must be one of",
        ),
        (
            {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_use_double_quant": "true"},
            "bnb_4bit_use_double_quant='true' must be true or false",
        ),
        (
            {"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_has_fp16_weight": True},
            "llm_int8_has_fp16_weight=true",
        ),
        (
            {
                "quant_method": "bitsandbytes",
                "load_in_8bit": True,
                "llm_int8_skip_modules": ["model.layers.1.block_sparse_moe"],
            },
            "llm_int8_skip_modules names 'model.layers.1.block_sparse_moe', which match none",
        ),
        (
            {"quant_method": "bitsandbytes", "load_in_8bit": True, "llm_int8_skip_modules": "lm_head"},
            "llm_int8_skip_modules='lm_head' must be a list of module names",
        ),
        ({"quant_method": "hqq"}, "quant_method='hqq' is not modelled yet"),
        ({"quant_method": 4}, "quant_method=4 is not modelled yet"),
    ],
)
def test_an_unmodelled_value_is_refused_by_name_in_one_line(qc, match):
    with pytest.raises(ConfigError, match=match) as info:
        stored_quant({**QWEN2_SMALL, "quantization_config": qc})
    assert "\n" not in str(info.value)
    assert info.value.field.startswith("quantization_config")
    with pytest.raises(ConfigError, match=match):  # the reader refuses the file with it
        read_hf_config({**QWEN2_SMALL, "quantization_config": qc})


def test_a_mixture_under_bitsandbytes_and_gpt_oss_under_either_are_refused_by_name():
    mixtral = {**PRESETS["mixtral-8x7b"].to_hf_config(), "quantization_config": {}}
    with pytest.raises(ConfigError, match="bitsandbytes' is not modelled yet for a mixture of experts"):
        stored_quant(
            {**mixtral, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}
        )
    assert stored_quant({**mixtral, "quantization_config": GPTQ}).method == "gptq"  # GPTQ: per expert
    for method in ("gptq", "bitsandbytes"):
        with pytest.raises(ConfigError, match=f"{method}' is not modelled yet for model_type='gpt_oss'"):
            stored_quant({"model_type": "gpt_oss", "quantization_config": {**GPTQ, "quant_method": method}})


def test_a_checkpoint_layout_of_fused_keys_is_refused_by_the_analysis():
    cfg = PRESETS["debug"].replace(fused_keys=True)
    with pytest.raises(AnalysisError, match="fused_keys"):
        weights_bytes(cfg, stored_weights(StoredQuant("gptq", 4, 32, True, "fp16", ())))
    weights_bytes(cfg, "int4")  # LLaMA Lab's own layout does not depend on the checkpoint's modules


def test_the_cli_counts_a_gptq_file_in_its_stored_format(tmp_path, capsys):
    from llama_lab.cli import main

    text = json.dumps({**QWEN2_SMALL, "quantization_config": GPTQ})
    path = tmp_path / "config.json"
    path.write_text(text)
    assert main(["analyze", "--config", str(path), "--json"]) in (0, None)
    out = json.loads(capsys.readouterr().out)
    assert qwen2_small_gptq(4, 128, False) in _ints(out), "the analysis JSON carries the GPTQ weight bytes"


def _ints(obj) -> set:
    if isinstance(obj, dict):
        return set().union(*(_ints(v) for v in obj.values())) if obj else set()
    if isinstance(obj, list):
        return set().union(*(_ints(v) for v in obj)) if obj else set()
    return {obj} if isinstance(obj, int) and not isinstance(obj, bool) else set()
