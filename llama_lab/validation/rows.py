"""Public measurements as data (``measurements.json``): each row's source and quoted line, the
model, hardware, software, precisions, workload and the measured metric, and what LLaMA Lab
can predict it from — its config, GPU and stored weight format — or why it cannot.

The halves are declared before any fit: within each kind, rows ordered by a hash of their id
alternate between ``fit`` and ``held_out``, whatever their values.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..config import PRESETS, ModelConfig
from ..runtime.hardware import GPU, GPUS

DATA = Path(__file__).with_name("measurements.json")
KINDS = ("decode_bs1", "decode_batched", "prefill", "train", "memory", "kv_capacity")

# A row's weight format as written by its source → LLaMA Lab's stored format (its bytes).
WEIGHT_FORMATS = {
    "bf16": "bf16",
    "fp16": "bf16",
    "f16": "bf16",
    "fp8": "fp8",
    "int8": "int8",
    "int4": "int4",
    "q4_k_m": "int4",  # llama.cpp's 4-bit k-quant: ~4.5 bits per weight; counted as int4 groups
}


@dataclass(frozen=True)
class Row:
    """One measurement and what a prediction of it needs (``why_not``: why none is made)."""

    data: dict
    half: str  # "fit" or "held_out"

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def kind(self) -> str:
        return self.data["kind"]

    @property
    def measured(self) -> float:
        return float(self.data["metric"]["value"])

    @property
    def metric(self) -> str:
        return self.data["metric"]["name"]

    @property
    def workload(self) -> dict[str, Any]:
        return self.data["workload"]

    @property
    def source(self) -> str:
        """Where the figure comes from, in one line."""
        s = self.data["source"]
        if s.get("repo"):
            where = f"{s['repo']}/{s['path']}" + (f"@{s['commit'][:12]}" if s.get("commit") else "")
        else:
            where = s.get("url") or s.get("paper") or "?"
        return where + (f" ({s['table']})" if s.get("table") else "")

    @property
    def config(self) -> ModelConfig | None:
        """The model: its preset, or an MPT's shape from the source's config (``mpt_config``)."""
        model = self.data["model"]
        seq_len = int(self.workload.get("seq_len") or 0)
        if model.get("preset"):
            cfg = PRESETS.get(model["preset"])
            # a run longer than the preset's context (Llama 3.1's 128k on the Llama 3 shape)
            return cfg.replace(max_seq_len=seq_len) if cfg and seq_len > cfg.max_seq_len else cfg
        hf = model.get("hf_config") or {}
        return mpt_config(hf, seq_len or 2048) if hf.get("model_type") == "mpt" else None

    @property
    def gpu(self) -> GPU | None:
        return GPUS.get(self.data["hardware"]["gpu"])

    @property
    def weights(self) -> str | None:
        text = str(self.data["precision"].get("weights") or "").lower()
        return WEIGHT_FORMATS.get(text.split(" ")[0])

    @property
    def fp8_compute(self) -> bool:
        """Training whose matmuls run in fp8 (the source's own words say so)."""
        return "fp8" in str(self.data["precision"].get("weights") or "").lower()

    @property
    def why_not(self) -> str | None:
        """Why LLaMA Lab makes no prediction for this row (None: it makes one)."""
        if self.kind == "kv_capacity":
            return "kv_capacity rows are not predicted yet (an engine's profile peak is not modelled)"
        if self.config is None:
            return f"no LLaMA Lab preset for {self.data['model']['name']}"
        w = self.workload
        if self.kind == "memory":  # a training layout's bytes: no GPU peak needed
            if not (w.get("seq_len") and w.get("micro_batch") and self.data["hardware"].get("count")):
                return "not a training layout's peak (vLLM's profile peak is not modelled)"
            return None
        if self.gpu is None:
            return f"{self.data['hardware']['gpu']!r} is not in the GPU table"
        if self.kind != "train" and self.weights is None:
            return f"weight format {self.data['precision'].get('weights')!r} is not modelled"
        w = self.workload
        if self.kind in ("decode_bs1", "decode_batched", "prefill") and not (
            w.get("batch") and w.get("prompt_len")
        ):
            return "the source does not state the batch and prompt length"
        if self.kind == "train" and not w.get("seq_len"):
            return "the source does not state the sequence length"
        return None


def mpt_config(hf: dict, seq_len: int) -> ModelConfig:
    """An MPT (llm-foundry's yaml: d_model, n_heads, n_layers, expansion_ratio, vocab_size) as a
    LLaMA Lab config with the same matmuls: LayerNorm, a GELU FFN of expansion_ratio × d, no
    position parameters (ALiBi adds none), no biases, the embedding tied to the head (MPT's)."""
    d = int(hf["d_model"])
    return ModelConfig(
        vocab_size=int(hf["vocab_size"]),
        d_model=d,
        n_layers=int(hf["n_layers"]),
        n_heads=int(hf["n_heads"]),
        n_kv_heads=int(hf["n_heads"]),
        ffn_hidden=int(hf.get("expansion_ratio", 4)) * d,
        max_seq_len=seq_len,
        norm_type="layernorm",
        pos_encoding="none",
        ffn_type="gelu",
        bias=False,
        tie_embeddings=True,
    )


def _order(row_id: str) -> str:
    return hashlib.sha256(row_id.encode()).hexdigest()


@cache
def load_rows() -> tuple[Row, ...]:
    """Every row of ``measurements.json``, each with its declared half."""
    raw = json.loads(DATA.read_text())["rows"]
    halves: dict[str, str] = {}
    for kind in KINDS:
        ids = sorted((r["id"] for r in raw if r["kind"] == kind), key=_order)
        halves.update({row_id: ("fit", "held_out")[i % 2] for i, row_id in enumerate(ids)})
    return tuple(Row(r, halves[r["id"]]) for r in raw)
