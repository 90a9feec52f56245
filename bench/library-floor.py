#!/usr/bin/env python3
"""The in-process floor: every path of PATHS_FILE built by kustomize's Go library (the pinned
c-shared build fluxplan's workers load) in one process, THREADS at a time. Prints the wall time
of the builds and checks each one succeeded. Usage: library-floor.py LIB REPO PATHS_FILE THREADS"""
import ctypes
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

# The Go runtime reads its settings when the library loads: the same as fluxplan's workers
# (GO_RUNTIME_ENV in src/sandbox.rs), so the floor is kustomize's cost under the same collector.
GO_RUNTIME_ENV = {"GOGC": "400", "GOMEMLIMIT": "1GiB"}
if any(os.environ.get(k) != v for k, v in GO_RUNTIME_ENV.items()):
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **GO_RUNTIME_ENV})

lib_path, repo, paths_file, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
started = time.monotonic()
lib = ctypes.CDLL(lib_path)
lib.pykustomize_build.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
lib.pykustomize_build.restype = ctypes.c_int
lib.pykustomize_free.argtypes = [ctypes.c_void_p]
options = json.dumps({"load_restrictions": 1, "reorder": "legacy", "add_managedby_label": False,
                      "enable_plugins": False, "enable_helm": False, "helm_command": ""}).encode()
paths = [line.strip() for line in open(paths_file) if line.strip()]


def build(path):
    result = ctypes.c_void_p()
    code = lib.pykustomize_build(f"{repo}/{path}".encode(), options, ctypes.byref(result))
    if code != 0:
        raise SystemExit(f"library build of {path} failed")
    size = len(ctypes.string_at(result.value))
    lib.pykustomize_free(result)
    return size


with ThreadPoolExecutor(threads) as pool:
    sizes = list(pool.map(build, paths))
print(f"{time.monotonic() - started:.2f} {len(paths)} {sum(sizes)}")
