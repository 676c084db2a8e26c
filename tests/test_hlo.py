"""Reading collectives from compiled XLA text, in every device-group format XLA prints."""

from course_utils.hlo import parse_collectives


def test_parse_every_group_format():
    names, shape = ("data", "model"), (2, 4)
    lines = [
        "%a = f32[8,4]{1,0} all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%add",
        "%b = (f32[], f32[8,16]{1,0}, /*index=5*/f32[4]{0}) all-reduce(%x, %y, %z), replica_groups=mesh['axis_0'=2,'axis_1'=4] {'axis_0'}, to_apply=%add",
        "%c = f32[64]{0} all-gather(%x), replica_groups=mesh['axis_0'=4,'axis_1'=2], device_ids=([2,4]T(1,0)) {'axis_0'}, dimensions={0}",
        "%d = f32[16]{0} reduce-scatter(%x), replica_groups={{0,4},{1,5},{2,6},{3,7}}, dimensions={0}",
        "%e = bf16[4,4]{1,0} collective-permute(%x), source_target_pairs={{0,1},{1,2},{2,3},{3,0}}",
        "%f = f32[2]{0} all-to-all(%x), replica_groups=[4,2]<=[2,4]T(1,0), dimensions={0}",
        "%g = f32[2]{0} add(%x, %y)",
    ]
    found = {(c.kind, c.axes): c.bytes for c in parse_collectives("\n".join(lines), names, shape)}
    assert found == {
        ("all-reduce", ("model",)): 128,
        ("all-reduce", ("data",)): 4 + 512 + 16,
        ("all-gather", ("model",)): 256,
        ("reduce-scatter", ("data",)): 64,
        ("collective-permute", ("model",)): 32,
        ("all-to-all", ("data",)): 8,
    }


def test_counts_add_up_per_kind_and_axes():
    line = "%a = f32[8,4]{1,0} all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%add"
    (collective,) = parse_collectives("\n".join([line, line.replace("%a", "%b")]), ("data", "model"), (2, 4))
    assert collective.count == 2 and collective.bytes == 256 and collective.source == "compiled"
