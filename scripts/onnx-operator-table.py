#!/usr/bin/env python3
"""Prints docs/onnx.md's operator table: every operator of ONNX's default domain up to the
newest opset zc reads, whether zc imports it, and for those it does not, what kind of operator
it is. The operators come from the installed onnx package's schemas; zc's from its rules
(src/onnx/convert_*.cpp, `r.push_back({"Name", ...`, also where clang-format breaks the line
after `r.push_back(`).

    python3 scripts/onnx-operator-table.py > /tmp/table.md
"""
import glob
import os
import re
import sys

import onnx.defs

MAX_OPSET = 21
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# What kind of operator each unsupported one is, by name, where it says why at a glance.
KINDS = {
    "control flow (subgraphs)": ["If", "Loop", "Scan"],
    "sequences, maps, optionals": [
        "ConcatFromSequence", "Optional", "OptionalGetElement", "OptionalHasElement",
        "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert",
        "SequenceLength", "SequenceMap", "SplitToSequence"],
    "strings": ["RegexFullMatch", "StringConcat", "StringNormalizer", "StringSplit",
                "TfIdfVectorizer"],
    "quantized": ["DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
                  "ConvInteger", "QLinearConv", "QLinearMatMul", "QuantizeLinear"],
    "random": ["Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform",
               "RandomUniformLike"],
    "training": ["Gradient", "Momentum", "Adagrad", "Adam"],
    "image and signal": ["ImageDecoder", "DFT", "STFT", "MelWeightMatrix", "HannWindow",
                         "HammingWindow", "BlackmanWindow"],
}


def supported():
    names = set()
    for path in glob.glob(os.path.join(ROOT, "src", "onnx", "convert_*.cpp")):
        with open(path) as f:
            names.update(re.findall(r'r\.push_back\(\s*\{"([A-Za-z0-9]+)"', f.read()))
    return names


def main():
    have = supported()
    latest, deprecated = {}, set()
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain != "" or s.since_version > MAX_OPSET:
            continue
        if s.since_version >= latest.get(s.name, 0):
            latest[s.name] = s.since_version
            if s.deprecated:
                deprecated.add(s.name)
            else:
                deprecated.discard(s.name)
    for name in deprecated:
        del latest[name]
    kind_of = {op: kind for kind, ops in KINDS.items() for op in ops}
    rows = ["| operator | its newest version to opset %d | zc |" % MAX_OPSET, "|---|---|---|"]
    for name in sorted(latest):
        status = "yes" if name in have else "no" + (f": {kind_of[name]}" if name in kind_of else "")
        rows.append(f"| {name} | {latest[name]} | {status} |")
    print("\n".join(rows))
    yes = sum(1 for n in latest if n in have)
    print(f"\n{yes} of {len(latest)} operators.", file=sys.stderr)


if __name__ == "__main__":
    main()
