# The course's two commands:
#   make lab    set up everything (first time only) and open the course in JupyterLab
#   make test   set up everything (first time only) and run the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8888
LIBTPU := libtpu==0.0.42.*
GPU_PLUGIN := jax-cuda12-plugin==0.10.2 jax-cuda12-pjrt==0.10.2
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test test-fast bench tpu-targets gpu-targets doctor slides course publish student student-branch answer-key handout nbgrader clean

# The environment remembers which interpreter made it: naming another one (make lab PYTHON=python3.12)
# makes the environment again with it instead of quietly keeping the old one.
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)
MADE_WITH := $(VENV)/.made-with-python-$(or $(PYTHON_VERSION),unknown)

$(MADE_WITH):
	@test -n "$(PYTHON_VERSION)" || { echo "No Python at PYTHON=$(PYTHON). Name one that exists, e.g. make lab PYTHON=python3.11"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "The course needs Python 3.11 or newer; this is " + sys.version.split()[0] + ". Run: make PYTHON=python3.11 ...")'
	@if [ -d $(VENV) ]; then echo "$(VENV) was made by another Python (or before it said which); making it again with $(PYTHON) ($(PYTHON_VERSION))"; fi
	$(PYTHON) -m venv --clear $(VENV)
	@touch $@

$(BIN)/.installed: $(MADE_WITH) requirements.txt requirements-nodeps.txt pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt -e ".[course]"
	@# keras-hub without the dependencies it declares but the course never uses (see the file)
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-nodeps.txt
	@# every kernel and script of this environment gets Keras on JAX, however it is started
	$(BIN)/python -m course_utils.course doctor --set-keras-backend
	@# a lesson's kernel stops when its tab closes, and idle kernels are culled (see the module)
	$(BIN)/python -m course_utils.course lab-settings
	touch $@

$(BIN)/.test-installed: $(BIN)/.installed requirements-test.txt
	$(BIN)/python -m pip install --quiet -r requirements-test.txt
	@# the TPU's compiler, so that the tests of advise(..., program="tpu") run (see tpu-targets)
	$(BIN)/python -m pip install --quiet --upgrade --target $(VENV)/libtpu "$(LIBTPU)"
	@# XLA's GPU compiler, so that the tests of advise(..., program="gpu") run (see gpu-targets)
	$(BIN)/python -m pip install --quiet --upgrade --no-deps --target $(VENV)/gpu $(GPU_PLUGIN)
	@# The browser test drives Debian's Chromium, which also prints the PDFs; install it when missing
	@# (sudo only when not root), with a colour emoji font for the lessons' marks (⏳, ✅), and
	@# bubblewrap, the sandbox grading runs each hand-in in (docs/TEACHING.md, "What grading protects").
	@{ test -x /usr/bin/chromium && test -f /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf && test -x /usr/bin/bwrap; } || { \
	  SUDO=$$(test "$$(id -u)" = 0 || echo sudo); \
	  $$SUDO apt-get update && $$SUDO apt-get install -y chromium fonts-noto-color-emoji bubblewrap; } || \
	  { echo "Could not install Chromium or bubblewrap; tests/lessons/test_browser.py will fail. Install them with: apt-get install -y chromium fonts-noto-color-emoji bubblewrap"; exit 1; }
	touch $@

# reveal.js's files for offline slide decks come inside the sphinx-revealjs wheel; only those
# files are used (Sphinx itself is not needed), hence --no-deps.
$(BIN)/.slides-installed: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet --no-deps sphinx-revealjs==3.2.1
	touch $@

# nbgrader (pinned in requirements-test.txt) for `make nbgrader`, without the other test tools.
$(BIN)/.nbgrader-installed: $(BIN)/.installed requirements-test.txt
	$(BIN)/python -m pip install --quiet $$(grep '^nbgrader==' requirements-test.txt)
	touch $@

lab: $(BIN)/.installed
	@$(BIN)/python -m course_utils.course lab-settings >/dev/null
	$(BIN)/jupyter lab --port=$(PORT) $(ROOT_FLAG) notebooks/00_start_here.ipynb

test: $(BIN)/.test-installed $(BIN)/.slides-installed
	@# the 25 slowest tests are listed at the end, so the next slow one is seen
	$(BIN)/python -m pytest --durations=25

# The fast lane, for a change to the library or an exercise checker: no lesson runs, no Binder
# environment, no browser. `make test` still runs everything. Its tests compile on one core each,
# so two pytest processes (pytest-xdist) share them out, a test module at a time (its module-scoped
# fixtures are built once); TEST_WORKERS=1 runs them in this process, one after another.
TEST_WORKERS ?= 2
test-fast: $(BIN)/.test-installed
	$(BIN)/python -m pytest --fast -q --durations=10 $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

bench: $(BIN)/.installed
	$(BIN)/python -m course_utils.course bench lessons notebooks
	$(BIN)/python -m course_utils.course bench advisor

# XLA's GPU compiler (JAX's CUDA plugin, the version jax 0.10.2 pins), for advise(..., program="gpu"): about
# 480 MB, beside the packages like libtpu; no GPU, driver or CUDA is needed to compile for one.
gpu-targets: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet --upgrade --no-deps --target $(VENV)/gpu $(GPU_PLUGIN)

# The TPU's own compiler (libtpu, the version jax 0.10.2 pins), for advise(..., program="tpu"): about 700 MB,
# put beside the packages rather than among them, so that JAX never looks for a TPU in a lesson.
tpu-targets: $(BIN)/.installed
	$(BIN)/python -m pip install --quiet --upgrade --target $(VENV)/libtpu "$(LIBTPU)"

doctor: $(BIN)/.installed
	$(BIN)/python -m course_utils.course doctor

slides: $(BIN)/.slides-installed
	$(BIN)/python -m course_utils.course render --slides --out _build/slides

course: $(BIN)/.installed
	$(BIN)/python -m course_utils.course render --pages --out _build/course

# Both from one run of each lesson: _build/publish/NN_name.html and NN_name.slides.html side by
# side, linked to each other, with reveal.js and its fonts beside them (copy the whole folder).
publish: $(BIN)/.slides-installed
	$(BIN)/python -m course_utils.course render --out _build/publish

# The teacher's kit (docs/TEACHING.md): lessons without solutions, the answer key, the
# handout, an nbgrader course directory. The answer key and the handout print PDFs with Chromium.
student: $(BIN)/.installed
	$(BIN)/python -m course_utils.course build student --out _build/student

# The git branch `student`: the committed lessons without solutions or teacher's notes, for Binder
# (docs/TEACHING.md); the working tree is left as it is.
student-branch: $(BIN)/.installed
	$(BIN)/python -m course_utils.course build student-branch

answer-key: $(BIN)/.installed
	$(BIN)/python -m course_utils.course build answer-key --out _build/answer-key

handout: $(BIN)/.installed
	$(BIN)/python -m course_utils.course build handout --out _build/handout

nbgrader: $(BIN)/.nbgrader-installed
	$(BIN)/python -m course_utils.course build nbgrader --out _build/nbgrader

clean:
	rm -rf $(VENV) test-artifacts _build
