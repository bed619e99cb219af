"""The driver the GPU suites share (correctness.py, decode.py): arguments,
the runtime and its context, the PTX list, loading, metadata checks, the
bookkeeping of cases (negative controls count as passes when they fail), the
`N passed, N failed` line and the JSON written to $OUT."""
import argparse
import json
import os
import time

import torch

import flashc_rt


class Suite:
    def __init__(self, label, add_args=None):
        ap = argparse.ArgumentParser()
        ap.add_argument("ptx_dir")
        ap.add_argument("--lib", default=os.environ.get("FLASHC_RUNTIME_LIB",
                                                        "build-gpu/libflashc_runtime.so"))
        ap.add_argument("--seed", type=int, default=None)
        ap.add_argument("--only", default="")
        if add_args:
            add_args(ap)
        self.args = a = ap.parse_args()
        self.label = label
        self.seed = a.seed if a.seed is not None else int(time.time()) % 100000
        print(f"{label}: seed {self.seed} (rerun with --seed {self.seed}), ptx dir {a.ptx_dir}")
        self.rt = flashc_rt.Runtime(a.lib)
        self.ctx = self.rt.context(0)
        torch.cuda.init()
        torch.backends.cuda.matmul.allow_tf32 = False  # the float32 LSE baseline must be float32
        self.results, self.passed, self.failed = [], 0, 0
        self.t_start = time.time()

    def kernels(self, specs, specs_file):
        """(name, spec) for every PTX in the directory that specs describes."""
        names = sorted(n[:-4] for n in os.listdir(self.args.ptx_dir) if n.endswith(".ptx"))
        if self.args.only:
            names = [n for n in names if n in self.args.only.split(",")]
        for name in names:
            if name not in specs:
                print(f"SKIP {name}: no entry in {specs_file}")
                continue
            yield name, specs[name]

    def load(self, name, loader):
        """loader(path) -> module, or None after recording the failure."""
        try:
            return loader(os.path.join(self.args.ptx_dir, name + ".ptx"))
        except flashc_rt.FlashcError as e:
            print(f"FAIL {name}: load: {e}")
            self.failed += 1
            self.results.append(dict(kernel=name, passed=False, error=str(e)))
            return None

    def check_meta(self, name, info, want, specs_file):
        """The kernel's metadata against what the spec table says."""
        for key, val in want.items():
            if info[key] != val:
                print(f"FAIL {name}: metadata {key} = {info[key]} but {specs_file} says {val}")
                self.failed += 1

    def run_case(self, name, spec, case, run, describe):
        """run() -> result dict; a crash of one case is a failure, not the end."""
        try:
            r = run()
        except Exception as e:
            r = dict(kernel=name, case=case, passed=False, error=repr(e))
            print(f"FAIL {name} {case}: {e!r}", flush=True)
        else:
            line = describe(r)
            if spec["expect_fail"]:  # a negative control: failing is passing
                r["passed"] = not r["passed"]
                line = ("PASS (planted bug caught: " if r["passed"] else
                        "FAIL (planted bug NOT caught: ") + line + ")"
            print(line, flush=True)
        self.results.append(r)
        self.passed += r["passed"]
        self.failed += not r["passed"]

    def validation(self, name, width, cases):
        """(label, ok, message) of refused-launch checks."""
        for label, ok, msg in cases:
            print(f"{'PASS' if ok else 'FAIL'} {name:<{width}} validation {label}: {msg}")
            self.results.append(dict(kernel=name, validation=label, passed=ok, message=msg))
            self.passed += ok
            self.failed += not ok

    def finish(self, json_name):
        print(f"{self.label}: {time.time() - self.t_start:.1f} s on {torch.cuda.get_device_name()}")
        print(f"{self.passed} passed, {self.failed} failed")
        out = os.environ.get("OUT")
        if out:
            with open(os.path.join(out, json_name), "w") as f:
                json.dump(dict(seed=self.seed, passed=self.passed, failed=self.failed,
                               results=self.results), f, indent=1, default=str)
        return 1 if self.failed or self.passed == 0 else 0
