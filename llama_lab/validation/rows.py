"""Public measurements as data (``measurements.json``): each row's source and quoted line, the
model, hardware, software, precisions, workload and the measured metric, and what LLaMA Lab
can predict it from — its config, GPU and stored weight format — or why it cannot.

The halves are declared before any fit and then kept: each row of the file states its
``half``. A row added without one is given one by ``declare_halves`` (``python
tools/declare_halves.py`` writes it into the file): within each stratum — a kind, its eager rows
apart (they alone inform the launch cost) — the new rows ordered by a hash of their id alternate
between ``fit`` and ``held_out``, starting with the half the stratum has fewer of (``fit`` when
even), whatever their values — and no row already declared moves. The rows of one configuration
(``configuration_of``: the same table line in several releases) share a half: a new row of a
configuration already declared joins it, and new configurations alternate as wholes, so that no
near-duplicate of a fit row is scored as held out. The fine-tuning rows came
declared: alternating in each source table's order, a configuration's memory and throughput
rows in one half.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ..analysis.finetune import ALL_LINEAR, FinetuneSpec
from ..config import PRESETS, ModelConfig
from ..runtime.hardware import GPU, GPUS

DATA = Path(__file__).with_name("measurements.json")
# Activation formats whose matmuls run on their own tensor-core peak (W8A8).
ACTIVATION_FORMATS = ("fp8", "int8")
KINDS = (
    "decode_bs1",
    "decode_batched",
    "prefill",
    "train",
    "memory",
    "kv_capacity",
    "finetune_memory",
    "finetune_throughput",
)
FINETUNE_KINDS = ("finetune_memory", "finetune_throughput")

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
        """The model: its preset, or its config.json as the row quotes it (an MPT's through
        ``mpt_config``)."""
        model = self.data["model"]
        seq_len = int(self.workload.get("seq_len") or 0)
        if model.get("preset"):
            cfg = PRESETS.get(model["preset"])
            # a run longer than the preset's context (Llama 3.1's 128k on the Llama 3 shape)
            return cfg.replace(max_seq_len=seq_len) if cfg and seq_len > cfg.max_seq_len else cfg
        hf = model.get("hf_config") or {}
        if not hf:
            return None
        if hf.get("model_type") == "mpt":
            return mpt_config(hf, seq_len or 2048)
        cfg = ModelConfig.from_hf_config(hf)  # the source's config.json (model.hf_config_source)
        return cfg.replace(max_seq_len=seq_len) if seq_len > cfg.max_seq_len else cfg

    @property
    def gpu(self) -> GPU | None:
        return GPUS.get(self.data["hardware"]["gpu"])

    @property
    def weights(self) -> str | None:
        text = str(self.data["precision"].get("weights") or "").lower()
        return WEIGHT_FORMATS.get(text.split(" ")[0])

    @property
    def matmuls_in(self) -> str:
        """The format the row's matmuls compute in, by its activations' precision as the source
        states it: fp8 or int8 where they are quantised too (TensorRT-LLM's fp8 engines, fp8
        training: "fp8 for Linear matmuls"), else bf16 (weight-only quantisation computes in
        bf16); its bound and estimate take that format's peak (``GPU.peak_flops``)."""
        text = str(self.data["precision"].get("activations") or "").lower().split(" ")[0]
        return text if text in ACTIVATION_FORMATS else "bf16"

    @property
    def runtime(self) -> str:
        """How the row's forward ran: "eager" (no torch.compile, no CUDA graphs: every kernel
        launched from the host) or "compiled" (CUDA graphs or torch.compile, the default:
        serving engines and compiled benchmarks)."""
        return stratum_of(self.data)[1]

    @property
    def engine_profile(self) -> tuple[int, int] | None:
        """A serving engine's profiling forward: (its tokens, the sequences they are spread over)."""
        w = self.workload
        if w.get("profile_tokens") and w.get("profile_seqs"):
            return int(w["profile_tokens"]), int(w["profile_seqs"])
        return None

    @property
    def finetune(self) -> FinetuneSpec:
        """A fine-tuning row's recipe as ``analysis.finetune.FinetuneSpec``."""
        w = self.workload
        targets = w.get("targets") or ("q_proj", "v_proj")
        return FinetuneSpec(
            method=w["method"],
            rank=int(w.get("rank") or 8),
            alpha=w.get("alpha"),
            targets=ALL_LINEAR if targets == ALL_LINEAR else tuple(targets),
            optimizer=w.get("optimizer") or "adamw",
            grad_checkpointing=bool(w.get("grad_checkpointing")),
            loss="chunked" if w.get("chunked_loss") else "upcast",
            pure_16bit=bool(w.get("pure_16bit")),
        )

    @property
    def why_not(self) -> str | None:
        """Why LLaMA Lab makes no prediction for this row (None: it makes one)."""
        if self.config is None:
            return f"no LLaMA Lab preset for {self.data['model']['name']}"
        w = self.workload
        if self.kind in FINETUNE_KINDS:
            if w.get("not_modelled"):
                return str(w["not_modelled"])
            if self.kind == "finetune_throughput" and self.gpu is None:
                return f"{self.data['hardware']['gpu']!r} is not in the GPU table"
            return None
        if self.kind == "memory":  # a training layout's or an engine's profile bytes: no GPU peak
            training = w.get("seq_len") and w.get("micro_batch") and self.data["hardware"].get("count")
            if not (training or self.engine_profile):
                return "neither a training layout's peak nor an engine's profiling peak"
            return None
        if self.kind == "kv_capacity" and not (self.engine_profile and w.get("gpu_memory_utilization")):
            return "the engine's profiling forward and gpu_memory_utilization are not known"
        if w.get("kv_connector"):
            return f"a KV-transfer connector ({w['kv_connector']}) takes memory LLaMA Lab does not model"
        if self.gpu is None:
            return f"{self.data['hardware']['gpu']!r} is not in the GPU table"
        if self.kind != "train" and self.weights is None:
            return f"weight format {self.data['precision'].get('weights')!r} is not modelled"
        if self.kind in ("decode_bs1", "decode_batched", "prefill") and (
            not w.get("batch") or w.get("prompt_len") is None  # llama-bench's tg512: no prompt, 0
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


HALVES = ("fit", "held_out")


def stratum_of(raw: dict) -> tuple[str, str]:
    """The group a row's half is balanced within: its kind and how it ran (eager or compiled)."""
    runtime = (raw.get("workload") or {}).get("runtime")
    return raw["kind"], "eager" if runtime == "eager" else "compiled"


def configuration_of(raw: dict) -> tuple:
    """A row's configuration: its kind, model, GPUs (type and count), weight format and sequence
    length — the releases of one table line (Megatron-Bridge's "Qwen3_30B_a3B, 16 H100s, FP8-CS,
    4096" in each container's table), which share a half."""
    model, hardware = raw.get("model") or {}, raw.get("hardware") or {}
    name = model.get("preset") or re.sub(r"[^a-z0-9]", "", str(model.get("name", "")).lower())
    weights = str((raw.get("precision") or {}).get("weights") or "")
    # the format, not the wording: a release's "FP8" and another's "FP8-CS"; MXFP8 apart
    weights = "mxfp8" if "mxfp8" in weights.lower() else weights.split(" ")[0].lower()
    return (
        raw["kind"],
        name,
        hardware.get("gpu"),
        hardware.get("count"),
        weights,
        (raw.get("workload") or {}).get("seq_len"),
    )


def declare_halves(raw: list[dict]) -> dict[str, str]:
    """Each row's half: the one it declares, else (a new row) by the rule of the module's
    docstring, which moves no declared row."""
    halves = {r["id"]: r["half"] for r in raw if r.get("half") in HALVES}
    for stratum in sorted({stratum_of(r) for r in raw}):
        mine = [r for r in raw if stratum_of(r) == stratum]
        declared = [halves[r["id"]] for r in mine if r["id"] in halves]
        start = 0 if declared.count("fit") <= declared.count("held_out") else 1
        # a new row of a configuration already declared joins its half (the first declared)
        known: dict[tuple, str] = {}
        for r in mine:
            if r["id"] in halves:
                known.setdefault(configuration_of(r), halves[r["id"]])
        new = [r for r in mine if r["id"] not in halves]
        halves.update({r["id"]: known[configuration_of(r)] for r in new if configuration_of(r) in known})
        # the other new configurations, ordered by a hash of their first row's id, alternate
        groups: dict[tuple, list[str]] = {}
        for r in sorted((r for r in new if r["id"] not in halves), key=lambda r: _order(r["id"])):
            groups.setdefault(configuration_of(r), []).append(r["id"])
        for i, ids in enumerate(groups.values()):
            halves.update({row_id: HALVES[(i + start) % 2] for row_id in ids})
    return halves


@cache
def load_rows() -> tuple[Row, ...]:
    """Every row of ``measurements.json``, each with its declared half."""
    raw = json.loads(DATA.read_text())["rows"]
    halves = declare_halves(raw)
    return tuple(Row(r, halves[r["id"]]) for r in raw)
