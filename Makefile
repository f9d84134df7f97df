# eaglekit: every target bootstraps .venv itself (torch==2.13.0 first, so the rest installs against it; on
# Linux PyPI's wheel is the multi-GB CUDA build: TORCH_PIP_ARGS names the CPU index).
# A second run reuses the venv: the stamp is newer than pyproject.toml.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.eaglekit-installed
DEMO   := build/demo
PORT   ?= 8888
# Where torch comes from: pip's configured indexes unless given, e.g. the CPU build on Linux (README):
#   make test TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_PIP_ARGS ?=

.PHONY: venv test report lab demo bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check $(TORCH_PIP_ARGS) torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[notebooks,test]'
	@touch $(STAMP)

# The browser tests run on their own after the rest: a live JupyterLab kernel starved of CPU by a
# parallel worker can miss its start-up deadline.
# One folder for the whole run (EAGLEKIT_TEST_RUN): each page is executed once and the report rendered once, and
# both sessions read them there; the run's measurements share one result cache inside it.
test: $(STAMP)
	@run=$$(mktemp -d -t eaglekit-test-run-XXXXXX) && trap 'rm -rf "$$run"' EXIT && \
	EAGLEKIT_TEST_RUN="$$run" $(PY) -m pytest -n 2 -q -m "not browser" && \
	EAGLEKIT_TEST_RUN="$$run" $(PY) -m pytest -q -m browser

demo: $(STAMP)
	$(PY) -m eaglekit demo $(DEMO)

report: $(STAMP)
	$(PY) -m eaglekit report --demo $(DEMO) --out build/report

lab: $(STAMP)
	$(PY) -m eaglekit lab --demo $(DEMO) --port $(PORT)

bench: $(STAMP)
	$(PY) benchmarks/bench_inspect.py
	$(PY) benchmarks/bench_header.py
	$(PY) benchmarks/bench_similarity.py
	$(PY) benchmarks/bench_report_size.py
	$(PY) benchmarks/bench_export.py
	$(PY) benchmarks/bench_acceptance.py
	$(PY) benchmarks/bench_dumps.py
	$(PY) benchmarks/bench_dflash.py
	$(PY) benchmarks/bench_long_context.py

clean:
	rm -rf build .pytest_cache
