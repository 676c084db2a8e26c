"""The type a collective's arrays were computed in, where XLA CPU widened bf16 to f32 for the program."""

import pytest

from course_utils.communication.hlo import collective_ops

PROGRAM = """HloModule step

%fused_up (p0: bf16[8]) -> f32[8] {
  %p0 = bf16[8]{0} parameter(0)
  %copied = bf16[8]{0} copy(%p0)
  ROOT %wide = f32[8]{0} convert(%copied)
}

%fused_down (q0: f32[4,8], q1: f32[]) -> bf16[4,8] {
  %q0 = f32[4,8]{1,0} parameter(0)
  %q1 = f32[] parameter(1)
  ROOT %narrow = bf16[4,8]{1,0} convert(%q0), metadata={op_name="jit(step)/transpose(jvp(up))/dot_general"}
}

%add_promoted (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

%add (c: f32[], d: f32[]) -> f32[] {
  %c = f32[] parameter(0)
  %d = f32[] parameter(1)
  ROOT %t = f32[] add(%c, %d)
}

ENTRY %main (x: bf16[8], w: f32[4,8], y: bf16[8], z: f32[8]) -> (f32[32], f32[32], bf16[4,8], f32[8], f32[8]) {
  %x = bf16[8]{0} parameter(0)
  %w = f32[4,8]{1,0} parameter(1)
  %y = bf16[8]{0} parameter(2)
  %z = f32[8]{0} parameter(3)
  %widened = f32[8]{0} fusion(%x), kind=kLoop, calls=%fused_up
  %gather.widened = f32[32]{0} all-gather(%widened), replica_groups={{0,1,2,3}}, dimensions={0}
  %cast = f32[8]{0} convert(%y), metadata={op_name="jit(step)/jvp(norm)/convert_element_type"}
  %gather.cast = f32[32]{0} all-gather(%cast), replica_groups={{0,1,2,3}}, dimensions={0}
  %sum.product = (f32[4,8]{1,0}, f32[8]{0}) all-reduce(%w, %z), replica_groups={{0,1,2,3}}, to_apply=%add
  %part = f32[4,8]{1,0} get-tuple-element(%sum.product), index=0
  %loss = f32[8]{0} get-tuple-element(%sum.product), index=1
  %one = f32[] constant(1)
  %down = bf16[4,8]{1,0} fusion(%part, %one), kind=kLoop, calls=%fused_down
  %sum.promoted = f32[8]{0} all-reduce(%z), replica_groups={{0,1,2,3}}, to_apply=%add_promoted
  ROOT %r = (f32[32]{0}, f32[32]{0}, bf16[4,8]{1,0}, f32[8]{0}, f32[8]{0}) tuple(%gather.widened, %gather.cast, %down, %loss, %sum.promoted)
}
"""


def _computed():
    return {op.name: op.computed_dtypes for op in collective_ops(PROGRAM, ("x",), (4,))}


def test_an_array_xla_widened_before_the_collective_was_bf16():
    # a convert of XLA's own (no op_name), reached through a fusion's root and a copy to the bf16 input
    assert _computed()["gather.widened"] == ("bf16",)


def test_the_models_own_cast_to_f32_moves_as_f32():
    assert _computed()["gather.cast"] == ("f32",)


def test_a_product_xla_computed_in_f32_and_narrowed_after_the_sum_was_bf16():
    # the first array is converted down to bf16 inside the fusion that reads it (with the product's own
    # op_name); the second is never narrowed: it was f32
    assert _computed()["sum.product"] == ("bf16", "f32")


def test_a_sum_xla_promoted_was_bf16():
    assert _computed()["sum.promoted"] == ("bf16",)


@pytest.mark.parametrize("dtype, widened", [("float32", False), ("bfloat16", True)])
def test_a_float32_models_arrays_stay_f32_and_a_bfloat16_models_products_move_as_bf16(dtype, widened):
    from keras import distribution

    from course_utils import make_layout_map, make_mesh
    from course_utils.communication.train_step import compile_train_step, training_batch
    from course_utils.models import mlp_block

    mesh = make_mesh((8, 1), ("batch", "model"))
    dist = distribution.ModelParallel(layout_map=make_layout_map(mesh, {}), batch_dim_name="batch")
    block = mlp_block(width=64, hidden=256, dtype=dtype)
    text = compile_train_step(block, dist, training_batch(block, (8 * 32, 64)), donate=True).as_text()
    arrays = {shape: computed for op in collective_ops(text, ("batch", "model"), (8, 1))
              for shape, computed in zip(op.shapes, op.computed_dtypes)}
    # the kernels' gradients, summed over the batch axis
    assert arrays[(256, 64)] == arrays[(64, 256)] == ("bf16" if widened else "f32")
