#!/usr/bin/env python3
"""The Python peers of constmat's benchmark harness: the same workloads with NumPy and PyTorch.

The harness (`cargo run --release --manifest-path benches/peers/Cargo.toml`) runs this script
once per round and per library, and reads the JSON it prints. It can also be run by hand:

    python3 benches/peers/peers.py probe
    python3 benches/peers/peers.py run --impl numpy [--mnist DIR | --synthetic] [--budget 0.4]
    python3 benches/peers/peers.py check --impl numpy --steps 100 --count 6400 < blob
    python3 benches/peers/peers.py suite < blob

Workloads, all float32 and single-threaded (the BLAS and OpenMP thread counts are set to 1
before NumPy or PyTorch is imported, and PyTorch's own with torch.set_num_threads(1)):

- gemm_MxKxN: C = A @ B into a preallocated C (NumPy: OpenBLAS sgemm; PyTorch: its CPU BLAS).
- train_step: one training step of the 784-128-64-10 ReLU MLP (softmax cross-entropy, plain
  SGD) on a fixed batch of 64.
- epoch_step: a step of the epoch loop: batch assembly (uint8 pixels to standardized float32,
  labels) plus the training step; the harness scales it to an epoch (937 steps).
- forward_batch1, forward_batch1000: forward passes.
- cnn_epoch_step, cnn_forward_batch1, cnn_forward_batch1000: the same for the LeNet-5 of
  examples/mnist_cnn (PyTorch only). cnn_forward_batch1 is the better of oneDNN on and off
  (torch.backends.mkldnn), PyTorch's best setting for one image.

`suite` (PyTorch only) is the harness's `--suite` (src/suite/): the nets, what to do (`check`
or `run`) and the budget come as a line of JSON on standard input, then each net's weights, its
1,000 samples (float32) and their labels (uint8). Each net is built as an nn.Sequential from its
list of layers, its state_dict checked against the tensor names and shapes constmat's type has.

The NumPy MLP is written by hand (forward and backward), with the same orientation as constmat:
one sample per row, weights `out x in`. The PyTorch MLP is what a PyTorch user writes:
nn.Sequential of nn.Linear and nn.ReLU, F.cross_entropy, autograd, torch.optim.SGD.

Installing the peers:

    python3 -m pip install numpy
    python3 -m pip install torch --index-url https://download.pytorch.org/whl/cpu

(the CPU-only PyTorch wheel; the default wheel from PyPI pulls gigabytes of CUDA libraries).
"""

import os

for _var in (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

PIXELS, H1, H2, CLASSES = 784, 128, 64, 10
BATCH, EVAL = 64, 1000
PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081
STEP_LR, EPOCH_LR = 0.01, 0.05
# Sample p of an epoch is image (p * SHUFFLE) % n, as in the harness (src/common.rs).
SHUFFLE = 7919
GEMM_SHAPES = [(128, 784, 64), (64, 128, 64), (128, 64, 784), (784, 64, 128), (256, 256, 256)]
WEIGHT_SHAPES = [(H1, PIXELS), (H1,), (H2, H1), (H2,), (CLASSES, H2), (CLASSES,)]
# The CNN (examples/mnist_cnn's LeNet-5), in nn.Sequential's parameter order.
CNN_WEIGHT_SHAPES = [
    (6, 1, 5, 5), (6,), (16, 6, 5, 5), (16,), (120, 400), (120,), (84, 120), (84,), (CLASSES, 84),
    (CLASSES,),
]
TORCH_INSTALL = "python3 -m pip install torch --index-url https://download.pytorch.org/whl/cpu"


def probe():
    """Which libraries are importable, and notes for the user."""
    out = {"numpy": None, "torch": None, "notes": []}
    try:
        import numpy as np

        out["numpy"] = np.__version__
        try:
            blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
            out["notes"].append(
                f"NumPy {np.__version__} uses {blas.get('name')} {blas.get('version')}"
            )
        except Exception:  # older NumPy: no mode="dicts"
            pass
    except ImportError:
        out["notes"].append(
            "NumPy is not installed, so NumPy and PyTorch are left out: python3 -m pip install numpy"
        )
        return out
    try:
        import torch

        out["torch"] = torch.__version__
    except ImportError:
        out["notes"].append(
            "PyTorch is not installed, so it is left out. To include it, install the CPU-only "
            f"wheel: {TORCH_INSTALL} (the default PyPI wheel pulls gigabytes of CUDA libraries)"
        )
    return out


# --- data -------------------------------------------------------------------------------------


def read_idx(directory, name):
    """The bytes of an IDX file, plain or gzipped (decided by its contents, as constmat does)."""
    for path in (os.path.join(directory, name), os.path.join(directory, name + ".gz")):
        if os.path.exists(path):
            with open(path, "rb") as f:
                raw = f.read()
            return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    raise FileNotFoundError(f"{name}[.gz] is not in {directory}")


def load_mnist(directory):
    import numpy as np

    images = read_idx(directory, "train-images-idx3-ubyte")
    labels = read_idx(directory, "train-labels-idx1-ubyte")
    n = int.from_bytes(images[4:8], "big")
    return (
        np.frombuffer(images, np.uint8, offset=16).reshape(n, PIXELS),
        np.frombuffer(labels, np.uint8, offset=8),
    )


def synthetic(n=60_000):
    import numpy as np

    rng = np.random.default_rng(7)
    return (
        rng.integers(0, 256, (n, PIXELS), dtype=np.uint8),
        rng.integers(0, CLASSES, n, dtype=np.uint8),
    )


def indices(step, n, shuffle=SHUFFLE):
    import numpy as np

    return (np.arange(step * BATCH, (step + 1) * BATCH) * shuffle) % n


def standardize(pixels):
    """uint8 pixels to float32, as constmat does it: p / 255, then (v - mean) / std."""
    import numpy as np

    x = pixels.astype(np.float32)
    x /= np.float32(255.0)
    x -= np.float32(PIXEL_MEAN)
    x /= np.float32(PIXEL_STD)
    return x


def operand(rows, cols, seed):
    """The deterministic GEMM operands of the harness (src/common.rs), bit for bit."""
    import numpy as np

    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    v = ((r * 31 + c * 17 + seed * 7) % 23).astype(np.float32)
    return v / np.float32(23.0) - np.float32(0.5)


# --- NumPy ------------------------------------------------------------------------------------


class NumpyMlp:
    """The 784-128-64-10 ReLU MLP by hand: one sample per row, weights `out x in`."""

    def __init__(self, weights):
        import numpy as np

        self.np = np
        self.set_weights(weights)
        # Preallocated outputs of the training step's products, as constmat's workspace.
        f = np.float32
        self.a1, self.a2, self.z3 = (np.empty((BATCH, n), f) for n in (H1, H2, CLASSES))
        self.dz2, self.dz1 = np.empty((BATCH, H2), f), np.empty((BATCH, H1), f)
        self.dw = [np.empty(s, f) for s in WEIGHT_SHAPES[::2]]
        self.rows = np.arange(BATCH)

    def set_weights(self, weights):
        self.w1, self.b1, self.w2, self.b2, self.w3, self.b3 = (w.copy() for w in weights)

    def load_batch(self, images, labels, idx):
        self.x = standardize(images[idx])
        self.labels = labels[idx].astype(self.np.intp)

    def forward(self, x, a1=None, a2=None, z3=None):
        np = self.np
        a1 = np.matmul(x, self.w1.T, out=a1)
        a1 += self.b1
        np.maximum(a1, 0, out=a1)
        a2 = np.matmul(a1, self.w2.T, out=a2)
        a2 += self.b2
        np.maximum(a2, 0, out=a2)
        z3 = np.matmul(a2, self.w3.T, out=z3)
        z3 += self.b3
        return a1, a2, z3

    def _loss(self, z3):
        """Mean softmax cross-entropy, and the log-probabilities."""
        np = self.np
        shifted = z3 - z3.max(axis=1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return -log_p[self.rows, self.labels].mean(), log_p

    def loss(self):
        _, _, z3 = self.forward(self.x)
        return float(self._loss(z3)[0])

    def step(self, lr):
        np = self.np
        a1, a2, z3 = self.forward(self.x, self.a1, self.a2, self.z3)
        loss, log_p = self._loss(z3)
        dz3 = np.exp(log_p)  # softmax
        dz3[self.rows, self.labels] -= 1.0
        dz3 /= np.float32(BATCH)
        dw1, dw2, dw3 = self.dw
        np.matmul(dz3.T, a2, out=dw3)
        db3 = dz3.sum(axis=0)
        np.matmul(dz3, self.w3, out=self.dz2)
        self.dz2 *= a2 > 0
        np.matmul(self.dz2.T, a1, out=dw2)
        db2 = self.dz2.sum(axis=0)
        np.matmul(self.dz2, self.w2, out=self.dz1)
        self.dz1 *= a1 > 0
        np.matmul(self.dz1.T, self.x, out=dw1)
        db1 = self.dz1.sum(axis=0)
        lr = np.float32(lr)
        for param, grad in (
            (self.w1, dw1),
            (self.b1, db1),
            (self.w2, dw2),
            (self.b2, db2),
            (self.w3, dw3),
            (self.b3, db3),
        ):
            grad *= lr
            param -= grad
        return float(loss)

    def forward_logits(self, x):
        return self.forward(x)[2]


# --- PyTorch ----------------------------------------------------------------------------------


class TorchMlp:
    """The same MLP as a PyTorch user writes it: nn.Sequential, autograd, optim.SGD."""

    def __init__(self, weights):
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.model = torch.nn.Sequential(
            torch.nn.Linear(PIXELS, H1),
            torch.nn.ReLU(),
            torch.nn.Linear(H1, H2),
            torch.nn.ReLU(),
            torch.nn.Linear(H2, CLASSES),
        )
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=EPOCH_LR)
        self.set_weights(weights)

    def set_weights(self, weights):
        torch = self.torch
        with torch.no_grad():
            # 0.weight, 0.bias, 2.weight, 2.bias, 4.weight, 4.bias: the harness's order.
            for p, w in zip(self.model.parameters(), weights):
                p.copy_(torch.from_numpy(w.copy()))

    def load_batch(self, images, labels, idx):
        import numpy as np

        self.x = self.torch.from_numpy(standardize(images[idx]))
        self.labels = self.torch.from_numpy(labels[idx].astype(np.int64))

    def loss(self):
        with self.torch.inference_mode():
            logits = self.model(self.x)
            return float(self.torch.nn.functional.cross_entropy(logits, self.labels))

    def step(self, lr):
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.zero_grad()
        loss = self.torch.nn.functional.cross_entropy(self.model(self.x), self.labels)
        loss.backward()
        self.optimizer.step()
        return loss.item()

    def forward_logits(self, x):
        with self.torch.inference_mode():
            return self.model(x)


class TorchCnn:
    """examples/mnist_cnn's LeNet-5 as a PyTorch user writes it (the Sequential in its docs)."""

    def __init__(self, weights):
        import torch

        torch.set_num_threads(1)
        nn = torch.nn
        self.torch = torch
        self.model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, CLASSES),
        )
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=EPOCH_LR)
        self.set_weights(weights)

    set_weights = TorchMlp.set_weights
    loss = TorchMlp.loss
    step = TorchMlp.step
    forward_logits = TorchMlp.forward_logits

    def load_batch(self, images, labels, idx):
        import numpy as np

        self.x = self.torch.from_numpy(images_of(standardize(images[idx])))
        self.labels = self.torch.from_numpy(labels[idx].astype(np.int64))


def images_of(rows):
    """Standardized pixel rows as a batch of one-channel 28x28 images."""
    return rows.reshape(-1, 1, 28, 28)


def cnn_initial_weights():
    """PyTorch's default initialization, for running this script on its own."""
    return [p.detach().numpy().copy() for p in TorchCnn([]).model.parameters()]


def make_mlp(library, weights):
    return NumpyMlp(weights) if library == "numpy" else TorchMlp(weights)


def to_library(library, array):
    """A NumPy array as the library's own array type."""
    if library == "torch":
        import torch

        return torch.from_numpy(array)
    return array


def to_numpy(array):
    return array.numpy() if hasattr(array, "numpy") else array


def make_gemm(library, m, k, n):
    """A function computing C = A @ B on the deterministic operands, and C."""
    import numpy as np

    a, b = operand(m, k, 1), operand(k, n, 2)
    c = np.zeros((m, n), np.float32)
    if library == "torch":
        import torch

        a, b, c = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        return (lambda: torch.matmul(a, b, out=c)), c
    return (lambda: np.matmul(a, b, out=c)), c


# --- timing -----------------------------------------------------------------------------------


def measure(budget, f):
    """Warm up for a tenth of the budget (at least one call), then call f for the budget;
    the mean seconds per call. The same rule as the harness's Rust side."""
    start = time.perf_counter()
    while True:
        f()
        if time.perf_counter() - start >= budget / 10:
            break
    calls = 0
    start = time.perf_counter()
    while True:
        f()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return elapsed / calls


def initial_weights():
    """He-initialized weights, for running this script on its own (the harness's checks send
    constmat's weights instead; the timings do not depend on them)."""
    import numpy as np

    rng = np.random.default_rng(42)
    weights = []
    for shape in WEIGHT_SHAPES:
        if len(shape) == 2:
            weights.append((rng.standard_normal(shape) * np.sqrt(2.0 / shape[1])).astype(np.float32))
        else:
            weights.append(np.zeros(shape, np.float32))
    return weights


def run(args):
    """Every workload once; seconds per iteration."""
    import numpy as np

    library = args.impl
    images, labels = load_mnist(args.mnist) if args.mnist else synthetic()
    n = len(labels)
    weights = initial_weights()
    mlp = make_mlp(library, weights)
    results = {}
    for m, k, nn in GEMM_SHAPES:
        f, _ = make_gemm(library, m, k, nn)
        results[f"gemm_{m}x{k}x{nn}"] = measure(args.budget, f)

    mlp.set_weights(weights)
    mlp.load_batch(images, labels, indices(0, n))
    results["train_step"] = measure(args.budget, lambda: mlp.step(STEP_LR))

    mlp.set_weights(weights)
    for step in range(3):
        mlp.load_batch(images, labels, indices(step, n))
        mlp.step(EPOCH_LR)
    mlp.set_weights(weights)
    start = time.perf_counter()
    for step in range(args.epoch_steps):
        mlp.load_batch(images, labels, indices(step, n))
        mlp.step(EPOCH_LR)
    results["epoch_step"] = (time.perf_counter() - start) / args.epoch_steps

    eval_inputs = standardize(images[(np.arange(EVAL) * SHUFFLE) % n])
    single = to_library(library, eval_inputs[:1].copy())
    results["forward_batch1"] = measure(args.budget, lambda: mlp.forward_logits(single))
    batch = to_library(library, eval_inputs)
    results["forward_batch1000"] = measure(args.budget, lambda: mlp.forward_logits(batch))

    if library == "torch":
        import torch

        # The MLP as trained above, quantized to int8 with PyTorch's dynamic quantization
        # (int8 weights, activations quantized on the fly): its batch-1 forward pass.
        try:
            int8 = torch.ao.quantization.quantize_dynamic(
                mlp.model, {torch.nn.Linear}, dtype=torch.qint8
            )
            with torch.inference_mode():
                int8(single)
            results["int8_forward_batch1"] = measure(
                args.budget, lambda: mlp_int8_forward(torch, int8, single)
            )
        except (RuntimeError, AttributeError) as error:
            print(f"torch: no dynamic int8 quantization here ({error})", file=sys.stderr)

        cnn_weights = cnn_initial_weights()
        cnn = TorchCnn(cnn_weights)
        for step in range(3):
            cnn.load_batch(images, labels, indices(step, n))
            cnn.step(EPOCH_LR)
        cnn.set_weights(cnn_weights)
        start = time.perf_counter()
        for step in range(args.epoch_steps):
            cnn.load_batch(images, labels, indices(step, n))
            cnn.step(EPOCH_LR)
        results["cnn_epoch_step"] = (time.perf_counter() - start) / args.epoch_steps
        single = torch.from_numpy(images_of(eval_inputs[:1].copy()))
        with_onednn = measure(args.budget, lambda: cnn.forward_logits(single))
        with torch.backends.mkldnn.flags(enabled=False):
            without_onednn = measure(args.budget, lambda: cnn.forward_logits(single))
        results["cnn_forward_batch1"] = min(with_onednn, without_onednn)
        batch = torch.from_numpy(images_of(eval_inputs))
        results["cnn_forward_batch1000"] = measure(args.budget, lambda: cnn.forward_logits(batch))
    return {"impl": library, "results": results}


def mlp_int8_forward(torch, model, x):
    with torch.inference_mode():
        return model(x)


def hexed(array):
    import numpy as np

    return np.ascontiguousarray(to_numpy(array), dtype="<f4").tobytes().hex()


def check(args):
    """The harness's checks (src/check.rs), on the weights and images sent on standard input:
    the MLP's six float32 tensors, the CNN's ten, then `count` images (uint8, in the order of the
    epoch) and their labels."""
    import numpy as np

    blob = sys.stdin.buffer.read()
    offset, weights = 0, []
    for shape in WEIGHT_SHAPES:
        size = int(np.prod(shape))
        weights.append(np.frombuffer(blob, "<f4", size, offset).reshape(shape).astype(np.float32))
        offset += 4 * size
    cnn_weights = []
    for shape in CNN_WEIGHT_SHAPES:
        size = int(np.prod(shape))
        cnn_weights.append(np.frombuffer(blob, "<f4", size, offset).reshape(shape).astype(np.float32))
        offset += 4 * size
    count = args.count
    images = np.frombuffer(blob, np.uint8, count * PIXELS, offset).reshape(count, PIXELS)
    labels = np.frombuffer(blob, np.uint8, count, offset + count * PIXELS)
    if offset + count * (PIXELS + 1) != len(blob):
        raise SystemExit(f"check: expected {offset + count * (PIXELS + 1)} bytes, got {len(blob)}")

    library = args.impl
    report = net_report(make_mlp(library, weights), weights, images, labels, args.steps, count,
                        lambda x: to_library(library, x))
    if library == "torch":
        import torch

        report["cnn"] = net_report(TorchCnn(cnn_weights), cnn_weights, images, labels, args.steps,
                                   count, lambda x: torch.from_numpy(images_of(x)))
    gemm = {}
    for m, k, n in GEMM_SHAPES:
        f, c = make_gemm(library, m, k, n)
        f()
        gemm[f"gemm_{m}x{k}x{n}"] = hexed(c)
    report["impl"] = library
    report["gemm"] = gemm
    return report


def net_report(net, weights, images, labels, steps, count, as_input):
    """The checks' computations on one net (the MLP or the CNN), from `weights`."""
    # The images are already in the epoch's order: step s is rows s*64 .. s*64+63.
    net.load_batch(images, labels, indices(0, count, shuffle=1))
    loss_first = net.loss()
    net.step(EPOCH_LR)
    loss_after_step = net.loss()

    net.set_weights(weights)
    total = 0.0
    for step in range(steps):
        net.load_batch(images, labels, indices(step, count, shuffle=1))
        total += net.step(EPOCH_LR)

    net.set_weights(weights)
    eval_inputs = standardize(images[:EVAL])
    logits_single = net.forward_logits(as_input(eval_inputs[:1].copy()))
    logits_eval = net.forward_logits(as_input(eval_inputs))
    return {
        "loss_first": loss_first,
        "loss_after_step": loss_after_step,
        "mean_loss": total / steps,
        "logits_single": hexed(logits_single),
        "logits_eval": hexed(logits_eval),
    }


# --- the suite (--suite) ------------------------------------------------------------------------


def suite_modules(ops, nn):
    """The PyTorch modules of the suite's layer list `ops` (the harness's JSON), in order."""
    modules = []
    for op in ops:
        kind = op[0]
        if kind == "conv":
            _, c_in, c_out, kernel, stride, padding, relu = op
            modules.append(nn.Conv2d(c_in, c_out, tuple(kernel), stride=stride, padding=padding))
        elif kind == "depthwise":
            _, channels, kernel, stride, padding, relu = op
            modules.append(
                nn.Conv2d(channels, channels, kernel, stride=stride, padding=padding, groups=channels)
            )
        elif kind == "zeropad":
            modules.append(nn.ZeroPad2d(tuple(op[1])))
            relu = False
        elif kind == "globalavgpool":
            modules.append(nn.AdaptiveAvgPool2d(1))
            relu = False
        elif kind == "dense":
            _, n_in, n_out, relu = op
            modules.append(nn.Linear(n_in, n_out))
        elif kind == "batchnorm":
            _, channels, relu = op
            modules.append(nn.BatchNorm2d(channels))
        elif kind == "residual":
            _, branch, shortcut, relu = op
            modules.append(SuiteResidual(branch, shortcut, nn))
        elif kind == "maxpool":
            modules.append(nn.MaxPool2d(op[1]))
            relu = False
        elif kind == "avgpool":
            modules.append(nn.AvgPool2d(op[1]))
            relu = False
        elif kind == "flatten":
            modules.append(nn.Flatten())
            relu = False
        else:
            raise SystemExit(f"suite: unknown layer {op!r}")
        if relu:
            modules.append(nn.ReLU())
    return modules


def SuiteResidual(branch, shortcut, nn):
    """A module computing branch(x) + shortcut(x), the shortcut the identity when empty (its
    children named `branch` and `shortcut`, as constmat names a residual block's tensors)."""

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.branch = nn.Sequential(*suite_modules(branch, nn))
            self.shortcut = nn.Sequential(*suite_modules(shortcut, nn)) if shortcut else None

        def forward(self, x):
            return self.branch(x) + (self.shortcut(x) if self.shortcut is not None else x)

    return Residual()


class TorchSuiteNet:
    """A net of the suite as a PyTorch user writes it: nn.Sequential, F.cross_entropy,
    autograd, torch.optim.SGD; forward passes under torch.inference_mode(). Batch
    normalization uses the batch's statistics in training, in the loss and in the forward pass
    of EVAL samples (as constmat's `forward_train`, which those call), and the running ones in
    the forward pass of one sample (a prediction)."""

    def __init__(self, spec, weights, inputs, labels, lr):
        import numpy as np
        import torch

        torch.set_num_threads(1)
        self.torch = torch
        self.model = torch.nn.Sequential(*suite_modules(spec["ops"], torch.nn))
        # Every float tensor, buffers included (batch normalization's running statistics);
        # the integer `num_batches_tracked` does not change what the net computes.
        self.tensors = [
            t for name, t in self.model.state_dict(keep_vars=True).items()
            if not name.endswith("num_batches_tracked")
        ]
        ours = [
            (name, list(t.shape)) for name, t in self.model.state_dict().items()
            if not name.endswith("num_batches_tracked")
        ]
        theirs = [(name, list(shape)) for name, shape in spec["tensors"]]
        if ours != theirs:
            raise SystemExit(
                f"suite net {spec['key']}: PyTorch's tensors {ours} are not constmat's {theirs}"
            )
        self.weights = weights
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.set_weights(weights)
        batch = spec["batch"]
        self.x = torch.from_numpy(inputs[:batch].copy())
        self.labels = torch.from_numpy(labels[:batch].astype(np.int64))
        self.single = torch.from_numpy(inputs[:1].copy())
        self.eval = torch.from_numpy(inputs)

    def set_weights(self, weights):
        torch = self.torch
        with torch.no_grad():
            for t, w in zip(self.tensors, weights):
                t.copy_(torch.from_numpy(w.copy()))

    def loss(self):
        self.model.train()
        with self.torch.inference_mode():
            logits = self.model(self.x)
            return float(self.torch.nn.functional.cross_entropy(logits, self.labels))

    def step(self, lr):
        self.model.train()
        return TorchMlp.step(self, lr)

    def forward_logits(self, x):
        # One sample is a prediction; EVAL samples are constmat's `forward_train`.
        self.model.train(x is not self.single)
        with self.torch.inference_mode():
            return self.model(x)


def read_suite():
    """The header and the nets sent by the harness on standard input."""
    import numpy as np

    stream = sys.stdin.buffer
    header = json.loads(stream.readline())
    blob = stream.read()
    offset, nets = 0, []
    eval_count = header["eval"]
    for spec in header["nets"]:
        weights = []
        for _, shape in spec["tensors"]:
            size = int(np.prod(shape))
            weights.append(np.frombuffer(blob, "<f4", size, offset).reshape(shape).copy())
            offset += 4 * size
        size = eval_count * int(np.prod(spec["input"]))
        inputs = np.frombuffer(blob, "<f4", size, offset).reshape([eval_count] + spec["input"])
        inputs = inputs.astype(np.float32)  # a writable, native-order copy
        offset += 4 * size
        labels = np.frombuffer(blob, np.uint8, eval_count, offset)
        offset += eval_count
        nets.append((spec, weights, inputs, labels))
    if offset != len(blob):
        raise SystemExit(f"suite: expected {offset} bytes after the header, got {len(blob)}")
    return header, nets


def suite():
    """The suite's checks or one round of its timings, as the header says."""
    import torch

    header, nets = read_suite()
    lr = header["lr"]
    out = {"nets": {}, "torch": torch.__version__}
    try:
        out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # older PyTorch
        pass
    for spec, weights, inputs, labels in nets:
        net = TorchSuiteNet(spec, weights, inputs, labels, lr)
        if header["mode"] == "check":
            loss_first = net.loss()
            net.step(lr)
            loss_after_step = net.loss()
            for _ in range(1, header["check_steps"]):
                net.step(lr)
            loss_after_steps = net.loss()
            net.set_weights(weights)
            out["nets"][spec["key"]] = {
                "loss_first": loss_first,
                "loss_after_step": loss_after_step,
                "loss_after_steps": loss_after_steps,
                "logits_single": hexed(net.forward_logits(net.single)),
                "logits_eval": hexed(net.forward_logits(net.eval)),
            }
        else:
            budget = header["budget"]
            results = {"train_step": measure(budget, lambda: net.step(lr))}
            net.set_weights(weights)
            # One sample: the better of oneDNN on and off, PyTorch's best setting for it.
            with_onednn = measure(budget, lambda: net.forward_logits(net.single))
            with torch.backends.mkldnn.flags(enabled=False):
                without_onednn = measure(budget, lambda: net.forward_logits(net.single))
            results["forward_batch1"] = min(with_onednn, without_onednn)
            results["forward_batch1000"] = measure(budget, lambda: net.forward_logits(net.eval))
            out["nets"][spec["key"]] = results
        del net
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("probe", help="which of NumPy and PyTorch are installed")
    run_parser = sub.add_parser("run", help="time every workload once")
    run_parser.add_argument("--impl", choices=["numpy", "torch"], default="numpy")
    run_parser.add_argument("--budget", type=float, default=0.4)
    run_parser.add_argument("--epoch-steps", type=int, default=100)
    source = run_parser.add_mutually_exclusive_group()
    source.add_argument("--mnist", metavar="DIR", help="MNIST directory (default: $MNIST_DIR)")
    source.add_argument("--synthetic", action="store_true", help="random images")
    check_parser = sub.add_parser("check", help="the harness's checks, data on standard input")
    check_parser.add_argument("--impl", choices=["numpy", "torch"], default="numpy")
    check_parser.add_argument("--steps", type=int, default=100)
    check_parser.add_argument("--count", type=int, required=True)
    sub.add_parser("suite", help="the harness's --suite (PyTorch), everything on standard input")
    args = parser.parse_args()

    if args.command == "probe":
        out = probe()
    elif args.command == "suite":
        out = suite()
    elif args.command == "run":
        if not args.mnist and not args.synthetic:
            args.mnist = os.environ.get("MNIST_DIR") or None
        out = run(args)
    else:
        out = check(args)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
