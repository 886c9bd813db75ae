"""The CLI as a user meets it: formats, errors, exit codes, output formats."""

from __future__ import annotations

import csv
import io
import json

from hostile import assert_clean_error
from test_safetensors import write_st


def small(tmp_path):
    return write_st(
        tmp_path / "s.safetensors",
        {
            "enc.weight": {"dtype": "F32", "shape": [1000, 3], "data_offsets": [0, 12000]},
            "enc.bias": {"dtype": "F16", "shape": [1000], "data_offsets": [12000, 14000]},
        },
    )


def test_formats_lists_adapters(cli):
    proc = cli("formats")
    assert proc.returncode == 0
    assert "safetensors" in proc.stdout and "torch" in proc.stdout


def test_not_a_checkpoint_lists_supported_formats(tmp_path, cli):
    p = tmp_path / "notes.txt"
    p.write_text("hello, this is not a model\n")
    err = assert_clean_error(cli("show", str(p)), str(p), "a text file, not a checkpoint")
    assert "'inspector formats' lists the formats read" in err


def test_missing_and_empty_files(tmp_path, cli):
    assert_clean_error(cli("show", str(tmp_path / "nope.pt")), "nope.pt", "no such file")
    empty = tmp_path / "empty.pt"
    empty.write_bytes(b"")
    assert_clean_error(cli("show", str(empty)), str(empty), "empty")


def test_git_lfs_pointer(tmp_path, cli):
    p = tmp_path / "model.safetensors"
    p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 123\n")
    assert_clean_error(cli("show", str(p)), str(p), "Git LFS pointer")


def test_table_has_thousands_separators_and_footer(tmp_path, cli):
    proc = cli("show", str(small(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    # counts keep separators; shapes never have them ((1,000, 3) would read as a 3-tuple)
    assert "3,000" in proc.stdout and "(1000, 3)" in proc.stdout and "(1,000" not in proc.stdout
    assert "parameters       4,000" in proc.stdout


def test_json_raw_integers_and_schema(tmp_path, cli):
    proc = cli("show", str(small(tmp_path)), "--format", "json")
    doc = json.loads(proc.stdout)
    assert doc["schema"] == "inspector.listing/1"
    assert doc["format"] == "safetensors"
    assert [t["stored_name"] for t in doc["tensors"]] == ["enc.weight", "enc.bias"]
    assert doc["tensors"][0]["numel"] == 3000 and doc["tensors"][0]["shape"] == [1000, 3]
    assert doc["totals"]["parameters"] == 4000 and doc["totals"]["all"] == 4000
    assert doc["bytes_by_dtype"] == {"float16": 2000, "float32": 12000}


def test_csv_and_markdown(tmp_path, cli):
    rows = list(
        csv.DictReader(io.StringIO(cli("show", str(small(tmp_path)), "--format", "csv").stdout))
    )
    assert rows[0]["numel"] == "3000" and json.loads(rows[0]["shape"]) == [1000, 3]
    md = cli("show", str(small(tmp_path)), "--format", "markdown").stdout
    assert "| enc.weight" in md and "|---" in md


def test_match_and_sort(tmp_path, cli):
    doc = json.loads(
        cli("show", str(small(tmp_path)), "--format", "json", "--match", "bias$").stdout
    )
    assert [t["name"] for t in doc["tensors"]] == ["enc.bias"]
    assert doc["filter"] == {"match": "bias$", "kept": 1, "of": 2}
    assert doc["totals"]["parameters"] == 1000
    doc = json.loads(cli("show", str(small(tmp_path)), "--format", "json", "--sort", "name").stdout)
    assert [t["name"] for t in doc["tensors"]] == ["enc.bias", "enc.weight"]
    bad = cli("show", str(small(tmp_path)), "--match", "(")
    assert bad.returncode == 2 and "not a valid regex" in bad.stderr


def test_terminal_escapes_in_names_are_neutralised(tmp_path, cli):
    p = write_st(
        tmp_path / "esc.safetensors",
        {"evil\x1b[2J": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}},
    )
    out = cli("show", str(p)).stdout
    assert "\x1b" not in out and "evil\\x1b[2J" in out


def test_usage_error_exit_code(cli):
    proc = cli("show")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


def test_error_naming_a_member_with_a_line_break_is_one_line(tmp_path, cli):
    """The fuzzer's case: one byte of a real MXNet 2 .npz's central directory turned into a
    line break inside a member name; the error names it on one line."""
    from conftest import FIXTURES

    data = bytearray((FIXTURES / "mxnet" / "mxnet-2.0.0b1" / "dict.npz").read_bytes())
    data[953] = 10
    p = tmp_path / "dict.npz"
    p.write_bytes(bytes(data))
    proc = cli("show", str(p))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "\\n" in proc.stderr, proc.stderr


def test_fast_exit_keeps_output_exit_codes_and_atexit_work(tmp_path):
    """``console_main`` leaves without tearing down its objects only when nothing is left to
    run at exit: the whole output arrives through a pipe, the exit code is the command's, and
    a registered atexit callback still runs (normal exit then)."""
    import subprocess
    import sys

    path = small(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "inspector", "show", "--format", "json", path],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and json.loads(ok.stdout)["totals"]["tensors"] == 2
    missing = subprocess.run([sys.executable, "-m", "inspector", "show", str(tmp_path / "no")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "no such file" in missing.stderr
    script = ("import atexit, sys\n"
              "atexit.register(lambda: print('atexit ran'))\n"
              "from inspector.cli import console_main\n"
              f"sys.argv = ['inspector', 'show', {str(path)!r}]\n"
              "console_main()\n")
    hooked = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert hooked.returncode == 0
    assert hooked.stdout.rstrip().endswith("atexit ran") and "enc.weight" in hooked.stdout
