"""The vetted set is data of a fixed form, read only when a pickle is judged, and the user's
trust is read only when an unvetted name needs it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from inspector.adapters.errors import UsageError
from inspector.adapters.security import verdicts as V
from inspector.adapters.security.trust import check_name, trusting
from inspector.adapters.security.vetted import ENUM, USES, VETTED

from conftest import FIXTURES


@pytest.mark.parametrize("name", sorted(VETTED))
def test_every_entry_has_a_version_its_uses_and_a_reason(name):
    version, kinds, reason = VETTED[name]
    assert check_name(name, "vetted") == name
    assert version and version[0].isalpha() and any(c.isdigit() for c in version), version
    assert set(kinds.split()) <= set(USES), kinds
    assert reason.strip() == reason and len(reason) > 5


def test_enum_entries_are_vetted_for_the_lookup_only():
    for name, (_, kinds, _) in VETTED.items():
        if kinds == ENUM:
            module, _, qual = name.rpartition(".")
            assert V.verdict(module, qual, {V.MEMBER, V.CONSTRUCTED}).level == V.SAFE
            assert V.verdict(module, qual, {V.CALLED}).level == V.DANGEROUS, name
            assert V.verdict(module, qual, {V.CONSTRUCTED}, ran=["__setstate__"]).level == \
                V.DANGEROUS, name


def test_trust_names_are_exact_dotted_names():
    for bad in ("os", "os.*", "a..b", "1x.y", "", "os.system; rm"):
        with pytest.raises(UsageError):
            with trusting([bad]):
                pass
    with trusting(["mylib.models.Net"]):
        assert V.verdict("mylib.models", "Net", {V.CONSTRUCTED}).level == V.SAFE
    assert V.verdict("mylib.models", "Net", {V.CONSTRUCTED}).level == V.DANGEROUS


def test_listing_a_safetensors_file_reads_no_verdict_code():
    code = ("import sys, inspector\n"
            f"inspector.load({str(FIXTURES / 'safetensors' / 'dtype_zoo.safetensors')!r})\n"
            "print(sorted(m for m in sys.modules if m.endswith(('.verdicts', '.vetted', "
            "'.trust')) or m in ('tomllib', 'tomli')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_judging_a_vetted_pickle_reads_no_configuration():
    code = ("import sys, pickle, collections\n"
            "from inspector.adapters.security.restricted_pickle import base_allowed, unpickle\n"
            "unpickle(pickle.dumps(collections.OrderedDict(a=1), protocol=2), base_allowed())\n"
            "print('tomllib' in sys.modules, 'tomli' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False False"


def test_a_cluster_hands_the_trust_to_its_workers():
    """``stats --dask`` / ``diff --values --dask`` workers load the files again: with the
    client's trust (given and configured), or they would refuse what the client listed."""
    from inspector.cluster import Cluster, Opener

    with trusting(["mylib.models.Net"]):
        cluster = Cluster(client=None)
    assert "mylib.models.Net" in cluster.trust
    assert Opener("x", None, None, False, cluster.trust).trust == cluster.trust
