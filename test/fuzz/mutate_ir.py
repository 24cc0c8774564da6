"""Feeds mutated variants of a generated model to megc-opt (and up to
--megc-max of those it accepts to the whole compiler, megc); fails on
crashes.

Each variant deletes, duplicates, swaps or replaces tokens of a valid model,
or sets a size (a number, or one dimension of a tensor type) to a value
near a limit: 2^31, 2^32, 2^61, 2^63 - 1, 0 or -1. megc-opt and megc must
either accept it (exit 0) or reject it with a located diagnostic
("<file>:<line>:<col>: error:"), never crash, abort, print "LLVM ERROR" or
a stack dump, or hang.
"""
import argparse
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile

TOKEN = re.compile(
    r'"[^"\n]*"|%[\w.$#-]+|@[\w.$-]+|#[\w.]+|![\w.]+|\^\w+|'
    r'-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\w+(?:\.\w+)*|->|::|\S')
CRASH_MARKERS = ("LLVM ERROR", "Stack dump", "PLEASE submit",
                 "Assertion", "Segmentation fault", "terminate called")


LIMITS = [2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**61, 2**62, 2**63 - 1, 0, -1]
DIMENSION = re.compile(r"(?<![\w.])\d+(?=x)")


def resize(token, rng):
    """`token` with a number, or one dimension of a tensor type such as
    128x64xf32, set to a value near a limit; None if it has neither."""
    body = token.rstrip()
    gap = token[len(body):]
    value = str(rng.choice(LIMITS))
    if re.fullmatch(r"-?\d+", body):
        return value + gap
    dims = list(DIMENSION.finditer(body))
    if not dims:
        return None
    d = rng.choice(dims)
    return body[:d.start()] + value.lstrip("-") + body[d.end():] + gap


def mutate(tokens, rng):
    """Applies 1-3 random token edits to a copy of `tokens`."""
    tokens = list(tokens)
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(tokens))
        kind = rng.choice(("delete", "duplicate", "swap", "replace", "size"))
        if kind == "size":
            # The nearest token from i on that holds a size.
            for j in list(range(i, len(tokens))) + list(range(i)):
                resized = resize(tokens[j], rng)
                if resized is not None:
                    tokens[j] = resized
                    break
        elif kind == "delete":
            del tokens[i]
        elif kind == "duplicate":
            tokens.insert(i, tokens[i])
        elif kind == "swap" and i + 1 < len(tokens):
            tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
        else:
            tokens[i] = tokens[rng.randrange(len(tokens))]
    return tokens


def tokenize(text):
    """Tokens with the whitespace that follows each, so edits keep layout."""
    pieces = []
    for match in TOKEN.finditer(text):
        end = match.end()
        gap = re.match(r"\s*", text[end:]).group(0)
        pieces.append(match.group(0) + (gap if gap else ""))
    return pieces


def run_tool(command, path):
    """'accepted', 'rejected', or what went wrong."""
    tool = os.path.basename(command[0])
    try:
        result = subprocess.run(command, capture_output=True, text=True,
                                timeout=120)
    except subprocess.TimeoutExpired:
        return f"{path}: {tool} hung (no answer in 120 s)"
    output = result.stderr
    if result.returncode < 0:
        return f"{path}: {tool} died with signal {-result.returncode}\n{output}"
    if any(marker in output for marker in CRASH_MARKERS):
        return f"{path}: {tool} crashed\n{output}"
    if result.returncode != 0 and not re.search(
            re.escape(path) + r":\d+:\d+: error:", output):
        return f"{path}: {tool} rejected it without a located diagnostic\n{output}"
    return "accepted" if result.returncode == 0 else "rejected"


def check(args):
    megc_opt, path, extra = args
    return run_tool([megc_opt, path, "-o", os.devnull] + extra, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megc-opt", default="megc-opt")
    parser.add_argument("--input", required=True, help="valid model IR")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="directory to keep the variants in")
    parser.add_argument("--megc", default="megc")
    parser.add_argument("--megc-max", type=int, default=0,
                        help="compile up to this many accepted variants "
                             "with megc (the whole pipeline, CPU target)")
    options = parser.parse_args()

    tokens = tokenize(open(options.input).read())
    rng = random.Random(options.seed)
    directory = options.keep or tempfile.mkdtemp(prefix="megc-fuzz-")
    os.makedirs(directory, exist_ok=True)
    jobs = []
    for n in range(options.count):
        path = os.path.join(directory, f"variant{n}.mlir")
        with open(path, "w") as f:
            f.write("".join(mutate(tokens, rng)))
        # Half the variants also go through the folders and canonicalizer.
        extra = ["--canonicalize", "--cse"] if n % 2 else []
        jobs.append((options.megc_opt, path, extra))

    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        outcomes = list(pool.map(check, jobs))
    accepted = [job[1] for job, o in zip(jobs, outcomes) if o == "accepted"]
    compiled = accepted[:options.megc_max]
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        whole = list(pool.map(
            lambda path: run_tool([options.megc, path, "-o", os.devnull,
                                   "--target=cpu"], path), compiled))
    failures = [o for o in outcomes + whole if o not in ("accepted", "rejected")]
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{options.count} variants: {outcomes.count('accepted')} accepted, "
          f"{outcomes.count('rejected')} rejected with a diagnostic; megc on "
          f"{len(compiled)} accepted: {whole.count('accepted')} compiled, "
          f"{whole.count('rejected')} rejected with a diagnostic; "
          f"{len(failures)} failures")
    # Mutations that never reach the verifier would make this test vacuous.
    if outcomes.count("rejected") < options.count // 2:
        print("too few variants were rejected; the mutations are too weak",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
