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
    let outputs = match net.output {
        Sample::Vector { n, .. } => n,
        Sample::Image { c, h, w } => c * h * w,
    };
    let mut uses = vec!["Arena", "Layer"];
    let mut lines = String::new();
    // The image form (`Input`, then the layers as `net!` reads them), or for a vector input the
    // plain form (the layer types themselves).
    let (input_len, input_doc, body) = match net.input {
        Sample::Image { c, h, w } => {
            lines.push_str(&format!("    Input<{element}, {c}, {h}, {w}>,\n"));
            let mut activations = Vec::new();
            layers(&net.layers, "    ", &mut lines, &mut activations);
            activations.sort_unstable();
            activations.dedup();
            uses.extend(activations.iter().map(|&a| activation_name(a)));
            let out = match net.output {
                Sample::Vector { .. } => "    *output = *arena.run(&NET);\n".to_owned(),
                Sample::Image { c: oc, w: ow, .. } => format!(
                    "    let out = arena.run(&NET);\n    \
                     for (i, value) in output.iter_mut().enumerate() {{\n        \
                     *value = out{};\n    \
                     }}\n",
                    nhwc_index("i", oc, ow)
                ),
            };
            (
                c * h * w,
                format!("{h} x {w} x {c} values, channels last, as TensorFlow Lite's input tensor"),
                format!(
                    "    let mut arena = Arena::<{{ <Baked<Net> as Layer>::ARENA_BYTES }}>::new();\n    \
                     // TensorFlow Lite's order (height, width, channels) to constmat's (channels first).\n    \
                     let image = arena.input(&NET);\n    \
                     for (i, &value) in input.iter().enumerate() {{\n        \
                     image{} = value;\n    \
                     }}\n\
                     {out}",
                    nhwc_index("i", c, w)
                ),
            )
        }
        Sample::Vector { n, .. } => {
            let mut types = Vec::new();
            plain_layers(&net.layers, int8, &mut lines, &mut types);
            types.sort_unstable();
            types.dedup();
            uses.extend(types);
            (
                n,
                format!("{n} values"),
                "    let mut arena = Arena::<{ <Baked<Net> as Layer>::ARENA_BYTES }>::new();\n    \
                 *arena.input(&NET) = *input;\n    \
                 *output = *arena.run(&NET);\n"
                    .to_owned(),
            )
        }
    };
    // rustfmt's order, so that the file is as rustfmt leaves it.
    uses.sort_unstable();
    format!(
        "//! `{name}`: the TensorFlow Lite model `{model}` as a typed constmat net, written by\n\
         //! constmat-import {version}. Its weights are `{name}.safetensors`, beside this file.\n\
         //! Do not edit: import the model again.\n\
         //!\n\
         //! `invoke` runs it on one input laid out as TensorFlow Lite lays it out, and gives its\n\
         //! output likewise. No allocation, no `std`.\n\
         \n\
         // A program need not use every constant.\n\
         #![allow(dead_code)]\n\
         \n\
         use constmat::embed::Baked;\n\
         use constmat::nn::{{{uses}}};\n\
         \n\
         /// The net's type: its layers and every size between them.\n\
         pub type Net = constmat::net![\n\
         {lines}\
         ];\n\
         \n\
         /// The net, its weights baked in at compile time.\n\
         pub static NET: Baked<Net> = constmat::include_net!(\"{name}.safetensors\");\n\
         \n\
         /// The input's length.\n\
         pub const INPUT_LEN: usize = {input_len};\n\
         /// The output's length.\n\
         pub const OUTPUT_LEN: usize = {outputs};\n\
         /// The bytes of read-only memory the parameters take.\n\
         pub const PARAMETER_BYTES: usize = <Baked<Net> as Layer>::PARAMETER_BYTES;\n\
         /// The bytes of working memory (stack) one `invoke` takes: the arena that holds the\n\
         /// samples between the layers (the input and output among them), and the kernels' buffers.\n\
         pub const WORKING_BYTES: usize =\n    \
         <Baked<Net> as Layer>::ARENA_BYTES + <Baked<Net> as Layer>::KERNEL_BYTES;\n\
         \n\
         /// Runs the net on `input` ({input_doc}) and writes\n\
         /// its {outputs} outputs.\n\
         pub fn invoke(input: &[{element}; INPUT_LEN], output: &mut [{element}; OUTPUT_LEN]) {{\n\
         {body}\
         }}\n",
        name = origin.name,
        model = origin.model,
        version = env!("CARGO_PKG_VERSION"),
        uses = uses.join(", "),
    )
}

fn activation_name(a: Activation) -> &'static str {
    match a {
        Activation::Relu => "Relu",
        Activation::Relu6 => "Relu6",
        Activation::None => unreachable!("not collected"),
    }
}

/// The plain form's lines: each layer's type (only dense layers and the softmax take a vector
/// in; `lib.rs` refuses the rest), and the types they name.
fn plain_layers(layers: &[Layer], int8: bool, lines: &mut String, types: &mut Vec<&'static str>) {
    for layer in layers {
        match layer {
            Layer::Dense {
                inputs,
                outputs,
                activation: a,
                ..
            } => {
                let a = match a {
                    Activation::None => String::new(),
                    &a => {
                        types.push(activation_name(a));
                        format!(", {}", activation_name(a))
                    }
                };
                if int8 {
                    types.push("QDense");
                    lines.push_str(&format!("    QDense<{inputs}, {outputs}{a}>,\n"));
                } else {
                    types.push("Dense");
                    lines.push_str(&format!("    Dense<f32, {inputs}, {outputs}{a}>,\n"));
                }
            }
            Layer::Softmax { classes, .. } => {
                if int8 {
                    types.push("QSoftmax");
                    lines.push_str(&format!("    QSoftmax<{classes}>,\n"));
                } else {
                    types.push("Softmax");
                    lines.push_str(&format!("    Softmax<f32, {classes}>,\n"));
                }
            }
            _ => unreachable!("lib.rs refuses other layers on a vector input"),
        }
    }
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
fn layers(layers: &[Layer], indent: &str, lines: &mut String, activations: &mut Vec<Activation>) {
    for layer in layers {
        match layer {
            Layer::ZeroPad {
                top,
                left,
                bottom,
                right,
                ..
            } => {
                lines.push_str(&format!(
                    "{indent}ZeroPad2d<{left}, {right}, {top}, {bottom}>,\n"
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
                lines.push_str(&format!(
                    "{indent}{kind}<{c}, {oc}, {kernel}, {stride}, {padding}{a}>,\n"
                ));
            }
            Layer::GlobalAvgPool { .. } => lines.push_str(&format!("{indent}GlobalAvgPool2d,\n")),
            Layer::Pool {
                average,
                window,
                stride,
                ..
            } => {
                let kind = if *average { "AvgPool2d" } else { "MaxPool2d" };
                lines.push_str(&format!("{indent}{kind}<{window}, {stride}>,\n"));
            }
            Layer::Flatten => lines.push_str(&format!("{indent}Flatten,\n")),
            Layer::Dense {
                inputs,
                outputs,
                activation: a,
                ..
            } => {
                let a = activation(*a, activations);
                lines.push_str(&format!("{indent}Dense<{inputs}, {outputs}{a}>,\n"));
            }
            Layer::Softmax { .. } => lines.push_str(&format!("{indent}Softmax,\n")),
            Layer::Residual {
                branch,
                shortcut,
                activation: a,
                ..
            } => {
                let deeper = format!("{indent}    ");
                lines.push_str(&format!("{indent}Residual<[\n"));
                self::layers(branch, &deeper, lines, activations);
                let a = activation(*a, activations);
                if shortcut.is_empty() {
                    lines.push_str(&format!("{indent}]{a}>,\n"));
                } else {
                    lines.push_str(&format!("{indent}], [\n"));
                    self::layers(shortcut, &deeper, lines, activations);
                    lines.push_str(&format!("{indent}]{a}>,\n"));
                }
            }
        }
    }
}
