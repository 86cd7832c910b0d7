//! A tensor of any element type behind one Python class: [`AnyTensor`] owns a
//! `Tensor<T>`, [`DynTensor`] is what the bindings need of any of them (a frame included).

use std::os::fd::BorrowedFd;

use half::f16;
use pinframe::{Access, DType, HostPin, ImageLayout, Memory, Result, Tensor};

/// What the bindings do with a tensor whatever its element type.
pub(crate) trait DynTensor: Send + Sync {
    fn dtype(&self) -> DType;
    fn shape(&self) -> &[usize];
    fn memory(&self) -> Memory;
    fn layout(&self) -> Option<&ImageLayout>;
    fn buffer_fd(&self, index: usize) -> Option<BorrowedFd<'_>>;
    fn buffer_count(&self) -> usize;
    fn buffer_len(&self, index: usize) -> Option<usize>;
    fn dma_route(&self) -> Option<String>;
    fn pin_host(&self) -> Result<HostPin<'static>>;
    fn sync_for_cpu(&self, access: Access) -> Result<()>;
    fn sync_for_device(&self, access: Access) -> Result<()>;
    fn set_layout(&mut self, layout: ImageLayout) -> Result<()>;
    /// Images in the tensor: the count of a batch (`Tensor.image(..., batch=N)`), else 1.
    fn batch_len(&self) -> usize;
    /// For a batch tensor (its shape is `[N]` and its layout's shape): the count and the
    /// bytes from one slice to the next; `None` for anything else.
    fn batch(&self) -> Option<(usize, usize)> {
        let layout = self.layout()?;
        let shape = self.shape();
        (shape.len() == layout.shape().len() + 1 && shape[0] == self.batch_len())
            .then(|| (self.batch_len(), self.slice_bytes()))
    }
    /// Bytes of one slice of a batch (of the whole tensor otherwise).
    fn slice_bytes(&self) -> usize;
    /// Runs `f` on the bytes of buffer 0 inside a write mapping (dma-buf sync START/END
    /// around it).
    fn write_bytes(&mut self, f: &mut dyn FnMut(&mut [u8])) -> Result<()>;
}

impl<T: pinframe::Element> DynTensor for Tensor<T> {
    fn dtype(&self) -> DType {
        T::DTYPE
    }
    fn shape(&self) -> &[usize] {
        Tensor::shape(self)
    }
    fn memory(&self) -> Memory {
        Tensor::memory(self)
    }
    fn layout(&self) -> Option<&ImageLayout> {
        Tensor::layout(self)
    }
    fn buffer_fd(&self, index: usize) -> Option<BorrowedFd<'_>> {
        Tensor::buffer_fd(self, index)
    }
    fn buffer_count(&self) -> usize {
        Tensor::buffer_count(self)
    }
    fn buffer_len(&self, index: usize) -> Option<usize> {
        Tensor::buffer_len(self, index)
    }
    fn dma_route(&self) -> Option<String> {
        Tensor::dma_route(self).map(|r| format!("{r:?}"))
    }
    fn pin_host(&self) -> Result<HostPin<'static>> {
        Tensor::pin_host(self)
    }
    fn sync_for_cpu(&self, access: Access) -> Result<()> {
        Tensor::sync_for_cpu(self, access)
    }
    fn sync_for_device(&self, access: Access) -> Result<()> {
        Tensor::sync_for_device(self, access)
    }
    fn set_layout(&mut self, layout: ImageLayout) -> Result<()> {
        Tensor::set_layout(self, layout)
    }
    fn batch_len(&self) -> usize {
        Tensor::batch_len(self)
    }
    fn slice_bytes(&self) -> usize {
        Tensor::slice_bytes(self)
    }
    fn write_bytes(&mut self, f: &mut dyn FnMut(&mut [u8])) -> Result<()> {
        let mut map = self.map_mut()?;
        f(map.as_bytes_mut());
        Ok(())
    }
}

/// A tensor of one of pinframe's element types.
pub(crate) enum AnyTensor {
    U8(Tensor<u8>),
    I8(Tensor<i8>),
    U16(Tensor<u16>),
    I16(Tensor<i16>),
    U32(Tensor<u32>),
    I32(Tensor<i32>),
    F16(Tensor<f16>),
    F32(Tensor<f32>),
    F64(Tensor<f64>),
}

/// Runs `$body` with `$t` bound to the typed tensor inside an [`AnyTensor`] (by reference
/// or by mutable reference, as `$any` is).
macro_rules! with_tensor {
    ($any:expr, $t:ident => $body:expr) => {
        match $any {
            $crate::dyn_tensor::AnyTensor::U8($t) => $body,
            $crate::dyn_tensor::AnyTensor::I8($t) => $body,
            $crate::dyn_tensor::AnyTensor::U16($t) => $body,
            $crate::dyn_tensor::AnyTensor::I16($t) => $body,
            $crate::dyn_tensor::AnyTensor::U32($t) => $body,
            $crate::dyn_tensor::AnyTensor::I32($t) => $body,
            $crate::dyn_tensor::AnyTensor::F16($t) => $body,
            $crate::dyn_tensor::AnyTensor::F32($t) => $body,
            $crate::dyn_tensor::AnyTensor::F64($t) => $body,
        }
    };
}
pub(crate) use with_tensor;

/// Builds an [`AnyTensor`] of `dtype` with `$make` evaluated for the element type `T`.
macro_rules! by_dtype {
    ($dtype:expr, $T:ident => $make:expr) => {{
        use $crate::dyn_tensor::AnyTensor;
        match $dtype {
            pinframe::DType::U8 => {
                type $T = u8;
                $make.map(AnyTensor::U8)
            }
            pinframe::DType::I8 => {
                type $T = i8;
                $make.map(AnyTensor::I8)
            }
            pinframe::DType::U16 => {
                type $T = u16;
                $make.map(AnyTensor::U16)
            }
            pinframe::DType::I16 => {
                type $T = i16;
                $make.map(AnyTensor::I16)
            }
            pinframe::DType::U32 => {
                type $T = u32;
                $make.map(AnyTensor::U32)
            }
            pinframe::DType::I32 => {
                type $T = i32;
                $make.map(AnyTensor::I32)
            }
            pinframe::DType::F16 => {
                type $T = half::f16;
                $make.map(AnyTensor::F16)
            }
            pinframe::DType::F32 => {
                type $T = f32;
                $make.map(AnyTensor::F32)
            }
            pinframe::DType::F64 => {
                type $T = f64;
                $make.map(AnyTensor::F64)
            }
            other => Err(pinframe::Error::Unsupported(format!(
                "dtype {other} has no tensor type in the Python package yet"
            ))),
        }
    }};
}
pub(crate) use by_dtype;

impl AnyTensor {
    pub(crate) fn as_dyn(&self) -> &dyn DynTensor {
        with_tensor!(self, t => t)
    }
    pub(crate) fn as_dyn_mut(&mut self) -> &mut dyn DynTensor {
        with_tensor!(self, t => t)
    }
}
