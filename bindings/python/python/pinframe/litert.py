"""LiteRT (formerly TensorFlow Lite) with pinframe tensors as its inputs, bound once and
read in place on every run (the Rust `pinframe::runtime::litert`)::

    from pinframe import litert
    env = litert.Environment()                       # finds libLiteRt.so
    model = litert.Model.from_file(env, "face_detection_short_range.tflite")
    compiled = litert.CompiledModel(model)
    x = pinframe.Tensor.image(128, 128, "rgb", "f32")
    compiled.bind_input(0, x)                        # once, no copy
    proc.convert(frame, x, fit="letterbox", mean=(0.5,) * 3, std=(0.5,) * 3)
    compiled.run()                                   # reads x in place
    scores = compiled.output(1)                      # a numpy view, no copy
"""

from ._pinframe import litert as _litert

Environment = _litert.Environment
Model = _litert.Model
CompiledModel = _litert.CompiledModel

__all__ = ["Environment", "Model", "CompiledModel"]
