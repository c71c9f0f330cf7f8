#!/bin/bash
# tools/msvc-check.sh — what can be checked here of "the CUDA build compiles
# with MSVC + nvcc" (issue #33, point 3), without Microsoft's compiler or
# headers: every C file of core/, plugins/ and sdk/ that the Windows build
# compiles, with the flags of that build (its compile_commands.json), run
# through clang with MinGW-w64's headers and every GNU extension that MSVC
# lacks made an error: VLAs, statement expressions, typeof, ?: without a
# middle operand, case and designator ranges, zero-length arrays, and the
# rest of -Wgnu / -Wpedantic. Then a scan for what the compiler accepts
# silently: __attribute__, __builtin_* and typeof outside a block guarded for
# GCC/Clang (#if defined(__GNUC__) ... #else ...), and the plugin entry's
# export macro (ORK_EXPORT: __declspec(dllexport) on Windows).
#   tools/msvc-check.sh <windows build dir>   (default build-mingw/build;
#   tools/win-ci.sh configures it with CMAKE_EXPORT_COMPILE_COMMANDS=ON)
# Exit 0: clean; 1: findings (listed, one a line); 77: nothing to check with
# (no clang, no compile_commands.json).
set -uo pipefail
cd "$(dirname "$0")/.."
build=$(realpath -m "${1:-build-mingw/build}")
clang=$(command -v clang-14 || command -v clang || true)
[ -n "$clang" ] || { echo "msvc-check: no clang: skipped" >&2; exit 77; }
[ -f "$build/compile_commands.json" ] || {
  echo "msvc-check: no $build/compile_commands.json (configure the Windows build first): skipped" >&2; exit 77; }
t0=$(date +%s)
python3 - "$clang" "$build/compile_commands.json" "$PWD" "$(nproc)" <<'PY'
import json, os, re, shlex, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
clang, ccj, top, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
areas = tuple(os.path.join(top, a) + "/" for a in ("core", "plugins", "sdk"))
gnu = ["-Wno-everything", "-Werror=gnu", "-Werror=vla", "-Werror=pedantic",
       "-Wno-error=gnu-zero-variadic-macro-arguments",  # ", ## __VA_ARGS__": MSVC takes it too
       "-Wno-gnu-zero-variadic-macro-arguments"]
seen, cmds = set(), []
for e in json.load(open(ccj)):
    f = os.path.realpath(e["file"])
    if not f.endswith(".c") or not f.startswith(areas) or f in seen:
        continue
    seen.add(f)
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    keep, skip = [], False
    for a in args[1:]:
        if skip: skip = False; continue
        if a in ("-o", "-c"): skip = True; continue
        if a.startswith("-W") or a.startswith("-O") or a == "-g": continue
        keep.append(a)
    cmds.append((f, e["directory"], [clang, "--target=x86_64-w64-mingw32", "-fsyntax-only"] + keep + gnu + ["-c", f]))

def run(c):
    f, d, argv = c
    r = subprocess.run(argv, cwd=d, capture_output=True, text=True)
    return [l for l in r.stderr.splitlines() if "error:" in l]

bad = 0
with ThreadPoolExecutor(jobs) as ex:
    for errs in ex.map(run, cmds):
        for l in errs:
            print("  " + l.replace(top + "/", "")); bad += 1

# what the compiler accepts silently: outside a GCC-guarded block
ext = re.compile(r"\b(__attribute__|__builtin_\w+|typeof|__typeof__)\b")
gcc_cond = re.compile(r"__GNUC__|__clang__|__MINGW32__|!\s*defined\s*\(?\s*_MSC_VER|ifndef\s+_MSC_VER")
msvc_cond = re.compile(r"defined\s*\(?\s*_MSC_VER|ifdef\s+_MSC_VER")
files = []
for a in ("core", "plugins", "sdk/include"):
    for root, _, names in os.walk(os.path.join(top, a)):
        files += [os.path.join(root, n) for n in names if n.endswith((".c", ".h"))]
for path in sorted(files):
    stack = []  # (guarded for GCC in this branch)
    in_comment = False
    for no, line in enumerate(open(path, errors="replace"), 1):
        code = line
        if in_comment:
            if "*/" not in code: continue
            code, in_comment = code.split("*/", 1)[1], False
        code = re.sub(r"/\*.*?\*/", "", code)
        if "/*" in code: code, in_comment = code.split("/*", 1)[0], True
        code = code.split("//", 1)[0]
        s = code.strip()
        if s.startswith("#"):
            d = s[1:].strip()
            if d.startswith(("if", "ifdef", "ifndef")):
                stack.append(bool(gcc_cond.search(d)) and not (d.startswith("ifdef") and "_MSC_VER" in d))
                if msvc_cond.search(d) and not gcc_cond.search(d): stack[-1] = "msvc"
            elif d.startswith("elif") and stack:
                stack[-1] = bool(gcc_cond.search(d))
            elif d.startswith("else") and stack:
                stack[-1] = True if stack[-1] == "msvc" else False if stack[-1] is True else stack[-1]
            elif d.startswith("endif") and stack:
                stack.pop()
        if any(g is True for g in stack): continue
        m = ext.search(code)
        if m:
            print(f"  {os.path.relpath(path, top)}:{no}: {m.group(1)} outside a GCC/Clang-guarded block"); bad += 1

abi = open(os.path.join(top, "sdk/include/orakul/abi.h")).read()
if not re.search(r"#if\s+defined\(_WIN32\).*?\n#define ORK_EXPORT __declspec\(dllexport\)", abi, re.S):
    print("  sdk/include/orakul/abi.h: ORK_EXPORT is not __declspec(dllexport) on Windows"); bad += 1
print(f"== msvc-check: {len(cmds)} C files compiled, {len(files)} scanned: {bad} findings")
sys.exit(1 if bad else 0)
PY
rc=$?
echo "== msvc-check: $(( $(date +%s) - t0 )) s"
exit $rc
