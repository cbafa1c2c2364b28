"""A compile child that fails as onnxruntime does when the EP claims no node (ERROR_IF_NO_NODES_COMPILED)."""

import sys


def main(argv):
    print(
        "Fail: [ONNXRuntimeError] : 1 : FAIL : Unable to compile any nodes. Check that the session EPs support "
        "compilation and can execute at least one subgraph in the model.",
        file=sys.stderr,
    )
    return 3
