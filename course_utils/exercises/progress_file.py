"""The progress file: read whatever a save (or a spreadsheet) wrote; write without losing a row.

`read` accepts a file written by `Progress.save` and what a spreadsheet makes
of one: a UTF-8 byte-order mark, Windows' Latin encoding, `;` between columns,
a Macintosh line end. It also reads the files an earlier course_utils wrote
from a name with a line break in it. Every name read or saved is written one
way (`student_name`), so " Ana", "Ana\r" and "Ana" are one student.
Whatever it cannot read raises `ProgressFileError`, naming the file, the row
and what to do. `write` replaces a file atomically (a new file beside it,
flushed, renamed over); `set_aside` renames a damaged file out of the way.
The lock that lets several writers share one file is `Progress.save`'s.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

from course_utils.exercises.core import CORRECT, NOT_ATTEMPTED, NOT_YET

STATUSES = (NOT_ATTEMPTED, NOT_YET, CORRECT)  # worst to best
FIELDS = ("student", "exercise", "status", "attempts")
FORMAT = 1  # a JSON file says {"format": 1, "rows": [...]}; a plain list of rows is read as format 1 too


class ProgressFileError(ValueError):
    """A progress file that cannot be read: the message names the file, what is wrong and what to do."""


@dataclass(frozen=True)
class Row:
    """One exercise of one learner: the best status reached and how many answers were checked."""

    student: str
    exercise: str
    status: str
    attempts: int


def student_name(raw: str) -> str:
    """A student's name in one spelling: composed accents (NFC), every run of spaces, tabs, line breaks
    or other control characters one space, none at either end. `Progress.save` and `read` both use it.

    Example:
        >>> student_name("  Ana\\r\\n  Lima ")
        'Ana Lima'
    """
    text = unicodedata.normalize("NFC", str(raw))
    return " ".join("".join(" " if unicodedata.category(c) == "Cc" else c for c in text).split())


def read(path: str | Path) -> list[Row]:
    """The rows of a file written by `Progress.save` (or by a spreadsheet from such a file).

    Raises:
        FileNotFoundError: Nothing is at `path`.
        ProgressFileError: The file is empty, cut off, of a newer format, or a row holds a status
            or a number of attempts that is not one (the message names the file and the row).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        what = "a folder" if path.is_dir() else "nothing"
        raise FileNotFoundError(f"No progress file at {str(path)!r}: {what} is there (looked from {os.getcwd()}).")
    text = _decoded(path.read_bytes())
    if not text.strip():
        raise ProgressFileError(f"The progress file {str(path)!r} is empty.")
    records = _json_records(path, text) if path.suffix == ".json" else _csv_records(path, text)
    return [_row(path, n, record) for n, record in enumerate(records, start=1)]


def _decoded(data: bytes) -> str:
    """UTF-8 (with or without the byte-order mark spreadsheets add), else Windows' Latin, else Latin-1."""
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            pass
    return data.decode("latin-1")


def _json_records(path: Path, text: str) -> list:
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ProgressFileError(f"The progress file {str(path)!r} is not whole JSON ({error}); "
                                f"a save into it may have been cut off.") from None
    if isinstance(data, dict):
        version = data.get("format")
        if isinstance(version, int) and version > FORMAT:
            raise ProgressFileError(f"The progress file {str(path)!r} is of format {version}, written by a newer "
                                    f"course_utils; this one reads format {FORMAT}. Update the course "
                                    f"(git pull, then make lab) to read it.")
        data = data.get("rows") if version == FORMAT else None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise ProgressFileError(f"{str(path)!r} is JSON but not a progress file: it holds no list of rows with "
                                f"the fields {', '.join(FIELDS)}.")
    return data


def _csv_records(path: Path, text: str) -> list:
    # Lines end in "\n" or "\r\n", or in a lone "\r" (old Macintosh spreadsheets) when no "\n" is in the file.
    # A lone "\r" in a file that has "\n" is inside a name: an earlier save wrote "Ana\r" unquoted.
    lines = re.sub(r"\r(?!\n)", " ", text) if "\n" in text else text.replace("\r", "\n")
    header = lines.lstrip().splitlines()[0]
    delimiter = ";" if header.count(";") > header.count(",") else ","  # spreadsheets in many languages use ;
    reader = csv.DictReader(io.StringIO(lines), delimiter=delimiter)
    try:
        found = [name.strip().lower() for name in reader.fieldnames or ()]
        missing = [f for f in FIELDS if f not in found]
        if missing:
            raise ProgressFileError(f"The CSV file {str(path)!r} lacks the column(s) {', '.join(missing)}: its "
                                    f"first line names {found}. A progress CSV starts with the line "
                                    f"{','.join(FIELDS)}.")
        return [{k.strip().lower(): v for k, v in r.items() if k} for r in reader]
    except csv.Error as error:
        raise ProgressFileError(f"The CSV file {str(path)!r} cannot be read near line {reader.line_num + 1} "
                                f"({error}). Open it in a text editor, mend that line "
                                f"(student,exercise,status,attempts) and run this again.") from None


def _row(path: Path, n: int, record: dict) -> Row:
    where = f"Row {n} of the progress file {str(path)!r}"
    missing = [f for f in FIELDS if record.get(f) in (None, "")]
    if missing:
        raise ProgressFileError(f"{where} has no {', '.join(missing)}: {record!r}.")
    status = str(record["status"]).strip().lower()
    if status not in STATUSES:
        raise ProgressFileError(f"{where} has status {record['status']!r}; a status is one of "
                                f"{', '.join(repr(s) for s in STATUSES)}.")
    attempts = record["attempts"]
    try:
        count = int(str(attempts).strip()) if not isinstance(attempts, bool) else None
    except ValueError:
        count = None
    if count is None or count < 0:
        raise ProgressFileError(f"{where} has attempts={attempts!r}; attempts is a whole number such as 2.")
    student = re.sub("[\ud800-\udfff]", "\ufffd", student_name(record["student"]))  # so it can be saved again
    if not student:
        raise ProgressFileError(f"{where} has no student: {record!r}.")
    return Row(student, str(record["exercise"]).strip(), status, count)


def set_aside(path: Path) -> Path:
    """Renames a damaged file out of the way, untouched: `progress.damaged-20261202-0915.json`."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside, n = path.with_name(f"{path.stem}.damaged-{stamp}{path.suffix}"), 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.stem}.damaged-{stamp}-{n}{path.suffix}")
    os.replace(path, aside)
    return aside


def write(path: Path, rows: list[Row]) -> None:
    """Writes beside `path`, flushes to disk, renames over it: `path` is always the old file or the new, whole."""
    if path.suffix == ".json":
        text = json.dumps({"format": FORMAT, "rows": [asdict(r) for r in rows]}, indent=1, ensure_ascii=False) + "\n"
    else:
        out = io.StringIO(newline="")
        writer = csv.DictWriter(out, FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(asdict(r) for r in rows)
        text = out.getvalue()
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
