"""One self-contained HTML page for every report (a run's, an experiment's, a reproduction's):
the page shell and its style, figures embedded as ``data:`` URIs (the page opens offline, alone),
tables, key/value setup tables, explanations one click away (``<details>``), and the sentence
that stands in for a figure with nothing to show.

Nothing here knows what a run or an experiment is: the report modules
(:mod:`experiments.runpage`, :mod:`experiments.report`, :mod:`experiments.reproduce.report`)
decide what goes on the page; this module only writes it.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path

STYLE = """
body{font-family:sans-serif;margin:1.5em auto;max-width:1300px;padding:0 1em;color:#222}
h1{font-size:1.5em} h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}
h3{font-size:1.05em}
table{border-collapse:collapse;font-size:13px;margin:.6em 0}
th,td{border:1px solid #ccc;padding:3px 7px;vertical-align:top;text-align:left}
th{background:#eee} td.num{text-align:right;font-variant-numeric:tabular-nums}
td.ok{background:#d8f5d8} td.miss{background:#f8d0d0} td.warn{background:#fdf0c8}
table.kv th{width:14em;font-weight:normal;color:#444;background:#f6f6f6}
figure{margin:1.2em 0} figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:13px;color:#444;max-width:1100px}
p.note{font-size:13px;color:#555;max-width:1100px} p.empty{font-style:italic;color:#555}
details>summary{cursor:pointer;color:#14a} details{font-size:13px}
code{font-size:12px}
"""


def esc(value) -> str:
    return html.escape(str(value), quote=True)


def data_uri(path: str | Path) -> str:
    """``path``'s bytes as a data URI (PNG or SVG by its suffix)."""
    p = Path(path)
    mime = {".png": "image/png", ".svg": "image/svg+xml"}[p.suffix.lower()]
    return f"data:{mime};base64,{base64.b64encode(p.read_bytes()).decode()}"


class Page:
    """An HTML page built top to bottom; :meth:`write` saves it."""

    def __init__(self, title: str):
        self.title = title
        self.parts: list[str] = [f"<h1>{esc(title)}</h1>"]

    def heading(self, text: str, level: int = 2, anchor: str | None = None) -> "Page":
        ident = f" id='{esc(anchor)}'" if anchor else ""
        self.parts.append(f"<h{level}{ident}>{esc(text)}</h{level}>")
        return self

    def para(self, text: str, cls: str | None = None) -> "Page":
        self.parts.append(f"<p{f' class={cls!r}' if cls else ''}>{esc(text)}</p>")
        return self

    def table(self, head: list[str], rows: list[list], classes: list[list] | None = None) -> "Page":
        self.parts.append(table(head, rows, classes))
        return self

    def setup(self, items: list[tuple[str, object]]) -> "Page":
        """A two-column table of what the results depend on (label, value; a value that is a
        :class:`Raw` is markup, anything else is text)."""
        self.parts.append(setup_table(items))
        return self

    def figure(self, png: str | Path, caption: str) -> "Page":
        """The PNG embedded; the caption names the SVG and PDF written next to it (text as
        text, for print)."""
        p = Path(png)
        others = [p.with_suffix(s).name for s in (".svg", ".pdf") if p.with_suffix(s).exists()]
        extra = f" ({', '.join(others)} next to {p.name})" if others else ""
        self.parts.append(f"<figure><img alt='{esc(caption)}' src='{data_uri(p)}'>"
                          f"<figcaption>{esc(caption)}{esc(extra)}</figcaption></figure>")
        return self

    def empty(self, sentence: str) -> "Page":
        """What stands where a figure would show nothing (all zeros, no data)."""
        return self.para(sentence, cls="empty")

    def html(self) -> str:
        return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
                f"<title>{esc(self.title)}</title><style>{STYLE}</style></head><body>\n"
                + "\n".join(self.parts) + "\n</body></html>\n")

    def write(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.html())
        return p


class Raw(str):
    """Markup to put in a cell as is."""


def _cell(v) -> str:
    return str(v) if isinstance(v, Raw) else esc("–" if v is None else v)


def table(head: list[str], rows: list[list], classes: list[list] | None = None) -> str:
    h = "".join(f"<th>{esc(c)}</th>" for c in head)
    body = []
    for i, row in enumerate(rows):
        cls = classes[i] if classes else [""] * len(row)
        body.append("<tr>" + "".join(f"<td class='{c}'>{_cell(v)}</td>" if c else f"<td>{_cell(v)}</td>"
                                     for v, c in zip(row, cls)) + "</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


def details(summary: str, body: str) -> Raw:
    """``body`` (text, or :class:`Raw` markup) behind a click on ``summary``."""
    return Raw(f"<details><summary>{esc(summary)}</summary>{_cell(body)}</details>")


def setup_table(items: list[tuple[str, object]]) -> Raw:
    """The markup of :meth:`Page.setup`."""
    return Raw("<table class='kv'>" + "".join(f"<tr><th>{esc(k)}</th><td>{_cell(v)}</td></tr>"
                                              for k, v in items) + "</table>")


def link(href: str, text: str) -> Raw:
    return Raw(f"<a href='{esc(href)}'>{esc(text)}</a>")
