//! Every shape rule of `constmat`: runs the valid side of each, and prints the command that builds
//! the invalid side so you can read the compiler's own message on your toolchain.
//!
//! ```text
//! cargo run --example shape_errors
//! cargo rustc -p constmat-examples --example shape_errors -- --cfg 'shape_error="multiply"'
//! ```
//!
//! `cargo rustc` passes the `--cfg` to this example only, so nothing else is rebuilt; it builds a
//! single package, hence `-p`: the examples are the package `constmat-examples`. The
//! catalogue of the messages, with how to read each one, is `docs/shape-errors.md`.

use constmat::Matrix;

/// One shape rule: the `shape_error` value that turns on its invalid side, the rule itself, and a
/// run of its valid side describing the result.
struct Rule {
    cfg: &'static str,
    rule: &'static str,
    valid: fn() -> String,
}

const RULES: &[Rule] = &[
    Rule {
        cfg: "multiply",
        rule: "`&a * &b`: (H x K) * (K x W) -> H x W, the inner dimensions must agree",
        valid: multiply,
    },
    Rule {
        cfg: "multiply_owned",
        rule: "`a * b`: the same rule for owned operands",
        valid: multiply_owned,
    },
    Rule {
        cfg: "add",
        rule: "`&a + &b`: both operands have the same shape",
        valid: add,
    },
    Rule {
        cfg: "sub",
        rule: "`a - b`: both operands have the same shape",
        valid: sub,
    },
    Rule {
        cfg: "add_assign",
        rule: "`a += &b`: the right-hand side has the shape of the left",
        valid: add_assign,
    },
    Rule {
        cfg: "binding",
        rule: "a product is stored in a binding of its own shape",
        valid: binding,
    },
    Rule {
        cfg: "add_row_broadcast",
        rule: "`add_row_broadcast`: the row added to H x W is 1 x W",
        valid: add_row_broadcast,
    },
    Rule {
        cfg: "add_column_broadcast",
        rule: "`add_column_broadcast`: the column added to H x W is H x 1",
        valid: add_column_broadcast,
    },
    Rule {
        cfg: "matmul_transpose_lhs",
        rule: "`matmul_transpose_lhs`: (K x H)ᵀ · (K x W) -> H x W, both have K rows",
        valid: matmul_transpose_lhs,
    },
    Rule {
        cfg: "matmul_transpose_rhs",
        rule: "`matmul_transpose_rhs`: (H x K) · (W x K)ᵀ -> H x W, both have K columns",
        valid: matmul_transpose_rhs,
    },
    Rule {
        cfg: "matmul_into",
        rule: "`matmul_into`: the output of (H x K) · (K x W) is H x W",
        valid: matmul_into,
    },
    Rule {
        cfg: "reshape",
        rule: "`reshape`: H * W == H2 * W2 (checked by `cargo build`, not `cargo check`)",
        valid: reshape,
    },
    Rule {
        cfg: "concat_columns",
        rule: "`concat_columns`: W + W2 == W3 (checked by `cargo build`)",
        valid: concat_columns,
    },
    Rule {
        cfg: "concat_rows",
        rule: "`concat_rows`: H + H2 == H3 (checked by `cargo build`)",
        valid: concat_rows,
    },
    Rule {
        cfg: "split_columns",
        rule: "`split_columns`: W1 + W2 == W (checked by `cargo build`)",
        valid: split_columns,
    },
    Rule {
        cfg: "split_rows",
        rule: "`split_rows`: H1 + H2 == H (checked by `cargo build`)",
        valid: split_rows,
    },
    Rule {
        cfg: "submatrix",
        rule: "`submatrix`: ROW + H2 <= H and COL + W2 <= W (checked by `cargo build`)",
        valid: submatrix,
    },
    Rule {
        cfg: "identity",
        rule: "`identity()`: only square matrix types have one",
        valid: identity,
    },
    Rule {
        cfg: "hadamard",
        rule: "`hadamard`: both operands have the same shape",
        valid: hadamard,
    },
    Rule {
        cfg: "layers",
        rule: "`net![..]`: each layer's input width is the previous layer's output width",
        valid: layers,
    },
    Rule {
        cfg: "static_layers",
        rule: "a hand-written baked net: its layers chain too, checked where the `static` is",
        valid: static_layers,
    },
    Rule {
        cfg: "baked_type",
        rule: "`to_store::<Inline>()`: the baked form of `Net` is `Baked<Net>`",
        valid: baked_type,
    },
    Rule {
        cfg: "optimizer",
        rule: "an optimizer updates only the net it was built for",
        valid: optimizer,
    },
    Rule {
        cfg: "from_flat",
        rule: "`from_flat`: the array holds H * W elements (checked by `cargo build`)",
        valid: from_flat,
    },
    Rule {
        cfg: "conv_kernel",
        rule: "`Conv2d`: the kernel fits in the padded input (sizes computed by `net!`)",
        valid: conv_kernel,
    },
    Rule {
        cfg: "conv_channels",
        rule: "`Conv2d`: its input channels are the previous layer's output channels",
        valid: conv_channels,
    },
    Rule {
        cfg: "flatten",
        rule: "`Flatten`: the next `Dense` takes channels x height x width. PyTorch says, at run \
               time:\n    RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x256 and 784x120)",
        valid: flatten,
    },
    Rule {
        cfg: "conv_by_hand",
        rule: "a `Conv2d` written by hand: OH = (H + 2P - K) / S + 1 (checked by `cargo build`)",
        valid: conv_by_hand,
    },
    Rule {
        cfg: "flatten_by_hand",
        rule: "a `Flatten` written by hand: N = C * H * W (checked by `cargo build`)",
        valid: flatten_by_hand,
    },
];

fn main() {
    println!("The shape rules of constmat: each runs its valid side, and the command after it");
    println!("builds the invalid side so that your compiler shows its message.\n");
    for Rule { cfg, rule, valid } in RULES {
        println!("{rule}");
        println!("    ok:    {}", valid());
        println!(
            "    error: cargo rustc -p constmat-examples --example shape_errors -- --cfg 'shape_error=\"{cfg}\"'\n"
        );
    }
}

// The `#[cfg(shape_error = "..")]` blocks are the invalid sides, the same code as the compile-fail
// cases in tests/ui/fail. Each brings its own bindings, so that with no cfg set they leave nothing
// unused behind.

fn multiply() -> String {
    #[cfg(shape_error = "multiply")]
    {
        let a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 4, 1>::zeros();
        let _c = &a * &b;
    }
    let a = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    let b = Matrix::<i32, 3, 1>::from_rows([[1], [0], [-1]]);
    format!("(2x3) * (3x1) = {:?}", &a * &b)
}

fn multiply_owned() -> String {
    #[cfg(shape_error = "multiply_owned")]
    {
        let a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 4, 1>::zeros();
        let _c = a * b;
    }
    let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    let b = Matrix::<i32, 2, 2>::from_rows([[1, 1], [0, 1]]);
    format!("(1x2) * (2x2) = {:?}", a * b)
}

fn add() -> String {
    #[cfg(shape_error = "add")]
    {
        let a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 3, 2>::zeros();
        let _c = &a + &b;
    }
    let a = Matrix::<i32, 2, 2>::from_rows([[1, 2], [3, 4]]);
    format!("(2x2) + (2x2) = {:?}", &a + &a)
}

fn sub() -> String {
    #[cfg(shape_error = "sub")]
    {
        let a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 2, 4>::zeros();
        let _c = a - b;
    }
    let a = Matrix::<i32, 1, 3>::from_rows([[5, 7, 9]]);
    let b = Matrix::<i32, 1, 3>::ones();
    format!("(1x3) - (1x3) = {:?}", a - b)
}

fn add_assign() -> String {
    #[cfg(shape_error = "add_assign")]
    {
        let mut a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 2, 2>::zeros();
        a += &b;
    }
    let mut a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    a += &Matrix::from_rows([[10, 20]]);
    format!("(1x2) += (1x2) gives {a:?}")
}

fn binding() -> String {
    #[cfg(shape_error = "binding")]
    {
        let a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 3, 5>::zeros();
        let _c: Matrix<f32, 2, 4> = &a * &b;
    }
    let a = Matrix::<i32, 2, 3>::ones();
    let b = Matrix::<i32, 3, 5>::ones();
    let c: Matrix<i32, 2, 5> = &a * &b;
    format!("let c: Matrix<i32, 2, 5> = (2x3) * (3x5); c = {c:?}")
}

fn add_row_broadcast() -> String {
    #[cfg(shape_error = "add_row_broadcast")]
    {
        let m = Matrix::<f32, 2, 3>::zeros();
        let row = Matrix::<f32, 1, 4>::zeros();
        let _sum = m.add_row_broadcast(&row);
    }
    let m = Matrix::<i32, 2, 3>::zeros();
    let row = Matrix::<i32, 1, 3>::from_rows([[1, 2, 3]]);
    format!("(2x3) + row (1x3) = {:?}", m.add_row_broadcast(&row))
}

fn add_column_broadcast() -> String {
    #[cfg(shape_error = "add_column_broadcast")]
    {
        let m = Matrix::<f32, 2, 3>::zeros();
        let column = Matrix::<f32, 3, 1>::zeros();
        let _sum = m.add_column_broadcast(&column);
    }
    let m = Matrix::<i32, 2, 3>::zeros();
    let column = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    format!(
        "(2x3) + column (2x1) = {:?}",
        m.add_column_broadcast(&column)
    )
}

fn matmul_transpose_lhs() -> String {
    #[cfg(shape_error = "matmul_transpose_lhs")]
    {
        let dz = Matrix::<f32, 3, 2>::zeros();
        let x = Matrix::<f32, 4, 5>::zeros();
        let _dw = dz.matmul_transpose_lhs(&x);
    }
    let dz = Matrix::<i32, 3, 2>::from_rows([[1, 0], [0, 1], [1, 1]]);
    let x = Matrix::<i32, 3, 1>::from_rows([[1], [2], [3]]);
    format!("(3x2)ᵀ · (3x1) = {:?}", dz.matmul_transpose_lhs(&x))
}

fn matmul_transpose_rhs() -> String {
    #[cfg(shape_error = "matmul_transpose_rhs")]
    {
        let x = Matrix::<f32, 1, 3>::zeros();
        let w = Matrix::<f32, 2, 4>::zeros();
        let _z = x.matmul_transpose_rhs(&w);
    }
    let x = Matrix::<i32, 1, 3>::from_rows([[1, 2, 3]]);
    let w = Matrix::<i32, 2, 3>::from_rows([[1, 0, 0], [1, 1, 1]]);
    format!("(1x3) · (2x3)ᵀ = {:?}", x.matmul_transpose_rhs(&w))
}

fn matmul_into() -> String {
    #[cfg(shape_error = "matmul_into")]
    {
        let a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 3, 4>::zeros();
        let mut out = Matrix::<f32, 2, 3>::zeros();
        a.matmul_into(&b, &mut out);
    }
    let a = Matrix::<i32, 2, 3>::ones();
    let b = Matrix::<i32, 3, 4>::ones();
    let mut out = Matrix::<i32, 2, 4>::zeros();
    a.matmul_into(&b, &mut out);
    format!("(2x3) · (3x4) into a 2x4 output: {out:?}")
}

fn reshape() -> String {
    #[cfg(shape_error = "reshape")]
    {
        let image = Matrix::<f32, 28, 28>::zeros();
        let _column: Matrix<f32, 700, 1> = image.reshape();
    }
    let image = Matrix::<u16, 28, 28>::from_fn(|r, c| (28 * r + c) as u16);
    let column: Matrix<u16, 784, 1> = image.reshape();
    let last = column[(783, 0)];
    format!("28x28 -> 784x1; the last element, (27, 27) before, is {last}")
}

fn concat_columns() -> String {
    #[cfg(shape_error = "concat_columns")]
    {
        let a = Matrix::<f32, 2, 1>::zeros();
        let b = Matrix::<f32, 2, 2>::zeros();
        let _ab: Matrix<f32, 2, 4> = a.concat_columns(&b);
    }
    let a = Matrix::<i32, 2, 1>::from_rows([[1], [2]]);
    let b = Matrix::<i32, 2, 2>::from_rows([[3, 4], [5, 6]]);
    let ab: Matrix<i32, 2, 3> = a.concat_columns(&b);
    format!("[2x1 | 2x2] = {ab:?}")
}

fn concat_rows() -> String {
    #[cfg(shape_error = "concat_rows")]
    {
        let a = Matrix::<f32, 1, 2>::zeros();
        let b = Matrix::<f32, 2, 2>::zeros();
        let _ab: Matrix<f32, 4, 2> = a.concat_rows(&b);
    }
    let a = Matrix::<i32, 1, 2>::from_rows([[1, 2]]);
    let b = Matrix::<i32, 2, 2>::from_rows([[3, 4], [5, 6]]);
    let ab: Matrix<i32, 3, 2> = a.concat_rows(&b);
    format!("[1x2; 2x2] = {ab:?}")
}

fn split_columns() -> String {
    #[cfg(shape_error = "split_columns")]
    {
        let m = Matrix::<f32, 2, 3>::zeros();
        let (_left, _right): (Matrix<f32, 2, 1>, Matrix<f32, 2, 1>) = m.split_columns();
    }
    let m = Matrix::<i32, 2, 3>::from_rows([[1, 2, 3], [4, 5, 6]]);
    let (left, right): (Matrix<i32, 2, 1>, Matrix<i32, 2, 2>) = m.split_columns();
    format!("2x3 -> {left:?} | {right:?}")
}

fn split_rows() -> String {
    #[cfg(shape_error = "split_rows")]
    {
        let m = Matrix::<f32, 3, 2>::zeros();
        let (_top, _bottom): (Matrix<f32, 2, 2>, Matrix<f32, 2, 2>) = m.split_rows();
    }
    let m = Matrix::<i32, 3, 2>::from_rows([[1, 2], [3, 4], [5, 6]]);
    let (top, bottom): (Matrix<i32, 1, 2>, Matrix<i32, 2, 2>) = m.split_rows();
    format!("3x2 -> {top:?} ; {bottom:?}")
}

fn submatrix() -> String {
    #[cfg(shape_error = "submatrix")]
    {
        let m = Matrix::<f32, 3, 3>::zeros();
        let _block = m.submatrix::<2, 0, 2, 2>();
    }
    let m = Matrix::<i32, 3, 3>::from_fn(|r, c| (3 * r + c) as i32);
    let block = m.submatrix::<1, 1, 2, 2>();
    format!("the 2x2 block at (1, 1) of a 3x3 = {block:?}")
}

fn identity() -> String {
    #[cfg(shape_error = "identity")]
    {
        let _i = Matrix::<f32, 3, 4>::identity();
    }
    format!("{:?}", Matrix::<i32, 3, 3>::identity())
}

fn hadamard() -> String {
    #[cfg(shape_error = "hadamard")]
    {
        let a = Matrix::<f32, 2, 3>::zeros();
        let b = Matrix::<f32, 3, 2>::zeros();
        let _c = a.hadamard(&b);
    }
    let a = Matrix::<i32, 1, 3>::from_rows([[1, 2, 3]]);
    let b = Matrix::<i32, 1, 3>::from_rows([[4, 5, 6]]);
    format!("(1x3) ⊙ (1x3) = {:?}", a.hadamard(&b))
}

fn layers() -> String {
    use constmat::nn::{Dense, Parameters, Relu, Trainer};
    #[cfg(shape_error = "layers")]
    {
        type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 100, 10>];
        let net = Net::zeros();
        let _trainer = Trainer::<f32, Net, 64>::new(&net);
    }
    type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];
    let net = Net::zeros();
    let _trainer = Trainer::<f32, Net, 64>::new(&net);
    "a 784-128-10 net and a trainer for batches of 64".to_string()
}

fn static_layers() -> String {
    use constmat::nn::{Chain, Dense, Identity, Inline, Layer};
    #[cfg(shape_error = "static_layers")]
    {
        static NET: Chain<Dense<f32, 2, 8, Identity, Inline>, Dense<f32, 6, 1, Identity, Inline>> =
            Chain::new(
                Dense::new([[0.0; 2]; 8], [0.0; 8]),
                Dense::new([[0.0; 6]], [0.0]),
            );
        let _ = &NET;
    }
    static NET: Chain<Dense<f32, 2, 8, Identity, Inline>, Dense<f32, 8, 1, Identity, Inline>> =
        Chain::new(
            Dense::new([[1.0; 2]; 8], [0.0; 8]),
            Dense::new([[1.0; 8]], [0.0]),
        );
    let mut out = [0.0];
    NET.forward_one(&[1.0, 2.0], &mut out);
    format!("a static 2-8-1 net: [1, 2] -> {out:?}")
}

fn baked_type() -> String {
    use constmat::embed::Baked;
    use constmat::nn::{Dense, Inline, Layer, Parameters, Relu};
    type Net = constmat::net![Dense<f32, 4, 8, Relu>, Dense<f32, 8, 2>];
    #[cfg(shape_error = "baked_type")]
    {
        type Wrong = constmat::net![
            Dense<f32, 4, 6, Relu, Inline>,
            Dense<f32, 6, 2, constmat::nn::Identity, Inline>,
        ];
        let _baked: Wrong = Net::zeros().to_store::<Inline>();
    }
    let baked: Baked<Net> = Net::zeros().to_store::<Inline>();
    format!(
        "a trained 4-8-2 net as Baked<Net>: {} bytes of parameters inline",
        size_of_val(&baked)
    )
}

fn optimizer() -> String {
    use constmat::nn::{Adam, Dense, Parameters, Relu, SoftmaxCrossEntropy, Trainer};
    type Net = constmat::net![Dense<f32, 784, 128, Relu>, Dense<f32, 128, 10>];
    let (x, y) = ([[0.0; 784]], [[0.1; 10]]);
    #[cfg(shape_error = "optimizer")]
    {
        type Small = constmat::net![Dense<f32, 784, 100, Relu>, Dense<f32, 100, 10>];
        let mut adam = Adam::new(&Small::zeros());
        let mut net = Net::zeros();
        let mut trainer = Trainer::<f32, Net, 1>::new(&net);
        let _ = trainer.step(&mut net, &mut adam, 0.01, &SoftmaxCrossEntropy, &x, &y);
    }
    let mut net = Net::zeros();
    let mut adam = Adam::new(&net);
    let mut trainer = Trainer::<f32, Net, 1>::new(&net);
    let loss = trainer
        .step(&mut net, &mut adam, 0.01, &SoftmaxCrossEntropy, &x, &y)
        .expect("a zero net's loss is finite");
    format!("one Adam step of a 784-128-10 net, loss {loss:.3}")
}

fn from_flat() -> String {
    #[cfg(shape_error = "from_flat")]
    {
        let _m = Matrix::<f32, 2, 3>::from_flat([1.0, 2.0, 3.0, 4.0, 5.0]);
    }
    let m = Matrix::<f32, 2, 3>::from_flat([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    format!("[1, 2, 3, 4, 5, 6] as 2x3: rows {:?} and {:?}", m[0], m[1])
}

fn conv_kernel() -> String {
    use constmat::nn::{Layer, Relu};
    #[cfg(shape_error = "conv_kernel")]
    {
        use constmat::nn::Parameters;
        type Net =
            constmat::net![Input<f32, 1, 3, 3>, Conv2d<1, 4, 5, Relu>, Flatten, Dense<4, 10>];
        let _net = Net::zeros();
    }
    type Net = constmat::net![Input<f32, 1, 5, 5>, Conv2d<1, 4, 5, Relu>, Flatten, Dense<4, 10>];
    format!(
        "a 5x5 kernel on a 5x5 image: {} modules",
        Net::SPEC.modules()
    )
}

fn conv_channels() -> String {
    use constmat::nn::{Parameters, Relu};
    #[cfg(shape_error = "conv_channels")]
    {
        type Net = constmat::net![
            Input<f32, 1, 28, 28>,
            Conv2d<1, 6, 5, Relu>,
            MaxPool2d<2>,
            Conv2d<8, 16, 5, Relu>,
            MaxPool2d<2>,
            Flatten,
            Dense<256, 10>,
        ];
        let _net = Net::zeros();
    }
    type Net = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 6, 5, Relu>,
        MaxPool2d<2>,
        Conv2d<6, 16, 5, Relu>,
        MaxPool2d<2>,
        Flatten,
        Dense<256, 10>,
    ];
    let _net = Net::zeros();
    "6 channels out of the first convolution, 6 into the second".to_string()
}

fn flatten() -> String {
    use constmat::nn::{Parameters, Relu};
    #[cfg(shape_error = "flatten")]
    {
        type Net = constmat::net![
            Input<f32, 1, 28, 28>,
            Conv2d<1, 6, 5, Relu>,
            MaxPool2d<2>,
            Conv2d<6, 16, 5, Relu>,
            MaxPool2d<2>,
            Flatten,
            Dense<784, 120, Relu>,
            Dense<120, 10>,
        ];
        let _net = Net::zeros();
    }
    type Net = constmat::net![
        Input<f32, 1, 28, 28>,
        Conv2d<1, 6, 5, Relu>,  // 6 x 24 x 24
        MaxPool2d<2>,           // 6 x 12 x 12
        Conv2d<6, 16, 5, Relu>, // 16 x 8 x 8
        MaxPool2d<2>,           // 16 x 4 x 4
        Flatten,                // 256
        Dense<256, 120, Relu>,
        Dense<120, 10>,
    ];
    let _net = Net::zeros();
    "Flatten gives 16 x 4 x 4 = 256 to a Dense<256, 120>".to_string()
}

fn conv_by_hand() -> String {
    use constmat::nn::{Conv2d, Layer, Parameters, Relu};
    #[cfg(shape_error = "conv_by_hand")]
    {
        let conv = Conv2d::<f32, 1, 4, 3, 1, 1, 28, 28, 26, 26, Relu>::zeros();
        let mut out = [[[0.0; 26]; 26]; 4];
        conv.forward_one(&[[[0.0; 28]; 28]; 1], &mut out);
    }
    let conv = Conv2d::<f32, 1, 4, 3, 1, 1, 28, 28, 28, 28, Relu>::zeros();
    let mut out = [[[0.0; 28]; 28]; 4];
    conv.forward_one(&[[[0.0; 28]; 28]; 1], &mut out);
    "a 3x3 convolution with padding 1 keeps 28x28".to_string()
}

fn flatten_by_hand() -> String {
    use constmat::nn::{Flatten, Layer};
    #[cfg(shape_error = "flatten_by_hand")]
    {
        let _flatten = Flatten::<f32, 16, 5, 5, 256>::new();
    }
    let flatten = Flatten::<f32, 16, 5, 5, 400>::new();
    let mut out = [0.0; 400];
    flatten.forward_one(&[[[1.0; 5]; 5]; 16], &mut out);
    format!("16 x 5 x 5 -> {} values", out.len())
}
