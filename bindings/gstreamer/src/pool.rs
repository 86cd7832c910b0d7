//! A buffer pool of pinframe tensors: dma-buf memory when the platform allocates it (the
//! `dma-route` property picks the route), else memfd system memory.
//!
//! A fixed set of buffers cycles (the element configures `min == max`), each wrapping its
//! tensor's fd without a copy, so an inference runtime downstream can pin each buffer once
//! (its fd or its mapped address) and see the same ones frame after frame. Each buffer's
//! memory carries its tensor (qdata): the converter writes the tensor (on GL, the dma-buf is
//! an imported render target), downstream reads the memory.
//!
//! The element uses the pool twice: for its output, and as the pool it proposes upstream
//! (so a source such as `v4l2src io-mode=dmabuf-import` captures straight into buffers the
//! converter imports).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use gst::glib;
use gst::subclass::prelude::*;
use pinframe::ImageLayout;

use crate::buffers::{self, Allocators, AnyTensor, Placement, SourceImports};

/// What a pool's buffers hold.
#[derive(Clone, Debug)]
pub(crate) struct PoolSpec {
    /// Each buffer's tensor layout (one buffer): of each slice of a batch.
    pub(crate) layout: ImageLayout,
    /// Images in each buffer: more than 1 makes each buffer one batch tensor
    /// (`Tensor::image_batch`).
    pub(crate) batch: usize,
    /// Bytes of each GStreamer buffer (the frame or tensor size).
    pub(crate) size: usize,
    pub(crate) placement: Placement,
    /// Attach a `GstVideoMeta` describing `layout` (video caps).
    pub(crate) video_meta: bool,
    /// Buffers that come back to the converter as sources (the proposed upstream pool):
    /// their tensor is registered as the memory's source import.
    pub(crate) source: bool,
}

mod imp {
    use super::*;

    #[derive(Default)]
    pub struct TensorPool {
        pub(super) spec: Mutex<Option<PoolSpec>>,
        pub(super) allocators: Mutex<Option<Allocators>>,
        pub(super) allocated: AtomicU64,
    }

    #[glib::object_subclass]
    impl ObjectSubclass for TensorPool {
        const NAME: &'static str = "GstPinframeTensorPool";
        type Type = super::TensorPool;
        type ParentType = gst::BufferPool;
    }

    impl ObjectImpl for TensorPool {}
    impl GstObjectImpl for TensorPool {}

    impl BufferPoolImpl for TensorPool {
        fn options() -> &'static [&'static str] {
            &["GstBufferPoolOptionVideoMeta"]
        }

        fn set_config(&self, config: &mut gst::BufferPoolConfigRef) -> bool {
            let Some(spec) = self.spec.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
                return false;
            };
            let Some((caps, size, min, max)) = config.params() else {
                return false;
            };
            if (size as usize) < spec.size {
                gst::warning!(
                    crate::CAT,
                    imp = self,
                    "pool buffers of {size} bytes cannot hold {} bytes",
                    spec.size
                );
                config.set_params(caps.as_ref(), spec.size as u32, min, max);
                return false;
            }
            self.parent_set_config(config)
        }

        fn alloc_buffer(
            &self,
            _params: Option<&gst::BufferPoolAcquireParams>,
        ) -> Result<gst::Buffer, gst::FlowError> {
            let spec = self
                .spec
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
                .ok_or(gst::FlowError::NotNegotiated)?;
            let allocators = self
                .allocators
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(Allocators::new)
                .clone();
            match make_buffer(&spec, &allocators) {
                Ok(b) => {
                    self.allocated.fetch_add(1, Ordering::Relaxed);
                    Ok(b)
                }
                Err(e) => {
                    gst::error!(crate::CAT, imp = self, "{e}");
                    Err(gst::FlowError::Error)
                }
            }
        }
    }

    fn make_buffer(spec: &PoolSpec, allocators: &Allocators) -> Result<gst::Buffer, String> {
        let tensor = if spec.batch > 1 {
            buffers::allocate_batch(&spec.layout, spec.batch, &spec.placement)
        } else {
            buffers::allocate(&spec.layout, &spec.placement)
        }
        .map_err(|e| format!("cannot allocate a pool buffer: {e}"))?;
        let memory = allocators.wrap(&tensor, spec.size)?;
        let mut buffer = gst::Buffer::new();
        {
            let b = buffer.get_mut().expect("a new buffer is writable");
            b.append_memory(memory);
            if spec.video_meta {
                add_video_meta(b, &spec.layout)?;
            }
        }
        let mem = buffer.peek_memory(0);
        if spec.source {
            let AnyTensor::U8(t) = tensor else {
                return Err("a source pool holds u8 images".into());
            };
            buffers::SOURCE.get_or_attach(mem, || SourceImports::with(spec.layout, t));
        } else {
            buffers::OUTPUT.get_or_attach(mem, || Mutex::new(tensor));
        }
        Ok(buffer)
    }

    fn add_video_meta(b: &mut gst::BufferRef, layout: &ImageLayout) -> Result<(), String> {
        let format = crate::caps::video_format(layout.format())
            .ok_or_else(|| format!("{} has no GStreamer format", layout.format()))?;
        let offsets: Vec<usize> = layout.planes().iter().map(|p| p.offset).collect();
        let strides: Vec<i32> = layout
            .planes()
            .iter()
            .map(|p| {
                i32::try_from(p.stride).map_err(|_| format!("stride {} is too large", p.stride))
            })
            .collect::<Result<_, _>>()?;
        gst_video::VideoMeta::add_full(
            b,
            gst_video::VideoFrameFlags::empty(),
            format,
            layout.width(),
            layout.height(),
            &offsets,
            &strides,
        )
        .map_err(|e| format!("adding a GstVideoMeta: {e}"))?;
        Ok(())
    }
}

glib::wrapper! {
    /// A pool of pinframe tensors (see the module docs).
    pub struct TensorPool(ObjectSubclass<imp::TensorPool>) @extends gst::BufferPool, gst::Object;
}

impl TensorPool {
    /// A pool whose buffers hold `spec`; configure and activate it as any pool.
    pub(crate) fn new(spec: PoolSpec) -> TensorPool {
        let pool: TensorPool = glib::Object::new();
        *pool.imp().spec.lock().unwrap_or_else(|p| p.into_inner()) = Some(spec);
        pool
    }

    /// Buffers allocated so far (a fixed pool allocates `min` of them, once).
    pub(crate) fn allocated(&self) -> u64 {
        self.imp().allocated.load(Ordering::Relaxed)
    }
}
