"""The package's shape: a lazy flat API, and parts that import only what they need.

Each check runs in a fresh interpreter, since this test process has long
imported everything.
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import course_utils

PACKAGE = Path(course_utils.__file__).parent
ENTRY_POINTS = ("__init__", "__main__", "launch")  # the flat API and the command lines, not library
LIBRARY = tuple(sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ENTRY_POINTS))


def loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin"}).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_importing_the_package_loads_nothing_heavy():
    loaded = loaded_after("import course_utils")
    assert not {"keras", "jax", "matplotlib", "ipywidgets", "nbformat"} & loaded
    assert [m for m in loaded if m.startswith("course_utils")] == ["course_utils"]


def test_a_worker_never_loads_drawing_or_course_machinery():
    loaded = loaded_after("from course_utils import setup_process, local_rows\n"
                          "import course_utils.launch")
    assert "matplotlib" not in loaded and "ipywidgets" not in loaded
    assert not [m for m in loaded if m.startswith(("course_utils.viz", "course_utils.widgets",
                                                   "course_utils.course"))]


def test_a_worker_starts_keras_without_scikit_learn_or_pyplot_and_can_still_import_them():
    code = ("import json, sys\nfrom course_utils import setup_process\nsetup_process(2)\nimport keras\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'matplotlib'))))\n"
            "import sklearn.base, matplotlib\nprint('imported later')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin", "COURSE_COMPILATION_CACHE": "off"})
    assert out.stdout.splitlines() == ["[]", "imported later"], out.stderr


def test_a_lesson_starts_keras_without_scikit_learn_and_can_still_import_it():
    code = ("import json, sys\nfrom course_utils import setup_devices\nsetup_devices(8)\nimport keras\n"
            "print('sklearn' in sys.modules)\nfrom sklearn.datasets import load_digits\n"
            "print(load_digits().data.shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin", "COURSE_COMPILATION_CACHE": "off",
                              "COURSE_PLATFORM": "cpu"})
    assert out.stdout.splitlines() == ["False", "(1797, 64)"], out.stderr


def test_the_library_imports_neither_drawing_nor_machinery():
    loaded = loaded_after("\n".join(f"import course_utils.{name}" for name in LIBRARY))
    assert "matplotlib" not in loaded
    assert not [m for m in loaded if m.startswith(("course_utils.viz", "course_utils.widgets",
                                                   "course_utils.course", "course_utils.multiprocess"))]


def test_the_library_is_every_top_level_module_and_each_is_in_the_flat_api():
    assert {"fit", "layout_checks", "memory", "communication"} <= set(LIBRARY)
    public = set(LIBRARY) - {"_table"}
    assert public <= set(course_utils._SUBMODULES), public - set(course_utils._SUBMODULES)


def test_keras_internals_is_imported_by_library_modules_only():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        if "course_utils.keras_internals" in names or any(
                isinstance(n, ast.ImportFrom) and n.module == "course_utils" and
                any(a.name == "keras_internals" for a in n.names) for n in ast.walk(tree)):
            importers.append(path.relative_to(PACKAGE))
    # the doctor only runs the catalogue's probes and reports them
    outside = [str(p) for p in importers if p.parent != Path(".") and str(p) != "course/doctor.py"]
    assert importers and outside == [], outside


@pytest.mark.parametrize("name", course_utils.__all__)
def test_every_public_name_resolves_from_the_flat_api(name):
    value = getattr(course_utils, name)
    assert getattr(value, "__name__", name) == name or callable(value) or isinstance(value, type)
    assert name in dir(course_utils)


def test_module_and_function_names_do_not_hide_each_other():
    import course_utils.placements as placements_module

    assert placements_module.__name__ == "course_utils.placements"
    assert course_utils.placement is placements_module.placement


def test_an_unknown_name_lists_the_public_ones():
    with pytest.raises(AttributeError, match="no attribute 'draw_meshes'.*draw_mesh"):
        course_utils.draw_meshes
