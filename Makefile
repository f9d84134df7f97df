# eaglekit: every target bootstraps .venv itself (torch==2.13.0 first: a CPU build; a looser spec
# would pull a multi-GB CUDA build). A second run reuses the venv: the stamp is newer than pyproject.toml.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.eaglekit-installed
DEMO   := build/demo
PORT   ?= 8888

.PHONY: venv test report lab demo bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[notebooks,test]'
	@touch $(STAMP)

# The browser tests run on their own after the rest: a live JupyterLab kernel starved of CPU by a
# parallel worker can miss its start-up deadline.
test: $(STAMP)
	$(PY) -m pytest -n 2 -q -m "not browser"
	$(PY) -m pytest -q -m browser

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

clean:
	rm -rf build .pytest_cache
