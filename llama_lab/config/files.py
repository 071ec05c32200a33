"""Files a person names: config files (our ModelConfig JSON or a HF config.json), training text,
a checkpoint's JSON. ``read_bounded`` is the one reader of a user path: only a regular file is
read (a FIFO, device, socket, folder or symlink loop is refused by name, and nothing is opened
in blocking mode), and never more than a fixed number of bytes. ``loads_json`` is the one JSON
parser: data only (json.loads: nothing is executed), and every number, string and level of
nesting is checked, so a hostile file gets one message naming the key and the rule.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ..errors import ConfigError
from .families import FAMILY_LIST
from .hf.quant import StoredQuant, stored_quant
from .hf.read import text_decoder
from .messages import shown
from .model_config import ModelConfig, read_hf_config

MAX_CONFIG_BYTES = 1_000_000  # a real config.json is about 1 KB
MAX_INT_DIGITS = 20  # 2**64 has 20 digits; no count in a config is near that
MAX_NUMBER_CHARS = 64  # a float's text (17 significant digits and an exponent fit)
MAX_DEPTH = 32  # a config.json nests 3 levels; rope_parameters is the deepest
_SPECIAL = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
# C0/C1 controls except tab, newline and carriage return; lone surrogates (not Unicode text)
UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


# ---- reading a user path -------------------------------------------------------------------------


def _kind(mode: int) -> str:
    return next((name for test, name in _SPECIAL if test(mode)), "not a regular file")


def check_path(
    path: str | Path, what: str, error: type = ConfigError, folder: bool = False
) -> os.stat_result:
    """``os.stat`` of ``path`` (nothing is opened), refused unless it is a regular file (a
    folder when ``folder``): the message names the path and what it is instead."""
    name = f"{what} {shown(str(path), 200)}"
    try:
        info = os.stat(path)
    except ValueError:  # a NUL character in the path
        raise error(f"{name} is not a usable path (it holds a NUL character)") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{name} is a symlink loop, not a regular file") from None
        if exc.errno == errno.ENOENT and os.path.lexists(path):
            raise error(f"{name} is a symlink to a missing target") from None
        if exc.errno == errno.ENOENT:
            raise error(f"{name} does not exist") from None
        raise error(f"{name} cannot be read: {exc.strerror or exc}") from None
    if folder and not stat.S_ISDIR(info.st_mode):
        kind = "a regular file" if stat.S_ISREG(info.st_mode) else _kind(info.st_mode)
        raise error(f"{name} is {kind}, not a folder")
    if not folder and not stat.S_ISREG(info.st_mode):
        raise error(f"{name} is {_kind(info.st_mode)}, not a regular file")
    return info


def read_bounded(path: str | Path, max_bytes: int, what: str, error: type = ConfigError) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them. Checked with
    ``os.stat`` first, then opened non-blocking and checked again on the open descriptor (a
    path swapped for a FIFO in between cannot block); a file larger than the limit, or one that
    grows past it while read (/proc), is refused without reading more than one byte extra."""
    check_path(path, what, error)
    name = f"{what} {shown(str(path), 200)}"
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except OSError as exc:
        raise error(f"{name} cannot be read: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{name} is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise error(f"{name} is {info.st_size:,} bytes, larger than the limit of {max_bytes:,} bytes")
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise error(f"{name} cannot be read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > max_bytes:
        raise error(f"{name} is larger than the limit of {max_bytes:,} bytes")
    return b"".join(chunks)


def decode_utf8(raw: bytes, source: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped), or one message naming the first bad byte."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source} is not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset "
            f"{exc.start:,} cannot be decoded (save the file as UTF-8)"
        ) from None


# ---- parsing JSON ----------------------------------------------------------------------------------


class _Refused:
    """A number json.loads met that no config holds; reported with its key by ``_check_tree``."""

    __slots__ = ("text", "rule")

    def __init__(self, text: str, rule: str):
        self.text, self.rule = text, rule


def _parse_int(text: str) -> int | _Refused:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:  # also spares int() its ValueError beyond 4,300 digits
        return _Refused(
            text, f"is an integer of {digits:,} digits; a config number has at most {MAX_INT_DIGITS}"
        )
    return int(text)


def _parse_float(text: str) -> float | _Refused:
    if len(text) > MAX_NUMBER_CHARS:
        return _Refused(
            text,
            f"is a number written with {len(text):,} characters; a config "
            f"number has at most {MAX_NUMBER_CHARS}",
        )
    value = float(text)
    if not math.isfinite(value):
        return _Refused(text, "is beyond the range of a float (±1.8e308); a number must be finite")
    if value == 0 and any(ch in "123456789" for ch in text.partition("e")[0].partition("E")[0]):
        return _Refused(text, "is below the smallest float (5e-324) and would read as 0")
    return value


def _parse_constant(text: str) -> _Refused:
    return _Refused(text, "is not a finite number (NaN and Infinity are refused)")


def _remember(seen: set[str], key: str) -> bool:
    """Add ``key`` to ``seen``; False (so a generator's test goes on)."""
    seen.add(key)
    return False


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or _remember(seen, key))
        raise ConfigError(f"key {shown(twice)} appears twice in one object; which one is meant is ambiguous")
    return data


def _where(path: tuple) -> str:
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part[:60]}" for part in path)
    return (text.lstrip(".") or "the document")[:200]


def _check_text(text: str, path: tuple, is_key: bool) -> None:
    bad = UNPRINTABLE.search(text)
    if bad:
        what = (
            "a lone surrogate (not Unicode text)"
            if "\ud800" <= bad.group() <= "\udfff"
            else "a control character"
        )
        place = f"the key {shown(text)} in {_where(path)}" if is_key else f"{_where(path)}={shown(text)}"
        raise ConfigError(f"{place} holds {what} {bad.group()!r}; config text must be printable Unicode")


def _check_tree(data: Any) -> None:
    """Walk the parsed document once (breadth first: top-level keys before nested ones)."""
    queue: deque[tuple[Any, tuple[str | int, ...]]] = deque([(data, ())])
    while queue:
        value, path = queue.popleft()
        if len(path) > MAX_DEPTH:
            raise ConfigError(
                f"{_where(path)} is nested more than {MAX_DEPTH} levels deep; a config nests a few"
            )
        if isinstance(value, dict):
            for key, item in value.items():
                _check_text(key, path, is_key=True)
                queue.append((item, path + (key,)))
        elif isinstance(value, list):
            queue.extend((item, path + (i,)) for i, item in enumerate(value))
        elif isinstance(value, _Refused):
            raise ConfigError(f"{_where(path)}={_cut_number(value.text)} {value.rule}")
        elif isinstance(value, str):
            _check_text(value, path, is_key=False)


def _cut_number(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}…{text[-4:]}"


def loads_json(text: str | bytes, source: str = "config", max_chars: int = MAX_CONFIG_BYTES) -> Any:
    """``text`` parsed as JSON data, every number, string and nesting level checked: NaN,
    Infinity, floats beyond ±1.8e308, integers of more than 20 digits, lone surrogates,
    control characters, duplicate keys and more than 32 levels are refused with a message
    naming ``source``, the key and the rule."""
    source = source_label(source)
    if isinstance(text, (bytes, bytearray)):
        text = decode_utf8(bytes(text), source)
    text = text.lstrip("\ufeff")
    if len(text) > max_chars:
        raise ConfigError(f"{source} is {len(text):,} characters; it may hold at most {max_chars:,}")
    if not text.strip():
        raise ConfigError(f"{source} is empty")
    try:
        data = json.loads(
            text,
            parse_int=_parse_int,
            parse_float=_parse_float,
            parse_constant=_parse_constant,
            object_pairs_hook=_unique_keys,
        )
        _check_tree(data)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ConfigError(f"{source} is nested too deeply to be a config") from None
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except ValueError as exc:  # nothing else should reach here; never a traceback
        raise ConfigError(f"{source} is not usable JSON: {str(exc)[:200]}") from None
    return data


def source_label(source: str) -> str:
    """A file or upload name as a message prefix: controls dropped, at most 200 characters.
    Every refusal of a named file's contents starts with it, once ("theta.json: rope_theta=…")."""
    text = UNPRINTABLE.sub("", str(source))
    return text if len(text) <= 200 else text[:200] + "…"


def load_json_file(path: str | Path, max_bytes: int, what: str) -> Any:
    """A JSON file a person named (a checkpoint's index), read and parsed by the rules above."""
    return loads_json(read_bounded(path, max_bytes, what), f"{what} {path}", max_bytes)


# ---- config files ----------------------------------------------------------------------------------


def load_config_file(path: str | Path) -> tuple[ModelConfig, list[str]]:
    """Load our ModelConfig JSON or a HF config.json (told apart by 'hidden_size')."""
    return parse_config_json(read_bounded(path, MAX_CONFIG_BYTES, "config file"), source=str(path))


@contextmanager
def _named(source: str | None) -> Iterator[None]:
    """A refusal of a parsed document's values (a field, a key, a rule between them) starts
    with the file's name, as the parser's own refusals do: the name appears once."""
    try:
        yield
    except ConfigError as exc:
        if source is not None:
            exc.args = (f"{source_label(source)}: {exc}",)
        raise


def stored_quant_of(text: str | bytes, source: str | None = None) -> StoredQuant | None:
    """The weights' stored format a Hugging Face config.json declares (its quantization_config),
    None for ours or an unquantised checkpoint. A refusal names ``source`` first, when given."""
    data = loads_json(text, source or "config")
    if not isinstance(data, dict) or not any(key in data for key in HF_MARKERS):
        return None
    with _named(source):
        return stored_quant(text_decoder(data, FAMILY_LIST)[0])


def load_stored_quant(path: str | Path) -> StoredQuant | None:
    """``stored_quant_of`` a config file on disk."""
    return stored_quant_of(read_bounded(path, MAX_CONFIG_BYTES, "config file"), source=str(path))


def parse_config_json(text: str | bytes, source: str | None = None) -> tuple[ModelConfig, list[str]]:
    """Parse our JSON or a HF config.json (text, or an upload's bytes) as data only; notes are
    capped (MAX_NOTES and one summary). With ``source`` (a file or upload name) every refusal
    starts with it, once; without, the document is called "config"."""
    data = loads_json(text, source or "config")
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source_label(source or 'config')} must hold a JSON object, got {type(data).__name__}"
        )
    with _named(source):
        if any(key in data for key in HF_MARKERS):
            return read_hf_config(data)
        return ModelConfig.from_dict(data), []


# Keys only a Hugging Face config.json has (none is a ModelConfig field): such a file is read as
# transformers reads it, by its model_type, never as LLaMA Lab's own format.
HF_MARKERS = ("model_type", "architectures", "hidden_size", "text_config", "transformers_version")
