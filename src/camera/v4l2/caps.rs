//! Capabilities: opening a V4L2 node, what kind of device it is, and the formats it offers.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use v4l::v4l_sys as sys;

use super::ioctl;
use crate::image::{PixelFormat, fourcc_to_string};
use crate::{Error, Result};

/// One format a V4L2 device offers.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceFormat {
    /// The V4L2 fourcc.
    pub fourcc: u32,
    /// The driver's description.
    pub description: String,
    /// The pinframe format it maps to, if pinframe can convert it.
    pub format: Option<PixelFormat>,
    /// True for the one-buffer-per-plane variants (`NM12`, `YM12`, ...).
    pub multi_buffer: bool,
}

impl DeviceFormat {
    pub(super) fn describe(&self) -> String {
        match self.format {
            Some(f) => format!("{} ({})", f, fourcc_to_string(self.fourcc)),
            None => format!("{} ({})", fourcc_to_string(self.fourcc), self.description),
        }
    }
}

/// The formats a V4L2 capture device offers, in the driver's order.
pub fn list_formats(path: impl AsRef<Path>) -> Result<Vec<DeviceFormat>> {
    let path = path.as_ref();
    let fd = open_device(path)?;
    let caps = Caps::query(fd.as_fd(), path)?;
    enumerate(fd.as_fd(), caps.buf_type, path)
}

pub(super) fn open_device(path: &Path) -> Result<OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    // Rust opens files close-on-exec; non-blocking so that DQBUF never blocks.
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| Error::io(format!("opening camera {}", path.display()), e))
}

pub(super) struct Caps {
    pub buf_type: u32,
    pub name: String,
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl Caps {
    pub(super) fn query(fd: BorrowedFd<'_>, path: &Path) -> Result<Caps> {
        let cap = ioctl::querycap(fd).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOTTY) {
                Error::InvalidArgument(format!("{} is not a V4L2 device", path.display()))
            } else {
                Error::io(format!("VIDIOC_QUERYCAP on {}", path.display()), e)
            }
        })?;
        let caps = if cap.capabilities & sys::V4L2_CAP_DEVICE_CAPS != 0 {
            cap.device_caps
        } else {
            cap.capabilities
        };
        let buf_type = if caps & sys::V4L2_CAP_VIDEO_CAPTURE != 0 {
            sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE
        } else if caps & sys::V4L2_CAP_VIDEO_CAPTURE_MPLANE != 0 {
            sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        } else {
            return Err(Error::Unsupported(format!(
                "{} ({}) is not a video capture device (device caps {caps:#x})",
                path.display(),
                c_string(&cap.card)
            )));
        };
        if caps & sys::V4L2_CAP_STREAMING == 0 {
            return Err(Error::Unsupported(format!(
                "{} ({}) does not support streaming I/O",
                path.display(),
                c_string(&cap.card)
            )));
        }
        Ok(Caps {
            buf_type,
            name: format!("{} ({})", c_string(&cap.card), c_string(&cap.driver)),
        })
    }
}

pub(super) fn enumerate(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    path: &Path,
) -> Result<Vec<DeviceFormat>> {
    let mut out = Vec::new();
    for index in 0..1024 {
        let Some(desc) = ioctl::enum_fmt(fd, buf_type, index)
            .map_err(|e| Error::io(format!("VIDIOC_ENUM_FMT on {}", path.display()), e))?
        else {
            break;
        };
        let mapped = if desc.flags & sys::V4L2_FMT_FLAG_COMPRESSED != 0 {
            None
        } else {
            PixelFormat::from_v4l2_fourcc(desc.pixelformat)
        };
        // One buffer per plane needs the multi-planar API.
        let mapped = mapped.filter(|&(_, multi)| {
            !multi || buf_type == sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE_MPLANE
        });
        out.push(DeviceFormat {
            fourcc: desc.pixelformat,
            description: c_string(&desc.description),
            format: mapped.map(|m| m.0),
            multi_buffer: mapped.is_some_and(|m| m.1),
        });
    }
    Ok(out)
}

pub(super) fn supported_list(formats: &[DeviceFormat]) -> String {
    let ok: Vec<String> = formats
        .iter()
        .filter(|f| f.format.is_some())
        .map(DeviceFormat::describe)
        .collect();
    let other: Vec<String> = formats
        .iter()
        .filter(|f| f.format.is_none())
        .map(DeviceFormat::describe)
        .collect();
    let mut s = if ok.is_empty() {
        "none of its formats can be converted by pinframe".to_string()
    } else {
        format!(
            "formats it offers that pinframe can convert: {}",
            ok.join(", ")
        )
    };
    if !other.is_empty() {
        s.push_str(&format!("; other formats it offers: {}", other.join(", ")));
    }
    s
}
