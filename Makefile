# Two commands, both idempotent: they install what is missing, then run.
VENV ?= .venv
TESTBED = $(VENV)/bin/testbed

.PHONY: install demo test lint clean
install:
	sh scripts/install.sh

demo: install
	$(TESTBED) demo

test: install lint
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .

clean:
	$(TESTBED) clean
