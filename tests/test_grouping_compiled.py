"""The fast paths of grouping give exactly what the slow ones give: the generated table of
built-in schemes equals the YAML files, a stale table is never used, and matching once per
digit-pattern of names assigns every name as trying every regex on it would."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inspector import grouping
from inspector.grouping import Assignment, GroupRule, Scheme, digit_blind


def test_generated_table_is_current():
    from pathlib import Path

    generated = Path(grouping.__file__).with_name(grouping.COMPILED_MODULE)
    assert generated.read_text(encoding="utf-8") == grouping.compile_builtins(), (
        "run: python -c 'from inspector.grouping import write_builtins; write_builtins()'")


@pytest.mark.parametrize("name", grouping.builtin_names())
@pytest.mark.parametrize("params", [None, {"depth": 3}])
def test_compiled_scheme_equals_parsed_yaml(name, params):
    if params and name != "prefix":
        pytest.skip("only prefix takes parameters")
    text = grouping._texts()[name].decode()
    parsed = grouping._load_text(text, f"built-in:{name}.yaml", params)
    compiled = grouping._from_compiled(name, grouping._compiled_schemes()[name], params)
    assert compiled.description == parsed.description
    assert compiled.min_score == parsed.min_score
    assert compiled.parameters == parsed.parameters
    assert [(d.pattern.pattern, d.score, d.on_format) for d in compiled.detect] == [
        (d.pattern.pattern, d.score, d.on_format) for d in parsed.detect]
    assert [(g.name, [p.pattern for p in g.patterns], g.fields, g.embedding)
            for g in compiled.groups] == [
        (g.name, [p.pattern for p in g.patterns], g.fields, g.embedding) for g in parsed.groups]


def test_stale_table_is_not_used(monkeypatch):
    texts = dict(grouping._texts())
    texts["torch-rnn"] = texts["torch-rnn"].replace(b"name: torch-rnn", b"name: torch-rnn ")
    monkeypatch.setattr(grouping, "_builtin_texts", texts)
    monkeypatch.setattr(grouping, "_compiled", None)
    monkeypatch.setattr(grouping, "_builtin_cache", {})
    assert grouping._compiled_schemes() == {}
    assert grouping.get_scheme("prefix").name == "prefix"  # parsed from YAML


@pytest.mark.parametrize(("pattern", "blind"), [
    (r"^layers\.(?P<layer>\d+)\.attn\.", True),
    (r"(?:^|\.)h\.\d{1,2}\.", True),
    (r"\w+_[^./]+\.", True),
    (r"linear[12]\.", False),
    (r"layer0\.", False),
    (r"[0-5]", False),
    (r"(\d)\.\1", False),
    (r"[^0-9]x", True),
    (r"\D", True),
])
def test_digit_blind(pattern, blind):
    assert digit_blind(re.compile(pattern)) is blind


def _slow(scheme: Scheme, name: str) -> Assignment:
    """Every regex tried on the name, in order: the definition the fast path must meet."""
    for index, rule in enumerate(scheme.groups):
        for rx in rule.patterns:
            m = rx.search(name)
            if m is None:
                continue
            caps = m.groupdict()
            group = rule.name
            if rule.fields:
                group = rule.name.format_map({f: caps.get(f) or "" for f in rule.fields})
            key = None
            if caps.get("layer") is not None:
                start, end = m.span("layer")
                key = name[:start] + "#" + name[end:]
            return Assignment(group or "other", caps.get("layer"), caps.get("direction"),
                              caps.get("block"), key, index)
    return Assignment("other")


# Digit-sensitive rules before and after blind ones, templates, optional layer captures.
MIXED = Scheme("mixed", "", "test", (
    GroupRule("zero", (r"^l0\.",), ()),
    GroupRule("{top}", (r"^(?P<top>[a-z]+)\.(?P<layer>\d+)\.x$",), ("top",)),
    GroupRule("pair", (r"linear[12]\.", r"(?:^|\.)(?:blk\.(?P<layer>\d+)\.)?lin\."), ()),
    GroupRule("back", (r"(\d)\.\1",), ()),
    GroupRule("rest", (r"\d+",), ()),
))
NAMES = st.lists(
    st.from_regex(r"(?:[a-z]{1,3}|l|blk|lin|linear|x)(?:[._](?:[0-9]{1,3}|[a-z]{1,3}|lin|linear"
                  r"[0-9]|x)){0,4}", fullmatch=True),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(NAMES)
def test_fast_assignment_equals_trying_every_regex(names):
    schemes = [MIXED] + [grouping.get_scheme(n) for n in grouping.builtin_names()]
    for s in schemes:
        fresh = Scheme(s.name, s.description, s.source, s.groups, s.detect, s.min_score,
                       s.parameters)
        for n in names:
            assert fresh.assign(n) == _slow(s, n), (s.name, n)
        batch = Scheme(s.name, s.description, s.source, s.groups, s.detect, s.min_score,
                       s.parameters)
        assert batch.assign_all(names) == [_slow(s, n) for n in names], s.name


def test_fast_assignment_on_every_fixture_name():
    from conftest import load_truth, truth_files

    names = sorted({t.get("name") or t["stored_name"] for p in truth_files()
                    for t in load_truth(p).get("tensors", []) if isinstance(t, dict)
                    and (t.get("name") or t.get("stored_name"))})
    assert len(names) > 1000
    for n in grouping.builtin_names():
        s = grouping.get_scheme(n)
        fresh = Scheme(s.name, s.description, s.source, s.groups, s.detect, s.min_score,
                       s.parameters)
        assert [fresh.assign(x) for x in names] == [_slow(s, x) for x in names], n
        batch = Scheme(s.name, s.description, s.source, s.groups, s.detect, s.min_score,
                       s.parameters)
        assert batch.assign_all(names) == [_slow(s, x) for x in names], n


def test_assign_all_with_newlines_in_names():
    """Names are joined by newlines for one pass of C; a name holding one takes the slow path."""
    names = ["layers.1.attn.q_proj.weight", "layers.\n2.attn.q_proj.weight",
             "layers.12.attn.q_proj.weight", "", "a\nb"]
    for n in grouping.builtin_names():
        s = grouping.get_scheme(n)
        batch = Scheme(s.name, s.description, s.source, s.groups, s.detect, s.min_score,
                       s.parameters)
        assert batch.assign_all(names) == [_slow(s, x) for x in names], n
        assert batch.assign_all([]) == []


@settings(max_examples=300, deadline=None)
@given(st.from_regex(r"(?:[a-z_.]{0,6}(?:decoder_rnn_|encoder_birnn_|\.weight|sockeye|coder_cnn_"
                     r"|wrapped_module\.|embeddings)?){1,3}", fullmatch=True))
def test_required_text_is_in_every_match(name):
    for n in grouping.builtin_names():
        for d in grouping.get_scheme(n).detect:
            if d.required is not None and d.pattern.search(name):
                assert d.required in name, (n, d.source, name)


@pytest.mark.parametrize(("pattern", "required"), [
    (r"^decoder_rnn_(?:hidden|att)_", "decoder_rnn_"),
    (r"(?i)keras|hdf5", None),
    (r"a|bcd", None),
    (r"x?yz", "yz"),
    (r"^enc_${depth}", None),
])
def test_required_text(pattern, required):
    assert grouping.required_text(pattern) == required
