//! The suite's nets: each as a constmat `net!` type and as the [`Op`]s `peers.py suite` builds
//! in PyTorch ([`NetDef`], the list [`NETS`]), with their description, expected tensors, FLOPs
//! and JSON.

use constmat::nn::{Dense, Layer, Relu};
use serde_json::{Value, json};

use super::figure::Figure;
use super::runner::{SuiteData, SuiteNet, make};
use crate::common::EVAL;

/// 1. The LeNet-5 of `examples/mnist_cnn` (the harness's CNN rows).
type LeNet = crate::cnn::LeNet;

/// 2. The MLP of `examples/mnist_static` (the harness's MLP rows).
type Mlp = crate::constmat_peer::Net;

/// 3. A CIFAR-style CNN.
type Cifar = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 32, 3, 1, 1, Relu>,
    MaxPool2d<2>,
    Conv2d<32, 64, 3, 1, 1, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<4096, 128, Relu>,
    Dense<128, 10>,
];

/// 4. Stride-2 convolutions instead of pooling.
type Strided = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 16, 3, 2, 1, Relu>,
    Conv2d<16, 32, 3, 2, 1, Relu>,
    Flatten,
    Dense<1568, 10>,
];

/// 5. A wide MLP.
type WideMlp = constmat::net![
    Dense<f32, 784, 512, Relu>,
    Dense<f32, 512, 512, Relu>,
    Dense<f32, 512, 10>,
];

/// 6. 5 x 5 filters on 64 channels.
type Wide5x5 = constmat::net![
    Input<f32, 3, 32, 32>,
    Conv2d<3, 64, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Conv2d<64, 64, 5, 1, 2, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<4096, 10>,
];

/// 7. A 7 x 7 stride-2 stem, then a 1 x 1 convolution.
type Stem7x7 = constmat::net![
    Input<f32, 3, 64, 64>,
    Conv2d<3, 32, 7, 2, 3, Relu>,
    MaxPool2d<2>,
    Conv2d<32, 64, 1, Relu>,
    MaxPool2d<2>,
    Flatten,
    Dense<4096, 10>,
];

/// 8. MLPerf Tiny's ResNet-8 with one input channel, as `examples/fashion_resnet` trains it.
///
/// Batch normalization, residual blocks with 1 x 1 strided projections, a global average pool.
type ResNet8 = constmat::net![
    Input<f32, 1, 28, 28>,
    Conv2d<1, 16, 3, 1, 1>,
    BatchNorm2d<16, Relu>,
    Residual<[
        Conv2d<16, 16, 3, 1, 1>, BatchNorm2d<16, Relu>,
        Conv2d<16, 16, 3, 1, 1>, BatchNorm2d<16>,
    ], Relu>,
    Residual<[
        Conv2d<16, 32, 3, 2, 1>, BatchNorm2d<32, Relu>,
        Conv2d<32, 32, 3, 1, 1>, BatchNorm2d<32>,
    ], [Conv2d<16, 32, 1, 2, 0>], Relu>,
    Residual<[
        Conv2d<32, 64, 3, 2, 1>, BatchNorm2d<64, Relu>,
        Conv2d<64, 64, 3, 1, 1>, BatchNorm2d<64>,
    ], [Conv2d<32, 64, 1, 2, 0>], Relu>,
    AvgPool2d<7>,
    Flatten,
    Dense<64, 10>,
];

/// 9. MLPerf Tiny's DS-CNN for keyword spotting (49 x 10 MFCCs, 12 classes), as it is trained.
///
/// TensorFlow's uneven `SAME` padding, a 10 x 4 stride-2 convolution, four depthwise-separable
/// blocks, each convolution followed by batch normalization, a global average pool.
type DsCnn = constmat::net![
    Input<f32, 1, 49, 10>,
    ZeroPad2d<1, 1, 4, 5>,
    Conv2d<1, 64, (10, 4), 2, 0>, BatchNorm2d<64, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1>, BatchNorm2d<64, Relu>,
    Conv2d<64, 64, 1>, BatchNorm2d<64, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1>, BatchNorm2d<64, Relu>,
    Conv2d<64, 64, 1>, BatchNorm2d<64, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1>, BatchNorm2d<64, Relu>,
    Conv2d<64, 64, 1>, BatchNorm2d<64, Relu>,
    DepthwiseConv2d<64, 64, 3, 1, 1>, BatchNorm2d<64, Relu>,
    Conv2d<64, 64, 1>, BatchNorm2d<64, Relu>,
    GlobalAvgPool2d,
    Flatten,
    Dense<64, 12>,
];

/// One layer, as `peers.py` builds it in PyTorch (and as the tables describe it).
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// `Conv2d(input, output, (kernel height, kernel width), stride, padding)`, then `ReLU`
    /// when `relu`.
    Conv {
        input: usize,
        output: usize,
        kernel: [usize; 2],
        stride: usize,
        padding: usize,
        relu: bool,
    },
    /// `Conv2d(channels, channels, kernel, stride, padding, groups=channels)` (depthwise, one
    /// filter per channel), then `ReLU` when `relu`.
    Depthwise {
        channels: usize,
        kernel: usize,
        stride: usize,
        padding: usize,
        relu: bool,
    },
    /// `ZeroPad2d((left, right, top, bottom))`.
    ZeroPad([usize; 4]),
    /// `AdaptiveAvgPool2d(1)`: each channel's mean.
    GlobalAvgPool,
    /// `MaxPool2d(k)`.
    MaxPool(usize),
    /// `AvgPool2d(k)`.
    AvgPool(usize),
    /// `BatchNorm2d(channels)`, then `ReLU` when `relu`.
    BatchNorm {
        channels: usize,
        relu: bool,
    },
    /// A module computing `branch(x) + shortcut(x)` (the shortcut the identity when empty),
    /// then `ReLU` when `relu`.
    Residual {
        branch: &'static [Op],
        shortcut: &'static [Op],
        relu: bool,
    },
    Flatten,
    /// `Linear(input, output)`, then `ReLU` when `relu`.
    Dense {
        input: usize,
        output: usize,
        relu: bool,
    },
}

const fn conv(input: usize, output: usize, kernel: usize, stride: usize, padding: usize) -> Op {
    Op::Conv {
        input,
        output,
        kernel: [kernel, kernel],
        stride,
        padding,
        relu: true,
    }
}

/// A convolution without an activation (batch normalization follows).
const fn conv_only(
    input: usize,
    output: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
) -> Op {
    Op::Conv {
        input,
        output,
        kernel: [kernel, kernel],
        stride,
        padding,
        relu: false,
    }
}

/// A depthwise-separable block of DS-CNN: a 3 x 3 depthwise convolution and a 1 x 1 one, each
/// followed by batch normalization and ReLU.
const fn separable(channels: usize) -> [Op; 4] {
    [
        Op::Depthwise {
            channels,
            kernel: 3,
            stride: 1,
            padding: 1,
            relu: false,
        },
        batch_norm(channels, true),
        conv_only(channels, channels, 1, 1, 0),
        batch_norm(channels, true),
    ]
}

/// The layers of [`DsCnn`]: the padding, the first convolution and its normalization, four
/// [`separable`] blocks, the pool and the classifier.
const DS_CNN: [Op; 22] = {
    let mut ops = [Op::Flatten; 22];
    ops[0] = Op::ZeroPad([1, 1, 4, 5]);
    ops[1] = Op::Conv {
        input: 1,
        output: 64,
        kernel: [10, 4],
        stride: 2,
        padding: 0,
        relu: false,
    };
    ops[2] = batch_norm(64, true);
    let block = separable(64);
    let mut i = 0;
    while i < 16 {
        ops[3 + i] = block[i % 4];
        i += 1;
    }
    ops[19] = Op::GlobalAvgPool;
    ops[20] = Op::Flatten;
    ops[21] = dense(64, 12, false);
    ops
};

const fn batch_norm(channels: usize, relu: bool) -> Op {
    Op::BatchNorm { channels, relu }
}

const fn dense(input: usize, output: usize, relu: bool) -> Op {
    Op::Dense {
        input,
        output,
        relu,
    }
}

/// A net of the suite.
pub struct NetDef {
    /// Its name on the command line (`--nets`) and in `peers.py`'s JSON.
    pub key: &'static str,
    pub title: &'static str,
    /// The shape of one sample: `[784]` or `[C, H, W]`.
    pub input: &'static [usize],
    pub ops: &'static [Op],
    /// The batch of the training step.
    pub batch: usize,
    /// The seed of the initial weights (constmat's initialization) and of the data.
    pub seed: u64,
    /// constmat's net, from the seed, with the data loaded.
    pub(super) make: fn(u64, &SuiteData) -> Box<dyn SuiteNet>,
}

/// Every net of the suite, in the order of the tables.
pub const NETS: &[NetDef] = &[
    NetDef {
        key: "lenet",
        title: "LeNet-5",
        input: &[1, 28, 28],
        ops: &[
            conv(1, 6, 5, 1, 2),
            Op::MaxPool(2),
            conv(6, 16, 5, 1, 0),
            Op::MaxPool(2),
            Op::Flatten,
            dense(400, 120, true),
            dense(120, 84, true),
            dense(84, 10, false),
        ],
        batch: 64,
        seed: 101,
        make: make::<LeNet, 64, { LeNet::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "mlp",
        title: "MNIST MLP 784-128-64-10",
        input: &[784],
        ops: &[
            dense(784, 128, true),
            dense(128, 64, true),
            dense(64, 10, false),
        ],
        batch: 64,
        seed: 102,
        make: make::<Mlp, 64, { Mlp::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "cifar",
        title: "CIFAR-style CNN",
        input: &[3, 32, 32],
        ops: &[
            conv(3, 32, 3, 1, 1),
            Op::MaxPool(2),
            conv(32, 64, 3, 1, 1),
            Op::MaxPool(2),
            Op::Flatten,
            dense(4096, 128, true),
            dense(128, 10, false),
        ],
        batch: 64,
        seed: 103,
        make: make::<Cifar, 64, { Cifar::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "strided",
        title: "strided CNN",
        input: &[1, 28, 28],
        ops: &[
            conv(1, 16, 3, 2, 1),
            conv(16, 32, 3, 2, 1),
            Op::Flatten,
            dense(1568, 10, false),
        ],
        batch: 64,
        seed: 104,
        make: make::<Strided, 64, { Strided::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "wide-mlp",
        title: "wide MLP 784-512-512-10",
        input: &[784],
        ops: &[
            dense(784, 512, true),
            dense(512, 512, true),
            dense(512, 10, false),
        ],
        batch: 128,
        seed: 105,
        make: make::<WideMlp, 128, { WideMlp::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "conv5x5",
        title: "5x5 filters on 64 channels",
        input: &[3, 32, 32],
        ops: &[
            conv(3, 64, 5, 1, 2),
            Op::MaxPool(2),
            conv(64, 64, 5, 1, 2),
            Op::MaxPool(2),
            Op::Flatten,
            dense(4096, 10, false),
        ],
        batch: 64,
        seed: 106,
        make: make::<Wide5x5, 64, { Wide5x5::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "stem7x7",
        title: "7x7 stride-2 stem, then 1x1",
        input: &[3, 64, 64],
        ops: &[
            conv(3, 32, 7, 2, 3),
            Op::MaxPool(2),
            conv(32, 64, 1, 1, 0),
            Op::MaxPool(2),
            Op::Flatten,
            dense(4096, 10, false),
        ],
        batch: 64,
        seed: 107,
        make: make::<Stem7x7, 64, { Stem7x7::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "resnet8",
        title: "ResNet-8 (MLPerf Tiny, batch norm)",
        input: &[1, 28, 28],
        ops: &[
            conv_only(1, 16, 3, 1, 1),
            batch_norm(16, true),
            Op::Residual {
                branch: &[
                    conv_only(16, 16, 3, 1, 1),
                    batch_norm(16, true),
                    conv_only(16, 16, 3, 1, 1),
                    batch_norm(16, false),
                ],
                shortcut: &[],
                relu: true,
            },
            Op::Residual {
                branch: &[
                    conv_only(16, 32, 3, 2, 1),
                    batch_norm(32, true),
                    conv_only(32, 32, 3, 1, 1),
                    batch_norm(32, false),
                ],
                shortcut: &[conv_only(16, 32, 1, 2, 0)],
                relu: true,
            },
            Op::Residual {
                branch: &[
                    conv_only(32, 64, 3, 2, 1),
                    batch_norm(64, true),
                    conv_only(64, 64, 3, 1, 1),
                    batch_norm(64, false),
                ],
                shortcut: &[conv_only(32, 64, 1, 2, 0)],
                relu: true,
            },
            Op::AvgPool(7),
            Op::Flatten,
            dense(64, 10, false),
        ],
        batch: 64,
        seed: 108,
        make: make::<ResNet8, 64, { ResNet8::PREDICT_SCRATCH }, 10>,
    },
    NetDef {
        key: "dscnn",
        title: "DS-CNN (MLPerf Tiny, batch norm)",
        input: &[1, 49, 10],
        ops: &DS_CNN,
        batch: 64,
        seed: 109,
        make: make::<DsCnn, 64, { DsCnn::PREDICT_SCRATCH }, 12>,
    },
];

impl NetDef {
    /// Values of one sample.
    pub fn input_len(&self) -> usize {
        self.input.iter().product()
    }

    /// `3x32x32`, or `784`.
    fn input_shape(&self) -> String {
        let dims: Vec<String> = self.input.iter().map(usize::to_string).collect();
        dims.join("x")
    }

    /// The layers in words: `Conv 3→32 k3 p1 ReLU, MaxPool 2, Flatten, Dense 4096→10`.
    pub fn describe(&self) -> String {
        format!("input {}: {}", self.input_shape(), describe_ops(self.ops))
    }
}

/// `ops` in words, joined by commas.
fn describe_ops(ops: &[Op]) -> String {
    let ops: Vec<String> = ops
        .iter()
        .map(|op| match *op {
            Op::Conv {
                input,
                output,
                kernel,
                stride,
                padding,
                relu,
            } => {
                let mut s = match kernel {
                    [h, w] if h == w => format!("Conv {input}→{output} k{h}"),
                    [h, w] => format!("Conv {input}→{output} k{h}x{w}"),
                };
                if stride != 1 {
                    s += &format!(" s{stride}");
                }
                if padding != 0 {
                    s += &format!(" p{padding}");
                }
                if relu {
                    s += " ReLU";
                }
                s
            }
            Op::Depthwise {
                channels,
                kernel,
                stride,
                padding,
                relu,
            } => {
                let mut s = format!("Depthwise {channels} k{kernel}");
                if stride != 1 {
                    s += &format!(" s{stride}");
                }
                if padding != 0 {
                    s += &format!(" p{padding}");
                }
                if relu {
                    s += " ReLU";
                }
                s
            }
            Op::ZeroPad([left, right, top, bottom]) => {
                format!("ZeroPad l{left} r{right} t{top} b{bottom}")
            }
            Op::GlobalAvgPool => "GlobalAvgPool".into(),
            Op::MaxPool(k) => format!("MaxPool {k}"),
            Op::AvgPool(k) => format!("AvgPool {k}"),
            Op::BatchNorm { channels, relu } => {
                format!("BatchNorm {channels}{}", if relu { " ReLU" } else { "" })
            }
            Op::Residual {
                branch,
                shortcut,
                relu,
            } => {
                let shortcut = if shortcut.is_empty() {
                    "x".to_string()
                } else {
                    format!("[{}]", describe_ops(shortcut))
                };
                format!(
                    "Residual([{}] + {shortcut}){}",
                    describe_ops(branch),
                    if relu { " ReLU" } else { "" }
                )
            }
            Op::Flatten => "Flatten".into(),
            Op::Dense {
                input,
                output,
                relu,
            } => format!("Dense {input}→{output}{}", if relu { " ReLU" } else { "" }),
        })
        .collect();
    ops.join(", ")
}

impl NetDef {
    /// The tensors the ops make, as PyTorch names them in `nn.Sequential` (the ReLU after a
    /// layer takes a module index), with their shapes.
    pub(super) fn expected_tensors(&self) -> Vec<(String, Vec<usize>)> {
        tensors_of(self.ops, "")
    }

    /// Multiply-adds of the forward pass of one sample (convolutions and dense layers), and of
    /// the first layer alone.
    fn macs(&self) -> (usize, usize) {
        let shape = match *self.input {
            [c, h, w] => (c, h, w),
            _ => (self.input_len(), 1, 1),
        };
        let (total, first, _) = macs_of(self.ops, shape);
        (total, first)
    }

    /// Floating-point operations (two per multiply-add) of one run of `figure`: the forward
    /// pass; for training, the forward pass, every weight gradient (as many as the forward
    /// pass) and every input gradient but the first layer's (which nothing needs).
    pub(super) fn flops(&self, figure: Figure) -> f64 {
        let (forward, first) = self.macs();
        2.0 * match figure {
            Figure::TrainStep => ((3 * forward - first) * self.batch) as f64,
            Figure::Forward1 => forward as f64,
            Figure::Forward1000 => (forward * EVAL) as f64,
        }
    }

    /// The JSON `peers.py suite` builds the net from.
    pub(super) fn to_json(&self) -> Value {
        let ops = json_of(self.ops);
        json!({
            "key": self.key,
            "input": self.input,
            "ops": ops,
            "batch": self.batch,
            "tensors": self.expected_tensors(),
        })
    }
}

/// The `f32` tensors `ops` make, named as in `nn.Sequential` after `prefix` (a block's part:
/// `4.branch.`), with their shapes.
fn tensors_of(ops: &[Op], prefix: &str) -> Vec<(String, Vec<usize>)> {
    let mut module = 0;
    let mut tensors = Vec::new();
    for op in ops {
        match *op {
            Op::Conv {
                input,
                output,
                kernel,
                relu,
                ..
            } => {
                tensors.push((
                    format!("{prefix}{module}.weight"),
                    vec![output, input, kernel[0], kernel[1]],
                ));
                tensors.push((format!("{prefix}{module}.bias"), vec![output]));
                module += 1 + usize::from(relu);
            }
            Op::Depthwise {
                channels,
                kernel,
                relu,
                ..
            } => {
                tensors.push((
                    format!("{prefix}{module}.weight"),
                    vec![channels, 1, kernel, kernel],
                ));
                tensors.push((format!("{prefix}{module}.bias"), vec![channels]));
                module += 1 + usize::from(relu);
            }
            Op::Dense {
                input,
                output,
                relu,
            } => {
                tensors.push((format!("{prefix}{module}.weight"), vec![output, input]));
                tensors.push((format!("{prefix}{module}.bias"), vec![output]));
                module += 1 + usize::from(relu);
            }
            Op::BatchNorm { channels, relu } => {
                for field in ["weight", "bias", "running_mean", "running_var"] {
                    tensors.push((format!("{prefix}{module}.{field}"), vec![channels]));
                }
                module += 1 + usize::from(relu);
            }
            Op::Residual {
                branch,
                shortcut,
                relu,
            } => {
                tensors.extend(tensors_of(branch, &format!("{prefix}{module}.branch.")));
                tensors.extend(tensors_of(shortcut, &format!("{prefix}{module}.shortcut.")));
                module += 1 + usize::from(relu);
            }
            Op::MaxPool(_) | Op::AvgPool(_) | Op::GlobalAvgPool | Op::ZeroPad(_) | Op::Flatten => {
                module += 1
            }
        }
    }
    tensors
}

/// The multiply-adds of `ops` on one sample of `(c, h, w)`, the first layer's, and the output
/// shape.
fn macs_of(
    ops: &[Op],
    (mut c, mut h, mut w): (usize, usize, usize),
) -> (usize, usize, (usize, usize, usize)) {
    let mut total = 0;
    let mut first = None;
    for op in ops {
        let macs = match *op {
            Op::Conv {
                input,
                output,
                kernel,
                stride,
                padding,
                ..
            } => {
                h = (h + 2 * padding - kernel[0]) / stride + 1;
                w = (w + 2 * padding - kernel[1]) / stride + 1;
                c = output;
                output * h * w * input * kernel[0] * kernel[1]
            }
            Op::Depthwise {
                channels,
                kernel,
                stride,
                padding,
                ..
            } => {
                h = (h + 2 * padding - kernel) / stride + 1;
                w = (w + 2 * padding - kernel) / stride + 1;
                channels * h * w * kernel * kernel
            }
            Op::ZeroPad([left, right, top, bottom]) => {
                (h, w) = (h + top + bottom, w + left + right);
                0
            }
            Op::GlobalAvgPool => {
                (h, w) = (1, 1);
                0
            }
            Op::MaxPool(k) | Op::AvgPool(k) => {
                (h, w) = (h / k, w / k);
                0
            }
            Op::BatchNorm { .. } => 0,
            Op::Residual {
                branch, shortcut, ..
            } => {
                let (b, _, out) = macs_of(branch, (c, h, w));
                let (s, _, _) = macs_of(shortcut, (c, h, w));
                (c, h, w) = out;
                b + s
            }
            Op::Flatten => {
                (c, h, w) = (c * h * w, 1, 1);
                0
            }
            Op::Dense { input, output, .. } => {
                c = output;
                input * output
            }
        };
        total += macs;
        if macs > 0 && first.is_none() {
            first = Some(macs);
        }
    }
    (total, first.unwrap_or(0), (c, h, w))
}

/// `ops` as the JSON `peers.py suite` builds them from.
fn json_of(ops: &[Op]) -> Vec<Value> {
    ops.iter()
        .map(|op| match *op {
            Op::Conv {
                input,
                output,
                kernel,
                stride,
                padding,
                relu,
            } => json!(["conv", input, output, kernel, stride, padding, relu]),
            Op::Depthwise {
                channels,
                kernel,
                stride,
                padding,
                relu,
            } => json!(["depthwise", channels, kernel, stride, padding, relu]),
            Op::ZeroPad(sides) => json!(["zeropad", sides]),
            Op::GlobalAvgPool => json!(["globalavgpool"]),
            Op::MaxPool(k) => json!(["maxpool", k]),
            Op::AvgPool(k) => json!(["avgpool", k]),
            Op::BatchNorm { channels, relu } => json!(["batchnorm", channels, relu]),
            Op::Residual {
                branch,
                shortcut,
                relu,
            } => json!(["residual", json_of(branch), json_of(shortcut), relu]),
            Op::Flatten => json!(["flatten"]),
            Op::Dense {
                input,
                output,
                relu,
            } => json!(["dense", input, output, relu]),
        })
        .collect()
}
