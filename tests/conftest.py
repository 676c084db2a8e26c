"""The test run uses 8 simulated CPU devices, set up before anything starts JAX."""

import os

os.environ["COURSE_PLATFORM"] = "cpu"
os.environ.setdefault("KERAS_BACKEND", "jax")

from course_utils import setup_devices  # noqa: E402

SETUP = setup_devices(8)
