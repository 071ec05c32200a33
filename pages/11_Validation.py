"""Validation: LLaMA Lab's time predictions against public measurements, with an error per row."""

from llama_lab import ui

P = "llama_lab.page11."

ui.setup_page(
    "Validation",
    "LLaMA Lab's predictions held against public measurements — batch-1 and batched decode, "
    "prefill and training throughput, training runs' peak memory and vLLM's KV-cache sizes, from "
    "gpt-fast, llama.cpp, TensorRT-LLM, torchtitan, llm-foundry, Megatron-Bridge and vLLM: for "
    "each, the bound (the roofline; for memory, LLaMA Lab's count; for the KV cache, what the "
    "weights leave), a calibrated estimate and its error, with the errors of the half the "
    "calibration never saw.",
    needs_config=False,
)
answer = ui.validation_answer()
ui.validation_summary(answer)
ui.validation_scatter(answer, P)
ui.validation_parameters(answer)
ui.validation_rows(answer, P)
