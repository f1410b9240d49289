"""Which law ``afford size`` reads when the user names no workload or mode: a certificate of
one workload (``afford certify -w hf:...``) answers for it; of several, tinylm where it is
one, else the error asks for one; the mode is the one the step time was measured in."""

from __future__ import annotations

import pytest

from afford.core.errors import InputError
from afford.figures.memory_figures import find_law
from afford.schema.cert import WorkloadResult
from tests.memory_fakes import law, with_memory
from tests.synthetic_cert import certificate


@pytest.fixture(scope="module")
def laws():
    return law("fp32"), law("bf16")


def named(x, name):
    return x.model_copy(update={"workload": name})


def timed(cert, name, mode):
    """The certificate with a (pointless) timed workload ``name`` in ``mode``."""
    r = WorkloadResult.model_construct(name=name, mode=mode)
    return cert.model_copy(update={"workloads": [r]})


def test_one_workload_answers_without_a_name(laws):
    fp32, bf16 = (named(x, "hf:qwen2@d896L24") for x in laws)
    cert = with_memory(certificate(), fp32, bf16)
    assert find_law(cert, None).workload == "hf:qwen2@d896L24"
    assert find_law(cert, None).mode == "fp32"  # no step time: the first measured
    assert find_law(timed(cert, "hf:qwen2@d896L24", "bf16"), None).mode == "bf16"
    assert find_law(timed(cert, "hf:qwen2@d896L24", "bf16"), None, "fp32").mode == "fp32"


def test_of_several_tinylm_answers_and_otherwise_the_user_is_asked(laws):
    fp32, _ = laws
    cert = with_memory(certificate(), named(fp32, "softmax"), fp32)
    assert find_law(cert, None).workload == "tinylm"
    two = with_memory(certificate(), named(fp32, "a"), named(fp32, "b"))
    with pytest.raises(InputError, match="memory laws for a, b; name one with --workload"):
        find_law(two, None)

