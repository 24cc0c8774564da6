"""Feeds damaged copies of a compiled artifact to megc-run; fails on crashes.

Each copy flips, overwrites, inserts or deletes a few bytes, or truncates
the file; half of the copies changed in place outside the machine code
are resealed (their checksum recomputed, as a tool that rewrote the file
would) so that the checks behind the checksum are reached too. Resealed
changes to the code itself are not made: loading an artifact runs its
code, and the checksum detects damage, not tampering. megc-run
must run the entry (exit 0) or refuse the artifact with an error line
("megc-run: error: ..."), never die by a signal, print a sanitizer report
or hang.
"""
import argparse
import concurrent.futures
import os
import random
import subprocess
import sys
import tempfile

CRASH_MARKERS = ("Segmentation fault", "terminate called", "AddressSanitizer",
                 "runtime error:", "Aborted")


# fb::Program::VT_CHECKSUM of the schema's generated header: where the
# root table's vtable holds the offset of Program.checksum. main() checks
# that it still finds the undamaged artifact's checksum.
VT_CHECKSUM = 22


def checksum_offset(data):
    """Byte offset of Program.checksum, or None; the same walk as
    megrt/ArtifactSeal.h, with bounds checks."""
    def u32(at):
        return int.from_bytes(data[at:at + 4], "little")

    def u16(at):
        return int.from_bytes(data[at:at + 2], "little")
    if len(data) < 8:
        return None
    table = u32(0)
    if table + 4 > len(data):
        return None
    vtable = table - int.from_bytes(data[table:table + 4], "little",
                                    signed=True)
    field = VT_CHECKSUM
    if not 0 <= vtable <= len(data) - 4 or field + 2 > u16(vtable):
        return None
    offset = u16(vtable + field)
    if offset == 0 or table + offset + 8 > len(data):
        return None
    return table + offset


def reseal(data):
    at = checksum_offset(data)
    if at is None:
        return data
    value = 0xCBF29CE484222325
    for i, byte in enumerate(data):
        value = ((value ^ (0 if at <= i < at + 8 else byte)) *
                 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return data[:at] + value.to_bytes(8, "little") + data[at + 8:]


def code_range(data):
    """[begin, end) of the CPU code (the ELF shared object) inside the
    artifact, or None."""
    begin = data.find(b"\x7fELF\x02\x01")
    if begin < 0 or begin + 64 > len(data):
        return None
    header = data[begin:begin + 64]
    shoff = int.from_bytes(header[40:48], "little")
    shentsize = int.from_bytes(header[58:60], "little")
    shnum = int.from_bytes(header[60:62], "little")
    return begin, min(len(data), begin + shoff + shentsize * shnum)


def damage(data, rng):
    """A damaged copy, and whether resealing it tests the loader's checks:
    bytes changed in place, none of them in the machine code (a resealed
    change there is a program of someone else's: artifacts are code, and
    the checksum detects damage, not tampering)."""
    code = code_range(data)
    data = bytearray(data)
    kind = rng.choice(("flip", "overwrite", "insert", "delete", "truncate"))
    if kind == "truncate":
        return bytes(data[:rng.randrange(len(data))]), False
    sealable = kind in ("flip", "overwrite")
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        # In-place changes go to the program's description, around the code.
        if sealable and code and code[0] <= i < code[1]:
            outside = code[0] + len(data) - code[1]
            j = rng.randrange(outside) if outside else 0
            i = j if j < code[0] else code[1] + j - code[0]
        if kind == "flip":
            data[i] ^= 1 << rng.randrange(8)
        elif kind == "overwrite":
            data[i] = rng.choice((0, 0xFF, 0x7F, 0x80, rng.randrange(256)))
        elif kind == "insert":
            data[i:i] = bytes([rng.randrange(256)])
        else:
            del data[i]
    return bytes(data), sealable


def check(job):
    megc_run, path, args = job
    try:
        result = subprocess.run([megc_run, path, *args], capture_output=True,
                                timeout=60)
    except subprocess.TimeoutExpired:
        return f"{path}: megc-run hung (no answer in 60 s)"
    raw = result.stdout + result.stderr
    output = raw.decode("utf-8", "replace")
    # Messages quote what the file holds escaped, never as raw bytes.
    if "\ufffd" in output:
        return f"{path}: megc-run printed bytes that are not UTF-8\n{output}"
    if result.returncode < 0:
        return f"{path}: megc-run died with signal {-result.returncode}\n{output}"
    if any(marker in output for marker in CRASH_MARKERS):
        return f"{path}: megc-run crashed\n{output}"
    if result.returncode == 0:
        return "ran"
    if "megc-run: error: " not in output:
        return f"{path}: megc-run failed without an error line\n{output}"
    return "refused"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--megc-run", default="megc-run")
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", help="directory to keep the copies in")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="after --: megc-run's arguments but the file")
    options = parser.parse_args()
    args = options.args[1:] if options.args[:1] == ["--"] else options.args
    original = open(options.artifact, "rb").read()
    if reseal(original) != original or checksum_offset(original) is None:
        sys.exit("the checksum walk no longer finds the artifact's checksum: "
                 "update VT_CHECKSUM from the generated schema header")
    rng = random.Random(options.seed)
    directory = options.keep or tempfile.mkdtemp(prefix="megc-damage-")
    os.makedirs(directory, exist_ok=True)
    jobs, resealed = [], 0
    for n in range(options.count):
        data, sealable = damage(original, rng)
        if n % 2 and sealable and data != original:
            sealed = reseal(data)
            resealed += sealed != data
            data = sealed
        path = os.path.join(directory, f"damaged{n}.megc")
        with open(path, "wb") as f:
            f.write(data)
        jobs.append((options.megc_run, path, args))
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        outcomes = list(pool.map(check, jobs))
    failures = [o for o in outcomes if o not in ("ran", "refused")]
    for failure in failures:
        print(failure, file=sys.stderr)
    print(f"{options.count} damaged artifacts ({resealed} resealed): "
          f"{outcomes.count('ran')} ran, {outcomes.count('refused')} refused "
          f"with an error, {len(failures)} failures")
    if outcomes.count("refused") < options.count // 2:
        print("too few copies were refused; the damage is too weak",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(1 if failures else 0)

if __name__ == "__main__":
    main()
