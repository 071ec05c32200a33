import pytest
from apptest_helpers import one_component_scan


@pytest.fixture(scope="session", autouse=True)
def _components_scanned_once():
    with one_component_scan():
        yield
