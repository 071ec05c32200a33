"""The Hugging Face ``config.json`` machinery every family shares: what transformers reads
(``keys``), one file read as a family's config class reads it (``reader``), the shared key sets
(``table``), reading (``read``) and writing (``write``) for a registry of families, choosing the
family that expresses a config (``select``), the stored weight format (``quant``), and what a
family module declares (``family``). The families themselves: ``llama_lab.config.families``."""
