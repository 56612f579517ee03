#!/usr/bin/env python3
"""Seed the fuzz corpora from real inputs (run once; the committed corpora
are these seeds after fuzzing and `cargo fuzz cmin`).

    seed_corpora.py CORPUS_DIR --run RUN_DIR... --ggml FILE...

Writes CORPUS_DIR/<target>/ for six targets:
- protocol: protocols/*.toml and each run's protocol.toml;
- captures: sampler/tests/captures/<tool>/* and each run's tool snapshots,
  prefixed by the selector byte of their parser (see fuzz_targets/captures.rs);
- worker_message: each arm's channel rebuilt from its run directory (hello,
  markers with results, runtime and settled readings after their markers,
  log lines, bye), and one line of each message type;
- ggml: the given model files;
- heap_profile: reports/tests/heap/* and each run's jemalloc heap profiles
  (`arms/*/heap/*.heap`), prefixed by byte 0, and malloc_history captures
  (`*.malloc_history*.txt`), prefixed by byte 1 (see
  fuzz_targets/heap_profile.rs);
- run_dir: each run directory in the run_dir target's format (files
  separated by NUL, each `path\\ncontents`): whole, raw files only, one arm
  only, and with the irregular entries the target can make.
"""

import argparse
import hashlib
import json
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

# Tool::ALL order in sampler/src/captures/tool.rs, then vm_stat's
# snapshot (15) and interval (16) forms.
TOOLS = [
    "vmmap", "vm_stat", "memory_pressure", "footprint", "time", "ps", "status",
    "statm", "smaps_rollup", "meminfo", "vmstat", "pressure", "memory.stat",
    "memory.events", "memory.peak",
]
VM_STAT_SNAPSHOT, VM_STAT_INTERVAL = 15, 16

# Series rows and record lines kept per file in run_dir seeds: enough for
# every chart and statistic, small enough to fuzz quickly. Markers, results
# and settled readings are kept whole: the receipt needs every phase.
SERIES_ROWS = 40
RECORD_LINES = 4
LOG_LINES = 20
WHOLE = ("markers.jsonl", "results.jsonl", "settled.jsonl")


def put(out: pathlib.Path, name: str, data: bytes) -> None:
    out.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(data).hexdigest()[:12]
    (out / f"{name}-{digest}").write_bytes(data)


def seed_protocols(out, runs):
    for p in sorted((REPO / "protocols").glob("*.toml")):
        put(out, p.stem, p.read_bytes())
    for run in runs:
        p = run / "protocol.toml"
        if p.is_file():
            put(out, f"run-{run.name}", p.read_bytes())


def seed_captures(out, runs):
    root = REPO / "sampler/tests/captures"
    for tool_dir in sorted(d for d in root.iterdir() if d.is_dir()):
        # Captures of what `import` does not parse (nvml, pmset) have no selector.
        if tool_dir.name not in TOOLS:
            continue
        selectors = [TOOLS.index(tool_dir.name)]
        if tool_dir.name == "vm_stat":
            selectors += [VM_STAT_SNAPSHOT, VM_STAT_INTERVAL]
        for f in sorted(tool_dir.iterdir()):
            for s in selectors:
                put(out, f"{s:02}-{f.stem}", bytes([s]) + f.read_bytes())
    for run in runs:
        for f in sorted(run.glob("arms/*/snapshots/*.txt")):
            tool = f.stem.split("-", 2)[-1]
            if tool in TOOLS:
                s = TOOLS.index(tool)
                put(out, f"{s:02}-run-{tool}", bytes([s]) + f.read_bytes())


def tagged(kind: str, record: dict) -> str:
    return json.dumps({"type": kind, **record}, separators=(",", ":"))


def channel(arm: pathlib.Path) -> list:
    """The fd-3 lines the worker of `arm` sent, rebuilt from its files."""
    def jsonl(name):
        p = arm / name
        if not p.is_file():
            return []
        return [json.loads(l) for l in p.read_text().splitlines() if l.strip()]

    lines = []
    hello = arm / "hello.json"
    if hello.is_file():
        lines.append(tagged("hello", json.loads(hello.read_text())))
    results = {r["request_id"]: r for r in jsonl("results.jsonl")}
    settled = {s["request_id"]: s for s in jsonl("settled.jsonl")}
    runtime = arm / "runtime.json"
    markers = jsonl("markers.jsonl")
    requests = 0
    for m in markers:
        lines.append(tagged("marker", m))
        if m["phase"] == "state_ready" and runtime.is_file():
            lines.append(tagged("runtime", json.loads(runtime.read_text())))
        if m["phase"] == "request_end":
            rid = m.get("request_id")
            if rid in results:
                lines.append(tagged("result", results[rid]))
                requests += 1
            if rid in settled:
                lines.append(tagged("settled", settled[rid]))
    log = arm / "worker.log"
    if log.is_file():
        for l in log.read_text().splitlines()[:20]:
            parts = l.split(" ", 2)
            if len(parts) == 3 and parts[1].lower() in ("debug", "info", "warn", "error"):
                lines.append(tagged("log", {"level": parts[1].lower(), "message": parts[2]}))
    if markers:
        lines.append(tagged("bye", {"requests": requests}))
    return lines


def seed_worker_messages(out, runs):
    singles = {}
    for run in runs:
        for arm in sorted((run / "arms").iterdir()):
            lines = channel(arm)
            if lines:
                put(out, f"channel-{run.name}-{arm.name}", ("\n".join(lines) + "\n").encode())
            for l in lines:
                singles.setdefault(json.loads(l)["type"], l)
    singles["error"] = tagged("error", {"message": "cannot open the model: No such file"})
    for kind, line in sorted(singles.items()):
        put(out, f"one-{kind}", line.encode())


def files_of(run: pathlib.Path, keep) -> list:
    out = []
    for f in sorted(p for p in run.rglob("*") if p.is_file() and not p.is_symlink()):
        rel = f.relative_to(run).as_posix()
        if not keep(rel):
            continue
        data = f.read_bytes()
        if rel.endswith("series.csv"):
            data = b"".join(data.splitlines(keepends=True)[: SERIES_ROWS + 1])
        elif rel.endswith(".jsonl") and not rel.endswith(WHOLE):
            data = b"".join(data.splitlines(keepends=True)[:RECORD_LINES])
        elif rel.endswith((".log", ".txt")):
            data = b"".join(data.splitlines(keepends=True)[:LOG_LINES])
        out.append((rel, data))
    return out


def pack(files) -> bytes:
    return b"\0".join(rel.encode() + b"\n" + data for rel, data in files)


DERIVED = {"receipt.json", "manifest.json", "report.html", "summary.md", "phases.csv",
           "trace.json", "calibration.json"}
BULKY = ("census.jsonl", "/snapshots/", "report.html")


def seed_run_dirs(out, runs):
    for run in runs:
        lean = lambda rel: not any(b in rel for b in BULKY)
        put(out, f"sealed-{run.name}", pack(files_of(run, lean)))
        raw = lambda rel: lean(rel) and rel not in DERIVED
        put(out, f"raw-{run.name}", pack(files_of(run, raw)))
        put(out, f"unsealed-{run.name}",
            pack(files_of(run, lambda rel: raw(rel) and rel != "raw-seal.json")))
        arms = sorted(a.name for a in (run / "arms").iterdir())
        first = f"arms/{arms[0]}/"
        one_arm = lambda rel: raw(rel) and (not rel.startswith("arms/") or rel.startswith(first))
        put(out, f"one-arm-{run.name}", pack(files_of(run, one_arm)))
        hostile = files_of(run, one_arm) + [
            (first + "stdout.txt", b"@fifo"),
            # The same path again: the target must not write into its FIFO.
            (first + "stdout.txt", b"written over a FIFO\n"),
            (first + "worker.log", b"@link /dev/zero"),
            ("arms/loop", b"@link ."),
        ]
        put(out, f"hostile-{run.name}", pack(hostile))


# Heap profiles kept per run: the first few phases of each arm carry every
# line shape (the header, stacks with and without counts, the maps).
HEAP_PROFILES_PER_ARM = 3


def seed_heap_profiles(out, runs):
    files = sorted((REPO / "reports/tests/heap").iterdir())
    for run in runs:
        for arm in sorted(run.glob("arms/*/heap")):
            files += sorted(arm.glob("*.heap"))[:HEAP_PROFILES_PER_ARM]
            files += sorted(arm.glob("*.malloc_history*.txt"))[:HEAP_PROFILES_PER_ARM]
    for f in files:
        selector = 1 if "malloc_history" in f.name else 0
        put(out, f"{selector}-{f.stem}", bytes([selector]) + f.read_bytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=pathlib.Path)
    ap.add_argument("--run", type=pathlib.Path, action="append", default=[])
    ap.add_argument("--ggml", type=pathlib.Path, action="append", default=[])
    args = ap.parse_args()
    seed_protocols(args.corpus / "protocol", args.run)
    seed_captures(args.corpus / "captures", args.run)
    seed_worker_messages(args.corpus / "worker_message", args.run)
    for g in args.ggml:
        put(args.corpus / "ggml", g.stem, g.read_bytes())
    seed_heap_profiles(args.corpus / "heap_profile", args.run)
    seed_run_dirs(args.corpus / "run_dir", args.run)
    for t in sorted(args.corpus.iterdir()):
        print(t.name, len(list(t.iterdir())), file=sys.stderr)


if __name__ == "__main__":
    main()
