"""Each GPU's own links: its scale-up bandwidth and domain and its scale-out network, each sourced,
and every time model taking its link from the one rule (``hardware.link_bytes_per_s``)."""

from __future__ import annotations

import re

import pytest

from llama_lab.analysis.layouts import layout_cost, search_assumptions
from llama_lab.analysis.parallel import Layout, parallel_memory, tp_forward_bytes
from llama_lab.config import PRESETS
from llama_lab.runtime.hardware import GPUS, link_bytes_per_s
from llama_lab.validation import Efficiency
from llama_lab.validation.efficiency import tp_link_seconds, train_seconds_by_term
from llama_lab.validation.moe_step import ep_link_bytes_per_s

CFG = PRESETS["debug"]
EFF = Efficiency()
H100, B200, GB200 = GPUS["H100 80GB"], GPUS["B200"], GPUS["GB200"]


@pytest.mark.parametrize("name", list(GPUS))
def test_every_gpu_has_its_links_and_their_source(name):
    links = GPUS[name].links
    assert links.scale_up_bytes_per_s > 0 and links.scale_out_bytes_per_s > 0
    assert links.scale_up_domain >= 1
    # a URL or a stored file for the figures found; the figures kept say so
    assert re.search(r"[\w-]+\.[a-z.]+/\S|\.json", links.source) or "kept" in links.source, name
    if links.scale_up_bytes_per_s == 450e9:  # NVLink 4's figure quoted, or the former constant kept
        assert "900GB/s" in links.source or "kept" in links.source, name


def test_the_data_sheet_links_by_hand():
    # NVLink 4: "18x 4th Gen NVLink, 900GB/s" both directions → 450 GB/s one way, 8 a node
    assert (H100.links.scale_up_bytes_per_s, H100.links.scale_up_domain) == (900e9 / 2, 8)
    # DGX B200: "14.4 TB/s aggregate" over 8 GPUs, both directions → 900 GB/s one way
    assert B200.links.scale_up_bytes_per_s == 14.4e12 / 8 / 2
    # GB200 NVL72: the same NVLink 5 over one 72-GPU domain ("130 TB/s" ÷ 72 ÷ 2 ≈ 0.9 TB/s)
    assert GB200.links.scale_up_domain == 72
    assert GB200.links.scale_up_bytes_per_s == pytest.approx(130e12 / 72 / 2, rel=0.01)
    # A100: "600 GB/s" of NVLink 3 both directions; L40S: "PCIe Gen4 x16: 64GB/s bidirectional"
    assert GPUS["A100 80GB"].links.scale_up_bytes_per_s == 600e9 / 2
    assert GPUS["L40S"].links.scale_up_bytes_per_s == 64e9 / 2
    # one 400 Gb/s NIC a GPU between nodes: 50 GB/s
    assert B200.links.scale_out_bytes_per_s == 400e9 / 8


@pytest.mark.parametrize("group", [1, 2, 8, 9, 16, 64, 72, 73, 256])
def test_a_group_crosses_nvlink_within_its_domain_and_the_network_beyond(group):
    assert link_bytes_per_s(GB200, group) == (900e9 if group <= 72 else 50e9)
    assert link_bytes_per_s(H100, group) == (450e9 if group <= 8 else 50e9)
    # a PCIe card beyond its host: the slower of PCIe and the network
    assert link_bytes_per_s(GPUS["L40S"], group) == 32e9


def test_an_expert_all_to_all_of_64_ranks_stays_on_a_gb200_rack_s_nvlink():
    layout = Layout(gpus=64, ep=64)
    assert ep_link_bytes_per_s(GB200, layout) == 900e9
    assert ep_link_bytes_per_s(H100, layout) == 50e9


def test_a_tp_all_reduce_on_a_b200_takes_half_an_h100_s_time():
    h100 = tp_link_seconds(CFG, H100, 4, 256, EFF)
    assert h100 == pytest.approx(tp_forward_bytes(CFG, 4, 256) / (450e9 * EFF.tp_link))
    assert tp_link_seconds(CFG, B200, 4, 256, EFF) == pytest.approx(h100 / 2)

    def collectives(gpu):
        return train_seconds_by_term(CFG, gpu, 64, None, "bf16", EFF, tp=4)["tp_collectives"]

    assert collectives(H100) > 0 and collectives(B200) == pytest.approx(collectives(H100) / 2)


def test_the_layout_search_charges_each_gpu_its_own_links():
    layout = Layout(gpus=16, tp=2, pp=2, micro_batches=8)
    comm = parallel_memory(CFG, layout, 64, "bf16").comm_by_kind
    rest = comm["pp"] + comm["dp"]
    gb200 = layout_cost(CFG, layout, GB200, 64)
    assert gb200.comm_s == pytest.approx(comm["tp"] / 900e9 + rest / 900e9)  # 16 ≤ 72: all NVLink
    h100 = layout_cost(CFG, layout, H100, 64)
    assert h100.comm_s == pytest.approx(comm["tp"] / 450e9 + rest / 50e9)  # 16 > 8: the network
    assert "900 GB/s" in search_assumptions("GB200") and "of 72" in search_assumptions("GB200")
