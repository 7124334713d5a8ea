//! The subgraph as constmat's layers: a chain from the input to the output, where a tensor
//! read by two operators opens a residual block that an `ADD` closes. TensorFlow Lite's
//! padding rule becomes constmat's (a `ZeroPad2d` where `SAME` pads one more row or column
//! after than before), its `NHWC` order constmat's channels-first one.

use crate::error::Error;
use crate::graph::{Activation, Graph, Kind, Operator, Padding};

/// The sizes of a sample between two layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sample {
    /// An image: channels, height, width.
    Image { c: usize, h: usize, w: usize },
    /// A vector: its length. `hwc`: flattened from an image in TensorFlow Lite's order
    /// (height, width, channels), which constmat's `Flatten` (channels first) is not: the next
    /// dense layer's weights are reordered to match (`Some((c, h, w))`).
    Vector {
        n: usize,
        hwc: Option<(usize, usize, usize)>,
    },
}

/// A constmat layer, with the file's tensors it is made from.
#[derive(Debug, Clone, PartialEq)]
pub enum Layer {
    /// `ZeroPad2d<left, right, top, bottom>` before a convolution whose `SAME` padding is
    /// uneven; `x` is the tensor it pads (its quantization is the int8 form's).
    ZeroPad {
        x: usize,
        top: usize,
        left: usize,
        bottom: usize,
        right: usize,
    },
    /// `Conv2d` (or `DepthwiseConv2d`, `depthwise`).
    Conv {
        op: usize,
        depthwise: bool,
        x: usize,
        filter: usize,
        bias: Option<usize>,
        y: usize,
        c: usize,
        oc: usize,
        kernel: (usize, usize),
        stride: usize,
        padding: usize,
        activation: Activation,
    },
    /// `GlobalAvgPool2d`: an average pool whose window is the whole image.
    GlobalAvgPool { op: usize, x: usize, y: usize },
    /// `AvgPool2d<window, stride>` (`average`) or `MaxPool2d<window, stride>`.
    Pool {
        op: usize,
        average: bool,
        x: usize,
        y: usize,
        window: usize,
        stride: usize,
    },
    /// `Flatten`.
    Flatten,
    /// `Dense<inputs, outputs>`; `hwc`: the inputs come in TensorFlow Lite's order from an
    /// image of these sizes (the weights' columns are reordered).
    Dense {
        op: usize,
        x: usize,
        weight: usize,
        bias: Option<usize>,
        y: usize,
        inputs: usize,
        outputs: usize,
        activation: Activation,
        hwc: Option<(usize, usize, usize)>,
    },
    /// `Softmax` over `classes`.
    Softmax {
        op: usize,
        x: usize,
        y: usize,
        classes: usize,
    },
    /// `Residual<[branch]>` or `Residual<[branch], [shortcut]>`: the `ADD` `op` of the
    /// branch's output `branch_out` and the shortcut's `shortcut_out` into `y`.
    Residual {
        op: usize,
        branch: Vec<Layer>,
        shortcut: Vec<Layer>,
        branch_out: usize,
        shortcut_out: usize,
        y: usize,
        activation: Activation,
    },
}

/// The model as layers, the input's and the output's sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Net {
    /// The input's sizes.
    pub input: Sample,
    /// The layers, in order.
    pub layers: Vec<Layer>,
    /// The output's sizes.
    pub output: Sample,
}

/// Lowers `graph` into constmat's layers.
pub fn lower(graph: &Graph<'_>) -> Result<Net, Error> {
    let mut readers = vec![Vec::new(); graph.tensors.len()];
    for op in &graph.operators {
        for &x in op.inputs.iter().flatten() {
            // Constants (weights) are read by their one operator; activations are what matter.
            if graph.tensors[x].data.is_none() {
                readers[x].push(op.index);
            }
        }
    }
    let input = sample(graph, graph.input, "the input")?;
    let mut lowering = Lowering {
        graph,
        readers,
        used: vec![false; graph.operators.len()],
    };
    let mut layers = Vec::new();
    let (end, output) = lowering.chain(graph.input, input, &mut layers)?;
    if end != graph.output {
        return Err(Error::unsupported(
            graph.tensors[end].at(),
            format!(
                "read by no operator, but the model's output is {}: the graph is not a chain of layers and residual blocks",
                graph.tensors[graph.output].at()
            ),
        ));
    }
    if let Some(op) = lowering.used.iter().position(|used| !used) {
        return Err(Error::unsupported(
            graph.operators[op].at(),
            "not on the path from the input to the output: the graph is not a chain of layers and residual blocks",
        ));
    }
    if let Sample::Vector { hwc: Some(_), .. } = output {
        return Err(Error::unsupported(
            graph.tensors[graph.output].at(),
            "the output is an image reshaped to a vector in TensorFlow Lite's order; constmat flattens channels first",
        ));
    }
    Ok(Net {
        input,
        layers,
        output,
    })
}

/// The sizes of tensor `i`: `[1, H, W, C]` or `[1, N]`.
fn sample(graph: &Graph<'_>, i: usize, what: &str) -> Result<Sample, Error> {
    let t = &graph.tensors[i];
    match t.shape[..] {
        [1, h, w, c] => Ok(Sample::Image { c, h, w }),
        [1, n] => Ok(Sample::Vector { n, hwc: None }),
        _ => Err(Error::unsupported(
            t.at(),
            format!(
                "{what} has the shape {:?}; constmat reads one sample, [1, H, W, C] or [1, N]",
                t.shape
            ),
        )),
    }
}

struct Lowering<'g, 'a> {
    graph: &'g Graph<'a>,
    /// The operators that read each activation tensor.
    readers: Vec<Vec<usize>>,
    used: Vec<bool>,
}

impl Lowering<'_, '_> {
    /// Layers from tensor `x` (of sizes `s`) on, while `x` is read by one operator that is not
    /// an `ADD`: the tensor where the chain ends and its sizes.
    fn chain(
        &mut self,
        mut x: usize,
        mut s: Sample,
        layers: &mut Vec<Layer>,
    ) -> Result<(usize, Sample), Error> {
        loop {
            let readers = self.readers[x].clone();
            match readers[..] {
                [] => return Ok((x, s)),
                [op] if matches!(self.graph.operators[op].kind, Kind::Add { .. }) => {
                    return Ok((x, s));
                }
                [op] => (x, s) = self.layer(op, x, s, layers)?,
                [a, b] => (x, s) = self.residual(x, s, a, b, layers)?,
                _ => {
                    return Err(Error::unsupported(
                        self.graph.tensors[x].at(),
                        format!(
                            "read by {} operators; constmat's graphs fork in two, into a residual block",
                            readers.len()
                        ),
                    ));
                }
            }
        }
    }

    /// A residual block opened at `x` by the operators `a` and `b`.
    fn residual(
        &mut self,
        x: usize,
        s: Sample,
        a: usize,
        b: usize,
        layers: &mut Vec<Layer>,
    ) -> Result<(usize, Sample), Error> {
        let is_add = |op: usize| matches!(self.graph.operators[op].kind, Kind::Add { .. });
        // Each side: its layers, the tensor it ends at and the ADD that reads that.
        let mut side = |first: usize| -> Result<(Vec<Layer>, usize, Sample, Option<usize>), Error> {
            let mut layers = Vec::new();
            if is_add(first) {
                return Ok((layers, x, s, Some(first)));
            }
            let (y, ys) = self.layer(first, x, s, &mut layers)?;
            let (end, es) = self.chain(y, ys, &mut layers)?;
            let add = match self.readers[end][..] {
                [op] if is_add(op) => Some(op),
                _ => None,
            };
            Ok((layers, end, es, add))
        };
        let (mut one, one_end, one_s, one_add) = side(a)?;
        let (mut other, other_end, other_s, other_add) = side(b)?;
        let add = match (one_add, other_add) {
            (Some(p), Some(q)) if p == q => p,
            _ => {
                return Err(Error::unsupported(
                    self.graph.tensors[x].at(),
                    "read by two operators whose paths do not meet in one ADD: the graph is not a chain of layers and residual blocks",
                ));
            }
        };
        let op = &self.graph.operators[add];
        self.used[add] = true;
        let (i0, i1) = (op.input(0)?, op.input(1)?);
        if !((i0 == one_end && i1 == other_end) || (i1 == one_end && i0 == other_end))
            || one_end == other_end
        {
            return Err(Error::unsupported(
                op.at(),
                "does not add the two paths of a fork",
            ));
        }
        if one_s != other_s {
            return Err(Error::unsupported(
                op.at(),
                format!("adds {one_s:?} and {other_s:?}"),
            ));
        }
        let Kind::Add { activation } = op.kind else {
            unreachable!("an ADD")
        };
        let y = op.output()?;
        // The branch is the longer path; the shortcut the identity or a projection.
        let (mut branch_out, mut shortcut_out) = (one_end, other_end);
        if other.len() > one.len() {
            std::mem::swap(&mut one, &mut other);
            std::mem::swap(&mut branch_out, &mut shortcut_out);
        }
        if one.is_empty() {
            return Err(Error::unsupported(op.at(), "adds a tensor to itself"));
        }
        layers.push(Layer::Residual {
            op: add,
            branch: one,
            shortcut: other,
            branch_out,
            shortcut_out,
            y,
            activation,
        });
        Ok((y, one_s))
    }

    /// The layers of operator `index`, which reads `x` of sizes `s`: its output and sizes.
    fn layer(
        &mut self,
        index: usize,
        x: usize,
        s: Sample,
        layers: &mut Vec<Layer>,
    ) -> Result<(usize, Sample), Error> {
        let graph = self.graph;
        let op = &graph.operators[index];
        self.used[index] = true;
        if op.input(0)? != x {
            return Err(Error::unsupported(
                op.at(),
                "reads the image or vector as another input than its first",
            ));
        }
        let y = op.output()?;
        let ys = sample(graph, y, "its output")?;
        let image = |s: Sample| match s {
            Sample::Image { c, h, w } => Ok((c, h, w)),
            Sample::Vector { .. } => Err(Error::unsupported(
                op.at(),
                "takes an image; it is given a vector",
            )),
        };
        match op.kind {
            Kind::Conv {
                padding,
                stride,
                activation,
            }
            | Kind::Depthwise {
                padding,
                stride,
                activation,
            } => {
                let depthwise = matches!(op.kind, Kind::Depthwise { .. });
                let (c, h, w) = image(s)?;
                let filter = op.input(1)?;
                let f = &graph.tensors[filter];
                let (oc, kh, kw) = match (depthwise, &f.shape[..]) {
                    (false, &[oc, kh, kw, fc]) if fc == c => (oc, kh, kw),
                    (true, &[1, kh, kw, oc]) if oc % c == 0 => (oc, kh, kw),
                    _ => {
                        return Err(Error::unsupported(
                            f.at(),
                            format!("a filter of shape {:?} for {c} input channels", f.shape),
                        ));
                    }
                };
                if depthwise && kh != kw {
                    return Err(Error::unsupported(
                        op.at(),
                        format!("a {kh} x {kw} kernel; constmat's depthwise kernels are square"),
                    ));
                }
                let stride = same_stride(op, stride)?;
                let (oh, top, bottom) = window(padding, h, kh, stride);
                let (ow, left, right) = window(padding, w, kw, stride);
                let pad = if top == bottom && left == right && top == left {
                    top
                } else {
                    layers.push(Layer::ZeroPad {
                        x,
                        top,
                        left,
                        bottom,
                        right,
                    });
                    0
                };
                expect(
                    op,
                    ys,
                    Sample::Image {
                        c: oc,
                        h: oh,
                        w: ow,
                    },
                )?;
                layers.push(Layer::Conv {
                    op: index,
                    depthwise,
                    x,
                    filter,
                    bias: op.inputs.get(2).copied().flatten(),
                    y,
                    c,
                    oc,
                    kernel: (kh, kw),
                    stride,
                    padding: pad,
                    activation,
                });
            }
            Kind::AveragePool {
                padding,
                stride,
                filter,
                activation,
            }
            | Kind::MaxPool {
                padding,
                stride,
                filter,
                activation,
            } => {
                let average = matches!(op.kind, Kind::AveragePool { .. });
                let (c, h, w) = image(s)?;
                if activation != Activation::None {
                    return Err(Error::unsupported(
                        op.at(),
                        "a fused activation; constmat's pools have none",
                    ));
                }
                let stride_hw = stride;
                let (oh, top, bottom) = window(padding, h, filter.0, stride_hw.0);
                let (ow, left, right) = window(padding, w, filter.1, stride_hw.1);
                if top + bottom + left + right > 0 {
                    return Err(Error::unsupported(
                        op.at(),
                        "padding; constmat's pools read only the image",
                    ));
                }
                expect(op, ys, Sample::Image { c, h: oh, w: ow })?;
                if average && filter == (h, w) {
                    layers.push(Layer::GlobalAvgPool { op: index, x, y });
                } else if filter.0 == filter.1 {
                    let stride = same_stride(op, stride_hw)?;
                    layers.push(Layer::Pool {
                        op: index,
                        average,
                        x,
                        y,
                        window: filter.0,
                        stride,
                    });
                } else {
                    return Err(Error::unsupported(
                        op.at(),
                        format!(
                            "a {} x {} window; constmat's are square",
                            filter.0, filter.1
                        ),
                    ));
                }
            }
            Kind::Reshape => match (s, ys) {
                (Sample::Image { c, h, w }, Sample::Vector { n, .. }) if n == c * h * w => {
                    layers.push(Layer::Flatten);
                    let hwc = (h * w > 1 && c > 1).then_some((c, h, w));
                    return Ok((y, Sample::Vector { n, hwc }));
                }
                (Sample::Vector { n, hwc }, Sample::Vector { n: m, .. }) if n == m => {
                    return Ok((y, Sample::Vector { n, hwc }));
                }
                _ => {
                    return Err(Error::unsupported(
                        op.at(),
                        format!("reshapes {s:?} to {ys:?}; constmat flattens an image to a vector"),
                    ));
                }
            },
            Kind::FullyConnected { activation } => {
                let (inputs, hwc) = match s {
                    Sample::Vector { n, hwc } => (n, hwc),
                    Sample::Image { c, h, w } => {
                        layers.push(Layer::Flatten);
                        (c * h * w, (h * w > 1 && c > 1).then_some((c, h, w)))
                    }
                };
                let weight = op.input(1)?;
                let wt = &graph.tensors[weight];
                let outputs = match wt.shape[..] {
                    [o, i] if i == inputs => o,
                    _ => {
                        return Err(Error::unsupported(
                            wt.at(),
                            format!("a weight of shape {:?} for {inputs} inputs", wt.shape),
                        ));
                    }
                };
                expect(
                    op,
                    ys,
                    Sample::Vector {
                        n: outputs,
                        hwc: None,
                    },
                )?;
                layers.push(Layer::Dense {
                    op: index,
                    x,
                    weight,
                    bias: op.inputs.get(2).copied().flatten(),
                    y,
                    inputs,
                    outputs,
                    activation,
                    hwc,
                });
                return Ok((
                    y,
                    Sample::Vector {
                        n: outputs,
                        hwc: None,
                    },
                ));
            }
            Kind::Softmax => match s {
                Sample::Vector { n, hwc: None } => {
                    expect(op, ys, s)?;
                    layers.push(Layer::Softmax {
                        op: index,
                        x,
                        y,
                        classes: n,
                    });
                }
                _ => {
                    return Err(Error::unsupported(
                        op.at(),
                        "a softmax of an image; constmat's softmax takes a vector",
                    ));
                }
            },
            Kind::Add { .. } => unreachable!("an ADD closes a residual block"),
        }
        Ok((y, ys))
    }
}

fn same_stride(op: &Operator, (sh, sw): (usize, usize)) -> Result<usize, Error> {
    if sh == sw {
        Ok(sh)
    } else {
        Err(Error::unsupported(
            op.at(),
            format!("strides of {sh} and {sw}; constmat's stride is one number"),
        ))
    }
}

fn expect(op: &Operator, found: Sample, computed: Sample) -> Result<(), Error> {
    let same = match (found, computed) {
        (Sample::Vector { n, .. }, Sample::Vector { n: m, .. }) => n == m,
        _ => found == computed,
    };
    if same {
        Ok(())
    } else {
        Err(Error::corrupt(format!(
            "{}: its output is {found:?}, but its input and options give {computed:?}",
            op.at()
        )))
    }
}

/// TensorFlow Lite's `ComputePaddingHeightWidth` for one dimension: the output size and the
/// padding before and after.
fn window(padding: Padding, size: usize, kernel: usize, stride: usize) -> (usize, usize, usize) {
    match padding {
        Padding::Valid => ((size.saturating_sub(kernel)) / stride + 1, 0, 0),
        Padding::Same => {
            let out = size.div_ceil(stride);
            let total = ((out - 1) * stride + kernel).saturating_sub(size);
            (out, total / 2, total - total / 2)
        }
    }
}
