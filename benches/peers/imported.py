#!/usr/bin/env python3
"""The TensorFlow Lite interpreters of the harness's `--imported` set (src/imported.rs).

The harness runs the MLPerf Tiny models imported by constmat-import against LiteRT's interpreter
(`ai_edge_litert`, one thread, its default XNNPACK delegate) and TensorFlow Lite Micro's
(`tflite_micro`, its Python interpreter over the reference kernels). It runs this script once
for the checks and once per round and per interpreter, each time in a fresh process:

    python3 benches/peers/imported.py probe
    python3 benches/peers/imported.py run < blob

`run` reads a line of JSON from standard input, {"mode": "check" | "run", "impl": "litert" |
"tflm", "budget": seconds, "models": [{"key", "path", "dtype": "int8" | "float32", "len"}]},
then each model's input: `len` values of its dtype, little-endian, in TensorFlow Lite's order
(the flat NHWC input tensor). It prints JSON: for "check", each model's output (int8 as a list,
float32 as the hexadecimal of its little-endian bytes); for "run", each model's mean seconds per
call under the harness's timing rule (`measure` in peers.py). What one call does:

- LiteRT: `set_tensor(input)`, `invoke()`, `get_tensor(output)`;
- TensorFlow Lite Micro: `set_input(input, 0)`, `invoke()`, `get_output(0)`.

Installing the interpreters: python3 -m pip install numpy ai-edge-litert tflite-micro
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

import importlib.metadata  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402

from peers import measure  # noqa: E402  (the harness's timing rule, beside this script)

# TensorFlow Lite Micro's arena: above the largest model's need (203,376 B for the f32
# ResNet-8, /work/shared/mlperf-tiny/README.md). It does not change the time of a call.
TFLM_ARENA = 512 * 1024
PACKAGES = {"litert": "ai-edge-litert", "tflm": "tflite-micro"}
INSTALL = "python3 -m pip install numpy ai-edge-litert tflite-micro"


def probe():
    """The interpreters that can be imported, with their packages' versions."""
    out = {"litert": None, "tflm": None, "notes": []}
    try:
        import numpy  # noqa: F401
    except ImportError:
        out["notes"].append(f"NumPy is not installed, so LiteRT and TFLM are left out: {INSTALL}")
        return out
    for impl, module in (("litert", "ai_edge_litert.interpreter"),
                         ("tflm", "tflite_micro.python.tflite_micro.runtime")):
        try:
            importlib.import_module(module)
            out[impl] = importlib.metadata.version(PACKAGES[impl])
        except ImportError as e:
            out["notes"].append(f"{PACKAGES[impl]} cannot be imported ({e}), so it is left out: "
                                f"python3 -m pip install {PACKAGES[impl]}")
    return out


class Litert:
    """LiteRT's interpreter, one thread, its default delegate (XNNPACK)."""

    def __init__(self, path):
        from ai_edge_litert.interpreter import Interpreter

        self.interp = Interpreter(model_path=path, num_threads=1)
        self.interp.allocate_tensors()
        inp = self.interp.get_input_details()[0]
        self.input, self.shape, self.dtype = inp["index"], inp["shape"], inp["dtype"]
        self.output = self.interp.get_output_details()[0]["index"]

    def call(self, x):
        self.interp.set_tensor(self.input, x)
        self.interp.invoke()
        return self.interp.get_tensor(self.output)


class Tflm:
    """TensorFlow Lite Micro's Python interpreter (its reference kernels)."""

    def __init__(self, path):
        from tflite_micro.python.tflite_micro import runtime

        self.interp = runtime.Interpreter.from_file(path, arena_size=TFLM_ARENA)
        inp = self.interp.get_input_details(0)
        self.shape, self.dtype = inp["shape"], inp["dtype"]

    def call(self, x):
        self.interp.set_input(x, 0)
        self.interp.invoke()
        return self.interp.get_output(0)


def read_input():
    """The header and each model's input, from standard input."""
    import numpy as np

    stream = sys.stdin.buffer
    header = json.loads(stream.readline())
    blob = stream.read()
    offset, models = 0, []
    for spec in header["models"]:
        dtype = np.dtype(spec["dtype"]).newbyteorder("<")
        values = np.frombuffer(blob, dtype, spec["len"], offset)
        offset += values.nbytes
        models.append((spec, values))
    if offset != len(blob):
        raise SystemExit(f"imported.py: expected {offset} bytes after the header, got {len(blob)}")
    return header, models


def run():
    import numpy as np

    header, models = read_input()
    make = {"litert": Litert, "tflm": Tflm}[header["impl"]]
    out = {"models": {}}
    for spec, values in models:
        interp = make(spec["path"])
        dtype = np.dtype(spec["dtype"])
        if np.dtype(interp.dtype) != dtype or int(np.prod(interp.shape)) != spec["len"]:
            raise SystemExit(
                f"{spec['key']}: the interpreter's input is {np.dtype(interp.dtype)} "
                f"{list(interp.shape)}, the harness sent {spec['len']} {dtype}"
            )
        x = values.astype(dtype).reshape(interp.shape)  # native order, the model's shape
        if header["mode"] == "check":
            y = np.array(interp.call(x), copy=True).reshape(-1)
            if y.dtype != dtype:
                raise SystemExit(f"{spec['key']}: an output of {y.dtype}, not {dtype}")
            out["models"][spec["key"]] = (
                y.astype(np.int64).tolist() if dtype == np.int8 else y.astype("<f4").tobytes().hex()
            )
        else:
            out["models"][spec["key"]] = measure(header["budget"], lambda: interp.call(x))
        del interp
    return out


def main():
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "probe":
        out = probe()
    elif command == "run":
        out = run()
    else:
        raise SystemExit(__doc__)
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
