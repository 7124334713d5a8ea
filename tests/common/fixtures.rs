//! Reading the PyTorch fixtures of `tests/fixtures/` (written once by the scripts there).

use std::path::{Path, PathBuf};

use constmat::format;

/// The path of fixture `name`.
pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Tensor `name` of the safetensors file `bytes` (`F64`), with its shape.
pub fn tensor(bytes: &[u8], name: &str) -> (Vec<f64>, Vec<usize>) {
    let header = format::parse(bytes).unwrap();
    let t = header
        .find(name.as_bytes())
        .unwrap_or_else(|| panic!("the fixture has no tensor {name}"));
    assert_eq!(t.dtype, format::Dtype::F64, "{name}");
    let values = t
        .data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (values, t.shape.dims().to_vec())
}

/// Asserts `|a - b| <= tolerance · max(1, |b|)` element by element.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max);
    assert!(
        worst <= tolerance,
        "{what}: worst difference {worst:e} > {tolerance:e}\n got:  {got:?}\n want: {want:?}"
    );
}

/// `samples` filled from `values`, sample after sample.
fn fill<S: super::gradient::Flat>(values: &[f64], samples: &mut [S]) {
    for (b, sample) in samples.iter_mut().enumerate() {
        for i in 0..S::LEN {
            *sample.get_mut(i) = values[b * S::LEN + i];
        }
    }
}

/// `net` (loaded from a fixture's state_dict) against the fixture `io_file` the script wrote
/// beside it: the outputs of `forward_train` and `forward` on its `x` equal PyTorch's `y`
/// within 1e-12, and the backward pass from its `dy` gives its `grad.<name>` of every tensor
/// and its `dx`.
pub fn matches_pytorch<N, const B: usize>(net: &N, io_file: &str)
where
    N: constmat::nn::Train<f64, B>,
    N::In: super::gradient::Flat,
    N::Out: super::gradient::Flat,
{
    use super::gradient::Flat;
    use constmat::nn::Sample;

    let io = std::fs::read(fixture(io_file)).unwrap();
    let read = |name: &str, len: usize| {
        let (values, _) = tensor(&io, name);
        assert_eq!(values.len(), len, "{io_file}: {name}");
        values
    };
    let flat = |samples: &[N::Out]| -> Vec<f64> {
        samples
            .iter()
            .flat_map(|s| (0..N::Out::LEN).map(move |i| s.get(i)))
            .collect()
    };
    let mut x = [N::In::ZERO; B];
    fill(&read("x", B * N::In::LEN), &mut x);

    let mut ws = net.workspace();
    let y = *net.forward_train(&x, &mut ws);
    let want_y = read("y", B * N::Out::LEN);
    assert_close("y", &flat(&y), &want_y, 1e-12);
    let mut y_inference = [N::Out::ZERO; B];
    net.forward(&x, &mut y_inference);
    assert_eq!(
        y_inference, y,
        "training and inference compute the same outputs"
    );

    let mut dy = [N::Out::ZERO; B];
    fill(&read("dy", B * N::Out::LEN), &mut dy);
    let mut grads = net.zeros_like();
    let mut dx = [N::In::ZERO; B];
    net.backward(&x, &mut ws, &dy, Some(&mut dx), &mut grads);
    for k in 0..net.tensor_count() {
        let name = net.tensor_info(k).name().to_string();
        let (want, shape) = tensor(&io, &format!("grad.{name}"));
        assert_eq!(shape, net.tensor_info(k).shape(), "{name}");
        assert_close(&format!("d {name}"), grads.tensor(k), &want, 1e-12);
    }
    let dx: Vec<f64> = dx
        .iter()
        .flat_map(|s| (0..N::In::LEN).map(move |i| s.get(i)))
        .collect();
    assert_close("dx", &dx, &read("dx", B * N::In::LEN), 1e-12);
}
