"""Rendering a collected ``Report``: one self-contained HTML file (plotly.js inlined once, so it
opens offline), JSON (plain numbers), Markdown tables, or a zip of CSVs (one ``<table
name>.csv`` per table plus ``index.csv``). Every format holds the same numbers: HTML and
Markdown show them as people read them (``figures.common.table_text``), JSON and CSV raw; a
table longer than ``LONG_TABLE_ROWS`` (every step of a run, block × step gradient norms) is
summarised in HTML and Markdown and whole in JSON and CSV.

Every string taken from the report — titles, notes, config values, key and file names, table
cells, whatever a user typed or uploaded — is HTML-escaped (controls stripped first) in the
HTML and ``escape_markdown``-ed in the Markdown; only the renderer's own words are not.
"""

from __future__ import annotations

import html
import io
import json
import numbers
import os
import re
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..errors import ReportError
from ..figures.common import Table, column_label, format_cell, table_text
from ..units import escape_markdown, strip_control
from .build import Report

FORMATS = ("html", "json", "md", "csv")
MAX_SHOWN_ROWS = 400  # HTML and Markdown show this many rows of a table; JSON and CSV all
LONG_TABLE_ROWS = 50  # longer tables are summarised in HTML and Markdown, whole in JSON/CSV
NUMBER_CELL = '<td class="num">'
SUMMARY_VALUES = 8  # a summary lists a text column's values when it has at most this many


def _h(text: Any) -> str:
    """Report text for HTML: controls stripped, then escaped (quotes too)."""
    return html.escape(strip_control(text))


def _md(text: Any) -> str:
    """Report text for one line of Markdown (a heading, a table cell): ``escape_markdown``,
    newlines as spaces."""
    return escape_markdown(text).replace("\n", " ")


def _anchor(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


def _figure_id(name: str) -> str:
    return "figure-" + re.sub(r"[^A-Za-z0-9_-]", "-", name)


def _numeric_column(column: pd.Series) -> bool:
    """Whether a column is right-aligned: numbers (and blanks) only; a field/value table's
    mixed column reads left-aligned."""
    if pd.api.types.is_bool_dtype(column.dtype):
        return False
    if pd.api.types.is_numeric_dtype(column.dtype):
        return True
    values = column.dropna().tolist()
    return bool(values) and all(_is_number(v) for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_))


CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, "Noto Sans CJK SC",
       "PingFang SC", "Microsoft YaHei", sans-serif;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #eee; padding-bottom: .2em; }
h3 { font-size: 1.05em; margin-top: 1.5em; }
.table-wrap { max-width: 100%; overflow-x: auto; margin: .5em 0 1em; }
table { border-collapse: collapse; width: 100%; font-size: .85em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; vertical-align: top; }
th { background: #f4f6f8; text-align: left; white-space: normal; }
td { overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap;
         overflow-wrap: normal; }
tr:nth-child(even) td { background: #fafafa; }
p.note { color: #555; font-size: .9em; margin-top: -.3em; }
p.summary { background: #f6f8fa; border-left: 3px solid #ccd; padding: .5em .8em; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; font-size: .85em; }
nav ul { columns: 2; }
.figure { margin: 1em 0 2em; max-width: 100%; overflow-x: auto; }
"""


def _rows_left_out(frame: pd.DataFrame) -> str:
    left_out = len(frame) - MAX_SHOWN_ROWS
    return (
        (f"First {MAX_SHOWN_ROWS:,} of {len(frame):,} rows; all of them are in the JSON and CSV downloads.")
        if left_out > 0
        else ""
    )


def is_long(table: Table) -> bool:
    """Whether HTML and Markdown summarise ``table`` instead of showing it."""
    return len(table.frame) > LONG_TABLE_ROWS


def _column_summary(name: Any, column: pd.Series) -> str:
    label = column_label(name)
    if pd.api.types.is_integer_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column):
        return f"{label} {format_cell(column.min())}–{format_cell(column.max())}"
    if column.dtype == object or pd.api.types.is_string_dtype(column.dtype):
        values = list(dict.fromkeys(column.dropna().map(str)))
        if len(values) <= SUMMARY_VALUES:
            return f"{label}: " + "; ".join(values)
    return label


def table_summary(table: Table) -> str:
    """What a summarised table holds: its size, each column (an integer column's range, a text
    column's values when few) and where the rows are."""
    frame = table.frame
    columns = ", ".join(_column_summary(name, frame[name]) for name in frame.columns)
    return (
        f"{len(frame):,} rows × {frame.shape[1]} columns, too long to show here — columns: "
        f"{columns}. Every row is in the CSV zip as {table.name}.csv and in the JSON under "
        f"tables → {table.name}."
    )


def _html_table(frame: pd.DataFrame) -> str:
    note = _rows_left_out(frame)
    frame = frame.head(MAX_SHOWN_ROWS)
    text = table_text(frame)
    head = "".join(f"<th>{_h(c)}</th>" for c in text.columns)
    opening = [NUMBER_CELL if _numeric_column(frame.iloc[:, i]) else "<td>" for i in range(frame.shape[1])]
    rows = [
        "<tr>" + "".join(f"{start}{_h(cell)}</td>" for start, cell in zip(opening, shown)) + "</tr>"
        for shown in text.itertuples(index=False)
    ]
    table = (
        f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table></div>"
    )
    return table + (f'<p class="note">{note}</p>' if note else "")


def _html_section(report: Report, section: str) -> list[str]:
    parts = [f'<h2 id="{_anchor(section)}">{_h(section)}</h2>']
    if section == "Configuration" and report.hf_config_note:
        parts.append(f'<p class="note">No Hugging Face config.json: {_h(report.hf_config_note)}</p>')
    for figure in (f for f in report.figures if f.section == section):
        div = figure.figure.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=_figure_id(figure.name),
            config={"displaylogo": False, "responsive": True},
        )
        # plotly's JSON escapes <, > and C0 controls, not bidi overrides or C1 controls
        parts.append(f'<div class="figure">{strip_control(div)}</div>')
    for table in (t for t in report.tables if t.section == section):
        parts.append(f"<h3>{_h(table.title)}</h3>")
        if table.note:
            parts.append(f'<p class="note">{_h(table.note)}</p>')
        parts.append(
            f'<p class="summary">{_h(table_summary(table))}</p>'
            if is_long(table)
            else _html_table(table.frame)
        )
    return parts


def render_html(report: Report) -> str:
    from plotly.offline import get_plotlyjs

    parts = [
        f"<h1>{_h(report.title)}</h1>",
        f"<p>Generated {_h(report.environment['time_utc'])} by LLaMA Lab "
        f"{_h(report.environment['llama_lab'])}. Workload: "
        + ", ".join(f"{_h(k)} = {_h(v)}" for k, v in report.workload.items())
        + ". Every number is computed; FLOPs count 2 per multiply-add.</p>",
    ]
    for note in report.notes:
        parts.append(f'<p class="note">Note: {_h(note)}</p>')
    parts.append(
        "<nav><ul>"
        + "".join(f'<li><a href="#{_anchor(s)}">{_h(s)}</a></li>' for s in report.sections)
        + "</ul></nav>"
    )
    for section in report.sections:
        parts += _html_section(report, section)
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_h(report.title)}</title>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<style>{CSS}</style>"
        # plotly.js, inlined once: the file opens offline.
        f'<script type="text/javascript">{get_plotlyjs()}</script>'
        f"</head><body>\n{body}\n</body></html>\n"
    )


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False)


def markdown_table(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table: headers and text cells ``escape_markdown``-ed, numbers as
    ``format_cell`` writes them, right-aligned."""
    text = table_text(frame.head(MAX_SHOWN_ROWS))
    header = "| " + " | ".join(_md(c) for c in text.columns) + " |"
    rule = (
        "|"
        + "|".join("---:" if _numeric_column(frame.iloc[:, i]) else "---" for i in range(frame.shape[1]))
        + "|"
    )
    rows = [
        "| " + " | ".join(cell if _is_number(value) else _md(cell) for value, cell in zip(raw, shown)) + " |"
        for raw, shown in zip(
            frame.head(MAX_SHOWN_ROWS).itertuples(index=False), text.itertuples(index=False)
        )
    ]
    note = _rows_left_out(frame)
    return "\n".join([header, rule, *rows] + (["", note] if note else []))


def _markdown_section(report: Report, section: str) -> list[str]:
    lines = ["", f"## {_md(section)}", ""]
    if section == "Configuration" and report.hf_config_note:
        lines += [f"No Hugging Face config.json: {_md(report.hf_config_note)}", ""]
    for figure in (f for f in report.figures if f.section == section):
        lines += [f"*Figure: {_md(figure.title)} (interactive in the HTML report).*", ""]
    for table in (t for t in report.tables if t.section == section):
        lines += [f"### {_md(table.title)}", ""]
        if table.note:
            lines += [_md(table.note), ""]
        lines += [f"> {_md(table_summary(table))}" if is_long(table) else markdown_table(table.frame), ""]
    return lines


def render_markdown(report: Report) -> str:
    lines = [
        f"# {_md(report.title)}",
        "",
        f"Generated {_md(report.environment['time_utc'])}. Workload: "
        + ", ".join(f"{_md(k)} = {_md(v)}" for k, v in report.workload.items())
        + ".",
        "",
    ]
    lines += [f"> Note: {_md(note)}" for note in report.notes]
    for section in report.sections:
        lines += _markdown_section(report, section)
    return "\n".join(lines) + "\n"


def render_csv(report: Report) -> bytes:
    """A zip archive: one ``<name>.csv`` per table (raw numbers, no formatting) and
    ``index.csv`` (file, section, title, note)."""
    buffer = io.BytesIO()
    index = []
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for table in report.tables:
            archive.writestr(f"{table.name}.csv", table.frame.to_csv(index=False))
            index.append(
                {
                    "file": f"{table.name}.csv",
                    "section": table.section,
                    "title": table.title,
                    "note": table.note,
                }
            )
        archive.writestr("index.csv", pd.DataFrame(index).to_csv(index=False))
    return buffer.getvalue()


def render(report: Report, fmt: str) -> str | bytes:
    """``html``, ``json`` and ``md`` give text; ``csv`` gives the zip's bytes."""
    renderers: dict[str, Callable[[Report], str | bytes]] = {
        "html": render_html,
        "json": render_json,
        "md": render_markdown,
        "csv": render_csv,
    }
    if fmt not in renderers:
        raise ReportError(f"format={fmt!r} must be one of {', '.join(FORMATS)}")
    return renderers[fmt](report)


def check_output(path: Path) -> Path:
    """``path`` resolved, if it is a regular file or does not exist yet; a folder, FIFO,
    device, socket or symlink loop is a ReportError (checked before any work is done)."""
    name = strip_control(repr(str(path)))
    try:
        info = os.stat(path)  # follows symlinks; a loop raises ELOOP
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise ReportError(f"cannot write {name}: {exc.strerror or exc}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, device or socket)"
        raise ReportError(f"cannot write {name}: it is {kind}; give a file path, or '-' for stdout")
    try:
        return path.resolve()  # through a symlink: replace its target, not the link
    except (OSError, RuntimeError) as exc:
        raise ReportError(f"cannot write {name}: {exc}") from None


def write_atomically(path: Path, content: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place, so an interrupted or
    failed export never leaves a half-written report."""
    path = check_output(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent or ".")
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it 0600; a report is an ordinary file
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise ReportError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
