#!/usr/bin/env python3
"""Runs an ONNX model through ONNX Runtime: the reference the ONNX import tests compare with.

    ort_run.py MODEL OUT_DIR INPUT.npy...
    ort_run.py --batch JOBS     (one "MODEL OUT_DIR INPUT.npy..." per line: one start for many)

Feeds the inputs (.npy files, in the graph's input order) and writes each output as
OUT_DIR/output_<i>.npy. Exits 2 with a message when onnxruntime is not installed, 1 when a
model fails in ONNX Runtime.
"""
import os
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:  # the test skips, saying why
    print(f"ort_run: {e} (pip install onnxruntime numpy)")
    sys.exit(2)


def run(model, out_dir, inputs):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(path) for i, path in zip(session.get_inputs(), inputs)}
    outputs = session.run(None, feeds)
    os.makedirs(out_dir, exist_ok=True)
    for k, value in enumerate(outputs):
        np.save(os.path.join(out_dir, f"output_{k}.npy"), np.asarray(value))
    print(f"ort_run: {model}: {len(outputs)} output(s), onnxruntime {ort.__version__}")


def main():
    if sys.argv[1] == "--batch":
        with open(sys.argv[2]) as jobs:
            for line in jobs:
                words = line.split()
                if words:
                    run(words[0], words[1], words[2:])
    else:
        run(sys.argv[1], sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    main()
