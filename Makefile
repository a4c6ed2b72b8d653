# Two commands: `make run` (install everything, start the app on the demo models) and
# `make test` (install everything, run the whole test suite). Both create .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
ARGS ?=
# Two pytest workers (pytest-xdist): 40% of a one-process run's time was spent waiting on servers
# starting and models loading. Tests go by groups (tests/conftest.py): a file stays on one worker,
# so a module's servers start once, and the demo models load on one. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2

.PHONY: run test install bench lint clean

# Ctrl-C is how a person stops the server: whatever status it then ends with (130, or death by the
# signal while it is still starting), the recipe's shell waits for it (the trap keeps the shell alive
# without passing an ignored SIGINT on to the server) and ends quietly; any other failure stays one.
run: $(VENV)/.installed
	trap : INT; $(PY) app.py $(ARGS) || { status=$$?; [ $$status -eq 130 ] || exit $$status; }

# arena-rank's own venv (mostly downloads), PostgreSQL's binaries and nginx install while lint and
# the browser install run; a failed install fails the command.
test: $(VENV)/.installed-test
	PYTHON_BASE=$(PY) bash scripts/install-arena-rank.sh & arena_rank=$$!; \
	  bash scripts/install-postgres.sh & postgres=$$!; \
	  bash scripts/install-nginx.sh & nginx=$$!; \
	  $(MAKE) --no-print-directory lint && bash scripts/install-browser.sh; checks=$$?; \
	  wait $$arena_rank; ranked=$$?; wait $$postgres; pg=$$?; wait $$nginx; proxy=$$?; \
	  [ $$ranked -eq 0 ] && [ $$pg -eq 0 ] && [ $$proxy -eq 0 ] && exit $$checks
	HF_HUB_OFFLINE=1 $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(ARGS)

install: $(VENV)/.installed

# what an install reads: a change to any of them installs again (setup.py and the C files: the compiled parts)
INSTALL_INPUTS = pyproject.toml setup.py $(wildcard webui/*/*.c webui/*/*/*.c) scripts/install.sh scripts/install-vllm.sh scripts/install-llamacpp.sh

$(VENV)/.installed: $(INSTALL_INPUTS)
	test -x $(PY) || python3 -m venv $(VENV)
	PYTHON=$(PY) bash scripts/install.sh
	touch $@

$(VENV)/.installed-test: $(INSTALL_INPUTS)
	test -x $(PY) || python3 -m venv $(VENV)
	PYTHON=$(PY) EXTRAS=test bash scripts/install.sh
	touch $(VENV)/.installed $@

bench: $(VENV)/.installed-test
	HF_HUB_OFFLINE=1 $(PY) -m bench $(ARGS)

# ruff (with a complexity limit of 10), ruff's formatter and mypy; `make test` runs it first.
lint: $(VENV)/.installed-test
	$(PY) -m ruff check webui tests bench deploy app.py
	$(PY) -m ruff format --check webui tests bench deploy app.py
	$(PY) -m mypy

clean:
	rm -rf $(VENV) .venv-vllm .venv-arena-rank .llama.cpp
