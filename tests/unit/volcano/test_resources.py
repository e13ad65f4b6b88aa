"""Kubernetes' rules for quantities and container resources, pinned to what the API server accepts and refuses.

The rules are those of apimachinery's `resource.ParseQuantity` and core/v1 `ValidateResourceRequirements`:
negative amounts are refused, extended resources (`nvidia.com/gpu`) are whole and never overcommitted, a
request is at most its limit.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from pydantic import ValidationError
from vcjob_factory import GPU, vcjob

from components.volcano.models import ResourceRequirements, parse_job
from components.volcano.resources import check_requirements, quantity_value, scale_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("2", Decimal(2)),
        ("500m", Decimal("0.5")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1.5k", Decimal(1500)),
        ("1E", Decimal(10) ** 18),  # a suffix: exa
        ("1E3", Decimal(1000)),  # an exponent
        ("1e-3", Decimal("0.001")),
        (".5", Decimal("0.5")),
        ("1.", Decimal(1)),
        ("+3", Decimal(3)),
        ("-2", Decimal(-2)),  # the grammar has a sign; the container rules refuse it
        (3, Decimal(3)),
        (0.5, Decimal("0.5")),
    ],
)
def test_quantities_follow_kubernetes_grammar(text: str | int | float, value: Decimal) -> None:
    assert quantity_value(text) == value


# `１` (fullwidth) and `٢` (Arabic-Indic) are digits to Python's \\d and Decimal, not to Kubernetes' 0-9.
@pytest.mark.parametrize(
    "text", ["", " 2", "2 ", "1e3Ki", "1Kb", "1.5.5", "e3", "1e1.5", "two", "0x10", "1ki", True, "１", "٢Gi", "1e٣"]
)
def test_what_is_not_a_quantity_is_refused(text: str | bool) -> None:
    with pytest.raises(ValueError, match="is not a number such as 2, 500m or 16Gi"):
        quantity_value(text)


@pytest.mark.parametrize(
    ("requests", "limits", "message"),
    [
        ({GPU: -2}, {GPU: -2}, r"nvidia.com/gpu\] is -2; it must be greater than or equal to 0"),
        ({GPU: 0.5}, {GPU: 0.5}, "nvidia.com/gpu must be a whole number"),
        ({GPU: "500m"}, {GPU: "500m"}, "nvidia.com/gpu must be a whole number"),
        ({GPU: 1}, {}, r"requests\[nvidia.com/gpu\] needs limits\[nvidia.com/gpu\] too"),
        ({GPU: 1}, {GPU: 2}, "must be equal to the nvidia.com/gpu limit of 2"),
        ({"cpu": "-1"}, None, r"requests\[cpu\] is -1"),
        ({"cpu": "2"}, {"cpu": "1"}, "must be at most the cpu limit of 1"),
        ({"memory": "2Gi"}, {"memory": "1Gi"}, "must be at most the memory limit of 1Gi"),
        ({"hugepages-2Mi": "4Mi"}, {"hugepages-2Mi": "2Mi"}, "must be equal to the hugepages-2Mi limit"),
        # validateResourceQuantityHugePageValue and "HugePages require cpu or memory": they passed
        (
            {"hugepages-2Mi": "3Mi", "memory": "1Gi"},
            None,
            r"requests\[hugepages-2Mi\] is 3Mi; it must be a whole number of 2Mi",
        ),
        ({"hugepages-big": 1, "cpu": 1}, None, "resource 'hugepages-big' must name a page size, such as hugepages-2Mi"),
        (None, {"hugepages-1Gi": "2Gi"}, "a container asking for hugepages must ask for cpu or memory too"),
        ({"gpu": 1}, None, "is not a container resource"),
        ({"nvidia.com/": 1}, None, "must be <domain>/<name>"),
        ({"Nvidia.com/gpu": 1}, None, "must be <domain>/<name>"),
    ],
)
def test_container_resources_that_kubernetes_refuses(requests: dict, limits: dict | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_requirements(requests, limits)


@pytest.mark.parametrize(
    ("requests", "limits"),
    [
        ({GPU: 2}, {GPU: 2}),
        (None, {GPU: 2}),  # the request defaults to the limit
        ({GPU: 0}, {GPU: 0}),
        ({GPU: "2k"}, {GPU: "2000"}),  # the same amount, written two ways
        ({"cpu": "500m", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}),  # cpu and memory may be overcommitted
        ({"cpu": "1"}, None),
        ({"ephemeral-storage": "1Gi", "example.com/foo": 1}, {"example.com/foo": 1}),
        (None, {"hugepages-2Mi": "4Mi", "memory": "1Gi"}),
    ],
)
def test_container_resources_that_kubernetes_accepts(requests: dict | None, limits: dict | None) -> None:
    check_requirements(requests, limits)
    ResourceRequirements(requests=requests, limits=limits)


@pytest.mark.parametrize("gpus", [-2, 0.5, "1.5"])
def test_a_job_asking_a_broken_gpu_amount_is_refused_where_it_is_parsed(gpus: float | str) -> None:
    job = vcjob("bad", gpus=1)
    resources = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"][GPU] = resources["limits"][GPU] = gpus
    with pytest.raises(ValueError, match=r"spec.tasks\[0\].template.spec.containers\[0\].resources: .*nvidia.com/gpu"):
        parse_job(job)


def test_the_model_refuses_in_one_validation_error() -> None:
    with pytest.raises(ValidationError):
        ResourceRequirements(requests={GPU: -2}, limits={GPU: -2})


def test_scaling_keeps_the_unit_and_reads_exponents() -> None:
    assert [scale_quantity(v, 2) for v in ("1500m", "16Gi", "1e3", "2.5")] == ["3000m", "32Gi", "2000", "5"]
