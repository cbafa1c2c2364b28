"""What a compatibility verdict says about onnxruntime is what happened (issue 23, finding 7): a
status the harness set without asking is never reported as onnxruntime's answer."""

from __future__ import annotations

import pytest

from winml_perf.bundle.epcontext import compat


@pytest.mark.parametrize("status", compat.NOT_ASKED)
def test_a_question_never_asked_is_not_called_an_answer(status):
    asked = compat.Verdict("unknown", "onnxruntime", status, None, "x86: QNN skips validation")
    words = compat._why_unknown(asked)
    assert words.startswith("onnxruntime was not asked") and "answered" not in words


def test_an_error_is_not_an_answer_and_a_real_status_is():
    error = compat.Verdict("unknown", "onnxruntime", "ERROR", None, "raised")
    assert compat._why_unknown(error).startswith("onnxruntime could not answer")
    real = compat.Verdict("unknown", "onnxruntime", "EP_NOT_APPLICABLE", None, "not this EP")
    assert compat._why_unknown(real).startswith("onnxruntime answered EP_NOT_APPLICABLE")
