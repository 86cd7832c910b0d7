//! Shared memory: a sealed memfd that another process can map and see the same bytes.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MemFdCreateFlag, memfd_create};

use crate::{Error, Result};

/// Creates a memfd of `len` bytes. With `seal_size`, its size is sealed (no shrink, no grow,
/// no further seals) so every mapping of it stays valid whatever another holder of the fd
/// does; udmabuf wants only `F_SEAL_SHRINK`, so it passes false and seals that itself.
pub(crate) fn create_memfd(name: &CStr, len: usize, seal_size: bool) -> Result<OwnedFd> {
    let fd = memfd_create(
        name,
        MemFdCreateFlag::MFD_CLOEXEC | MemFdCreateFlag::MFD_ALLOW_SEALING,
    )
    .map_err(|e| Error::io("memfd_create", e.into()))?;
    let size = libc::off_t::try_from(len)
        .map_err(|_| Error::InvalidShape(format!("{len} bytes is too large for a memfd")))?;
    nix::unistd::ftruncate(&fd, size)
        .map_err(|e| Error::io(format!("ftruncate memfd to {len} bytes"), e.into()))?;
    if seal_size {
        add_seals(
            fd.as_fd(),
            SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
        )?;
    }
    Ok(fd)
}

pub(crate) fn add_seals(fd: BorrowedFd<'_>, seals: SealFlag) -> Result<()> {
    fcntl(fd.as_raw_fd(), FcntlArg::F_ADD_SEALS(seals))
        .map_err(|e| Error::io("sealing memfd", e.into()))?;
    Ok(())
}

/// True if `fd` is a memfd (a sealable shmem file created by `memfd_create`).
pub(crate) fn is_memfd(fd: BorrowedFd<'_>) -> bool {
    if fcntl(fd.as_raw_fd(), FcntlArg::F_GET_SEALS).is_err() {
        return false;
    }
    // Plain tmpfs files also answer F_GET_SEALS; only memfds are named "/memfd:...".
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map(|p| p.to_string_lossy().starts_with("/memfd:"))
        .unwrap_or(false)
}

/// Refuses a memfd that can still shrink: truncating it under a live mapping turns every
/// access past the new end into a `SIGBUS`, which no Rust view can guard against.
/// `caller_fd` is the caller's fd number, for the message.
pub(crate) fn check_shrink_sealed(fd: BorrowedFd<'_>, caller_fd: i32) -> Result<()> {
    let seals = fcntl(fd.as_raw_fd(), FcntlArg::F_GET_SEALS)
        .map_err(|e| Error::io(format!("F_GET_SEALS of memfd fd {caller_fd}"), e.into()))?;
    let seals = SealFlag::from_bits_truncate(seals);
    if seals.contains(SealFlag::F_SEAL_SHRINK) {
        return Ok(());
    }
    let how = if seals.contains(SealFlag::F_SEAL_SEAL) {
        "it was created without MFD_ALLOW_SEALING, so it can never be sealed: create it with \
         MFD_ALLOW_SEALING, then fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)"
    } else {
        "seal it first with fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK)"
    };
    Err(Error::ImportRefused(format!(
        "memfd fd {caller_fd} has no F_SEAL_SHRINK seal (a truncation under a mapping would \
         raise SIGBUS); {how}"
    )))
}

/// The size of an imported memfd, read only once it cannot shrink: the `F_SEAL_SHRINK`
/// check first (see [`check_shrink_sealed`]), then `fstat`. An unsealed memfd is refused
/// by its seal whatever its size, and a size read after the seal stays true for as long
/// as the fd lives (read before it, the file could shrink in between).
pub(crate) fn sealed_len(fd: BorrowedFd<'_>, caller_fd: i32) -> Result<usize> {
    check_shrink_sealed(fd, caller_fd)?;
    let st = nix::sys::stat::fstat(fd.as_raw_fd())
        .map_err(|e| Error::io(format!("fstat of memfd fd {caller_fd}"), e.into()))?;
    usize::try_from(st.st_size)
        .map_err(|_| Error::InvalidFd(format!("memfd fd {caller_fd} has size {}", st.st_size)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn an_unsealed_memfd_is_refused_by_its_seal_before_its_size_is_read() {
        // Empty and unsealed: both wrong, and the seal is what is reported.
        let fd = create_memfd(c"pinframe-test", 0, false).unwrap();
        let e = sealed_len(fd.as_fd(), 7).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ImportRefused, "{e}");
        assert!(
            e.to_string()
                .contains("memfd fd 7 has no F_SEAL_SHRINK seal"),
            "{e}"
        );
        // Sealed against shrinking: its size.
        add_seals(fd.as_fd(), SealFlag::F_SEAL_SHRINK).unwrap();
        assert_eq!(sealed_len(fd.as_fd(), 7).unwrap(), 0);
        let fd = create_memfd(c"pinframe-test", 4096, true).unwrap();
        assert_eq!(sealed_len(fd.as_fd(), 7).unwrap(), 4096);
    }
}
