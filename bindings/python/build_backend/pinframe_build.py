"""The package's PEP 517 build backend: maturin's, after bundling libpinframe.so.0.

The extension is built with pinframe's `shared-guard` feature: its CPU-mapping guard is the
process-wide one that libpinframe.so.0 (bindings/c) exports, so that this module, the
GStreamer plugin and any other copy of pinframe in one process share one lock. The wheel
carries that library next to the extension (which finds it through its `$ORIGIN` runpath),
under its soname: the dynamic loader keeps one object per soname, so when another copy
already loaded a libpinframe.so.0 (an installed one, the plugin's), every copy gets that
one, and there is still one guard.

Every hook is maturin's; `build_wheel` then runs `cargo build --release -p pinframe-c` in
the workspace (a no-op when the C lane has built it) and adds the library to the wheel
maturin made (with its RECORD line): added to the finished wheel rather than left in the
source tree for maturin to pick up, because maturin leaves out what .gitignore lists and a
build product belongs there. `build_editable` copies it into the source package instead,
where the editable install loads the extension from.
"""

import base64
import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import maturin
from maturin import (  # noqa: F401  (re-exported PEP 517 hooks)
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

PACKAGE = Path(__file__).resolve().parent.parent
WORKSPACE = PACKAGE.parent.parent
SONAME = "libpinframe.so.0"


def _build_libpinframe():
    """Builds libpinframe (release) and returns the path of the shared library."""
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [cargo, "build", "--release", "-p", "pinframe-c", "--message-format=json-render-diagnostics"]
    out = subprocess.run(cmd, cwd=WORKSPACE, check=True, stdout=subprocess.PIPE, text=True).stdout
    built = None
    for line in out.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "pinframe_c":
            built = next((f for f in msg["filenames"] if f.endswith(".so")), built)
    if built is None:
        raise RuntimeError(f"`{' '.join(cmd)}` produced no libpinframe_c.so")
    return Path(built)


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _add_to_wheel(wheel, library):
    """Rewrites `wheel` with `pinframe/libpinframe.so.0` added and listed in RECORD."""
    data = library.read_bytes()
    name = f"pinframe/{SONAME}"
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        record = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        for item in src.infolist():
            if item.filename in (record, name):
                continue
            dst.writestr(item, src.read(item))
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o100755 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        dst.writestr(info, data)
        lines = [l for l in src.read(record).decode().splitlines() if l and not l.startswith(name + ",")]
        lines.append(_record_line(name, data))
        dst.writestr(src.getinfo(record), "\n".join(lines) + "\n")
    os.replace(tmp, wheel)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    library = _build_libpinframe()
    filename = maturin.build_wheel(wheel_directory, config_settings, metadata_directory)
    _add_to_wheel(Path(wheel_directory) / filename, library)
    return filename


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    library = _build_libpinframe()
    shutil.copyfile(library, PACKAGE / "python" / "pinframe" / SONAME)
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
