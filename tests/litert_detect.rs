//! A real detector on a real photograph through pinframe: MediaPipe 0.10.14's short-range
//! face detector (LiteRT, CPU) on scikit-image's `astronaut.png` (Eileen Collins), made into
//! YUYV and NV12 camera frames. pinframe's preprocessing (CPU and GL backends, into the
//! bound pin) gives the same detection as an independent f64 preprocessing of the same
//! frame (tests/common/reference.rs, copied into LiteRT's own input buffer), within a
//! stated tolerance, and the box mapped back through `ConvertInfo` lands on the face in
//! camera pixels.
//!
//! Needs the LiteRT library, the model and the photo (scripts/assets); SKIPPED without
//! them, a failure under `CI=true`.
#![cfg(all(feature = "litert", feature = "cli"))]

#[path = "../examples/common/blazeface.rs"]
mod blazeface;
mod common;
#[path = "common/reference.rs"]
mod reference;
#[path = "../examples/common/yuv.rs"]
mod yuv;

use blazeface::Detection;
use common::litert::{astronaut, environment, face_model};
use pinframe::runtime::litert::{Accelerator, CompiledModel, Model};
use pinframe::{
    Backend, ConvertInfo, ConvertOptions, Fit, ImageProcessor, Memory, Normalize, PixelFormat,
    Tensor,
};

/// Score difference allowed between the two preprocessings.
const SCORE_TOLERANCE: f32 = 0.005;
/// Box corner and keypoint difference allowed, in model-input pixels (of 128; one is 4
/// camera pixels here).
const POSITION_TOLERANCE: f32 = 0.1;

struct Detector {
    compiled: CompiledModel,
    anchors: Vec<[f32; 2]>,
    scratch: Vec<Detection>,
    found: Vec<Detection>,
}

impl Detector {
    fn new(model: &Model) -> Detector {
        Detector {
            compiled: CompiledModel::new(model, &[Accelerator::Cpu]).unwrap(),
            anchors: blazeface::anchors(),
            scratch: Vec::new(),
            found: Vec::new(),
        }
    }

    fn detect(&mut self) -> Vec<Detection> {
        self.compiled.run().unwrap();
        let regressors: &[f32] = self.compiled.output(0).unwrap();
        let scores: &[f32] = self.compiled.output(1).unwrap();
        blazeface::decode(
            &self.anchors,
            regressors,
            scores,
            &mut self.scratch,
            &mut self.found,
        );
        self.found.clone()
    }
}

fn options() -> ConvertOptions {
    ConvertOptions {
        fit: Fit::Letterbox { pad: [0; 3] },
        normalize: Normalize {
            mean: [0.5; 3],
            std: [0.5; 3],
        },
        ..Default::default()
    }
}

/// Largest difference of score and of position (box corners, keypoints).
fn difference(a: &Detection, b: &Detection) -> (f32, f32) {
    let mut d = 0.0f32;
    for c in 0..4 {
        d = d.max((a.bbox[c] - b.bbox[c]).abs());
    }
    for k in 0..blazeface::KEYPOINTS {
        for c in 0..2 {
            d = d.max((a.keypoints[k][c] - b.keypoints[k][c]).abs());
        }
    }
    ((a.score - b.score).abs(), d)
}

/// The detection's box and keypoints in camera pixels.
fn to_camera(d: &Detection, info: &ConvertInfo) -> ([f64; 4], Vec<[f64; 2]>) {
    let (x0, y0) = info.to_source(f64::from(d.bbox[0]), f64::from(d.bbox[1]));
    let (x1, y1) = info.to_source(f64::from(d.bbox[2]), f64::from(d.bbox[3]));
    let keypoints = d
        .keypoints
        .iter()
        .map(|k| {
            let (x, y) = info.to_source(f64::from(k[0]), f64::from(k[1]));
            [x, y]
        })
        .collect();
    ([x0, y0, x1, y1], keypoints)
}

#[test]
fn face_detector_on_a_photograph_matches_an_independent_preprocessing() {
    let test = "face_detector_on_a_photograph_matches_an_independent_preprocessing";
    let (Some(env), Some(model_path), Some(photo)) =
        (environment(test), face_model(test), astronaut(test))
    else {
        return;
    };
    let rgb = image::open(&photo).unwrap().to_rgb8();
    assert_eq!(rgb.dimensions(), (512, 512));
    let model = Model::from_file(&env, &model_path).unwrap();
    let input = model.inputs()[0].image_input().unwrap();
    let o = options();

    let mut backends = vec![Backend::Cpu];
    match ImageProcessor::with_backend(Backend::Gl) {
        Ok(_) => backends.push(Backend::Gl),
        Err(e) if common::under_ci() => panic!("{test}: GL cannot start under CI: {e}"),
        Err(e) => eprintln!("{test}: the GL half is SKIPPED: GL cannot start: {e}"),
    }

    let mut bound = Detector::new(&model);
    let mut tensor =
        Tensor::<f32>::with_layout(input.image_layout().unwrap(), Some(Memory::Heap)).unwrap();
    bound.compiled.bind_input(0, &tensor).unwrap();
    let mut independent = Detector::new(&model);
    independent.compiled.allocate_input(0).unwrap();

    let mut worst = (0.0f32, 0.0f32);
    for format in [PixelFormat::Yuyv, PixelFormat::Nv12] {
        let (layout, bytes) = yuv::encode(&rgb, 512, 384, format);
        // The independent preprocessing: the f64 reference of the same frame, normalised.
        let want = reference::reference(
            std::slice::from_ref(&bytes),
            &layout,
            input.width,
            input.height,
            input.pixel_format(),
            &o,
        );
        let dst = independent.compiled.input_mut::<f32>(0).unwrap();
        for (i, px) in want.iter().enumerate() {
            for c in 0..3 {
                dst[i * 3 + c] = ((px[c] / 255.0 - 0.5) / 0.5) as f32;
            }
        }
        let expected = independent.detect();
        assert_eq!(
            expected.len(),
            1,
            "{format}: the independent run found {expected:?}"
        );

        let mut frame = Tensor::<u8>::with_layout(layout, Some(Memory::Heap)).unwrap();
        frame.map_mut().unwrap().copy_from_slice(&bytes);
        for &backend in &backends {
            let mut proc = ImageProcessor::with_backend(backend).unwrap();
            let info = proc.convert_with(&frame, &mut tensor, &o).unwrap();
            let got = bound.detect();
            assert_eq!(
                got.len(),
                expected.len(),
                "{format} {backend:?}: {got:?} vs the independent {expected:?}"
            );
            let (ds, dp) = difference(&got[0], &expected[0]);
            eprintln!(
                "{format} {backend:?}: score {:.4} (independent {:.4}), max |score diff| {ds:.2e}, \
                 max position diff {dp:.2e} model px",
                got[0].score, expected[0].score
            );
            assert!(
                ds <= SCORE_TOLERANCE && dp <= POSITION_TOLERANCE,
                "{format} {backend:?}: {:?} vs the independent {:?}",
                got[0],
                expected[0]
            );
            worst = (worst.0.max(ds), worst.1.max(dp));

            // Mapped back to camera pixels, the box lands on the face: the photo's face
            // spans about x 175..275, y 65..190 (eyes near y 105, the mouth near y 145).
            let (bbox, keypoints) = to_camera(&got[0], &info);
            eprintln!(
                "{format} {backend:?}: face at {bbox:.1?} camera px, keypoints {keypoints:.1?}"
            );
            let centre = [(bbox[0] + bbox[2]) / 2.0, (bbox[1] + bbox[3]) / 2.0];
            let size = [bbox[2] - bbox[0], bbox[3] - bbox[1]];
            assert!(
                (200.0..250.0).contains(&centre[0]) && (100.0..155.0).contains(&centre[1]),
                "{format} {backend:?}: box centre {centre:?} is not on the face"
            );
            assert!(
                (70.0..170.0).contains(&size[0]) && (70.0..170.0).contains(&size[1]),
                "{format} {backend:?}: box size {size:?} is not a face's"
            );
            // The eyes: the subject's right eye on the image's left, both in the upper half
            // of the box; the mouth below them.
            let (right_eye, left_eye, mouth) = (keypoints[0], keypoints[1], keypoints[3]);
            assert!(right_eye[0] < left_eye[0], "{keypoints:?}");
            for eye in [right_eye, left_eye] {
                assert!(
                    eye[0] > bbox[0] && eye[0] < bbox[2],
                    "{keypoints:?} {bbox:?}"
                );
                assert!(
                    eye[1] > bbox[1] && eye[1] < centre[1],
                    "{keypoints:?} {bbox:?}"
                );
            }
            assert!(
                mouth[1] > right_eye[1] + 15.0 && mouth[1] < bbox[3],
                "{keypoints:?}"
            );
        }
    }
    eprintln!(
        "worst over YUYV/NV12 x {backends:?}: |score diff| {:.2e}, position {:.2e} model px",
        worst.0, worst.1
    );
}
