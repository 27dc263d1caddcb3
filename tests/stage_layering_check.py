#!/usr/bin/env python3
"""tests/stage_layering_check.py BUILD_DIR - the pipeline's stages only include downwards.

libaether is built as one object library per pipeline stage (CMakeLists.txt, aether_stage), each
compiled against links to its own headers and those of the stages it sees (BUILD_DIR/stages/<stage>).
This check reads the compile commands CMake wrote and fails when:
  - a stage sees a stage that is not before it in PIPELINE (below), or a device folder sees another's;
  - a stage's include path holds a project folder (src/ or include/) that would bypass the links;
  - a header of a later stage can be included from a stage (it must fail to build);
  - a header of a stage does not build on its own with that stage's flags (headers are
    self-contained and include only what their stage sees).
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

# The pipeline, first stage first: tensor & dtype & shape -> graph -> schedule -> codegen -> the
# device runtimes and the executor -> nn / optim / data / model.
PIPELINE = ["core", "graph", "ops", "schedule", "codegen", "backend", "backend_cpu", "backend_cuda",
            "io", "data", "nn", "optim", "dist", "model"]


def fail(msg):
    print("FAIL:", msg)
    return 1


def main():
    build = os.path.abspath(sys.argv[1])
    source = os.path.abspath(sys.argv[2])
    stage_root = os.path.join(build, "stages")
    commands = json.load(open(os.path.join(build, "compile_commands.json")))
    stage_cmd = {}
    for e in commands:
        m = re.search(r"CMakeFiles/aether_([a-z_]+)\.dir/", e.get("command", "") + e.get("output", ""))
        if m and m.group(1) in PIPELINE and m.group(1) not in stage_cmd:
            stage_cmd[m.group(1)] = (shlex.split(e["command"]), e["directory"])
    status = 0
    for s in ["core", "graph", "ops", "schedule", "codegen", "backend", "backend_cpu", "io", "data",
              "nn", "optim", "dist", "model"]:
        if s not in stage_cmd:
            status |= fail(f"no compile command of stage {s} in compile_commands.json")
    headers = {}  # stage -> its headers, relative to its link folder
    for s in stage_cmd:
        root = os.path.join(stage_root, s)
        headers[s] = sorted(os.path.relpath(os.path.join(d, f), root)
                            for d, _, fs in os.walk(root) for f in fs if f.endswith(".h"))

    def flags(s):
        """The stage's command without its source, output and dependency-file arguments."""
        argv, _ = stage_cmd[s]
        out, skip = [], False
        for a in argv[1:]:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c", "-MF", "-MT", "-MQ"):
                skip = True
                continue
            if a in ("-MD", "-MMD"):
                continue
            out.append(a)
        return [argv[0]] + out

    def seen(s):
        return [os.path.basename(a[2:]) for a in flags(s) if a.startswith("-I" + stage_root + "/")]

    checked = 0
    for s in stage_cmd:
        i = PIPELINE.index(s)
        for t in seen(s):
            if t == s:
                continue
            if t not in PIPELINE or PIPELINE.index(t) >= i:
                status |= fail(f"stage {s} sees {t}, which is not before it in the pipeline")
            if s.startswith("backend_") and t.startswith("backend_"):
                status |= fail(f"device folder {s} sees another device's headers ({t})")
        for a in flags(s):
            if a.startswith("-I") or a.startswith("-isystem"):
                d = os.path.abspath(a[2:] if a.startswith("-I") else a[8:])
                if d.startswith(os.path.join(source, "src")) or d.startswith(os.path.join(source, "include")):
                    status |= fail(f"stage {s} has the project folder {d} on its include path")

    jobs = []  # (stage, header, must_build)
    for s in stage_cmd:
        for h in headers[s]:
            jobs.append((s, h, True))
        for t in stage_cmd:
            if t != s and t not in seen(s) and headers[t]:
                own = [h for h in headers[t] if all(h not in headers[u] for u in seen(s) + [s])]
                if own:
                    jobs.append((s, own[0], False))

    def run(job):
        s, h, must_build = job
        with tempfile.NamedTemporaryFile("w", suffix=".cpp", dir=build, delete=False) as f:
            f.write(f'#include "{h}"\n')
            path = f.name
        try:
            cmd = flags(s) + ["-fsyntax-only", path]
            r = subprocess.run(cmd, cwd=stage_cmd[s][1], capture_output=True, text=True)
        finally:
            os.unlink(path)
        if must_build and r.returncode != 0:
            return f"{h} does not build on its own in stage {s}:\n{r.stderr[-2000:]}"
        if not must_build and r.returncode == 0:
            return f"stage {s} can include {h}, a header of a stage it does not see"
        if not must_build and "No such file" not in r.stderr:
            return f"including {h} from stage {s} failed for another reason than a missing file:\n{r.stderr[-1000:]}"
        return None

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        for msg in pool.map(run, jobs):
            checked += 1
            if msg:
                status |= fail(msg)
    builds = sum(1 for j in jobs if j[2])
    print(f"{len(stage_cmd)} stages; {builds} headers build in their stage; "
          f"{checked - builds} includes of headers from stages it does not see fail to build")
    return status


if __name__ == "__main__":
    sys.exit(main())
