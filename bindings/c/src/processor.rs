//! The image processor: conversions with options that mirror `ConvertOptions`.

use std::sync::Mutex;

use pinframe::{
    Backend, BatchItem, Colorimetry, ColorimetryChoice, ConvertInfo, ConvertOptions, Crop, Fit,
    Flip, Gamma, ImageProcessor, Interpolation, Isp, Normalize, Rotation,
};

use crate::status::{
    Failure, Handle, Outcome, SizedStruct, call, check_struct_size, handle, pinframe_status,
    prepare_out, read_sized, take_handle, write_out, write_sized,
};
use crate::tensor::{
    AnyTensor, Slot, TensorHandle, TensorState, any_tensor, pinframe_tensor, tensor_arg,
};
use crate::types::*;

/// Which backend a processor runs on: one of the `PINFRAME_BACKEND_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_backend = u32;
/// GL on a hardware GPU, else the CPU (a fallback counted in the stats).
pub const PINFRAME_BACKEND_AUTO: pinframe_backend = 0;
/// The fused CPU kernels.
pub const PINFRAME_BACKEND_CPU: pinframe_backend = 1;
/// OpenGL ES through EGL; creating the processor fails when GL cannot start.
pub const PINFRAME_BACKEND_GL: pinframe_backend = 2;

/// Mirroring: one of the `PINFRAME_FLIP_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_flip = u32;
/// No mirroring.
pub const PINFRAME_FLIP_NONE: pinframe_flip = 0;
/// Mirror left-right.
pub const PINFRAME_FLIP_HORIZONTAL: pinframe_flip = 1;
/// Mirror top-bottom.
pub const PINFRAME_FLIP_VERTICAL: pinframe_flip = 2;

/// How the source is fitted into the destination: one of the `PINFRAME_FIT_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_fit = u32;
/// Scale each axis independently to cover the destination exactly.
pub const PINFRAME_FIT_STRETCH: pinframe_fit = 0;
/// Scale uniformly to fit, centre, and fill the rest with `pad`.
pub const PINFRAME_FIT_LETTERBOX: pinframe_fit = 1;
/// Scale uniformly to cover, centre, and crop what overflows.
pub const PINFRAME_FIT_FILL: pinframe_fit = 2;

/// The resampling filter: one of the `PINFRAME_INTERPOLATION_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_interpolation = u32;
/// Bilinear, pixel centres at +0.5, edges clamped.
pub const PINFRAME_INTERPOLATION_BILINEAR: pinframe_interpolation = 0;
/// Nearest neighbour.
pub const PINFRAME_INTERPOLATION_NEAREST: pinframe_interpolation = 1;

/// The transfer function of a RAW conversion: one of the `PINFRAME_GAMMA_*` values.
#[allow(non_camel_case_types)]
pub type pinframe_gamma = u32;
/// None: the output stays linear in the sensor's light.
pub const PINFRAME_GAMMA_LINEAR: pinframe_gamma = 0;
/// The sRGB curve (IEC 61966-2-1), what models trained on ordinary photos expect.
pub const PINFRAME_GAMMA_SRGB: pinframe_gamma = 1;

/// A rectangle in source pixels.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pinframe_rect {
    /// Left edge.
    pub x: u32,
    /// Top edge.
    pub y: u32,
    /// Width (at least 1).
    pub width: u32,
    /// Height (at least 1).
    pub height: u32,
}

/// Everything a conversion can be asked to do (pinframe's `ConvertOptions`). Set
/// `struct_size = sizeof(pinframe_convert_options)`, then `pinframe_convert_options_init`
/// for the defaults: the whole source, stretched, bilinear, colorimetry automatic, floats
/// scaled to 0..1.
///
/// Geometry order: crop, flip, rotation (clockwise), fit. The struct grows only at its
/// end (new options, such as quantisation, arrive as new fields): a program compiled
/// against an older header passes a smaller `struct_size` and gets the defaults of the
/// fields it does not know; one compiled against a newer header that sets fields this
/// library does not know gets `PINFRAME_ERROR_UNSUPPORTED`. The sizes accepted are the
/// released ones, `offsetof(pinframe_convert_options, black_level)` (before the RAW
/// fields) and `sizeof(pinframe_convert_options)`, or larger; any other is
/// `PINFRAME_ERROR_INVALID_INPUT`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_convert_options {
    /// `sizeof(pinframe_convert_options)`, set by the caller.
    pub struct_size: usize,
    /// 1: convert only `crop` of the source; 0: all of it.
    pub has_crop: u32,
    /// The part of the source to convert, when `has_crop` is 1.
    pub crop: pinframe_rect,
    /// A `PINFRAME_FLIP_*` value.
    pub flip: pinframe_flip,
    /// Clockwise rotation in degrees: 0, 90, 180 or 270.
    pub rotation: u32,
    /// A `PINFRAME_FIT_*` value.
    pub fit: pinframe_fit,
    /// Letterbox padding colour R, G, B.
    pub pad: [u8; 3],
    /// A `PINFRAME_INTERPOLATION_*` value.
    pub interpolation: pinframe_interpolation,
    /// YUV→RGB matrix: `PINFRAME_MATRIX_AUTO` (with `range` AUTO too) uses the source's
    /// colorimetry, else BT.601 limited below 720 lines and BT.709 limited from 720. Set
    /// one or both to fix them; a half left AUTO comes from that same rule.
    pub matrix: pinframe_matrix,
    /// YUV range (see `matrix`).
    pub range: pinframe_range,
    /// Float outputs: `(v / 255 - mean[c]) / std[c]`, channels in R, G, B order.
    pub mean: [f32; 3],
    /// See `mean`; every entry finite and non-zero.
    pub std: [f32; 3],
    /// RAW (Bayer) sources, ignored for others: the code a dark pixel reads per CFA site,
    /// R, Gr (green on red rows), Gb (green on blue rows), B, in the source's own units
    /// (0..=1023 for 10 bits); each below the white level `2^bits - 1`. Default 0.
    /// The RAW steps run in this order: black level, `wb_gains` (then the clip to the
    /// white level), demosaic, `ccm` (then the clip to 0..1), `gamma`.
    pub black_level: [u16; 4],
    /// RAW sources: white-balance gains for R, G, B; finite and positive. Default 1.
    pub wb_gains: [f32; 3],
    /// RAW sources: the colour-correction matrix from camera RGB to output RGB, rows are
    /// output R, G, B; finite. Default identity.
    pub ccm: [[f32; 3]; 3],
    /// RAW sources: a `PINFRAME_GAMMA_*` value. Default `PINFRAME_GAMMA_LINEAR`.
    pub gamma: pinframe_gamma,
}

impl SizedStruct for pinframe_convert_options {
    const NAME: &'static str = "pinframe_convert_options";
    /// The first layout ended after `std`; the RAW block (`black_level` .. `gamma`) was
    /// appended to it.
    const RELEASED: &'static [usize] = &[
        std::mem::offset_of!(pinframe_convert_options, black_level),
        size_of::<Self>(),
    ];
}

impl pinframe_convert_options {
    fn defaults() -> Self {
        let d = ConvertOptions::default();
        pinframe_convert_options {
            struct_size: size_of::<Self>(),
            has_crop: 0,
            crop: pinframe_rect::default(),
            flip: PINFRAME_FLIP_NONE,
            rotation: 0,
            fit: PINFRAME_FIT_STRETCH,
            pad: [0; 3],
            interpolation: PINFRAME_INTERPOLATION_BILINEAR,
            matrix: PINFRAME_MATRIX_AUTO,
            range: PINFRAME_RANGE_AUTO,
            mean: d.normalize.mean,
            std: d.normalize.std,
            black_level: d.isp.black_level,
            wb_gains: d.isp.gains,
            ccm: d.isp.ccm,
            gamma: PINFRAME_GAMMA_LINEAR,
        }
    }

    /// The crop `has_crop` and `crop` say.
    fn crop(has_crop: u32, crop: pinframe_rect) -> Outcome<Option<Crop>> {
        match has_crop {
            0 => Ok(None),
            1 => Ok(Some(Crop::new(crop.x, crop.y, crop.width, crop.height))),
            n => Err(Failure::invalid(format!(
                "has_crop must be 0 or 1, not {n}"
            ))),
        }
    }

    /// The fit a `PINFRAME_FIT_*` value and a letterbox colour say.
    fn fit(fit: pinframe_fit, pad: [u8; 3]) -> Outcome<Fit> {
        match fit {
            PINFRAME_FIT_STRETCH => Ok(Fit::Stretch),
            PINFRAME_FIT_LETTERBOX => Ok(Fit::Letterbox { pad }),
            PINFRAME_FIT_FILL => Ok(Fit::Fill),
            n => Err(Failure::invalid(format!("unknown fit {n}"))),
        }
    }

    /// The options for a source whose layout says `known` and that has `height` lines.
    // `..default()` keeps compiling, with defaults, when pinframe's struct gains fields.
    #[allow(clippy::needless_update)]
    fn to_options(self, known: Option<Colorimetry>, height: u32) -> Outcome<ConvertOptions> {
        let crop = Self::crop(self.has_crop, self.crop)?;
        let flip = match self.flip {
            PINFRAME_FLIP_NONE => Flip::None,
            PINFRAME_FLIP_HORIZONTAL => Flip::Horizontal,
            PINFRAME_FLIP_VERTICAL => Flip::Vertical,
            n => return Err(Failure::invalid(format!("unknown flip {n}"))),
        };
        let fit = Self::fit(self.fit, self.pad)?;
        let interpolation = match self.interpolation {
            PINFRAME_INTERPOLATION_BILINEAR => Interpolation::Bilinear,
            PINFRAME_INTERPOLATION_NEAREST => Interpolation::Nearest,
            n => return Err(Failure::invalid(format!("unknown interpolation {n}"))),
        };
        let fallback = known.unwrap_or(Colorimetry::default_for_height(height));
        let colorimetry = ColorimetryChoice::from_parts(
            matrix_from(self.matrix)?,
            range_from(self.range)?,
            fallback,
        );
        let gamma = match self.gamma {
            PINFRAME_GAMMA_LINEAR => Gamma::Linear,
            PINFRAME_GAMMA_SRGB => Gamma::Srgb,
            n => {
                return Err(Failure::invalid(format!(
                    "unknown gamma {n}; use PINFRAME_GAMMA_LINEAR or PINFRAME_GAMMA_SRGB"
                )));
            }
        };
        Ok(ConvertOptions {
            crop,
            flip,
            rotation: Rotation::from_degrees(self.rotation)?,
            fit,
            interpolation,
            colorimetry,
            normalize: Normalize {
                mean: self.mean,
                std: self.std,
            },
            // Checked against the source's white level by the conversion, whose error names
            // the parameter.
            isp: Isp {
                black_level: self.black_level,
                gains: self.wb_gains,
                ccm: self.ccm,
                gamma,
            },
            // Options this struct does not carry yet keep their defaults.
            ..ConvertOptions::default()
        })
    }
}

/// What a conversion did, so results (detection boxes) can be mapped back to source
/// pixels (pinframe's `ConvertInfo`). Set `struct_size = sizeof(pinframe_convert_info)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_convert_info {
    /// `sizeof(pinframe_convert_info)`, set by the caller.
    pub struct_size: usize,
    /// Destination pixels per oriented source pixel, x and y.
    pub scale: [f64; 2],
    /// Where the oriented source's top-left corner landed in the destination, x and y.
    pub offset: [i64; 2],
    /// The destination rectangle covered by source content: x, y, width, height.
    pub content: [u32; 4],
    /// The YUV matrix used (`PINFRAME_MATRIX_AUTO` for a source that is not YUV).
    pub matrix: pinframe_matrix,
    /// The YUV range used (`PINFRAME_RANGE_AUTO` for a source that is not YUV).
    pub range: pinframe_range,
    /// Affine map from destination to source coordinates:
    /// `src = dst_to_src * (x, y, 1)`.
    pub dst_to_src: [[f64; 3]; 2],
}

impl SizedStruct for pinframe_convert_info {
    const NAME: &'static str = "pinframe_convert_info";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

impl pinframe_convert_info {
    fn from_info(i: &ConvertInfo) -> Self {
        let (matrix, range) = colorimetry_codes(i.colorimetry);
        pinframe_convert_info {
            struct_size: size_of::<Self>(),
            scale: i.scale,
            offset: i.offset,
            content: i.content,
            matrix,
            range,
            dst_to_src: i.dst_to_src,
        }
    }
}

/// One image of a batch conversion (`pinframe_processor_convert_batch`, pinframe's
/// `BatchItem`): a source tensor and the crop and fit that override the batch's options
/// for it. Set `struct_size = sizeof(pinframe_batch_item)`, then
/// `pinframe_batch_item_init` for the defaults (no source, the options' crop and fit).
/// The struct grows only at its end, as `pinframe_convert_options` does.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_batch_item {
    /// `sizeof(pinframe_batch_item)`, set by the caller.
    pub struct_size: usize,
    /// The image: a `PINFRAME_DTYPE_U8` image tensor (a frame's, an import, ...). One
    /// tensor may be the source of many items (it is locked and mapped once).
    pub src: *const pinframe_tensor,
    /// 1: convert only `crop` of `src`; 0: the options' crop if they have one, else all.
    pub has_crop: u32,
    /// The part of `src` to convert, in its pixels, when `has_crop` is 1.
    pub crop: pinframe_rect,
    /// 1: fit this item as `fit` says; 0: as the options' `fit` (and `pad`).
    pub has_fit: u32,
    /// A `PINFRAME_FIT_*` value, when `has_fit` is 1.
    pub fit: pinframe_fit,
    /// This item's letterbox colour R, G, B, when `has_fit` is 1 and `fit` is
    /// `PINFRAME_FIT_LETTERBOX`.
    pub pad: [u8; 3],
}

impl SizedStruct for pinframe_batch_item {
    const NAME: &'static str = "pinframe_batch_item";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

impl pinframe_batch_item {
    fn defaults() -> Self {
        pinframe_batch_item {
            struct_size: size_of::<Self>(),
            src: std::ptr::null(),
            has_crop: 0,
            crop: pinframe_rect::default(),
            has_fit: 0,
            fit: PINFRAME_FIT_STRETCH,
            pad: [0; 3],
        }
    }
}

/// What a processor did so far (pinframe's `ProcessorStats`). Set
/// `struct_size = sizeof(pinframe_processor_stats)`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pinframe_processor_stats {
    /// `sizeof(pinframe_processor_stats)`, set by the caller.
    pub struct_size: usize,
    /// Buffers imported into the GPU (new EGL images).
    pub imports: u64,
    /// Conversions that reused an imported buffer.
    pub cache_hits: u64,
    /// Source images copied to the GPU.
    pub uploads: u64,
    /// Destination images copied back from the GPU.
    pub readbacks: u64,
    /// Conversions that ran on the CPU although GL was chosen.
    pub cpu_fallbacks: u64,
    /// Conversions completed.
    pub frames: u64,
}

impl SizedStruct for pinframe_processor_stats {
    const NAME: &'static str = "pinframe_processor_stats";
    const RELEASED: &'static [usize] = &[size_of::<Self>()];
}

/// Converts images (pinframe's `ImageProcessor`). Opaque; made by
/// `pinframe_processor_create`, freed by `pinframe_processor_free`. May be used from any
/// thread; calls on one processor are serialised.
pub struct pinframe_processor {
    _opaque: [u8; 0],
}

const PROCESSOR_MAGIC: u64 = u64::from_be_bytes(*b"pfProcsr");

/// # Safety
/// `p` is NULL or a live processor handle.
unsafe fn processor_arg<'a>(
    p: *const pinframe_processor,
    name: &str,
) -> Outcome<&'a Mutex<ImageProcessor>> {
    // SAFETY: the caller's contract.
    unsafe { handle(p, PROCESSOR_MAGIC, "pinframe_processor", name) }
}

/// Fills `*options` with the defaults (see `pinframe_convert_options`).
///
/// Ownership: writes `*options` (whose `struct_size` the caller set).
///
/// # Safety
/// `options` points to a `pinframe_convert_options` with its `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_convert_options_init(
    options: *mut pinframe_convert_options,
) -> pinframe_status {
    // SAFETY: the caller's contract.
    call(|| unsafe { write_sized(options, "options", pinframe_convert_options::defaults()) })
}

/// Makes a processor on `backend`. `PINFRAME_BACKEND_GL` fails (`PINFRAME_ERROR_DEVICE`
/// or `_UNSUPPORTED`) when GL cannot start, rather than falling back; `_AUTO` picks GL on
/// a hardware GPU and the CPU otherwise (`PINFRAME_BACKEND` in the environment overrides
/// AUTO).
///
/// Ownership: on success `*out` is a new processor the caller frees with
/// `pinframe_processor_free`; on failure `*out` is NULL.
///
/// # Safety
/// `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_processor_create(
    backend: pinframe_backend,
    out: *mut *mut pinframe_processor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        unsafe { prepare_out(out, "out")? };
        let backend = match backend {
            PINFRAME_BACKEND_AUTO => Backend::Auto,
            PINFRAME_BACKEND_CPU => Backend::Cpu,
            PINFRAME_BACKEND_GL => Backend::Gl,
            n => {
                return Err(Failure::invalid(format!(
                    "unknown backend {n}; use a PINFRAME_BACKEND_* value"
                )));
            }
        };
        let p = ImageProcessor::with_backend(backend)?;
        // SAFETY: checked above.
        unsafe { *out = Handle::new(PROCESSOR_MAGIC, Mutex::new(p)).into_raw() };
        Ok(())
    })
}

/// The backend conversions run on (never AUTO), in `*backend`.
///
/// Ownership: borrows `processor`.
///
/// # Safety
/// `processor` is a live handle; `backend` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_processor_get_backend(
    processor: *const pinframe_processor,
    backend: *mut pinframe_backend,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { processor_arg(processor, "processor")? };
        let b = match p.lock().unwrap_or_else(|e| e.into_inner()).backend() {
            Backend::Gl => PINFRAME_BACKEND_GL,
            _ => PINFRAME_BACKEND_CPU,
        };
        // SAFETY: the caller's contract.
        unsafe { write_out(backend, "backend", b) }
    })
}

/// Converts the image `src` (a `PINFRAME_DTYPE_U8` image tensor, e.g. a frame's) into the
/// image tensor `dst` (u8, i8, f16 or f32 elements) as `options` asks (NULL = defaults),
/// and reports what it did in `*info` (NULL = not wanted). An unsupported format pair or
/// dtype is `PINFRAME_ERROR_UNSUPPORTED`; `dst` is not written then.
///
/// `dst` must not be mapped, and `src` not mapped for writing; they must be two tensors
/// whose memory does not overlap: two tensors over one dma-buf or memfd (two imports of
/// one fd, or an import of a frame's fd) whose bytes intersect are
/// `PINFRAME_ERROR_INVALID_INPUT`, naming the overlap (each plane counts from its first
/// byte to the end of its last row).
///
/// Ownership: borrows everything; writes `dst`'s data and `*info`.
///
/// # Safety
/// `processor`, `src` and `dst` are live handles; `options` is NULL or a
/// `pinframe_convert_options` with its `struct_size` set; `info` is NULL or a
/// `pinframe_convert_info` with its `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_processor_convert(
    processor: *mut pinframe_processor,
    src: *const pinframe_tensor,
    dst: *mut pinframe_tensor,
    options: *const pinframe_convert_options,
    info: *mut pinframe_convert_info,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract, for each handle.
        let p = unsafe { processor_arg(processor, "processor")? };
        // SAFETY: as above.
        let s = unsafe { tensor_arg(src, "src")? };
        // SAFETY: as above.
        let d = unsafe { tensor_arg(dst, "dst")? };
        let opts = if options.is_null() {
            pinframe_convert_options::defaults()
        } else {
            // SAFETY: the caller's contract.
            unsafe { read_sized(options, "options", pinframe_convert_options::defaults())? }
        };
        if std::ptr::eq(s, d) {
            return Err(Failure::invalid(
                "src and dst are the same tensor; convert into another one",
            ));
        }
        if d.is_frame() {
            return Err(Failure::invalid(
                "a frame's tensor cannot be a destination (it is the camera's buffer)",
            ));
        }
        // Lock the two tensors in address order, so that two threads converting A→B and
        // B→A cannot each hold one and wait for the other.
        let (src_state, mut dst_state) = if (s as *const _ as usize) < (d as *const _ as usize) {
            let a = s.lock();
            (a, d.lock())
        } else {
            let b = d.lock();
            (s.lock(), b)
        };
        let src_tensor = src_state.slot()?.as_u8().ok_or_else(|| {
            Failure::new(
                crate::status::PINFRAME_ERROR_UNSUPPORTED,
                "conversion sources are u8 images (PINFRAME_DTYPE_U8)",
            )
        })?;
        let layout = src_tensor.layout().ok_or_else(|| {
            Failure::invalid("the source tensor has no image layout (pinframe_tensor_set_layout)")
        })?;
        let options = opts.to_options(layout.colorimetry(), layout.height())?;
        // Two tensors over one dma-buf or memfd whose bytes intersect (imports of one fd,
        // or of a frame's fd) are refused by the conversion itself, naming the overlap.
        let Slot::Owned(dst_any) = dst_state.slot_mut()? else {
            return Err(Failure::invalid("a frame's tensor cannot be a destination"));
        };
        let mut proc = p.lock().unwrap_or_else(|e| e.into_inner());
        let done = any_tensor!(dst_any, t => proc.convert_with(src_tensor, t, &options)?);
        drop(proc);
        if !info.is_null() {
            // SAFETY: the caller's contract.
            unsafe { write_sized(info, "info", pinframe_convert_info::from_info(&done))? };
        }
        Ok(())
    })
}

/// Fills `*item` with the defaults (see `pinframe_batch_item`): `src` NULL, no crop and
/// no fit of its own.
///
/// Ownership: writes `*item` (whose `struct_size` the caller set).
///
/// # Safety
/// `item` points to a `pinframe_batch_item` with its `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_batch_item_init(
    item: *mut pinframe_batch_item,
) -> pinframe_status {
    // SAFETY: the caller's contract.
    call(|| unsafe { write_sized(item, "item", pinframe_batch_item::defaults()) })
}

/// The element size of an array of sized structs: its first entry's `struct_size`, which
/// every entry must have (an array from an older or newer header steps by its own size).
///
/// # Safety
/// `first` is non-null and points to a struct of type `T` with its `struct_size` set.
unsafe fn array_stride<T: SizedStruct>(first: *const T, name: &str) -> Outcome<usize> {
    // SAFETY: every sized struct starts with a size_t struct_size (the caller's contract).
    let size = unsafe { (first as *const usize).read_unaligned() };
    check_struct_size::<T>(size, &format!("{name}[0]"))?;
    Ok(size)
}

/// Entry `i` of an array of sized structs whose entries are `stride` bytes apart, checked
/// to have that `struct_size`.
///
/// # Safety
/// `base` points to an array of at least `i + 1` entries `stride` bytes apart.
unsafe fn array_entry<T: SizedStruct>(
    base: *const T,
    stride: usize,
    i: usize,
    name: &str,
) -> Outcome<*const T> {
    // SAFETY: the caller's contract: entry `i` is inside the array.
    let entry = unsafe { (base as *const u8).add(i * stride) } as *const T;
    // SAFETY: as above; every entry starts with its struct_size.
    let size = unsafe { (entry as *const usize).read_unaligned() };
    if size != stride {
        return Err(Failure::invalid(format!(
            "`{name}[{i}]`: struct_size {size} differs from {name}[0]'s {stride}; every \
             entry of the array has the same size"
        )));
    }
    Ok(entry)
}

/// Converts `count` images into the slices of the batch tensor `dst` (made by
/// `pinframe_tensor_image_batch`) in one pass: `items[i]` into slice `i`, each as
/// `pinframe_processor_convert` would with `options` (NULL = defaults) and the item's own
/// crop and fit (pinframe's `ImageProcessor::convert_batch`). A YUV matrix or range
/// given alone is completed from `items[0]`'s source. `count` may be fewer than the
/// slices: the other slices are left as they are.
///
/// `infos` is NULL, or an array of `count` `pinframe_convert_info`, each with its
/// `struct_size` set: `infos[i]` receives item `i`'s geometry in its own source's pixels
/// (its `dst_to_src` maps a point of slice `i` back into `items[i].src`).
///
/// Everything is checked before anything is written: NULL `processor`, `items` or `dst`,
/// or a NULL `src` in an item, is `PINFRAME_ERROR_NULL_POINTER`; `count` 0 or more than
/// the slices, a bad item (its `struct_size`, flags or fit, naming `items[i]`), a source
/// that is `dst` or overlaps it, a source without a layout, a crop outside its source,
/// a damaged compressed frame or options `dst` cannot take are
/// `PINFRAME_ERROR_INVALID_INPUT` (or `_UNSUPPORTED` for a format pair), with a message
/// naming the item. `dst` must not be mapped, and no source mapped for writing.
///
/// Ownership: borrows everything; writes `dst`'s data and `infos[0..count]`.
///
/// # Safety
/// `processor` and `dst` are live handles; `items` points to `count` `pinframe_batch_item`
/// (each with its `struct_size` set, one value for all) whose `src` are live handles;
/// `options` is NULL or a `pinframe_convert_options` with its `struct_size` set; `infos`
/// is NULL or points to `count` `pinframe_convert_info` with their `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_processor_convert_batch(
    processor: *mut pinframe_processor,
    items: *const pinframe_batch_item,
    count: usize,
    dst: *mut pinframe_tensor,
    options: *const pinframe_convert_options,
    infos: *mut pinframe_convert_info,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract, for each handle.
        let p = unsafe { processor_arg(processor, "processor")? };
        // SAFETY: as above.
        let d = unsafe { tensor_arg(dst, "dst")? };
        if items.is_null() {
            return Err(Failure::null("items"));
        }
        if d.is_frame() {
            return Err(Failure::invalid(
                "a frame's tensor cannot be a destination (it is the camera's buffer)",
            ));
        }
        // The count is checked before the array is read: a wrong one must not make this
        // read past the caller's items.
        let slices = d.lock().batch_len();
        if count == 0 || count > slices {
            return Err(Failure::invalid(format!(
                "{count} items for a batch of {slices} slices: give 1 to {slices}"
            )));
        }
        let opts = if options.is_null() {
            pinframe_convert_options::defaults()
        } else {
            // SAFETY: the caller's contract.
            unsafe { read_sized(options, "options", pinframe_convert_options::defaults())? }
        };
        // SAFETY: non-null, and the caller guarantees `count` entries.
        let stride = unsafe { array_stride(items, "items")? };
        let mut read = Vec::with_capacity(count);
        for i in 0..count {
            // SAFETY: i < count entries of `stride` bytes (the caller's contract).
            let entry = unsafe { array_entry(items, stride, i, "items")? };
            // SAFETY: as above: a pinframe_batch_item with its struct_size set.
            let item = unsafe {
                read_sized(
                    entry,
                    &format!("items[{i}]"),
                    pinframe_batch_item::defaults(),
                )?
            };
            let at = |f: Failure| Failure::new(f.status, format!("items[{i}]: {}", f.message));
            if item.src.is_null() {
                return Err(Failure::null(&format!("items[{i}].src")));
            }
            // SAFETY: the caller's contract: a live tensor handle.
            let src = unsafe { tensor_arg(item.src, &format!("items[{i}].src"))? };
            if std::ptr::eq(src, d) {
                return Err(Failure::invalid(format!(
                    "items[{i}]: src and dst are the same tensor; convert into another one"
                )));
            }
            let crop = pinframe_convert_options::crop(item.has_crop, item.crop).map_err(at)?;
            let fit = match item.has_fit {
                0 => None,
                1 => Some(pinframe_convert_options::fit(item.fit, item.pad).map_err(at)?),
                n => {
                    return Err(at(Failure::invalid(format!(
                        "has_fit must be 0 or 1, not {n}"
                    ))));
                }
            };
            read.push((src, crop, fit));
        }
        let mut info_stride = 0;
        if !infos.is_null() {
            // SAFETY: the caller's contract: `count` entries with their struct_size set.
            info_stride = unsafe { array_stride(infos as *const pinframe_convert_info, "infos")? };
            for i in 0..count {
                // SAFETY: as above.
                unsafe {
                    array_entry(
                        infos as *const pinframe_convert_info,
                        info_stride,
                        i,
                        "infos",
                    )?
                };
            }
        }

        // Every tensor locked once, in address order (as `pinframe_processor_convert` locks
        // its two), so that crossed batches on two threads cannot wait for each other.
        let addr = |t: &TensorHandle| t as *const TensorHandle as usize;
        let mut order: Vec<&TensorHandle> = read
            .iter()
            .map(|(s, _, _)| *s)
            .chain(std::iter::once(d))
            .collect();
        order.sort_by_key(|t| addr(t));
        order.dedup_by_key(|t| addr(t));
        let mut sources: Vec<(usize, std::sync::MutexGuard<'_, TensorState>)> = Vec::new();
        let mut dst_state = None;
        for t in order {
            if std::ptr::eq(t, d) {
                dst_state = Some(t.lock());
            } else {
                sources.push((addr(t), t.lock()));
            }
        }
        let Some(mut dst_state) = dst_state else {
            return Err(Failure::invalid("the batch destination was not locked"));
        };
        let mut batch = Vec::with_capacity(count);
        for (i, (src, crop, fit)) in read.iter().enumerate() {
            let state = sources
                .iter()
                .find(|(a, _)| *a == addr(src))
                .map(|(_, g)| g)
                .ok_or_else(|| Failure::invalid("a batch source was not locked"))?;
            let at = |f: Failure| Failure::new(f.status, format!("items[{i}]: {}", f.message));
            let tensor = state.slot().map_err(at)?.as_u8().ok_or_else(|| {
                Failure::new(
                    crate::status::PINFRAME_ERROR_UNSUPPORTED,
                    format!("items[{i}]: conversion sources are u8 images (PINFRAME_DTYPE_U8)"),
                )
            })?;
            let mut item = BatchItem::tensor(tensor);
            if let Some(c) = crop {
                item = item.with_crop(*c);
            }
            if let Some(f) = fit {
                item = item.with_fit(*f);
            }
            batch.push(item);
        }
        let first = batch[0].source.layout()?;
        let options = opts.to_options(first.colorimetry(), first.height())?;
        let Slot::Owned(dst_any) = dst_state.slot_mut()? else {
            return Err(Failure::invalid("a frame's tensor cannot be a destination"));
        };
        let mut proc = p.lock().unwrap_or_else(|e| e.into_inner());
        let done = any_tensor!(dst_any, t => proc.convert_batch(&batch, t, &options)?);
        drop(proc);
        if !infos.is_null() {
            for (i, info) in done.iter().enumerate() {
                // SAFETY: checked above: entry i of `count`, with its struct_size set.
                let entry = unsafe { (infos as *mut u8).add(i * info_stride) }
                    as *mut pinframe_convert_info;
                // SAFETY: as above.
                unsafe {
                    write_sized(
                        entry,
                        &format!("infos[{i}]"),
                        pinframe_convert_info::from_info(info),
                    )?
                };
            }
        }
        Ok(())
    })
}

/// What the processor did so far, in `*stats` (whose `struct_size` the caller set).
///
/// Ownership: borrows `processor`; writes `*stats`.
///
/// # Safety
/// `processor` is a live handle; `stats` points to a `pinframe_processor_stats` with its
/// `struct_size` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_processor_get_stats(
    processor: *const pinframe_processor,
    stats: *mut pinframe_processor_stats,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { processor_arg(processor, "processor")? };
        let s = p.lock().unwrap_or_else(|e| e.into_inner()).stats();
        let out = pinframe_processor_stats {
            struct_size: size_of::<pinframe_processor_stats>(),
            imports: s.imports,
            cache_hits: s.cache_hits,
            uploads: s.uploads,
            readbacks: s.readbacks,
            cpu_fallbacks: s.cpu_fallbacks,
            frames: s.frames,
        };
        // SAFETY: the caller's contract.
        unsafe { write_sized(stats, "stats", out) }
    })
}

/// Frees a processor (its GL context and cached imports). NULL is a no-op.
///
/// Ownership: takes `processor`.
///
/// # Safety
/// `processor` is NULL or a live handle not used by another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pinframe_processor_free(
    processor: *mut pinframe_processor,
) -> pinframe_status {
    call(|| {
        // SAFETY: the caller's contract (a live processor handle, or NULL).
        drop(unsafe {
            take_handle::<_, Mutex<ImageProcessor>>(
                processor,
                PROCESSOR_MAGIC,
                "pinframe_processor",
                "processor",
            )?
        });
        Ok(())
    })
}
