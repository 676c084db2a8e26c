"""course_utils/_table.py: a table's text and HTML forms, and its brief for a slide."""

import pytest

from course_utils._table import Table


class Sizes(Table):
    title = "Three weights"
    columns = ("name", "shape", "bytes", "rule")
    brief_columns = ("name", "bytes")

    def cells(self, row):
        name, shape, size = row
        return [name, str(shape), f"{size:,}", "replicated" if size < 100 else "split"]

    def notes(self):
        return ["EQUIVALENT: a note kept for the whole table"]


def test_a_brief_keeps_the_rows_and_title_with_fewer_columns_and_no_notes():
    table = Sizes([("d1", (64, 128), 32_768), ("d2", (128, 10), 5_120), ("b", (10,), 40)])
    brief = table.brief()
    assert list(brief.columns) == ["name", "bytes"] and brief.title == "Three weights"
    assert brief._grid()[1:] == [["d1", "32,768"], ["d2", "5,120"], ["b", "40"]]
    assert brief.notes() == [] and "EQUIVALENT" not in brief._repr_html_() and "EQUIVALENT" in table._repr_html_()
    assert "<th>rule</th>" in table._repr_html_() and "<th>rule</th>" not in brief._repr_html_()
    assert table.brief("rule", "name")._grid()[1] == ["split", "d1"]  # in the order asked
    assert len(table.brief()) == 3


def test_a_brief_of_a_table_without_brief_columns_keeps_them_all_and_refuses_an_unknown_one():
    class Plain(Table):
        columns = ("a", "b")

    assert list(Plain([("1", "2")]).brief().columns) == ["a", "b"]
    with pytest.raises(ValueError, match=r"Received: \['GiB'\]. Its columns: \['a', 'b'\]"):
        Plain([("1", "2")]).brief("a", "GiB")
