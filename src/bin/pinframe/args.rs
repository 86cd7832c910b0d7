//! Option parsers and the conversion options every subcommand shares.

use clap::Args;

use pinframe::{
    Backend, ColorimetryChoice, ConvertOptions, Crop, DType, Error, Fit, Flip, Gamma,
    Interpolation, Isp, Matrix, Normalize, Quantize, Range, Result, Rotation,
};

/// A `WxH` size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Size(pub(crate) u32, pub(crate) u32);

pub(crate) fn parse_size(s: &str) -> std::result::Result<Size, String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("size {s:?} is not WxH (e.g. 640x480)"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<u32>()
            .map_err(|_| format!("size {s:?} is not WxH (e.g. 640x480)"))
    };
    Ok(Size(num(w)?, num(h)?))
}

pub(crate) fn parse_list<const N: usize, T: std::str::FromStr>(
    s: &str,
    what: &str,
) -> std::result::Result<[T; N], String> {
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

pub(crate) fn parse_pad(s: &str) -> std::result::Result<[u8; 3], String> {
    parse_list::<3, u8>(s, "pad (R,G,B in 0..=255)")
}
pub(crate) fn parse_crop(s: &str) -> std::result::Result<Crop, String> {
    let [x, y, w, h] = parse_list::<4, u32>(s, "crop (X,Y,W,H)")?;
    Ok(Crop::new(x, y, w, h))
}
pub(crate) fn parse_triple(s: &str) -> std::result::Result<[f32; 3], String> {
    parse_list::<3, f32>(s, "R,G,B")
}
/// Parses any of the library's option types through its `FromStr` (whose errors already
/// say what is accepted).
pub(crate) fn parse_named<T: std::str::FromStr<Err = Error>>(
    s: &str,
) -> std::result::Result<T, String> {
    s.parse().map_err(|e: Error| e.to_string())
}
pub(crate) fn parse_rotation(s: &str) -> std::result::Result<Rotation, String> {
    let degrees = s
        .parse::<u32>()
        .map_err(|_| format!("rotation {s:?} is not 0, 90, 180 or 270"))?;
    Rotation::from_degrees(degrees).map_err(|e| e.to_string())
}
/// One black level for every CFA site, or four (R, Gr, Gb, B).
pub(crate) fn parse_black_level(s: &str) -> std::result::Result<[u16; 4], String> {
    if !s.contains(',') {
        let v = s
            .trim()
            .parse::<u16>()
            .map_err(|_| format!("black level {s:?} is not a number (or R,Gr,Gb,B)"))?;
        return Ok([v; 4]);
    }
    parse_list::<4, u16>(s, "black level (one value, or R,Gr,Gb,B)")
}
/// A 3x3 matrix, nine values row by row.
pub(crate) fn parse_ccm(s: &str) -> std::result::Result<[[f32; 3]; 3], String> {
    let v = parse_list::<9, f32>(s, "colour matrix (9 values, row by row)")?;
    Ok([[v[0], v[1], v[2]], [v[3], v[4], v[5]], [v[6], v[7], v[8]]])
}
pub(crate) fn parse_interp(s: &str) -> std::result::Result<Interpolation, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

/// Geometry, colour and normalisation options shared by `convert` and `bench`.
#[derive(Args)]
pub(crate) struct ProcessArgs {
    /// Element type of the output.
    #[arg(long, default_value = "u8", value_parser = parse_named::<DType>)]
    pub(crate) dtype: DType,
    /// How the source is fitted into the output size.
    #[arg(long, default_value = "stretch", value_parser = ["stretch", "letterbox", "fill"])]
    pub(crate) fit: String,
    /// Letterbox padding colour.
    #[arg(long, value_name = "R,G,B", default_value = "114,114,114", value_parser = parse_pad)]
    pub(crate) pad: [u8; 3],
    /// Source rectangle to convert.
    #[arg(long, value_name = "X,Y,W,H", value_parser = parse_crop)]
    pub(crate) crop: Option<Crop>,
    /// Clockwise rotation in degrees.
    #[arg(long, value_name = "0|90|180|270", default_value = "0", value_parser = parse_rotation)]
    pub(crate) rotate: Rotation,
    /// Mirroring (before the rotation).
    #[arg(long, default_value = "none", value_parser = parse_named::<Flip>)]
    pub(crate) flip: Flip,
    /// Resampling filter.
    #[arg(long, default_value = "bilinear", value_parser = parse_interp)]
    pub(crate) interp: Interpolation,
    /// YUV matrix (default: from the frame size).
    #[arg(long, value_parser = parse_named::<Matrix>)]
    pub(crate) matrix: Option<Matrix>,
    /// YUV range (default: limited).
    #[arg(long, value_parser = parse_named::<Range>)]
    pub(crate) range: Option<Range>,
    /// Per-channel mean for float outputs.
    #[arg(long, value_name = "R,G,B", value_parser = parse_triple)]
    pub(crate) mean: Option<[f32; 3]>,
    /// Per-channel std for float outputs.
    #[arg(long, value_name = "R,G,B", value_parser = parse_triple)]
    pub(crate) std: Option<[f32; 3]>,
    /// Quantise u8/i8 outputs, TFLite style: q = clamp(round(x / SCALE) + ZERO_POINT),
    /// x the normalised value (--mean/--std).
    #[arg(long, value_name = "SCALE,ZERO_POINT", value_parser = parse_named::<Quantize>)]
    pub(crate) quantize: Option<Quantize>,
    /// Bayer sources: black level in the source's units, one for every site or R,Gr,Gb,B.
    #[arg(long, value_name = "N|R,GR,GB,B", default_value = "0", value_parser = parse_black_level)]
    pub(crate) black_level: [u16; 4],
    /// Bayer sources: white-balance gains.
    #[arg(long, value_name = "R,G,B", default_value = "1,1,1", value_parser = parse_triple)]
    pub(crate) wb_gains: [f32; 3],
    /// Bayer sources: colour-correction matrix, nine values row by row.
    #[arg(long, value_name = "M00,...,M22", value_parser = parse_ccm)]
    pub(crate) ccm: Option<[[f32; 3]; 3]>,
    /// Bayer sources: output transfer function.
    #[arg(long, default_value = "linear", value_parser = parse_named::<Gamma>)]
    pub(crate) gamma: Gamma,
    /// Backend to run on.
    #[arg(long, default_value = "auto", value_parser = parse_named::<Backend>)]
    pub(crate) backend: Backend,
}

impl ProcessArgs {
    pub(crate) fn options(&self, src_height: u32) -> Result<ConvertOptions> {
        let fit = match self.fit.as_str() {
            "letterbox" => Fit::Letterbox { pad: self.pad },
            "fill" => Fit::Fill,
            _ => Fit::Stretch,
        };
        Ok(ConvertOptions {
            crop: self.crop,
            flip: self.flip,
            rotation: self.rotate,
            fit,
            interpolation: self.interp,
            colorimetry: ColorimetryChoice::from_parts(
                self.matrix,
                self.range,
                pinframe::Colorimetry::default_for_height(src_height),
            ),
            normalize: Normalize {
                mean: self.mean.unwrap_or([0.0; 3]),
                std: self.std.unwrap_or([1.0; 3]),
            },
            quantize: self.quantize,
            isp: Isp {
                black_level: self.black_level,
                gains: self.wb_gains,
                ccm: self.ccm.unwrap_or(Isp::IDENTITY.ccm),
                gamma: self.gamma,
            },
        })
    }
}
