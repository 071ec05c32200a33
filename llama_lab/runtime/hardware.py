"""Number formats and GPUs: bytes per element, and vendor data-sheet peaks.

Peak FLOP/s are *dense* (NVIDIA's headline tensor figures assume 2:4 structured sparsity; the
dense rate is half of those). Memory is what the device reports (nvidia-smi's Total, pasted in
public logs: an "80 GB" H100 holds 81,559 MiB, the "141 GB" H200 143,771 MiB), not the data
sheet's GB × 10⁹; a run then loses named reserves before its model (``RESERVES``: the CUDA
context, and a serving engine's memory-utilisation cap), and every "fits" answer counts them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from ..errors import LabError

# Bytes per element. fp8/int8/int4 are storage formats (weights, KV cache): compute runs in bf16.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
}

# Storage formats whose matmuls run on the bf16 tensor cores (weight-only quantisation, W8A16 …).
_COMPUTE_IN_BF16 = {"bf16", "fp16", "fp8", "int8", "int4"}

TERA = 10**12
GIGA = 10**9
KIB = 1024
MIB = 2**20
# What a process loses on a GPU before its own tensors: the CUDA context, "about 300 MB" with
# CUDA ≥ 11.7's lazy loading (github.com/pytorch/pytorch/issues/107667). A serving engine caps
# itself besides: vLLM's gpu_memory_utilization, 0.9 by default before and 0.92 on current main
# (vllm/config/cache.py @c1d8642 and @002f10e).
CUDA_CONTEXT_BYTES = 300 * 10**6
VLLM_GPU_MEMORY_UTILIZATION = 0.9
RESERVES = {
    "cuda_context_bytes": CUDA_CONTEXT_BYTES,
    "vllm_gpu_memory_utilization": VLLM_GPU_MEMORY_UTILIZATION,
}
# Shared memory per SM a kernel may use (NVIDIA CUDA C++ Programming Guide, "Compute
# Capabilities" table, and the tuning guides): Hopper (9.0) 228 KiB, A100 (8.0) 164 KiB,
# Ada (8.9: L4, RTX 4090) 100 KiB; GA10x (8.6: RTX 3090) 100 KiB (NVIDIA Ampere GPU Architecture
# Tuning Guide: "compute capability 8.6 support shared memory capacity of 0, 8, 16, 32, 64 or 100
# KB per SM").
SRAM = {"hopper": 228 * KIB, "a100": 164 * KIB, "ada": 100 * KIB, "ga10x": 100 * KIB}


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int
    peak_bf16_flops: float  # dense tensor-core BF16 (FP32 accumulate), FLOP/s
    peak_fp32_flops: float  # non-tensor FP32, FLOP/s
    hbm_bytes_per_s: float  # device-memory bandwidth, bytes/s
    source: str
    sram_bytes: int = 0  # shared memory one SM offers a kernel (FlashAttention's M)
    memory_source: str = ""  # where the reported capacity comes from

    @property
    def usable_bytes(self) -> int:
        """What a process can fill: the reported capacity less the CUDA context (``RESERVES``)."""
        return self.memory_bytes - CUDA_CONTEXT_BYTES

    def peak_flops(self, dtype: str) -> float:
        """The matmul peak for a storage dtype: fp32 on the FP32 units, everything else on the
        BF16 tensor cores (fp8/int8/int4 counted as weight-only formats with bf16 compute)."""
        if dtype == "fp32":
            return self.peak_fp32_flops
        if dtype in _COMPUTE_IN_BF16:
            return self.peak_bf16_flops
        raise LabError(f"dtype={dtype!r} must be one of {', '.join(DTYPE_BYTES)}")

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte at which bf16 compute and memory take equal time."""
        return self.peak_bf16_flops / self.hbm_bytes_per_s

    def to_dict(self) -> dict:
        return asdict(self)


GPUS: dict[str, GPU] = {
    # NVIDIA H100 Tensor Core GPU datasheet, SXM5 column: 80 GB HBM3, 3.35 TB/s,
    # BF16 1,979 TFLOPS with sparsity (989.4 dense), FP32 67 TFLOPS.
    "H100 80GB": GPU(
        "H100 80GB",
        81559 * MIB,  # as reported; the data sheet's 80 GB
        989.4 * TERA,
        67 * TERA,
        3.35 * TERA,
        "NVIDIA H100 datasheet (SXM5): BF16 1,979 TFLOPS sparse → 989.4 dense, "
        "FP32 67 TFLOPS, 80 GB HBM3 at 3.35 TB/s",
        SRAM["hopper"],
        memory_source="nvidia-smi: NVIDIA H100 80GB HBM3 … 0MiB / 81559MiB "
        "(github.com/NVIDIA/nccl/issues/1264)",
    ),
    # NVIDIA H200 Tensor Core GPU datasheet, SXM column: 141 GB HBM3e, 4.8 TB/s,
    # BF16 1,979 TFLOPS with sparsity, FP32 67 TFLOPS (same compute die as H100 SXM).
    "H200 141GB": GPU(
        "H200 141GB",
        143771 * MIB,  # as reported; the data sheet's 141 GB
        989.4 * TERA,
        67 * TERA,
        4.8 * TERA,
        "NVIDIA H200 datasheet (SXM): BF16 1,979 TFLOPS sparse → 989.4 dense, "
        "FP32 67 TFLOPS, 141 GB HBM3e at 4.8 TB/s",
        SRAM["hopper"],
        memory_source="nvidia-smi: NVIDIA H200 … / 143771MiB (github.com/sgl-project/sglang/issues/3196)",
    ),
    # NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column, as a reseller's copy of the table
    # prints it (archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html): BF16 1,513 TFLOPS with
    # sparsity ("Specifications 1/2 lower without sparsity"), FP32 51 TFLOPS, 80 GB HBM2e at
    # 2,000 GB/s (NVIDIA's H100 PCIe product brief PB-11133-001: "greater than 2,000 GBps", 350 W).
    "H100 PCIe 80GB": GPU(
        "H100 PCIe 80GB",
        81559 * MIB,  # as reported; the data sheet's 80 GB
        756.5 * TERA,
        51 * TERA,
        2000 * GIGA,
        "NVIDIA H100 datasheet (PCIe): BF16 1,513 TFLOPS sparse → 756.5 dense, FP32 51 TFLOPS, "
        "80 GB HBM2e at 2,000 GB/s",
        SRAM["hopper"],
        memory_source="nvidia-smi: NVIDIA H100 PCIe … / 81559MiB (github.com/XiongjieDai/"
        "GPU-Benchmarks-on-LLM-Inference LLaMA 3/Professional GPUs/H100_PCIe_v3.ipynb@aa72e0e)",
    ),
    # The H100 of Meta's Grand Teton hosts, on which torchtitan measured its benchmarks
    # (pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md): "96GB HBM2e with 2.4
    # TB/sec peak memory bandwidth", "the default 500W power limit"; its peak "is between SXM
    # and NVL, and we don't know its exact value", so torchtitan's MFU takes the SXM's, as here.
    "H100 96GB HBM2e": GPU(
        "H100 96GB HBM2e",
        97871 * MIB,  # derived: see memory_source
        989.4 * TERA,
        67 * TERA,
        2.4 * TERA,
        "torchtitan's benchmark page (Grand Teton): 96 GB HBM2e at 2.4 TB/s, 500 W; the peak "
        "between SXM's and NVL's, taken as the SXM's BF16 989.4 TFLOPS dense and FP32 67 TFLOPS",
        SRAM["hopper"],
        memory_source="derived, no report of this board found: its 96 GiB of HBM2e keeping the share "
        "the H100 80GB's 80 GiB keep as reported (81,559 of 81,920 MiB) gives 97,871 MiB, what other "
        "96 GB Hopper boards (GH200 480GB, H20) report in public nvidia-smi logs",
    ),
    # NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM: BF16 312 TFLOPS dense (624 sparse),
    # FP32 19.5 TFLOPS, HBM2 1,555 GB/s.
    "A100 40GB": GPU(
        "A100 40GB",
        40960 * MIB,  # as reported; the data sheet's 40 GB
        312 * TERA,
        19.5 * TERA,
        1555 * GIGA,
        "NVIDIA A100 datasheet (40GB SXM): BF16 312 TFLOPS dense, FP32 19.5 TFLOPS, 40 GB HBM2 at 1,555 GB/s",
        SRAM["a100"],
        memory_source="nvidia-smi: NVIDIA A100-SXM4-40GB … / 40960MiB "
        "(github.com/bottlerocket-os/bottlerocket-core-kit/pull/834)",
    ),
    # Same datasheet, A100 80GB SXM: HBM2e 2,039 GB/s.
    "A100 80GB": GPU(
        "A100 80GB",
        81920 * MIB,  # as reported; the data sheet's 80 GB
        312 * TERA,
        19.5 * TERA,
        2039 * GIGA,
        "NVIDIA A100 datasheet (80GB SXM): BF16 312 TFLOPS dense, FP32 19.5 TFLOPS, "
        "80 GB HBM2e at 2,039 GB/s",
        SRAM["a100"],
        memory_source="nvidia-smi: NVIDIA A100-SXM4-80GB … / 81920MiB "
        "(github.com/thamada/nvidia-smi gls/A100SXMx4_smi.py@b09ef13)",
    ),
    # NVIDIA L4 Tensor Core GPU datasheet: BF16 242 TFLOPS with sparsity (121 dense),
    # FP32 30.3 TFLOPS, 24 GB GDDR6 at 300 GB/s.
    "L4": GPU(
        "L4",
        23034 * MIB,  # as reported; the data sheet's 24 GB
        121 * TERA,
        30.3 * TERA,
        300 * GIGA,
        "NVIDIA L4 datasheet: BF16 242 TFLOPS sparse → 121 dense, FP32 30.3 TFLOPS, 24 GB GDDR6 at 300 GB/s",
        SRAM["ada"],
        memory_source="nvidia-smi: NVIDIA L4 … / 23034MiB "
        "(github.com/thamada/nvidia-smi gls/L4_smi.py@b09ef13)",
    ),
    # NVIDIA Ada Lovelace architecture whitepaper, Appendix A (GeForce RTX 4090): BF16 tensor
    # with FP32 accumulate 165.2 TFLOPS dense (330.4 sparse), FP32 82.6 TFLOPS,
    # 24 GB GDDR6X at 1,008 GB/s.
    "RTX 4090": GPU(
        "RTX 4090",
        24564 * MIB,  # as reported; the data sheet's 24 GB
        165.2 * TERA,
        82.6 * TERA,
        1008 * GIGA,
        "NVIDIA Ada Lovelace whitepaper, RTX 4090: BF16 (FP32 accumulate) 165.2 "
        "TFLOPS dense, FP32 82.6 TFLOPS, 24 GB GDDR6X at 1,008 GB/s",
        SRAM["ada"],
        memory_source="nvidia-smi: NVIDIA GeForce RTX 4090 … / 24564MiB (github.com/RLinf/RLinf/issues/255)",
    ),
    # NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (GeForce RTX 3090), as public
    # copies of its table quote it: BF16 tensor with FP32 accumulate 71 TFLOPS dense (142
    # sparse; GeForce runs FP32 accumulation at half the FP16-accumulate rate), FP32 35.6 TFLOPS,
    # 24 GB GDDR6X at 936 GB/s.
    "RTX 3090": GPU(
        "RTX 3090",
        24576 * MIB,  # as reported; the data sheet's 24 GB
        71 * TERA,
        35.6 * TERA,
        936 * GIGA,
        "NVIDIA Ampere GA102 whitepaper, Appendix A, RTX 3090: BF16 (FP32 accumulate) 71 TFLOPS dense, "
        "FP32 35.6 TFLOPS, 24 GB GDDR6X at 936 GB/s",
        SRAM["ga10x"],
        memory_source="nvidia-smi: NVIDIA GeForce RTX 3090 … / 24576MiB "
        "(github.com/noonghunna/club-3090/issues/390)",
    ),
}


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise LabError(f"dtype={dtype!r} must be one of {', '.join(DTYPE_BYTES)}") from None


def get_gpu(gpu: GPU | str) -> GPU:
    """A GPU from the table by key, or the GPU itself."""
    if isinstance(gpu, GPU):
        return gpu
    try:
        return GPUS[gpu]
    except KeyError:
        raise LabError(f"unknown GPU {gpu!r}; known GPUs: {', '.join(GPUS)}") from None


def gpu_for_device_name(name: str) -> GPU | None:
    """The table entry for a ``torch.cuda.get_device_name()`` string, e.g. "NVIDIA H100 80GB
    HBM3" or "NVIDIA A100-SXM4-40GB"; None for parts not in the table (H100 PCIe/NVL, ...)."""
    text = name.upper()
    if "H200" in text:
        return GPUS["H200 141GB"]
    if "H100" in text:
        # The SXM5 board reports "H100 80GB HBM3"; PCIe and NVL boards have other peaks.
        if "PCIE" in text:
            return GPUS["H100 PCIe 80GB"]
        return GPUS["H100 80GB"] if ("HBM3" in text or "SXM" in text) else None
    if "A100" in text:
        return GPUS["A100 80GB"] if "80GB" in text.replace(" ", "") else GPUS["A100 40GB"]
    if re.search(r"\bL4\b", text):
        return GPUS["L4"]
    if "4090" in text:
        return GPUS["RTX 4090"]
    if "3090" in text:
        return GPUS["RTX 3090"]
    return None
