"""Generate ``llama_lab/config/hf/keys.json``: for every model type LLaMA Lab's families read, the config.json
keys its transformers model reads, and its config class's defaults — from the installed
transformers (the release the tests run against; the file records which).

A key is *read* when the family's modelling code reads it from its config (``config.X``,
``self.config.X``, ``getattr(config, "X", …)`` in ``models/<family>/modeling_<family>.py``, or
the module ``ModelType.module`` names: gemma3_text's decoder is in ``modeling_gemma3.py``, whose wrapper
definitions are left out), or when the config class's ``__post_init__`` derives something from
it (``self.X``: Qwen2's ``use_sliding_window`` and ``max_window_layers`` set ``layer_types``),
or when the class's own ``__post_init__`` or ``convert_rope_params_to_dict`` takes it as a
keyword argument (``kwargs.get("X")``, ``pop``, ``setdefault``: Gemma3TextConfig's
``sliding_window_pattern`` and ``rope_local_base_freq``, Glm4MoeConfig's and Phi3Config's
``partial_rotary_factor``), or when it is an alias (``attribute_map``) of a read key. Keys every
family shares (``PreTrainedModel`` reads ``tie_word_embeddings``; the RoPE utilities
``rope_parameters``) are read by LLaMA Lab's own COMMON_KEYS and need no table. Each family also
records its config class's defaults, its ``default_theta`` (Gemma3TextConfig's: one per layer
type) and the RoPE a file that names none gets (``default_rope``: plain RoPE for all but
gpt_oss, whose ``__post_init__`` sets YaRN).

    python tools/hf_family_keys.py          # rewrite the file
    python tools/hf_family_keys.py --check  # exit 1 if the file differs from a fresh table
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from llama_lab.config import families

OUT = Path(__file__).resolve().parents[1] / "llama_lab" / "config" / "hf" / "keys.json"
# every model type of the families' registry, and the transformers module that holds its code
# (``ModelType.module``: gemma3_text's decoder lives in models/gemma3/modeling_gemma3.py, beside
# the multimodal wrapper)
MODEL_TYPES = {mt.name: mt.module or mt.name for mt in families.MODEL_TYPES.values()}
# What only a multimodal wrapper's classes read (its sub-configs): a definition that reads one
# belongs to the wrapper, not to the text decoder, and is left out of the decoder's keys
WRAPPER_READS = {"text_config", "vision_config", "get_text_config"}
# Words naming the vision tower's classes in a modelling file that holds the text decoder too
TOWER_WORDS = ("Vision", "MultiModalProjector", "UnfoldConvolution")
# The config class's methods that read file keys passed as keyword arguments (kwargs.get / pop):
# Gemma3TextConfig's sliding_window_pattern (__post_init__), rope_local_base_freq (its RoPE);
# Glm4MoeConfig's partial_rotary_factor (kwargs.setdefault, then folded into rope_parameters)
KWARG_METHODS = ("__post_init__", "convert_rope_params_to_dict")
CONFIG_NAMES = {"config", "text_config"}


def _is_config(node: ast.AST) -> bool:
    """``config``, ``text_config`` or ``self.config``."""
    if isinstance(node, ast.Name):
        return node.id in CONFIG_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "config" and isinstance(node.value, ast.Name)


def keys_read_by(source: str) -> set[str]:
    """The config attributes a modelling file reads."""
    keys = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_config(node.value) and not node.attr.startswith("_"):
            keys.add(node.attr)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2
            and _is_config(node.args[0])
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            keys.add(node.args[1].value)
    return keys


def decoder_source(source: str) -> str:
    """A modelling file without the definitions of a multimodal wrapper held beside the text
    decoder: those that read the wrapper's sub-configs (``WRAPPER_READS``) and the vision
    tower's classes (named ``…Vision…``, and Llama 4's ``Llama4UnfoldConvolution`` and
    ``Llama4MultiModalProjector``: ``TOWER_WORDS``; Qwen3.5's read its vision config's depth,
    patch size …)."""
    tree = ast.parse(source)
    tree.body = [
        node
        for node in tree.body
        if not (
            isinstance(node, (ast.ClassDef, ast.FunctionDef))
            and (keys_read_by(ast.unparse(node)) & WRAPPER_READS or any(w in node.name for w in TOWER_WORDS))
        )
    ]
    return ast.unparse(tree)


def keys_derived_from(config_class: type) -> set[str]:
    """The fields the config class's ``__post_init__`` reads to derive others, and the keys its
    own ``KWARG_METHODS`` read from the file's extra keyword arguments (``kwargs.get("X")``)."""
    keys = set()
    for name in KWARG_METHODS:
        method = config_class.__dict__.get(name)
        if method is None:
            continue
        tree = ast.parse(_dedent(inspect.getsource(method)))
        for node in ast.walk(tree):
            if (
                name == "__post_init__"
                and isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and isinstance(node.ctx, ast.Load)
                and not node.attr.startswith("_")
            ):
                keys.add(node.attr)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "pop", "setdefault")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "kwargs"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                keys.add(node.args[0].value)
    return keys


def _dedent(source: str) -> str:
    lines = source.splitlines()
    indent = len(lines[0]) - len(lines[0].lstrip())
    return "\n".join(line[indent:] for line in lines)


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def defaults_of(config_class: type) -> dict[str, Any]:
    """Each field's default as the family's config class declares it (what a missing key
    becomes); the fields every config inherits (labels, token ids' bookkeeping) are left out."""
    own = config_class.__dict__.get("__annotations__", {})
    out = {}
    for f in dataclasses.fields(config_class):
        if f.name.startswith("_") or f.name not in own:
            continue
        if f.default is not dataclasses.MISSING:
            out[f.name] = _plain(f.default)
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            out[f.name] = _plain(f.default_factory())  # type: ignore[misc]
    return out


def family_table(model_type: str) -> dict[str, Any]:
    import transformers

    config_class = transformers.CONFIG_MAPPING[model_type]
    module = MODEL_TYPES[model_type]
    modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    source = inspect.getsource(modeling)
    read = keys_read_by(decoder_source(source) if module != model_type else source)
    read |= keys_derived_from(config_class)
    aliases = getattr(config_class, "attribute_map", {}) or {}
    # an alias reads its target and the target its aliases (config.x and config.alias are one)
    read |= {alias for alias, target in aliases.items() if target in read}
    read |= {target for alias, target in aliases.items() if alias in read}
    return {
        "config_class": config_class.__name__,
        "default_theta": getattr(config_class, "default_theta", None),
        # the RoPE a file with neither rope_parameters nor rope_scaling gets (__post_init__ may
        # set it: GptOssConfig's is YaRN; null for a class without RoPE: BertConfig, MarianConfig)
        "default_rope": _plain(getattr(config_class(), "rope_parameters", None)),
        "read": sorted(read),
        "aliases": dict(sorted(aliases.items())),
        "defaults": defaults_of(config_class),
    }


def build() -> dict[str, Any]:
    import transformers

    return {
        "transformers": transformers.__version__,
        "families": {mt: family_table(mt) for mt in MODEL_TYPES},
    }


def render(table: dict[str, Any]) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        same = OUT.read_text() == text
        print("keys.json is current" if same else "keys.json differs from a fresh table")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
