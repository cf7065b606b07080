#!/usr/bin/env python3
"""Compile gasworks' device code (ptx/*.cu) to PTX with NVRTC, loaded through ctypes.

Called by scripts/build-ptx.sh with the venv that holds the pinned nvidia-cuda-nvrtc wheel;
no CUDA toolkit and no GPU are needed. Every ptx/*.h header is handed to NVRTC by name (no
include paths), so the output depends only on the sources, the options below and the NVRTC
version, and is the same on every machine.

usage: nvrtc_compile.py SRC_DIR OUT_DIR
"""

import ctypes
import pathlib
import sys

import nvidia.cuda_nvrtc

# Fixed options (ptx/README.md says why). compute_75 PTX runs on Turing and every later GPU
# (OptiX JIT-compiles it for the device at hand); relocatable device code keeps the
# launch-parameter variable `.visible`; functions are device code by default.
OPTIONS = [
    "--gpu-architecture=compute_75",
    "--relocatable-device-code=true",
    "--device-as-default-execution-space",
    "--std=c++17",
]


def load_nvrtc():
    lib_dir = pathlib.Path(list(nvidia.cuda_nvrtc.__path__)[0]) / "lib"
    candidates = sorted(lib_dir.glob("libnvrtc.so.*"))
    if not candidates:
        sys.exit(f"error: no libnvrtc.so.* in {lib_dir}")
    lib = ctypes.CDLL(str(candidates[0]))
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    return lib


def check(lib, rc, call, name):
    if rc != 0:
        msg = lib.nvrtcGetErrorString(rc).decode()
        raise RuntimeError(f"{name}: {call} failed: {msg}")


def nvrtc_version(lib):
    major, minor = ctypes.c_int(), ctypes.c_int()
    check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion", "nvrtc")
    return f"{major.value}.{minor.value}"


def compile_one(lib, src, headers):
    name = src.name
    prog = ctypes.c_void_p()
    hdr_names = [h.name.encode() for h in headers]
    hdr_srcs = [h.read_bytes() for h in headers]
    n = len(headers)
    check(
        lib,
        lib.nvrtcCreateProgram(
            ctypes.byref(prog),
            src.read_bytes(),
            name.encode(),
            n,
            (ctypes.c_char_p * n)(*hdr_srcs) if n else None,
            (ctypes.c_char_p * n)(*hdr_names) if n else None,
        ),
        "nvrtcCreateProgram",
        name,
    )
    try:
        opts = [o.encode() for o in OPTIONS]
        rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
        log_size = ctypes.c_size_t()
        check(lib, lib.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size)), "nvrtcGetProgramLogSize", name)
        log = ctypes.create_string_buffer(log_size.value)
        check(lib, lib.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog", name)
        text = log.value.decode(errors="replace").strip()
        if rc != 0:
            raise RuntimeError(f"{name}: nvrtcCompileProgram failed:\n{text}")
        if text:
            # Warnings are errors: device code that warns is not committed.
            raise RuntimeError(f"{name}: NVRTC warnings:\n{text}")
        size = ctypes.c_size_t()
        check(lib, lib.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize", name)
        buf = ctypes.create_string_buffer(size.value)
        check(lib, lib.nvrtcGetPTX(prog, buf), "nvrtcGetPTX", name)
        return buf.value
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src_dir, out_dir = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = load_nvrtc()
    headers = sorted(src_dir.glob("*.h"))
    sources = sorted(src_dir.glob("*.cu"))
    if not sources:
        sys.exit(f"error: no .cu files in {src_dir}")
    print(f"NVRTC {nvrtc_version(lib)}, options: {' '.join(OPTIONS)}")
    failed = False
    for src in sources:
        try:
            ptx = compile_one(lib, src, headers)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            failed = True
            continue
        out = out_dir / (src.stem + ".ptx")
        out.write_bytes(ptx)
        print(f"{src} -> {out} ({len(ptx)} bytes)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
