"""The app's pages: app.py registers them with st.navigation; home.py links to them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AppPage:
    path: str  # relative to the entry point's folder; st.Page titles it from the name
    label: str  # the home page's link text
    description: str


HOME_PAGE, HOME_TITLE, HOME_ICON = "home.py", "Home", "🦙"
PAGES: tuple[AppPage, ...] = (
    AppPage(
        "pages/1_Parameters_and_FLOPs.py",
        "Parameters & FLOPs",
        "where the parameters and FLOPs go, FLOPs vs sequence length, fvcore cross-check",
    ),
    AppPage(
        "pages/2_KV_cache_and_attention.py",
        "KV cache & attention",
        "MHA vs GQA vs MQA: cache bytes, what fits a GPU, the decode roofline",
    ),
    AppPage(
        "pages/3_Gradient_norms.py", "Gradient norms", "Post-LN vs Pre-LN, per-layer gradient norms measured"
    ),
    AppPage(
        "pages/4_Live_pass.py",
        "Live pass",
        "one real forward/backward: loss, time, memory against the predictions",
    ),
    AppPage(
        "pages/5_Architecture_comparison.py",
        "Architecture comparison",
        "the seed's 2017-vs-LLaMA table, each row computed on your config",
    ),
    AppPage(
        "pages/6_Seed_claims.py", "Seed claims", "every number the tutorial quotes, recomputed, with ✓ or ✗"
    ),
    AppPage("pages/7_Report.py", "Report", "download everything as HTML, JSON, CSV or Markdown"),
    AppPage(
        "pages/8_Inference_systems.py",
        "Inference systems",
        "quantisation, FlashAttention, speculative decoding: counted and measured",
    ),
    AppPage(
        "pages/9_Inside_the_model.py",
        "Inside the model",
        "one real forward pass opened up: attention maps, RoPE, residual stream, logit lens",
    ),
    AppPage(
        "pages/10_Many_GPUs.py",
        "Many GPUs",
        "tensor, pipeline and data parallelism per GPU, what fits on N GPUs, FSDP/TP measured",
    ),
    AppPage(
        "pages/11_Validation.py",
        "Validation",
        "the time predictions against public measurements, an error per row, held-out errors per kind",
    ),
    AppPage(
        "pages/12_Fine_tuning.py",
        "Fine-tuning",
        "LoRA, QLoRA, DoRA or full fine-tuning on one GPU: what fits, by part, against context, run live",
    ),
    AppPage(
        "pages/13_Scaling_laws.py",
        "Scaling laws",
        "Chinchilla's L(N, D), compute-optimal models, the LLaMAs placed, a ladder measured here",
    ),
)
