import pytest
import torch

# One intra-op thread in the test process. The tests' models are tiny (the debug preset's d is 64):
# a second thread buys nothing there (the fast tier took as long with two on 2 quiet cores), while
# each parallel region waits for both threads, so any other process on a 2-core machine stalled
# every op (the same four folders took 28 s with one thread and 57-231 s with two beside another
# run). Subprocesses that measure set their own (test_analysis' fresh peaks, the memory guard).
torch.set_num_threads(1)


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
