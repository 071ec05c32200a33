import os

import pytest
import torch

# Two cores: keep torch from oversubscribing them in the test process.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture
def debug_cfg():
    from llama_lab.config import PRESETS

    return PRESETS["debug"]


@pytest.fixture
def stored(monkeypatch):
    """What download buttons hand to Streamlit's media store, by file name."""
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage

    files = {}
    original = MemoryMediaFileStorage.load_and_get_id

    def record(self, path_or_data, mimetype, kind, filename=None):
        files[filename] = path_or_data
        return original(self, path_or_data, mimetype, kind, filename)

    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", record)
    return files
