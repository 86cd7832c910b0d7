//! The LiteRT binding on a real dma-buf, in the VM lane's guest: vivid → GL → a DMA
//! destination tensor (a GBM buffer on vgem, rendered into without a readback) → bound to
//! LiteRT → the face detector reads it in place.
//!
//! LiteRT 2.3.0's x86-64 (and every non-Android Linux) build has no dma-buf tensor buffers:
//! `LiteRtCreateTensorBufferFromDmaBufBuffer` returns `kLiteRtStatusErrorUnsupported` (5),
//! because `LITERT_HAS_DMABUF_SUPPORT` is 0 there (`litert/c/litert_common.h`). The binding
//! then binds the tensor as host memory over its CPU mapping: still no copy, counted in
//! `RuntimeStats::dmabuf_fallbacks`, with `DMA_BUF_IOCTL_SYNC` START/END around each run.
//! This test proves that path: the refusal and its reason, the fallback counted once,
//! LiteRT's buffer at the dma-buf's mapping, the model reading exactly what GL rendered,
//! the syncs issued, and nothing created in steady state.
//!
//! Built with `--features litert` (scripts/lanes/litert runs `scripts/vm-test --features
//! litert --test vm_litert`); without the feature this file has no tests.
#![cfg(all(feature = "litert", feature = "gl", feature = "camera"))]

mod common;

use common::litert::{environment, face_model};
use common::skip_unless_vm;
use pinframe::camera::{BufferMode, Camera, CameraConfig};
use pinframe::runtime::litert::{Accelerator, Binding, CompiledModel, Model};
use pinframe::tensor::DmaRoute;
use pinframe::testing::dma_sync_counts;
use pinframe::{
    Backend, ConvertOptions, Fit, ImageProcessor, Memory, Normalize, PixelFormat, Tensor,
};

#[test]
#[ignore = "VM lane: runs in the guest via scripts/vm-test --features litert"]
fn camera_gl_dmabuf_tensor_bound_to_litert() {
    let test = "camera_gl_dmabuf_tensor_bound_to_litert";
    if skip_unless_vm(test) {
        return;
    }
    let (Some(env), Some(path)) = (environment(test), face_model(test)) else {
        return;
    };
    let model = Model::from_file(&env, &path).unwrap();
    let input = model.inputs()[0].image_input().unwrap();
    let layout = input.image_layout().unwrap();
    // The destination: a GBM buffer (vgem's dumb buffer, which Mesa's kms_swrast imports
    // as a render target), of the model's dense layout.
    let elems = layout.allocation_len(0) / 4;
    let mut tensor = Tensor::<f32>::new_dma_via(&[elems], &DmaRoute::Gbm(String::new())).unwrap();
    tensor.set_layout(layout).unwrap();
    assert_eq!(tensor.memory(), Memory::Dma);
    let pin = tensor.pin_host().unwrap();

    let mut compiled = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    let binding = compiled.bind_input(0, &tensor).unwrap();
    let refusal = compiled.dmabuf_refusal().map(str::to_owned);
    eprintln!("binding: {binding:?}; LiteRT: {refusal:?}");
    let stats = compiled.stats();
    match binding {
        Binding::DmaBuf => assert_eq!(stats.dmabuf_bindings, 1),
        Binding::HostMemoryOverDmaBuf => {
            let why = refusal.expect("a fallback says why");
            assert!(why.contains("status 5") && why.contains("dma-buf"), "{why}");
            assert_eq!((stats.dmabuf_fallbacks, stats.dmabuf_bindings), (1, 0));
            // Over the pin: LiteRT's buffer is the dma-buf's own CPU mapping.
            assert_eq!(compiled.input_host_address(0).unwrap(), pin.as_ptr());
        }
        other => panic!("a DMA tensor bound as {other:?}"),
    }

    // A second model with LiteRT's own buffer: fed a copy of what GL rendered, it must
    // compute exactly what the bound model computed from the dma-buf.
    let mut copied = CompiledModel::new(&model, &[Accelerator::Cpu]).unwrap();
    copied.allocate_input(0).unwrap();

    let node = std::env::var("PINFRAME_VM_VIDEO").unwrap_or_else(|_| "/dev/video0".into());
    let config = CameraConfig::new(640, 480, PixelFormat::Yuyv)
        .with_buffer_mode(BufferMode::Dmabuf)
        .with_dma_route(DmaRoute::Gbm(String::new()));
    let mut camera = Camera::open(&node, config).unwrap();
    let mut gl = ImageProcessor::with_backend(Backend::Gl).unwrap();
    let options = ConvertOptions {
        fit: Fit::Letterbox { pad: [0; 3] },
        normalize: Normalize {
            mean: [0.5; 3],
            std: [0.5; 3],
        },
        ..ConvertOptions::for_input(&input)
    };
    let syncs_before = dma_sync_counts(&tensor);
    let frames = 8;
    for i in 0..frames {
        let frame = camera.next_frame().unwrap();
        gl.convert_with(&frame, &mut tensor, &options).unwrap();
        drop(frame);
        compiled.run().unwrap();
        if i % 4 == 0 {
            let rendered = tensor.map().unwrap().to_vec();
            copied
                .input_mut::<f32>(0)
                .unwrap()
                .copy_from_slice(&rendered);
            copied.run().unwrap();
            for o in 0..2 {
                assert_eq!(
                    compiled.output::<f32>(o).unwrap(),
                    copied.output::<f32>(o).unwrap(),
                    "frame {i} output {o}: the model did not read what GL rendered"
                );
            }
            // The frame is a real picture, not padding: the letterbox leaves content rows.
            assert!(
                rendered.iter().any(|&v| v > -0.99),
                "frame {i}: nothing rendered"
            );
        }
    }
    let s = gl.stats();
    eprintln!("GL: {s:?}; runtime: {:?}", compiled.stats());
    assert_eq!(
        s.readbacks, 0,
        "GL read the destination back instead of rendering into it: {s:?}"
    );
    assert_eq!(s.uploads, 0, "{s:?}");
    let after = compiled.stats();
    assert_eq!(after.runs, frames);
    assert_eq!(
        after.buffers_created, stats.buffers_created,
        "steady state created buffers"
    );
    // Each run bracketed the dma-buf for the CPU (START and END, read).
    let syncs = dma_sync_counts(&tensor);
    assert!(
        syncs.starts() - syncs_before.starts() >= frames
            && syncs.ends() - syncs_before.ends() >= frames,
        "{syncs:?} vs {syncs_before:?}"
    );
}
