"""The README and ``docs/`` stay true to the tree: every relative link resolves (a ``#anchor`` to
a heading of its target), every repository path they cite exists, every ``testbed`` command their
code blocks show still parses, the README fits one screen, and no lab-note phrases.

Commands: each line of a fenced code block that starts with ``testbed`` (or ``.venv/bin/testbed``)
is parsed whole by the CLI's own parser (an option renamed or removed fails), and its command
words — the words up to the first option or argument that cannot be a subcommand name — are run
as ``python -m testbed WORDS… --help``, which must exit 0 (a subcommand renamed or removed fails).
"""
import contextlib
import io
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO

README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").rglob("*.md"))]
README_MAX_LINES = 150
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
#: top-level entries of the repository a cited path may start with
TOP = ("testbed/", "analysis/", "experiments/", "topologies/", "tests/", "benchmarks/", "scripts/",
       "docs/", ".ci/")
PLACEHOLDER = re.compile(r"[<>{}*…|]|\b[A-Z]{2,}\b|YYYY")
LAB_NOTES = re.compile(r"\bissue\s*#?\d+|(?<![\w/&])#\d+\b|\b(this|a later|later|next|earlier) session\b",
                       re.IGNORECASE)
WORD = re.compile(r"[a-z][a-z0-9-]*$")


def rel(path):
    return path.relative_to(REPO).as_posix()


def prose_and_code(path):
    """(prose lines, code-block lines) of a Markdown file, each as (line number, text)."""
    prose, code, fenced = [], [], False
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        (code if fenced else prose).append((no, line))
    return prose, code


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for _, line in prose_and_code(path)[0]:
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(path):
    for no, line in prose_and_code(path)[0]:
        for m in LINK.finditer(CODE_SPAN.sub("", line)):
            yield no, m.group(1)


def broken_links(path, root=REPO):
    """(line, target, why) for every relative link of ``path`` that does not resolve inside
    ``root``."""
    for no, target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            yield no, target, "links outside the repository"
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.is_relative_to(root):
            yield no, target, "points outside the repository"
        elif not dest.exists():
            yield no, target, "no such file"
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            yield no, target, f"no heading #{anchor} in {dest.relative_to(root)}"


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_every_relative_link_resolves(path):
    bad = [f"{rel(path)}:{no}: {target}: {why}" for no, target, why in broken_links(path)]
    assert not bad, "\n".join(bad)


def test_a_broken_link_is_found(tmp_path):
    """The link check fails a link to a missing file and an anchor to a missing heading."""
    (tmp_path / "other.md").write_text("# Other page\n")
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [no anchor](#nowhere) "
                    "[ok too](other.md#other-page) [wrong heading](other.md#title)\n")
    assert {t for _, t, _ in broken_links(page, root=tmp_path)} == {"missing.md", "#nowhere", "other.md#title"}
    outside = {t: why for _, t, why in broken_links(page, root=tmp_path / "elsewhere")}
    assert outside["other.md#other-page"] == "points outside the repository" and len(outside) == 5


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_every_cited_path_exists(path):
    """A repository path in backticks (``testbed/spec/linkspec.py``, a test with ``::name``)
    names a file or directory of the tree."""
    bad = []
    for no, line in prose_and_code(path)[0]:
        for span in CODE_SPAN.findall(line):
            for token in span.strip("`").split():
                token = token.split("::")[0].rstrip(".,;:)")
                if token.startswith(TOP) and not PLACEHOLDER.search(token) \
                        and not (REPO / token).exists():
                    bad.append(f"{rel(path)}:{no}: {token}")
    assert not bad, "no such path:\n" + "\n".join(bad)


def commands():
    """{argv after 'testbed': 'file:line'} of every testbed command in a code block — except in
    the "adding a …" guides, whose commands work once the guide was followed (their own test
    follows them)."""
    out = {}
    for path in DOCS:
        if path.name.startswith("adding"):
            continue
        lines = prose_and_code(path)[1]
        i = 0
        while i < len(lines):
            no, text = lines[i]
            while text.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                text = text.rstrip()[:-1] + " " + lines[i][1].strip()
            i += 1
            text = text.strip()
            if text.startswith(("testbed ", ".venv/bin/testbed ")):
                words = shlex.split(text.split(" #")[0])
                out.setdefault(tuple(words[1:]), f"{rel(path)}:{no}")
    return out


COMMANDS = commands()


def command_words(argv):
    """The words of ``argv`` up to the first option or argument no subcommand could be named."""
    words = []
    for w in argv:
        if not WORD.match(w):
            break
        words.append(w)
    return tuple(words)


def test_the_readme_shows_the_five_command_tour():
    shown = {argv[0] for argv, where in COMMANDS.items() if where.startswith("README.md") and argv}
    assert {"run", "analyze", "experiment", "reproduce", "calibrate"} <= shown


@pytest.mark.parametrize("argv", sorted(COMMANDS), ids=lambda a: " ".join(a)[:60])
def test_every_command_shown_parses(argv):
    from testbed.cli import build_parser
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            build_parser().parse_args(list(argv))
    except SystemExit as exc:       # --help exits 0; a refusal exits 2
        if exc.code != 0:
            pytest.fail(f"{COMMANDS[argv]}: testbed {' '.join(argv)}: {err.getvalue().strip()}")


@pytest.mark.parametrize("words", sorted({command_words(a) for a in COMMANDS}), ids=" ".join)
def test_every_command_shown_has_help(words):
    done = subprocess.run([sys.executable, "-m", "testbed", *words, "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    where = next(w for a, w in COMMANDS.items() if command_words(a) == words)
    assert done.returncode == 0, f"{where}: testbed {' '.join(words)} --help: {done.stderr.strip()}"


def test_readme_fits_one_screen():
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; at most {README_MAX_LINES}"


def fenced_blocks(path, lang):
    """(first line number, text) of every code block of ``path`` fenced as ``lang`` (```toml)."""
    out, lines, start = [], [], None
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if start is None and line.strip() == f"```{lang}":
            start, lines = no + 1, []
        elif start is not None and FENCE.match(line.strip()):
            out.append((start, "\n".join(lines) + "\n"))
            start = None
        elif start is not None:
            lines.append(line)
    return out


SCHEDULE_DOC = REPO / "docs" / "links-and-emulator.md"
SCHEDULE_EXAMPLES = [(lang, no, text) for lang in ("toml", "json") for no, text in fenced_blocks(SCHEDULE_DOC, lang)]


def test_the_schedule_doc_has_toml_and_json_examples():
    assert {lang for lang, _, _ in SCHEDULE_EXAMPLES} == {"toml", "json"}


@pytest.mark.parametrize("lang, no, text", SCHEDULE_EXAMPLES, ids=lambda x: str(x)[:12])
def test_every_schedule_example_loads(tmp_path, lang, no, text):
    """Every TOML and JSON block of docs/links-and-emulator.md is a schedule file that loads on
    a link direction as ``--link LINK.DIR.schedule=FILE`` does, a trace it names written beside it."""
    import json
    import tomllib

    from testbed.spec import traces
    from testbed.spec.linkspec import LinkSpec
    data = tomllib.loads(text) if lang == "toml" else json.loads(text)
    if "file" in data.get("trace", {}):
        (tmp_path / data["trace"]["file"]).write_text(traces.constant(12e6).to_text())
    example = tmp_path / f"example.{lang}"
    example.write_text(text)
    try:
        LinkSpec.parse(rate="333mbit", delay="100ms").with_override("schedule", str(example))
    except ValueError as exc:
        pytest.fail(f"{rel(SCHEDULE_DOC)}:{no}: the {lang} schedule example does not load: {exc}")


@pytest.mark.parametrize("path", DOCS, ids=rel)
def test_no_lab_notes(path):
    bad = [f"{rel(path)}:{no}: {m.group(0)!r}" for no, line in enumerate(path.read_text().splitlines(), 1)
           for m in LAB_NOTES.finditer(line)]
    assert not bad, "issue numbers or session notes:\n" + "\n".join(bad)
