"""Every example in the documentation runs, and prints what the page says it prints.

The pages under ``docs/`` (and README.md) hold two kinds of runnable examples:

* ```` ```console ```` blocks: lines starting with ``$ `` are shell commands, run from a scratch
  directory where ``fixtures/`` and ``tests/`` lead to the repository's own (so ``-o report.html``
  writes there, not into the checkout); the lines after a command, up to the next ``$ ``, are its
  expected output (stdout and stderr). The commands of one block run in one shell, in order, so
  ``echo $?`` after a command prints that command's exit code.
* ```` ```python ```` blocks, run from the repository root: doctest sessions (``>>>`` lines),
  or scripts that must run without an error and, when a ```` ```text ```` block follows, print
  what it shows. The blocks of one page share their names, in page order.

Expected output is compared after dropping trailing blanks. A line that is only ``...`` stands
for any number of lines (pages abridge long tables that way); ``...`` inside a line stands for
any text on that line. A block preceded by ``<!-- docs-test: server -->`` runs against a local
HTTP server over ``fixtures/`` (``tests/remote_servers.py``): the page's ``127.0.0.1:8765`` is
replaced by the server's real address, in the commands and in the expected output. No other
placeholder exists. A block of any other language that holds a ``$ `` or ``>>>`` line fails the
test: every example is a tested one.
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)\s*$")
MARK = "<!-- docs-test: server -->"


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    server: bool
    end: int = 0  # 1-based line of the closing fence


def blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = len(m["indent"]), i
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i][indent:])
            i += 1
        prev = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        found.append(Block(page, start + 1, m["lang"], "\n".join(body), prev == MARK, i + 1))
        i += 1
    return found


ALL = [b for p in PAGES for b in blocks(p)]
CONSOLE = [b for b in ALL if b.lang == "console"]
PYTHON_PAGES = sorted({b.page for b in ALL if b.lang == "python"})


def _id(b: Block) -> str:
    return f"{b.page.relative_to(ROOT)}:{b.line}"


def expected_regex(expected: str) -> re.Pattern[str]:
    parts = []
    for line in expected.splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*".join(re.escape(p) for p in line.rstrip().split("...")) + r"\n")
    return re.compile("".join(parts).replace(".*", "[^\\n]*"))


def normalise(text: str) -> str:
    lines = [ln.rstrip() for ln in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "".join(ln + "\n" for ln in lines)


def parse_console(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs; a command line ending in ``\\`` continues."""
    pairs: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            cmd = line[2:]
            while cmd.endswith("\\") and i + 1 < len(lines):
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            pairs.append((cmd, []))
        elif pairs:
            pairs[-1][1].append(line)
        else:
            raise AssertionError(f"output before any command: {line!r}")
        i += 1
    return [(c, "\n".join(out)) for c, out in pairs]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("docs")
    for name in ("fixtures", "tests"):
        (d / name).symlink_to(ROOT / name)
    return d


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR")}
    bindir = str(Path(sys.executable).parent)
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), NO_COLOR="1", TERM="dumb",
               LC_ALL="C.UTF-8", PYTHONPATH="")
    return env


@pytest.mark.parametrize("block", CONSOLE, ids=_id)
def test_console_example(block: Block, scratch: Path, tmp_path: Path) -> None:
    assert shutil.which("inspector", path=str(Path(sys.executable).parent)), "inspector not installed"
    pairs = parse_console(block.text)
    assert pairs, "a console block with no command"
    marker = "@@docs-example-output@@"
    with contextlib.ExitStack() as stack:
        if block.server:
            from remote_servers import RangeServer

            url = stack.enter_context(RangeServer(ROOT / "fixtures")).url
            pairs = parse_console(block.text.replace("http://127.0.0.1:8765", url))
        script = ["cd " + _quote(str(scratch)), "__s=0"]
        for cmd, _ in pairs:
            # the marker's echo must not hide the previous command's status from `echo $?`
            script += [f"echo {marker}", "(exit $__s)", "{ " + cmd, "} 2>&1", "__s=$?",
                       f"echo {marker}"]
        run = subprocess.run(["bash", "-c", "\n".join(script)], capture_output=True, text=True,
                             env=_env(), timeout=120, stdin=subprocess.DEVNULL)
    # each command's stderr is merged into its stdout, in order: the pages show them that way
    chunks = run.stdout.split(marker + "\n")[1::2]
    assert len(chunks) == len(pairs), run.stderr
    for (cmd, expected), out in zip(pairs, chunks, strict=True):
        actual = normalise(out)
        want = normalise(expected)
        if not expected_regex(want).fullmatch(actual):
            pytest.fail(f"{_id(block)}: $ {cmd}\n--- expected\n{want}--- actual\n{actual}")


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    globs: dict[str, object] = {}
    on_page = [b for b in ALL if b.page == page]
    for k, b in enumerate(on_page):
        if b.lang != "python":
            continue
        if ">>> " not in b.text:
            _run_script(b, _output_block(on_page, k), globs)
            continue
        test = parser.get_doctest(b.text, globs, _id(b), str(page), b.line)
        runner.run(test, clear_globs=False)
        globs.update(test.globs)  # DocTest works on a copy: carry its names to the next block
    result = runner.summarize(verbose=False)
    assert not result.failed


def _output_block(on_page: list[Block], k: int) -> Block | None:
    """The ```text block right after block k (only blank lines between), which is its output."""
    if k + 1 >= len(on_page) or on_page[k + 1].lang not in ("text", "output"):
        return None
    nxt, lines = on_page[k + 1], on_page[k].page.read_text(encoding="utf-8").splitlines()
    between = lines[on_page[k].end : nxt.line - 1]
    return nxt if all(not ln.strip() for ln in between) else None


def _run_script(b: Block, output: Block | None, globs: dict[str, object]) -> None:
    """A python block that is a script: it runs (sharing the page's names) without raising, and
    prints what the output block after it shows."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(b.text, _id(b), "exec"), globs)  # noqa: S102 - the page's own example
    if output is not None:
        want, actual = normalise(output.text), normalise(out.getvalue())
        assert expected_regex(want).fullmatch(actual), (
            f"{_id(b)}\n--- expected\n{want}--- actual\n{actual}")


@pytest.mark.parametrize("block", [b for b in ALL if b.lang not in ("console", "python")], ids=_id)
def test_every_example_is_tested(block: Block) -> None:
    for line in block.text.splitlines():
        assert not line.startswith(("$ ", ">>> ")), (
            f"{_id(block)}: an example in a ```{block.lang} block is never run; "
            "use ```console or ```python")


def test_expected_regex() -> None:
    assert expected_regex("a\n...\nc\n").fullmatch("a\nb\nb\nc\n")
    assert expected_regex("a\n...\nc\n").fullmatch("a\nc\n")
    assert expected_regex("x ... y\n").fullmatch("x 12 ms y\n")
    assert not expected_regex("x ... y\n").fullmatch("x 1\n2 y\n")
    assert not expected_regex("a\nc\n").fullmatch("a\nb\nc\n")
