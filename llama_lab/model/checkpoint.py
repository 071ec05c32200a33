"""Local Hugging Face checkpoints: config.json + *.safetensors (sharded or not). Pickles
(``*.bin``, ``*.pt``) are never loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch

from ..config import ConfigError, ModelConfig, load_config_file
from ..config.files import check_path, load_json_file
from ..config.messages import shown
from ..runtime.memory import check_memory
from .decoder import CausalLM
from .init import build_model


@dataclass
class LoadedCheckpoint:
    model: CausalLM
    config: ModelConfig
    notes: list[str]
    files: list[str]


MAX_INDEX_BYTES = 32_000_000  # a sharded index names each tensor once: ~3 MB for 36k tensors


def _index_shards(index: Path) -> list[str]:
    """The shard names of a ``model.safetensors.index.json``, read bounded and checked."""
    data = load_json_file(index, MAX_INDEX_BYTES, "safetensors index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ConfigError(
            f"{index} is not a valid safetensors index (needs a 'weight_map' of "
            f"tensor names to shard file names)"
        )
    names = sorted(set(weight_map.values()))
    for name in names:
        if Path(name).name != name or not name.endswith(".safetensors"):
            raise ConfigError(
                f"{index} names shard {shown(name)}: shards must be .safetensors files in the same folder"
            )
    return names


def checkpoint_files(folder: Path) -> list[Path]:
    """The safetensors files of a HF folder: sharded (index json) or single. Never pickles;
    every file is a regular one (a FIFO or device named *.safetensors is refused, not opened)."""
    index = folder / "model.safetensors.index.json"
    if os.path.lexists(index):
        files = [folder / name for name in _index_shards(index)]
    else:
        files = sorted(folder.glob("*.safetensors"))
    if not files:
        pickles = [p.name for p in folder.glob("*.bin")] + [p.name for p in folder.glob("*.pt")]
        hint = f" (found {', '.join(pickles)}: pickle checkpoints are never loaded)" if pickles else ""
        raise ConfigError(f"{folder} holds no .safetensors weights{hint}")
    for path in files:
        if not os.path.lexists(path):
            raise ConfigError(f"shard {path.name} named by the index is missing")
        check_path(path, "shard")
    return files


# The hub's per-expert layouts → transformers ≥ 5's fused one. Mixtral's original files name the
# block ``block_sparse_moe`` with w1 (gate), w3 (up), w2 (down); Qwen3-MoE's name each expert's
# gate_proj / up_proj / down_proj.
_PER_EXPERT = {
    "w1": "gate",
    "w3": "up",
    "w2": "down",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
}


def fuse_expert_layout(state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """A state dict with experts stored one tensor per expert and matrix, rewritten to
    ``mlp.gate.weight``, ``mlp.experts.gate_up_proj`` (E, 2F, C) = [gate; up] per expert and
    ``mlp.experts.down_proj`` (E, C, F); a fused state dict is returned as it is."""
    out: dict[str, torch.Tensor] = {}
    parts: dict[str, dict[int, dict[str, torch.Tensor]]] = {}  # layer → expert → matrix
    for key, tensor in state.items():
        key = key.replace(".block_sparse_moe.", ".mlp.")
        pieces = key.split(".")
        if (
            ".mlp.experts." in key
            and len(pieces) > 6
            and pieces[-3].isdigit()
            and pieces[-2] in _PER_EXPERT
            and pieces[-1] == "weight"
        ):
            layer = ".".join(pieces[:-3])  # model.layers.{i}.mlp.experts
            parts.setdefault(layer, {}).setdefault(int(pieces[-3]), {})[_PER_EXPERT[pieces[-2]]] = tensor
        else:
            out[key] = tensor
    for layer, experts in parts.items():
        ids = sorted(experts)
        if ids != list(range(cfg.n_experts)) or any(
            set(m) != {"gate", "up", "down"} for m in experts.values()
        ):
            raise ConfigError(
                f"{layer} holds experts {ids[:4]}… with matrices "
                f"{sorted(set().union(*experts.values()))}: need gate, up and down "
                f"of experts 0..{cfg.n_experts - 1}"
            )
        out[f"{layer}.gate_up_proj"] = torch.stack(
            [torch.cat((experts[e]["gate"], experts[e]["up"])) for e in ids]
        )
        out[f"{layer}.down_proj"] = torch.stack([experts[e]["down"] for e in ids])
    return out


def load_checkpoint(folder: str | Path, device=None, dtype=None) -> LoadedCheckpoint:
    """Load a local HF-format folder (config.json + *.safetensors, sharded or not)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    check_path(folder, "checkpoint folder", folder=True)
    config_path = folder / "config.json"
    if not os.path.lexists(config_path):
        raise ConfigError(f"{folder} has no config.json")
    cfg, notes = load_config_file(config_path)  # bounded; only a regular file is read
    files = checkpoint_files(folder)
    # Refuse before reading a byte of weights if they cannot fit.
    weight_bytes = sum(path.stat().st_size for path in files)
    if dtype is not None:  # the cast holds both copies of one tensor at a time, at most
        weight_bytes = int(weight_bytes * max(1.0, torch.finfo(dtype).bits / 16))
    check_memory(weight_bytes, torch.device(device or "cpu"), f"loading {folder.name}")
    model = build_model(cfg, device="meta")
    state: dict[str, torch.Tensor] = {}
    for path in files:
        try:
            state.update(load_file(str(path), device=str(device or "cpu")))
        except (SafetensorError, OSError, ValueError) as exc:
            raise ConfigError(f"{path.name} is not a readable safetensors file: {exc}") from None
    state = fuse_expert_layout(state, cfg)
    if cfg.tie_embeddings:
        state.pop("lm_head.weight", None)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state) - ({"lm_head.weight"} if cfg.tie_embeddings else set()))
    unexpected = sorted(k for k in set(state) - set(expected) if not k.endswith("rotary_emb.inv_freq"))
    if missing:
        raise ConfigError(f"checkpoint lacks {len(missing)} tensor(s), e.g. {missing[:3]}")
    if unexpected:
        notes.append(f"{len(unexpected)} unexpected tensor(s) ignored, e.g. {unexpected[:3]}")
    for key, tensor in expected.items():
        if key in state and tuple(state[key].shape) != tuple(tensor.shape):
            raise ConfigError(
                f"tensor {key} has shape {tuple(state[key].shape)}, the config implies {tuple(tensor.shape)}"
            )
        if key in state and tensor.is_floating_point() and not state[key].is_floating_point():
            raise ConfigError(
                f"tensor {key} is {str(state[key].dtype).removeprefix('torch.')}, not a float: the "
                f"model's weights are floating point (a quantised checkpoint is not loaded)"
            )
    state = {k: v for k, v in state.items() if k in expected}
    model.load_state_dict(state, strict=False, assign=True)
    if cfg.tie_embeddings:
        model.lm_head.weight = model.model.embed_tokens.weight
    if dtype is not None:
        model = model.to(dtype=dtype)
    return LoadedCheckpoint(model, cfg, notes, [p.name for p in files])
