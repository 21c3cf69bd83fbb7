"""The jinja2 environment and the page writer.

Autoescape is on for every template, so anything that came from a test (names,
messages, operator names) is rendered as text.  Links are relative to the page
(``root`` is "../" per directory level), which is what makes the site work from
``file://`` as well as from any static host; with ``base_url`` each page also
shows an absolute permalink.
"""
from __future__ import annotations

import json
from numbers import Number
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from torchconform import __version__
from torchconform.dashboard import charts, styles
from torchconform.dashboard.staging import write_text
from torchconform.dashboard.tables import Table, write_downloads
from torchconform.safe import safe_file_name

TEMPLATES = Path(__file__).with_name("templates")
STATIC = Path(__file__).with_name("static")


def fmt_num(value) -> str:
    return f"{int(value):,}" if value is not None else "\u2013"


def fmt_pct(value) -> str:
    return f"{100 * value:.1f}%" if value is not None else "\u2013"


def js_string(value) -> Markup:
    """A JSON literal safe inside a <script> element (no '</script>' can close it)."""
    text = json.dumps(value, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _cell_html(v) -> str:
    """One non-string cell of a table body: integers with separators, floats to 3 digits, None empty."""
    if isinstance(v, int) and v is not True and v is not False:
        return fmt_num(v)
    if isinstance(v, float):
        return str(escape("%.3g" % v))
    if v is None:
        return ""
    return str(escape(v))


def table_rows(t: Table, limit, root: str) -> Markup:
    """The <tr> lines of a table's body, each ending in a newline: what the table
    macro's row loop wrote, cell for cell, at a fraction of the template cost
    (a diff page has thousands of cells; each distinct string is escaped once)."""
    rows = t.rows if limit is None else t.rows[:limit]
    # the macro finds a column's links and classes by its name (a repeated name finds the first)
    links = [t.links.get(c) or None for c in t.columns]
    classes = [t.classes.get(c) or None for c in t.columns]
    root = str(escape(root))
    texts: dict[str, str] = {}
    opens: dict[str, str] = {}
    out = []
    for i, row in enumerate(rows):
        cells = ["<tr>"]
        for v, lk, cl in zip(row, links, classes):
            if type(v) is str:
                html = texts.get(v)
                if html is None:
                    html = texts[v] = str(escape(v))
                number = False
            else:
                html, number = _cell_html(v), isinstance(v, Number)
            cls = cl.get(i) if cl is not None else None
            if number:
                cells.append('<td class="n">')
            elif cls:
                td = opens.get(cls)
                if td is None:
                    td = opens[cls] = f'<td class="c-{escape(cls)}">'
                cells.append(td)
            else:
                cells.append("<td>")
            href = lk.get(i) if lk is not None else None
            if href:
                cells.append(f'<a href="{root}{escape(href)}">{html}</a></td>')
            else:
                cells.append(html + "</td>")
        cells.append("</tr>\n")
        out.append("".join(cells))
    return Markup("".join(out))


def make_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its extension
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,  # a missing value is a bug, not an empty cell
    )
    env.filters["num"] = fmt_num
    env.filters["pct"] = fmt_pct
    env.filters["js"] = js_string
    env.globals["table_rows"] = table_rows
    env.globals["styles"] = styles
    env.globals["pattern_defs"] = charts.pattern_defs
    env.globals["version"] = __version__
    return env



def read_data_file(path: Path):
    """Payload of a ``TC.loaded(key, payload);`` data file (what Site.write_data wrote)."""
    text = path.read_text(encoding="utf-8")
    start = text.index(",") + 1
    return json.loads(text[start:text.rindex(");")].replace("<\\/", "</"))


class Site:
    """Writes pages and downloads under ``out_dir``; knows each page's depth and permalink."""

    def __init__(self, out_dir: Path, base_url: str | None = None, title: str = "torchconform coverage"):
        self.out_dir = Path(out_dir)
        self.base_url = base_url.rstrip("/") + "/" if base_url else None
        self.title = title
        self.env = make_env()

    def permalink(self, relpath: str) -> str:
        return (self.base_url + relpath) if self.base_url else relpath

    def page(self, relpath: str, template: str, *, title: str, downloads: list[Table] = (), **context) -> Path:
        depth = relpath.count("/")
        root = "../" * depth
        for table in downloads:
            write_downloads(self.out_dir, table)
        html = self.env.get_template(template).render(
            root=root, relpath=relpath, permalink=self.permalink(relpath), title=title,
            site_title=self.title, **context,
        )
        path = self.out_dir / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, html)
        return path

    def write_data(self, relpath: str, key: str, payload) -> None:
        """Lazily loaded data as a script that hands ``payload`` to the page.

        Browsers refuse fetch()/XHR on file:// URLs but do load <script src>, so
        big data travels as ``TC.loaded(key, {...})`` scripts injected on demand.
        """
        path = self.out_dir / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False)
        body = body.replace("</", "<\\/")  # keep the script element closed only by its end
        write_text(path, f"TC.loaded({json.dumps(key)},{body});\n")


def slugify(name: str, taken: set[str]) -> str:
    """A file-name-safe, unique, readable slug for a build name (``safe_file_name``;
    ``-2``, ``-3``... for names only a case-insensitive file system confuses)."""
    base = safe_file_name(name)
    slug, i = base, 2
    while slug.lower() in taken:
        slug = f"{base}-{i}"
        i += 1
    taken.add(slug.lower())
    return slug
