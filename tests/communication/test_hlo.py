"""Reading collectives from compiled XLA text, in every device-group format XLA prints."""

from course_utils.communication.hlo import Source, collective_ops, parse_collectives


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


def test_op_names_unwrap_transformations_and_split_combined_sources():
    from course_utils.communication.hlo import parse_op_name

    (backward,) = parse_op_name("jit(train_step)/transpose(jvp(gemma_backbone))/decoder_block_0/ffw_gating/"
                                "btd,df->btf/dot_general")
    assert backward == Source("gemma_backbone/decoder_block_0/ffw_gating", "dot_general", True, "btd,df->btf")
    combined = parse_op_name("jit(train_step)/jvp(gemma_backbone)/decoder_block_0/attention/"
                             "(value/bsd,kdh->bskh/dot_general:key/bsd,kdh->bskh/dot_general)")
    assert [(s.scope, s.op, s.backward) for s in combined] == [
        ("gemma_backbone/decoder_block_0/attention/value", "dot_general", False),
        ("gemma_backbone/decoder_block_0/attention/key", "dot_general", False)]
    mixed = parse_op_name("jit(step)/(jvp(compile_loss)/mse/reduce_sum:transpose(jvp(mlp))/d1/dot_general)")
    assert [(s.scope, s.backward) for s in mixed] == [("compile_loss/mse", False), ("mlp/d1", True)]
    (inner_jit,) = parse_op_name("jit(train_step)/jvp(m)/token_embedding/jit(_take)/gather")
    assert inner_jit.scope == "m/token_embedding" and inner_jit.op == "gather"


def test_collective_ops_read_the_source_and_the_program_input():
    from course_utils.communication.hlo import collective_ops

    text = "\n".join([
        '  %param.12 = f32[32,16]{1,0} parameter(7), sharding={devices=[2,4]<=[8]}, metadata={op_name="state[0][7]"}',
        "  %wrapped_copy.3 = f32[32,16]{0,1} fusion(%param.12), kind=kLoop, calls=%wrapped_copy_computation",
        "  %add.1 = f32[32,16]{1,0} add(%param.12, %param.12)",
        '  %all-gather.30 = f32[64,16]{1,0} all-gather(%wrapped_copy.3), channel_id=93, replica_groups=[4,2]<=[2,4]T(1,0), '
        'dimensions={0}, metadata={op_name="jit(train_step)/transpose(jvp(m))/d1/dot_general" stack_frame_id=3}',
        "  %all-reduce.2 = f32[32,16]{1,0} all-reduce(%add.1), replica_groups=[2,4]<=[8], to_apply=%sum",
    ])
    gather, reduce = collective_ops(text, ("data", "model"), (2, 4))
    assert (gather.name, gather.kind, gather.axes, gather.bytes, gather.shapes) == (
        "all-gather.30", "all-gather", ("data",), 64 * 16 * 4, ((64, 16),))
    assert gather.operand == "state[0][7]" and gather.sources == (Source("m/d1", "dot_general", True),)
    assert reduce.operand == "" and reduce.sources == () and reduce.axes == ("model",)


COMBINED = """\
%a = f32[] reduce(%x), metadata={op_name="jit(train_step)/jvp(compile_loss)/mse/reduce_sum"}
%all-reduce.7 = (f32[], f32[8,4]{1,0}) all-reduce(%a, %b), channel_id=1, replica_groups=[1,8]<=[8], to_apply=%add, metadata={op_name="jit(train_step)/(jvp(compile_loss)/mse/reduce_sum:transpose(jvp(model))/dense/dot_general)"}
%gte.1 = f32[] get-tuple-element(%all-reduce.7), index=0, metadata={op_name="jit(train_step)/jvp(compile_loss)/mse/reduce_sum"}
%gte.2 = f32[8,4]{1,0} get-tuple-element(%all-reduce.7), index=1, metadata={op_name="jit(train_step)/transpose(jvp(model))/dense/dot_general"}
%all-gather.3 = f32[8,4]{1,0} all-gather(%c), channel_id=2, replica_groups=[1,8]<=[8], dimensions={0}, metadata={op_name="jit(train_step)/jvp(model)/dense/dot_general"}
"""


def test_a_combined_collective_is_read_array_by_array():
    ops = {op.name: op for op in collective_ops(COMBINED, ("data",), (8,))}
    parts = [[(s.scope, s.op, s.backward) for s in array] for array in ops["all-reduce.7"].parts]
    assert parts == [[("compile_loss/mse", "reduce_sum", False)], [("model/dense", "dot_general", True)]]
    assert len(ops["all-reduce.7"].sources) == 2 and ops["all-reduce.7"].bytes == 4 + 8 * 4 * 4
    assert ops["all-gather.3"].parts == (ops["all-gather.3"].sources,)  # one array: its own line says it
    assert [(s.scope, s.op) for s in ops["all-reduce.7"].operand_sources] == [("compile_loss/mse", "reduce_sum")]
