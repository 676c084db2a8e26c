"""A model where a model goes, a mesh where a mesh goes: every entry point says so (course_utils/guards.py)."""

import pytest

from course_utils import (communication_report, describe_mesh, draw_mesh, make_layout_map, memory_report,
                          planned_memory)
from course_utils.layouts.layout_map import layout_rows


@pytest.mark.parametrize("call, name", [
    (lambda: memory_report("model"), "memory_report"),
    (lambda: planned_memory(["model"], None), "planned_memory"),
    (lambda: communication_report("model", None, (8, 4)), "communication_report"),
    (lambda: layout_rows("model", None), "Laying out a model"),
])
def test_a_string_or_list_where_a_model_goes_is_refused_by_name(call, name):
    with pytest.raises(TypeError, match=rf"^{name} needs a Keras model .* Received: (str 'model'|list \['model'\])\.$"):
        call()


@pytest.mark.parametrize("call, name", [(lambda: describe_mesh([2, 4]), "describe_mesh"),
                                        (lambda: draw_mesh((2, 4)), "draw_mesh"),
                                        (lambda: make_layout_map("2x4", {}), "make_layout_map")])
def test_a_shape_where_a_mesh_goes_is_refused_with_how_to_make_one(call, name):
    with pytest.raises(TypeError, match=rf"^{name} needs a keras.distribution.DeviceMesh\. Received: .* Make one "
                                        r"with make_mesh\(\(2, 4\), \('data', 'model'\)\)\.$"):
        call()
