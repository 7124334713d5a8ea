//! `Conv2d`'s training: its workspace and its backward pass (`dZ`, `dW`, `db`, `dX`), derived
//! in `docs/backprop.md`.

use alloc::boxed::Box;
use alloc::vec;

use num_traits::Float;

use super::Conv2d;
use crate::format::Element;
use crate::kernels::{self, Product};
use crate::nn::train::zeroed_samples;
use crate::nn::{Activation, Sample, Store, Train};

/// The buffers of one [`Conv2d`] layer for a batch of `B`.
#[derive(Debug, Clone)]
pub struct Conv2dWorkspace<T, Out, const B: usize> {
    /// `A = f(Z)` of each sample, written by the forward pass.
    pub output: Box<[Out; B]>,
    /// `dZ = dA ⊙ f'(Z)` of each sample, written by the backward pass, except where a
    /// ReLU layer asked for no `dX` (a net's first) has a kernel that forms `dZ` as it reads
    /// `dA` and `A` (LeNet-5's first layer, `f32` on AVX-512), and where the layer has no
    /// activation (`Identity`: `dZ` is `dA`, read where it lies): then it is left as it was.
    pub d_pre_activation: Box<[Out; B]>,
    /// The unrolled patches `X̂` (`C·K·K x OH·OW` a sample) of a convolution with a stride
    /// other than 1 (or a kernel that is not square): a group of samples' side by side, and
    /// their `Z` (forward pass) or `dZ` (backward pass) side by side after them; or the
    /// scratch of its windows read in place (the weights transposed and a padded image).
    /// Empty for the others.
    pub patches: Box<[T]>,
    /// `Wᵀ·dZ` of one sample (of a group of samples side by side, for a convolution with a
    /// stride other than 1), before `col2im` adds it into `dX`.
    pub d_patches: Box<[T]>,
    /// The batch's inputs with their zero padding (`B x C x (H + 2P) x (W + 2P)`), for the
    /// weight gradient of a padded stride-1 convolution whose kernel does not pad the
    /// images itself on some instruction set (empty where every one does: LeNet-5's first
    /// layer); the border is never written.
    pub padded_input: Box<[T]>,
    /// The operands of the weight-gradient kernel of a stride-1 convolution (as many as the
    /// most any instruction set's kernel takes), laid out for it: `dZ` of the batch position-major (`OH·OW x OC` per sample) where it puts the
    /// filters in the vector lanes; with a kernel of 3 to 5 there, the operands of
    /// Winograd's method instead (a few samples' input transforms and gradients, and the
    /// sums at the tiles' points: 161 KiB for LeNet-5's second layer in `f32` on AVX-512,
    /// where `dZ` position-major would be 400 KiB at batch 64); where it puts the output
    /// positions in the lanes, a few inputs at a time, each copied once per kernel column
    /// `kx`, padded, shifted left by `kx` and cut to the output's width (`C x K x (H + 2P)
    /// x OW` per sample), so that the inputs meeting a vector of `dZ` are one vector too
    /// (`K` times an input per image of a pass: 18 KB for LeNet-5's first layer on AVX2,
    /// several MB for a large image and kernel); for a 5 x 5 kernel on narrow rows with
    /// few filters, `f32` on AVX-512, one image's transforms by Winograd's method with a
    /// row's tiles in the lanes and the sums at their points (34 KiB for LeNet-5's first
    /// layer).
    pub weight_gradient_scratch: Box<[T]>,
    /// The transformed filters and the tiles of the input gradient by Winograd's method,
    /// for a stride-1 convolution with a kernel of 3 to 5 (empty otherwise; then
    /// `d_patches` is used).
    pub winograd: Box<[T]>,
    /// The forward pass's transforms by Winograd's method down the columns, for a
    /// stride-1 convolution whose transforms exceed the stack buffer of a prediction
    /// (`kernels::conv_forward_workspace_scratch`; empty otherwise).
    pub forward_scratch: Box<[T]>,
}

/// The sum of `values` in 8 independent partial sums: one running sum would make each
/// addition wait for the previous one. Always inlined: called inside the closure that
/// `backward` has compiled for the wide vectors, which a call would leave.
#[inline(always)]
fn sum<T: Float>(values: &[T]) -> T {
    let mut partial = [T::zero(); 8];
    let chunks = values.chunks_exact(8);
    let rest = chunks.remainder().iter().fold(T::zero(), |s, &v| s + v);
    for chunk in chunks {
        for (p, &v) in partial.iter_mut().zip(chunk) {
            *p = *p + v;
        }
    }
    partial.iter().fold(rest, |s, &p| s + p)
}

impl<
    T,
    const B: usize,
    const C: usize,
    const OC: usize,
    const K: usize,
    const STRIDE: usize,
    const PAD: usize,
    const H: usize,
    const W: usize,
    const OH: usize,
    const OW: usize,
    A,
    S,
    const KW: usize,
> Train<T, B> for Conv2d<T, C, OC, K, STRIDE, PAD, H, W, OH, OW, A, S, KW>
where
    T: Element + Sample + Float,
    A: Activation,
    S: Store,
{
    type Workspace = Conv2dWorkspace<T, [[[T; OW]; OH]; OC], B>;

    fn workspace(&self) -> Self::Workspace {
        let patch_len = C * K * KW * OH * OW;
        let winograd = if !Self::UNROLLS {
            kernels::conv_input_gradient_scratch::<T>(&Self::DIRECT)
        } else {
            0
        };
        Conv2dWorkspace {
            output: zeroed_samples(),
            d_pre_activation: zeroed_samples(),
            // Stride 1 needs no patches (see `forward_sample` and `backward`).
            patches: vec![
                T::ZERO;
                if !Self::UNROLLS {
                    0
                } else {
                    patch_len
                        .max(Self::images_scratch(B))
                        .max(Self::WINDOWS_SCRATCH)
                }
            ]
            .into_boxed_slice(),
            // Also where Winograd's method takes dX: a thread limited to the portable loops
            // (`kernels::with_instruction_set`) takes the product and col2im.
            d_patches: vec![
                T::ZERO;
                if Self::POINTWISE {
                    0
                } else if Self::UNROLLS {
                    // A group of samples' side by side (see `backward_unrolled`).
                    patch_len * Self::IMAGES_PER_PRODUCT.min(B).max(1)
                } else {
                    patch_len
                }
            ]
            .into_boxed_slice(),
            padded_input: vec![
                T::ZERO;
                if !Self::UNROLLS
                    && !kernels::conv_weight_gradient_pads_on_every_isa::<T>(&Self::DIRECT)
                {
                    B * C * (H + 2 * PAD) * (W + 2 * PAD)
                } else {
                    0
                }
            ]
            .into_boxed_slice(),
            weight_gradient_scratch: vec![
                T::ZERO;
                if !Self::UNROLLS {
                    kernels::conv_weight_gradient_scratch_any_isa::<T>(&Self::PADDED, B)
                } else {
                    // dWᵀ, summed over the batch (see `backward`).
                    C * K * KW * OC
                }
            ]
            .into_boxed_slice(),
            winograd: vec![T::ZERO; winograd].into_boxed_slice(),
            forward_scratch: vec![
                T::ZERO;
                if !Self::UNROLLS {
                    kernels::conv_forward_workspace_scratch::<T>(&Self::DIRECT)
                } else {
                    0
                }
            ]
            .into_boxed_slice(),
        }
    }

    fn forward_train<'w>(
        &self,
        x: &[[[[T; W]; H]; C]; B],
        ws: &'w mut Self::Workspace,
    ) -> &'w [[[[T; OW]; OH]; OC]; B] {
        // The layer's one forward pass, with room for all of a sample's patches (other strides:
        // of a group of samples').
        if !Self::UNROLLS {
            self.forward_stride1(
                x,
                &mut *ws.output,
                &mut ws.forward_scratch,
                kernels::ScratchFor::Training,
            );
        } else {
            self.forward_images(x, &mut *ws.output, &mut ws.patches);
        }
        &ws.output
    }

    fn output(ws: &Self::Workspace) -> &[[[[T; OW]; OH]; OC]; B] {
        &ws.output
    }

    fn backward(
        &self,
        x: &[[[[T; W]; H]; C]; B],
        ws: &mut Self::Workspace,
        d_output: &[[[[T; OW]; OH]; OC]; B],
        d_input: Option<&mut [[[[T; W]; H]; C]; B]>,
        gradients: &mut Self,
    ) {
        let (ckk, positions) = (C * K * KW, OH * OW);
        let d_weight = S::matrix_mut(&mut gradients.weight)
            .as_flattened_mut()
            .as_flattened_mut()
            .as_flattened_mut();
        let d_bias = S::vector_mut(&mut gradients.bias);
        // The workspace holds the weight-gradient scratch of every instruction set's kernel;
        // this thread's takes its part.
        let scratch = if Self::UNROLLS {
            0
        } else {
            kernels::conv_weight_gradient_scratch::<T>(&Self::PADDED, B)
                .min(ws.weight_gradient_scratch.len())
        };
        // A first layer (no dX) of ReLU: a kernel that forms dZ as it reads dA and A, and
        // sums db, where there is one; dZ is then never written.
        if !Self::UNROLLS
            && d_input.is_none()
            && crate::nn::activation::is_relu::<A>()
            && kernels::conv2d_weight_and_bias_gradients_through_relu(
                &Self::DIRECT,
                B,
                x.as_flattened().as_flattened().as_flattened(),
                ws.output.as_flattened().as_flattened().as_flattened(),
                d_output.as_flattened().as_flattened().as_flattened(),
                &mut ws.weight_gradient_scratch[..scratch],
                d_weight,
                d_bias,
            )
        {
            return;
        }
        d_bias.fill(T::zero());
        // dZ = dA ⊙ f'(Z), with f'(Z) computed from A            OC x OH·OW per sample
        // db += Σ over positions of dZ                            OC
        // One plane at a time (flat slices: the compiler vectorizes them, which it did not
        // do for the nested rows of a few values), summed while it is in the L1 cache.
        // Without an activation (a convolution before batch normalization) dZ is dA, read
        // where it lies: no batch-sized copy through the caches.
        let identity = crate::nn::activation::is_identity::<A>();
        let da_all = d_output.as_flattened().as_flattened().as_flattened();
        let a_all = ws.output.as_flattened().as_flattened().as_flattened();
        let planes = ws
            .d_pre_activation
            .as_flattened_mut()
            .as_flattened_mut()
            .as_flattened_mut()
            .chunks_exact_mut(positions.max(1));
        // Always inlined: a closure the compiler keeps out of line is compiled for the
        // baseline, and this pass then ran on SSE2's 4 lanes (found in the profile).
        kernels::with_wide_vectors(
            #[inline(always)]
            || {
                // The planes are [sample][filter]: plane `i` is filter `i % OC`'s.
                if identity {
                    for (i, da) in da_all.chunks_exact(positions.max(1)).enumerate() {
                        d_bias[i % OC] += sum(da);
                    }
                    return;
                }
                let planes = planes
                    .zip(a_all.chunks_exact(positions.max(1)))
                    .zip(da_all.chunks_exact(positions.max(1)));
                for (i, ((dz, a), da)) in planes.enumerate() {
                    for ((dz, &a), &da) in dz.iter_mut().zip(a).zip(da) {
                        *dz = da * A::derivative_from_output(a);
                    }
                    d_bias[i % OC] += sum(dz);
                }
            },
        );
        let Conv2dWorkspace {
            d_pre_activation,
            padded_input,
            weight_gradient_scratch,
            winograd,
            d_patches,
            patches,
            ..
        } = ws;
        let dz: &[[[[T; OW]; OH]; OC]; B] = if identity { d_output } else { d_pre_activation };
        if Self::UNROLLS {
            self.backward_unrolled(
                x,
                dz,
                patches,
                weight_gradient_scratch,
                d_patches,
                d_input,
                d_weight,
            );
            return;
        }
        let weight = self.weight_matrix();
        // dW = Σ_batch dZ·X̂ᵀ, X̂ read from X where it lies (padded first, unless the
        // kernel pads as it reads, or the workspace holds no padded images): no patches.
        let pads_as_it_reads =
            kernels::conv_weight_gradient_pads::<T>(&Self::DIRECT) || padded_input.is_empty();
        let (shape, images) = if pads_as_it_reads {
            (
                &Self::DIRECT,
                x.as_flattened().as_flattened().as_flattened(),
            )
        } else {
            let padded = &mut *padded_input;
            let len = padded.len() / B.max(1);
            for (x, padded) in x.iter().zip(padded.chunks_exact_mut(len.max(1))) {
                let x = x.as_flattened().as_flattened();
                kernels::pad(&Self::DIRECT, x, padded);
            }
            (&Self::PADDED, &padded_input[..])
        };
        kernels::conv2d_weight_gradient_stride1(
            shape,
            B,
            images,
            dz.as_flattened().as_flattened().as_flattened(),
            &mut weight_gradient_scratch[..scratch],
            d_weight,
            false,
        );
        let mut d_input = d_input;
        // dX by Winograd's method, the whole batch at once, where it applies.
        let d_input_done = d_input.as_deref_mut().is_some_and(|dx| {
            kernels::conv2d_input_gradient_stride1(
                &Self::DIRECT,
                B,
                dz.as_flattened().as_flattened().as_flattened(),
                weight,
                dx.as_flattened_mut().as_flattened_mut().as_flattened_mut(),
                winograd,
            )
        });
        for (b, dz) in dz.iter().enumerate() {
            let dz = dz.as_flattened().as_flattened();
            // A 1 x 1 kernel, stride 1, no padding: the patches are the image, so Wᵀ·dZ is dX.
            if Self::POINTWISE
                && !d_input_done
                && let Some(dx) = d_input.as_deref_mut()
            {
                kernels::gemm_slices(
                    Product::TransposeLhs,
                    (ckk, positions, OC),
                    weight,
                    dz,
                    dx[b].as_flattened_mut().as_flattened_mut(),
                    false,
                );
                continue;
            }
            // dX = col2im(Wᵀ·dZ)          (C·K·K x OC)(OC x OH·OW) -> C·K·K x OH·OW
            if let Some(dx) = d_input.as_deref_mut().filter(|_| !d_input_done) {
                kernels::gemm_slices(
                    Product::TransposeLhs,
                    (ckk, positions, OC),
                    weight,
                    dz,
                    d_patches,
                    false,
                );
                let dx = &mut dx[b];
                *dx = [[[T::zero(); W]; H]; C];
                Self::col2im(d_patches, positions, dx);
            }
        }
    }
}
