//! The model's one subgraph read out of the flatbuffer into plain values: its tensors (shape,
//! element type, quantization, constant data) and its operators (kind and options), each
//! checked against what constmat can express. Nothing here knows constmat's layers.

use crate::error::Error;
use crate::schema_generated::tflite;

/// An element type the importer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// `FLOAT32`.
    F32,
    /// `INT8`.
    I8,
    /// `INT32` (int8 models' biases, a reshape's shape).
    I32,
}

impl Dtype {
    /// TensorFlow Lite's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::F32 => "FLOAT32",
            Self::I8 => "INT8",
            Self::I32 => "INT32",
        }
    }

    fn size(self) -> usize {
        match self {
            Self::I8 => 1,
            Self::F32 | Self::I32 => 4,
        }
    }
}

/// A tensor's quantization: one scale and zero point, or one per channel along `dimension`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quant {
    /// The scales (`real = scale · (q - zero_point)`).
    pub scales: Vec<f32>,
    /// The zero points, one per scale.
    pub zero_points: Vec<i64>,
    /// The dimension the scales run along (per-channel quantization).
    pub dimension: usize,
}

/// A tensor of the subgraph.
#[derive(Debug, Clone)]
pub struct Tensor<'a> {
    /// Its index in the subgraph.
    pub index: usize,
    /// Its name in the file (for messages).
    pub name: String,
    /// Its shape, every size at least 1.
    pub shape: Vec<usize>,
    /// Its element type.
    pub dtype: Dtype,
    /// Its quantization, if any.
    pub quant: Option<Quant>,
    /// Its constant data (little-endian), if the file holds it.
    pub data: Option<&'a [u8]>,
}

impl Tensor<'_> {
    /// `tensor #7 "conv1/weights"`, for messages.
    pub fn at(&self) -> String {
        format!("tensor #{} {:?}", self.index, self.name)
    }

    /// The per-tensor quantization (one scale, one zero point in `-128..=127`).
    pub fn per_tensor(&self) -> Result<(f32, i32), Error> {
        match &self.quant {
            Some(q) if q.scales.len() == 1 && q.zero_points.len() == 1 => {
                let (scale, zero) = (q.scales[0], q.zero_points[0]);
                if !(scale.is_finite() && scale > 0.0 && (-128..=127).contains(&zero)) {
                    return Err(Error::unsupported(
                        self.at(),
                        format!(
                            "a scale of {scale} and a zero point of {zero}; int8 takes a positive scale and a zero point in -128..=127"
                        ),
                    ));
                }
                Ok((scale, zero as i32))
            }
            _ => Err(Error::unsupported(
                self.at(),
                "no per-tensor quantization (one scale and one zero point); int8 activations need one",
            )),
        }
    }

    /// Its constant data as `T`s, in the file's order.
    pub fn values<T: FromLe>(&self) -> Result<Vec<T>, Error> {
        let data = self.data.ok_or_else(|| {
            Error::unsupported(
                self.at(),
                "no data in the file; a weight must be a constant",
            )
        })?;
        let count: usize = self.shape.iter().product();
        if data.len() != count * self.dtype.size() {
            return Err(Error::corrupt(format!(
                "{} has {} bytes of data for {count} values of {}",
                self.at(),
                data.len(),
                self.dtype.name()
            )));
        }
        Ok(data
            .chunks_exact(self.dtype.size())
            .map(T::from_le)
            .collect())
    }
}

/// An element read from little-endian bytes.
pub trait FromLe {
    /// The value of `bytes`.
    fn from_le(bytes: &[u8]) -> Self;
}

impl FromLe for f32 {
    fn from_le(bytes: &[u8]) -> Self {
        f32::from_le_bytes(bytes.try_into().expect("4 bytes"))
    }
}

impl FromLe for i32 {
    fn from_le(bytes: &[u8]) -> Self {
        i32::from_le_bytes(bytes.try_into().expect("4 bytes"))
    }
}

impl FromLe for i8 {
    fn from_le(bytes: &[u8]) -> Self {
        bytes[0] as i8
    }
}

/// A fused activation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Activation {
    /// `NONE`.
    None,
    /// `RELU`.
    Relu,
    /// `RELU6`.
    Relu6,
}

/// TensorFlow Lite's padding rule of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// `SAME`: `ceil(size / stride)` outputs, the padding split with the odd one after.
    Same,
    /// `VALID`: no padding.
    Valid,
}

/// An operator's kind and options.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `CONV_2D` (inputs: image, filter `[OC, KH, KW, C]`, bias).
    Conv {
        padding: Padding,
        stride: (usize, usize),
        activation: Activation,
    },
    /// `DEPTHWISE_CONV_2D` (inputs: image, filter `[1, KH, KW, OC]`, bias).
    Depthwise {
        padding: Padding,
        stride: (usize, usize),
        activation: Activation,
    },
    /// `AVERAGE_POOL_2D`.
    AveragePool {
        padding: Padding,
        stride: (usize, usize),
        filter: (usize, usize),
        activation: Activation,
    },
    /// `MAX_POOL_2D`.
    MaxPool {
        padding: Padding,
        stride: (usize, usize),
        filter: (usize, usize),
        activation: Activation,
    },
    /// `ADD` (a residual block's sum).
    Add { activation: Activation },
    /// `FULLY_CONNECTED` (inputs: vector, weight `[O, I]`, bias).
    FullyConnected { activation: Activation },
    /// `RESHAPE`.
    Reshape,
    /// `SOFTMAX` (beta 1).
    Softmax,
}

/// An operator of the subgraph.
#[derive(Debug, Clone)]
pub struct Operator {
    /// Its index in the subgraph.
    pub index: usize,
    /// TensorFlow Lite's name of it.
    pub name: &'static str,
    /// Its kind and options.
    pub kind: Kind,
    /// Its input tensors (`None`: an optional input left out, as a missing bias).
    pub inputs: Vec<Option<usize>>,
    /// Its output tensors.
    pub outputs: Vec<usize>,
}

impl Operator {
    /// `operator #3 (CONV_2D)`, for messages.
    pub fn at(&self) -> String {
        format!("operator #{} ({})", self.index, self.name)
    }

    /// Input `i`, which must be there.
    pub fn input(&self, i: usize) -> Result<usize, Error> {
        self.inputs.get(i).copied().flatten().ok_or_else(|| {
            Error::unsupported(self.at(), format!("no input #{i}; the operator needs it"))
        })
    }

    /// The one output.
    pub fn output(&self) -> Result<usize, Error> {
        match self.outputs[..] {
            [y] => Ok(y),
            _ => Err(Error::unsupported(
                self.at(),
                format!(
                    "{} outputs; every operator constmat reads has one",
                    self.outputs.len()
                ),
            )),
        }
    }
}

/// The model's subgraph.
#[derive(Debug, Clone)]
pub struct Graph<'a> {
    /// Its tensors, by index.
    pub tensors: Vec<Tensor<'a>>,
    /// Its operators, in the order they run.
    pub operators: Vec<Operator>,
    /// The one input tensor.
    pub input: usize,
    /// The one output tensor.
    pub output: usize,
}

/// The operators the importer reads, by builtin code.
const OPERATORS: &str = "CONV_2D, DEPTHWISE_CONV_2D, AVERAGE_POOL_2D, MAX_POOL_2D, ADD, FULLY_CONNECTED, RESHAPE and SOFTMAX";

/// Reads `bytes`, a `.tflite` file, into its subgraph.
pub fn read(bytes: &[u8]) -> Result<Graph<'_>, Error> {
    let model = tflite::root_as_model(bytes).map_err(Error::corrupt)?;
    let subgraphs = model
        .subgraphs()
        .ok_or_else(|| Error::corrupt("no subgraphs"))?;
    if subgraphs.len() != 1 {
        return Err(Error::unsupported(
            "the model",
            format!(
                "{} subgraphs; constmat imports a model of one",
                subgraphs.len()
            ),
        ));
    }
    let graph = subgraphs.get(0);
    let buffers = model.buffers();
    let codes = model.operator_codes();

    let mut tensors = Vec::new();
    for (index, t) in graph.tensors().into_iter().flatten().enumerate() {
        tensors.push(tensor(index, &t, buffers)?);
    }
    let tensor_index = |i: i32, what: &str| -> Result<usize, Error> {
        usize::try_from(i)
            .ok()
            .filter(|&i| i < tensors.len())
            .ok_or_else(|| Error::corrupt(format!("{what} names tensor {i}, of {}", tensors.len())))
    };

    let mut operators = Vec::new();
    for (index, op) in graph.operators().into_iter().flatten().enumerate() {
        let code = codes
            .and_then(|c| c.iter().nth(op.opcode_index() as usize))
            .ok_or_else(|| Error::corrupt(format!("operator #{index} has no operator code")))?;
        // Files written before the 8-bit code ran out hold it in the deprecated field.
        let builtin = tflite::BuiltinOperator(
            code.builtin_code()
                .0
                .max(i32::from(code.deprecated_builtin_code())),
        );
        let what = format!("operator #{index}");
        let mut inputs = Vec::new();
        for i in op.inputs().into_iter().flatten() {
            inputs.push(if i < 0 {
                None
            } else {
                Some(tensor_index(i, &what)?)
            });
        }
        let mut outputs = Vec::new();
        for i in op.outputs().into_iter().flatten() {
            outputs.push(tensor_index(i, &what)?);
        }
        let (name, kind) = kind(index, builtin, &op)?;
        operators.push(Operator {
            index,
            name,
            kind,
            inputs,
            outputs,
        });
    }

    let one = |list: Option<flatbuffers::Vector<'_, i32>>, what: &str| -> Result<usize, Error> {
        let list: Vec<i32> = list.into_iter().flatten().collect();
        match list[..] {
            [i] => tensor_index(i, what),
            _ => Err(Error::unsupported(
                "the model",
                format!(
                    "{} {what}s; constmat imports a model of one input and one output",
                    list.len()
                ),
            )),
        }
    };
    Ok(Graph {
        input: one(graph.inputs(), "input")?,
        output: one(graph.outputs(), "output")?,
        tensors,
        operators,
    })
}

fn tensor<'a>(
    index: usize,
    t: &tflite::Tensor<'a>,
    buffers: Option<flatbuffers::Vector<'a, flatbuffers::ForwardsUOffset<tflite::Buffer<'a>>>>,
) -> Result<Tensor<'a>, Error> {
    let name = t.name().unwrap_or("").to_owned();
    let at = format!("tensor #{index} {name:?}");
    let dtype = match t.type_() {
        tflite::TensorType::FLOAT32 => Dtype::F32,
        tflite::TensorType::INT8 => Dtype::I8,
        tflite::TensorType::INT32 => Dtype::I32,
        other => {
            return Err(Error::unsupported(
                at,
                format!(
                    "elements of type {}; constmat reads FLOAT32, INT8 and INT32",
                    other.variant_name().unwrap_or("unknown")
                ),
            ));
        }
    };
    if t.sparsity().is_some() {
        return Err(Error::unsupported(
            at,
            "sparse; constmat reads dense tensors",
        ));
    }
    if let Some(signature) = t.shape_signature()
        && signature.iter().skip(1).any(|s| s < 0)
    {
        return Err(Error::unsupported(
            at,
            "a dynamic shape; constmat's shapes are fixed",
        ));
    }
    let mut shape = Vec::new();
    for s in t.shape().into_iter().flatten() {
        match usize::try_from(s) {
            Ok(s) if s > 0 => shape.push(s),
            _ => {
                return Err(Error::unsupported(
                    at,
                    format!("a size of {s}; every size is at least 1"),
                ));
            }
        }
    }
    let quant = match t.quantization() {
        Some(q) if q.scale().is_some_and(|s| !s.is_empty()) => {
            let scales: Vec<f32> = q.scale().into_iter().flatten().collect();
            let zero_points: Vec<i64> = q.zero_point().into_iter().flatten().collect();
            if zero_points.len() != scales.len() {
                return Err(Error::corrupt(format!(
                    "{at} has {} scales and {} zero points",
                    scales.len(),
                    zero_points.len()
                )));
            }
            let dimension = usize::try_from(q.quantized_dimension())
                .ok()
                .filter(|&d| d < shape.len().max(1))
                .ok_or_else(|| {
                    Error::corrupt(format!(
                        "{at} is quantized along dimension {}",
                        q.quantized_dimension()
                    ))
                })?;
            Some(Quant {
                scales,
                zero_points,
                dimension,
            })
        }
        _ => None,
    };
    let data = match (t.buffer(), buffers) {
        (0, _) | (_, None) => None,
        (b, Some(buffers)) => {
            let buffer = buffers.iter().nth(b as usize).ok_or_else(|| {
                Error::corrupt(format!("{at} names buffer {b}, of {}", buffers.len()))
            })?;
            buffer.data().map(|d| d.bytes()).filter(|d| !d.is_empty())
        }
    };
    Ok(Tensor {
        index,
        name,
        shape,
        dtype,
        quant,
        data,
    })
}

fn activation(at: &str, a: tflite::ActivationFunctionType) -> Result<Activation, Error> {
    match a {
        tflite::ActivationFunctionType::NONE => Ok(Activation::None),
        tflite::ActivationFunctionType::RELU => Ok(Activation::Relu),
        tflite::ActivationFunctionType::RELU6 => Ok(Activation::Relu6),
        other => Err(Error::unsupported(
            at,
            format!(
                "the fused activation {}; constmat fuses NONE, RELU and RELU6",
                other.variant_name().unwrap_or("unknown")
            ),
        )),
    }
}

fn padding(at: &str, p: tflite::Padding) -> Result<Padding, Error> {
    match p {
        tflite::Padding::SAME => Ok(Padding::Same),
        tflite::Padding::VALID => Ok(Padding::Valid),
        other => Err(Error::corrupt(format!("{at} has padding {}", other.0))),
    }
}

fn positive(at: &str, what: &str, v: i32) -> Result<usize, Error> {
    usize::try_from(v)
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| Error::corrupt(format!("{at} has a {what} of {v}")))
}

fn kind(
    index: usize,
    code: tflite::BuiltinOperator,
    op: &tflite::Operator<'_>,
) -> Result<(&'static str, Kind), Error> {
    use tflite::BuiltinOperator as B;
    let name = code.variant_name().unwrap_or("an unknown operator");
    let at = format!("operator #{index} ({name})");
    let missing = || Error::corrupt(format!("{at} has no options"));
    let no_dilation = |h: i32, w: i32| {
        if (h, w) == (1, 1) {
            Ok(())
        } else {
            Err(Error::unsupported(
                at.clone(),
                format!("a dilation of {h} x {w}; constmat's convolutions are not dilated"),
            ))
        }
    };
    let kind = match code {
        B::CONV_2D => {
            let o = op
                .builtin_options_as_conv_2_doptions()
                .ok_or_else(missing)?;
            no_dilation(o.dilation_h_factor(), o.dilation_w_factor())?;
            Kind::Conv {
                padding: padding(&at, o.padding())?,
                stride: (
                    positive(&at, "stride", o.stride_h())?,
                    positive(&at, "stride", o.stride_w())?,
                ),
                activation: activation(&at, o.fused_activation_function())?,
            }
        }
        B::DEPTHWISE_CONV_2D => {
            let o = op
                .builtin_options_as_depthwise_conv_2_doptions()
                .ok_or_else(missing)?;
            no_dilation(o.dilation_h_factor(), o.dilation_w_factor())?;
            Kind::Depthwise {
                padding: padding(&at, o.padding())?,
                stride: (
                    positive(&at, "stride", o.stride_h())?,
                    positive(&at, "stride", o.stride_w())?,
                ),
                activation: activation(&at, o.fused_activation_function())?,
            }
        }
        B::AVERAGE_POOL_2D | B::MAX_POOL_2D => {
            let o = op
                .builtin_options_as_pool_2_doptions()
                .ok_or_else(missing)?;
            let (padding, stride, filter, activation) = (
                padding(&at, o.padding())?,
                (
                    positive(&at, "stride", o.stride_h())?,
                    positive(&at, "stride", o.stride_w())?,
                ),
                (
                    positive(&at, "filter size", o.filter_height())?,
                    positive(&at, "filter size", o.filter_width())?,
                ),
                activation(&at, o.fused_activation_function())?,
            );
            if code == B::AVERAGE_POOL_2D {
                Kind::AveragePool {
                    padding,
                    stride,
                    filter,
                    activation,
                }
            } else {
                Kind::MaxPool {
                    padding,
                    stride,
                    filter,
                    activation,
                }
            }
        }
        B::ADD => {
            let o = op.builtin_options_as_add_options().ok_or_else(missing)?;
            Kind::Add {
                activation: activation(&at, o.fused_activation_function())?,
            }
        }
        B::FULLY_CONNECTED => {
            let o = op
                .builtin_options_as_fully_connected_options()
                .ok_or_else(missing)?;
            if o.weights_format() != tflite::FullyConnectedOptionsWeightsFormat::DEFAULT {
                return Err(Error::unsupported(
                    at,
                    "shuffled weights; constmat reads the DEFAULT format",
                ));
            }
            if o.keep_num_dims() {
                return Err(Error::unsupported(
                    at,
                    "keep_num_dims; constmat's dense layers take and give vectors",
                ));
            }
            Kind::FullyConnected {
                activation: activation(&at, o.fused_activation_function())?,
            }
        }
        B::RESHAPE => Kind::Reshape,
        B::SOFTMAX => {
            let beta = op
                .builtin_options_as_softmax_options()
                .map_or(1.0, |o| o.beta());
            if beta != 1.0 {
                return Err(Error::unsupported(
                    at,
                    format!("a beta of {beta}; constmat's softmax has beta 1"),
                ));
            }
            Kind::Softmax
        }
        _ => {
            return Err(Error::unsupported(
                at,
                format!("constmat has no layer for it; it imports {OPERATORS}"),
            ));
        }
    };
    Ok((code.variant_name().unwrap_or("?"), kind))
}
