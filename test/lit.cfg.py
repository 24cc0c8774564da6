# lit configuration for megc's FileCheck tests.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "megc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.megc_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "unittests", "Inputs", "fuzz", "tools"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%megc_src", config.megc_src_root))
config.substitutions.append(("%megc_obj", config.megc_obj_root))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()

tool_dirs = [config.megc_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["megc", "megc-opt", "megc-run", "megc-gpu-check"], tool_dirs)
llvm_config.with_environment("PATH", config.megc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# GPU code generation is checked with the CUDA toolkit's assembler (no GPU
# needed); without the toolkit those tests are reported unsupported.
ptxas = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")
if os.access(ptxas, os.X_OK):
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# Kernel IR lowered with MLIR's own passes and run on the CPU by mlir-runner,
# with the runner's printing library (mlir-22-tools and libmlir-22).
runner = os.path.join(config.llvm_tools_dir, "mlir-runner")
runner_utils = os.path.join(getattr(config, "llvm_lib_dir", ""), "libmlir_runner_utils.so")
if os.access(runner, os.X_OK) and os.path.exists(runner_utils):
    config.available_features.add("mlir-runner")
    config.substitutions.append(("%mlir_runner_utils", runner_utils))

# The stand-in CUDA libraries (runtime/emulator/standin), built with the
# CUDA toolkit's headers and MPI: megc-run --device cuda runs on them.
standin = os.path.join(config.megc_obj_root, "runtime", "emulator", "standin", "lib")
if os.path.exists(os.path.join(standin, "libcuda.so.1")):
    config.available_features.add("cuda-standin")
    config.substitutions.append(("%standin", standin))
