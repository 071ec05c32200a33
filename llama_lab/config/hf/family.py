"""What a family module declares (``Family``), in one record the rest of LLaMA Lab reads: the
model types it reads (``ModelType``: keys.py), how it reads its config.json's own fields and
writes them back, what it cannot express (``lacks``), the features only some families hold
(``Feature``), the multimodal wrappers and model_type aliases it answers to, the notes that say
what sets it apart (``Note``, from ``Counts`` the analysis makes), its presets and the parameter
counts published for them (``Exact``, ``Rounded``, ``Split``), and the sidebar's fields for it
(``FieldGroup``). The families are ``llama_lab.config.families``; the reading and writing that
every family shares is this package's ``read``, ``write`` and ``select``, which take the registry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..fields import ModelFields
from .keys import ModelType
from .reader import Reader


@dataclass(frozen=True)
class Feature:
    """A feature only some model types can write (``ModelType.holds`` names it): every other one
    lacks it, in these words."""

    key: str
    words: str
    present: Callable[[ModelFields], bool]


@dataclass(frozen=True)
class Wrapper:
    """A multimodal wrapper. A fixed one's config class builds its text_config with one class
    whatever the file says (a SubConfigSpec naming a config class, not AutoConfig), with that
    class's defaults when text_config is absent or null; the wrapper's own tie_word_embeddings
    ties the head (PreTrainedModel.tie_weights reads the wrapper's config), by default
    ``tie_default``. Where ``vision`` names its tower, the tower and projector are counted."""

    model_type: str  # the wrapper's (gemma3)
    text: str  # its text decoder's (gemma3_text); not fixed: the default when text_config names none
    config_class: str  # Gemma3Config
    tie_default: bool
    # False: the text_config's own model_type picks its class (AutoConfig: LLaVA's, Mistral 3's)
    fixed: bool = True
    # not fixed: the text config's tie_word_embeddings ties the head too (LlavaConfig forwards
    # it); Mistral3Config's own (default true) alone ties it
    tie_from_text: bool = True
    # the tower its vision_config builds (VisionTower.kind: hf.vision reads it, the analysis
    # counts it); None: the tower and projector are not counted (a note says so)
    vision: str | None = None
    # Qwen2.5-VL: a file without text_config holds the text decoder's keys at its top level
    text_at_top: bool = False


# What a note is about, in the order the notes are shown: the attention's shape, its window, the
# block's norms and scales, positions, sinks, the token mixer, the temperature, the experts
Topic = Literal[
    "attention", "window", "block", "positions", "sinks", "mixer", "temperature", "experts", "vision"
]
TOPICS: tuple[Topic, ...] = (
    "attention",
    "window",
    "block",
    "positions",
    "sinks",
    "mixer",
    "temperature",
    "experts",
    "vision",
)


@dataclass(frozen=True)
class Note:
    topic: Topic
    text: str  # Markdown, one line


@dataclass(frozen=True)
class Counts:
    """What the notes quote of a config, counted by ``llama_lab.analysis`` (which sits above the
    config and passes it in)."""

    total: int  # parameters
    active: int  # parameters a token uses
    embedding: int  # the token embedding's
    experts: int  # the routed experts'
    sandwich_norms: int  # the pre- and post-feedforward norms' (Gemma's extra two per block)
    state_bytes: int  # every Gated DeltaNet block's state of one sequence at bf16
    vision: int = 0  # a multimodal model's vision tower and projector
    image_tokens: int = 0  # the tokens one image adds to its sequence


@dataclass(frozen=True)
class Exact:
    """A total published exactly (a model card, the Hub's safetensors total)."""

    total: int


@dataclass(frozen=True)
class Rounded:
    """Totals published only rounded: (total, active per token) and the quote."""

    total: float
    active: float
    quote: str


@dataclass(frozen=True)
class Split:
    """Counts published as embedding and non-embedding parameters, rounded to ``unit``."""

    embedding: float
    non_embedding: float
    unit: float
    quote: str


Published = Exact | Rounded | Split
Widget = Literal["int", "float", "toggle", "text", "choice", "follow"]


@dataclass(frozen=True)
class FieldSpec:
    """One ModelConfig field as the sidebar shows it (``widget``: "int" a whole number, "float",
    "toggle", "text" a layer set, "choice" one of CHOICES, "follow" on / off / following
    ``bias``)."""

    name: str
    label: str
    widget: Widget
    help: str | None = None
    minimum: float = 1  # int and float widgets
    maximum: float | None = None
    step: float = 1


@dataclass(frozen=True)
class FieldGroup:
    """A collapsed group of the sidebar: its title and fields, in order."""

    title: str
    fields: tuple[FieldSpec, ...]

    @property
    def names(self) -> frozenset[str]:
        return frozenset(spec.name for spec in self.fields)


def no_notes(cfg: ModelFields, counts: Counts) -> list[Note]:
    return []


@dataclass(frozen=True)
class Family:
    """One family module's record (see the module docstring)."""

    name: str  # as people say it: "Qwen", "DeepSeek"
    model_types: tuple[ModelType, ...]
    # its own fields from a config.json (the shared ones: read.common_fields)
    read: Callable[[Reader], dict[str, Any]]
    # its own keys for a config it expresses, as model_type (the shared ones: write.common_keys)
    write: Callable[[ModelFields, str], dict[str, Any]]
    # why model_type cannot express a config, beyond its block and the features it lacks
    lacks: Callable[[ModelFields, str], list[str]]
    notes: Callable[[ModelFields, Counts], list[Note]] = no_notes
    # notes on keys its model reads for a part LLaMA Lab leaves out (DeepSeek-V3's MTP module)
    key_notes: Callable[[Reader], None] | None = None
    features: tuple[Feature, ...] = ()  # the features it brought (holders: ModelType.holds)
    presets: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # name → fields
    published: Mapping[str, Published] = field(default_factory=dict)  # preset → count
    wrappers: tuple[Wrapper, ...] = ()
    aliases: Mapping[str, str] = field(default_factory=dict)  # a file's model_type → ours
    field_groups: tuple[FieldGroup, ...] = ()  # the sidebar's groups for its fields

    def model_type(self, name: str) -> ModelType:
        return next(mt for mt in self.model_types if mt.name == name)


def failing(checks: list[tuple[bool, str]]) -> list[str]:
    """The words of every check that fails (a ``lacks`` is a list of (broken, words))."""
    return [words for broken, words in checks if broken]


def head_dim_always_read(model_type: str) -> dict[str, str]:
    """``ModelType.null_why`` of a config class with no head_dim field (OLMo 2, SmolLM3, Phi-3,
    GLM-4.5): a file's head_dim becomes an attribute, which their attention takes whenever it is
    there."""
    return {
        "head_dim": f"{model_type}'s attention reads head_dim whenever the key is there and cannot "
        f"size its projections with none"
    }


LAYER_SET_HELP = (
    "'all', 'none', 'from:K' (block K on), 'every:N' (every N-th block) or a list such as '0,2,5'"
)
