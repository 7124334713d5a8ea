//! The weights file: each layer's tensors in constmat's layout and names (PyTorch's
//! `state_dict` names: `3.weight`, `5.branch.0.bias`), converted from the model's. Filters go
//! from TensorFlow Lite's `OHWI` (depthwise: `1HWO`) to constmat's `OIHW`; an int8 layer's bias
//! takes its input's zero point in, and its requantization multipliers are TensorFlow Lite
//! Micro's, computed as its kernels compute them.

use constmat::nn::QuantizedAdd;
use constmat::quant::fixed_point::softmax_input_multiplier;
use constmat::quant::{Multiplier, Quantization};

use crate::error::Error;
use crate::graph::{Dtype, Graph, Tensor};
use crate::lower::Layer;

/// The tensors of the weights file, in the order they are added.
#[derive(Debug, Default)]
pub struct Weights {
    tensors: Vec<(String, Dtype, Vec<usize>, Vec<u8>)>,
}

impl Weights {
    fn add_f32(&mut self, name: &str, shape: Vec<usize>, values: &[f32]) {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensors
            .push((name.to_owned(), Dtype::F32, shape, bytes));
    }

    fn add_i32(&mut self, name: &str, values: &[i32]) {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.tensors
            .push((name.to_owned(), Dtype::I32, vec![values.len()], bytes));
    }

    fn add_i8(&mut self, name: &str, shape: Vec<usize>, values: &[i8]) {
        let bytes = values.iter().map(|&v| v as u8).collect();
        self.tensors
            .push((name.to_owned(), Dtype::I8, shape, bytes));
    }

    fn add_quantization(&mut self, prefix: &str, role: &str, (scale, zero_point): (f32, i32)) {
        self.add_f32(&format!("{prefix}.{role}_scale"), vec![], &[scale]);
        self.add_i8(
            &format!("{prefix}.{role}_zero_point"),
            vec![],
            &[zero_point as i8],
        );
    }

    /// The safetensors file.
    pub fn to_bytes(&self, metadata: &[(&str, String)]) -> Vec<u8> {
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = self
            .tensors
            .iter()
            .map(|(name, dtype, shape, bytes)| {
                let dtype = match dtype {
                    Dtype::F32 => safetensors::Dtype::F32,
                    Dtype::I32 => safetensors::Dtype::I32,
                    Dtype::I8 => safetensors::Dtype::I8,
                };
                let view = safetensors::tensor::TensorView::new(dtype, shape.clone(), bytes)
                    .expect("the shape and the bytes agree");
                (name.clone(), view)
            })
            .collect();
        let metadata = metadata
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        safetensors::serialize(views, Some(metadata)).expect("the tensors serialize")
    }
}

/// Writes the tensors of `layers` (a chain whose modules are numbered from 0 under `prefix`).
pub fn write(
    graph: &Graph<'_>,
    int8: bool,
    layers: &[Layer],
    prefix: &str,
    out: &mut Weights,
) -> Result<(), Error> {
    let mut module = 0;
    for layer in layers {
        let path = format!("{prefix}{module}");
        let activation = match layer {
            Layer::ZeroPad { x, .. } => {
                if int8 {
                    out.add_quantization(&path, "input", graph.tensors[*x].per_tensor()?);
                }
                None
            }
            Layer::Conv {
                op,
                depthwise,
                x,
                filter,
                bias,
                y,
                c,
                oc,
                kernel: (kh, kw),
                activation,
                ..
            } => {
                let f = &graph.tensors[*filter];
                // constmat's [OC, C or 1, KH, KW] from [OC, KH, KW, C] or [1, KH, KW, OC].
                let per_filter = if *depthwise { 1 } else { *c };
                let shape = vec![*oc, per_filter, *kh, *kw];
                let index = |o: usize, i: usize, h: usize, w: usize| {
                    if *depthwise {
                        (h * kw + w) * oc + o
                    } else {
                        ((o * kh + h) * kw + w) * c + i
                    }
                };
                let order: Vec<usize> = (0..*oc)
                    .flat_map(|o| {
                        (0..per_filter).flat_map(move |i| {
                            (0..*kh).flat_map(move |h| (0..*kw).map(move |w| (o, i, h, w)))
                        })
                    })
                    .map(|(o, i, h, w)| index(o, i, h, w))
                    .collect();
                let axis = if *depthwise { 3 } else { 0 };
                filter_layer(
                    graph,
                    int8,
                    *op,
                    &path,
                    (*x, f, *bias, *y),
                    (shape, &order, axis, *oc),
                    false,
                    out,
                )?;
                Some(*activation)
            }
            Layer::Dense {
                op,
                x,
                weight,
                bias,
                y,
                inputs,
                outputs,
                activation,
                hwc,
                ..
            } => {
                let w = &graph.tensors[*weight];
                // Column k of constmat's weight reads input k of `Flatten` (channels first);
                // the file's column reads TensorFlow Lite's (height, width, channels) order.
                let column = |k: usize| match hwc {
                    Some((c, h, wd)) => {
                        let (ch, rest) = (k / (h * wd), k % (h * wd));
                        rest * c + ch
                    }
                    None => k,
                };
                let order: Vec<usize> = (0..*outputs)
                    .flat_map(|o| (0..*inputs).map(move |k| o * inputs + column(k)))
                    .collect();
                filter_layer(
                    graph,
                    int8,
                    *op,
                    &path,
                    (*x, w, *bias, *y),
                    (vec![*outputs, *inputs], &order, 0, *outputs),
                    true,
                    out,
                )?;
                Some(*activation)
            }
            Layer::Softmax { op, x, y, .. } => {
                if int8 {
                    let input = graph.tensors[*x].per_tensor()?;
                    let output = graph.tensors[*y].per_tensor()?;
                    if output != (1.0 / 256.0, -128) {
                        return Err(Error::unsupported(
                            graph.operators[*op].at(),
                            format!(
                                "an output quantization of {output:?}; int8 softmax gives (1/256, -128)"
                            ),
                        ));
                    }
                    let m = softmax_input_multiplier(input.0);
                    out.add_i32(&format!("{path}.multiplier"), &[m.multiplier]);
                    out.add_i32(&format!("{path}.exponent"), &[m.exponent]);
                    out.add_quantization(&path, "input", input);
                }
                None
            }
            Layer::Residual {
                op,
                branch,
                shortcut,
                branch_out,
                shortcut_out,
                y,
                activation,
            } => {
                write(graph, int8, branch, &format!("{path}.branch."), out)?;
                write(graph, int8, shortcut, &format!("{path}.shortcut."), out)?;
                if int8 {
                    let q = |t: usize| graph.tensors[t].per_tensor();
                    let [b, s, o] = [q(*branch_out)?, q(*shortcut_out)?, q(*y)?];
                    let quantization = |(scale, zero_point): (f32, i32)| Quantization {
                        scale,
                        zero_point: zero_point as i8,
                    };
                    let reals = QuantizedAdd::multipliers(
                        quantization(b),
                        quantization(s),
                        quantization(o),
                    );
                    if let Some(r) = reals.iter().find(|r| !(0.0..MAX_MULTIPLIER).contains(*r)) {
                        return Err(Error::unsupported(
                            graph.operators[*op].at(),
                            format!("a requantization multiplier of {r}"),
                        ));
                    }
                    let add = QuantizedAdd::new(quantization(b), quantization(s), quantization(o));
                    out.add_i32(&format!("{path}.multiplier"), &add.multiplier);
                    out.add_i32(&format!("{path}.exponent"), &add.exponent);
                    out.add_quantization(&path, "branch", b);
                    out.add_quantization(&path, "shortcut", s);
                    out.add_quantization(&path, "output", o);
                }
                Some(*activation)
            }
            Layer::GlobalAvgPool { .. } | Layer::Pool { .. } | Layer::Flatten => None,
        };
        module += 1 + usize::from(activation.is_some_and(|a| a != crate::graph::Activation::None));
    }
    Ok(())
}

/// The largest requantization multiplier constmat's fixed point holds (`Multiplier::from_real`).
const MAX_MULTIPLIER: f64 = (1u64 << 30) as f64;

/// The tensors of a convolution or dense layer: the weight reordered by `order` (the file's
/// index of each of constmat's values) into `shape`, the bias, and for int8 the folded bias,
/// the multipliers and the quantizations. `per_tensor_f32`: the multiplier of a per-tensor
/// filter is `s_in · s_w` in `f32` (TensorFlow Lite's `FULLY_CONNECTED`), else in `f64`.
#[allow(clippy::too_many_arguments)]
fn filter_layer(
    graph: &Graph<'_>,
    int8: bool,
    op: usize,
    path: &str,
    (x, w, bias, y): (usize, &Tensor<'_>, Option<usize>, usize),
    (shape, order, axis, channels): (Vec<usize>, &[usize], usize, usize),
    per_tensor_f32: bool,
    out: &mut Weights,
) -> Result<(), Error> {
    let at = graph.operators[op].at();
    let per_channel = order.len() / channels;
    if !int8 {
        expect_dtype(w, Dtype::F32)?;
        let values: Vec<f32> = w.values()?;
        let weight: Vec<f32> = order.iter().map(|&i| values[i]).collect();
        let bias = match bias {
            Some(b) => {
                let b = &graph.tensors[b];
                expect_dtype(b, Dtype::F32)?;
                bias_values(b, channels)?
            }
            None => vec![0.0; channels],
        };
        out.add_f32(&format!("{path}.weight"), shape, &weight);
        out.add_f32(&format!("{path}.bias"), vec![channels], &bias);
        return Ok(());
    }
    expect_dtype(w, Dtype::I8)?;
    let values: Vec<i8> = w.values()?;
    if values.contains(&-128) {
        return Err(Error::unsupported(
            w.at(),
            "a weight of -128; int8 filters are symmetric, -127..=127",
        ));
    }
    let weight: Vec<i8> = order.iter().map(|&i| values[i]).collect();
    let q = w
        .quant
        .as_ref()
        .ok_or_else(|| Error::unsupported(w.at(), "no quantization"))?;
    if q.zero_points.iter().any(|&z| z != 0) {
        return Err(Error::unsupported(
            w.at(),
            "a filter zero point other than 0; int8 filters are symmetric",
        ));
    }
    let scales: Vec<f32> = match q.scales.len() {
        1 => vec![q.scales[0]; channels],
        n if n == channels && q.dimension == axis => q.scales.clone(),
        n => {
            return Err(Error::unsupported(
                w.at(),
                format!(
                    "{n} scales along dimension {}; expected 1, or {channels} along dimension {axis}",
                    q.dimension
                ),
            ));
        }
    };
    let input = graph.tensors[x].per_tensor()?;
    let output = graph.tensors[y].per_tensor()?;
    let raw_bias: Vec<i32> = match bias {
        Some(b) => {
            let b = &graph.tensors[b];
            expect_dtype(b, Dtype::I32)?;
            bias_values(b, channels)?
        }
        None => vec![0; channels],
    };
    let mut folded = Vec::with_capacity(channels);
    let mut multipliers = Vec::with_capacity(channels);
    for o in 0..channels {
        let sum: i64 = weight[o * per_channel..(o + 1) * per_channel]
            .iter()
            .map(|&v| i64::from(v))
            .sum();
        let b = i64::from(raw_bias[o]) - i64::from(input.1) * sum;
        folded.push(i32::try_from(b).map_err(|_| {
            Error::unsupported(
                at.clone(),
                "a bias that overflows i32 with the input's zero point folded in",
            )
        })?);
        let real = if per_tensor_f32 && q.scales.len() == 1 {
            f64::from(input.0 * scales[o]) / f64::from(output.0)
        } else {
            f64::from(input.0) * f64::from(scales[o]) / f64::from(output.0)
        };
        if !(real.is_finite() && (0.0..MAX_MULTIPLIER).contains(&real)) {
            return Err(Error::unsupported(
                at.clone(),
                format!("a requantization multiplier of {real}"),
            ));
        }
        multipliers.push(Multiplier::from_real(real));
    }
    out.add_i8(&format!("{path}.weight"), shape, &weight);
    out.add_i32(&format!("{path}.bias"), &folded);
    out.add_i32(
        &format!("{path}.multiplier"),
        &multipliers.iter().map(|m| m.multiplier).collect::<Vec<_>>(),
    );
    out.add_i32(
        &format!("{path}.exponent"),
        &multipliers.iter().map(|m| m.exponent).collect::<Vec<_>>(),
    );
    out.add_quantization(path, "input", input);
    out.add_quantization(path, "output", output);
    Ok(())
}

fn expect_dtype(t: &Tensor<'_>, dtype: Dtype) -> Result<(), Error> {
    if t.dtype == dtype {
        Ok(())
    } else {
        Err(Error::unsupported(
            t.at(),
            format!(
                "elements of {}, where this model's layers take {} (a hybrid model?)",
                t.dtype.name(),
                dtype.name()
            ),
        ))
    }
}

fn bias_values<T: crate::graph::FromLe>(b: &Tensor<'_>, channels: usize) -> Result<Vec<T>, Error> {
    if b.shape != [channels] {
        return Err(Error::unsupported(
            b.at(),
            format!("a bias of shape {:?} for {channels} outputs", b.shape),
        ));
    }
    b.values()
}
