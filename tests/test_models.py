"""The packaged models and their tensor-parallel rules fit every 2-D mesh of 8 devices."""

import pytest

from course_utils import check_layout_map, explain_layout, make_layout_map, make_mesh, mesh_shapes, models



@pytest.mark.parametrize("shape", mesh_shapes(8))
@pytest.mark.parametrize("build, rules", [(models.mlp, models.mlp_rules), (models.transformer_block, models.transformer_rules)])
def test_rules_are_clean_on_every_shape(shape, build, rules):
    from keras import distribution

    model = build()
    layout_map = make_layout_map(make_mesh(shape, ("data", "model")), rules())
    assert check_layout_map(layout_map, model) == []
    report = explain_layout(model, distribution.ModelParallel(layout_map=layout_map, batch_dim_name="data"))
    # every rule splits at least one variable over "model", and only rules do
    assert {r.rule for r in report.rows if "model" in r.axes} == set(rules())


def test_transformer_heads_split_over_model():
    from keras import distribution

    model = models.transformer_block()
    dist = distribution.ModelParallel(
        layout_map=make_layout_map(make_mesh((2, 4), ("data", "model")), models.transformer_rules()),
        batch_dim_name="data",
    )
    report = explain_layout(model, dist)
    assert report.row("attn/query/kernel").shard_shape == (64, 2, 8)  # 8 heads -> 2 per device
    assert report.row("ffn1/kernel").shard_shape == (64, 64)
    assert report.row("head/kernel").rule == "replicated: no rule matched"
