"""The package's shape: a lazy flat API, and parts that import only what they need.

Each check runs in a fresh interpreter, since this test process has long
imported everything.
"""

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import course_utils
from course_utils.course.parsing import parse_source

PACKAGE = Path(course_utils.__file__).parent
ENTRY_POINTS = ("__init__", "launch")  # the flat API and the command lines, not library
CONCEPTS = ("layouts", "memory", "communication")  # the library's folders, one concept each
NOT_LIBRARY = ("viz", "widgets", "exercises", "course", "multiprocess", "examples")  # drawing, checkers, machinery, ...
TOP_LEVEL = tuple(sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ENTRY_POINTS))
LIBRARY = TOP_LEVEL + tuple(sorted(f"{c}.{p.stem}" for c in CONCEPTS for p in (PACKAGE / c).glob("*.py")
                                   if p.stem != "__init__"))


def module_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The course_utils modules a file imports, at its top and inside its functions alike: `from course_utils
    import setup_devices` is an import of the module the flat API loads it from."""
    found = set()
    for node in ast.walk(parse_source(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("course_utils.")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("course_utils"):
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if node.module == "course_utils" and alias.name in course_utils._HOME:
                    found.add(course_utils._HOME[alias.name])
                elif importlib.util.find_spec(submodule) if _is_package(node.module) else False:
                    found.add(submodule)
                else:
                    found.add(node.module)
    return found - {"course_utils"}


def _is_package(module: str) -> bool:
    return (PACKAGE.parent / module.replace(".", "/") / "__init__.py").exists()


def import_graph() -> dict[str, set[str]]:
    return {module_of(path): imports_of(path) for path in PACKAGE.rglob("*.py")}


def loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin"}).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.processes
def test_importing_the_package_loads_nothing_heavy():
    loaded = loaded_after("import course_utils")
    assert not {"keras", "jax", "matplotlib", "ipywidgets", "nbformat"} & loaded
    assert [m for m in loaded if m.startswith("course_utils")] == ["course_utils"]


@pytest.mark.processes
def test_a_worker_never_loads_drawing_or_course_machinery():
    loaded = loaded_after("from course_utils import setup_process, local_rows\n"
                          "import course_utils.launch")
    assert "matplotlib" not in loaded and "ipywidgets" not in loaded
    assert not [m for m in loaded if m.startswith(("course_utils.viz", "course_utils.widgets",
                                                   "course_utils.course"))]


@pytest.mark.processes
def test_a_worker_starts_keras_without_scikit_learn_or_pyplot_and_can_still_import_them():
    code = ("import json, sys\nfrom course_utils import setup_process\nsetup_process(2)\nimport keras\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('sklearn', 'matplotlib'))))\n"
            "import sklearn.base, matplotlib\nprint('imported later')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin", "COURSE_COMPILATION_CACHE": "off"})
    assert out.stdout.splitlines() == ["[]", "imported later"], out.stderr


@pytest.mark.processes
def test_a_lesson_starts_keras_without_scikit_learn_and_can_still_import_it():
    code = ("import json, sys\nfrom course_utils import setup_devices\nsetup_devices(8)\nimport keras\n"
            "print('sklearn' in sys.modules)\nfrom sklearn.datasets import load_digits\n"
            "print(load_digits().data.shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"KERAS_BACKEND": "jax", "PATH": "/usr/bin:/bin", "COURSE_COMPILATION_CACHE": "off",
                              "COURSE_PLATFORM": "cpu"})
    assert out.stdout.splitlines() == ["False", "(1797, 64)"], out.stderr


@pytest.mark.processes
def test_the_library_imports_neither_drawing_nor_machinery():
    loaded = loaded_after("\n".join(f"import course_utils.{name}" for name in LIBRARY))
    assert "matplotlib" not in loaded
    assert not [m for m in loaded if m.startswith(("course_utils.viz", "course_utils.widgets",
                                                   "course_utils.course", "course_utils.multiprocess"))]


def test_every_top_level_module_and_folder_is_reachable_from_the_flat_api():
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    public = (set(TOP_LEVEL) | folders) - {"_table", "examples"}
    assert set(CONCEPTS) <= folders
    assert public == set(course_utils._SUBMODULES), public ^ set(course_utils._SUBMODULES)
    for name in public:
        assert importlib.import_module(f"course_utils.{name}") is getattr(course_utils, name)


def test_no_import_cycle_even_through_imports_inside_functions():
    graph = import_graph()
    cycles = [c for c in _strongly_connected(graph) if len(c) > 1]
    assert not cycles, cycles


def test_the_library_imports_neither_drawing_nor_machinery_anywhere():
    graph = import_graph()
    library = {m for m in graph if m != "course_utils" and m.split(".")[1] not in NOT_LIBRARY + ENTRY_POINTS}
    assert {f"course_utils.{m}" for m in LIBRARY} <= library
    wrong = {m: sorted(i for i in graph[m] if i.split(".")[1] in NOT_LIBRARY) for m in library}
    assert not {m: i for m, i in wrong.items() if i}


def test_what_a_lesson_imports_never_loads_the_machinery():
    """The exercise checkers (`check`, `progress`, `expect_error`) are the learner's side: they use the library
    and the drawing, never the course's machinery (publishing, grading, checking, benchmarks)."""
    graph = import_graph()
    learner = {m for m in graph if m.startswith("course_utils.exercises")}
    assert learner
    wrong = {m: sorted(i for i in graph[m] if i.startswith("course_utils.course")) for m in learner}
    assert not {m: i for m, i in wrong.items() if i}


def test_every_job_of_the_machinery_is_reached_one_way():
    """One command line, `python -m course_utils.course <job>`: no module of the machinery or of the exercises has
    a `__main__` block of its own, and every job's module has a `main(argv)`."""
    import importlib

    from course_utils.course.__main__ import JOBS

    own = sorted(str(p.relative_to(PACKAGE)) for folder in ("course", "exercises") for p in (PACKAGE / folder).rglob("*.py")
                 if 'if __name__ == "__main__"' in p.read_text(encoding="utf-8"))
    assert own == ["course/__main__.py"], own
    for job, (module, _) in JOBS.items():
        assert callable(importlib.import_module(module).main), job


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of an import graph."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_keras_internals_is_imported_by_library_modules_only():
    importers = []
    for path in PACKAGE.rglob("*.py"):
        tree = parse_source(path.read_text(encoding="utf-8"))
        names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        if "course_utils.keras_internals" in names or any(
                isinstance(n, ast.ImportFrom) and n.module == "course_utils" and
                any(a.name == "keras_internals" for a in n.names) for n in ast.walk(tree)):
            importers.append(path.relative_to(PACKAGE))
    # the doctor only runs the catalogue's probes and reports them
    outside = [str(p) for p in importers if p.parts[0] in NOT_LIBRARY and str(p) != "course/environment/doctor.py"]
    assert importers and outside == [], outside


@pytest.mark.parametrize("name", course_utils.__all__)
def test_every_public_name_is_the_one_its_home_module_defines(name):
    home = course_utils._HOME[name]
    value = getattr(course_utils, name)
    assert value is getattr(importlib.import_module(home), name)
    source = Path(importlib.util.find_spec(home).origin)
    body = parse_source(source.read_text()).body
    defined = {n.name for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    defined |= {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    imported = {a.asname or a.name for n in body if isinstance(n, ast.ImportFrom) for a in n.names}
    # defined there, or a package's face handing on its own submodule's name
    assert name in defined or (name in imported and source.name == "__init__.py"), (name, home)


def test_module_and_function_names_do_not_hide_each_other():
    import course_utils.placements as placements_module

    assert placements_module.__name__ == "course_utils.placements"
    assert course_utils.placement is placements_module.placement


def test_an_unknown_name_lists_the_public_ones():
    with pytest.raises(AttributeError, match="no attribute 'draw_meshes'.*draw_mesh"):
        course_utils.draw_meshes
