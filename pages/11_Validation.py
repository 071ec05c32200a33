"""Validation: LLaMA Lab's time predictions against public measurements, with an error per row."""

from llama_lab import ui
from llama_lab.ui.sections import validation

P = "llama_lab.page11."

ui.setup_page(
    "Validation",
    "LLaMA Lab's predictions held against public measurements — batch-1 and batched decode, "
    "prefill and training throughput, training runs' peak memory, vLLM's KV-cache sizes and "
    "fine-tuning's peak memory and tokens/s, from gpt-fast, llama.cpp, TensorRT-LLM, torchtitan, "
    "llm-foundry, Megatron-Bridge, vLLM, PEFT, torchtune and Unsloth: for each, the bound (the "
    "roofline; for memory, LLaMA Lab's count; for the KV cache, what the "
    "weights leave), a calibrated estimate and its error, with the errors of the half the "
    "calibration never saw.",
    needs_config=False,
)
answer = validation.answer()
validation.summary_section(answer)
validation.scatter_section(answer, P)
validation.parameters_section(answer)
validation.rows_section(answer, P)
