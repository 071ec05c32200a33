"""The package's shape, checked against docs/architecture.md: the layer rule (a module imports
only from its own layer or lower ones), no import cycle, Streamlit only in llama_lab/ui, pages
importing only llama_lab.ui and the section modules they draw, sections never importing each
other, every module documented, and the names SPEC fixes still importing."""

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "llama_lab"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layers_from_doc() -> list[set[str]]:
    block = re.search(r"```layers\n(.*?)```", DOC, re.S)
    assert block, "docs/architecture.md has no ```layers block"
    return [set(line.split()) for line in block.group(1).strip().splitlines()]


LAYERS = layers_from_doc()
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def layer(module: str) -> int | None:
    """The layer of a module: that of its top-level name under llama_lab. The package root
    only re-exports ``config`` (and holds the version): it sits with ``config``; ``__main__``
    only starts the CLI and nothing imports it (None)."""
    parts = module.split(".")
    if len(parts) == 1:
        return LAYER_OF["config"]
    if parts[1] == "__main__":
        return None
    return LAYER_OF[parts[1]]


def imports(module: str, path: Path) -> set[str]:
    """Every llama_lab module ``module`` imports, at any depth of its code (lazy imports too):
    ``from .x import y`` names module x (or x.y when that is a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # `if TYPE_CHECKING:` imports never run
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            node.body = []
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("llama_lab")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("llama_lab"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return {name for name in found if name in MODULES and name != module}


GRAPH = {name: imports(name, path) for name, path in MODULES.items()}


def test_every_package_folder_is_a_documented_layer():
    top = {name.split(".")[1] for name in MODULES if name.count(".") >= 1} - {"__main__"}
    assert top == set(LAYER_OF), top ^ set(LAYER_OF)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_lower_layers_never_import_higher_ones(module):
    own = layer(module)
    if own is None:
        return
    for target in GRAPH[module]:
        theirs = layer(target)
        assert theirs is not None and theirs <= own, (
            f"{module} (layer {own}) imports {target} (layer {theirs})"
        )
        peers = [name.split(".")[1] if "." in name else "" for name in (module, target)]
        if theirs == own and "" not in peers and peers[0] != peers[1]:
            raise AssertionError(f"{module} imports its peer {target}")


def test_no_import_cycles():
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if target not in state:
                visit(target, path + [target])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])


@pytest.mark.slow
def test_only_the_ui_subpackage_imports_streamlit():
    for name, path in MODULES.items():
        if name.startswith("llama_lab.ui"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.split(".")[0] == "streamlit" for n in names), name
    names = [n for n in MODULES if not n.startswith(("llama_lab.ui", "llama_lab.__main__"))]
    code = (
        f"import sys, importlib\nfor name in {names!r}: importlib.import_module(name)\n"
        "sys.exit('streamlit' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=300).returncode == 0


PAGE_FILES = [ROOT / "app.py", ROOT / "home.py", *sorted((ROOT / "pages").glob("*.py"))]
SECTIONS = {name for name in MODULES if name.startswith("llama_lab.ui.sections.")}


@pytest.mark.parametrize("page", PAGE_FILES, ids=lambda p: p.name)
def test_pages_import_only_the_ui_layer_and_streamlit(page):
    """Pages hold layout and widgets only: every rule, bound and number comes from the package
    through ``llama_lab.ui`` (what every page needs) and the section modules the page draws
    (``from llama_lab.ui.sections import kv``)."""
    allowed = {"llama_lab", "llama_lab.ui", "streamlit", "__future__"} | SECTIONS
    for node in ast.walk(ast.parse(page.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module in ("llama_lab", "llama_lab.ui.sections"):
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif node.module == "llama_lab.ui":  # what it exports, not its modules
                names = [
                    f"llama_lab.ui.{a.name}" if f"llama_lab.ui.{a.name}" in MODULES else node.module
                    for a in node.names
                ]
            else:
                names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name in allowed or name.startswith("streamlit."), f"{page.name} imports {name}"


@pytest.mark.parametrize("module", sorted(name for name in MODULES if name.startswith("llama_lab.ui")))
def test_sections_are_leaves_of_the_ui(module):
    """A section imports the shared machinery of ``llama_lab.ui`` (state, cached wrappers, runs,
    widgets, panels, …), never another section: what two pages share lives in ``llama_lab.ui``
    (the warmup contrast in ``ui.warmup``), or the page draws the other page's section itself (the
    KV page draws ``parallel.serving_section``). Nothing else of the package imports a section."""
    imported = GRAPH[module] & SECTIONS
    assert not imported, f"{module} imports the section(s) {sorted(imported)}"


def test_the_ui_package_exports_only_what_the_pages_use():
    """``llama_lab.ui`` is no facade of section functions: it exports what every page needs
    (``setup_page``, which every page calls first, and the page list app.py and home.py read), and
    app.py, home.py and the pages use every name it exports."""
    tree = ast.parse((PACKAGE / "ui" / "__init__.py").read_text(encoding="utf-8"))
    exported = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["__all__"]
    )
    used: dict[str, set[str]] = {}
    for page in PAGE_FILES:
        used[page.name] = {
            node.attr
            for node in ast.walk(ast.parse(page.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute) and getattr(node.value, "id", "") == "ui"
        }
    assert set(exported) == set().union(*used.values())
    assert all("setup_page" in names for page, names in used.items() if page != "app.py"), used


def test_the_doc_names_every_module_and_only_modules_that_exist():
    named = set(re.findall(r"`(llama_lab/[\w/]+\.py)`", DOC))
    on_disk = {
        str(p.relative_to(ROOT)) for p in MODULES.values() if p.name != "__init__.py" or p.parent == PACKAGE
    }
    assert named - {str(p.relative_to(ROOT)) for p in MODULES.values()} == set()
    assert on_disk - named == set(), sorted(on_disk - named)


def test_every_experiment_kind_has_its_module_its_panel_and_its_key():
    experiments = importlib.import_module("llama_lab.experiments")
    assert list(experiments.KINDS) == [
        "gradnorms",
        "depth_sweep",
        "training",
        "warmup",
        "ablation",
        "live_pass",
        "decode",
        "quantize",
        "flash",
        "speculative",
        "distill",
        "shard",
        "finetune",
    ]
    for kind in experiments.KINDS.values():
        panel = importlib.import_module(f"llama_lab.ui.panels.{kind.panel}")
        assert callable(panel.show)
        assert kind.state_key == f"llama_lab.experiment.{kind.name}"
        assert kind.run.__module__.startswith("llama_lab.experiments.")


def test_spec_names_still_import():
    from llama_lab.config import PRESETS, ConfigError, ModelConfig
    from llama_lab.errors import LabError
    from llama_lab.model import build_model

    assert issubclass(ConfigError, LabError) and issubclass(LabError, ValueError)
    cfg = ModelConfig.from_hf_config(PRESETS["seed-demo"].to_hf_config())
    assert cfg == PRESETS["seed-demo"]
    assert sum(p.numel() for p in build_model(cfg, device="meta").parameters()) == 43_780_608


def test_every_refusal_is_a_lab_error():
    from llama_lab import errors

    for name in ("ConfigError", "AnalysisError", "DataError", "ReportError", "ExperimentError", "BusyError"):
        assert issubclass(getattr(errors, name), errors.LabError), name
    from llama_lab.cli_args import CliError

    assert issubclass(CliError, errors.LabError)


@pytest.mark.slow
def test_importing_the_analysis_runs_no_torch_kernel():
    """The closed-form counts do not depend on what the installed torch can do: importing
    ``llama_lab.analysis`` (and the model it counts) records no aten operator in the profiler."""
    code = (
        "import sys, torch\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "with profile(activities=[ProfilerActivity.CPU]) as prof:\n"
        "    import llama_lab.analysis, llama_lab.model\n"
        "ops = sorted({e.name for e in prof.events() if e.name.startswith('aten::')})\n"
        "print(ops)\n"
        "sys.exit(bool(ops))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=300, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
