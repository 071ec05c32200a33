import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Two cores: keep torch from oversubscribing them in the test process.
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture
def debug_cfg():
    from llama_lab.config import PRESETS
    return PRESETS["debug"]
