//! [`ImageProcessor::convert_batch`]: every item of a batch planned and checked first,
//! then converted in one pass of the backend.

use super::{Backend, ImageProcessor, MAX_SOURCE_BUFFERS};
use crate::convert::{BatchItem, BatchSource, ConvertInfo, ConvertOptions, Plan};
use crate::cpu::BatchJob;
use crate::image::ImageLayout;
use crate::tensor::{MapGuard, Tensor};
use crate::{Element, Error, Result};

impl ImageProcessor {
    /// Converts `items` into the slices of the batch tensor `dst` (made by
    /// [`Tensor::image_batch`]), item `i` into slice `i`, each with `options` and its own
    /// crop and fit ([`BatchItem::options`]); returns each item's [`ConvertInfo`] (its
    /// geometry in its own source's pixels, so [`ConvertInfo::to_source`] maps a point of
    /// slice `i` back into item `i`'s frame).
    ///
    /// Fewer items than slices convert into the first slices and leave the others as
    /// they are (a second stage with fewer detections than its model's batch); more
    /// items than slices, no item, a source without a layout, a crop outside its source,
    /// a damaged compressed frame or options the destination cannot take are errors
    /// found before anything is written. Compressed (`mjpeg`) items are decoded first,
    /// each into planes of its own, at the scale its slice allows. The CPU backend runs the whole batch as one parallel
    /// pass; the GL backend imports or uploads each distinct source once, draws every
    /// item into one render target and reads it back once (none for a dma-buf it renders
    /// into), counted in [`ProcessorStats`](crate::ProcessorStats).
    ///
    /// ```
    /// use pinframe::{BatchItem, ConvertOptions, Crop, ImageProcessor, Memory, PixelFormat, Tensor};
    /// let frame = Tensor::<u8>::image(640, 480, PixelFormat::Yuyv, Memory::Heap)?;
    /// let mut batch = Tensor::<f32>::image_batch(2, 96, 96, PixelFormat::PlanarRgb, Memory::Heap)?;
    /// let items = [
    ///     BatchItem::tensor(&frame).with_crop(Crop::new(0, 0, 200, 200)),
    ///     BatchItem::tensor(&frame).with_crop(Crop::new(440, 280, 200, 200)),
    /// ];
    /// let mut proc = ImageProcessor::new()?;
    /// let infos = proc.convert_batch(&items, &mut batch, &ConvertOptions::default())?;
    /// assert_eq!(infos[1].to_source(0.0, 0.0), (440.0, 280.0));
    /// # Ok::<(), pinframe::Error>(())
    /// ```
    pub fn convert_batch<T: Element>(
        &mut self,
        items: &[BatchItem<'_>],
        dst: &mut Tensor<T>,
        options: &ConvertOptions,
    ) -> Result<Vec<ConvertInfo>> {
        let slice = *dst.layout().ok_or_else(|| {
            Error::InvalidArgument(
                "the batch destination has no image layout; make it with Tensor::image_batch"
                    .into(),
            )
        })?;
        let slices = dst.batch_len();
        if items.is_empty() || items.len() > slices {
            return Err(Error::InvalidArgument(format!(
                "{} items for a batch of {slices} slices: give 1 to {slices}",
                items.len()
            )));
        }
        let compressed = |item: &BatchItem<'_>| {
            item.source
                .layout()
                .is_ok_and(|l| l.format().is_compressed())
        };
        if items.iter().any(compressed) {
            // Each compressed item is decoded into planes of its own (kept for the next
            // batch), then converted from them with the others.
            let mut slots = std::mem::take(&mut self.mjpeg.batch_planes);
            if slots.len() < items.len() {
                slots.resize_with(items.len(), || None);
            }
            let result = self.convert_batch_decoding(items, dst, &slice, options, &mut slots);
            self.mjpeg.batch_planes = slots;
            return result;
        }
        let mut plans = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let plan = check_source(item, dst)
                .and_then(|()| plan_item(item, &slice, options))
                .map_err(|e| e.with_context(format!("batch item {i}")))?;
            plans.push(plan);
        }
        self.run_batch(items, &plans, dst, &slice)?;
        self.stats.frames += items.len() as u64;
        Ok(plans.iter().map(Plan::info).collect())
    }

    /// A batch with compressed items: every item checked and planned, every compressed
    /// one decoded into `slots[i]` (a damaged frame is an error naming its item, before
    /// anything is written), then the batch converted with the decoded items reading
    /// their planes. A compressed frame is decoded once per item that reads it (each
    /// crop may decode at its own scale).
    fn convert_batch_decoding<T: Element>(
        &mut self,
        items: &[BatchItem<'_>],
        dst: &mut Tensor<T>,
        slice: &ImageLayout,
        options: &ConvertOptions,
        slots: &mut [Option<Tensor<u8>>],
    ) -> Result<Vec<ConvertInfo>> {
        let memory = self.decoded_planes_memory();
        let mut plans = Vec::with_capacity(items.len());
        let mut infos = Vec::with_capacity(items.len());
        let mut decoded = vec![false; items.len()];
        for (i, item) in items.iter().enumerate() {
            let (plan, info) = (|| {
                check_source(item, dst)?;
                let layout = item.source.layout()?;
                if !layout.format().is_compressed() {
                    let plan = plan_item(item, slice, options)?;
                    let info = plan.info();
                    return Ok((plan, info));
                }
                let opts = item.options(options);
                let d = match item.source {
                    BatchSource::Tensor(t) => {
                        let map = t.map()?;
                        let data = super::mjpeg::frame_bytes(map.buffer_bytes(0), layout)?;
                        self.mjpeg.decode_into_slot(
                            &mut slots[i],
                            data,
                            layout,
                            slice,
                            &opts,
                            memory,
                        )?
                    }
                    BatchSource::Bytes { buffers, .. } => {
                        let data = buffers.first().copied().unwrap_or_default();
                        let data = super::mjpeg::frame_bytes(data, layout)?;
                        self.mjpeg.decode_into_slot(
                            &mut slots[i],
                            data,
                            layout,
                            slice,
                            &opts,
                            memory,
                        )?
                    }
                };
                decoded[i] = true;
                Ok::<_, Error>((d.plan, d.info))
            })()
            .map_err(|e| e.with_context(format!("batch item {i}")))?;
            plans.push(plan);
            infos.push(info);
        }
        let mut sources = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            sources.push(match (&slots[i], decoded[i]) {
                (Some(planes), true) => BatchItem::tensor(planes),
                _ => *item,
            });
        }
        self.run_batch(&sources, &plans, dst, slice)?;
        self.stats.frames += items.len() as u64;
        Ok(infos)
    }

    /// Runs the planned batch on GL or the CPU.
    fn run_batch<T: Element>(
        &mut self,
        items: &[BatchItem<'_>],
        plans: &[Plan],
        dst: &mut Tensor<T>,
        slice: &ImageLayout,
    ) -> Result<()> {
        #[cfg(feature = "gl")]
        if self.backend == Backend::Gl {
            let sources: Vec<BatchSource<'_>> = items.iter().map(|i| i.source).collect();
            if let Some(r) = self.try_gl(|gl| gl.convert_batch(plans, &sources, dst)) {
                return r;
            }
        }
        #[cfg(not(feature = "gl"))]
        let _ = Backend::Gl;
        // Each distinct tensor is mapped once (16 crops of one frame: one mapping, one
        // cache sync on a dma-buf).
        let mut maps: Vec<(usize, MapGuard<'_, u8>)> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if let BatchSource::Tensor(t) = item.source
                && !items[..i].iter().any(|o| o.source.same_as(&item.source))
            {
                maps.push((i, t.map()?));
            }
        }
        let empty: &[u8] = &[];
        let mut buffers: Vec<[&[u8]; MAX_SOURCE_BUFFERS]> = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let mut bufs = [empty; MAX_SOURCE_BUFFERS];
            match item.source {
                BatchSource::Tensor(_) => {
                    let first = items[..=i]
                        .iter()
                        .position(|o| o.source.same_as(&item.source))
                        .unwrap_or(i);
                    let map = maps
                        .iter()
                        .find(|(j, _)| *j == first)
                        .map(|(_, m)| m)
                        .ok_or_else(|| {
                            Error::InvalidArgument("a batch source was not mapped".into())
                        })?;
                    let count = item.source.layout()?.buffer_count();
                    for (b, out) in bufs.iter_mut().enumerate().take(count) {
                        *out = map.buffer_bytes(b);
                    }
                }
                BatchSource::Bytes { buffers: src, .. } => {
                    for (out, b) in bufs.iter_mut().zip(src) {
                        *out = b;
                    }
                }
            }
            buffers.push(bufs);
        }
        let mut jobs = Vec::with_capacity(items.len());
        for ((item, plan), bufs) in items.iter().zip(plans).zip(&buffers) {
            let src_layout = item.source.layout()?;
            jobs.push(BatchJob {
                plan,
                src: &bufs[..src_layout.buffer_count()],
                src_layout,
                dst_layout: *slice,
            });
        }
        let slice_len = dst.slice_bytes() / std::mem::size_of::<T>();
        let mut map = dst.map_mut()?;
        self.cpu
            .convert_batch(&jobs, &mut map, slice_len, self.threads)
    }
}

/// The checks of one item's source a conversion makes before it writes: its layout and
/// buffers, and aliasing with the destination.
fn check_source<T: Element>(item: &BatchItem<'_>, dst: &Tensor<T>) -> Result<()> {
    let layout = item.source.layout()?;
    if layout.buffer_count() > MAX_SOURCE_BUFFERS {
        return Err(Error::InvalidLayout(format!(
            "the source spans {} buffers; at most {MAX_SOURCE_BUFFERS} are supported",
            layout.buffer_count()
        )));
    }
    match item.source {
        BatchSource::Tensor(t) => {
            if let Some(o) = t.overlap_with(dst) {
                return Err(Error::InvalidArgument(format!(
                    "the source and the batch overlap (bytes {}..{} of the source's buffer {} \
                     are in the batch's buffer): a conversion cannot read the memory it writes",
                    o.bytes.start, o.bytes.end, o.buffer
                )));
            }
        }
        BatchSource::Bytes { buffers, layout } => {
            let lens: Vec<usize> = buffers.iter().map(|b| b.len()).collect();
            layout.validate_buffers(&lens)?;
        }
    }
    Ok(())
}

/// The plan of one raw item into a slice laid out as `slice`.
fn plan_item(item: &BatchItem<'_>, slice: &ImageLayout, options: &ConvertOptions) -> Result<Plan> {
    let layout = item.source.layout()?;
    let plan = Plan::new(layout, slice, &item.options(options))?;
    plan.check_layouts(layout, slice)?;
    Ok(plan)
}
