//! Small models built with the schema's own builders: what imports, what is refused and how,
//! and that damaged files are refused without a panic.

use flatbuffers::FlatBufferBuilder;

use crate::schema_generated::tflite;
use crate::{Error, import};

/// An operator's options, as the builder writes them.
#[derive(Clone, Copy)]
enum Options {
    None,
    Conv {
        padding: tflite::Padding,
        stride: i32,
        dilation: i32,
    },
    Softmax {
        beta: f32,
    },
    FullyConnected,
}

/// A tensor: its shape, type and constant data (little-endian), if any.
struct T {
    shape: Vec<i32>,
    dtype: tflite::TensorType,
    data: Option<Vec<u8>>,
    signature: Option<Vec<i32>>,
}

fn t(shape: &[i32]) -> T {
    T {
        shape: shape.to_vec(),
        dtype: tflite::TensorType::FLOAT32,
        data: None,
        signature: None,
    }
}

fn constant(shape: &[i32], value: f32) -> T {
    let count: i32 = shape.iter().product();
    let data = (0..count)
        .flat_map(|i| (value + i as f32 * 0.01).to_le_bytes())
        .collect();
    T {
        shape: shape.to_vec(),
        dtype: tflite::TensorType::FLOAT32,
        data: Some(data),
        signature: None,
    }
}

/// The model of `tensors` and `ops` (code, inputs, outputs, options), tensor 0 its input and
/// the last its output.
fn model(tensors: &[T], ops: &[(tflite::BuiltinOperator, Vec<i32>, Vec<i32>, Options)]) -> Vec<u8> {
    let mut fbb = FlatBufferBuilder::new();
    let mut buffers = vec![tflite::Buffer::create(
        &mut fbb,
        &tflite::BufferArgs { data: None },
    )];
    let mut tensor_offsets = Vec::new();
    for (i, tensor) in tensors.iter().enumerate() {
        let buffer = match &tensor.data {
            Some(bytes) => {
                let data = fbb.create_vector(bytes);
                buffers.push(tflite::Buffer::create(
                    &mut fbb,
                    &tflite::BufferArgs { data: Some(data) },
                ));
                (buffers.len() - 1) as u32
            }
            None => 0,
        };
        let shape = fbb.create_vector(&tensor.shape);
        let signature = tensor.signature.as_ref().map(|s| fbb.create_vector(s));
        let name = fbb.create_string(&format!("t{i}"));
        tensor_offsets.push(tflite::Tensor::create(
            &mut fbb,
            &tflite::TensorArgs {
                shape: Some(shape),
                type_: tensor.dtype,
                buffer,
                name: Some(name),
                shape_signature: signature,
                ..Default::default()
            },
        ));
    }
    let mut codes = Vec::new();
    let mut code_offsets = Vec::new();
    let mut op_offsets = Vec::new();
    for (code, inputs, outputs, options) in ops {
        let index = codes.iter().position(|c| c == code).unwrap_or_else(|| {
            codes.push(*code);
            code_offsets.push(tflite::OperatorCode::create(
                &mut fbb,
                &tflite::OperatorCodeArgs {
                    deprecated_builtin_code: code.0.min(127) as i8,
                    builtin_code: *code,
                    version: 1,
                    ..Default::default()
                },
            ));
            codes.len() - 1
        });
        let (kind, options) = match *options {
            Options::None => (tflite::BuiltinOptions::NONE, None),
            Options::Conv {
                padding,
                stride,
                dilation,
            } => {
                let o = tflite::Conv2DOptions::create(
                    &mut fbb,
                    &tflite::Conv2DOptionsArgs {
                        padding,
                        stride_w: stride,
                        stride_h: stride,
                        fused_activation_function: tflite::ActivationFunctionType::RELU,
                        dilation_w_factor: dilation,
                        dilation_h_factor: dilation,
                    },
                );
                (
                    tflite::BuiltinOptions::Conv2DOptions,
                    Some(o.as_union_value()),
                )
            }
            Options::Softmax { beta } => {
                let o =
                    tflite::SoftmaxOptions::create(&mut fbb, &tflite::SoftmaxOptionsArgs { beta });
                (
                    tflite::BuiltinOptions::SoftmaxOptions,
                    Some(o.as_union_value()),
                )
            }
            Options::FullyConnected => {
                let o = tflite::FullyConnectedOptions::create(
                    &mut fbb,
                    &tflite::FullyConnectedOptionsArgs::default(),
                );
                (
                    tflite::BuiltinOptions::FullyConnectedOptions,
                    Some(o.as_union_value()),
                )
            }
        };
        let inputs = fbb.create_vector(inputs);
        let outputs = fbb.create_vector(outputs);
        op_offsets.push(tflite::Operator::create(
            &mut fbb,
            &tflite::OperatorArgs {
                opcode_index: index as u32,
                inputs: Some(inputs),
                outputs: Some(outputs),
                builtin_options_type: kind,
                builtin_options: options,
                ..Default::default()
            },
        ));
    }
    let tensors = fbb.create_vector(&tensor_offsets);
    let operators = fbb.create_vector(&op_offsets);
    let inputs = fbb.create_vector(&[0]);
    let outputs = fbb.create_vector(&[tensor_offsets.len() as i32 - 1]);
    let subgraph = tflite::SubGraph::create(
        &mut fbb,
        &tflite::SubGraphArgs {
            tensors: Some(tensors),
            inputs: Some(inputs),
            outputs: Some(outputs),
            operators: Some(operators),
            name: None,
        },
    );
    let subgraphs = fbb.create_vector(&[subgraph]);
    let codes = fbb.create_vector(&code_offsets);
    let buffers = fbb.create_vector(&buffers);
    let root = tflite::Model::create(
        &mut fbb,
        &tflite::ModelArgs {
            version: 3,
            operator_codes: Some(codes),
            subgraphs: Some(subgraphs),
            buffers: Some(buffers),
            ..Default::default()
        },
    );
    tflite::finish_model_buffer(&mut fbb, root);
    fbb.finished_data().to_vec()
}

const CONV: tflite::BuiltinOperator = tflite::BuiltinOperator::CONV_2D;
const SAME: Options = Options::Conv {
    padding: tflite::Padding::SAME,
    stride: 1,
    dilation: 1,
};

/// A float net: a 3 x 3 convolution with SAME padding and ReLU, the reshape, a dense layer and
/// the softmax.
fn small(conv: Options, softmax_beta: f32) -> Vec<u8> {
    model(
        &[
            t(&[1, 4, 4, 1]),
            constant(&[2, 3, 3, 1], 0.1),
            constant(&[2], 0.5),
            t(&[1, 4, 4, 2]),
            t(&[1, 32]),
            constant(&[3, 32], -0.2),
            constant(&[3], 0.0),
            t(&[1, 3]),
            constant(&[2], 0.0),
            t(&[1, 3]),
        ],
        &[
            (CONV, vec![0, 1, 2], vec![3], conv),
            (
                tflite::BuiltinOperator::RESHAPE,
                vec![3, 8],
                vec![4],
                Options::None,
            ),
            (
                tflite::BuiltinOperator::FULLY_CONNECTED,
                vec![4, 5, 6],
                vec![7],
                Options::FullyConnected,
            ),
            (
                tflite::BuiltinOperator::SOFTMAX,
                vec![7],
                vec![9],
                Options::Softmax { beta: softmax_beta },
            ),
        ],
    )
}

#[test]
fn a_float_net_imports() {
    let imported = import(&small(SAME, 1.0), "small.tflite", "small").unwrap();
    assert_eq!(
        import(&small(SAME, 1.0), "small.tflite", "small").unwrap(),
        imported,
        "the same bytes again"
    );
    for line in [
        "Input<f32, 1, 4, 4>,",
        "Conv2d<1, 2, 3, 1, 1, Relu>,",
        "Flatten,",
        "Dense<32, 3>,",
        "Softmax,",
    ] {
        assert!(
            imported.source.contains(&format!("\n    {line}\n")),
            "{line} in:\n{}",
            imported.source
        );
    }
    let tensors = safetensors::SafeTensors::deserialize(&imported.weights).unwrap();
    let mut names: Vec<String> = tensors.names().into_iter().map(str::to_owned).collect();
    names.sort();
    // The convolution is module 0 and its ReLU 1; Flatten 2; the dense layer 3.
    assert_eq!(names, ["0.bias", "0.weight", "3.bias", "3.weight"]);
    assert_eq!(tensors.tensor("0.weight").unwrap().shape(), [2, 1, 3, 3]);
    // The dense layer's columns read Flatten's channels-first order: column 1 is channel 0 at
    // (0, 1), the file's column 2 (height, width, channels).
    let dense = tensors.tensor("3.weight").unwrap().data();
    let column = |k: usize| f32::from_le_bytes(dense[4 * k..4 * k + 4].try_into().unwrap());
    assert_eq!(column(1), -0.2 + 2.0 * 0.01);
    assert_eq!(
        column(16),
        -0.2 + 1.0 * 0.01,
        "channel 1 at (0, 0) is the file's column 1"
    );
}

#[test]
fn a_net_of_vectors_imports_in_the_plain_form() {
    let bytes = model(
        &[
            t(&[1, 6]),
            constant(&[4, 6], 0.1),
            constant(&[4], 0.0),
            t(&[1, 4]),
            constant(&[3, 4], 0.2),
            constant(&[3], 0.0),
            t(&[1, 3]),
            t(&[1, 3]),
        ],
        &[
            (
                tflite::BuiltinOperator::FULLY_CONNECTED,
                vec![0, 1, 2],
                vec![3],
                Options::FullyConnected,
            ),
            (
                tflite::BuiltinOperator::FULLY_CONNECTED,
                vec![3, 4, 5],
                vec![6],
                Options::FullyConnected,
            ),
            (
                tflite::BuiltinOperator::SOFTMAX,
                vec![6],
                vec![7],
                Options::Softmax { beta: 1.0 },
            ),
        ],
    );
    let imported = import(&bytes, "vectors.tflite", "vectors").unwrap();
    assert!(
        imported.source.contains(
            "pub type Net = constmat::net![\n    Dense<f32, 6, 4>,\n    Dense<f32, 4, 3>,\n    Softmax<f32, 3>,\n];"
        ),
        "{}",
        imported.source
    );
    assert!(
        imported
            .source
            .contains("use constmat::nn::{Arena, Dense, Layer, Softmax};"),
        "{}",
        imported.source
    );
    assert!(
        imported
            .source
            .contains("    *arena.input(&NET) = *input;\n    *output = *arena.run(&NET);\n")
    );
    let tensors = safetensors::SafeTensors::deserialize(&imported.weights).unwrap();
    assert_eq!(tensors.tensor("1.weight").unwrap().shape(), [3, 4]);
}

fn refused(bytes: &[u8]) -> String {
    match import(bytes, "m.tflite", "m") {
        Ok(_) => panic!("imported"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn an_operator_without_a_layer_is_named() {
    let bytes = model(
        &[t(&[1, 4, 4, 1]), t(&[1, 4, 4, 1])],
        &[(
            tflite::BuiltinOperator::TANH,
            vec![0],
            vec![1],
            Options::None,
        )],
    );
    assert_eq!(
        refused(&bytes),
        "operator #0 (TANH): constmat has no layer for it; it imports CONV_2D, DEPTHWISE_CONV_2D, \
         AVERAGE_POOL_2D, MAX_POOL_2D, ADD, FULLY_CONNECTED, RESHAPE and SOFTMAX"
    );
}

#[test]
fn options_without_a_constmat_form_are_named() {
    let dilated = Options::Conv {
        padding: tflite::Padding::SAME,
        stride: 1,
        dilation: 2,
    };
    assert_eq!(
        refused(&small(dilated, 1.0)),
        "operator #0 (CONV_2D): a dilation of 2 x 2; constmat's convolutions are not dilated"
    );
    assert_eq!(
        refused(&small(SAME, 0.5)),
        "operator #3 (SOFTMAX): a beta of 0.5; constmat's softmax has beta 1"
    );
}

#[test]
fn a_graph_that_is_not_a_chain_is_refused() {
    // The input read by three convolutions.
    let w = || constant(&[1, 1, 1, 1], 1.0);
    let bytes = model(
        &[
            t(&[1, 2, 2, 1]),
            w(),
            t(&[1, 2, 2, 1]),
            t(&[1, 2, 2, 1]),
            t(&[1, 2, 2, 1]),
        ],
        &[
            (CONV, vec![0, 1, -1], vec![2], SAME),
            (CONV, vec![0, 1, -1], vec![3], SAME),
            (CONV, vec![0, 1, -1], vec![4], SAME),
        ],
    );
    assert_eq!(
        refused(&bytes),
        "tensor #0 \"t0\": read by 3 operators; constmat's graphs fork in two, into a residual block"
    );
}

#[test]
fn a_hybrid_model_is_refused() {
    let mut tensors = vec![
        t(&[1, 2, 2, 1]),
        constant(&[1, 1, 1, 1], 1.0),
        t(&[1, 2, 2, 1]),
    ];
    tensors[1].dtype = tflite::TensorType::INT8;
    tensors[1].data = Some(vec![3]);
    let bytes = model(&tensors, &[(CONV, vec![0, 1, -1], vec![2], SAME)]);
    assert_eq!(
        refused(&bytes),
        "tensor #1 \"t1\": elements of INT8, where this model's layers take FLOAT32 (a hybrid model?)"
    );
}

#[test]
fn a_dynamic_shape_is_refused() {
    let mut tensors = vec![
        t(&[1, 2, 2, 1]),
        constant(&[1, 1, 1, 1], 1.0),
        t(&[1, 2, 2, 1]),
    ];
    tensors[0].signature = Some(vec![1, -1, 2, 1]);
    let bytes = model(&tensors, &[(CONV, vec![0, 1, -1], vec![2], SAME)]);
    assert_eq!(
        refused(&bytes),
        "tensor #0 \"t0\": a dynamic shape; constmat's shapes are fixed"
    );
}

#[test]
fn damaged_files_are_refused_without_a_panic() {
    assert!(matches!(
        import(&[], "m.tflite", "m"),
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        import(b"not a model at all", "m.tflite", "m"),
        Err(Error::Corrupt(_))
    ));
    let good = small(SAME, 1.0);
    // Every truncation, and every byte changed (each to another value; the offsets and sizes
    // a flatbuffer is read by are among them).
    for len in 0..good.len() {
        assert!(
            import(&good[..len], "m.tflite", "m").is_err(),
            "truncated to {len} bytes"
        );
    }
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] = bad[i].wrapping_add(if i % 2 == 0 { 0x80 } else { 0xff });
        let _ = import(&bad, "m.tflite", "m");
    }
}
