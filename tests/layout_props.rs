//! Property tests: layout validation and import never panic, and whatever they accept is
//! really inside the buffer (checked here independently of the library's own arithmetic).

use std::os::fd::AsFd;

use pinframe::image::FormatFamily;
use pinframe::{DType, Error, ImageLayout, Memory, PixelFormat, Plane, Tensor};
use proptest::prelude::*;

fn any_format() -> impl Strategy<Value = PixelFormat> {
    prop::sample::select(PixelFormat::ALL.to_vec())
}

fn any_dtype() -> impl Strategy<Value = DType> {
    prop::sample::select(vec![
        DType::U8,
        DType::I8,
        DType::F16,
        DType::F32,
        DType::F64,
    ])
}

/// Independent restatement of the geometry: (bytes per row, rows) of plane `i`.
fn plane_geometry(w: u64, h: u64, f: PixelFormat, d: DType, i: usize) -> (u64, u64) {
    let (hsub, vsub) = f.chroma_subsampling();
    let cw = w.div_ceil(u64::from(hsub));
    let ch = h.div_ceil(u64::from(vsub));
    match (f.family(), i) {
        (FormatFamily::PackedYuv422, _) => (cw * 4, h),
        (FormatFamily::SemiPlanarYuv, 0) | (FormatFamily::PlanarYuv, 0) => (w, h),
        (FormatFamily::SemiPlanarYuv, _) => (cw * 2, ch),
        (FormatFamily::PlanarYuv, _) => (cw, ch),
        (FormatFamily::Grey, _) | (FormatFamily::PlanarRgb, _) => (w * d.size() as u64, h),
        (FormatFamily::PackedRgb, _) => (w * f.channels() as u64 * d.size() as u64, h),
        // Bayer: a byte, a 16-bit word, 5 bytes per 4 pixels (RAW10) or 3 per 2 (RAW12).
        (FormatFamily::Bayer, _) => match f.storage().bits() {
            8 => (w, h),
            10 if f.storage().group().0 == 4 => (w / 4 * 5, h),
            12 if f.storage().group().0 == 2 => (w / 2 * 3, h),
            _ => (w * 2, h),
        },
        (FormatFamily::DeepGrey, _) | (FormatFamily::SemiPlanarYuv16, 0) => (w * 2, h),
        (FormatFamily::SemiPlanarYuv16, _) => (cw * 4, ch),
        (family, _) => panic!("no reference geometry for {family:?}: add it here"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, .. ProptestConfig::default() })]

    #[test]
    fn accepted_layouts_are_geometrically_sound(
        w in prop_oneof![1u32..40, 0u32..70_000], h in prop_oneof![1u32..40, 0u32..70_000],
        f in any_format(), d in any_dtype(),
        offsets in prop::collection::vec(prop_oneof![0usize..100_000, Just(usize::MAX - 7), any::<usize>()], 3),
        strides in prop::collection::vec(prop_oneof![0usize..50_000, Just(usize::MAX / 2), any::<usize>()], 3),
        bufs in prop::collection::vec(prop_oneof![0usize..3, Just(usize::MAX), any::<usize>()], 3),
    ) {
        let planes: Vec<Plane> = (0..f.plane_count())
            .map(|i| Plane { buffer: bufs[i], offset: offsets[i], stride: strides[i] })
            .collect();
        match ImageLayout::with_planes(w, h, f, d, &planes) {
            Err(e) => prop_assert!(matches!(e, Error::InvalidLayout(_)), "{e}"),
            Ok(l) => {
                prop_assert!(w > 0 && h > 0);
                prop_assert!(l.buffer_count() <= planes.len());
                prop_assert!(planes.iter().all(|p| p.buffer < l.buffer_count()));
                prop_assert!(!f.is_source_only() || d == DType::U8);
                let (mw, mh) = f.size_multiple();
                prop_assert!(w % mw == 0 && h % mh == 0, "{w}x{h} {f} is not whole tiles");
                let mut extents = Vec::new();
                for (i, p) in planes.iter().enumerate() {
                    let (row, rows) = plane_geometry(u64::from(w), u64::from(h), f, d, i);
                    prop_assert!(p.stride as u128 >= u128::from(row));
                    let end = p.offset as u128 + p.stride as u128 * u128::from(rows - 1) + u128::from(row);
                    prop_assert!(end <= isize::MAX as u128);
                    prop_assert!(end as usize <= l.required_len(p.buffer));
                    extents.push((p.buffer, p.offset as u128, end));
                }
                for (i, a) in extents.iter().enumerate() {
                    for b in &extents[i + 1..] {
                        prop_assert!(a.0 != b.0 || a.2 <= b.1 || b.2 <= a.1, "planes overlap");
                    }
                }
            }
        }
    }

    #[test]
    fn imports_accept_only_layouts_that_fit_the_buffer(
        w in 1u32..300, h in 1u32..300, f in any_format(),
        stride_pad in 0usize..200, offset in 0usize..5000, buf_len in 1usize..400_000,
    ) {
        let memfd = Tensor::<u8>::new(&[buf_len], Some(Memory::Shm)).unwrap();
        let (row0, _) = plane_geometry(u64::from(w), u64::from(h), f, DType::U8, 0);
        let stride = row0 as usize + stride_pad;
        let Ok(layout) = ImageLayout::with_stride(w, h, f, DType::U8, stride) else {
            // Only odd-width chroma or similar geometry can fail here.
            return Ok(());
        };
        // Shift every plane by `offset` bytes into the buffer.
        let planes: Vec<Plane> = layout.planes().iter()
            .map(|p| Plane { offset: p.offset + offset, ..*p })
            .collect();
        let layout = ImageLayout::with_planes(w, h, f, DType::U8, &planes).unwrap();
        let fits = (0..f.plane_count()).all(|i| {
            let (row, rows) = plane_geometry(u64::from(w), u64::from(h), f, DType::U8, i);
            planes[i].offset as u64 + planes[i].stride as u64 * (rows - 1) + row <= buf_len as u64
        });
        // SAFETY: only this test holds the memfd, and it writes it through no other view.
        match unsafe { Tensor::<u8>::import(memfd.fd().unwrap().as_fd(), layout) } {
            Ok(t) => {
                prop_assert!(fits);
                let m = t.map().unwrap();
                prop_assert!(m.len() <= buf_len);
            }
            Err(e) => {
                prop_assert!(!fits, "rejected a fitting layout: {e}");
                let is_too_small = matches!(e, Error::BufferTooSmall { .. });
                prop_assert!(is_too_small, "{e}");
            }
        }
    }

    #[test]
    fn with_stride_and_alignment_never_panic(
        w in 0u32..100_000, h in 0u32..100_000, f in any_format(), d in any_dtype(),
        stride in any::<usize>(), align_pow in 0u32..20,
    ) {
        let _ = ImageLayout::with_stride(w, h, f, d, stride);
        let _ = ImageLayout::with_row_alignment(w, h, f, d, 1 << align_pow);
        let _ = ImageLayout::with_row_alignment(w, h, f, d, 3);
    }
}
