//! The element's properties: the library's `ConvertOptions` (same names, same values as
//! the CLI), the backend, the output's element type and layout, and where buffers live.

use gst::glib;
use pinframe::tensor::DmaRoute;
use pinframe::{
    Backend, Colorimetry, ColorimetryChoice, ConvertOptions, Crop, DType, Fit, Flip, Gamma,
    Interpolation, Isp, Matrix, Normalize, PixelFormat, Quantize, Range, Rotation,
};

/// `backend`: which backend converts (`ImageProcessor::with_backend`).
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeBackend")]
pub enum BackendChoice {
    /// GL on a hardware GPU, else the CPU.
    #[default]
    #[enum_value(
        name = "Auto: GL on a hardware GPU, else the fused CPU kernels",
        nick = "auto"
    )]
    Auto,
    /// The CPU.
    #[enum_value(name = "CPU: the fused CPU kernels", nick = "cpu")]
    Cpu,
    /// GL, or fail.
    #[enum_value(
        name = "GL: OpenGL ES through EGL (fails when GL cannot start)",
        nick = "gl"
    )]
    Gl,
}

impl BackendChoice {
    pub(crate) fn backend(self) -> Backend {
        match self {
            BackendChoice::Auto => Backend::Auto,
            BackendChoice::Cpu => Backend::Cpu,
            BackendChoice::Gl => Backend::Gl,
        }
    }
}

/// `gamma`: the transfer function of a RAW (Bayer) conversion, after its matrix.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeGamma")]
pub enum GammaChoice {
    /// None: linear in the sensor's light.
    #[default]
    #[enum_value(name = "Linear: no transfer function", nick = "linear")]
    Linear,
    /// The sRGB curve.
    #[enum_value(
        name = "sRGB: the IEC 61966-2-1 curve models trained on photos expect",
        nick = "srgb"
    )]
    Srgb,
}

impl GammaChoice {
    pub(crate) fn gamma(self) -> Gamma {
        match self {
            GammaChoice::Linear => Gamma::Linear,
            GammaChoice::Srgb => Gamma::Srgb,
        }
    }
}

/// `fit`: how the source is fitted into the output size.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeFit")]
pub enum FitChoice {
    /// Each axis scaled on its own.
    #[default]
    #[enum_value(name = "Stretch: scale each axis to the output", nick = "stretch")]
    Stretch,
    /// Uniform scale, centred, padded with `pad`.
    #[enum_value(
        name = "Letterbox: scale uniformly, centre, pad with the pad colour",
        nick = "letterbox"
    )]
    Letterbox,
    /// Uniform scale covering the output, overflow cropped.
    #[enum_value(
        name = "Fill: scale uniformly to cover the output, crop the overflow",
        nick = "fill"
    )]
    Fill,
}

/// `rotation`: clockwise, after the crop and the flip.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeRotation")]
pub enum RotationChoice {
    /// None.
    #[default]
    #[enum_value(name = "0 degrees", nick = "0")]
    R0,
    /// 90 clockwise.
    #[enum_value(name = "90 degrees clockwise", nick = "90")]
    R90,
    /// 180.
    #[enum_value(name = "180 degrees", nick = "180")]
    R180,
    /// 270 clockwise.
    #[enum_value(name = "270 degrees clockwise", nick = "270")]
    R270,
}

/// `flip`: mirroring, after the crop and before the rotation.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeFlip")]
pub enum FlipChoice {
    /// None.
    #[default]
    #[enum_value(name = "No mirroring", nick = "none")]
    None,
    /// Left-right.
    #[enum_value(name = "Mirror left-right", nick = "h")]
    Horizontal,
    /// Top-bottom.
    #[enum_value(name = "Mirror top-bottom", nick = "v")]
    Vertical,
}

/// `interpolation`: the resampling filter.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeInterpolation")]
pub enum InterpolationChoice {
    /// Bilinear, pixel centres at +0.5.
    #[default]
    #[enum_value(
        name = "Bilinear (pixel centres at +0.5, edges clamped)",
        nick = "bilinear"
    )]
    Bilinear,
    /// Nearest neighbour.
    #[enum_value(name = "Nearest neighbour", nick = "nearest")]
    Nearest,
}

/// `matrix`: the YUV matrix (`auto` = the caps' colorimetry, else by frame height).
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeMatrix")]
pub enum MatrixChoice {
    /// From the caps, else BT.601 below 720 lines, BT.709 from 720.
    #[default]
    #[enum_value(
        name = "Auto: the caps' colorimetry, else by frame height",
        nick = "auto"
    )]
    Auto,
    /// BT.601.
    #[enum_value(name = "BT.601", nick = "bt601")]
    Bt601,
    /// BT.709.
    #[enum_value(name = "BT.709", nick = "bt709")]
    Bt709,
    /// BT.2020.
    #[enum_value(name = "BT.2020", nick = "bt2020")]
    Bt2020,
}

/// `range`: the YUV quantisation range (`auto` = the caps', else limited).
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeRange")]
pub enum RangeChoice {
    /// From the caps, else limited.
    #[default]
    #[enum_value(name = "Auto: the caps' colorimetry, else limited", nick = "auto")]
    Auto,
    /// 16..235.
    #[enum_value(name = "Limited (16-235)", nick = "limited")]
    Limited,
    /// 0..255.
    #[enum_value(name = "Full (0-255)", nick = "full")]
    Full,
}

/// `dtype`: the output's element type (`auto` = from the caps).
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeDtype")]
pub enum DtypeChoice {
    /// From the output caps (video: u8; tensors: their types field).
    #[default]
    #[enum_value(name = "Auto: from the output caps", nick = "auto")]
    Auto,
    /// u8.
    #[enum_value(name = "u8 (uint8)", nick = "u8")]
    U8,
    /// i8 = u8 XOR 0x80.
    #[enum_value(name = "i8 (int8, u8 XOR 0x80 unless quantised)", nick = "i8")]
    I8,
    /// f16, normalised.
    #[enum_value(name = "f16 (float16, (v/255 - mean)/std)", nick = "f16")]
    F16,
    /// f32, normalised.
    #[enum_value(name = "f32 (float32, (v/255 - mean)/std)", nick = "f32")]
    F32,
}

impl DtypeChoice {
    pub(crate) fn dtype(self) -> Option<DType> {
        match self {
            DtypeChoice::Auto => None,
            DtypeChoice::U8 => Some(DType::U8),
            DtypeChoice::I8 => Some(DType::I8),
            DtypeChoice::F16 => Some(DType::F16),
            DtypeChoice::F32 => Some(DType::F32),
        }
    }
}

/// `layout`: the output's pixel layout, the library's destination format names.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, Default, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstPinframeLayout")]
pub enum LayoutChoice {
    /// Video: the caps' format; tensors: RGB order, C:W:H packed or W:H:3 planar.
    #[default]
    #[enum_value(
        name = "Auto: video from the caps format; tensors RGB, packed (C:W:H) or planar (W:H:3) by their dimensions",
        nick = "auto"
    )]
    Auto,
    /// Packed R, G, B (HWC).
    #[enum_value(name = "rgb: packed R,G,B (HWC)", nick = "rgb")]
    Rgb,
    /// Packed B, G, R (HWC).
    #[enum_value(name = "bgr: packed B,G,R (HWC)", nick = "bgr")]
    Bgr,
    /// Packed R, G, B, A.
    #[enum_value(name = "rgba: packed R,G,B,A", nick = "rgba")]
    Rgba,
    /// Packed B, G, R, A.
    #[enum_value(name = "bgra: packed B,G,R,A", nick = "bgra")]
    Bgra,
    /// One luma channel.
    #[enum_value(name = "grey: one luma channel", nick = "grey")]
    Grey,
    /// Planes R, G, B (CHW).
    #[enum_value(name = "planar-rgb: planes R, G, B (CHW)", nick = "planar-rgb")]
    PlanarRgb,
    /// Planes B, G, R (CHW).
    #[enum_value(name = "planar-bgr: planes B, G, R (CHW)", nick = "planar-bgr")]
    PlanarBgr,
}

impl LayoutChoice {
    pub(crate) fn format(self) -> Option<PixelFormat> {
        Some(match self {
            LayoutChoice::Auto => return None,
            LayoutChoice::Rgb => PixelFormat::Rgb,
            LayoutChoice::Bgr => PixelFormat::Bgr,
            LayoutChoice::Rgba => PixelFormat::Rgba,
            LayoutChoice::Bgra => PixelFormat::Bgra,
            LayoutChoice::Grey => PixelFormat::Grey,
            LayoutChoice::PlanarRgb => PixelFormat::PlanarRgb,
            LayoutChoice::PlanarBgr => PixelFormat::PlanarBgr,
        })
    }
}

/// Where pool buffers are allocated (`dma-route`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) enum MemoryChoice {
    /// A dma-buf through the library's first working route, else a memfd.
    #[default]
    Auto,
    /// A dma-buf through this route only (an error when it fails).
    Dma(DmaRoute),
    /// Never a dma-buf: memfd system memory.
    System,
}

impl MemoryChoice {
    /// Parses `auto`, `system`, `udmabuf`, `gbm`, `gbm:/dev/dri/cardN`, `heap:NAME`.
    pub(crate) fn parse(s: &str) -> Result<MemoryChoice, String> {
        let s = s.trim();
        Ok(match s {
            "" | "auto" => MemoryChoice::Auto,
            "system" | "none" => MemoryChoice::System,
            "udmabuf" => MemoryChoice::Dma(DmaRoute::Udmabuf),
            "gbm" => MemoryChoice::Dma(DmaRoute::Gbm(String::new())),
            _ => match s.split_once(':') {
                Some(("gbm", node)) if !node.is_empty() => {
                    MemoryChoice::Dma(DmaRoute::Gbm(node.to_string()))
                }
                Some(("heap", name)) if !name.is_empty() => {
                    MemoryChoice::Dma(DmaRoute::Heap(name.to_string()))
                }
                _ => {
                    return Err(format!(
                        "dma-route {s:?}: expected auto, system, udmabuf, gbm, gbm:/dev/dri/cardN or heap:NAME"
                    ));
                }
            },
        })
    }

    /// The property's text for this choice.
    pub(crate) fn to_text(&self) -> String {
        match self {
            MemoryChoice::Auto => "auto".into(),
            MemoryChoice::System => "system".into(),
            MemoryChoice::Dma(DmaRoute::Udmabuf) => "udmabuf".into(),
            MemoryChoice::Dma(DmaRoute::Gbm(n)) if n.is_empty() => "gbm".into(),
            MemoryChoice::Dma(DmaRoute::Gbm(n)) => format!("gbm:{n}"),
            MemoryChoice::Dma(DmaRoute::Heap(n)) => format!("heap:{n}"),
            MemoryChoice::Dma(other) => format!("{other:?}"),
        }
    }
}

/// Every property of the element.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Settings {
    pub(crate) backend: BackendChoice,
    pub(crate) fit: FitChoice,
    pub(crate) pad: [u8; 3],
    pub(crate) crop: Option<Crop>,
    pub(crate) rotation: RotationChoice,
    pub(crate) flip: FlipChoice,
    pub(crate) interpolation: InterpolationChoice,
    pub(crate) matrix: MatrixChoice,
    pub(crate) range: RangeChoice,
    pub(crate) mean: [f32; 3],
    pub(crate) std: [f32; 3],
    pub(crate) quantize: Option<Quantize>,
    pub(crate) black_level: [u16; 4],
    pub(crate) wb_gains: [f32; 3],
    pub(crate) ccm: [[f32; 3]; 3],
    pub(crate) gamma: GammaChoice,
    pub(crate) dtype: DtypeChoice,
    pub(crate) layout: LayoutChoice,
    pub(crate) memory: MemoryChoice,
    pub(crate) pool_size: u32,
    /// `rois`: convert the buffer's `GstVideoRegionOfInterestMeta`s, not the frame.
    pub(crate) rois: bool,
    /// `roi-type`: only ROIs of this type (empty: every type).
    pub(crate) roi_type: String,
    /// `batch-size`: slices of each output tensor.
    pub(crate) batch_size: u32,
    /// `batch-timeout`: microseconds a partial batch waits for more frames (-1: forever).
    pub(crate) batch_timeout_us: i64,
}

/// Most slices a batch may have (`batch-size`).
pub(crate) const MAX_BATCH_SIZE: u32 = 1024;

/// What each output buffer holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BatchMode {
    /// One converted frame (batch 1): the element's original mode.
    Single,
    /// Up to `slices` regions of interest of one frame, one slice each.
    Rois {
        /// Slices of each output tensor.
        slices: usize,
        /// Only ROIs of this type (`None`: all).
        roi_type: Option<String>,
    },
    /// `slices` consecutive frames, one slice each.
    Frames {
        /// Slices of each output tensor.
        slices: usize,
    },
}

impl BatchMode {
    /// Slices of each output buffer (1 for a single frame).
    pub(crate) fn slices(&self) -> usize {
        match self {
            BatchMode::Single => 1,
            BatchMode::Rois { slices, .. } | BatchMode::Frames { slices } => *slices,
        }
    }

    /// Whether each output is a batch tensor (its caps must be `other/tensors`).
    pub(crate) fn is_batch(&self) -> bool {
        !matches!(self, BatchMode::Single)
    }
}

/// Default number of output buffers.
pub(crate) const DEFAULT_POOL_SIZE: u32 = 4;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            backend: BackendChoice::Auto,
            fit: FitChoice::Stretch,
            pad: [114; 3],
            crop: None,
            rotation: RotationChoice::R0,
            flip: FlipChoice::None,
            interpolation: InterpolationChoice::Bilinear,
            matrix: MatrixChoice::Auto,
            range: RangeChoice::Auto,
            mean: Normalize::IDENTITY.mean,
            std: Normalize::IDENTITY.std,
            quantize: None,
            black_level: Isp::IDENTITY.black_level,
            wb_gains: Isp::IDENTITY.gains,
            ccm: Isp::IDENTITY.ccm,
            gamma: GammaChoice::Linear,
            dtype: DtypeChoice::Auto,
            layout: LayoutChoice::Auto,
            memory: MemoryChoice::Auto,
            pool_size: DEFAULT_POOL_SIZE,
            rois: false,
            roi_type: String::new(),
            batch_size: 1,
            batch_timeout_us: -1,
        }
    }
}

impl Settings {
    /// The batch mode the properties ask for, or why they do not fit together.
    pub(crate) fn batch_mode(&self) -> Result<BatchMode, String> {
        let roi_type = self.roi_type.trim();
        if !self.rois && !roi_type.is_empty() {
            return Err(format!(
                "roi-type={roi_type:?} needs rois=true (it picks which regions of interest to convert)"
            ));
        }
        if self.rois && self.crop.is_some() {
            return Err(
                "crop and rois=true do not go together: with rois=true each region of interest is the crop"
                    .into(),
            );
        }
        if !(1..=MAX_BATCH_SIZE).contains(&self.batch_size) {
            return Err(format!(
                "batch-size={} is outside 1..={MAX_BATCH_SIZE}",
                self.batch_size
            ));
        }
        let slices = self.batch_size as usize;
        let mode = if self.rois {
            BatchMode::Rois {
                slices,
                roi_type: (!roi_type.is_empty()).then(|| roi_type.to_string()),
            }
        } else if slices > 1 {
            BatchMode::Frames { slices }
        } else {
            BatchMode::Single
        };
        if mode.is_batch() && matches!(self.memory, MemoryChoice::Dma(_)) {
            return Err(format!(
                "dma-route={} with a batch (rois=true or batch-size > 1): batch tensors are \
                 allocated as a dma-buf through the library's default route (dma-route=auto) \
                 or as memfds (dma-route=system)",
                self.memory.to_text()
            ));
        }
        Ok(mode)
    }

    /// How long a partial batch waits for more frames (`None`: until it is full, EOS or
    /// new caps).
    pub(crate) fn batch_timeout(&self) -> Option<std::time::Duration> {
        u64::try_from(self.batch_timeout_us)
            .ok()
            .map(std::time::Duration::from_micros)
    }

    /// The conversion options for a source of `height` lines whose caps say `known`.
    pub(crate) fn options(&self, known: Option<Colorimetry>, height: u32) -> ConvertOptions {
        let matrix = match self.matrix {
            MatrixChoice::Auto => None,
            MatrixChoice::Bt601 => Some(Matrix::Bt601),
            MatrixChoice::Bt709 => Some(Matrix::Bt709),
            MatrixChoice::Bt2020 => Some(Matrix::Bt2020),
        };
        let range = match self.range {
            RangeChoice::Auto => None,
            RangeChoice::Limited => Some(Range::Limited),
            RangeChoice::Full => Some(Range::Full),
        };
        let fallback = known.unwrap_or(Colorimetry::default_for_height(height));
        // Options the element has no property for yet keep the library's defaults.
        #[allow(clippy::needless_update)]
        ConvertOptions {
            crop: self.crop,
            flip: match self.flip {
                FlipChoice::None => Flip::None,
                FlipChoice::Horizontal => Flip::Horizontal,
                FlipChoice::Vertical => Flip::Vertical,
            },
            rotation: match self.rotation {
                RotationChoice::R0 => Rotation::R0,
                RotationChoice::R90 => Rotation::R90,
                RotationChoice::R180 => Rotation::R180,
                RotationChoice::R270 => Rotation::R270,
            },
            fit: match self.fit {
                FitChoice::Stretch => Fit::Stretch,
                FitChoice::Letterbox => Fit::Letterbox { pad: self.pad },
                FitChoice::Fill => Fit::Fill,
            },
            interpolation: match self.interpolation {
                InterpolationChoice::Bilinear => Interpolation::Bilinear,
                InterpolationChoice::Nearest => Interpolation::Nearest,
            },
            colorimetry: ColorimetryChoice::from_parts(matrix, range, fallback),
            normalize: Normalize {
                mean: self.mean,
                std: self.std,
            },
            quantize: self.quantize,
            isp: Isp {
                black_level: self.black_level,
                gains: self.wb_gains,
                ccm: self.ccm,
                gamma: self.gamma.gamma(),
            },
            ..Default::default()
        }
    }
}

/// Parses `N` comma-separated values (the CLI's `R,G,B` / `X,Y,W,H` spelling).
pub(crate) fn parse_list<const N: usize, T: std::str::FromStr>(
    s: &str,
    what: &str,
) -> Result<[T; N], String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != N {
        return Err(format!("{what} {s:?} needs {N} comma-separated values"));
    }
    let mut out = Vec::with_capacity(N);
    for p in parts {
        out.push(
            p.parse::<T>()
                .map_err(|_| format!("{what} {s:?}: {p:?} is not a valid number"))?,
        );
    }
    out.try_into()
        .map_err(|_| format!("{what} {s:?} needs {N} values"))
}

/// `mean`/`std` text.
pub(crate) fn triple_text(v: [f32; 3]) -> String {
    format!("{},{},{}", v[0], v[1], v[2])
}

/// Parses a crop (`X,Y,W,H`, or empty for none).
pub(crate) fn parse_crop(s: &str) -> Result<Option<Crop>, String> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    let [x, y, w, h] = parse_list::<4, u32>(s, "crop (X,Y,W,H)")?;
    if w == 0 || h == 0 {
        return Err(format!("crop {s:?} is empty"));
    }
    Ok(Some(Crop::new(x, y, w, h)))
}

/// Parses `std`: three finite, non-zero values.
pub(crate) fn parse_std(s: &str) -> Result<[f32; 3], String> {
    let v = parse_list::<3, f32>(s, "std (R,G,B)")?;
    if v.iter().any(|x| !x.is_finite() || *x == 0.0) {
        return Err(format!(
            "std {s:?}: every value must be finite and non-zero"
        ));
    }
    Ok(v)
}

/// Parses `quantize`: `SCALE,ZERO_POINT` (per tensor, as the CLI's `--quantize`), or empty
/// for none.
pub(crate) fn parse_quantize(s: &str) -> Result<Option<Quantize>, String> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    s.parse::<Quantize>().map(Some).map_err(|e| e.to_string())
}

/// `quantize` text.
pub(crate) fn quantize_text(q: Option<Quantize>) -> String {
    match q {
        None => String::new(),
        Some(q)
            if q.scale.iter().all(|&s| s == q.scale[0])
                && q.zero_point.iter().all(|&z| z == q.zero_point[0]) =>
        {
            format!("{},{}", q.scale[0], q.zero_point[0])
        }
        Some(q) => format!("{:?},{:?}", q.scale, q.zero_point),
    }
}

/// Parses `black-level`: one code for every CFA site, or four (R,Gr,Gb,B). Whether it is
/// below the white level depends on the source's bit depth: the caps' conversion checks.
pub(crate) fn parse_black_level(s: &str) -> Result<[u16; 4], String> {
    if !s.contains(',') {
        return s
            .trim()
            .parse::<u16>()
            .map(|v| [v; 4])
            .map_err(|_| format!("black-level {s:?} is not a code 0..=65535 (or R,Gr,Gb,B)"));
    }
    parse_list::<4, u16>(s, "black-level (one code, or R,Gr,Gb,B)")
}

/// `black-level` text: one value when the four are equal.
pub(crate) fn black_level_text(b: [u16; 4]) -> String {
    if b.iter().all(|&v| v == b[0]) {
        b[0].to_string()
    } else {
        format!("{},{},{},{}", b[0], b[1], b[2], b[3])
    }
}

/// Parses `wb-gains`: three finite, positive values (R,G,B).
pub(crate) fn parse_wb_gains(s: &str) -> Result<[f32; 3], String> {
    let v = parse_list::<3, f32>(s, "wb-gains (R,G,B)")?;
    if v.iter().any(|x| !x.is_finite() || *x <= 0.0) {
        return Err(format!(
            "wb-gains {s:?}: every gain must be finite and positive"
        ));
    }
    Ok(v)
}

/// Parses `ccm`: nine finite values, row by row (rows are output R, G, B).
pub(crate) fn parse_ccm(s: &str) -> Result<[[f32; 3]; 3], String> {
    let v = parse_list::<9, f32>(s, "ccm (9 values, row by row)")?;
    if v.iter().any(|x| !x.is_finite()) {
        return Err(format!("ccm {s:?}: every entry must be finite"));
    }
    Ok([[v[0], v[1], v[2]], [v[3], v[4], v[5]], [v[6], v[7], v[8]]])
}

/// `ccm` text, row by row.
pub(crate) fn ccm_text(m: [[f32; 3]; 3]) -> String {
    m.iter()
        .flatten()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Parses `mean`: three finite values.
pub(crate) fn parse_mean(s: &str) -> Result<[f32; 3], String> {
    let v = parse_list::<3, f32>(s, "mean (R,G,B)")?;
    if v.iter().any(|x| !x.is_finite()) {
        return Err(format!("mean {s:?}: every value must be finite"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_library_defaults() {
        let o = Settings::default().options(None, 480);
        assert_eq!(o, ConvertOptions::default());
    }

    #[test]
    fn options_follow_the_properties() {
        let s = Settings {
            fit: FitChoice::Letterbox,
            pad: [1, 2, 3],
            crop: Some(Crop::new(4, 5, 6, 7)),
            rotation: RotationChoice::R270,
            flip: FlipChoice::Vertical,
            interpolation: InterpolationChoice::Nearest,
            matrix: MatrixChoice::Bt2020,
            mean: [0.5; 3],
            std: [0.25; 3],
            ..Default::default()
        };
        let o = s.options(Some(Colorimetry::new(Matrix::Bt601, Range::Full)), 480);
        assert_eq!(o.fit, Fit::Letterbox { pad: [1, 2, 3] });
        assert_eq!(o.crop, Some(Crop::new(4, 5, 6, 7)));
        assert_eq!(o.rotation, Rotation::R270);
        assert_eq!(o.flip, Flip::Vertical);
        assert_eq!(o.interpolation, Interpolation::Nearest);
        // The range the property leaves open comes from the caps.
        assert_eq!(
            o.colorimetry,
            ColorimetryChoice::Fixed(Colorimetry::new(Matrix::Bt2020, Range::Full))
        );
        assert_eq!(o.normalize.mean, [0.5; 3]);
    }

    #[test]
    fn isp_properties_reach_the_options() {
        let s = Settings {
            black_level: [64, 65, 66, 67],
            wb_gains: [1.5, 1.0, 2.0],
            ccm: [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]],
            gamma: GammaChoice::Srgb,
            ..Default::default()
        };
        let o = s.options(None, 480);
        assert_eq!(
            o.isp,
            Isp {
                black_level: [64, 65, 66, 67],
                gains: [1.5, 1.0, 2.0],
                ccm: [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]],
                gamma: Gamma::Srgb,
            }
        );
        assert_eq!(parse_black_level("64").unwrap(), [64; 4]);
        assert_eq!(parse_black_level("1, 2,3,4").unwrap(), [1, 2, 3, 4]);
        assert!(parse_black_level("-1").is_err());
        assert!(
            parse_black_level("1,2")
                .unwrap_err()
                .contains("4 comma-separated")
        );
        assert_eq!(black_level_text([7; 4]), "7");
        assert_eq!(black_level_text([1, 2, 3, 4]), "1,2,3,4");
        assert!(parse_wb_gains("1,0,1").unwrap_err().contains("positive"));
        assert_eq!(parse_wb_gains("1.5,1,2").unwrap(), [1.5, 1.0, 2.0]);
        let m = parse_ccm("1,0,0,0,1,0,0,0,1").unwrap();
        assert_eq!(m, Isp::IDENTITY.ccm);
        assert_eq!(ccm_text(m), "1,0,0,0,1,0,0,0,1");
        assert!(
            parse_ccm("1,0,0")
                .unwrap_err()
                .contains("9 comma-separated")
        );
        assert!(
            parse_ccm("1,0,0,0,inf,0,0,0,1")
                .unwrap_err()
                .contains("finite")
        );
    }

    #[test]
    fn text_properties_parse_or_say_why() {
        assert_eq!(parse_crop("").unwrap(), None);
        assert_eq!(parse_crop("1, 2,3,4").unwrap(), Some(Crop::new(1, 2, 3, 4)));
        assert!(parse_crop("1,2,0,4").unwrap_err().contains("empty"));
        assert!(parse_std("1,0,1").unwrap_err().contains("non-zero"));
        assert!(parse_mean("1,2").unwrap_err().contains("3 comma-separated"));
        assert_eq!(parse_list::<3, u8>("114,114,114", "pad").unwrap(), [114; 3]);
        assert!(parse_list::<3, u8>("256,0,0", "pad").is_err());
        let q = parse_quantize("0.0078125,128").unwrap();
        assert_eq!(q, Some(Quantize::per_tensor(0.0078125, 128)));
        assert_eq!(quantize_text(q), "0.0078125,128");
        assert_eq!(parse_quantize("").unwrap(), None);
        assert!(parse_quantize("0.5").is_err());
    }

    #[test]
    fn batch_properties_make_a_mode_or_say_why_not() {
        let s = Settings::default();
        assert_eq!(s.batch_mode().unwrap(), BatchMode::Single);
        assert_eq!(s.batch_timeout(), None);
        let s = Settings {
            batch_size: 4,
            batch_timeout_us: 200_000,
            ..Default::default()
        };
        assert_eq!(s.batch_mode().unwrap(), BatchMode::Frames { slices: 4 });
        assert_eq!(
            s.batch_timeout(),
            Some(std::time::Duration::from_millis(200))
        );
        let s = Settings {
            rois: true,
            roi_type: " face ".into(),
            batch_size: 8,
            ..Default::default()
        };
        assert_eq!(
            s.batch_mode().unwrap(),
            BatchMode::Rois {
                slices: 8,
                roi_type: Some("face".into())
            }
        );
        let e = Settings {
            roi_type: "face".into(),
            ..Default::default()
        }
        .batch_mode()
        .unwrap_err();
        assert!(e.contains("needs rois=true"), "{e}");
        let e = Settings {
            rois: true,
            crop: Some(Crop::new(0, 0, 8, 8)),
            ..Default::default()
        }
        .batch_mode()
        .unwrap_err();
        assert!(e.contains("crop and rois=true"), "{e}");
        let e = Settings {
            batch_size: 2,
            memory: MemoryChoice::Dma(DmaRoute::Udmabuf),
            ..Default::default()
        }
        .batch_mode()
        .unwrap_err();
        assert!(e.contains("dma-route=udmabuf"), "{e}");
    }

    #[test]
    fn memory_choices_round_trip() {
        for s in [
            "auto",
            "system",
            "udmabuf",
            "gbm",
            "gbm:/dev/dri/card0",
            "heap:system",
        ] {
            assert_eq!(MemoryChoice::parse(s).unwrap().to_text(), s);
        }
        assert!(MemoryChoice::parse("heap:").is_err());
        assert!(
            MemoryChoice::parse("vram")
                .unwrap_err()
                .contains("expected")
        );
    }
}
