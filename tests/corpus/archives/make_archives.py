"""Archives people download and unpack, made by the real tools: the ``tar`` command (plain,
``-z``, ``-j``, ``-J``), ``7z`` (Debian's p7zip-full), ``py7zr``, and Python's ``tarfile`` and
``zipfile`` for what the commands refuse to write (absolute and ``..`` names, links out,
device members). Run in the producer venv (torch 2.13.0 CPU, py7zr) with ``tar`` and ``7z`` on
the PATH:

    apt-get install p7zip-full
    /work/venvs/torchserve/bin/python tests/corpus/archives/make_archives.py

The members: ``weights.pt`` (``torch.save`` of a state dict: benign) and ``payload.pkl`` (a
pickle of an object whose ``__reduce__`` calls ``os.system``). ``archives.truth.json`` records
each archive's members as its own reader lists them (``tarfile``, ``zipfile``, ``py7zr``), and
for each ``payload*`` archive whether unpacking it (``tarfile`` with the ``data`` filter,
``zipfile``, ``py7zr``) and ``pickle.load`` of the innermost ``payload.pkl`` wrote the marker.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from pathlib import Path

import py7zr
import torch

HERE = Path(__file__).resolve().parent
MARKER = "/tmp/inspector-archive-payload-ran"


class Payload:
    def __reduce__(self):
        return (os.system, (f"touch {MARKER}",))


def run(*cmd: str, cwd: Path) -> None:
    subprocess.run(cmd, check=True, cwd=cwd, stdout=subprocess.DEVNULL)


def zip_of(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)


def tar_of(path: Path, infos: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    with tarfile.open(path, "w") as t:
        for info, data in infos:
            t.addfile(info, io.BytesIO(data) if data is not None else None)


def info(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    i = tarfile.TarInfo(name)
    i.size, i.type, i.linkname, i.mode = size, kind, link, 0o644
    return i


def listing(path: Path) -> list[list[str]]:
    name = path.name
    if name.endswith(".7z"):
        with py7zr.SevenZipFile(path) as z:
            return [[f.filename, "dir" if f.is_directory else "file"] for f in z.list()]
    if zipfile.is_zipfile(path) and not tarfile.is_tarfile(path):
        with zipfile.ZipFile(path) as z:
            return [[i.filename, "dir" if i.is_dir() else "file"] for i in z.infolist()]
    with tarfile.open(path) as t:
        kinds = {tarfile.SYMTYPE: "symlink", tarfile.LNKTYPE: "hardlink",
                 tarfile.CHRTYPE: "chardev", tarfile.BLKTYPE: "blockdev",
                 tarfile.FIFOTYPE: "fifo", tarfile.DIRTYPE: "dir"}
        return [[m.name, kinds.get(m.type, "file")] for m in t.getmembers()]


def unpack_and_load(path: Path) -> bool:
    """Unpack as a user would (nested archives too) and pickle.load every payload.pkl."""
    if os.path.exists(MARKER):
        os.unlink(MARKER)
    out = Path(tempfile.mkdtemp())
    todo = [path]
    while todo:
        p = todo.pop()
        d = Path(tempfile.mkdtemp(dir=out))
        if p.name.endswith(".7z"):
            with py7zr.SevenZipFile(p) as z:
                z.extractall(d)
        elif zipfile.is_zipfile(p) and not tarfile.is_tarfile(p):
            with zipfile.ZipFile(p) as z:
                z.extractall(d)
        else:
            with tarfile.open(p) as t:
                t.extractall(d, filter="data")
        for f in d.rglob("*"):
            if f.name.endswith((".zip", ".tar", ".gz", ".7z")):
                todo.append(f)
            elif f.name == "payload.pkl":
                with open(f, "rb") as fh:
                    pickle.load(fh)
    shutil.rmtree(out)
    return os.path.exists(MARKER)


def main() -> None:
    work = Path(tempfile.mkdtemp())
    src = work / "src"
    src.mkdir()
    torch.save({"fc.weight": torch.zeros(2, 2), "fc.bias": torch.zeros(2)}, src / "weights.pt")
    (src / "payload.pkl").write_bytes(pickle.dumps(Payload(), protocol=2))
    (src / "README.txt").write_text("a model\n")
    weights = (src / "weights.pt").read_bytes()
    payload = (src / "payload.pkl").read_bytes()
    for f in HERE.glob("*"):
        if f.name not in ("make_archives.py",):
            f.unlink()
    for stem, members in (("benign", ["weights.pt", "README.txt"]),
                          ("payload", ["weights.pt", "payload.pkl"])):
        run("tar", "-cf", str(HERE / f"{stem}.tar"), *members, cwd=src)
        run("tar", "-czf", str(HERE / f"{stem}.tar.gz"), *members, cwd=src)
        run("tar", "-cjf", str(HERE / f"{stem}.tar.bz2"), *members, cwd=src)
        run("tar", "-cJf", str(HERE / f"{stem}.tar.xz"), *members, cwd=src)
        run("7z", "a", "-bd", str(HERE / f"{stem}.7z"), *members, cwd=src)
        with py7zr.SevenZipFile(HERE / f"{stem}_py7zr.7z", "w") as z:
            for m in members:
                z.write(src / m, m)
        inner = io.BytesIO()
        with zipfile.ZipFile(inner, "w") as z:
            for m in members:
                z.write(src / m, f"model/{m}")
        zip_of(HERE / f"{stem}_zip_in_zip.zip", {"inner.zip": inner.getvalue()})
    # three levels: a .tar.gz holding a zip holding a tar holding the pickle
    run("tar", "-cf", str(work / "deep.tar"), "payload.pkl", cwd=src)
    zip_of(work / "mid.zip", {"deep.tar": (work / "deep.tar").read_bytes()})
    run("tar", "-czf", str(HERE / "payload_nested.tar.gz"), "mid.zip", cwd=work)
    # what unpacking writes outside its folder (the tar command refuses to write these)
    tar_of(HERE / "slip_absolute.tar", [(info("/tmp/inspector-slip.pt", len(weights)), weights)])
    tar_of(HERE / "slip_dotdot.tar", [(info("../../inspector-slip.pt", len(weights)), weights)])
    tar_of(HERE / "link_out.tar", [(info("weights.pt", 0, tarfile.SYMTYPE, "/etc/passwd"), None)])
    tar_of(HERE / "hardlink_out.tar",
           [(info("weights.pt", 0, tarfile.LNKTYPE, "../../etc/passwd"), None)])
    tar_of(HERE / "device.tar", [(info("weights.pt", 0, tarfile.CHRTYPE), None)])
    zip_of(HERE / "slip_dotdot.zip", {"../../inspector-slip.pt": weights})
    # a link that stays inside (Hugging Face's cache: snapshots/<rev>/ -> ../../blobs/<sha>)
    cache = work / "cache"
    (cache / "blobs").mkdir(parents=True)
    (cache / "snapshots" / "abc").mkdir(parents=True)
    (cache / "blobs" / "1234").write_bytes(weights)
    os.symlink("../../blobs/1234", cache / "snapshots" / "abc" / "weights.pt")
    run("tar", "-cf", str(HERE / "benign_link_inside.tar"), "blobs", "snapshots", cwd=cache)
    truth = {"torch": torch.__version__, "py7zr": py7zr.__version__, "files": {}}
    for f in sorted(HERE.iterdir()):
        if f.name == "make_archives.py" or f.name.endswith(".json"):
            continue
        entry: dict = {"members": listing(f)}
        if f.name.startswith("payload"):
            entry["payload_ran_after_unpacking"] = unpack_and_load(f)
        truth["files"][f.name] = entry
    _ = payload
    (HERE / "archives.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
