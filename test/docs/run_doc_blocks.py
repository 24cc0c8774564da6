"""Runs the fenced code blocks of documentation pages, in order, in one
temporary directory per page, so that every command the docs show is
exercised.

  run_doc_blocks.py --build BUILD --tmp DIR PAGE.md...

Blocks by info string:
  sh [cuda|gpu] [fails] [repo]
                          run by bash -euo pipefail; a non-zero exit fails,
                          except with `fails`, where the exit must be
                          non-zero and every line of the next fenced block
                          must appear in the output. `repo` runs it in the
                          repository (--repo) instead, with
                          MEGC_BUILD_DIR=BUILD, as a reader of the page
                          would run the project's scripts.
  text                    right after a block that runs: the output it
                          shows. Its lines (but `...`) must be lines of the
                          real output, in order, each number standing for
                          any number (timings and rates vary).
  python [cuda|gpu]       run by /usr/bin/python3 with the built package.
  LANG file=NAME          written to NAME (directories made as needed), for
                          the blocks after it to use.
  anything else           shown only (output, IR, API sketches).
`cuda` blocks need the CUDA toolkit's ptxas, `gpu` blocks a CUDA GPU with a
driver; without them they are reported as skipped. The tools of BUILD/bin
come first on PATH, `python3` is /usr/bin/python3 (the Python that
scripts/setup.sh gives NumPy), BUILD/python is on PYTHONPATH, and `build`
in the directory links to BUILD, as if the commands ran in the repository.
"""
import argparse
import ctypes
import os
import pathlib
import re
import shutil
import subprocess
import sys

FENCE = re.compile(r"^```(\S*)(.*)$")
TIMEOUT_S = 300
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def shown_line_pattern(line):
    """A regex for one shown output line: its text literally, each number
    any number."""
    parts, last = [], 0
    for match in NUMBER.finditer(line):
        parts.append(re.escape(line[last:match.start()]))
        parts.append(NUMBER.pattern)
        last = match.end()
    parts.append(re.escape(line[last:]))
    return re.compile("".join(parts))


def check_shown_output(where, shown, output):
    """Every shown line but `...` matches a line of the output, in order."""
    lines = output.splitlines()
    at = 0
    for want in shown.splitlines():
        want = want.strip()
        if not want or want == "...":
            continue
        pattern = shown_line_pattern(want)
        while at < len(lines) and not pattern.search(lines[at]):
            at += 1
        if at == len(lines):
            sys.exit(f"{where}: the output lacks (in order) the line the "
                     f"page shows after the block:\n  {want}\n"
                     f"output:\n{output}")
        at += 1


def blocks(page):
    """(line, language, attributes, text) of each fenced block."""
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match or not match.group(1):
            i += 1
            continue
        start, language, attrs = i + 1, match.group(1), match.group(2).split()
        i += 1
        body = []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            sys.exit(f"{page}:{start}: unterminated ``` block")
        i += 1
        yield start, language, attrs, "\n".join(body) + "\n"


def has_ptxas():
    cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    return os.access(os.path.join(cuda, "bin", "ptxas"), os.X_OK)


def has_gpu():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(
        ctypes.byref(count)) == 0 and count.value > 0


def environment(build, tmp):
    shims = tmp / ".shims"
    shims.mkdir(parents=True, exist_ok=True)
    python = shims / "python3"
    if not python.exists():
        python.symlink_to("/usr/bin/python3")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join(
        [str(shims), str(build / "bin"), env.get("PATH", "")])
    env["PYTHONPATH"] = str(build / "python")
    # The pages' mpirun commands, in a CI container that runs as root.
    if os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


def run_page(page, build, tmp, available, repo):
    work = tmp / page.stem
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "build").symlink_to(build)
    env = environment(build, tmp)
    ran = skipped = checked = 0
    listed = list(blocks(page))
    for index, (line, language, attrs, text) in enumerate(listed):
        where = f"{page.name}:{line}"
        files = [a[len("file="):] for a in attrs if a.startswith("file=")]
        if files:
            (work / files[0]).parent.mkdir(parents=True, exist_ok=True)
            (work / files[0]).write_text(text)
            continue
        if language == "sh":
            command = ["bash", "-euo", "pipefail", "-c", text]
        elif language == "python":
            command = ["/usr/bin/python3", "-c", text]
        else:
            continue
        missing = [need for need in ("cuda", "gpu")
                   if need in attrs and not available[need]]
        if missing:
            print(f"{where}: skipped ({' and '.join(missing)} unavailable)")
            skipped += 1
            continue
        if "repo" in attrs and repo is None:
            sys.exit(f"{where}: a `repo` block needs --repo")
        result = subprocess.run(command, cwd=repo if "repo" in attrs else work,
                                env=dict(env, MEGC_BUILD_DIR=str(build)),
                                text=True,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, timeout=TIMEOUT_S)
        output = result.stdout
        if "fails" in attrs:
            if result.returncode == 0:
                sys.exit(f"{where}: expected the block to fail; it exited 0:"
                         f"\n{text}\n{output}")
            expected = listed[index + 1][3] if index + 1 < len(listed) else ""
            for want in filter(None, expected.splitlines()):
                if want not in output:
                    sys.exit(f"{where}: the output lacks the line shown "
                             f"after the block:\n  {want}\noutput:\n{output}")
        elif result.returncode != 0:
            sys.exit(f"{where}: exit {result.returncode}:\n{text}\n"
                     f"output:\n{output}")
        elif index + 1 < len(listed) and listed[index + 1][1] == "text":
            check_shown_output(where, listed[index + 1][3], output)
            checked += 1
        print(f"{where}: ok")
        ran += 1
    if ran == 0:
        sys.exit(f"{page.name}: no block ran")
    print(f"{page.name}: {ran} blocks run, {skipped} skipped, {checked} "
          f"outputs as shown")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", type=pathlib.Path, required=True)
    parser.add_argument("--tmp", type=pathlib.Path, required=True)
    parser.add_argument("--repo", type=pathlib.Path,
                        help="the repository, where `repo` blocks run")
    parser.add_argument("pages", type=pathlib.Path, nargs="+")
    args = parser.parse_args()
    available = {"cuda": has_ptxas(), "gpu": has_gpu()}
    for page in args.pages:
        run_page(page, args.build.resolve(), args.tmp.resolve(), available,
                 args.repo.resolve() if args.repo else None)


if __name__ == "__main__":
    main()
