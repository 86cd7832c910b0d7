//! The second stage after the face detector: MediaPipe 0.10.14's face mesh model
//! (`face_landmark.tflite`: a 192x192 RGB crop in 0..1 in; 468 landmarks, x, y, z in input
//! pixels, and a face-presence logit out) run on every detected face in one batch.
//!
//! Each face box becomes a square crop of the camera frame with MediaPipe's margin
//! (`regions::crop_for_box`, 1.5 times the box); one `convert_batch` stretches every crop
//! into its slice of a `[N, 192, 192, 3]` batch tensor; one run of the model reads the k
//! slices of this frame's k faces; each face's landmarks are mapped back to camera pixels
//! through its own `ConvertInfo`. The model is compiled once per batch size k = 1..=N,
//! resized to `[k, 192, 192, 3]` (`CompiledModel::resize_input`) and bound once to the
//! first k slices of the one batch tensor (`bind_input_slices`): no frame binds anything,
//! and no run reads a slice this frame did not fill. MediaPipe also rotates the crop so the eyes are
//! level; this stage does not (the crops are upright), which suits faces that are.
//! Shared by `examples/detect.rs` and `tests/litert.rs`.
#![allow(dead_code)]

use pinframe::convert::regions::{self, DetectionBox, RegionAspect};
use pinframe::runtime::litert::{Accelerator, CompiledModel, Model};
use pinframe::{
    BatchItem, ConvertInfo, ConvertOptions, Crop, Error, Fit, ImageProcessor, MemoryRequest,
    Normalize, Result, Tensor,
};

/// The model's input size (square).
pub const INPUT_SIZE: u32 = 192;
/// Landmarks per face.
pub const LANDMARKS: usize = 468;
/// MediaPipe's crop around a detection: the box scaled by 1.5 about its centre, squared.
pub const MARGIN: f64 = 1.5;
/// A few mesh indices (the subject's right and left): the eyes' outer corners, the nose
/// tip, the lips' inner midpoints, the chin.
pub const RIGHT_EYE_OUTER: usize = 33;
pub const LEFT_EYE_OUTER: usize = 263;
pub const NOSE_TIP: usize = 1;
pub const UPPER_LIP: usize = 13;
pub const LOWER_LIP: usize = 14;
pub const CHIN: usize = 152;
/// Below this presence (the sigmoid of the model's face flag) the crop holds no face.
pub const MIN_PRESENCE: f32 = 0.5;

/// One face's landmarks.
#[derive(Clone, Debug, PartialEq)]
pub struct FaceLandmarks {
    /// The camera-frame crop the model saw.
    pub crop: Crop,
    /// Probability that the crop holds a face.
    pub presence: f32,
    /// The 468 landmarks (x, y) in camera pixels.
    pub points: Vec<[f64; 2]>,
}

/// The face mesh model for batches of 1 to N faces, all bound once to one batch tensor.
pub struct LandmarkStage {
    /// `compiled[k - 1]` takes k faces: input `[k, 192, 192, 3]`, bound to the first k
    /// slices of `batch`.
    pub compiled: Vec<CompiledModel>,
    /// The batch tensor bound as the model's input.
    pub batch: Tensor<f32>,
    /// The conversion of every crop: stretched (the crop is already square) into 0..1.
    pub options: ConvertOptions,
    /// Faces in the batch the last `convert` filled.
    faces: usize,
}

impl LandmarkStage {
    /// Allocates the batch tensor of `capacity` faces in `memory` and compiles `model`
    /// for the CPU once per batch size, each resized and bound to its slices, once.
    pub fn new(
        model: &Model,
        capacity: usize,
        memory: impl Into<MemoryRequest>,
    ) -> Result<LandmarkStage> {
        let described = model.inputs().first().zip(model.outputs().get(1));
        let fits = described.is_some_and(|(i, o)| {
            model.inputs().len() == 1
                && i.shape == [1, 192, 192, 3]
                && model.outputs()[0].element_count() == Some(LANDMARKS * 3)
                && o.element_count() == Some(1)
        });
        if !fits {
            return Err(Error::Unsupported(format!(
                "{} is not MediaPipe's face mesh model (input [1, 192, 192, 3], outputs of \
                 {} and 1 values)",
                model.path().display(),
                LANDMARKS * 3
            )));
        }
        if capacity == 0 {
            return Err(Error::InvalidArgument(
                "a landmark batch holds at least one face".into(),
            ));
        }
        let input = model.inputs()[0].image_input()?;
        let batch = Tensor::<f32>::image_batch(
            capacity,
            input.width,
            input.height,
            input.pixel_format(),
            memory,
        )?;
        let mut compiled = Vec::with_capacity(capacity);
        for k in 1..=capacity {
            let mut c = CompiledModel::new(model, &[Accelerator::Cpu])?;
            c.resize_input(0, &[k, 192, 192, 3])?;
            c.bind_input_slices(0, &batch, k)?;
            compiled.push(c);
        }
        Ok(LandmarkStage {
            compiled,
            batch,
            faces: 0,
            options: ConvertOptions {
                fit: Fit::Stretch,
                normalize: Normalize::IDENTITY,
                ..ConvertOptions::for_input(&input)
            },
        })
    }

    /// How many faces one run takes.
    pub fn capacity(&self) -> usize {
        self.batch.batch_len()
    }

    /// The square crops of a `width` x `height` frame for the first
    /// [`capacity`](Self::capacity) boxes (camera pixels).
    pub fn crops(&self, boxes: &[DetectionBox], width: u32, height: u32) -> Result<Vec<Crop>> {
        let boxes = &boxes[..boxes.len().min(self.capacity())];
        regions::crops_for_boxes(boxes, width, height, MARGIN, RegionAspect::Square)
    }

    /// Converts each crop of `frame` into its slice of the batch, all in one
    /// `convert_batch`; returns each slice's geometry.
    pub fn convert(
        &mut self,
        proc: &mut ImageProcessor,
        frame: &Tensor<u8>,
        crops: &[Crop],
    ) -> Result<Vec<ConvertInfo>> {
        let items: Vec<BatchItem<'_>> = crops
            .iter()
            .map(|&c| BatchItem::tensor(frame).with_crop(c))
            .collect();
        self.faces = 0;
        let infos = proc.convert_batch(&items, &mut self.batch, &self.options)?;
        self.faces = infos.len();
        Ok(infos)
    }

    /// The compiled model that reads the faces of the last `convert`.
    pub fn current(&self) -> Result<&CompiledModel> {
        self.faces
            .checked_sub(1)
            .and_then(|k| self.compiled.get(k))
            .ok_or_else(|| Error::InvalidArgument("no faces converted; call convert".into()))
    }

    /// One run over the faces of the last `convert` (its batch size's model, which reads
    /// just those slices).
    pub fn infer(&mut self) -> Result<()> {
        self.current()?;
        self.compiled[self.faces - 1].run()
    }

    /// Runs, bindings and buffers created, over every batch size's model.
    pub fn totals(&self) -> (u64, u64, u64) {
        self.compiled.iter().fold((0, 0, 0), |(r, b, c), m| {
            let s = m.stats();
            (
                r + s.runs,
                b + s.host_bindings + s.dmabuf_bindings,
                c + s.buffers_created,
            )
        })
    }

    /// The landmarks of the first `infos.len()` slices, mapped to camera pixels.
    pub fn decode(
        &self,
        crops: &[Crop],
        infos: &[ConvertInfo],
        out: &mut Vec<FaceLandmarks>,
    ) -> Result<()> {
        let compiled = self.current()?;
        if infos.len() != self.faces || crops.len() != self.faces {
            return Err(Error::InvalidArgument(format!(
                "{} crops and {} infos for a batch of {} faces",
                crops.len(),
                infos.len(),
                self.faces
            )));
        }
        let points: &[f32] = compiled.output(0)?;
        let flags: &[f32] = compiled.output(1)?;
        out.clear();
        for (i, (crop, info)) in crops.iter().zip(infos).enumerate() {
            let slice = &points[i * LANDMARKS * 3..(i + 1) * LANDMARKS * 3];
            out.push(FaceLandmarks {
                crop: *crop,
                presence: 1.0 / (1.0 + (-flags[i]).exp()),
                points: slice
                    .chunks_exact(3)
                    .map(|p| {
                        let (x, y) = info.to_source(f64::from(p[0]), f64::from(p[1]));
                        [x, y]
                    })
                    .collect(),
            });
        }
        Ok(())
    }
}
