"""tests/system is the slow tier as a folder: real processes (gloo ranks), the browser, sessions
racing each other, stopped runs and the memory guard against measured RSS. Every test here is
marked slow, so `python -m pytest` (the fast tier) deselects every one of them."""

import pytest
from apptest_helpers import one_component_scan


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    here = config.rootpath / "tests" / "system"
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session", autouse=True)
def _components_scanned_once():
    with one_component_scan():
        yield
