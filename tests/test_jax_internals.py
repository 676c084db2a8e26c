"""What the course reads of JAX and XLA still reads as expected, and a change would be named."""

from course_utils import jax_internals


def test_every_part_the_course_reads_is_as_expected():
    assert jax_internals.missing() == [], (
        f"JAX changed what the course reads; course_utils/jax_internals.py was checked against JAX "
        f"{jax_internals.CHECKED_WITH}. Update the reader named in jax_internals.READS.")


def test_a_program_without_the_names_the_course_reads_is_named(monkeypatch):
    real = jax_internals._probe_program
    monkeypatch.setattr(jax_internals, "_probe_program",
                        lambda: real().replace("course_probe/", "").replace("state[0]", "arg0"))
    gone = jax_internals.missing()
    assert any("the name scope is gone from op_name" in g for g in gone)
    assert jax_internals.READS[1][0] in gone


def test_a_name_stack_or_residuals_that_moved_are_named(monkeypatch):
    monkeypatch.setattr(jax_internals, "_name_stack_is_read", lambda: False)
    assert jax_internals.missing() == [jax_internals.READS[0][0]]
    monkeypatch.setattr(jax_internals, "_residuals_are_read", lambda: 1 / 0)
    assert jax_internals.missing() == [jax_internals.READS[0][0], jax_internals.READS[3][0]]


def test_short_locations_are_not_a_missing_part():
    # The course lowers what it reads with full tracebacks (compiling.layer_names_kept), whatever the learner set.
    import jax

    before = jax.config.jax_include_full_tracebacks_in_locations
    jax.config.update("jax_include_full_tracebacks_in_locations", False)
    try:
        assert jax_internals.missing() == []
        assert jax.config.jax_include_full_tracebacks_in_locations is False
    finally:
        jax.config.update("jax_include_full_tracebacks_in_locations", before)


def test_a_locations_context_that_moved_is_named(monkeypatch):
    monkeypatch.setattr(jax_internals, "_locations_are_kept", lambda: 1 / 0)
    assert jax_internals.missing() == [jax_internals.READS[4][0]]
