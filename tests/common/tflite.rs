//! Writes tiny `.tflite` models for the LiteRT tests (the project's own, so nothing is
//! fetched for them): one quantised input, one DEQUANTIZE op, one float output, so the
//! model's output is exactly `scale * (q - zero_point)` of what it read, element by
//! element. The flatbuffer follows TFLite's `schema.fbs` (file identifier `TFL3`), built
//! with the `flatbuffers` crate's table builder.
#![allow(dead_code)]

use flatbuffers::{FlatBufferBuilder, WIPOffset};

/// `TensorType` codes of the schema.
pub const FLOAT32: i8 = 0;
pub const UINT8: i8 = 3;
pub const INT8: i8 = 9;
/// `BuiltinOperator::DEQUANTIZE`.
const DEQUANTIZE: i32 = 6;

/// The byte offset of field `i` in a table's vtable.
const fn slot(i: u16) -> u16 {
    4 + 2 * i
}

/// A model `output = DEQUANTIZE(input)`: `input` of `shape` and `input_type` (UINT8 or
/// INT8), quantised per tensor (`scale`, `zero_point`); `output` float32 of the same shape.
/// Signature `serving_default` with inputs `input` and outputs `output`.
pub fn dequantize_model(shape: &[i32], input_type: i8, scale: f32, zero_point: i64) -> Vec<u8> {
    let mut b = FlatBufferBuilder::new();

    // QuantizationParameters { scale: [scale], zero_point: [zero_point] }.
    let scales = b.create_vector(&[scale]);
    let zeros = b.create_vector(&[zero_point]);
    let q = b.start_table();
    b.push_slot_always(slot(2), scales);
    b.push_slot_always(slot(3), zeros);
    let quant = b.end_table(q);

    let tensor =
        |b: &mut FlatBufferBuilder<'_>, name: &str, ty: i8, quant: Option<WIPOffset<_>>| {
            let shape = b.create_vector(shape);
            let name = b.create_string(name);
            let t = b.start_table();
            b.push_slot_always(slot(0), shape);
            b.push_slot::<i8>(slot(1), ty, 0);
            b.push_slot::<u32>(slot(2), 0, u32::MAX); // buffer 0: the empty sentinel
            b.push_slot_always(slot(3), name);
            if let Some(q) = quant {
                b.push_slot_always(slot(4), q);
            }
            b.end_table(t)
        };
    let input = tensor(&mut b, "input", input_type, Some(quant));
    let output = tensor(&mut b, "output", FLOAT32, None);
    let tensors = b.create_vector(&[input, output]);

    let op_inputs = b.create_vector(&[0i32]);
    let op_outputs = b.create_vector(&[1i32]);
    let o = b.start_table();
    b.push_slot::<u32>(slot(0), 0, u32::MAX);
    b.push_slot_always(slot(1), op_inputs);
    b.push_slot_always(slot(2), op_outputs);
    let op = b.end_table(o);
    let ops = b.create_vector(&[op]);

    let sg_inputs = b.create_vector(&[0i32]);
    let sg_outputs = b.create_vector(&[1i32]);
    let sg_name = b.create_string("main");
    let s = b.start_table();
    b.push_slot_always(slot(0), tensors);
    b.push_slot_always(slot(1), sg_inputs);
    b.push_slot_always(slot(2), sg_outputs);
    b.push_slot_always(slot(3), ops);
    b.push_slot_always(slot(4), sg_name);
    let subgraph = b.end_table(s);
    let subgraphs = b.create_vector(&[subgraph]);

    // OperatorCode { deprecated_builtin_code: 6, version: 1, builtin_code: DEQUANTIZE }.
    let c = b.start_table();
    b.push_slot::<i8>(slot(0), DEQUANTIZE as i8, 0);
    b.push_slot::<i32>(slot(2), 1, 0);
    b.push_slot::<i32>(slot(3), DEQUANTIZE, -1);
    let code = b.end_table(c);
    let codes = b.create_vector(&[code]);

    // Buffer 0: empty.
    let e = b.start_table();
    let empty = b.end_table(e);
    let buffers = b.create_vector(&[empty]);

    let map = |b: &mut FlatBufferBuilder<'_>, name: &str, index: u32| {
        let name = b.create_string(name);
        let m = b.start_table();
        b.push_slot_always(slot(0), name);
        b.push_slot::<u32>(slot(1), index, u32::MAX);
        b.end_table(m)
    };
    let sig_in = map(&mut b, "input", 0);
    let sig_out = map(&mut b, "output", 1);
    let sig_ins = b.create_vector(&[sig_in]);
    let sig_outs = b.create_vector(&[sig_out]);
    let key = b.create_string("serving_default");
    let d = b.start_table();
    b.push_slot_always(slot(0), sig_ins);
    b.push_slot_always(slot(1), sig_outs);
    b.push_slot_always(slot(2), key);
    b.push_slot::<u32>(slot(4), 0, u32::MAX);
    let sig = b.end_table(d);
    let sigs = b.create_vector(&[sig]);

    let description = b.create_string("pinframe test: output = dequantize(input)");
    let m = b.start_table();
    b.push_slot::<u32>(slot(0), 3, 0);
    b.push_slot_always(slot(1), codes);
    b.push_slot_always(slot(2), subgraphs);
    b.push_slot_always(slot(3), description);
    b.push_slot_always(slot(4), buffers);
    b.push_slot_always(slot(7), sigs);
    let model = b.end_table(m);
    b.finish(model, Some("TFL3"));
    b.finished_data().to_vec()
}
