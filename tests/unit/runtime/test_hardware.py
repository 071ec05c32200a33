"""The GPU table: every peak dense and sourced, one peak per compute format, formats a GPU lacks
refused by name."""

from __future__ import annotations

import re

import pytest

from llama_lab.analysis import roofline
from llama_lab.config import PRESETS
from llama_lab.errors import LabError
from llama_lab.runtime.hardware import GPUS, TENSOR_FORMATS, TERA, gpu_for_device_name


@pytest.mark.parametrize("name", list(GPUS))
def test_every_gpu_and_every_peak_has_its_source(name):
    gpu = GPUS[name]
    assert gpu.source and gpu.memory_source, name
    assert "bf16" in gpu.compute_formats  # every GPU of the table has bf16 tensor cores
    assert len(set(gpu.compute_formats)) == len(gpu.compute_formats)  # one peak per format
    for peak in gpu.tensor_peaks:
        assert peak.dtype in TENSOR_FORMATS
        # the source names the document and quotes the printed figure
        printed = f"{peak.printed / (1000 if peak.gpus > 1 else 1):,g}"
        assert printed in peak.source or printed.replace(",", "") in peak.source, (name, peak)
        assert re.search(r"[\w-]+\.[a-z.]+/\S|Appendix|Table", peak.source), (name, peak)  # URL or table


@pytest.mark.parametrize("name", list(GPUS))
def test_a_sparse_figure_is_halved_and_lower_precision_is_not_slower(name):
    gpu = GPUS[name]
    for peak in gpu.tensor_peaks:
        per_gpu = peak.printed * TERA / peak.gpus
        assert peak.dense_flops == pytest.approx(per_gpu / 2 if peak.sparse else per_gpu)
        assert "sparsity" in peak.source.lower() or "sparse" in peak.source.lower() or not peak.sparse
    bf16 = gpu.peak_flops("bf16")
    assert gpu.peak_flops("fp16") == bf16  # one rate with FP32 accumulate
    for fmt in gpu.compute_formats:
        assert gpu.peak_flops(fmt) >= bf16


def test_the_data_sheet_figures():
    h100 = GPUS["H100 80GB"]
    assert h100.peak_flops("bf16") == 1979 / 2 * TERA
    assert h100.peak_flops("fp8") == h100.peak_flops("int8") == 3958 / 2 * TERA  # "* With sparsity"
    assert GPUS["A100 80GB"].peak_flops("int8") == 624 * TERA  # printed dense
    assert GPUS["RTX 4090"].peak_flops("fp8") == 330.3 * TERA  # FP32 accumulate, dense
    assert GPUS["B200"].peak_flops("fp8") == 72 / 8 / 2 * 1000 * TERA  # 8 GPUs, with sparsity
    assert GPUS["B200"].peak_flops("fp4") == 72 / 8 * 1000 * TERA  # the dense figure
    assert GPUS["GB200"].peak_flops("bf16") == 10 / 2 / 2 * 1000 * TERA
    assert GPUS["MI300X"].peak_flops("fp8") == 2614.9 * TERA  # AMD prints dense


@pytest.mark.parametrize(("name", "fmt"), [("A100 80GB", "fp8"), ("RTX 3090", "fp8"), ("H100 80GB", "fp4")])
def test_a_format_the_gpu_lacks_is_refused_by_name(name, fmt):
    with pytest.raises(LabError, match=rf"{re.escape(name)} has no {fmt} tensor cores"):
        GPUS[name].peak_flops(fmt)


def test_a_storage_only_format_is_not_a_compute_format():
    with pytest.raises(LabError, match="compute dtype='int4' must be one of"):
        GPUS["H100 80GB"].peak_flops("int4")


def test_the_bound_takes_the_peak_of_the_compute_format():
    cfg, gpu = PRESETS["llama-3-8b"], GPUS["H100 80GB"]
    bf16 = roofline(cfg, gpu, 8, 2048, "bf16", "prefill")
    fp8 = roofline(cfg, gpu, 8, 2048, "fp8", "prefill", "fp8")
    w8a16 = roofline(cfg, gpu, 8, 2048, "bf16", "prefill", "int8")  # weight-only: bf16 compute
    assert bf16.bound == fp8.bound == "compute"
    assert fp8.compute_time_s == pytest.approx(bf16.compute_time_s / 2)
    assert w8a16.compute_time_s == bf16.compute_time_s and w8a16.peak_flops == gpu.peak_flops("bf16")
    with pytest.raises(LabError, match="A100 80GB has no fp8 tensor cores"):
        roofline(cfg, "A100 80GB", 8, 2048, "fp8", "prefill", "fp8")


@pytest.mark.parametrize(
    ("device", "name"),
    [
        ("NVIDIA B200", "B200"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA L40S", "L40S"),
        ("AMD Instinct MI300X", "MI300X"),
    ],
)
def test_new_boards_are_recognised_by_device_name(device, name):
    assert gpu_for_device_name(device) is GPUS[name]
