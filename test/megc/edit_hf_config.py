"""Writes a copy of a Hugging Face config.json with fields changed, for the
import tests: `edit_hf_config.py SOURCE OUT KEY=JSON ... -KEY ...` sets KEY
to the JSON value, or removes it; a dotted KEY reaches into an object."""
import json
import sys


def main():
    source, out, *edits = sys.argv[1:]
    with open(source) as f:
        config = json.load(f)
    for edit in edits:
        remove = edit.startswith("-")
        key, _, value = edit.lstrip("-").partition("=")
        *path, last = key.split(".")
        target = config
        for part in path:
            target = target[part]
        if remove:
            del target[last]
        else:
            target[last] = json.loads(value)
    with open(out, "w") as f:
        json.dump(config, f)


if __name__ == "__main__":
    main()
