//! Turns a TensorFlow Lite model (`.tflite`) into a typed constmat net: the source of a Rust
//! module (`net!` type, a `static` baked with `include_net!`, and `invoke`, which takes and
//! gives the model's tensors as TensorFlow Lite lays them out) and its weights file.
//!
//! The command line is `constmat-import MODEL.tflite --out DIR --name NAME`; [`import`] is
//! what it runs. A model is read with the flatbuffer bindings of TensorFlow Lite's schema
//! (`schema_generated.rs`, written by flatc), checked against what constmat can express (one
//! subgraph, a chain of layers and residual blocks of `CONV_2D`, `DEPTHWISE_CONV_2D`,
//! `AVERAGE_POOL_2D`, `MAX_POOL_2D`, `ADD`, `FULLY_CONNECTED`, `RESHAPE` and `SOFTMAX`, int8
//! or f32), lowered to constmat's layers and written out. Anything else is one [`Error`]
//! naming the operator or tensor.

mod error;
mod graph;
mod lower;
#[allow(clippy::all, missing_docs, unused_imports, dead_code, unsafe_op_in_unsafe_fn, mismatched_lifetime_syntaxes)]
#[rustfmt::skip]
mod schema_generated;
mod source;
mod weights;

pub use error::Error;

/// A model imported: the Rust module's source and its weights file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// `{name}.rs`.
    pub source: String,
    /// `{name}.safetensors`.
    pub weights: Vec<u8>,
}

/// Imports `model`, the bytes of a `.tflite` file named `file_name`, as the module `name`.
///
/// # Errors
///
/// When the bytes are not a TensorFlow Lite model, or the model holds something constmat
/// cannot express: [`Error`] says what, naming the operator or tensor and its index.
pub fn import(model: &[u8], file_name: &str, name: &str) -> Result<Imported, Error> {
    let graph = graph::read(model)?;
    let input = &graph.tensors[graph.input];
    let int8 = match input.dtype {
        graph::Dtype::I8 => true,
        graph::Dtype::F32 => false,
        graph::Dtype::I32 => {
            return Err(Error::unsupported(
                input.at(),
                "an INT32 input; constmat's nets take INT8 or FLOAT32",
            ));
        }
    };
    let output = &graph.tensors[graph.output];
    if output.dtype != input.dtype {
        return Err(Error::unsupported(
            output.at(),
            format!(
                "an output of {} for an input of {}; constmat's nets keep one element type",
                output.dtype.name(),
                input.dtype.name()
            ),
        ));
    }
    let net = lower::lower(&graph)?;
    // A vector input is written in `net!`'s plain form, which has dense layers and the softmax.
    if let lower::Sample::Vector { .. } = net.input
        && net
            .layers
            .iter()
            .any(|l| matches!(l, lower::Layer::Residual { .. }))
    {
        return Err(Error::unsupported(
            input.at(),
            "a vector input that forks into a residual block; constmat's nets of vectors are chains of dense layers and a softmax",
        ));
    }
    let mut tensors = weights::Weights::default();
    weights::write(&graph, int8, &net.layers, "", &mut tensors)?;
    // One metadata entry: the safetensors crate writes a map's entries in no fixed order, and
    // the same model must give the same bytes.
    let weights = tensors.to_bytes(&[(
        "imported_from",
        format!(
            "{file_name} by constmat-import {}",
            env!("CARGO_PKG_VERSION")
        ),
    )]);
    let source = source::write(
        &net,
        int8,
        &source::Origin {
            model: file_name,
            name,
        },
    );
    Ok(Imported { source, weights })
}

#[cfg(test)]
mod tests;
