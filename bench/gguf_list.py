"""GGUF listing cost: ``inspector show`` against ``gguf.GGUFReader`` and a plain struct floor.

The files are written by the real ``gguf`` package (GGUFWriter) in a producer venv: a Llama 3.2
1B-shaped file (16 layers, 147 tensors of the real shapes in Q8_0/F32, a 128,256-token
vocabulary with its token types and 280,147 merges: the metadata of a real Llama 3 GGUF) and a
file of ``--many`` small tensors. Tensor data is not what is measured: the big file's data
section is left sparse (the header, key/values and tensor infos are the writer's own bytes; the
file is then extended to its full size with ``truncate``), so it costs no disk.

Each way runs as a whole process (least of ``--runs`` after a warm-up, the ways alternating;
peak RSS from ``wait4``) and prints its tensor count, which is checked (with ``--quick``,
``gguf-reader``, seconds a run and not part of the target, is timed by its warm-up run only):

- ``inspector``: ``inspector show --format json FILE`` (the tool's venv);
- ``gguf-reader``: ``gguf.GGUFReader(FILE)`` and each tensor's name, shape and type (producer venv);
- ``floor``: a plain-Python ``struct`` parse of the same header (every key/value walked, every
  tensor info unpacked into a tuple), stdlib only;
- ``floor-json``: the floor plus ``json.dumps`` of one row per tensor (name, shape, type, offset,
  bytes): the cost of writing any JSON listing at all, without groups or checks.

With ``--http`` it also serves the files over HTTP (tests/remote_servers.py: honours Range, logs
every request) and counts the requests and bytes of ``inspector show --format json URL``.

    python bench/gguf_list.py [--producer /work/venvs/gguf/bin/python] [--many 50000] [--runs 5]
                              [--http]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import rows

WRITE = r"""
import sys, numpy as np, gguf
from gguf import GGMLQuantizationType as Q
kind, path, many = sys.argv[1], sys.argv[2], int(sys.argv[3])
w = gguf.GGUFWriter(path, "llama")
if kind == "llama":
    d, ff, layers, heads, kv, vocab = 2048, 8192, 16, 32, 8, 128256
    w.add_name("llama-3.2-1b-shaped"); w.add_block_count(layers); w.add_context_length(131072)
    w.add_embedding_length(d); w.add_feed_forward_length(ff); w.add_head_count(heads)
    w.add_head_count_kv(kv); w.add_rope_dimension_count(64); w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0); w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list([f"tok{i}" for i in range(vocab)])
    w.add_token_types([1] * vocab)
    w.add_token_merges([f"m{i} n{i}" for i in range(280147)])
    shapes = [("token_embd.weight", (vocab, d), Q.Q8_0)]
    for i in range(layers):
        p = f"blk.{i}"
        shapes += [(f"{p}.attn_norm.weight", (d,), Q.F32), (f"{p}.attn_q.weight", (d, d), Q.Q8_0),
                   (f"{p}.attn_k.weight", (kv * 64, d), Q.Q8_0),
                   (f"{p}.attn_v.weight", (kv * 64, d), Q.Q8_0),
                   (f"{p}.attn_output.weight", (d, d), Q.Q8_0),
                   (f"{p}.ffn_norm.weight", (d,), Q.F32),
                   (f"{p}.ffn_gate.weight", (ff, d), Q.Q8_0),
                   (f"{p}.ffn_up.weight", (ff, d), Q.Q8_0),
                   (f"{p}.ffn_down.weight", (d, ff), Q.Q8_0)]
    shapes += [("output_norm.weight", (d,), Q.F32), ("rope_freqs.weight", (32,), Q.F32)]
    total = 0
    for name, shape, q in shapes:
        block, size = gguf.GGML_QUANT_SIZES[q]
        n = int(np.prod(shape)) * size // block
        byte_shape = gguf.quant_shape_to_byte_shape(shape, q) if q != Q.F32 else shape
        w.add_tensor_info(name, byte_shape, np.dtype(np.uint8 if q != Q.F32 else np.float32),
                          n, raw_dtype=q)
        total += n + (-n % 32)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_ti_data_to_file()
    w.close()
    with open(path, "r+b") as f:  # the data section, sparse: its size is the real one
        f.seek(0, 2); end = f.tell(); f.truncate(end + (-end % 32) + total)
else:
    w.add_block_count(1)
    x = np.zeros(8, np.float32)
    for i in range(many):
        w.add_tensor(f"blk.{i // 64}.ffn_gate.{i % 64}.weight", x)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
"""

WAYS = {
    "gguf-reader": r"""
import sys, gguf
r = gguf.GGUFReader(sys.argv[1])
rows = [(t.name, t.shape.tolist(), t.tensor_type.name, t.n_bytes) for t in r.tensors]
print(len(rows))
""",
    "floor": r"""
import mmap, struct, sys
f = open(sys.argv[1], "rb"); m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
u32, u64 = struct.Struct("<I").unpack_from, struct.Struct("<Q").unpack_from
SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def value(t, pos):
    if t == 8:
        n = u64(m, pos)[0]; return m[pos + 8:pos + 8 + n].decode(), pos + 8 + n
    if t == 9:
        it, n = struct.unpack_from("<IQ", m, pos); pos += 12
        if it in SIZES:
            return None, pos + n * SIZES[it]
        for _ in range(n):
            _, pos = value(it, pos)
        return None, pos
    return None, pos + SIZES[t]
version, nt, nkv = struct.unpack_from("<IQQ", m, 4); pos = 24
kv = {}
for _ in range(nkv):
    n = u64(m, pos)[0]; key = m[pos + 8:pos + 8 + n].decode(); pos += 8 + n
    t = u32(m, pos)[0]; kv[key], pos = value(t, pos + 4)
rows = []
for _ in range(nt):
    n = u64(m, pos)[0]; name = m[pos + 8:pos + 8 + n].decode(); pos += 8 + n
    nd = u32(m, pos)[0]; ne = struct.unpack_from(f"<{nd}Q", m, pos + 4); pos += 4 + 8 * nd
    gt, off = struct.unpack_from("<IQ", m, pos); pos += 12
    rows.append((name, ne[::-1], gt, off))
if len(sys.argv) > 2:
    import json
    out = json.dumps({"tensors": [{"name": n, "shape": list(s), "type": t, "offset": o}
                                  for n, s, t, o in rows], "kv": list(kv)})
print(len(rows))
""",
}


def _inspector() -> list[str]:
    exe = shutil.which("inspector", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "inspector"]


def run_once(argv: list[str]) -> tuple[float, int, str, float]:
    """Wall seconds, peak RSS (bytes), stdout and CPU seconds (user + system) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{argv[:3]} failed: {proc.stderr.read().decode()[-2000:]}")
    proc.stdout.close()
    proc.stderr.close()
    return wall, usage.ru_maxrss * 1024, out.decode(), usage.ru_utime + usage.ru_stime


def _count(way: str, out: str) -> int:
    if way == "inspector":
        import json

        return len(json.loads(out)["tensors"])
    return int(out.split()[-1])


def time_ways(path: str, producer: str, runs: int,
              once: tuple[str, ...] = ()) -> dict[str, tuple[float, int, int, float]]:
    """The least wall time, peak RSS, tensor count and least CPU time of each way; the ways
    in ``once`` are timed by their first (checking) run only."""
    argvs = {
        "inspector": [*_inspector(), "show", "--format", "json", path],
        "gguf-reader": [producer, "-c", WAYS["gguf-reader"], path],
        "floor": [sys.executable, "-c", WAYS["floor"], path],
        "floor-json": [sys.executable, "-c", WAYS["floor"], path, "json"],
    }
    first = {w: run_once(a) for w, a in argvs.items()}  # warm-up + check
    counts = {w: _count(w, r[2]) for w, r in first.items()}
    if len(set(counts.values())) != 1:
        raise SystemExit(f"the ways disagree on the tensor count: {counts}")
    got: dict[str, list[tuple[float, int, float]]] = {w: [] for w in argvs}
    for w in once:
        wall, rss, _, cpu = first[w]
        got[w].append((wall, rss, cpu))
    for _ in range(runs):
        for w, argv in argvs.items():
            if w in once:
                continue
            wall, rss, _, cpu = run_once(argv)
            got[w].append((wall, rss, cpu))
    return {w: (min(t for t, _, _ in r), max(m for _, m, _ in r), counts[w],
                min(c for _, _, c in r)) for w, r in got.items()}


def http_counts(paths: dict[str, str]) -> dict[str, tuple[int, int]]:
    """(requests, body bytes) the server saw for each listing over HTTP."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tests"))
    from remote_servers import RangeServer

    out = {}
    served = {Path(p).parent for p in paths.values()}
    assert len(served) == 1
    with RangeServer(served.pop()) as http:
        for case, path in paths.items():
            http.reset()
            run_once([*_inspector(), "show", "--format", "json",
                      f"{http.url}/{os.path.basename(path)}"])
            out[case] = (len(http.log), http.bytes_sent())
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--producer", default="/work/venvs/gguf/bin/python",
                   help="a python with the gguf package (writes the files, runs GGUFReader)")
    p.add_argument("--many", type=int, default=50_000)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--keep", help="write the files here and keep them (reused when present: "
                   "under a directory named by the generator and the producer)")
    p.add_argument("--http", action="store_true", help="also count HTTP range requests")
    p.add_argument("--json", help="write the result rows (bench/rows.py schema) here")
    p.add_argument("--quick", action="store_true",
                   help="the --many file only, gguf.GGUFReader timed by one run")
    a = p.parse_args()
    name = f"GGUF {a.many:,} tensors: show --format json vs floor + json.dumps"
    if not rows.python_ok(a.producer):
        print(f"{name}: {rows.NA}")
        rows.write(a.json, [rows.missing("formats", name, "<= 2x floor")])
        return
    out = rows.kept(a.keep, WRITE, a.producer) if a.keep else tempfile.mkdtemp(
        prefix="gguf_list.")
    os.makedirs(out, exist_ok=True)
    files = {"llama-3.2-1B-shaped (Q8_0, 128k vocab)": ("llama", os.path.join(out, "llama.gguf")),
             f"{a.many:,} tensors": ("many", os.path.join(out, f"many{a.many}.gguf"))}
    if a.quick:
        del files["llama-3.2-1B-shaped (Q8_0, 128k vocab)"]
    try:
        rows_ = []
        for case, (kind, path) in files.items():
            if not os.path.exists(path):
                subprocess.run([a.producer, "-c", WRITE, kind, path, str(a.many)], check=True)
            # --quick: GGUFReader (seconds a run, beside the target, not in it) runs once
            once = ("gguf-reader",) if a.quick else ()
            rows_.append((case, os.path.getsize(path), time_ways(path, a.producer, a.runs, once)))
        ways = ("inspector", "gguf-reader", "floor", "floor-json")
        print("| file | tensors | " + " | ".join(ways) + " | inspector / floor-json "
              "(wall, CPU) | gguf-reader / inspector |")
        print("|---|---|" + "---|" * (len(ways) + 2))
        for case, size, res in rows_:
            cells = [f"{res[w][0] * 1000:.0f} ms [CPU {res[w][3] * 1000:.0f} ms], "
                     f"{res[w][1] >> 20} MB" for w in ways]
            print(f"| {case}, {size / 2**30:.2f} GiB | {res['inspector'][2]:,} | "
                  + " | ".join(cells)
                  + f" | {res['inspector'][0] / res['floor-json'][0]:.2f}x, "
                  f"{res['inspector'][3] / res['floor-json'][3]:.2f}x"
                  f" | {res['gguf-reader'][0] / res['inspector'][0]:.1f}x |")
        rows_by_case = {case: res for case, _, res in rows_}
        many = rows_by_case[f"{a.many:,} tensors"]
        rows.write(a.json, [rows.at_most_floor(
            "formats", name, many["inspector"][0], many["floor-json"][0], 2,
            "whole processes, min of runs; floor: struct parse + json.dumps of the rows "
            f"({many['floor'][0] * 1000:.0f} ms without the dumps); CPU time "
            f"{many['inspector'][3] * 1000:.0f} ms against {many['floor-json'][3] * 1000:.0f} ms "
            f"({many['inspector'][3] / many['floor-json'][3]:.2f}x)",
            producer=many["gguf-reader"][0])])
        if a.http:
            print("\n| file over HTTP | requests | bytes |\n|---|---|---|")
            for case, (n, sent) in http_counts({c: p for c, (_, p) in files.items()}).items():
                print(f"| {case} | {n} | {sent:,} |")
    finally:
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
