//! Decoding MediaPipe's short-range face detector (BlazeFace, `face_detection_short_range.tflite`
//! from the mediapipe 0.10.14 wheel): 896 SSD anchors, 16 regressors each (box centre and
//! size, six keypoints), one score each, then weighted non-maximum suppression. The
//! constants are MediaPipe's own graph options for this model
//! (`face_detection_short_range.pbtxt`: `SsdAnchorsCalculator` and
//! `TensorsToDetectionsCalculator`). Shared by `examples/detect.rs` and `tests/litert_detect.rs`.
#![allow(dead_code)]

/// The model's input size (square).
pub const INPUT_SIZE: f32 = 128.0;
/// Anchors: 16x16 cells of stride 8 with 2 anchors, 8x8 cells of stride 16 with 6.
pub const ANCHORS: usize = 896;
/// Regressor values per anchor.
pub const COORDS: usize = 16;
/// Keypoints per face: right eye, left eye, nose tip, mouth, right ear, left ear (the
/// subject's right and left).
pub const KEYPOINTS: usize = 6;
/// MediaPipe's score threshold for this model.
pub const MIN_SCORE: f32 = 0.5;
/// MediaPipe's suppression threshold (intersection over union).
pub const MIN_SUPPRESSION_IOU: f32 = 0.3;

/// One face, in model-input pixels (0..128).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Detection {
    /// Probability of a face.
    pub score: f32,
    /// Box: left, top, right, bottom.
    pub bbox: [f32; 4],
    /// Keypoints (x, y).
    pub keypoints: [[f32; 2]; KEYPOINTS],
}

impl Detection {
    /// Box width and height.
    pub fn size(&self) -> [f32; 2] {
        [self.bbox[2] - self.bbox[0], self.bbox[3] - self.bbox[1]]
    }

    /// Box centre.
    pub fn centre(&self) -> [f32; 2] {
        [
            (self.bbox[0] + self.bbox[2]) / 2.0,
            (self.bbox[1] + self.bbox[3]) / 2.0,
        ]
    }

    /// Intersection over union with another box.
    pub fn iou(&self, other: &Detection) -> f32 {
        let (a, b) = (self.bbox, other.bbox);
        let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
        let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
        let inter = w * h;
        let area = |r: [f32; 4]| (r[2] - r[0]).max(0.0) * (r[3] - r[1]).max(0.0);
        let union = area(a) + area(b) - inter;
        if union <= 0.0 { 0.0 } else { inter / union }
    }
}

/// The anchor centres (x, y) in 0..1, in the model's output order: per feature map, row
/// by row, cell by cell, anchor by anchor (anchor size is fixed at 1.0).
pub fn anchors() -> Vec<[f32; 2]> {
    let mut out = Vec::with_capacity(ANCHORS);
    for (stride, per_cell) in [(8usize, 2usize), (16, 6)] {
        let cells = 128 / stride;
        for y in 0..cells {
            for x in 0..cells {
                let centre = [
                    (x as f32 + 0.5) / cells as f32,
                    (y as f32 + 0.5) / cells as f32,
                ];
                out.extend(std::iter::repeat_n(centre, per_cell));
            }
        }
    }
    debug_assert_eq!(out.len(), ANCHORS);
    out
}

/// The faces in the model's outputs (`regressors` 896x16, `classificators` 896x1), after
/// the score threshold and weighted non-maximum suppression, best first. `scratch` keeps
/// its capacity between frames (no allocation once warm).
pub fn decode(
    anchors: &[[f32; 2]],
    regressors: &[f32],
    scores: &[f32],
    scratch: &mut Vec<Detection>,
    out: &mut Vec<Detection>,
) {
    scratch.clear();
    out.clear();
    for (i, a) in anchors.iter().enumerate() {
        let raw = scores[i].clamp(-100.0, 100.0);
        let score = 1.0 / (1.0 + (-raw).exp());
        if score < MIN_SCORE {
            continue;
        }
        let r = &regressors[i * COORDS..(i + 1) * COORDS];
        // Offsets are in input pixels relative to the anchor centre (x, y, w, h order).
        let cx = r[0] + a[0] * INPUT_SIZE;
        let cy = r[1] + a[1] * INPUT_SIZE;
        let (w, h) = (r[2], r[3]);
        let mut keypoints = [[0.0; 2]; KEYPOINTS];
        for (k, kp) in keypoints.iter_mut().enumerate() {
            *kp = [
                r[4 + 2 * k] + a[0] * INPUT_SIZE,
                r[5 + 2 * k] + a[1] * INPUT_SIZE,
            ];
        }
        scratch.push(Detection {
            score,
            bbox: [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0],
            keypoints,
        });
    }
    // Weighted NMS (MediaPipe's default for this model): the best remaining detection and
    // everything overlapping it are merged, each weighted by its score.
    scratch.sort_by(|a, b| b.score.total_cmp(&a.score));
    while !scratch.is_empty() {
        let best = scratch[0];
        let mut weight = 0.0;
        let mut bbox = [0.0; 4];
        let mut keypoints = [[0.0; 2]; KEYPOINTS];
        let mut kept = 0;
        for i in 0..scratch.len() {
            let d = scratch[i];
            if best.iou(&d) > MIN_SUPPRESSION_IOU {
                weight += d.score;
                for (sum, v) in bbox.iter_mut().zip(d.bbox) {
                    *sum += v * d.score;
                }
                for (sum, k) in keypoints.iter_mut().zip(d.keypoints) {
                    sum[0] += k[0] * d.score;
                    sum[1] += k[1] * d.score;
                }
            } else {
                scratch[kept] = d;
                kept += 1;
            }
        }
        scratch.truncate(kept);
        out.push(Detection {
            score: best.score,
            bbox: bbox.map(|v| v / weight),
            keypoints: keypoints.map(|p| [p[0] / weight, p[1] / weight]),
        });
    }
}
