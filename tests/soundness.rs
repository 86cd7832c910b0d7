//! What keeps a runtime's reads through a pin and the tensor's writers apart, and a
//! conversion from reading the memory it writes (CPU backend: runs on any machine).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use pinframe::{
    Backend, DType, Error, ImageLayout, ImageProcessor, Memory, PixelFormat, Plane, Tensor,
};

fn processor() -> ImageProcessor {
    ImageProcessor::with_backend(Backend::Cpu).unwrap()
}

/// A grey 32x16 source filled with `value`, in shm memory.
fn grey_source(value: u8) -> Tensor<u8> {
    let mut t = Tensor::<u8>::image(32, 16, PixelFormat::Grey, Some(Memory::Shm)).unwrap();
    t.map_mut().unwrap().fill(value);
    t
}

/// Waits (bounded, for hang detection only) until `done` is set.
fn wait_for(done: &AtomicBool, what: &str) {
    let start = Instant::now();
    while !done.load(Ordering::SeqCst) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: still waiting after 60 s"
        );
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_conversion_into_a_pinned_tensor_waits_for_its_readers() {
    let src = grey_source(200);
    let mut dst = Tensor::<u8>::image(32, 16, PixelFormat::Grey, Some(Memory::Shm)).unwrap();
    let pin = dst.pin_host().unwrap();
    let started = Arc::new(Barrier::new(2));
    let converted = Arc::new(AtomicBool::new(false));
    let read = pin.lock_read().unwrap();
    let writer = {
        let (started, converted) = (started.clone(), converted.clone());
        thread::spawn(move || {
            started.wait();
            processor().convert(&src, &mut dst).unwrap();
            converted.store(true, Ordering::SeqCst);
            dst
        })
    };
    started.wait();
    // However long the reader holds the pin, the conversion does not write under it: the
    // bytes it reads stay those before the conversion.
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(5));
        assert!(
            !converted.load(Ordering::SeqCst),
            "the conversion ran under a reader"
        );
        // SAFETY: the pin's window is valid while the pin lives; the read hold keeps the
        // writer out, so nobody writes these bytes now.
        let bytes = unsafe { std::slice::from_raw_parts(pin.as_ptr(), pin.len()) };
        assert!(
            bytes.iter().all(|&b| b == 0),
            "the pinned bytes changed under a reader"
        );
    }
    drop(read);
    wait_for(&converted, "the conversion after the reader let go");
    let dst = writer.join().unwrap();
    assert!(dst.map().unwrap().iter().all(|&b| b == 200));
    // SAFETY: as above; the writer is done.
    let bytes = unsafe { std::slice::from_raw_parts(pin.as_ptr(), pin.len()) };
    assert!(bytes.iter().all(|&b| b == 200));
}

#[test]
fn a_reader_waits_for_a_map_mut_guard() {
    let mut t = Tensor::<u8>::new(&[4096], Some(Memory::Heap)).unwrap();
    let pin = t.pin_host().unwrap();
    let (ptr, len) = (pin.as_ptr() as usize, pin.len());
    let read_done = Arc::new(AtomicBool::new(false));
    let entered = Arc::new(Barrier::new(2));
    let mut guard = t.map_mut().unwrap();
    guard.fill(1);
    let reader = {
        let (read_done, entered) = (read_done.clone(), entered.clone());
        thread::spawn(move || {
            entered.wait();
            let hold = pin.lock_read().unwrap();
            // SAFETY: the window is valid while `pin` lives; the hold keeps writers out.
            let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
            let all_two = bytes.iter().all(|&b| b == 2);
            drop(hold);
            read_done.store(true, Ordering::SeqCst);
            all_two
        })
    };
    entered.wait();
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(5));
        assert!(
            !read_done.load(Ordering::SeqCst),
            "a reader got in under map_mut"
        );
    }
    guard.fill(2);
    drop(guard);
    assert!(
        reader.join().unwrap(),
        "the reader saw the guard's writes half done"
    );
}

#[test]
fn waiting_for_oneself_is_an_error() {
    let mut t = Tensor::<u8>::new(&[64], Some(Memory::Heap)).unwrap();
    let pin = t.pin_host().unwrap();
    {
        let _read = pin.lock_read().unwrap();
        let e = t
            .map_mut()
            .err()
            .expect("map_mut under this thread's own read");
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("would wait"), "{e}");
        // Reads share.
        let again = pin.lock_read().unwrap();
        drop(again);
        // And a conversion into it is refused the same way, with nothing written.
        let src = Tensor::<u8>::image(8, 8, PixelFormat::Grey, Some(Memory::Heap)).unwrap();
        let mut dst = Tensor::<u8>::image(8, 8, PixelFormat::Grey, Some(Memory::Heap)).unwrap();
        let dst_pin = dst.pin_host().unwrap();
        let _dst_read = dst_pin.lock_read().unwrap();
        let e = processor().convert(&src, &mut dst).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    let guard = t.map_mut().unwrap();
    let e = pin
        .lock_read()
        .expect_err("lock_read under this thread's map_mut");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    drop(guard);
    drop(pin.lock_read().unwrap());
}

#[test]
fn a_source_and_destination_over_one_buffer_are_refused() {
    let layout = ImageLayout::new(32, 16, PixelFormat::Grey).unwrap();
    let owner = grey_source(7);
    let fd = owner.fd().expect("an shm tensor has an fd");
    // SAFETY: every tensor over the memfd is this test's; the conversion below is refused
    // before it maps anything.
    let src = unsafe { Tensor::<u8>::import(fd, layout) }.unwrap();
    // SAFETY: as above.
    let mut dst = unsafe { Tensor::<u8>::import(fd, layout) }.unwrap();
    let mut proc = processor();
    let e = proc.convert(&src, &mut dst).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(
        e.to_string()
            .contains("src and dst overlap: bytes 0..512 of src's buffer 0 and bytes 0..512"),
        "{e}"
    );
    assert!(
        dst.map().unwrap().iter().all(|&b| b == 7),
        "nothing written"
    );
    assert_eq!(proc.stats().frames, 0);

    // 32x8 images at rows 0, 4 and 8 of the memfd.
    let at_row = |row: usize| {
        let plane = Plane {
            buffer: 0,
            offset: 32 * row,
            stride: 32,
        };
        ImageLayout::with_planes(32, 8, PixelFormat::Grey, DType::U8, &[plane]).unwrap()
    };
    // SAFETY: every tensor over the memfd is this test's; the conversion below is refused.
    let top = unsafe { Tensor::<u8>::import(fd, at_row(0)) }.unwrap();
    // SAFETY: as above.
    let mut middle = unsafe { Tensor::<u8>::import(fd, at_row(4)) }.unwrap();
    let e = proc.convert(&top, &mut middle).unwrap_err();
    assert!(
        e.to_string()
            .contains("bytes 0..256 of src's buffer 0 and bytes 128..384 of dst's buffer 0"),
        "{e}"
    );
    assert_eq!(proc.stats().frames, 0);
    // The bottom half: no byte in common with the top half, so it converts.
    // SAFETY: every tensor over the memfd is this test's; the conversion reads only the
    // top half and writes only the bottom half.
    let mut bottom = unsafe { Tensor::<u8>::import(fd, at_row(8)) }.unwrap();
    dst.map_mut().unwrap()[..256].fill(9);
    proc.convert(&top, &mut bottom).unwrap();
    let all = owner.map().unwrap();
    assert!(all[..256].iter().all(|&b| b == 9), "the source half");
    assert!(
        all[256..].iter().all(|&b| b == 9),
        "its copy in the other half"
    );
    drop(all);
    drop((top, middle, bottom));
    dst.map_mut().unwrap().fill(7);

    // Two separate buffers with the same contents convert.
    let other = grey_source(7);
    let mut fresh = Tensor::<u8>::image(32, 16, PixelFormat::Grey, Some(Memory::Shm)).unwrap();
    proc.convert(&other, &mut fresh).unwrap();
    proc.convert(&src, &mut fresh).unwrap();
    assert!(fresh.map().unwrap().iter().all(|&b| b == 7));
}
