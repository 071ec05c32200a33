"""What pages show and share safely. Messages: every user-supplied string — URL values, uploaded
contents, file and key names, and the errors that quote them — is shown through
``escape_markdown`` (``show_error`` and its siblings), so it renders as itself: never a live
link, an image the browser fetches, or formatting. Page-level widgets: mirrored in the URL as
``<page>.<name>`` and validated on the way in (``link_widgets``), kept across page switches, and
kept within their bounds with a note naming the bound (``bounded_number``, ``keep_choice``).
And the box that sets a page's live-run sizes apart from the sidebar (``live_size_box``).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import streamlit as st

from ..config import require_decoder_only
from ..errors import ConfigError, LabError
from ..units import escape_markdown


# ---- escaped messages ---------------------------------------------------------------------------
def _host(where: Any) -> Any:
    return st if where is None else where


def show_error(message: Any, where: Any = None) -> None:
    """``st.error`` (or ``where.error``, e.g. a column) of ``message``, rendered literally."""
    _host(where).error(escape_markdown(message))


def stop_unless_decoder_only(cfg: Any, page: str) -> None:
    """A page that models causal decoder-only models alone (``config.require_decoder_only``):
    for an encoder-decoder, a bidirectional or a bare encoder it says so in one line and draws
    nothing more."""
    try:
        require_decoder_only(cfg, page)
    except ConfigError as exc:
        show_error(exc)
        st.stop()


def show_warning(message: Any, where: Any = None) -> None:
    _host(where).warning(escape_markdown(message))


def show_info(message: Any, where: Any = None) -> None:
    _host(where).info(escape_markdown(message))


def show_caption(message: Any, where: Any = None) -> None:
    _host(where).caption(escape_markdown(message))


# ---- page-level widgets in the URL --------------------------------------------------------------
LINKED_PAGES = ("kv", "live", "grad")  # the pages whose own widgets the URL keeps


KEY_PAGE_VALUES = "llama_lab.page_values"  # dict: URL key → value (this session's choices)


KEY_PAGE_LINKS_READ = "llama_lab.page_links_read"  # set: pages whose URL values were read


KEY_PAGE_NOTES = "llama_lab.page_link_notes"  # dict: page → (values read, messages)


KEY_LINKED = "llama_lab.linked_keys"  # dict: widget key → (URL key, default), this page


KEY_BOUND_NOTES = "llama_lab.bound_notes"  # dict: widget key → Moved (value, why it was moved)


MAX_SHOWN = 40  # characters of a URL value quoted in a message


def _quoted(raw: str) -> str:
    return repr(raw if len(raw) <= MAX_SHOWN else raw[:MAX_SHOWN] + "…")


@dataclass(frozen=True)
class Link:
    """A page widget (session-state key ``prefix + name``) mirrored in the URL as
    ``page.name``. ``read(url_key, text)`` gives the value and a note (or None) when it had to
    be moved within bounds; a LabError when it is refused (the message names the rule)."""

    name: str
    default: Any
    read: Callable[[str, str], tuple[Any, str | None]]


def choice_link(name: str, options: Iterable[Any], default: Any) -> Link:
    """A selectbox (radio, select_slider) whose URL text must be one of ``options``."""
    options = list(options)

    def read(key: str, raw: str) -> tuple[Any, str | None]:
        for option in options:
            if str(option) == raw:
                return option, None
        raise ConfigError(f"{key}={_quoted(raw)} must be one of {', '.join(map(str, options))}")

    return Link(name, default, read)


def int_link(name: str, default: int, lower: int, upper: int) -> Link:
    """A number input whose URL text must be an integer; beyond [lower, upper] it is clamped
    to the bound it passes, with a note naming it."""

    def read(key: str, raw: str) -> tuple[Any, str | None]:
        try:
            value = int(raw.strip().replace("_", ""))
        except ValueError:
            raise ConfigError(f"{key}={_quoted(raw)} must be an integer") from None
        if lower <= value <= upper:
            return value, None
        bound = upper if value > upper else lower
        side = "above the maximum" if value > upper else "below the minimum"
        return bound, f"Link: {key}={_quoted(raw)} is {side} {bound:,}; using {bound:,}."

    return Link(name, default, read)


def link_widgets(page: str, prefix: str, links: Sequence[Link]) -> None:
    """Give the page's widgets their values before they are drawn, and mirror them in the URL.
    A widget keeps its own value while the page is shown; after a page switch it gets this
    session's last value back; on the page's first run in a session the URL's value, validated
    (a refused one is shown with its rule and the default used); else the default. What the
    link changed is shown here until one of these widgets changes."""
    state = st.session_state
    store = state.setdefault(KEY_PAGE_VALUES, {})
    keys = {prefix + link.name: f"{page}.{link.name}" for link in links}
    first = page not in state.setdefault(KEY_PAGE_LINKS_READ, set())
    messages = _read_links(page, links, store) if first else []
    for link in links:
        key = prefix + link.name
        if key not in state:
            state[key] = store.get(keys[key], link.default)
    notes = state.setdefault(KEY_PAGE_NOTES, {})
    current = {key: state[key] for key in keys}
    if first:
        state[KEY_PAGE_LINKS_READ].add(page)
        notes[page] = (current, messages)
    state[KEY_LINKED] = {prefix + link.name: (keys[prefix + link.name], link.default) for link in links}
    for key in keys:
        remember(key)
    for url_key in list(st.query_params.to_dict()):
        owner = url_key.split(".", 1)[0]
        if "." in url_key and owner in LINKED_PAGES and owner != page:
            del st.query_params[url_key]
    read_values, messages = notes.get(page, ({}, []))
    if read_values != current:
        notes[page], messages = (current, []), []
    for kind, message in messages:
        (show_error if kind == "error" else show_warning)(message)


def _read_links(page: str, links: Sequence[Link], store: dict) -> list[tuple[str, str]]:
    """The page's values from the URL into ``store``; one ("error" or "warning", message) per
    value refused or moved within bounds."""
    query = st.query_params.to_dict()
    messages = []
    for link in links:
        url_key = f"{page}.{link.name}"
        if url_key not in query:
            continue
        try:
            value, note = link.read(url_key, query[url_key])
        except LabError as exc:
            messages.append(("error", f"Link: {exc}; using {link.default} instead."))
            continue
        store[url_key] = value
        if note:
            messages.append(("warning", note))
    return messages


def remember(key: str) -> None:
    """Keep the current value of a linked widget for later visits and in the URL, unless it is
    the default: a default follows the sidebar (a later visit gets the default of then), and
    the URL stays short (the sidebar it also holds gives the same default)."""
    state = st.session_state
    url_key, default = state.get(KEY_LINKED, {}).get(key, (None, None))
    if url_key is None or key not in state:
        return
    store = state.setdefault(KEY_PAGE_VALUES, {})
    if state[key] == default or _bounded_default(key):
        store.pop(url_key, None)
        if url_key in st.query_params:
            del st.query_params[url_key]
        return
    store[url_key] = state[key]
    if st.query_params.get(url_key) != str(state[key]):
        st.query_params[url_key] = str(state[key])


# ---- values within their widget's bounds --------------------------------------------------------
class Moved(NamedTuple):
    """What a bound did to a widget's value (``KEY_BOUND_NOTES``): set it to ``value``, noted.
    ``wanted``: the value given back once the bound no longer binds (None: none); when
    ``default``, that is the widget's default of then (a bounded default follows the sidebar,
    and is neither kept for later visits nor written into the URL)."""

    value: Any
    note: str
    wanted: Any = None
    default: bool = False


def _linked_default(key: str) -> tuple[bool, Any]:
    """Whether ``key`` is a linked widget of this page, and its default."""
    linked = st.session_state.get(KEY_LINKED, {})
    return key in linked, linked.get(key, (None, None))[1]


def _bounded_default(key: str) -> bool:
    """Whether ``key`` holds the value a bound set in place of its default."""
    moved = st.session_state.get(KEY_BOUND_NOTES, {}).get(key)
    return moved is not None and moved.default and moved.value == st.session_state.get(key)


def _moved(key: str, value: Any, note: str, wanted: Any = None) -> None:
    """Set ``key`` to ``value`` with its note; ``wanted``: the value it replaced, given back
    once the bound that moved it no longer binds (``keep_within``)."""
    state = st.session_state
    linked, default = _linked_default(key)
    state[key] = value
    moved = Moved(value, note, wanted, linked and wanted is not None and wanted == default)
    state.setdefault(KEY_BOUND_NOTES, {})[key] = moved
    remember(key)
    url_key = state.get(KEY_LINKED, {}).get(key, (None,))[0]  # the link's notes stay shown
    read_values = state.get(KEY_PAGE_NOTES, {}).get(str(url_key).split(".")[0], ({}, []))[0]
    if key in read_values:
        read_values[key] = value


def keep_within(key: str, lower: Any, upper: Any, label: str, why: str = "") -> None:
    """Bring ``st.session_state[key]`` within [lower, upper] before its widget is drawn
    (Streamlit would silently reset it), noting the bound; ``why`` says where a bound comes
    from, e.g. " (this model's max_seq_len)". While the value is the one a bound set, the value
    it replaced is what is bounded: the user's own, or the default of now (the sidebar's T, say,
    after the sidebar changed), so it comes back, and the note goes, once it fits."""
    state = st.session_state
    value = state.get(key)
    moved = state.get(KEY_BOUND_NOTES, {}).get(key)
    if moved is not None and moved.value == value and moved.wanted is not None:
        del state[KEY_BOUND_NOTES][key]
        value = _linked_default(key)[1] if moved.default else moved.wanted
    if value is None:
        return
    if lower <= value <= upper:
        if state[key] != value:
            state[key] = value
            remember(key)
        return
    bound, side = (upper, "above the maximum") if value > upper else (lower, "below the minimum")
    _moved(key, bound, f"{label}: {value:,} is {side} {bound:,}{why}; using {bound:,}.", wanted=value)


def keep_choice(key: str, options: Sequence[Any], fallback: Any, label: str, rule: str) -> None:
    """Make ``st.session_state[key]`` one of ``options`` before its widget is drawn: a value
    that no longer is one (its options changed) becomes ``fallback``, noting ``rule``."""
    value = st.session_state.get(key)
    if value in options:
        return
    if value is None:
        st.session_state[key] = fallback
        remember(key)
        return
    _moved(key, fallback, f"{label}: {value} is not a choice ({rule}); using {fallback}.")


def bound_note(key: str, where: Any = None) -> None:
    """The note of ``keep_within``/``keep_choice``, shown while the value is the one it set."""
    notes = st.session_state.get(KEY_BOUND_NOTES, {})
    if key not in notes:
        return
    moved = notes[key]
    if st.session_state.get(key) == moved.value:
        _host(where).caption("⚠️ " + escape_markdown(moved.note))
    else:
        del notes[key]


def bounded_number(
    label: str, lower: Any, upper: Any, key: str, where: Any = None, why: str = "", **kwargs: Any
) -> Any:
    """``st.number_input(label, lower, upper, key=key)`` (in ``where``, e.g. a column) after
    ``keep_within``, with its note under the widget."""
    keep_within(key, lower, upper, label, why)
    value = _host(where).number_input(label, lower, upper, key=key, **kwargs)
    bound_note(key, where)
    return value


# ---- the live-run box ---------------------------------------------------------------------------
LIVE_SIZE_HEADING = "Live-run size (this page only)"


@contextmanager
def live_size_box() -> Iterator[None]:
    """A bordered box headed ``LIVE_SIZE_HEADING`` for a page's live-run widgets, so they are
    not mistaken for the sidebar's model and workload."""
    with st.container(border=True):
        st.subheader(
            LIVE_SIZE_HEADING,
            help="These sizes apply to this page's live runs only; the sidebar's "
            "model and workload stay as they are (its recipe is used).",
        )
        yield
