"""A compile child that fails as onnxruntime does when the EP errs while choosing its nodes (QNN given a
soc_model it cannot create a device for): the EP's error logged, then no node compiled."""

import sys


def main(argv):
    ep = argv[2]
    print(
        "\x1b[1;31m2026-12-07 05:35:32.790463145 [E:onnxruntime:, ep_plugin_provider_interfaces.cc:677 GetCapability] "
        f"OrtEp::GetCapability() for {ep} failed with error: [ONNXRuntimeError] : 11 : EP_FAIL : QNN SetupBackend "
        "failed Failed to create device. Error: QNN_DEVICE_ERROR_INVALID_CONFIG: Invalid config values\x1b[m",
        file=sys.stderr,
    )
    print(
        "Fail: [ONNXRuntimeError] : 1 : FAIL : Unable to compile any nodes. Check that the session EPs support "
        "compilation and can execute at least one subgraph in the model.",
        file=sys.stderr,
    )
    return 3
