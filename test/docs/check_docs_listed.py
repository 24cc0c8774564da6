"""Fails unless README.md's Docs section names every page under docs/."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
readme = (root / "README.md").read_text()
section = readme.split("\n## Docs\n", 1)[1].split("\n## ", 1)[0]
pages = sorted(p.relative_to(root).as_posix()
               for p in (root / "docs").rglob("*")
               if p.suffix in (".md", ".dot", ".svg"))
missing = [p for p in pages if p not in section]
if missing:
    sys.exit("README.md's Docs section does not list: " + ", ".join(missing))
print(f"{len(pages)} docs listed")
