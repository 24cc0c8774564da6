"""Checks docs/cli.md against the tools: every flag a section's table
documents must be one the tool accepts, and every flag the tool's --help
lists must be documented.

  check_cli_flags.py SRC_ROOT BIN_DIR

What a tool has: for megc and its subcommands (LLVM options), the flags of
its own option category in `--help` (MLIR's generic flags are left to
MLIR's documentation); for megc-run, the flags of its usage text. Each
documented flag is also tried on the tool: an "unknown" answer fails, so
a flag that --help forgot cannot pass for documented.
"""
import pathlib
import re
import subprocess
import sys

ROOT, BIN = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])

# Section heading -> (command lines whose --help must match it, option
# category in that help, or None for the whole usage text).
SECTIONS = {
    "megc": ([["megc"]], "megc compile options"),
    "megc gen and megc import": ([["megc", "gen"], ["megc", "import"]],
                                 "megc gen options"),
    "megc inspect": ([["megc", "inspect"]], "megc inspect options"),
    "megc schedule": ([["megc", "schedule"]], "megc schedule options"),
    "megc-run": ([["megc-run"]], None),
}
NOT_FLAGS = {"-h", "--help", "--help-list", "--version"}


def documented(text):
    """Heading -> the flags that start the rows of its table."""
    sections = {}
    for block in re.split(r"\n## ", text)[1:]:
        heading, body = block.split("\n", 1)
        rows = re.findall(r"^\| `(--?[a-z][a-z0-9-]*)", body, re.M)
        sections[heading.strip()] = rows
    return sections


def listed(command, category):
    """The flags `command --help` lists (in `category`'s block)."""
    text = subprocess.run([str(BIN / command[0]), *command[1:], "--help"],
                          capture_output=True, text=True).stdout
    if category is not None:
        match = re.search(re.escape(category) + r":\n\n(.*?)(?:\n\n\S|\Z)",
                          text, re.S)
        if not match:
            sys.exit(f"{' '.join(command)} --help has no '{category}' "
                     f"section:\n{text}")
        flags = re.findall(r"^  (--?[a-z][a-z0-9-]*)", match.group(1), re.M)
    else:
        flags = re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)
    return set(flags) - NOT_FLAGS


def accepted(command, flag):
    """Whether the tool knows `flag` (whatever else it then complains of)."""
    result = subprocess.run([str(BIN / command[0]), *command[1:], flag],
                            capture_output=True, text=True, timeout=60)
    answer = result.stdout + result.stderr
    return not re.search(r"[Uu]nknown (command line argument|option)",
                         answer)


def main():
    text = (ROOT / "docs" / "cli.md").read_text()
    sections = documented(text)
    problems = []
    total = 0
    for heading, (commands, category) in SECTIONS.items():
        if heading not in sections:
            problems.append(f"docs/cli.md has no '## {heading}' section")
            continue
        rows = sections[heading]
        doubled = sorted({f for f in rows if rows.count(f) > 1})
        if doubled:
            problems.append(f"{heading}: documented twice: {doubled}")
        docs = set(rows)
        total += len(docs)
        for command in commands:
            name = " ".join(command)
            tool = listed(command, category)
            for flag in sorted(tool - docs):
                problems.append(f"{name} has {flag}, which docs/cli.md "
                                f"'{heading}' does not document")
            for flag in sorted(docs - tool):
                problems.append(f"docs/cli.md '{heading}' documents {flag}, "
                                f"which {name} --help does not list")
            for flag in sorted(docs):
                if not accepted(command, flag):
                    problems.append(f"docs/cli.md '{heading}' documents "
                                    f"{flag}, which {name} does not accept")
    if problems:
        sys.exit("\n".join(problems))
    print(f"docs/cli.md: {total} flags, each in its tool's --help and "
          f"accepted by it")


if __name__ == "__main__":
    main()
