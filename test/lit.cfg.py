# lit configuration for flashc. Tests live under test/<stage>/.
import os
import subprocess
import lit.formats

config.name = "flashc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".fa", ".tile", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "corpus"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.flashc_obj_root, "test")

bin_dir = os.path.join(config.flashc_obj_root, "tools")
test_bin_dir = os.path.join(config.flashc_obj_root, "test", "bin")
config.environment["PATH"] = os.pathsep.join(
    [bin_dir, test_bin_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])
config.substitutions.append(("%flashc", os.path.join(bin_dir, "flashc")))
config.substitutions.append(("%src_root", config.flashc_src_root))
config.substitutions.append(("%examples", os.path.join(config.flashc_src_root, "examples")))
config.substitutions.append(("%test_bin", test_bin_dir))
config.substitutions.append(("%obj_root", config.flashc_obj_root))

# The runtime library is built where cuda.h is (runtime/CMakeLists.txt).
if os.path.exists(os.path.join(config.flashc_obj_root, "runtime", "libflashc_runtime.so")):
    config.available_features.add("runtime")
else:
    lit_config.warning("the runtime library was not built (no CUDA toolkit headers: cuda.h): "
                       "the tests that REQUIRE runtime are reported UNSUPPORTED. Install the "
                       "CUDA toolkit (Debian: nvidia-cuda-toolkit) and rebuild to run them.")

import shutil
if shutil.which("ptxas"):
    config.available_features.add("ptxas")
else:
    lit_config.warning("ptxas is not on PATH: the tests that REQUIRE ptxas (cubin output, "
                       "--stats registers, the PTX assembly checks) are reported UNSUPPORTED. "
                       "Install the CUDA toolkit (Debian: nvidia-cuda-toolkit) to run them.")

# The package's torch-facing tests need PyTorch (CPU is enough); CI has none
# (the multi-GB CUDA build is not pulled there): they are reported UNSUPPORTED.
import importlib.util
if importlib.util.find_spec("torch") is not None:
    config.available_features.add("torch")
else:
    lit_config.note("PyTorch is not importable: test/python/torch_*.test are reported "
                    "UNSUPPORTED (the GPU machine runs them: test/gpu/torch_ops.py)")

# Tests that chown files to other users need root.
if hasattr(os, "geteuid") and os.geteuid() == 0:
    config.available_features.add("root")

# A sanitizer build (FLASHC_SANITIZE, `make check SANITIZE=1`): every report
# is fatal, leaks included; lsan.supp names the leaks at exit that are not
# flashc's (docs/testing.md).
host_env = ""
if getattr(config, "flashc_sanitize", False):
    supp = os.path.join(config.test_source_root, "lsan.supp")
    config.environment["ASAN_OPTIONS"] = "halt_on_error=1:detect_leaks=1:abort_on_error=1:strict_string_checks=1"
    config.environment["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    config.environment["LSAN_OPTIONS"] = "suppressions=" + supp + ":print_suppressions=0"
    config.available_features.add("sanitize")
    # Programs built without the sanitizers that load flashc's sanitized
    # libraries (python3 through ctypes, install.test's consumers) need
    # their runtimes first: `%host_env PROGRAM` preloads them (the
    # program's own leaks, the interpreter's, are not flashc's: no leak
    # check there); empty in a plain build.
    libs = [subprocess.run(["gcc", "-print-file-name=lib%s.so" % n], capture_output=True,
                           text=True).stdout.strip() for n in ("asan", "ubsan")]
    host_env = ("env LD_PRELOAD=" + ":".join(libs) +
                " ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=1")
config.substitutions.append(("%host_env", host_env))
