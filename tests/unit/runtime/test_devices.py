"""What names a CPU's math kernels (the fingerprint pre-measured runs record)."""

from llama_lab.runtime.devices import cpu_kernels

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 207
model name\t: Intel(R) Xeon(R) Platinum 8581C CPU @ 2.10GHz
flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 avx512f avx512bw avx512_bf16 amx_tile

processor\t: 1
cpu family\t: 25
model\t\t: 1
flags\t\t: fpu sse
"""


def test_the_fingerprint_is_the_first_processor_s_family_model_and_vector_sets(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(CPUINFO)
    kernels = cpu_kernels(str(info))
    assert kernels.split()[1:] == [
        "6/207", "amx_tile", "avx", "avx2", "avx512_bf16", "avx512bw", "avx512f", "f16c", "fma", "sse4_2",
    ]  # fmt: skip
    assert kernels == cpu_kernels(str(info))  # the same machine, the same string


def test_without_proc_cpuinfo_the_machine_names_it(tmp_path):
    assert cpu_kernels(str(tmp_path / "absent")).strip()
    assert cpu_kernels() == cpu_kernels()
