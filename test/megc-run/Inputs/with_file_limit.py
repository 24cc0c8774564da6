"""Runs a command with files limited to BYTES (RLIMIT_FSIZE), as a full
disk would stop its writes: a write past the limit fails with EFBIG
instead of killing the process (SIGXFSZ ignored, which exec keeps).

    with_file_limit.py BYTES COMMAND [ARGS...]
"""
import os
import resource
import signal
import sys

limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
os.execvp(sys.argv[2], sys.argv[2:])
