"""The Streamlit side of LLaMA Lab, and the only part of the package that imports Streamlit.

What every page needs is here: ``setup_page`` (the page chrome and the shared sidebar; it
initialises the session state itself, so any page also runs alone under
``streamlit.testing.v1.AppTest``) and the page list (``PAGES`` and the home page's path, title
and icon). Each page's sections live in ``llama_lab.ui.sections`` — a page imports the section
modules it draws (``from llama_lab.ui.sections import kv``) and is its outline: ``setup_page``,
then one call per section between headings, tabs, columns and expanders. The shared machinery
the sections import lives in the modules beside this one: the sidebar's state and URL mirror
(``state``), the sidebar (``sidebar``, ``sliders``, ``family_fields``, ``model_source``,
``config_files``), cached wrappers (``cached``), live runs (``runs``, ``warmup``), widgets
(``widgets``, ``derivations``, ``context``) and one result panel per experiment kind
(``panels``).
"""

from .pages import HOME_ICON, HOME_PAGE, HOME_TITLE, PAGES
from .sidebar import setup_page
from .widgets import stop_unless_decoder_only

__all__ = ["HOME_ICON", "HOME_PAGE", "HOME_TITLE", "PAGES", "setup_page", "stop_unless_decoder_only"]
