# Two commands, both idempotent: they install what is missing, then run.
VENV ?= .venv
TESTBED = $(VENV)/bin/testbed

.PHONY: install demo test clean
install:
	sh scripts/install.sh

demo: install
	$(TESTBED) demo

test: install
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

clean:
	$(TESTBED) clean
