"""``inspector scan --format sarif``: the scan report (``inspector.scan/1``) as a SARIF 2.1.0 log
(OASIS Static Analysis Results Interchange Format), for GitHub code scanning, GitLab and SARIF
viewers.

- **Rules** are the kinds of finding (:data:`RULES`): a dangerous global, a foreign global,
  other dangerous content, other foreign content, and a file that could not be fully examined;
  each with its help text.
- **Results**: one per finding that is not ``safe``. Its location is the scanned file (a path
  relative to the working directory, resolved through ``%SRCROOT%``; an absolute path as a
  ``file:`` URI; a URL as given); where the finding is inside the file (an archive member such
  as ``archive/data.pkl``, a pickle's offset, a Keras layer), that place is a logical location.
- **Levels** follow the verdict: ``dangerous`` -> ``error``; ``foreign`` -> ``warning``; a file
  that could not be fully examined -> ``error``, because the gate cannot vouch for what it did
  not read (a hostile file that breaks the examination must not pass as a note; ``scan`` exits
  2 on it).
- **Fingerprints** (``partialFingerprints``) hash the rule, the file's path, the place inside it
  and the finding's text: the same finding in two runs is one alert, whatever else changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT = "inspectorFinding/v1"
SRCROOT = "%SRCROOT%"

DANGEROUS_GLOBAL = "INS001"
FOREIGN_GLOBAL = "INS002"
DANGEROUS_CONTENT = "INS003"
FOREIGN_CONTENT = "INS004"
NOT_EXAMINED = "INS005"

# id -> (name, level, security-severity, short description, help)
RULES: dict[str, tuple[str, str, str, str, str]] = {
    DANGEROUS_GLOBAL: (
        "dangerous-global", "error", "9.8",
        "A pickle makes a loader call, construct or give state to a global that can run code "
        "or that nobody vetted",
        "Loading this file with pickle, torch.load(weights_only=False), joblib or NumPy "
        "(allow_pickle=True) imports this global and calls it, or builds an object of it and "
        "gives it the file's data: a listed global runs commands, evaluates code, writes files "
        "or changes the interpreter; an unvetted class runs its own __new__, __setstate__ or "
        "__del__ with the file's data. Nothing was run by the scan. Do not load the file; "
        "re-export the weights as safetensors from a trusted copy, or vouch for a class you "
        "wrote with --trust MODULE.NAME.",
    ),
    FOREIGN_GLOBAL: (
        "foreign-global", "warning", "5.0",
        "A pickle references a global that is not vetted, without invoking it",
        "A loader would import this global's module (its import-time code runs) but never "
        "call or construct the global itself: it is named only (a type argument, a dict key). "
        "Check that you trust the module, or load the weights only "
        "(torch.load(weights_only=True)).",
    ),
    DANGEROUS_CONTENT: (
        "dangerous-content", "error", "9.8",
        "The file holds code that its loader runs (bytecode, a path out of the model)",
        "The file's loader would run code stored in it (a Keras Lambda layer's marshalled "
        "bytecode, ...) or read data from outside the model's directory. Nothing was run by "
        "the scan. Do not load the file from an untrusted source.",
    ),
    FOREIGN_CONTENT: (
        "foreign-content", "warning", "5.0",
        "The file holds something not proven inert (source code, unrecognised data)",
        "Part of the file is not known to be safe: Python source that runs when imported "
        "(trust_remote_code), content the scan does not recognise, data before an archive. "
        "Nothing known runs code; review where the file comes from.",
    ),
    NOT_EXAMINED: (
        "not-examined", "error", "7.0",
        "The file could not be fully examined",
        "The examination stopped before the end of the file (damage, a limit, a parser that "
        "did not finish): what was found before is reported, but the rest is unproven. A "
        "hostile file may be built to stop scanners; treat it as unsafe until it reads whole.",
    ),
}


def _rule_of(item: Mapping[str, Any], global_names: set[str]) -> str:
    level, text = item["level"], item["text"]
    if level == "error":
        return NOT_EXAMINED
    is_global = text.partition(" (")[0] in global_names
    if level == "dangerous":
        return DANGEROUS_GLOBAL if is_global else DANGEROUS_CONTENT
    return FOREIGN_GLOBAL if is_global else FOREIGN_CONTENT


def _level(item_level: str) -> str:
    return "warning" if item_level == "foreign" else "error"


def artifact_location(path: str) -> dict[str, Any]:
    """A SARIF artifactLocation for a scanned path: relative paths as URI references from
    ``%SRCROOT%`` (the working directory), absolute ones as ``file:`` URIs, URLs as given."""
    if "://" in path:
        return {"uri": path}
    if os.path.isabs(path):
        return {"uri": "file://" + quote(os.path.abspath(path).replace(os.sep, "/"))}
    return {"uri": quote(os.path.normpath(path).replace(os.sep, "/")), "uriBaseId": SRCROOT}


def fingerprint(rule: str, path: str, where: str | None, text: str) -> str:
    data = "\0".join((rule, path, where or "", text)).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).hexdigest()


def sarif_log(report: Mapping[str, Any]) -> dict[str, Any]:
    """The SARIF 2.1.0 log of a scan report (``ScanResult.to_dict()``)."""
    from inspector import __version__

    results = []
    for index, f in enumerate(report["files"]):
        names = {g["name"] for g in f["globals"]}
        for item in f["findings"]:
            if item["level"] == "safe":
                continue
            rule = _rule_of(item, names)
            location: dict[str, Any] = {"physicalLocation": {
                "artifactLocation": {**artifact_location(f["path"]), "index": index}}}
            if item["where"]:
                location["logicalLocations"] = [
                    {"name": item["where"], "fullyQualifiedName": f"{f['path']}!{item['where']}"}]
            results.append({
                "ruleId": rule,
                "ruleIndex": list(RULES).index(rule),
                "level": _level(item["level"]),
                "message": {"text": item["text"]},
                "locations": [location],
                "partialFingerprints": {
                    FINGERPRINT: fingerprint(rule, f["path"], item["where"], item["text"])},
                "properties": {"verdict": f["verdict"], "kind": f["kind"]},
            })
    run: dict[str, Any] = {
        "tool": {"driver": {
            "name": "inspector",
            "fullName": "inspector scan (ckpt-inspector)",
            "semanticVersion": __version__,
            "rules": [_rule(rule) for rule in RULES],
        }},
        "originalUriBaseIds": {SRCROOT: {"uri": _cwd_uri()}},
        "artifacts": [{"location": artifact_location(f["path"]),
                       "properties": {"verdict": f["verdict"], "kind": f["kind"]}}
                      for f in report["files"]],
        "results": results,
        "invocations": [{
            "executionSuccessful": True,
            "toolExecutionNotifications": [
                {"level": "note", "message": {"text": note}} for note in report["not_followed"]],
        }],
        "properties": {"summary": dict(report["summary"])},
    }
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def _rule(rule: str) -> dict[str, Any]:
    name, level, severity, short, text = RULES[rule]
    return {
        "id": rule,
        "name": name,
        "shortDescription": {"text": short},
        "fullDescription": {"text": text},
        "help": {"text": text},
        "defaultConfiguration": {"level": level},
        "properties": {"tags": ["security"], "security-severity": severity},
    }


def _cwd_uri() -> str:
    cwd = os.getcwd().replace(os.sep, "/")
    return "file://" + quote(cwd if cwd.endswith("/") else cwd + "/")
