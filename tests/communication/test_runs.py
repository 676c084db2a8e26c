"""How many times a computation of a compiled program runs: a loop XLA analysed says so itself."""

from course_utils.communication.hlo import collective_ops
from course_utils.communication.runs import executions

# A loop whose counter the program does not write as a constant comparison, but whose count XLA CPU analysed
# and wrote in the loop's backend_config (as it does for a lax.fori_loop inside shard_map: ring attention's).
LOOP = """
%body (p: (s32[], f32[8])) -> (s32[], f32[8]) {
  %p = (s32[], f32[8]) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[8] get-tuple-element(%p), index=1
  %permute = f32[8]{0} collective-permute(%x), channel_id=1, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT %out = (s32[], f32[8]) tuple(%i, %permute)
}

%cond (q: (s32[], f32[8])) -> pred[] {
  %q = (s32[], f32[8]) parameter(0)
  %j = s32[] get-tuple-element(%q), index=0
  %limit = s32[] get-tuple-element(%q), index=0
  ROOT %less = pred[] compare(%j, %limit), direction=LT
}

ENTRY %main (a: f32[8]) -> f32[8] {
  %a = f32[8] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[8]) tuple(%zero, %a)
  %loop = (s32[], f32[8]) while(%init), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"7"}}
  ROOT %r = f32[8] get-tuple-element(%loop), index=1
}
"""


def test_a_loop_with_a_known_trip_count_runs_its_body_that_many_times():
    assert executions(LOOP)["body"] == 7
    (permute,) = collective_ops(LOOP, ("seq",), (4,))
    assert (permute.kind, permute.times) == ("collective-permute", 7)


def test_without_it_a_counter_that_is_not_a_constant_leaves_the_count_unknown():
    assert executions(LOOP.replace(', backend_config={"known_trip_count":{"n":"7"}}', ""))["body"] == 0
