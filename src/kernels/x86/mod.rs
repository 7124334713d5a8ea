//! The SIMD kernels on x86-64, AVX-512F or AVX2+FMA, chosen at run time: matrix products for
//! `f32` (both instruction sets) and `f64` (AVX2's), convolutions and 2x2 max pooling for
//! `f32`, int8 dot products and requantization.
//!
//! With [`le_bytes`](super::le_bytes) (compile-time decoding of weights files), this folder is
//! the crate's only `unsafe` code. Each kernel is reached through a safe function beside it,
//! which checks every slice length against the sizes before any pointer is formed and asserts
//! that the CPU has the instruction set asked for.
//!
//! One file per operation and variant; a variant's file name and first line state where it
//! applies (`conv_winograd_columns_f32`, `weight_grad_winograd_5x5_narrow_avx512`). Every kernel
//! is written once against the [`Simd`](simd::Simd) trait and instantiated per instruction set
//! by an entry macro with `#[target_feature]`. The imports point one way: kernels take
//! [`simd`], [`isa`] and the shared shapes of `kernels/`; this file only gathers what the rest
//! of the crate calls.

mod conv_direct;
mod conv_filters;
pub(super) mod conv_winograd_columns_f32;
mod conv_winograd_rows;
#[cfg(feature = "alloc")]
pub(crate) mod depthwise_training_planes_f32;
mod gemm;
mod gemm_packed;
mod gemm_unpacked;
#[cfg(feature = "std")]
mod input_grad_winograd;
mod int8;
mod int8_add_avx512;
mod int8_columns_vnni;
mod int8_depthwise_vnni;
mod int8_quads_vnni;
mod int8_requantize_avx512;
mod int8_windows_vnni;
mod isa;
mod layout;
mod max_pool_2x2_avx2;
mod max_pool_2x2_avx512;
mod simd;
mod transpose_block;
#[cfg(feature = "alloc")]
mod weight_grad_filters;
#[cfg(feature = "alloc")]
mod weight_grad_positions;
#[cfg(feature = "alloc")]
pub(super) mod weight_grad_winograd_5x5_narrow_avx512;
#[cfg(feature = "alloc")]
mod weight_grad_winograd_rows;

#[cfg(all(test, feature = "std"))]
mod tests;

pub(crate) use conv_direct::{conv2d_stride1, conv2d_stride1_flat};
pub(crate) use conv_filters::{
    FILTERS_IN_LANES_STRIDES, conv2d_filters_in_lanes, with_transposed_filters,
};
pub(crate) use conv_winograd_rows::{
    conv2d_stride1_winograd, winograd_forward_applies, winograd_forward_scratch,
};
pub(crate) use gemm::{Element, gemm, packed_stack_bytes};
#[cfg(feature = "std")]
pub(crate) use input_grad_winograd::winograd_input_gradient;
pub(crate) use int8::{
    IsaI8, detected_isa_i8, dot_rows_i8, has_avx512_vbmi, has_avx512_vbmi2, requantize_i8,
    requantize_uniform_i8,
};
pub(crate) use int8_add_avx512::add_i8_avx512;
pub(crate) use int8_columns_vnni::dot_columns_i8_vnni;
pub(crate) use int8_depthwise_vnni::depthwise_i8_vnni;
pub(crate) use int8_quads_vnni::conv_quads_i8_vnni;
pub(crate) use int8_windows_vnni::conv_windows_i8_vnni;
pub(crate) use isa::{Isa, detected_isa, lanes, with_isa};
pub(crate) use layout::copy_rows;
#[cfg(feature = "alloc")]
pub(crate) use layout::{all_finite, col2im_stride1_avx512, transpose};
#[cfg(feature = "alloc")]
pub(crate) use max_pool_2x2_avx512::max_pool_2x2_backward_f32;
pub(crate) use max_pool_2x2_avx512::max_pool_2x2_f32;
#[cfg(feature = "alloc")]
pub(crate) use weight_grad_filters::conv2d_weight_gradient_filters;
#[cfg(feature = "alloc")]
pub(crate) use weight_grad_positions::{
    conv2d_weight_gradient_positions, shifted_image_len, weight_grad_images_per_pass,
};
#[cfg(feature = "alloc")]
pub(crate) use weight_grad_winograd_rows::{
    conv2d_weight_gradient_winograd, weight_gradient_winograd_scratch,
};
#[cfg(all(test, feature = "std"))]
pub(crate) use {conv_winograd_rows::winograd_forward_points, isa::isa_available};
