"""The parameter counts published for the presets' released checkpoints, each with its source:
exact totals (model cards, safetensors metadata), totals published only rounded (with active
counts), and counts published as embedding and non-embedding parameters (Gemma). The tests hold
every preset's count against them."""

# Parameter counts published for the released checkpoints (model cards / safetensors metadata).
PUBLISHED_PARAMS = {
    "seed-demo": 43_780_608,  # seed 000, section 八, "总参数"
    "seed-demo-mha": 45_353_472,  # seed 000, section 八, "MHA"
    "llama-7b": 6_738_415_616,
    "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "tinyllama-1.1b": 1_100_048_384,
    "llama-3.2-1b": 1_235_814_400,
    "llama-3.2-3b": 3_212_749_824,
    "mistral-7b": 7_241_732_096,
    "mistral-nemo-12b": 12_247_782_400,
    "mixtral-8x7b": 46_702_792_704,
    "qwen2.5-7b": 7_615_616_512,
    "qwen3-8b": 8_190_735_360,
    "qwen3-30b-a3b": 30_532_122_624,
    # the Hub's safetensors totals (its API's safetensors.total; tests/published_configs/SOURCES.md)
    "olmo-2-7b": 7_298_617_344,
    "smollm3-3b": 3_075_098_624,
    "phi-4-mini": 3_836_021_760,
    "phi-3-mini-4k": 3_821_079_552,
}


# Counts published only rounded (no safetensors total of the model itself): (total, active per
# token, the quote). The repositories' READMEs: deepseek-ai/DeepSeek-V3 @9b4e978, deepseek-ai/
# DeepSeek-V2 @ec98ee3 (and its technical report, Appendix B.1), MoonshotAI/Kimi-K2 @c6157be;
# gpt-oss: the model card (arXiv 2508.10925) Table 1, whose active count takes the unembedding
# and not the embedding, and openai/gpt-oss README.md @0492bd3.
PUBLISHED_ROUNDED = {
    "deepseek-v3": (
        671e9,
        37e9,
        "671B total parameters with 37B activated for each token; the total size of DeepSeek-V3 "
        "models on Hugging Face is 685B, which includes 671B of the Main Model weights and 14B of "
        "the Multi-Token Prediction (MTP) Module weights",
    ),
    "deepseek-v2": (236e9, 21e9, "236B total parameters, of which 21B are activated for each token"),
    "deepseek-v2-lite": (15.7e9, 2.4e9, "15.7B total parameters, of which 2.4B are activated for each token"),
    "kimi-k2": (1e12, 32e9, "32 billion activated parameters and 1 trillion total parameters"),
    "gpt-oss-20b": (
        20.91e9,
        3.61e9,
        "Total Parameters 20.91B, Active Parameters 3.61B (Unembedding parameters are counted "
        "towards active, but not embeddings); 21B parameters with 3.6B active parameters",
    ),
    # transformers' Glm4Moe model doc: 106,852,245,504 is "106 billion" truncated (rounded it
    # is 107); the 12B active leave out the embedding table and the head (12.18B; with both,
    # 13.42B)
    "glm-4.5-air": (
        106e9,
        12e9,
        "GLM-4.5-Air adopts a more compact design with 106 billion total parameters and 12 billion "
        "active parameters",
    ),
    # Meta's model card (meta-llama/llama-models models/llama4/MODEL_CARD.md @038acb9): the totals
    # count the whole checkpoint, Scout's with its vision tower (the text decoder: 107.77B)
    "llama-4-scout": (109e9, 17e9, "Llama 4 Scout (17Bx16E): 17B (Activated) 109B (Total)"),
    "llama-4-maverick": (400e9, 17e9, "Llama 4 Maverick (17Bx128E): 17B (Activated) 400B (Total)"),
    # transformers' docs/source/en/model_doc/mistral4.md @162e3fa (the config class's checkpoint,
    # mistralai/Mistral-Small-4-119B-2603): the text decoder counts 118.97B, 6.63B active with the
    # embedding and head (6.10B without the embedding): the published 6.5B lies between
    "mistral-small-4": (119e9, 6.5e9, "119B with 6.5B activated parameters per token"),
    "gpt-oss-120b": (
        116.83e9,
        5.13e9,
        "Total Parameters 116.83B, Active Parameters 5.13B (Unembedding parameters are counted "
        "towards active, but not embeddings); 117B parameters with 5.1B active parameters",
    ),
}


# Counts published as embedding and non-embedding parameters (no total of the model itself):
# (embedding, non-embedding, the unit they are rounded to, the quote). The Gemma 3 report (arXiv
# 2503.19786) Table 1, in millions; the Gemma 2 report (arXiv 2408.00118) Table 2, exact.
# transformers' embedding of the 27B text decoder is 1,409.6M (the report's 1,416M is 6.2M more:
# the multimodal projector's 6,194,304, 1,152 × 5,376 + 1,152, would make it 1,415.8M) and of
# Gemma 2 9B 917,504,000 (the report's is 256,128 × 3,584: 128 rows more than the file's vocab).
PUBLISHED_SPLIT = {
    "gemma-3-1b": (302e6, 698e6, 1e6, "1B: Vision Encoder 0, Embedding Parameters 302M, Non-embedding 698M"),
    "gemma-3-27b": (
        1416e6,
        25600e6,
        1e6,
        "27B: Vision Encoder 417M, Embedding Parameters 1,416M, Non-embedding Parameters 25,600M",
    ),
    "gemma-2-9b": (
        917_962_752,
        8_324_201_984,
        1,
        "9B: Embedding Parameters 917,962,752, Non-embedding Parameters 8,324,201,984",
    ),
}
