"""Number formats and GPUs: bytes per element, and vendor data-sheet peaks.

Peak FLOP/s are *dense*: a data sheet that prints a figure "with sparsity" (NVIDIA's headline
tensor figures assume 2:4 structured sparsity) is halved (``TensorPeak``). A matmul runs at the
peak of the format it computes in (``GPU.peak_flops``): bf16/fp16, or fp8/int8/fp4 where the GPU
has tensor cores for it. Memory is what the device reports (nvidia-smi's Total, pasted in public
logs: an "80 GB" H100 holds 81,559 MiB, the "141 GB" H200 143,771 MiB), not the data sheet's
GB × 10⁹, except where no report was found (``memory_source`` says so); a run then loses named
reserves before its model (``RESERVES``: the CUDA context, and a serving engine's
memory-utilisation cap), and every "fits" answer counts them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from ..errors import LabError

# Bytes per element. fp8/int8/int4 also store weights and the KV cache: a weight-only format's
# matmuls compute in bf16 (its activations'), a W8A8 one's at its own peak (``GPU.peak_flops``).
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "int4": 0.5,
}

# The formats a tensor core computes in, each with its own peak. fp16 runs at bf16's rate on
# every GPU of the table (FP32 accumulate: "Peak FP16 Tensor TFLOPS with FP32 Accumulate" equals
# the BF16 row in NVIDIA's whitepapers; one "FP16/BF16" row in the newer data sheets).
TENSOR_FORMATS = ("bf16", "fp8", "int8", "fp4")

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
# How a forward is run: "compiled" (CUDA graphs or torch.compile: the serving engines and the
# compiled benchmarks) or "eager" (every kernel launched from Python, op by op)
RUNTIMES = ("compiled", "eager")
RESERVES = {
    "cuda_context_bytes": CUDA_CONTEXT_BYTES,
    "vllm_gpu_memory_utilization": VLLM_GPU_MEMORY_UTILIZATION,
}
# Shared memory per SM a kernel may use (NVIDIA CUDA C++ Programming Guide, "Compute
# Capabilities" table, and the tuning guides): Hopper (9.0) 228 KiB, A100 (8.0) 164 KiB,
# Ada (8.9: L4, L40S, RTX 4090) 100 KiB; GA10x (8.6: RTX 3090) 100 KiB (NVIDIA Ampere GPU
# Architecture Tuning Guide: "compute capability 8.6 support shared memory capacity of 0, 8, 16,
# 32, 64 or 100 KB per SM"); Blackwell (10.0: B200, GB200) 228 KiB (CUDA C Programming Guide
# v12.9 "Technical Specifications per Compute Capability", column 10.x, and the Blackwell Tuning
# Guide: "228 KB" per SM). AMD CDNA 3 (MI300X, gfx942): 64 KiB of LDS per compute unit (ROCm's
# MI300 microarchitecture page, rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi300.html).
SRAM = {
    "hopper": 228 * KIB,
    "a100": 164 * KIB,
    "ada": 100 * KIB,
    "ga10x": 100 * KIB,
    "blackwell": 228 * KIB,
    "cdna3": 64 * KIB,
}


@dataclass(frozen=True)
class TensorPeak:
    """One tensor-core peak as its source prints it. ``printed``: TFLOPS (TOPS for int8) for
    ``gpus`` GPUs (a system's data sheet prints the sum); ``sparse``: printed "with sparsity"
    (2:4 structured), whose dense rate is half; ``source``: the document, its URL, the table,
    and the line quoted."""

    dtype: str  # one of TENSOR_FORMATS
    printed: float
    sparse: bool
    source: str
    gpus: int = 1

    @property
    def dense_flops(self) -> float:
        """FLOP/s (OP/s) of one GPU without sparsity: the printed figure ÷ its GPUs, halved when
        printed with sparsity."""
        return self.printed * TERA / self.gpus / (2 if self.sparse else 1)


@dataclass(frozen=True)
class Links:
    """A GPU's links to the other GPUs, per GPU and in one direction (a data sheet's NVLink
    figure is both directions: halved): ``scale_up_bytes_per_s`` over its scale-up link (NVLink,
    Infinity Fabric, or PCIe for a card without one) within ``scale_up_domain`` GPUs that reach
    each other over it, and ``scale_out_bytes_per_s`` beyond (the inter-node network: one NIC's
    rate per GPU where a reference system states it). ``source``: where each figure comes from,
    or that none was found and the lab's former constant is kept."""

    scale_up_bytes_per_s: float
    scale_up_domain: int
    scale_out_bytes_per_s: float
    source: str


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int
    tensor_peaks: tuple[TensorPeak, ...]  # dense per format (TENSOR_FORMATS), each with its source
    peak_fp32_flops: float  # non-tensor FP32, FLOP/s
    hbm_bytes_per_s: float  # device-memory bandwidth, bytes/s
    source: str
    sram_bytes: int = 0  # shared memory one SM offers a kernel (FlashAttention's M)
    memory_source: str = ""  # where the reported capacity comes from
    links: Links = field(kw_only=True)  # its NVLink / PCIe domain and its network, with sources

    @property
    def usable_bytes(self) -> int:
        """What a process can fill: the reported capacity less the CUDA context (``RESERVES``)."""
        return self.memory_bytes - CUDA_CONTEXT_BYTES

    @property
    def compute_formats(self) -> tuple[str, ...]:
        """The formats this GPU's tensor cores compute in."""
        return tuple(p.dtype for p in self.tensor_peaks)

    def peak_flops(self, dtype: str) -> float:
        """The dense matmul peak of the format a matmul computes in: fp32 on the FP32 units,
        bf16 and fp16 (one rate) and fp8/int8/fp4 on the tensor cores at that format's own peak.
        The one rule every bound and estimate takes its peak from. A weight-only format (int4 or
        int8 weights with bf16 activations) computes in bf16: ask for bf16."""
        if dtype == "fp32":
            return self.peak_fp32_flops
        tensor = "bf16" if dtype == "fp16" else dtype
        if tensor not in TENSOR_FORMATS:
            raise LabError(f"compute dtype={dtype!r} must be one of fp32, fp16, {', '.join(TENSOR_FORMATS)}")
        for peak in self.tensor_peaks:
            if peak.dtype == tensor:
                return peak.dense_flops
        raise LabError(
            f"{self.name} has no {dtype} tensor cores (its data sheet lists none): its matmuls "
            f"compute in {', '.join(self.compute_formats)}"
        )

    @property
    def peak_bf16_flops(self) -> float:
        """The dense bf16 tensor peak (``peak_flops("bf16")``): what MFU is measured against."""
        return self.peak_flops("bf16")

    @property
    def ridge_point(self) -> float:
        """FLOPs per byte at which bf16 compute and memory take equal time."""
        return self.peak_bf16_flops / self.hbm_bytes_per_s

    def to_dict(self) -> dict:
        return asdict(self)


# The documents the peaks are read from; each TensorPeak quotes its line.
H100_DATASHEET = (
    "NVIDIA H100 Tensor Core GPU datasheet (resources.nvidia.com/en-us-tensor-core/"
    "nvidia-tensor-core-gpu-datasheet; www.nvidia.com/en-us/data-center/h100/), specifications table"
)
H200_DATASHEET = (
    "NVIDIA H200 Tensor Core GPU datasheet (resources.nvidia.com/en-us-data-center-overview-mc/"
    "en-us-data-center-overview/hpc-datasheet-sc23-h200), as tabled in github.com/astroC86/"
    "gpu-datasheet README.md"
)
HOPPER_WHITEPAPER = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper (resources.nvidia.com/en-us-tensor-core/"
    "gtc22-whitepaper-hopper), Table 3, H100 PCIe column (dense/sparse)"
)
A100_DATASHEET = (
    "NVIDIA A100 Tensor Core GPU datasheet (www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
    "a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf), specifications table"
)
L4_DATASHEET = (
    "NVIDIA L4 Tensor Core GPU datasheet (www.nvidia.com/en-us/data-center/l4/; the PDF as "
    "www.cisco.com/c/dam/en/us/products/collateral/servers-unified-computing/ucs-c-series-rack-"
    'servers/nvidia-l4-gpu.pdf hosts it), specifications table, "* With sparsity"'
)
ADA_WHITEPAPER = (
    "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A, GeForce RTX 4090 (dense/sparse; "
    "FP32 accumulate, the table's convention for bf16)"
)
L40S_DATASHEET = (
    "NVIDIA L40S datasheet / product page (www.nvidia.com/en-us/data-center/l40s/), GPU "
    'specifications, "* With sparsity"'
)
HGX_B200 = (
    "NVIDIA HGX platform page, HGX B200 column (www.nvidia.com/en-us/data-center/hgx/), 8 GPUs; "
    "its Tensor Core rows are with sparsity except FP4's second figure (dense). The page's own "
    "sparse/dense footnote marks are inconsistent (read 2026-10-05: FP8 labelled dense at FP4's "
    'dense figure); FP8 read as sparse, as DGX B200\'s "72 petaFLOPS training" (FP8) is'
)
GB200_NVL72 = (
    "NVIDIA GB200 NVL72 page (www.nvidia.com/en-us/data-center/gb200-nvl72/), GB200 Grace "
    'Blackwell Superchip column (1 Grace CPU : 2 Blackwell GPUs), "Specification in sparse | '
    'dense"; dense is one-half of sparse'
)
MI300X_DATASHEET = (
    "AMD Instinct MI300X accelerator data sheet (www.amd.com/en/products/accelerators/instinct/"
    "mi300/mi300x.html): AMD prints dense peaks with the sparse ones beside them; as public "
    "roofline tables quote it (vendor dense peaks: bf16 1307.4, fp8 2614.9, fp32 163.4 TFLOPS)"
)


# The links. A collective over n GPUs runs at ``link_bytes_per_s(gpu, n)``: the scale-up link
# while the n GPUs fit its domain, the scale-out network beyond. Where no stored source states a
# figure the lab's former constants are kept (NVLink 4's 450 GB/s a direction, 8 GPUs a node,
# one 400 Gb/s NIC = 50 GB/s per GPU) and the source says so.
FORMER_SCALE_UP = 450 * GIGA  # NVLink 4 per GPU, one direction (H100/H200 SXM: 900 GB/s both)
FORMER_DOMAIN = 8  # one HGX/DGX node's GPUs
FORMER_SCALE_OUT = 50 * GIGA  # one 400 Gb/s InfiniBand NIC per GPU (DGX H100)
NIC_400G = (
    "400 Gb/s per GPU = 50 GB/s: DGX B200 user guide (docs.nvidia.com/dgx/dgxb200-user-guide/"
    'introduction-to-dgxb200.html), "4 x OSFP ports for 8 x NVIDIA ConnectX-7 Single Port Cards", '
    '"InfiniBand (default): Up to 400Gbps"'
)
NVLINK4_SXM = (
    "MLPerf Inference v4.1 system description, NVIDIA H200-SXM-141GBx8 (github.com/mlcommons/"
    "inference_results_v4.1 closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json): "
    '"accelerator_interconnect": "18x 4th Gen NVLink, 900GB/s" (both directions: 450 one way), '
    '"accelerators_per_node": 8; the H100 SXM has the same die and links (the H100 SXM5 spec '
    'list at hawkvelt.id.au/post/2024-08-04-nvidia-h100: "NVLink Speed: 900 GB/sec"; "eight GPUs '
    'are interconnected via NVSwitches ... at the full 900 GB/s", "ConnectX-7 ... 400 Gbps" in a '
    "DGX H100, ubytelink.com/blog/what-is-nvidia-h100-interconnect-a-technical-deep-dive.html)"
)
NVLINK5_B200 = (
    "DGX B200 user guide (docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html): "
    '"8 x NVIDIA B200 GPUs", "2 x 5th generation NVLink switches that provide 14.4 TB/s aggregate '
    'bandwidth" (÷ 8 GPUs = 1.8 TB/s both directions, 900 GB/s one way; MLPerf v6.0 nebius_b200_n1'
    '.json: "18x 5th Gen NVLink, 14.4 TB/s aggregated bandwidth")'
)
A100_LINKS = Links(
    300 * GIGA,
    8,
    FORMER_SCALE_OUT,
    'NVLink 3: "Ein einzelner NVIDIA A100 Tensor Core-Grafikprozessor unterstützt bis zu zwölf '
    'NVLink-Verbindungen der dritten Generation für eine Bandbreite von insgesamt 600 GB/s" '
    "(www.nvidia.com/de-de/data-center/nvlink/; both directions: 300 one way); 8 a node over six "
    'NVSwitches ("Number of GPUs with direct connection / node Up to 8", the A100 whitepaper as '
    "jingchaozhang.github.io/A100-white-paper/ tables it); scale-out: no stored source for DGX "
    "A100's NICs, the former 50 GB/s kept",
)
PCIE_GEN4_X16 = (
    "PCIe Gen4 x16, no NVLink: 64 GB/s both directions, 32 one way (the L40S data sheet's "
    '"Interconnect Interface PCIe Gen4 x16: 64GB/s bidirectional", as www.itcreations.com/nvidia-'
    'gpu/nvidia-l40s-gpu-accelerator prints it, "NVLink is not supported"; "A PCIe 4.0 x16 slot has '
    'a max set at 32 gigabytes per second (GB/s) of data flowing in each direction", hardwired.'
    "pbtech.co.nz/article/1843)"
)
PCIE_DOMAIN_KEPT = (
    "; the domain: no stored source for how many cards one host holds, so the former 8 is kept "
    "(the public rows split these cards 2 ways at most); no scale-out network stated: the former "
    "50 GB/s kept"
)


def _hopper_sxm_peaks(doc: str) -> tuple[TensorPeak, ...]:
    """The H100 SXM / H200 compute die's tensor peaks (one die, one table)."""
    return (
        TensorPeak("bf16", 1979, True, f'{doc}: "BFLOAT16 Tensor Core* 1,979 teraFLOPS", "* With sparsity"'),
        TensorPeak("fp8", 3958, True, f'{doc}: "FP8 Tensor Core* 3,958 teraFLOPS", "* With sparsity"'),
        TensorPeak("int8", 3958, True, f'{doc}: "INT8 Tensor Core* 3,958 TOPS", "* With sparsity"'),
    )


def _a100_peaks() -> tuple[TensorPeak, ...]:
    return (
        TensorPeak("bf16", 312, False, f'{A100_DATASHEET}: "BFLOAT16 Tensor Core 312 TFLOPS | 624 TFLOPS*"'),
        TensorPeak("int8", 624, False, f'{A100_DATASHEET}: "INT8 Tensor Core 624 TOPS | 1,248 TOPS*"'),
    )


def _blackwell_peaks(
    doc: str, gpus: int, bf16: float, fp8: float, int8: float, fp4: float, fp4_quote: str
) -> tuple[TensorPeak, ...]:
    """A Blackwell system's sparse bf16/fp8/int8 rows and its dense fp4 figure (PFLOPS as
    printed, for ``gpus`` GPUs)."""
    per = f"(÷ {gpus} GPUs)"
    return (
        TensorPeak("bf16", bf16 * 1000, True, f'{doc}: "FP16/BF16 Tensor Core {bf16:g} PFLOPS" {per}', gpus),
        TensorPeak("fp8", fp8 * 1000, True, f'{doc}: "FP8/FP6 Tensor Core {fp8:g} PFLOPS" {per}', gpus),
        TensorPeak("int8", int8 * 1000, True, f'{doc}: "INT8 Tensor Core {int8:g} POPS" {per}', gpus),
        TensorPeak("fp4", fp4 * 1000, False, f'{doc}: "{fp4_quote}", the dense figure {per}', gpus),
    )


GPUS: dict[str, GPU] = {
    # NVIDIA H100 Tensor Core GPU datasheet, SXM5 column: 80 GB HBM3, 3.35 TB/s,
    # BF16 1,979 TFLOPS with sparsity (989.4 dense), FP32 67 TFLOPS.
    "H100 80GB": GPU(
        "H100 80GB",
        81559 * MIB,  # as reported; the data sheet's 80 GB
        _hopper_sxm_peaks(f"{H100_DATASHEET}, H100 SXM column"),
        67 * TERA,
        3.35 * TERA,
        "NVIDIA H100 datasheet (SXM5): BF16 1,979 TFLOPS sparse → 989.4 dense, FP8 and INT8 3,958 "
        "sparse → 1,979 dense, FP32 67 TFLOPS, 80 GB HBM3 at 3.35 TB/s",
        SRAM["hopper"],
        memory_source="nvidia-smi: NVIDIA H100 80GB HBM3 … 0MiB / 81559MiB "
        "(github.com/NVIDIA/nccl/issues/1264)",
        links=Links(
            450 * GIGA, 8, 50 * GIGA, f"{NVLINK4_SXM}; scale-out {NIC_400G} (one ConnectX-7 a GPU: DGX H100)"
        ),
    ),
    # NVIDIA H200 Tensor Core GPU datasheet, SXM column: 141 GB HBM3e, 4.8 TB/s,
    # BF16 1,979 TFLOPS with sparsity, FP32 67 TFLOPS (same compute die as H100 SXM).
    "H200 141GB": GPU(
        "H200 141GB",
        143771 * MIB,  # as reported; the data sheet's 141 GB
        _hopper_sxm_peaks(f"{H200_DATASHEET}, H200 SXM column"),
        67 * TERA,
        4.8 * TERA,
        "NVIDIA H200 datasheet (SXM): BF16 1,979 TFLOPS sparse → 989.4 dense, FP8 and INT8 3,958 "
        "sparse → 1,979 dense, FP32 67 TFLOPS, 141 GB HBM3e at 4.8 TB/s",
        SRAM["hopper"],
        memory_source="nvidia-smi: NVIDIA H200 … / 143771MiB (github.com/sgl-project/sglang/issues/3196)",
        links=Links(
            450 * GIGA,
            8,
            50 * GIGA,
            f'{NVLINK4_SXM}; scale-out {NIC_400G} (the H200 system: "10x 400Gbe Infiniband")',
        ),
    ),
    # NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column, as a reseller's copy of the table
    # prints it (archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html): BF16 1,513 TFLOPS with
    # sparsity ("Specifications 1/2 lower without sparsity"), FP32 51 TFLOPS, 80 GB HBM2e at
    # 2,000 GB/s (NVIDIA's H100 PCIe product brief PB-11133-001: "greater than 2,000 GBps", 350 W).
    "H100 PCIe 80GB": GPU(
        "H100 PCIe 80GB",
        81559 * MIB,  # as reported; the data sheet's 80 GB
        (
            TensorPeak(
                "bf16",
                1513,
                True,
                "NVIDIA H100 datasheet, H100 PCIe column (archive-lib.hpctech.co.jp/gpuproduct/"
                'nvidia-h100.html): "BFLOAT16 Tensor Core 1,513 teraFLOPS", "Specifications 1/2 '
                'lower without sparsity"',
            ),
            TensorPeak("fp8", 3026, True, f'{HOPPER_WHITEPAPER}: "FP8 Tensor: 1,513/3,026 TFLOPS"'),
            TensorPeak("int8", 3026, True, f'{HOPPER_WHITEPAPER}: "INT8 Tensor: 1,513/3,026 TOPS"'),
        ),
        51 * TERA,
        2000 * GIGA,
        "NVIDIA H100 datasheet (PCIe): BF16 1,513 TFLOPS sparse → 756.5 dense, FP8 and INT8 3,026 "
        "sparse → 1,513 dense, FP32 51 TFLOPS, 80 GB HBM2e at 2,000 GB/s",
        SRAM["hopper"],
        memory_source="nvidia-smi: NVIDIA H100 PCIe … / 81559MiB (github.com/XiongjieDai/"
        "GPU-Benchmarks-on-LLM-Inference LLaMA 3/Professional GPUs/H100_PCIe_v3.ipynb@aa72e0e)",
        links=Links(
            64 * GIGA,
            FORMER_DOMAIN,
            FORMER_SCALE_OUT,
            "PCIe Gen5 x16 (an NVLink bridge pairs two cards at most; no public row says one was "
            'fitted): "PCIe Gen5 | 128 GB/s" both directions (ubytelink.com/blog/what-is-nvidia-h100-'
            "interconnect-a-technical-deep-dive.html), "
            f"64 one way{PCIE_DOMAIN_KEPT}",
        ),
    ),
    # The H100 of Meta's Grand Teton hosts, on which torchtitan measured its benchmarks
    # (pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md): "96GB HBM2e with 2.4
    # TB/sec peak memory bandwidth", "the default 500W power limit"; its peak "is between SXM
    # and NVL, and we don't know its exact value", so torchtitan's MFU takes the SXM's, as here
    # (every format: the SXM's data-sheet peaks bound it from above).
    "H100 96GB HBM2e": GPU(
        "H100 96GB HBM2e",
        97871 * MIB,  # derived: see memory_source
        _hopper_sxm_peaks(f"{H100_DATASHEET}, H100 SXM column (taken for this board, as torchtitan does)"),
        67 * TERA,
        2.4 * TERA,
        "torchtitan's benchmark page (Grand Teton): 96 GB HBM2e at 2.4 TB/s, 500 W; the peak "
        "between SXM's and NVL's, taken as the SXM's: BF16 989.4, FP8 and INT8 1,979 TFLOPS dense, "
        "FP32 67 TFLOPS",
        SRAM["hopper"],
        memory_source="derived, no report of this board found: its 96 GiB of HBM2e keeping the share "
        "the H100 80GB's 80 GiB keep as reported (81,559 of 81,920 MiB) gives 97,871 MiB, what other "
        "96 GB Hopper boards (GH200 480GB, H20) report in public nvidia-smi logs",
        links=Links(
            FORMER_SCALE_UP,
            FORMER_DOMAIN,
            FORMER_SCALE_OUT,
            "no stored source for Grand Teton's H100 links: the former constants kept (the SXM's "
            "NVLink 4, 8 a node, 50 GB/s a GPU between nodes)",
        ),
    ),
    # NVIDIA A100 Tensor Core GPU datasheet, A100 40GB SXM: BF16 312 TFLOPS dense (624 sparse),
    # INT8 624 TOPS dense, no FP8; FP32 19.5 TFLOPS, HBM2 1,555 GB/s.
    "A100 40GB": GPU(
        "A100 40GB",
        40960 * MIB,  # as reported; the data sheet's 40 GB
        _a100_peaks(),
        19.5 * TERA,
        1555 * GIGA,
        "NVIDIA A100 datasheet (40GB SXM): BF16 312 TFLOPS dense, INT8 624 TOPS dense, no FP8, "
        "FP32 19.5 TFLOPS, 40 GB HBM2 at 1,555 GB/s",
        SRAM["a100"],
        memory_source="nvidia-smi: NVIDIA A100-SXM4-40GB … / 40960MiB "
        "(github.com/bottlerocket-os/bottlerocket-core-kit/pull/834)",
        links=A100_LINKS,
    ),
    # Same datasheet, A100 80GB SXM: HBM2e 2,039 GB/s.
    "A100 80GB": GPU(
        "A100 80GB",
        81920 * MIB,  # as reported; the data sheet's 80 GB
        _a100_peaks(),
        19.5 * TERA,
        2039 * GIGA,
        "NVIDIA A100 datasheet (80GB SXM): BF16 312 TFLOPS dense, INT8 624 TOPS dense, no FP8, "
        "FP32 19.5 TFLOPS, 80 GB HBM2e at 2,039 GB/s",
        SRAM["a100"],
        memory_source="nvidia-smi: NVIDIA A100-SXM4-80GB … / 81920MiB "
        "(github.com/thamada/nvidia-smi gls/A100SXMx4_smi.py@b09ef13)",
        links=A100_LINKS,
    ),
    # NVIDIA L4 Tensor Core GPU datasheet: BF16 242 TFLOPS with sparsity (121 dense), FP8 and
    # INT8 485 with sparsity, FP32 30.3 TFLOPS, 24 GB GDDR6 at 300 GB/s.
    "L4": GPU(
        "L4",
        23034 * MIB,  # as reported; the data sheet's 24 GB
        (
            TensorPeak("bf16", 242, True, f'{L4_DATASHEET}: "BFLOAT16 Tensor Core 242 teraFLOPS*"'),
            TensorPeak("fp8", 485, True, f'{L4_DATASHEET}: "FP8 Tensor Core 485 teraFLOPs*"'),
            TensorPeak("int8", 485, True, f'{L4_DATASHEET}: "INT8 Tensor Core 485 TOPs*"'),
        ),
        30.3 * TERA,
        300 * GIGA,
        "NVIDIA L4 datasheet: BF16 242 TFLOPS sparse → 121 dense, FP8 and INT8 485 sparse → 242.5 "
        "dense, FP32 30.3 TFLOPS, 24 GB GDDR6 at 300 GB/s",
        SRAM["ada"],
        memory_source="nvidia-smi: NVIDIA L4 … / 23034MiB "
        "(github.com/thamada/nvidia-smi gls/L4_smi.py@b09ef13)",
        links=Links(
            32 * GIGA,
            FORMER_DOMAIN,
            FORMER_SCALE_OUT,
            f'{PCIE_GEN4_X16} (the L4: "Host Interface PCI Express 4.0 x16", store.sourcecode.com '
            f"bg-bucket-compare/125/9820){PCIE_DOMAIN_KEPT}",
        ),
    ),
    # NVIDIA L40S datasheet: FP16/BF16 "362.05 | 733" TFLOPS (dense | sparse; the dense figure
    # is not half the sparse one: the bound takes the larger, 733 / 2), FP8 and INT8
    # "733 | 1,466", FP32 91.6 TFLOPS, 48 GB GDDR6 with ECC at 864 GB/s.
    "L40S": GPU(
        "L40S",
        46068 * MIB,  # as reported; the data sheet's 48 GB
        (
            TensorPeak(
                "bf16",
                733,
                True,
                f'{L40S_DATASHEET}: "BF16 Tensor Core 362.05 | 733 TFLOPS*" (halved: 366.5, above '
                "the printed dense 362.05, so the bound holds either way)",
            ),
            TensorPeak("fp8", 1466, True, f'{L40S_DATASHEET}: "FP8 Tensor Core 733 | 1,466 TFLOPS*"'),
            TensorPeak("int8", 1466, True, f'{L40S_DATASHEET}: "INT8 Tensor Core 733 | 1,466 TOPS*"'),
        ),
        91.6 * TERA,
        864 * GIGA,
        "NVIDIA L40S datasheet: BF16 733 TFLOPS sparse → 366.5 dense, FP8 and INT8 1,466 sparse → "
        "733 dense, FP32 91.6 TFLOPS, 48 GB GDDR6 at 864 GB/s",
        SRAM["ada"],
        memory_source="nvidia-smi: NVIDIA L40S … 0MiB / 46068MiB (public nvidia-smi logs, e.g. driver "
        "550.163.01, CUDA 12.4)",
        links=Links(32 * GIGA, FORMER_DOMAIN, FORMER_SCALE_OUT, f"{PCIE_GEN4_X16}{PCIE_DOMAIN_KEPT}"),
    ),
    # NVIDIA Ada Lovelace architecture whitepaper, Appendix A (GeForce RTX 4090): BF16 tensor
    # with FP32 accumulate 165.2 TFLOPS dense (330.4 sparse), FP8 with FP32 accumulate 330.3
    # dense (v2.02 corrected it; with FP16 accumulate 660.6), INT8 660.6 TOPS dense,
    # FP32 82.6 TFLOPS, 24 GB GDDR6X at 1,008 GB/s.
    "RTX 4090": GPU(
        "RTX 4090",
        24564 * MIB,  # as reported; the data sheet's 24 GB
        (
            TensorPeak(
                "bf16",
                165.2,
                False,
                f'{ADA_WHITEPAPER}: "Peak BF16 Tensor TFLOPS with FP32 Accumulate 165.2/330.4"',
            ),
            TensorPeak(
                "fp8",
                330.3,
                False,
                f'{ADA_WHITEPAPER}: "Peak FP8 Tensor TFLOPS with FP32 Accumulate 330.3/660.6"',
            ),
            TensorPeak("int8", 660.6, False, f'{ADA_WHITEPAPER}: "Peak INT8 Tensor TOPS 660.6/1321.2"'),
        ),
        82.6 * TERA,
        1008 * GIGA,
        "NVIDIA Ada Lovelace whitepaper, RTX 4090: BF16 (FP32 accumulate) 165.2 TFLOPS dense, FP8 "
        "(FP32 accumulate) 330.3, INT8 660.6 TOPS dense, FP32 82.6 TFLOPS, 24 GB GDDR6X at 1,008 GB/s",
        SRAM["ada"],
        memory_source="nvidia-smi: NVIDIA GeForce RTX 4090 … / 24564MiB (github.com/RLinf/RLinf/issues/255)",
        links=Links(
            32 * GIGA,
            FORMER_DOMAIN,
            FORMER_SCALE_OUT,
            f'{PCIE_GEN4_X16} (the RTX 4090: "its native PCIe setting of PCI-Express 4.0 x16", '
            f"techpowerup.com/review/nvidia-geforce-rtx-4090-pci-express-scaling/29.html){PCIE_DOMAIN_KEPT}",
        ),
    ),
    # NVIDIA Ampere GA102 GPU Architecture whitepaper, Appendix A (GeForce RTX 3090), as public
    # copies of its table quote it: BF16 tensor with FP32 accumulate 71 TFLOPS dense (142
    # sparse; GeForce runs FP32 accumulation at half the FP16-accumulate rate), FP32 35.6 TFLOPS,
    # 24 GB GDDR6X at 936 GB/s. No FP8 (Ampere); its INT8 row was not found quoted: not listed.
    "RTX 3090": GPU(
        "RTX 3090",
        24576 * MIB,  # as reported; the data sheet's 24 GB
        (
            TensorPeak(
                "bf16",
                71,
                False,
                "NVIDIA Ampere GA102 whitepaper (www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-"
                'architecture-whitepaper-v2.pdf), Appendix A, RTX 3090: "Peak BF16 Tensor TFLOPS with '
                'FP32 Accumulate 71/142"',
            ),
        ),
        35.6 * TERA,
        936 * GIGA,
        "NVIDIA Ampere GA102 whitepaper, Appendix A, RTX 3090: BF16 (FP32 accumulate) 71 TFLOPS dense, "
        "FP32 35.6 TFLOPS, 24 GB GDDR6X at 936 GB/s",
        SRAM["ga10x"],
        memory_source="nvidia-smi: NVIDIA GeForce RTX 3090 … / 24576MiB "
        "(github.com/noonghunna/club-3090/issues/390)",
        links=Links(
            32 * GIGA,
            FORMER_DOMAIN,
            FORMER_SCALE_OUT,
            f"{PCIE_GEN4_X16} (the RTX 3090 on PCIe 4.0, same page; its optional 2-card NVLink bridge, "
            '"56.25 GB/sec bandwidth in each direction" in the GA102 whitepaper, is not assumed: no '
            f"public row says one was fitted){PCIE_DOMAIN_KEPT}",
        ),
    ),
    # NVIDIA HGX B200 (8 GPUs): FP16/BF16 36, FP8/FP6 72 PFLOPS and INT8 72 POPS with sparsity,
    # FP4 "144 | 72" PFLOPS (sparse | dense), FP32 600 TFLOPS; DGX B200: "1,440 GB total,
    # 64 TB/s HBM3e bandwidth" for 8 GPUs.
    "B200": GPU(
        "B200",
        183359 * MIB,  # as reported; the data sheet's 180 GB (1,440 GB / 8)
        _blackwell_peaks(
            HGX_B200, 8, bf16=36, fp8=72, int8=72, fp4=72, fp4_quote="FP4 Tensor Core 144 | 72 PFLOPS"
        ),
        600 / 8 * TERA,
        64 / 8 * TERA,
        "NVIDIA HGX B200 / DGX B200 (8 GPUs, each figure ÷ 8): BF16 36 PFLOPS sparse → 2.25 dense, "
        "FP8 72 sparse → 4.5 dense, INT8 72 POPS sparse → 4.5 dense, FP4 72 dense → 9, FP32 600 "
        "TFLOPS → 75; 1,440 GB HBM3e at 64 TB/s → 8 TB/s (www.nvidia.com/en-us/data-center/dgx-b200/)",
        SRAM["blackwell"],
        memory_source="nvidia-smi: NVIDIA B200 … 0MiB / 183359MiB (public nvidia-smi logs, e.g. 8x B200, "
        "driver 570.172.08, CUDA 12.8)",
        links=Links(900 * GIGA, 8, 50 * GIGA, f"{NVLINK5_B200}; scale-out {NIC_400G}"),
    ),
    # NVIDIA GB200 NVL72, GB200 Grace Blackwell Superchip (2 GPUs): FP16/BF16 10, FP8/FP6 20
    # PFLOPS and INT8 20 POPS with sparsity, NVFP4 "40 | 20" PFLOPS (sparse | dense), FP32 160
    # TFLOPS, 372 GB HBM3e at 16 TB/s; one GPU is half of each.
    "GB200": GPU(
        "GB200",
        186 * GIGA,  # the data sheet's GB: no report of one GB200 GPU's capacity found
        _blackwell_peaks(
            GB200_NVL72, 2, bf16=10, fp8=20, int8=20, fp4=20, fp4_quote="NVFP4 Tensor Core 40 | 20 PFLOPS"
        ),
        160 / 2 * TERA,
        16 / 2 * TERA,
        "NVIDIA GB200 NVL72 page, GB200 Superchip (2 GPUs, each figure ÷ 2): BF16 10 PFLOPS sparse → "
        "2.5 dense, FP8 20 sparse → 5 dense, INT8 20 POPS sparse → 5 dense, FP4 20 dense → 10, FP32 160 "
        "TFLOPS → 80; 372 GB HBM3e at 16 TB/s → 186 GB at 8 TB/s",
        SRAM["blackwell"],
        memory_source='data sheet, not reported: the GB200 Superchip\'s "372 GB HBM3e" ÷ 2 GPUs = 186 GB '
        '(× 10⁹ bytes; an earlier version of the page printed "Up to 384 GB")',
        links=Links(
            900 * GIGA,
            72,
            50 * GIGA,
            f"NVLink 5 as the B200's ({NVLINK5_B200}) across the whole rack: {GB200_NVL72}, 72 GPUs "
            '"130 TB/s" of NVLink (÷ 72 = 1.8 TB/s both directions, one NVLink domain); scale-out: MLPerf '
            'v6.1 Crusoe GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json, "for each 4-GPU node: 4x ... '
            f'[ConnectX-7 Lx]" (one a GPU), {NIC_400G}',
        ),
    ),
    # AMD Instinct MI300X data sheet: FP16/BF16 1,307.4 TFLOPS and FP8 2,614.9 TFLOPS dense,
    # INT8 2,614.9 TOPS dense, FP32 (vector) 163.4 TFLOPS, 192 GB HBM3 at 5.3 TB/s.
    "MI300X": GPU(
        "MI300X",
        192 * GIGA,  # the data sheet's GB: no report of its capacity in MiB found
        (
            TensorPeak("bf16", 1307.4, False, f'{MI300X_DATASHEET}: "Peak BF16 1307.4 TFLOPs" (dense)'),
            TensorPeak("fp8", 2614.9, False, f'{MI300X_DATASHEET}: "Peak FP8 2614.9 TFLOPs" (dense)'),
            TensorPeak("int8", 2614.9, False, f'{MI300X_DATASHEET}: "Peak INT8 2614.9 TOPs" (dense)'),
        ),
        163.4 * TERA,
        5.3 * TERA,
        "AMD Instinct MI300X data sheet: BF16 1,307.4 TFLOPS, FP8 2,614.9 TFLOPS, INT8 2,614.9 TOPS "
        "(dense), FP32 163.4 TFLOPS, 192 GB HBM3 at 5.3 TB/s",
        SRAM["cdna3"],
        memory_source="data sheet, not reported: 192 GB HBM3 (× 10⁹ bytes)",
        links=Links(
            FORMER_SCALE_UP,
            8,
            FORMER_SCALE_OUT,
            'MLPerf Inference v4.1 AMD 8xMI300X_2xEPYC-9374F.json: "accelerator_interconnect": "XGMI", '
            '"accelerators_per_node": 8 (Infinity Fabric, 8 GPUs); no AMD document stating its per-GPU '
            "bandwidth was found stored: the former 450 GB/s a direction kept, and the former 50 GB/s "
            "between nodes",
        ),
    ),
}


def dtype_bytes(dtype: str) -> float:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise LabError(f"dtype={dtype!r} must be one of {', '.join(DTYPE_BYTES)}") from None


def link_bytes_per_s(gpu: GPU, group: int) -> float:
    """Bytes/s per GPU, one direction, of the link a collective over ``group`` GPUs crosses: the
    scale-up link while the group fits one scale-up domain (an HGX node's 8 NVLink GPUs, a GB200
    NVL72 rack's 72), the slower of it and the scale-out network beyond (all of the traffic
    counted at the slower). The one rule every time model takes a link from."""
    links = gpu.links
    if group <= links.scale_up_domain:
        return links.scale_up_bytes_per_s
    return min(links.scale_up_bytes_per_s, links.scale_out_bytes_per_s)


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
    if "GB200" in text:
        return GPUS["GB200"]
    if "B200" in text:
        return GPUS["B200"]
    if "MI300X" in text:
        return GPUS["MI300X"]
    if "L40S" in text:
        return GPUS["L40S"]
    if re.search(r"\bL4\b", text):
        return GPUS["L4"]
    if "4090" in text:
        return GPUS["RTX 4090"]
    if "3090" in text:
        return GPUS["RTX 3090"]
    return None
