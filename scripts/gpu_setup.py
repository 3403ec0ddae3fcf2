"""onnxruntime-gpu for a machine that cannot reach PyPI: pack it small here, install it there.

    python scripts/gpu_setup.py pack [--version 1.31.1] [--arch 90] [--out .ortgpu]
    python scripts/gpu_setup.py install .ortgpu/ort.tar.xz     # on the GPU machine
    python scripts/gpu_setup.py check                          # on the GPU machine

``pack`` (needs pip, network, and the ``zstd`` command) downloads the onnxruntime-gpu wheel for
Python 3.12 (about 255 MB), and shrinks it to fit a 64 MiB transfer:

- in ``libonnxruntime_providers_cuda.so`` (284 MB, 219 MB of it GPU code in the
  ``.nv_fatbin`` section) the payload of every cubin for another GPU than ``--arch`` is zeroed
  (the CUDA runtime picks the cubin of the GPU it runs on, so the others are never read); so
  are the sm_90 cubins of modules whose every kernel is a mixture-of-experts kernel (the
  MoE/QMoE contrib ops, 28 MB), whose entries are marked sm_75 so that the runtime sees no
  image for the GPU and would say so if one were ever launched;
- ``libonnxruntime.so`` (the C API library, which the Python binding does not link) and the
  TensorRT provider are dropped;
- the tree is packed as one xz archive (about 49 MB; the fatbin's own cubins are
  zstd-compressed, so zeroing them is what saves most).

``install`` uninstalls the CPU onnxruntime of the running Python (both provide the
``onnxruntime`` package), unpacks the archive into its site-packages, where
``onnxruntime.preload_dlls()`` finds the CUDA 13 and cuDNN 9 libraries of the nvidia-* pip
packages, and runs ``check``: ``get_device()``, ``preload_dlls()`` and a session whose
``get_providers()`` must start with CUDAExecutionProvider.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
CUDA_PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
DROP = ("onnxruntime/capi/libonnxruntime_providers_tensorrt.so",)
DROP_PATTERN = re.compile(r"onnxruntime/capi/libonnxruntime\.so\.[\d.]+$")
MOE = re.compile(rb"\.text\.(_Z[A-Za-z0-9_]+)")


def _section(buf: bytes | bytearray, wanted: str) -> tuple[int, int]:
    """(file offset, size) of ELF section ``wanted`` (64-bit little-endian ELF)."""
    (shoff,) = struct.unpack_from("<Q", buf, 0x28)
    entsize, count, strndx = struct.unpack_from("<HHH", buf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", buf, shoff + i * entsize) for i in range(count)]
    names = headers[strndx][4]
    for name, _type, _flags, _addr, offset, size in headers:
        end = buf.index(b"\0", names + name)
        if bytes(buf[names + name : end]).decode() == wanted:
            return offset, size
    raise SystemExit(f"no {wanted} section")


def fatbin_entries(buf: bytes | bytearray) -> list[list[tuple[int, int, int, int]]]:
    """Each fatbin of ``.nv_fatbin``: its entries as (arch, header offset, payload offset, size).

    Layout: a 16-byte header (magic 0xBA55ED50, u16 version, u16 header size, u64 size of the
    entries), then entries of (u16 kind, u16 ?, u32 header size, u64 payload size, ...,
    u32 arch at +28), each followed by its payload.
    """
    offset, size = _section(buf, ".nv_fatbin")
    pos, end, out = offset, offset + size, []
    while pos < end:
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", buf, pos)
        if magic != FATBIN_MAGIC:
            pos += 8
            continue
        entry, stop, entries = pos + hsize, pos + hsize + fsize, []
        while entry < stop:
            _kind, _x, ehsize, psize = struct.unpack_from("<HHIQ", buf, entry)
            (arch,) = struct.unpack_from("<I", buf, entry + 28)
            entries.append((arch, entry, entry + ehsize, psize))
            entry += ehsize + psize
        out.append(entries)
        pos = stop
    return out


def _kernel_names(payload: bytes) -> list[bytes]:
    raw = subprocess.run(["zstd", "-dc"], input=payload, capture_output=True, check=False).stdout
    return MOE.findall(raw or payload)


def prune(path: Path, arch: int) -> dict[str, float]:
    """Zero what an sm_``arch`` GPU never loads, in place (see the module docstring)."""
    buf = bytearray(path.read_bytes())
    zeroed = disabled = 0
    for entries in fatbin_entries(buf):
        if not any(a == arch for a, _, _, _ in entries):
            continue
        moe_only = False
        for a, _h, p, n in entries:
            if a == arch:
                names = _kernel_names(bytes(buf[p : p + n]))
                moe_only = bool(names) and all(b"moe" in k.lower() for k in names)
        for a, h, p, n in entries:
            if a != arch or moe_only:
                buf[p : p + n] = bytes(n)
                zeroed += n
            if a == arch and moe_only:
                struct.pack_into("<I", buf, h + 28, 75)
                disabled += 1
    path.write_bytes(buf)
    return {"zeroed_mb": zeroed / 1e6, "moe_modules_disabled": disabled}


def pack(version: str, arch: int, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "--python-version", "3.12", "--implementation", "cp",
             "--platform", "manylinux_2_28_x86_64", "-d", tmp, f"onnxruntime-gpu=={version}"],
            check=True,
        )  # fmt: skip
        wheel = next(Path(tmp).glob("onnxruntime_gpu-*.whl"))
        tree = Path(tmp) / "tree"
        with zipfile.ZipFile(wheel) as z:
            z.extractall(tree)
        wheel.unlink()
        for rel in DROP:
            (tree / rel).unlink(missing_ok=True)
        for lib in (tree / "onnxruntime/capi").iterdir():
            if DROP_PATTERN.search(lib.relative_to(tree).as_posix()):
                lib.unlink()
        print(json.dumps(prune(tree / CUDA_PROVIDER, arch)))
        target = out / "ort.tar.xz"
        with tarfile.open(target, "w:xz", preset=9) as tar:
            for item in sorted(tree.iterdir()):
                tar.add(item, arcname=item.name)
    print(f"{target}: {target.stat().st_size / 2**20:.1f} MiB")
    return target


def site_packages() -> Path:
    import site

    return Path(site.getsitepackages()[0])


def install(archive: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "-y", "-q", "onnxruntime"], check=False
    )
    target = site_packages()
    shutil.rmtree(target / "onnxruntime", ignore_errors=True)
    with tarfile.open(archive, "r:xz") as tar:
        tar.extractall(target, filter="data")
    print(f"onnxruntime-gpu unpacked into {target}")


def check() -> int:
    """Print get_device(), what preload_dlls() said, and a CUDA session's providers."""
    code = (
        "import onnxruntime as ort, onnx\n"
        "from onnx import helper, TensorProto\n"
        "print('onnxruntime', ort.__version__, ort.get_device(), ort.get_available_providers())\n"
        "ort.preload_dlls()\n"
        "g = helper.make_graph([helper.make_node('Add', ['x', 'x'], ['y'])], 'g',\n"
        "    [helper.make_tensor_value_info('x', TensorProto.FLOAT, [4])],\n"
        "    [helper.make_tensor_value_info('y', TensorProto.FLOAT, [4])])\n"
        "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)], ir_version=8)\n"
        "s = ort.InferenceSession(m.SerializeToString(), providers=['CUDAExecutionProvider'])\n"
        "print('session providers', s.get_providers())\n"
        "assert s.get_providers()[0] == 'CUDAExecutionProvider'\n"
    )
    return subprocess.run([sys.executable, "-c", code], check=False, env=os.environ).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("--version", default="1.31.1")
    p.add_argument("--arch", type=int, default=90, help="the GPU's SM version (H100/H200: 90)")
    p.add_argument("--out", default=".ortgpu")
    i = sub.add_parser("install")
    i.add_argument("archive")
    sub.add_parser("check")
    args = parser.parse_args()
    if args.cmd == "pack":
        pack(args.version, args.arch, Path(args.out))
        return 0
    if args.cmd == "install":
        install(Path(args.archive))
    return check()


if __name__ == "__main__":
    sys.exit(main())
