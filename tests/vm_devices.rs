//! The VM lane's device check: inside the guest (`scripts/vm-test`), every device the
//! guest tests rely on exists and answers at the simplest level. On the host the tests
//! are listed as ignored (and, run with `--include-ignored`, print SKIPPED and return);
//! `scripts/vm-test` runs them in the guest with `--include-ignored`.
//!
//! - vivid: `PINFRAME_VM_VIDEO` is a single-planar capture node and
//!   `PINFRAME_VM_VIDEO_MPLANE` a multi-planar one (VIDIOC_QUERYCAP);
//! - vgem: `/dev/dri/card0` and `/dev/dri/renderD128` are DRM nodes of the vgem driver
//!   (DRM_IOCTL_VERSION);
//! - `/dev/dma_heap/system` allocates a dma-buf of the size asked;
//! - `/dev/udmabuf` turns a sealed memfd into a dma-buf of the memfd's size;
//! - the guest CPU has AVX masked (llvmpipe's 256-bit code is mis-executed by TCG).

mod common;

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;

// ---- ioctl request numbers (asm-generic/ioctl.h, as on x86_64) ----

const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

const fn ioc(dir: u32, ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    ((dir << 30) | ((size as u32) << 16) | ((ty as u32) << 8) | nr as u32) as libc::c_ulong
}

/// `struct v4l2_capability` (linux/videodev2.h).
#[repr(C)]
#[derive(Default)]
struct V4l2Capability {
    driver: [u8; 16],
    card: [u8; 32],
    bus_info: [u8; 32],
    version: u32,
    capabilities: u32,
    device_caps: u32,
    reserved: [u32; 3],
}
const VIDIOC_QUERYCAP: libc::c_ulong = ioc(IOC_READ, b'V', 0, size_of::<V4l2Capability>());
const V4L2_CAP_VIDEO_CAPTURE: u32 = 0x0000_0001;
const V4L2_CAP_VIDEO_CAPTURE_MPLANE: u32 = 0x0000_1000;
const V4L2_CAP_STREAMING: u32 = 0x0400_0000;
const V4L2_CAP_DEVICE_CAPS: u32 = 0x8000_0000;

/// `struct drm_version` (drm/drm.h).
#[repr(C)]
struct DrmVersion {
    version_major: libc::c_int,
    version_minor: libc::c_int,
    version_patchlevel: libc::c_int,
    name_len: libc::size_t,
    name: *mut libc::c_char,
    date_len: libc::size_t,
    date: *mut libc::c_char,
    desc_len: libc::size_t,
    desc: *mut libc::c_char,
}
const DRM_IOCTL_VERSION: libc::c_ulong =
    ioc(IOC_READ | IOC_WRITE, b'd', 0x00, size_of::<DrmVersion>());

/// `struct dma_heap_allocation_data` (linux/dma-heap.h).
#[repr(C)]
#[derive(Default)]
struct DmaHeapAllocationData {
    len: u64,
    fd: u32,
    fd_flags: u32,
    heap_flags: u64,
}
const DMA_HEAP_IOCTL_ALLOC: libc::c_ulong = ioc(
    IOC_READ | IOC_WRITE,
    b'H',
    0x0,
    size_of::<DmaHeapAllocationData>(),
);

/// `struct udmabuf_create` (linux/udmabuf.h).
#[repr(C)]
struct UdmabufCreate {
    memfd: u32,
    flags: u32,
    offset: u64,
    size: u64,
}
const UDMABUF_CREATE: libc::c_ulong = ioc(IOC_WRITE, b'u', 0x42, size_of::<UdmabufCreate>());
const UDMABUF_FLAGS_CLOEXEC: u32 = 0x01;

// ---- helpers ----

fn open_rw(path: &str) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("open {path}: {e}"))
}

fn assert_char_device(path: &str) {
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(
        meta.file_type().is_char_device(),
        "{path} is not a character device"
    );
}

fn env_node(var: &str) -> String {
    match std::env::var(var) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{var} is not set: scripts/vm/guest-run.sh found no such vivid node"),
    }
}

fn c_str(bytes: &[u8]) -> String {
    CStr::from_bytes_until_nul(bytes)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| String::from_utf8_lossy(bytes).into_owned())
}

fn querycap(path: &str) -> V4l2Capability {
    let dev = open_rw(path);
    let mut cap = V4l2Capability::default();
    // SAFETY: VIDIOC_QUERYCAP writes exactly one `struct v4l2_capability`, which
    // `V4l2Capability` mirrors (same size and layout, encoded in the request number);
    // `cap` is a live, exclusively borrowed value and `dev` an open V4L2 node.
    let r = unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            VIDIOC_QUERYCAP,
            &mut cap as *mut V4l2Capability,
        )
    };
    assert_eq!(
        r,
        0,
        "VIDIOC_QUERYCAP on {path}: {}",
        std::io::Error::last_os_error()
    );
    cap
}

/// Size of a dma-buf the way the tensor layer measures it: `lseek(SEEK_END)`.
fn dmabuf_size(fd: OwnedFd) -> u64 {
    let mut f = File::from(fd);
    f.seek(SeekFrom::End(0))
        .expect("lseek(SEEK_END) on a dma-buf")
}

fn drm_driver_name(path: &str) -> String {
    let dev = open_rw(path);
    let mut name = [0u8; 64];
    let mut v = DrmVersion {
        version_major: 0,
        version_minor: 0,
        version_patchlevel: 0,
        name_len: name.len(),
        name: name.as_mut_ptr().cast(),
        date_len: 0,
        date: std::ptr::null_mut(),
        desc_len: 0,
        desc: std::ptr::null_mut(),
    };
    // SAFETY: DRM_IOCTL_VERSION reads and writes one `struct drm_version`, mirrored by
    // `DrmVersion`; the kernel copies at most `name_len` bytes into `name`, a live
    // 64-byte buffer, and nothing into `date`/`desc` whose lengths are 0.
    let r = unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            DRM_IOCTL_VERSION,
            &mut v as *mut DrmVersion,
        )
    };
    assert_eq!(
        r,
        0,
        "DRM_IOCTL_VERSION on {path}: {}",
        std::io::Error::last_os_error()
    );
    let len = v.name_len.min(name.len());
    String::from_utf8_lossy(&name[..len]).into_owned()
}

// ---- tests ----

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn vivid_single_planar_node_is_a_capture_device() {
    if common::skip_unless_vm("vivid_single_planar_node_is_a_capture_device") {
        return;
    }
    let node = env_node("PINFRAME_VM_VIDEO");
    assert_char_device(&node);
    let cap = querycap(&node);
    assert_eq!(c_str(&cap.driver), "vivid", "{node}: driver");
    assert_ne!(
        cap.capabilities & V4L2_CAP_DEVICE_CAPS,
        0,
        "{node}: no device_caps"
    );
    let caps = cap.device_caps;
    assert_ne!(
        caps & V4L2_CAP_VIDEO_CAPTURE,
        0,
        "{node}: not a single-planar capture node (caps {caps:#x})"
    );
    assert_eq!(
        caps & V4L2_CAP_VIDEO_CAPTURE_MPLANE,
        0,
        "{node}: is multi-planar (caps {caps:#x})"
    );
    assert_ne!(
        caps & V4L2_CAP_STREAMING,
        0,
        "{node}: no streaming I/O (caps {caps:#x})"
    );
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn vivid_multi_planar_node_is_an_mplane_capture_device() {
    if common::skip_unless_vm("vivid_multi_planar_node_is_an_mplane_capture_device") {
        return;
    }
    let node = env_node("PINFRAME_VM_VIDEO_MPLANE");
    assert_char_device(&node);
    assert_ne!(
        node,
        env_node("PINFRAME_VM_VIDEO"),
        "the two vivid nodes must differ"
    );
    let cap = querycap(&node);
    assert_eq!(c_str(&cap.driver), "vivid", "{node}: driver");
    let caps = cap.device_caps;
    assert_ne!(
        caps & V4L2_CAP_VIDEO_CAPTURE_MPLANE,
        0,
        "{node}: not multi-planar (caps {caps:#x})"
    );
    assert_eq!(
        caps & V4L2_CAP_VIDEO_CAPTURE,
        0,
        "{node}: also single-planar (caps {caps:#x})"
    );
    assert_ne!(
        caps & V4L2_CAP_STREAMING,
        0,
        "{node}: no streaming I/O (caps {caps:#x})"
    );
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn vgem_drm_card_and_render_node_exist() {
    if common::skip_unless_vm("vgem_drm_card_and_render_node_exist") {
        return;
    }
    for node in ["/dev/dri/card0", "/dev/dri/renderD128"] {
        assert_char_device(node);
        assert_eq!(drm_driver_name(node), "vgem", "{node}: DRM driver");
    }
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn dma_heap_system_allocates_the_size_asked() {
    if common::skip_unless_vm("dma_heap_system_allocates_the_size_asked") {
        return;
    }
    let heap = "/dev/dma_heap/system";
    assert_char_device(heap);
    let dev = open_rw(heap);
    for len in [4096u64, 640 * 640 * 3, 8 << 20] {
        let mut data = DmaHeapAllocationData {
            len,
            fd_flags: (libc::O_RDWR | libc::O_CLOEXEC) as u32,
            ..Default::default()
        };
        // SAFETY: DMA_HEAP_IOCTL_ALLOC reads and writes one
        // `struct dma_heap_allocation_data`, mirrored by `DmaHeapAllocationData`.
        let r = unsafe {
            libc::ioctl(
                dev.as_raw_fd(),
                DMA_HEAP_IOCTL_ALLOC,
                &mut data as *mut DmaHeapAllocationData,
            )
        };
        assert_eq!(
            r,
            0,
            "DMA_HEAP_IOCTL_ALLOC({len}) on {heap}: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: on success the kernel returned a new dma-buf fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(data.fd as i32) };
        assert_eq!(dmabuf_size(fd), len, "dma-heap buffer size");
    }
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn udmabuf_turns_a_sealed_memfd_into_a_dmabuf() {
    if common::skip_unless_vm("udmabuf_turns_a_sealed_memfd_into_a_dmabuf") {
        return;
    }
    let node = "/dev/udmabuf";
    assert_char_device(node);
    let size: u64 = 16 * 4096;
    // SAFETY: memfd_create with a valid NUL-terminated name; the result is checked.
    let raw = unsafe {
        libc::memfd_create(
            c"pinframe-vm-udmabuf".as_ptr(),
            libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC,
        )
    };
    assert!(
        raw >= 0,
        "memfd_create: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `raw` is a fresh fd owned by nothing else.
    let memfd = File::from(unsafe { OwnedFd::from_raw_fd(raw) });
    memfd.set_len(size).expect("ftruncate memfd");
    // SAFETY: F_ADD_SEALS on an fd we own; udmabuf requires F_SEAL_SHRINK.
    let r = unsafe { libc::fcntl(memfd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) };
    assert_eq!(r, 0, "F_ADD_SEALS: {}", std::io::Error::last_os_error());

    let dev = open_rw(node);
    let mut create = UdmabufCreate {
        memfd: memfd.as_raw_fd() as u32,
        flags: UDMABUF_FLAGS_CLOEXEC,
        offset: 0,
        size,
    };
    // SAFETY: UDMABUF_CREATE reads one `struct udmabuf_create`, mirrored by
    // `UdmabufCreate`; it returns a new dma-buf fd or -1.
    let r = unsafe {
        libc::ioctl(
            dev.as_raw_fd(),
            UDMABUF_CREATE,
            &mut create as *mut UdmabufCreate,
        )
    };
    assert!(
        r >= 0,
        "UDMABUF_CREATE: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: `r` is the new dma-buf fd, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(r) };
    assert_eq!(dmabuf_size(fd), size, "udmabuf size");
}

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test"]
fn guest_cpu_has_avx_masked_for_llvmpipe() {
    if common::skip_unless_vm("guest_cpu_has_avx_masked_for_llvmpipe") {
        return;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("/proc/cpuinfo");
    let flags = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .expect("a flags line in /proc/cpuinfo");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    assert!(
        !has("avx2") && !has("avx"),
        "AVX is visible to the guest: llvmpipe output would be wrong under TCG"
    );
    assert_eq!(
        std::env::var("LP_NATIVE_VECTOR_WIDTH").as_deref(),
        Ok("128")
    );
}
