"""Rendering a collected ``Report``: one self-contained HTML file (plotly.js inlined once, so it
opens offline), JSON (plain numbers), Markdown tables, or a zip of CSVs (one ``<table
name>.csv`` per table plus ``index.csv``). Every format holds the same numbers.
"""
from __future__ import annotations

import html
import io
import json
import math
import numbers
import zipfile
from typing import Any

import numpy as np
import pandas as pd

from ..errors import ReportError
from .build import Report


FORMATS = ("html", "json", "md", "csv")
MAX_SHOWN_ROWS = 400       # HTML and Markdown show this many rows of a table; JSON and CSV all


def _cell(value: Any) -> str:
    """Display text of one table cell: thousands separators, 4 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, bool):
        return "✓" if value else "✗"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.4g}"
    return str(value)


def _anchor(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")


CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, "Noto Sans CJK SC",
       "PingFang SC", "Microsoft YaHei", sans-serif;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 1px solid #eee; padding-bottom: .2em; }
h3 { font-size: 1.05em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .85em; display: block;
        overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #ddd; padding: .25em .6em; vertical-align: top; }
th { background: #f4f6f8; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr:nth-child(even) td { background: #fafafa; }
p.note { color: #555; font-size: .9em; margin-top: -.3em; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; font-size: .85em; }
nav ul { columns: 2; }
.figure { margin: 1em 0 2em; }
"""


def _rows_left_out(frame: pd.DataFrame) -> str:
    left_out = len(frame) - MAX_SHOWN_ROWS
    return (f"First {MAX_SHOWN_ROWS:,} of {len(frame):,} rows; all of them are in the JSON and "
            f"CSV downloads.") if left_out > 0 else ""


def _html_table(frame: pd.DataFrame) -> str:
    note = _rows_left_out(frame)
    frame = frame.head(MAX_SHOWN_ROWS)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    rows = []
    for record in frame.itertuples(index=False):
        cells = []
        for value in record:
            numeric = isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_))
            klass = ' class="num"' if numeric else ""
            cells.append(f"<td{klass}>{html.escape(_cell(value))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return table + (f'<p class="note">{note}</p>' if note else "")


def render_html(report: Report) -> str:
    from plotly.offline import get_plotlyjs

    parts = [f"<h1>{html.escape(report.title)}</h1>",
             f"<p>Generated {html.escape(report.environment['time_utc'])} by LLaMA Lab "
             f"{html.escape(str(report.environment['llama_lab']))}. Workload: "
             + ", ".join(f"{k} = {html.escape(str(v))}" for k, v in report.workload.items())
             + ". Every number is computed; FLOPs count 2 per multiply-add.</p>"]
    for note in report.notes:
        parts.append(f'<p class="note">Note: {html.escape(str(note))}</p>')
    parts.append("<nav><ul>" + "".join(
        f'<li><a href="#{_anchor(s)}">{html.escape(s)}</a></li>' for s in report.sections)
        + "</ul></nav>")
    for section in report.sections:
        parts.append(f'<h2 id="{_anchor(section)}">{html.escape(section)}</h2>')
        if section == "Configuration" and report.hf_config_note:
            parts.append(f'<p class="note">No Hugging Face config.json: '
                         f'{html.escape(report.hf_config_note)}</p>')
        for figure in (f for f in report.figures if f.section == section):
            div = figure.figure.to_html(full_html=False, include_plotlyjs=False,
                                        div_id=f"figure-{figure.name}",
                                        config={"displaylogo": False, "responsive": True})
            parts.append(f'<div class="figure">{div}</div>')
        for table in (t for t in report.tables if t.section == section):
            parts.append(f"<h3>{html.escape(table.title)}</h3>")
            if table.note:
                parts.append(f'<p class="note">{html.escape(table.note)}</p>')
            parts.append(_html_table(table.frame))
    body = "\n".join(parts)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(report.title)}</title>"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<style>{CSS}</style>"
            # plotly.js, inlined once: the file opens offline.
            f"<script type=\"text/javascript\">{get_plotlyjs()}</script>"
            f"</head><body>\n{body}\n</body></html>\n")


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=1, ensure_ascii=False, allow_nan=False)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(_md_escape(str(c)) for c in frame.columns) + " |"
    rule = "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(frame[c]) and
                          not pd.api.types.is_bool_dtype(frame[c]) else "---"
                          for c in frame.columns) + "|"
    rows = ["| " + " | ".join(_md_escape(_cell(v)) for v in record) + " |"
            for record in frame.head(MAX_SHOWN_ROWS).itertuples(index=False)]
    note = _rows_left_out(frame)
    return "\n".join([header, rule, *rows] + (["", note] if note else []))


def render_markdown(report: Report) -> str:
    lines = [f"# {report.title}", "",
             f"Generated {report.environment['time_utc']}. Workload: "
             + ", ".join(f"{k} = {v}" for k, v in report.workload.items()) + ".", ""]
    lines += [f"> Note: {note}" for note in report.notes]
    for section in report.sections:
        lines += ["", f"## {section}", ""]
        if section == "Configuration" and report.hf_config_note:
            lines += [f"No Hugging Face config.json: {report.hf_config_note}", ""]
        for figure in (f for f in report.figures if f.section == section):
            lines += [f"*Figure: {figure.title} (interactive in the HTML report).*", ""]
        for table in (t for t in report.tables if t.section == section):
            lines += [f"### {table.title}", ""]
            if table.note:
                lines += [table.note, ""]
            lines += [markdown_table(table.frame), ""]
    return "\n".join(lines) + "\n"


def render_csv(report: Report) -> bytes:
    """A zip archive: one ``<name>.csv`` per table (raw numbers, no formatting) and
    ``index.csv`` (file, section, title, note)."""
    buffer = io.BytesIO()
    index = []
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for table in report.tables:
            archive.writestr(f"{table.name}.csv", table.frame.to_csv(index=False))
            index.append({"file": f"{table.name}.csv", "section": table.section,
                          "title": table.title, "note": table.note})
        archive.writestr("index.csv", pd.DataFrame(index).to_csv(index=False))
    return buffer.getvalue()


def render(report: Report, fmt: str) -> str | bytes:
    """``html``, ``json`` and ``md`` give text; ``csv`` gives the zip's bytes."""
    renderers = {"html": render_html, "json": render_json, "md": render_markdown,
                 "csv": render_csv}
    if fmt not in renderers:
        raise ReportError(f"format={fmt!r} must be one of {', '.join(FORMATS)}")
    return renderers[fmt](report)
