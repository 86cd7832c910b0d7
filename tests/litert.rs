mod common;
use pinframe::runtime::litert::*;
#[test]
fn probe() {
    let env = common::litert::environment("probe").unwrap();
    let m = Model::from_file(&env, common::litert::face_model("probe").unwrap()).unwrap();
    eprintln!("{:?}", m);
    let c = CompiledModel::new(&m, &[Accelerator::Cpu]).unwrap();
    eprintln!("{:?}", c);
    let bytes = common::tflite::dequantize_model(&[1, 4, 4, 3], common::tflite::UINT8, 0.5, 10);
    let p = common::litert::scratch_file("probe", "dq.tflite");
    std::fs::write(&p, bytes).unwrap();
    let m = Model::from_file(&env, &p).unwrap();
    eprintln!("{:?}", m);
    let c = CompiledModel::new(&m, &[Accelerator::Cpu]).unwrap();
    eprintln!("{:?}", c);
}
