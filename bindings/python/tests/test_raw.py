"""RAW sources from Python: Bayer, deep grey and P01x arrays in (uint8 bytes, or uint16
samples), their views, and the ISP keyword arguments of `ImageProcessor.convert` checked
against a numpy reference of a flat colour patch, whose demosaic is exact:
`255 * clamp((code - black) / (white - black) * gain)` per channel."""

import numpy as np
import pytest

import pinframe
from conftest import BAYER_FORMATS, SIXTEEN_BIT_FORMATS, bits, size_multiple


def flat_patch(fmt, w, h, codes):
    """A flat Bayer patch of `fmt` whose R, Gr, Gb and B sites read `codes[site]`, as
    numpy holds it: uint8 for 8 bits, uint16 samples for 16-bit words."""
    pattern = fmt[:4]
    tile = np.empty((2, 2), dtype=np.int64)
    for i, colour in enumerate(pattern):
        y, x = divmod(i, 2)
        row = pattern[2 * y : 2 * y + 2]
        site = {"r": "R", "b": "B"}.get(colour) or ("Gr" if "r" in row else "Gb")
        tile[y, x] = codes[site]
    full = np.tile(tile, (h // 2, w // 2))
    return full.astype(np.uint16 if bits(fmt) > 8 else np.uint8)


def expected_rgb(fmt, codes, black, gains):
    """What the flat patch becomes: per channel clamp((code - black) / (white - black) *
    gain, 0, 1), from the R site, the Gr site and the B site."""
    white = 2 ** bits(fmt) - 1
    sites = {"R": 0, "Gr": 1, "Gb": 2, "B": 3}
    out = []
    for c, site in enumerate(("R", "Gr", "B")):
        b = black[sites[site]]
        out.append(min(max((codes[site] - b) / (white - b) * gains[c], 0.0), 1.0))
    return np.array(out)


def raw_codes(fmt):
    """Site codes and black levels for `fmt`: both greens land on exactly half of their
    range (so the patch is flat with different Gr and Gb black levels), red below the
    clip, blue above it once gained."""
    n = bits(fmt)
    white = 2**n - 1
    scale = 2 ** (n - 8)
    # Odd black levels keep white - black even, so half of it is a whole code.
    black = (17 * scale + 1, 15 * scale + 1, 13 * scale + 1, 11 * scale + 1)
    black = tuple(b | 1 for b in black)
    codes = {
        "R": black[0] + int(0.4 * (white - black[0])),
        "Gr": black[1] + (white - black[1]) // 2,
        "Gb": black[2] + (white - black[2]) // 2,
        "B": black[3] + int(0.6 * (white - black[3])),
    }
    return codes, black


@pytest.mark.parametrize("fmt", ["rggb8", "bggr10", "grbg12", "gbrg16", "rggb10", "gbrg8"])
def test_a_flat_bayer_patch_with_isp_kwargs_matches_the_numpy_reference(proc, fmt):
    w, h = 16, 12
    codes, black = raw_codes(fmt)
    gains = (1.6, 1.0, 2.2)
    arr = flat_patch(fmt, w, h, codes)
    dst = pinframe.Tensor.image(8, 6, "planar-rgb", "f32", memory="heap")
    proc.convert(arr, dst, src_format=fmt, black_level=black, wb_gains=gains)
    want = expected_rgb(fmt, codes, black, gains)
    assert want[2] == 1.0 and 0.2 < want[0] < 1.0  # blue clips, red does not
    got = np.asarray(dst)
    for c in range(3):
        np.testing.assert_allclose(got[c], want[c], atol=1e-4, err_msg=f"{fmt} channel {c}")
    # The same frame as a tensor (from_numpy), into u8 RGB: the 0..255 value, rounded.
    t = pinframe.Tensor.from_numpy(arr, fmt)
    rgb = pinframe.Tensor.image(8, 6, "rgb", "u8", memory="heap")
    proc.convert(t, rgb, black_level=black, wb_gains=gains)
    np.testing.assert_allclose(np.asarray(rgb)[2, 3], 255 * want, atol=0.51)


def test_ccm_and_srgb_kwargs(proc):
    fmt, w, h = "rggb10", 8, 8
    codes, black = raw_codes(fmt)
    arr = flat_patch(fmt, w, h, codes)
    linear = expected_rgb(fmt, codes, black, (1.0, 1.0, 1.0))
    swap = np.array([[0, 0, 1], [0, 1, 0], [1, 0, 0]], dtype=np.float32)
    dst = pinframe.Tensor.image(4, 4, "planar-rgb", "f32", memory="heap")
    # The matrix as a numpy array, as nine values and as nested lists: the same.
    outs = []
    for ccm in (swap, swap.ravel().tolist(), swap.tolist()):
        proc.convert(arr, dst, src_format=fmt, black_level=black, ccm=ccm, gamma="srgb")
        outs.append(np.asarray(dst).copy())
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    mixed = np.clip(swap @ linear, 0, 1)
    srgb = np.where(mixed <= 0.0031308, 12.92 * mixed, 1.055 * mixed ** (1 / 2.4) - 0.055)
    for c in range(3):
        np.testing.assert_allclose(outs[0][c], srgb[c], atol=2e-3, err_msg=f"channel {c}")


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(black_level=1023), "isp black level 1023 at the R sites is not below the white level 1023"),
        (dict(black_level=(0, 0, 0, 2000)), "at the B sites"),
        (dict(wb_gains=(1.0, 0.0, 1.0)), "isp gain 0 for G"),
        (dict(wb_gains=(1.0, -2.0, 1.0)), "isp gain -2 for G"),
        (dict(ccm=[[1, 0, 0], [0, float("nan"), 0], [0, 0, 1]]), "non-finite"),
    ],
)
def test_out_of_range_isp_values_raise_invalid_input(proc, kwargs, match):
    arr = flat_patch("rggb10", 8, 8, raw_codes("rggb10")[0])
    dst = pinframe.Tensor.image(4, 4, "rgb", "u8", memory="heap")
    with pytest.raises(pinframe.InvalidInput, match=match) as e:
        proc.convert(arr, dst, src_format="rggb10", **kwargs)
    assert isinstance(e.value, ValueError)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(black_level="64"), "black_level"),
        (dict(black_level=(1, 2)), "black_level"),
        (dict(black_level=-1), "black_level"),
        (dict(black_level=70000), "black_level"),
        (dict(wb_gains=(1.0, 2.0)), "wb_gains"),
        (dict(wb_gains="1,1,1"), "wb_gains"),
        (dict(ccm=[[1, 0], [0, 1]]), "ccm"),
        (dict(ccm=np.eye(4)), "ccm"),
        (dict(gamma="cubic"), "unknown gamma"),
    ],
)
def test_malformed_isp_kwargs_raise_value_errors(proc, kwargs, match):
    arr = flat_patch("rggb8", 8, 8, raw_codes("rggb8")[0])
    dst = pinframe.Tensor.image(4, 4, "rgb", "u8", memory="heap")
    with pytest.raises(ValueError, match=match):
        proc.convert(arr, dst, src_format="rggb8", **kwargs)


@pytest.mark.parametrize("fmt", SIXTEEN_BIT_FORMATS)
def test_uint16_arrays_of_16_bit_formats_are_their_bytes(rng, proc, fmt):
    """A uint16 (h, w) array (p01x: (h + h//2, w)) is the same image as its bytes viewed
    as uint8 (h, 2w): same tensor, same conversion, and the tensor's views are the bytes."""
    w, h = 12, 8
    layout = pinframe.ImageLayout(w, h, fmt)
    rows = layout.shape[0]
    words = rng.integers(0, 2 ** bits(fmt), (rows, w), dtype=np.uint16)
    if fmt[:2] == "p0":
        words <<= 16 - bits(fmt)  # P01x keeps its significant bits high
    as_bytes = words.view(np.uint8)
    assert as_bytes.shape == tuple(layout.shape)
    t16 = pinframe.Tensor.from_numpy(words, fmt)
    t8 = pinframe.Tensor.from_numpy(as_bytes, fmt)
    assert t16.dtype == "u8" and t16.shape == tuple(layout.shape)
    assert t16.layout.format == fmt and (t16.layout.width, t16.layout.height) == (w, h)
    np.testing.assert_array_equal(np.asarray(t16), as_bytes)
    np.testing.assert_array_equal(np.asarray(t8), as_bytes)
    # numpy's buffer protocol and DLPack views alias the tensor's bytes.
    assert np.asarray(t16).ctypes.data == t16.pin().address
    np.testing.assert_array_equal(np.from_dlpack(t16), as_bytes)
    np.testing.assert_array_equal(np.asarray(memoryview(t16)), as_bytes)
    outs = []
    for src in (words, as_bytes, t16):
        dst = pinframe.Tensor.image(6, 4, "rgb", "u8", memory="heap")
        kwargs = {} if isinstance(src, pinframe.Tensor) else dict(src_format=fmt)
        proc.convert(src, dst, **kwargs)
        outs.append(np.asarray(dst).copy())
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])


@pytest.mark.parametrize("fmt", BAYER_FORMATS + ["y10", "y16", "p010", "p016"])
def test_byte_arrays_of_every_raw_format_round_trip(rng, fmt):
    mw, _ = size_multiple(fmt)
    w, h = 8 * mw, 6
    layout = pinframe.ImageLayout(w, h, fmt)
    arr = rng.integers(0, 256, layout.shape, dtype=np.uint8)
    t = pinframe.Tensor.from_numpy(arr, fmt)
    assert t.shape == tuple(layout.shape) and t.dtype == "u8"
    np.testing.assert_array_equal(np.asarray(t), arr)
    np.testing.assert_array_equal(np.from_dlpack(t), arr)


def test_bad_raw_arrays_are_refused_with_the_reason(proc):
    dst = pinframe.Tensor.image(4, 4, "rgb", "u8", memory="heap")
    # Odd sizes: a Bayer image is whole 2x2 tiles.
    with pytest.raises(pinframe.InvalidInput, match="multiple of 2"):
        pinframe.Tensor.from_numpy(np.zeros((7, 8), np.uint8), "rggb8")
    # A RAW10P row is whole 5-byte groups.
    with pytest.raises(pinframe.InvalidInput, match="groups of 5 bytes"):
        pinframe.Tensor.from_numpy(np.zeros((4, 12), np.uint8), "rggb10p")
    # uint16 samples only for formats of 16-bit words.
    with pytest.raises(pinframe.InvalidInput, match="uint16 samples of a 16-bit RAW format"):
        proc.convert(np.zeros((4, 4), np.uint16), dst, src_format="rggb8")
    with pytest.raises(pinframe.InvalidInput, match="rggb12p"):
        pinframe.Tensor.from_numpy(np.zeros((4, 4), np.uint16), "rggb12p")
    # RAW formats are sources only.
    with pytest.raises(pinframe.Unsupported, match="source-only"):
        proc.convert(dst, pinframe.Tensor.image(4, 4, "rggb8", "u8", memory="heap"))
