"""Text for people: a small read-only table (a readable repr in a terminal, HTML in a notebook), and
`shown`, how the library and the course machinery quote a value in a message."""

from __future__ import annotations

import html
from collections.abc import Sequence


# Verdict words a note may start with: shown in bold in HTML, where a learner reads them.
VERDICTS = ("NOT equivalent", "EQUIVALENT", "AGREE", "DIFFER")


class Table:
    """Rows of plain values with column headers, then notes (a verdict, a legend).

    Subclasses set `title` and `columns` and fill `rows`; `cells(row)` turns
    one row into the strings shown; `notes()` gives the lines under the
    table, shown the same in the text form and in the HTML a notebook shows.
    """

    title: str = ""
    columns: Sequence[str] = ()

    def __init__(self, rows: Sequence, *, title: str | None = None):
        self.rows = list(rows)
        if title is not None:
            self.title = title

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, i):
        return self.rows[i]

    def cells(self, row) -> list[str]:
        return [str(v) for v in row]

    def notes(self) -> list[str]:
        """The lines under the table (a verdict first, when there is one), in text and HTML alike."""
        return []

    def brief(self, *columns: str) -> "Table":
        """The same rows with only `columns` (by header; by default the class's `brief_columns`), under the same
        title and without the notes: a long table summarised for a slide, kept whole where it was made.

        Example:
            >>> advice.brief("layout", "step ms")
        """
        columns = columns or tuple(getattr(self, "brief_columns", ())) or tuple(self.columns)
        unknown = [c for c in columns if c not in self.columns]
        if unknown:
            raise ValueError(f"brief() takes this table's column headers. Received: {unknown}. "
                             f"Its columns: {list(self.columns)}.")
        at = [list(self.columns).index(c) for c in columns]
        return _Brief([[cells[i] for i in at] for cells in (self.cells(r) for r in self.rows)],
                      columns=columns, title=self.title)

    def _grid(self) -> list[list[str]]:
        return [list(self.columns)] + [self.cells(r) for r in self.rows]

    def __repr__(self) -> str:
        grid = self._grid()
        widths = [max(len(line[i]) for line in grid) for i in range(len(grid[0]))]
        fmt = lambda line: "  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip()
        lines = [fmt(grid[0]), "  ".join("-" * w for w in widths)]
        lines += [fmt(line) for line in grid[1:]]
        head = [self.title] if self.title else []
        return "\n".join(head + lines + self.notes())

    def _repr_html_(self) -> str:
        grid = self._grid()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in grid[0])
        body = "".join(
            "<tr>" + "".join(f"<td><code>{html.escape(c)}</code></td>" for c in line) + "</tr>"
            for line in grid[1:]
        )
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        notes = "".join(f'<p class="table-note">{_note_html(note)}</p>' for note in self.notes())
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{notes}"


class _Brief(Table):
    """Some columns of another table's rows, as that table showed them (`Table.brief`)."""

    def __init__(self, rows, *, columns, title: str):
        super().__init__(rows, title=title)
        self.columns = tuple(columns)

    def cells(self, row) -> list[str]:
        return list(row)


def _note_html(note: str) -> str:
    """A note as HTML: a verdict word at its start (after a "- " bullet, if any) in bold."""
    bullet = "- " if note.startswith("- ") else ""
    text = note[len(bullet):]
    for word in VERDICTS:
        if text.startswith(word):
            return f"{html.escape(bullet)}<strong>{html.escape(word)}</strong>{html.escape(text[len(word):])}"
    return html.escape(note)


def shown(value, limit: int = 80, *, as_text: bool = False) -> str:
    """`repr(value)` (`str` with `as_text`), cut to `limit` characters; the type's name where that fails."""
    try:
        text = str(value) if as_text else repr(value)
    except Exception as error:
        return f"<a {type(value).__name__} object, whose {'str' if as_text else 'repr'} fails: {type(error).__name__}>"
    return text if len(text) <= limit else text[:limit - 3] + "..."
