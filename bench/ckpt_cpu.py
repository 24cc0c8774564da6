"""Benchmark: checkpoints on the CPU, each against a baseline measured in
the same run.

1. Save and load throughput of one rank's training state (a llama of 34 M
   parameters, a 410 MB state) against the disk's own: `dd` writing the
   same bytes with fsync, and reading them back (from the page cache, as
   the load does right after the save).
2. A distributed checkpoint of the same model on 4 ranks (dp_shard=4,
   FSDP optim_grads_params): every rank writing its pieces in parallel,
   against the one-rank save of the same bytes.
3. The step-time cost of --save-every 1, without and with --async-save,
   against training without saves (wall time per step).
4. Peak host memory of a rank during a distributed save of an 8-rank FSDP
   model, against the rank's own pieces; and a whole-file save of the
   same run, which streams through rank 0.

Usage: /usr/bin/python3 bench/ckpt_cpu.py [--build build] [--repeat 3]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "e2e"))
import mpi_util  # noqa: E402
import save_memory  # noqa: E402

MODEL = ["--layers", "8", "--hidden", "512", "--heads", "8", "--kv-heads",
         "4", "--ffn", "1408", "--vocab", "8192", "--seq", "64", "--batch",
         "8", "--train"]


def best(repeat, action):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def run(args, ranks=1):
    command = (mpi_util.mpirun_command(ranks) if ranks > 1 else []) + args
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"{' '.join(command)} failed:\n{result.stdout}"
                 f"{result.stderr}")
    return result.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    bin_dir = os.path.join(options.build, "bin")
    os.environ["PATH"] = bin_dir + os.pathsep + os.environ["PATH"]
    sys.path.insert(0, os.path.join(options.build, "python"))
    import megc
    import numpy as np

    with tempfile.TemporaryDirectory(dir=options.build) as tmp:
        def compile_model(tag, extra):
            model = os.path.join(tmp, tag + ".mlir")
            artifact = os.path.join(tmp, tag + ".megc")
            run(["megc", "gen", "llama", *MODEL, *extra, "-o", model])
            run(["megc", model, "-o", artifact])
            return artifact

        single = compile_model("single", [])
        rng = np.random.default_rng(1)
        inputs = []
        for name in ("input_ids", "labels"):
            path = os.path.join(tmp, name + ".npy")
            np.save(path, rng.integers(0, 8192, (8, 64)).astype(np.int32))
            inputs += ["--input", f"{name}={path}"]

        # 1. One rank against dd.
        session = megc.Session(single, params="init:1")
        state = os.path.join(tmp, "state.safetensors")
        save = best(options.repeat, lambda: session.save_state(state))
        size = os.path.getsize(state)

        def async_save():
            session.start_save_state(state)
            session.finish_save()
        save_async = best(options.repeat, async_save)
        load = best(options.repeat, lambda: session.load_state(state))
        raw = os.path.join(tmp, "dd.bin")
        megabytes = (size + (1 << 20) - 1) >> 20
        dd_write = best(options.repeat, lambda: subprocess.run(
            ["dd", "if=/dev/zero", f"of={raw}", "bs=1M",
             f"count={megabytes}", "conv=fsync"], check=True,
            capture_output=True))
        dd_read = best(options.repeat, lambda: subprocess.run(
            ["dd", f"if={raw}", "of=/dev/null", "bs=1M"], check=True,
            capture_output=True))
        dd_bytes = megabytes << 20
        del session
        print(f"1. one rank's training state, {size / 1e6:.0f} MB "
              f"(best of {options.repeat})")
        print(f"   {'':28s} {'GB/s':>6s} {'vs dd':>6s}")
        for name, seconds, baseline in (
                ("save_state (file)", save, dd_write),
                ("start_save_state+finish_save", save_async, dd_write),
                ("load_state (file)", load, dd_read)):
            rate = size / seconds / 1e9
            base = dd_bytes / baseline / 1e9
            print(f"   {name:28s} {rate:6.2f} {rate / base:6.2f}")
        print(f"   {'dd write (fsync) / read':28s} "
              f"{dd_bytes / dd_write / 1e9:6.2f} / "
              f"{dd_bytes / dd_read / 1e9:.2f}")

        # 2. Four ranks writing their pieces in parallel.
        fsdp = compile_model("fsdp4", ["--mesh", "dp_shard=4", "--fsdp",
                                       "optim_grads_params"])
        ck4 = os.path.join(tmp, "ck4")
        log = run(["megc-run", fsdp, "--entry", "train_step", "--params",
                   "init:1", "--steps", str(options.repeat), *inputs,
                   "--save-every", "1", "--save-dir", ck4, "--log-every",
                   "1"], 4)
        seconds = min(float(line.split("waited ")[1].split()[0])
                      for line in log.splitlines() if "waited " in line)
        loads = []
        for _ in range(options.repeat):
            log = run(["megc-run", fsdp, "--entry", "train_step", "--params",
                       "init:1", "--steps", str(options.repeat + 1), *inputs,
                       "--resume", ck4], 4)
            loads.append(float(log.split("state loaded in ")[1].split()[0]))
        load_seconds = min(loads)
        print(f"2. distributed checkpoint on 4 ranks (dp_shard=4): the same "
              f"{size / 1e6:.0f} MB as megc-run reports its times")
        print(f"   save {size / seconds / 1e9:.2f} GB/s "
              f"({save / seconds:.2f} x one rank's file save), load "
              f"{size / load_seconds / 1e9:.2f} GB/s "
              f"({load / load_seconds:.2f} x one rank's file load)")

        # 3. The step-time cost of saving every step.
        steps = 6
        train = ["megc-run", single, "--entry", "train_step", "--params",
                 "init:1", "--steps", str(steps), *inputs]
        ck = os.path.join(tmp, "ck")
        no_save = best(options.repeat, lambda: run(train))
        sync = best(options.repeat, lambda: run(
            train + ["--save-every", "1", "--save-dir", ck, "--keep", "1"]))
        asynchronous = best(options.repeat, lambda: run(
            train + ["--save-every", "1", "--save-dir", ck, "--keep", "1",
                     "--async-save"]))
        print(f"3. {steps} steps with --save-every 1 (one rank), wall time "
              "per step against no saves")
        for name, seconds in (("no saves", no_save), ("--save-every 1", sync),
                              ("--save-every 1 --async-save", asynchronous)):
            print(f"   {name:28s} {seconds / steps * 1e3:8.1f} ms "
                  f"{seconds / no_save:6.2f}")

        # 4. Peak host memory of a rank saving on 8 ranks.
        fsdp8 = compile_model("fsdp8", ["--mesh", "dp_shard=8", "--fsdp",
                                        "optim_grads_params"])
        args = ["megc-run", fsdp8, "--entry", "train_step", "--params",
                "init:1", "--steps", "1", *inputs]
        base = min(save_memory.peak_kb(8, args, tmp) for _ in range(2))
        pieces = size / 8
        print(f"4. peak host memory of the largest rank, 8 ranks "
              f"(dp_shard=8): {base / 1024:.1f} MB without a save; its own "
              f"pieces {pieces / 1e6:.1f} MB")
        for name, extra in (
                ("distributed save", ["--save-state",
                                      os.path.join(tmp, "d8") + "/"]),
                ("distributed, --async-save",
                 ["--save-every", "1", "--save-dir",
                  os.path.join(tmp, "a8"), "--async-save"]),
                ("whole file (streamed)", ["--save-state",
                                           os.path.join(tmp, "w8")])):
            grown = (save_memory.peak_kb(8, args + extra, tmp) - base) * 1024
            print(f"   {name:28s} +{grown / 1e6:6.1f} MB "
                  f"({grown / pieces:5.2f} x its pieces)")


if __name__ == "__main__":
    main()
