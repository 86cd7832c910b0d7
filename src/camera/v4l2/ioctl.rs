//! The V4L2 ioctls pinframe issues, as small safe functions over the raw structures of the
//! `v4l` crate (`v4l::v4l_sys`, bindgen's copy of `linux/videodev2.h`). The safe API of
//! `v4l` has no DMABUF queueing, no `VIDIOC_EXPBUF`, no selection API and no multi-planar
//! formats, which is why these exist. Every request number is computed by nix's ioctl
//! macros from the header's `_IOR`/`_IOW`/`_IOWR` triple (direction, `'V'`, number) and the
//! argument's size, never written out by hand.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use v4l::v4l_sys::{
    v4l2_buffer, v4l2_capability, v4l2_exportbuffer, v4l2_fmtdesc, v4l2_format, v4l2_plane,
    v4l2_requestbuffers, v4l2_selection, v4l2_streamparm,
};

/// Most planes a V4L2 buffer has (`VIDEO_MAX_PLANES`).
pub(crate) const MAX_PLANES: usize = v4l::v4l_sys::VIDEO_MAX_PLANES as usize;

// The requests, as `linux/videodev2.h` defines them.
nix::ioctl_read!(
    /// `VIDIOC_QUERYCAP`: `_IOR('V', 0, struct v4l2_capability)`.
    vidioc_querycap, b'V', 0, v4l2_capability
);
nix::ioctl_readwrite!(
    /// `VIDIOC_ENUM_FMT`: `_IOWR('V', 2, struct v4l2_fmtdesc)`.
    vidioc_enum_fmt, b'V', 2, v4l2_fmtdesc
);
nix::ioctl_readwrite!(
    /// `VIDIOC_G_FMT`: `_IOWR('V', 4, struct v4l2_format)`.
    vidioc_g_fmt, b'V', 4, v4l2_format
);
nix::ioctl_readwrite!(
    /// `VIDIOC_S_FMT`: `_IOWR('V', 5, struct v4l2_format)`.
    vidioc_s_fmt, b'V', 5, v4l2_format
);
nix::ioctl_readwrite!(
    /// `VIDIOC_REQBUFS`: `_IOWR('V', 8, struct v4l2_requestbuffers)`.
    vidioc_reqbufs, b'V', 8, v4l2_requestbuffers
);
nix::ioctl_readwrite!(
    /// `VIDIOC_QUERYBUF`: `_IOWR('V', 9, struct v4l2_buffer)`.
    vidioc_querybuf, b'V', 9, v4l2_buffer
);
nix::ioctl_readwrite!(
    /// `VIDIOC_QBUF`: `_IOWR('V', 15, struct v4l2_buffer)`.
    vidioc_qbuf, b'V', 15, v4l2_buffer
);
nix::ioctl_readwrite!(
    /// `VIDIOC_EXPBUF`: `_IOWR('V', 16, struct v4l2_exportbuffer)`.
    vidioc_expbuf, b'V', 16, v4l2_exportbuffer
);
nix::ioctl_readwrite!(
    /// `VIDIOC_DQBUF`: `_IOWR('V', 17, struct v4l2_buffer)`.
    vidioc_dqbuf, b'V', 17, v4l2_buffer
);
nix::ioctl_write_ptr!(
    /// `VIDIOC_STREAMON`: `_IOW('V', 18, int)`.
    vidioc_streamon, b'V', 18, libc::c_int
);
nix::ioctl_write_ptr!(
    /// `VIDIOC_STREAMOFF`: `_IOW('V', 19, int)`.
    vidioc_streamoff, b'V', 19, libc::c_int
);
nix::ioctl_readwrite!(
    /// `VIDIOC_G_PARM`: `_IOWR('V', 21, struct v4l2_streamparm)`.
    vidioc_g_parm, b'V', 21, v4l2_streamparm
);
nix::ioctl_readwrite!(
    /// `VIDIOC_S_PARM`: `_IOWR('V', 22, struct v4l2_streamparm)`.
    vidioc_s_parm, b'V', 22, v4l2_streamparm
);
nix::ioctl_readwrite!(
    /// `VIDIOC_G_SELECTION`: `_IOWR('V', 94, struct v4l2_selection)`.
    vidioc_g_selection, b'V', 94, v4l2_selection
);
nix::ioctl_readwrite!(
    /// `VIDIOC_S_SELECTION`: `_IOWR('V', 95, struct v4l2_selection)`.
    vidioc_s_selection, b'V', 95, v4l2_selection
);

/// Marker for the plain-old-data argument structures of the ioctls below.
///
/// # Safety
/// Implementors must be `#[repr(C)]` structures (or integers) for which every bit
/// pattern, all-zero included, is a valid value.
pub(crate) unsafe trait Pod: Sized {
    /// An all-zero value.
    fn zeroed() -> Self {
        // SAFETY: the trait's contract: all-zero is a valid value of Self.
        unsafe { std::mem::zeroed() }
    }
}
// SAFETY: bindgen-generated C structures of integers, arrays, unions of integers and raw
// pointers: every bit pattern is valid.
unsafe impl Pod for v4l2_capability {}
// SAFETY: as above.
unsafe impl Pod for v4l2_fmtdesc {}
// SAFETY: as above.
unsafe impl Pod for v4l2_format {}
// SAFETY: as above.
unsafe impl Pod for v4l2_requestbuffers {}
// SAFETY: as above.
unsafe impl Pod for v4l2_buffer {}
// SAFETY: as above.
unsafe impl Pod for v4l2_plane {}
// SAFETY: as above.
unsafe impl Pod for v4l2_exportbuffer {}
// SAFETY: as above.
unsafe impl Pod for v4l2_streamparm {}
// SAFETY: as above.
unsafe impl Pod for v4l2_selection {}

/// Runs one ioctl call, again while it fails with `EINTR`.
fn retry(mut call: impl FnMut() -> nix::Result<libc::c_int>) -> io::Result<()> {
    loop {
        match call() {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(io::Error::from(e)),
        }
    }
}

/// `VIDIOC_QUERYCAP`.
pub(crate) fn querycap(fd: BorrowedFd<'_>) -> io::Result<v4l2_capability> {
    let mut cap = v4l2_capability::zeroed();
    // SAFETY: VIDIOC_QUERYCAP writes a v4l2_capability (which holds no pointers) through a
    // pointer to a live, exclusive one.
    retry(|| unsafe { vidioc_querycap(fd.as_raw_fd(), &mut cap) })?;
    Ok(cap)
}

/// `VIDIOC_ENUM_FMT` at `index`; `Ok(None)` past the last format.
pub(crate) fn enum_fmt(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    index: u32,
) -> io::Result<Option<v4l2_fmtdesc>> {
    let mut desc = v4l2_fmtdesc::zeroed();
    desc.index = index;
    desc.type_ = buf_type;
    // SAFETY: VIDIOC_ENUM_FMT reads and writes a v4l2_fmtdesc, which holds no pointers.
    match retry(|| unsafe { vidioc_enum_fmt(fd.as_raw_fd(), &mut desc) }) {
        Ok(()) => Ok(Some(desc)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `VIDIOC_G_FMT`.
pub(crate) fn g_fmt(fd: BorrowedFd<'_>, buf_type: u32) -> io::Result<v4l2_format> {
    let mut fmt = v4l2_format::zeroed();
    fmt.type_ = buf_type;
    // SAFETY: VIDIOC_G_FMT reads and writes a v4l2_format; the capture variants hold no
    // pointers.
    retry(|| unsafe { vidioc_g_fmt(fd.as_raw_fd(), &mut fmt) })?;
    Ok(fmt)
}

/// `VIDIOC_S_FMT`: the driver adjusts `fmt` to what it chose.
pub(crate) fn s_fmt(fd: BorrowedFd<'_>, fmt: &mut v4l2_format) -> io::Result<()> {
    // SAFETY: VIDIOC_S_FMT reads and writes a v4l2_format; the capture variants hold no
    // pointers.
    retry(|| unsafe { vidioc_s_fmt(fd.as_raw_fd(), &mut *fmt) })
}

/// `VIDIOC_G_PARM`.
pub(crate) fn g_parm(fd: BorrowedFd<'_>, buf_type: u32) -> io::Result<v4l2_streamparm> {
    let mut parm = v4l2_streamparm::zeroed();
    parm.type_ = buf_type;
    // SAFETY: VIDIOC_G_PARM reads and writes a v4l2_streamparm, which holds no pointers.
    retry(|| unsafe { vidioc_g_parm(fd.as_raw_fd(), &mut parm) })?;
    Ok(parm)
}

/// `VIDIOC_S_PARM`.
pub(crate) fn s_parm(fd: BorrowedFd<'_>, parm: &mut v4l2_streamparm) -> io::Result<()> {
    // SAFETY: VIDIOC_S_PARM reads and writes a v4l2_streamparm, which holds no pointers.
    retry(|| unsafe { vidioc_s_parm(fd.as_raw_fd(), &mut *parm) })
}

fn selection(target: u32) -> v4l2_selection {
    let mut sel = v4l2_selection::zeroed();
    // The selection API names the single-planar type for both kinds of queue.
    sel.type_ = v4l::v4l_sys::v4l2_buf_type_V4L2_BUF_TYPE_VIDEO_CAPTURE;
    sel.target = target;
    sel
}

/// Resets the capture crop rectangle to the driver's default (the whole picture), then
/// composes into the whole `width`x`height` buffer. Either step fails with `ENOTTY` or
/// `EINVAL` on drivers that neither crop nor compose.
pub(crate) fn reset_selection(fd: BorrowedFd<'_>, width: u32, height: u32) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    let mut default = selection(v4l::v4l_sys::V4L2_SEL_TGT_CROP_DEFAULT);
    // SAFETY: VIDIOC_G_SELECTION reads and writes a v4l2_selection, which holds no
    // pointers.
    let crop = retry(|| unsafe { vidioc_g_selection(raw, &mut default) }).and_then(|()| {
        let mut crop = selection(v4l::v4l_sys::V4L2_SEL_TGT_CROP);
        crop.r = default.r;
        // SAFETY: VIDIOC_S_SELECTION reads and writes a v4l2_selection, which holds no
        // pointers.
        retry(|| unsafe { vidioc_s_selection(raw, &mut crop) })
    });
    let mut compose = selection(v4l::v4l_sys::V4L2_SEL_TGT_COMPOSE);
    compose.r.width = width;
    compose.r.height = height;
    // SAFETY: as above.
    let composed = retry(|| unsafe { vidioc_s_selection(raw, &mut compose) });
    crop.and(composed)
}

/// `VIDIOC_REQBUFS`: the count the driver granted (allocated, or accepted for DMABUF).
pub(crate) fn reqbufs(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    memory: u32,
    count: u32,
) -> io::Result<u32> {
    let mut req = v4l2_requestbuffers::zeroed();
    req.count = count;
    req.type_ = buf_type;
    req.memory = memory;
    // SAFETY: VIDIOC_REQBUFS reads and writes a v4l2_requestbuffers, which holds no
    // pointers.
    retry(|| unsafe { vidioc_reqbufs(fd.as_raw_fd(), &mut req) })?;
    Ok(req.count)
}

/// `VIDIOC_EXPBUF` of one plane of buffer `index`, close-on-exec and read-write.
pub(crate) fn expbuf(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    index: u32,
    plane: u32,
) -> io::Result<OwnedFd> {
    let mut exp = v4l2_exportbuffer::zeroed();
    exp.type_ = buf_type;
    exp.index = index;
    exp.plane = plane;
    exp.flags = (libc::O_CLOEXEC | libc::O_RDWR) as u32;
    // SAFETY: VIDIOC_EXPBUF reads and writes a v4l2_exportbuffer, which holds no pointers.
    retry(|| unsafe { vidioc_expbuf(fd.as_raw_fd(), &mut exp) })?;
    if exp.fd < 0 {
        return Err(io::Error::other("VIDIOC_EXPBUF returned no fd"));
    }
    // SAFETY: on success the kernel installed a new fd in exp.fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(exp.fd) })
}

/// What a queue or dequeue operation moves: a buffer index and, for multi-planar
/// queues, per-plane data (the DMABUF fds and lengths to queue; bytes used and data
/// offsets when dequeued).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BufferIo {
    pub index: u32,
    pub sequence: u32,
    pub flags: u32,
    /// Capture time: seconds and microseconds (`CLOCK_MONOTONIC` for most drivers).
    pub timestamp: (i64, i64),
    /// Per plane (for single-planar queues only plane 0 is used).
    pub fds: [i32; MAX_PLANES],
    pub lengths: [u32; MAX_PLANES],
    pub bytesused: [u32; MAX_PLANES],
    pub data_offsets: [u32; MAX_PLANES],
}

fn buffer(buf_type: u32, memory: u32, index: u32) -> v4l2_buffer {
    let mut b = v4l2_buffer::zeroed();
    b.type_ = buf_type;
    b.memory = memory;
    b.index = index;
    b
}

/// `VIDIOC_QBUF` of `io.index`. For `V4L2_MEMORY_DMABUF`, `io.fds`/`io.lengths` give each
/// plane's dma-buf and its size; `num_planes` is 0 for single-planar queues.
pub(crate) fn qbuf(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    memory: u32,
    num_planes: usize,
    io: &BufferIo,
) -> io::Result<()> {
    let dmabuf = memory == v4l::v4l_sys::v4l2_memory_V4L2_MEMORY_DMABUF;
    let mut b = buffer(buf_type, memory, io.index);
    let mut planes = [v4l2_plane::zeroed(); MAX_PLANES];
    let num_planes = num_planes.min(MAX_PLANES);
    if num_planes > 0 {
        for (p, plane) in planes.iter_mut().enumerate().take(num_planes) {
            if dmabuf {
                plane.m.fd = io.fds[p];
                plane.length = io.lengths[p];
            }
        }
        b.m.planes = planes.as_mut_ptr();
        b.length = num_planes as u32;
    } else if dmabuf {
        b.m.fd = io.fds[0];
        b.length = io.lengths[0];
    }
    // SAFETY: VIDIOC_QBUF reads and writes a v4l2_buffer; for multi-planar queues
    // `m.planes` points at `planes`, an array of `b.length` (≤ VIDEO_MAX_PLANES)
    // v4l2_plane that outlives the call. DMABUF fds are only read by the kernel (it takes
    // its own reference).
    retry(|| unsafe { vidioc_qbuf(fd.as_raw_fd(), &mut b) })
}

/// `VIDIOC_DQBUF`: `Ok(None)` when no buffer is ready (`EAGAIN` on a non-blocking fd).
pub(crate) fn dqbuf(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    memory: u32,
    num_planes: usize,
) -> io::Result<Option<BufferIo>> {
    let mut b = buffer(buf_type, memory, 0);
    let mut planes = [v4l2_plane::zeroed(); MAX_PLANES];
    let num_planes = num_planes.min(MAX_PLANES);
    if num_planes > 0 {
        b.m.planes = planes.as_mut_ptr();
        b.length = num_planes as u32;
    }
    // SAFETY: VIDIOC_DQBUF reads and writes a v4l2_buffer; for multi-planar queues
    // `m.planes` points at `planes`, room for `b.length` (≤ VIDEO_MAX_PLANES) v4l2_plane
    // that outlives the call.
    match retry(|| unsafe { vidioc_dqbuf(fd.as_raw_fd(), &mut b) }) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => return Ok(None),
        Err(e) => return Err(e),
    }
    // time_t and suseconds_t are i64 on 64-bit targets, narrower elsewhere.
    #[allow(clippy::useless_conversion)]
    let timestamp = (
        i64::from(b.timestamp.tv_sec),
        i64::from(b.timestamp.tv_usec),
    );
    let mut io = BufferIo {
        index: b.index,
        sequence: b.sequence,
        flags: b.flags,
        timestamp,
        ..BufferIo::default()
    };
    if num_planes > 0 {
        for (p, plane) in planes.iter().enumerate().take(num_planes) {
            io.bytesused[p] = plane.bytesused;
            io.data_offsets[p] = plane.data_offset;
        }
    } else {
        io.bytesused[0] = b.bytesused;
    }
    Ok(Some(io))
}

/// `VIDIOC_QUERYBUF` of buffer `index`: its `V4L2_BUF_FLAG_*` flags as the driver sees
/// them (`QUEUED` or `DONE` while the driver owns it).
pub(crate) fn querybuf(
    fd: BorrowedFd<'_>,
    buf_type: u32,
    memory: u32,
    num_planes: usize,
    index: u32,
) -> io::Result<u32> {
    let mut b = buffer(buf_type, memory, index);
    let mut planes = [v4l2_plane::zeroed(); MAX_PLANES];
    let num_planes = num_planes.min(MAX_PLANES);
    if num_planes > 0 {
        b.m.planes = planes.as_mut_ptr();
        b.length = num_planes as u32;
    }
    // SAFETY: VIDIOC_QUERYBUF reads and writes a v4l2_buffer; for multi-planar queues
    // `m.planes` points at `planes`, room for `b.length` (≤ VIDEO_MAX_PLANES) v4l2_plane
    // that outlives the call.
    retry(|| unsafe { vidioc_querybuf(fd.as_raw_fd(), &mut b) })?;
    Ok(b.flags)
}

/// `VIDIOC_STREAMON` / `VIDIOC_STREAMOFF`.
pub(crate) fn stream(fd: BorrowedFd<'_>, buf_type: u32, on: bool) -> io::Result<()> {
    let ty = buf_type as libc::c_int;
    // SAFETY: VIDIOC_STREAMON/OFF read one int (the buffer type) through the pointer.
    retry(|| unsafe {
        if on {
            vidioc_streamon(fd.as_raw_fd(), &ty)
        } else {
            vidioc_streamoff(fd.as_raw_fd(), &ty)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;
    use v4l::v4l2::vidioc;

    /// The request numbers nix computes agree with the `v4l` crate's constants (an
    /// independent computation from the same header), and the two selection requests,
    /// which `v4l` lacks, with the values `linux/videodev2.h` gives.
    #[test]
    fn request_numbers_match_the_header() {
        type Code = vidioc::_IOC_TYPE;
        let read = |nr, size| nix::request_code_read!(b'V', nr, size) as Code;
        let write = |nr, size| nix::request_code_write!(b'V', nr, size) as Code;
        let rw = |nr, size| nix::request_code_readwrite!(b'V', nr, size) as Code;
        assert_eq!(
            read(0, size_of::<v4l2_capability>()),
            vidioc::VIDIOC_QUERYCAP
        );
        assert_eq!(rw(2, size_of::<v4l2_fmtdesc>()), vidioc::VIDIOC_ENUM_FMT);
        assert_eq!(rw(4, size_of::<v4l2_format>()), vidioc::VIDIOC_G_FMT);
        assert_eq!(rw(5, size_of::<v4l2_format>()), vidioc::VIDIOC_S_FMT);
        assert_eq!(
            rw(8, size_of::<v4l2_requestbuffers>()),
            vidioc::VIDIOC_REQBUFS
        );
        assert_eq!(rw(9, size_of::<v4l2_buffer>()), vidioc::VIDIOC_QUERYBUF);
        assert_eq!(rw(15, size_of::<v4l2_buffer>()), vidioc::VIDIOC_QBUF);
        assert_eq!(
            rw(16, size_of::<v4l2_exportbuffer>()),
            vidioc::VIDIOC_EXPBUF
        );
        assert_eq!(rw(17, size_of::<v4l2_buffer>()), vidioc::VIDIOC_DQBUF);
        assert_eq!(write(18, size_of::<libc::c_int>()), vidioc::VIDIOC_STREAMON);
        assert_eq!(
            write(19, size_of::<libc::c_int>()),
            vidioc::VIDIOC_STREAMOFF
        );
        assert_eq!(rw(21, size_of::<v4l2_streamparm>()), vidioc::VIDIOC_G_PARM);
        assert_eq!(rw(22, size_of::<v4l2_streamparm>()), vidioc::VIDIOC_S_PARM);
        // struct v4l2_selection is 64 bytes (no pointers): _IOWR('V', 94/95, ...).
        assert_eq!(size_of::<v4l2_selection>(), 64);
        assert_eq!(rw(94, size_of::<v4l2_selection>()), 0xc040_565e);
        assert_eq!(rw(95, size_of::<v4l2_selection>()), 0xc040_565f);
    }
}
