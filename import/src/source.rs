//! The Rust file: the net's type written with `net!`, one layer a line, the baked `static`,
//! and `invoke`, which takes and gives the tensors as TensorFlow Lite lays them out.

use crate::graph::Activation;
use crate::lower::{Layer, Net, Sample};

/// What the file says about where it came from.
pub struct Origin<'a> {
    /// The model file's name.
    pub model: &'a str,
    /// The module's name (the weights file is `{name}.safetensors`).
    pub name: &'a str,
}

/// The source of `{name}.rs`.
pub fn write(net: &Net, int8: bool, origin: &Origin<'_>) -> String {
    let element = if int8 { "i8" } else { "f32" };
    let Sample::Image { c, h, w } = net.input else {
        unreachable!("lower() takes image inputs only")
    };
    let outputs = match net.output {
        Sample::Vector { n, .. } => n,
        Sample::Image { c, h, w } => c * h * w,
    };
    let mut activations = Vec::new();
    let mut lines = Vec::new();
    layers(&net.layers, "    ", &mut lines, &mut activations);
    activations.sort_unstable();
    activations.dedup();

    let zero = if int8 { "0_i8" } else { "0.0_f32" };
    let uses: Vec<&str> = std::iter::once("Layer")
        .chain(activations.iter().map(|a| match a {
            Activation::Relu => "Relu",
            Activation::Relu6 => "Relu6",
            Activation::None => unreachable!("not collected"),
        }))
        .collect();
    let call = match net.output {
        Sample::Vector { .. } => "    NET.forward_one(&image, output);\n".to_owned(),
        Sample::Image {
            c: oc,
            h: oh,
            w: ow,
        } => format!(
            "    let mut out = [[[{zero}; {ow}]; {oh}]; {oc}];\n    \
             NET.forward_one(&image, &mut out);\n    \
             for (i, value) in output.iter_mut().enumerate() {{\n        \
             *value = out{};\n    \
             }}\n",
            nhwc_index("i", oc, ow)
        ),
    };
    format!(
        "//! `{name}`: the TensorFlow Lite model `{model}` as a typed constmat net, written by\n\
         //! constmat-import {version}. Its weights are `{name}.safetensors`, beside this file.\n\
         //! Do not edit: import the model again.\n\
         //!\n\
         //! `invoke` runs it on one input laid out as TensorFlow Lite lays it out (height, width,\n\
         //! then channels), and gives its output likewise. No allocation, no `std`.\n\
         \n\
         use constmat::embed::Baked;\n\
         use constmat::nn::{{{uses}}};\n\
         \n\
         /// The net's type: its layers and every size between them.\n\
         pub type Net = constmat::net![\n    \
         Input<{element}, {c}, {h}, {w}>,\n\
         {lines}\
         ];\n\
         \n\
         /// The net, its weights baked in at compile time.\n\
         pub static NET: Baked<Net> = constmat::include_net!(\"{name}.safetensors\");\n\
         \n\
         /// The input's length: {h} x {w} x {c} values.\n\
         pub const INPUT_LEN: usize = {input_len};\n\
         /// The output's length.\n\
         pub const OUTPUT_LEN: usize = {outputs};\n\
         /// The bytes of read-only memory the parameters take.\n\
         pub const PARAMETER_BYTES: usize = <Baked<Net> as Layer>::PARAMETER_BYTES;\n\
         /// The bytes of working memory (stack) one `invoke` takes: the net's, and the input\n\
         /// reordered to channels first.\n\
         pub const WORKING_BYTES: usize =\n    \
         <Baked<Net> as Layer>::WORKING_BYTES + INPUT_LEN * core::mem::size_of::<{element}>();\n\
         \n\
         /// Runs the net on `input` ({h} x {w} x {c}, channels last, as TensorFlow Lite's input\n\
         /// tensor) and writes its {outputs} outputs.\n\
         pub fn invoke(input: &[{element}; INPUT_LEN], output: &mut [{element}; OUTPUT_LEN]) {{\n    \
         // TensorFlow Lite's order (height, width, channels) to constmat's (channels first).\n    \
         let mut image = [[[{zero}; {w}]; {h}]; {c}];\n    \
         for (i, &value) in input.iter().enumerate() {{\n        \
         image{index} = value;\n    \
         }}\n\
         {call}\
         }}\n",
        name = origin.name,
        model = origin.model,
        version = env!("CARGO_PKG_VERSION"),
        uses = uses.join(", "),
        lines = lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
        input_len = c * h * w,
        index = nhwc_index("i", c, w),
    )
}

/// `[channel][row][column]` of the value at `i` in TensorFlow Lite's order, for an image of
/// `c` channels and `w` columns (no division or remainder by 1, which clippy flags).
fn nhwc_index(i: &str, c: usize, w: usize) -> String {
    let (channel, pixel) = if c == 1 {
        ("0".to_owned(), i.to_owned())
    } else {
        (format!("{i} % {c}"), format!("{i} / {c}"))
    };
    let (row, column) = if w == 1 {
        (pixel, "0".to_owned())
    } else {
        (format!("{pixel} / {w}"), format!("{pixel} % {w}"))
    };
    format!("[{channel}][{row}][{column}]")
}

fn activation(a: Activation, activations: &mut Vec<Activation>) -> &'static str {
    match a {
        Activation::None => "",
        Activation::Relu => {
            activations.push(a);
            ", Relu"
        }
        Activation::Relu6 => {
            activations.push(a);
            ", Relu6"
        }
    }
}

/// One line per layer (a residual block: its first line, its layers indented, its last).
fn layers(
    layers: &[Layer],
    indent: &str,
    lines: &mut Vec<String>,
    activations: &mut Vec<Activation>,
) {
    for layer in layers {
        match layer {
            Layer::ZeroPad {
                top,
                left,
                bottom,
                right,
                ..
            } => {
                lines.push(format!(
                    "{indent}ZeroPad2d<{left}, {right}, {top}, {bottom}>,"
                ));
            }
            Layer::Conv {
                depthwise,
                c,
                oc,
                kernel: (kh, kw),
                stride,
                padding,
                activation: a,
                ..
            } => {
                let kind = if *depthwise {
                    "DepthwiseConv2d"
                } else {
                    "Conv2d"
                };
                let kernel = if kh == kw {
                    kh.to_string()
                } else {
                    format!("({kh}, {kw})")
                };
                let a = activation(*a, activations);
                lines.push(format!(
                    "{indent}{kind}<{c}, {oc}, {kernel}, {stride}, {padding}{a}>,"
                ));
            }
            Layer::GlobalAvgPool { .. } => lines.push(format!("{indent}GlobalAvgPool2d,")),
            Layer::Pool {
                average,
                window,
                stride,
                ..
            } => {
                let kind = if *average { "AvgPool2d" } else { "MaxPool2d" };
                lines.push(format!("{indent}{kind}<{window}, {stride}>,"));
            }
            Layer::Flatten => lines.push(format!("{indent}Flatten,")),
            Layer::Dense {
                inputs,
                outputs,
                activation: a,
                ..
            } => {
                let a = activation(*a, activations);
                lines.push(format!("{indent}Dense<{inputs}, {outputs}{a}>,"));
            }
            Layer::Softmax { .. } => lines.push(format!("{indent}Softmax,")),
            Layer::Residual {
                branch,
                shortcut,
                activation: a,
                ..
            } => {
                let deeper = format!("{indent}    ");
                lines.push(format!("{indent}Residual<["));
                self::layers(branch, &deeper, lines, activations);
                let a = activation(*a, activations);
                if shortcut.is_empty() {
                    lines.push(format!("{indent}]{a}>,"));
                } else {
                    lines.push(format!("{indent}], ["));
                    self::layers(shortcut, &deeper, lines, activations);
                    lines.push(format!("{indent}]{a}>,"));
                }
            }
        }
    }
}
