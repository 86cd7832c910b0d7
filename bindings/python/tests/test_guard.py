"""One CPU-mapping guard per process: the package's is libpinframe.so.0's (shared-guard).

The wheel bundles libpinframe.so.0 next to the extension; the extension (built with
pinframe's `shared-guard` feature) routes every mapping through the guard that library
exports, as every other copy of pinframe in the process built with the feature does."""

import ctypes
import os

import pinframe


def _mapped_libpinframe():
    with open("/proc/self/maps") as maps:
        return {line.split()[-1] for line in maps if line.rstrip().endswith("/libpinframe.so.0")}


def test_the_guard_is_the_bundled_libpinframe():
    bundled = os.path.join(os.path.dirname(os.path.realpath(pinframe.__file__)), "libpinframe.so.0")
    assert os.path.isfile(bundled), "the wheel bundles libpinframe.so.0 next to the extension"
    assert os.path.realpath(pinframe.info()["cpu_mapping_guard"]) == os.path.realpath(bundled)
    assert _mapped_libpinframe() == {os.path.realpath(bundled)}


def _excluded_section(library):
    """`pinframe_with_cpu_mappings_excluded` of a loaded libpinframe, and its callback type."""
    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    section = library.pinframe_with_cpu_mappings_excluded
    section.argtypes = [callback_type, ctypes.c_void_p]
    section.restype = ctypes.c_int
    return section, callback_type


def test_a_c_section_holds_off_the_python_copy():
    # Another copy of pinframe in this process: libpinframe's own, reached from C. The
    # loader has one object per soname, so the bare name gets the one the package loaded.
    c = ctypes.CDLL("libpinframe.so.0")
    assert len(_mapped_libpinframe()) == 1
    section, callback_type = _excluded_section(c)
    fresh = pinframe.Tensor.image(8, 8, "rgb", memory="shm")
    seen = []

    def inside(_ctx):
        # A first mapping on the thread inside its own excluded section is refused (not a
        # deadlock) - but only if this copy's guard is the section's: with a guard of its
        # own, the Python copy would map here while the C copy believes nothing maps.
        try:
            with fresh.map_mut() as a:
                a[...] = 1
            seen.append("mapped")
        except pinframe.InvalidInput as e:
            seen.append(str(e))

    assert section(callback_type(inside), None) == 0
    assert len(seen) == 1 and seen[0] != "mapped", seen
    assert "excluded" in seen[0] or "section" in seen[0], seen[0]
    # After the section the same mapping works.
    with fresh.map_mut() as a:
        a[...] = 2


def test_a_second_libpinframe_file_is_a_second_guard(tmp_path):
    # The negative: the same library copied to another file name is loaded as a second
    # object (the loader dedups a bare soname, not a path), with a guard of its own; its
    # section does not cover the package's mappings. This is why a wheel must not bundle a
    # renamed copy, and why the test above can fail.
    bundled = os.path.join(os.path.dirname(os.path.realpath(pinframe.__file__)), "libpinframe.so.0")
    other_path = tmp_path / "libpinframe_other.so"
    other_path.write_bytes(open(bundled, "rb").read())
    other = ctypes.CDLL(str(other_path))
    section, callback_type = _excluded_section(other)
    fresh = pinframe.Tensor.image(8, 8, "rgb", memory="shm")
    seen = []

    def inside(_ctx):
        with fresh.map_mut() as a:
            a[...] = 3
        seen.append("mapped")

    assert section(callback_type(inside), None) == 0
    assert seen == ["mapped"]
