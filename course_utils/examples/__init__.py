"""Scripts meant to run under `python -m course_utils.launch` (or directly, as one process)."""
