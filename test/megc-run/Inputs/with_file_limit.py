"""Runs a command with files limited to BYTES (RLIMIT_FSIZE), as a full
disk would stop its writes: a write past the limit fails with EFBIG
instead of killing the process (SIGXFSZ ignored, which exec keeps).

    with_file_limit.py [--rank R] BYTES COMMAND [ARGS...]

With --rank, only the process of that rank under mpirun is limited (the
others run the command as it is): one rank's disk fills.
"""
import os
import resource
import signal
import sys

args = sys.argv[1:]
only = None
if args[0] == "--rank":
    only, args = args[1], args[2:]
limit = int(args[0])
if only is None or os.environ.get("OMPI_COMM_WORLD_RANK") == only:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.execvp(args[1], args[1:])
