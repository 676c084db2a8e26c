"""The test run uses 8 simulated CPU devices, set up before anything starts JAX.

Browser tests share one headless Chromium (Debian's, driven by Playwright).
"""

import os
from pathlib import Path

import pytest

os.environ["COURSE_PLATFORM"] = "cpu"
os.environ.setdefault("KERAS_BACKEND", "jax")

from course_utils import setup_devices  # noqa: E402

SETUP = setup_devices(8)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def built_course(tmp_path_factory):
    """The course built once per test session: every lesson executed once, its rendered page and
    its deck side by side (tests/course/test_render.py and test_decks.py share it).

    Returns:
        (the build folder, its index page).
    """
    from course_utils.course import render

    out = tmp_path_factory.mktemp("course_build")
    return out, render.build(Path(__file__).resolve().parents[1] / "notebooks", out)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium driven by Playwright; fails loudly when either is missing.

    Closed at the end of each test module, so no browser process outlives the tests that use it.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("The browser tests need the Playwright package: run `make test` "
                    "(it installs requirements-test.txt) or `pip install -r requirements-test.txt`.")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"The browser tests need Debian's Chromium at {CHROMIUM}: run `make test` "
                    f"or `apt-get install -y chromium`.")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield instance
        finally:
            instance.close()


def _two_dense_mlp(hidden=32):
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [keras.Input((16,)), keras.layers.Dense(hidden, name="d1"), keras.layers.Dense(4, name="d2")],
        name="mlp",
    )


def _megatron_map(mesh):
    from keras import distribution

    layout_map = distribution.LayoutMap(mesh)
    layout_map[".*d1/kernel"] = (None, "model")
    layout_map[".*d1/bias"] = ("model",)
    layout_map[".*d2/kernel"] = ("model", None)
    return layout_map


@pytest.fixture
def mlp():
    """Builds the layout tests' Sequential MLP `mlp` (16 -> d1 -> d2 -> 4), seeded: `mlp(hidden=32)`."""
    return _two_dense_mlp


@pytest.fixture
def good_map():
    """A sound Megatron LayoutMap for `mlp` on a mesh: `good_map(mesh)`."""
    return _megatron_map


@pytest.fixture
def mesh():
    from course_utils import make_mesh

    return make_mesh((2, 4), ("data", "model"))
