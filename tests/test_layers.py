"""The layer rule of docs/architecture.md, checked on the source.

Every import in ``hostapp/`` (and ``main.py``) is read with ``ast``: at module level, inside
functions, under ``if TYPE_CHECKING:``, and ``importlib.import_module("...")`` with a literal
name. Nothing is imported, so a broken module cannot hide its imports.

The layers, bottom to top (a layer may import itself, the ones it names, and the
``hostapp`` package's own constants, ``hostapp/__init__.py``):

- ``protocol`` and ``store``: the bottom; they import nothing else of hostapp, not even
  each other (neither does today: the journal stores JSON-RPC ids as plain values).
- ``transport``: protocol. ``mechanisms``: protocol and store. ``auth``: protocol, store and
  transport (it plugs into the HTTP transport). None of the three imports another
  otherwise (today transport and mechanisms import only protocol, auth only store).
- ``engine``: everything above.
- ``presentation``, what both clients say of an operation (durations, time left, status
  words, whether it survives a stop): the facade, ``hostapp.engine.api``, only.
- the top: ``app`` (the composition root) and ``conformance*`` (the conformance client,
  the auth scenarios among it) may import every layer below; ``ui`` and ``cli`` only the
  facade, ``hostapp.engine.api``, ``hostapp.presentation`` and ``hostapp.protocol``; besides, the cli starts the
  window (``hostapp.app``), the lab server (``hostapp.lab.server``) and the conformance
  client (``hostapp.conformance``). ``__main__`` and ``main.py`` are entry points.
- ``lab``, the reference server: protocol only (and the OS file lock, ``oslock``).
- ``oslock``, the operating system's exclusive file lock: a bottom module of its own,
  importing nothing of hostapp, for the agent's home lock and the lab's state lock.
- ``agent``, the owner of a home (its lock, its start at login, its local endpoint): the
  engine and what is below it.

Besides: no Qt (PySide6, shiboken6, qasync) outside ``hostapp/ui`` and ``hostapp/app.py``;
no cycle between packages, nor between modules (a circle that only the type checker
follows is one for the reader too); every module belongs to a layer (a new top-level module must be
placed here, by its author).

``python tests/test_layers.py`` prints every violation.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hostapp"

PROTOCOL = "hostapp.protocol"
STORE = "hostapp.store"
TRANSPORT = "hostapp.transport"
MECHANISMS = "hostapp.mechanisms"
AUTH = "hostapp.auth"
ENGINE = "hostapp.engine"
LAB = "hostapp.lab"
UI = "hostapp.ui"
CLI = "hostapp.cli"
APP = "hostapp.app"
CONFORMANCE = "hostapp.conformance"
AGENT = "hostapp.agent"
PRESENTATION = "hostapp.presentation"
CONSTANTS = "hostapp"  # hostapp/__init__.py: version and client name, importing nothing
OSLOCK = "hostapp.oslock"  # the OS's exclusive file lock, importing nothing of hostapp

BELOW_THE_ENGINE = (PROTOCOL, STORE, TRANSPORT, MECHANISMS, AUTH)

#: Layer name -> the module patterns it is made of.
LAYERS: dict[str, tuple[str, ...]] = {
    CONSTANTS: ("hostapp",),
    OSLOCK: ("hostapp.oslock",),
    PROTOCOL: ("hostapp.protocol", "hostapp.protocol.*"),
    STORE: ("hostapp.store", "hostapp.store.*"),
    TRANSPORT: ("hostapp.transport", "hostapp.transport.*"),
    MECHANISMS: ("hostapp.mechanisms", "hostapp.mechanisms.*"),
    AUTH: ("hostapp.auth", "hostapp.auth.*"),
    ENGINE: ("hostapp.engine", "hostapp.engine.*"),
    LAB: ("hostapp.lab", "hostapp.lab.*"),
    UI: ("hostapp.ui", "hostapp.ui.*"),
    CLI: ("hostapp.cli", "hostapp.cli.*"),
    APP: ("hostapp.app", "hostapp.app.*"),
    CONFORMANCE: ("hostapp.conformance*",),
    AGENT: ("hostapp.agent", "hostapp.agent.*"),
    PRESENTATION: ("hostapp.presentation",),
    "entry points": ("hostapp.__main__", "main"),
}

#: Layer -> the module patterns (besides its own and the constants) it may import.
ALLOWED: dict[str, tuple[str, ...]] = {
    CONSTANTS: (),
    OSLOCK: (),
    PROTOCOL: (),
    STORE: (),
    TRANSPORT: (PROTOCOL,),
    MECHANISMS: (PROTOCOL, STORE),
    AUTH: (PROTOCOL, STORE, TRANSPORT),
    ENGINE: BELOW_THE_ENGINE,
    LAB: (PROTOCOL, OSLOCK),
    # The window and the command line are written against the facade only.
    UI: ("hostapp.engine.api", PRESENTATION, PROTOCOL),
    # What both clients say of an operation, from its view.
    PRESENTATION: ("hostapp.engine.api",),
    # ... and the engine package itself for its factory, open_engine (not its modules).
    # ... and the agent (the owner of the home), whose client the command line is.
    CLI: ("hostapp.engine.api", "hostapp.engine", PRESENTATION, PROTOCOL, APP, AGENT, "hostapp.lab.server",
          CONFORMANCE),
    APP: (*BELOW_THE_ENGINE, ENGINE, UI, AGENT),
    CONFORMANCE: (*BELOW_THE_ENGINE, ENGINE),
    # The owner of a home: runs the engine and serves its facade to the window and the CLI.
    AGENT: (*BELOW_THE_ENGINE, ENGINE, OSLOCK),
    "entry points": (CLI, APP),
}

#: Import roots that are Qt, and the layers that may use them.
QT = ("PySide6", "shiboken6", "qasync")
QT_LAYERS = (UI, APP)


@dataclass(frozen=True)
class Import:
    file: str  # relative to the repository
    line: int
    importer: str  # module name
    imported: str  # module name, resolved to a module of hostapp where it is one

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> list[Path]:
    return [*sorted(PACKAGE.rglob("*.py")), ROOT / "main.py"]


def hostapp_modules() -> set[str]:
    return {module_name(path) for path in source_files()}


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def imports_of(path: Path, known: set[str], root: Path = ROOT) -> list[Import]:
    importer = module_name(path, root)
    file = str(path.relative_to(root))
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []

    def add(node: ast.stmt | ast.expr, name: str) -> None:
        found.append(Import(file, node.lineno, importer, name))

    for node in ast.walk(tree):  # every node: function bodies and TYPE_CHECKING blocks too
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(importer, path.name == "__init__.py", node.level, node.module)
            for alias in node.names:
                # `from hostapp.engine import api` imports the module hostapp.engine.api;
                # `from hostapp import CLIENT_NAME` imports a name of the package.
                submodule = f"{base}.{alias.name}"
                add(node, submodule if submodule in known else base)
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            add(node, node.args[0].value)
    # one entry per module a line imports (`from hostapp.auth import a, b` is one), in line order
    return sorted(set(found), key=lambda imp: (imp.line, imp.imported))


def all_imports() -> list[Import]:
    known = hostapp_modules()
    return [imp for path in source_files() for imp in imports_of(path, known)]


def layer_of(module: str) -> str | None:
    """The layer a hostapp module belongs to (the most specific pattern wins)."""
    best: tuple[int, str] | None = None
    for layer, patterns in LAYERS.items():
        for pattern in patterns:
            if fnmatchcase(module, pattern) and (best is None or len(pattern) > best[0]):
                best = (len(pattern), layer)
    return best[1] if best else None


def matches(module: str, allowed: str) -> bool:
    """``module`` is ``allowed`` or inside it; a layer name stands for all its patterns."""
    patterns = LAYERS.get(allowed, (allowed, f"{allowed}.*"))
    return any(fnmatchcase(module, pattern) for pattern in patterns)


def is_hostapp(module: str) -> bool:
    return module == "hostapp" or module.startswith("hostapp.")


def layer_violations(imports: list[Import]) -> list[str]:
    problems = []
    for imp in imports:
        if not is_hostapp(imp.imported):
            continue
        importer_layer = layer_of(imp.importer)
        imported_layer = layer_of(imp.imported)
        if importer_layer is None or imported_layer in (importer_layer, CONSTANTS):
            continue
        if any(matches(imp.imported, allowed) for allowed in ALLOWED[importer_layer]):
            continue
        allowed = ", ".join(ALLOWED[importer_layer]) or "nothing else of hostapp"
        problems.append(
            f"{imp.where()}: {imp.importer} imports {imp.imported} "
            f"(layer {importer_layer} may import only: {allowed})"
        )
    return problems


def qt_violations(imports: list[Import]) -> list[str]:
    return [
        f"{imp.where()}: {imp.importer} imports {imp.imported} (Qt only in hostapp/ui and hostapp/app.py)"
        for imp in imports
        if imp.imported.split(".")[0] in QT and layer_of(imp.importer) not in QT_LAYERS
    ]


def unplaced_modules() -> list[str]:
    return [
        f"{path.relative_to(ROOT)}: {module_name(path)} belongs to no layer (add it to LAYERS in tests/test_layers.py)"
        for path in source_files()
        if layer_of(module_name(path)) is None
    ]


def package_cycles(imports: list[Import]) -> list[str]:
    """Every cycle between layers (strongly connected groups), with the imports that make it."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports:
        if not is_hostapp(imp.imported):
            continue
        source, target = layer_of(imp.importer), layer_of(imp.imported)
        if source and target and source != target:
            edges.setdefault(source, {}).setdefault(target, imp)
    return _cycles(edges)


def module_cycles(imports: list[Import]) -> list[str]:
    """Every circle between modules of hostapp (imports at module level, in functions and
    under TYPE_CHECKING alike: a circle for the type checker is one for the reader)."""
    edges: dict[str, dict[str, Import]] = {}
    for imp in imports:
        if is_hostapp(imp.imported) and imp.imported != imp.importer:
            edges.setdefault(imp.importer, {}).setdefault(imp.imported, imp)
    return _cycles(edges)


def _cycles(edges: dict[str, dict[str, Import]]) -> list[str]:
    """The strongly connected groups of ``edges`` (Tarjan), each with the imports that make it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in edges.get(node, {}):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(set(edges) | {t for targets in edges.values() for t in targets}):
        if node not in index:
            visit(node)

    problems = []
    for group in groups:
        arcs = [
            f"{source} -> {target} ({imp.where()}: {imp.importer} imports {imp.imported})"
            for source in group
            for target, imp in sorted(edges.get(source, {}).items())
            if target in group
        ]
        problems.append("cycle between " + ", ".join(group) + ": " + "; ".join(arcs))
    return problems


def _report(title: str, problems: list[str]) -> str:
    return f"{len(problems)} {title}:\n  " + "\n  ".join(problems)


def test_every_module_belongs_to_a_layer():
    problems = unplaced_modules()
    assert not problems, _report("modules outside the layers", problems)


def test_imports_point_down_the_layers():
    problems = layer_violations(all_imports())
    assert not problems, _report("imports against the layer rule", problems)


def test_qt_only_in_the_window():
    problems = qt_violations(all_imports())
    assert not problems, _report("Qt imports outside hostapp/ui and hostapp/app.py", problems)


def test_no_cycle_between_packages():
    problems = package_cycles(all_imports())
    assert not problems, _report("package cycles", problems)


def test_no_import_circle_between_modules():
    problems = module_cycles(all_imports())
    assert not problems, _report("import circles between modules", problems)


def test_the_circle_finder_finds_a_circle_through_type_checking_and_function_imports(tmp_path):
    package = tmp_path / "hostapp" / "engine"
    package.mkdir(parents=True)
    (package / "a.py").write_text("def f():\n    from hostapp.engine import b\n", encoding="utf-8")
    (package / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from hostapp.engine.a import f\n", encoding="utf-8")
    (package / "c.py").write_text("from hostapp.engine import a\n", encoding="utf-8")
    known = {"hostapp.engine.a", "hostapp.engine.b", "hostapp.engine.c"}
    imports = [imp for name in ("a", "b", "c") for imp in imports_of(package / f"{name}.py", known, root=tmp_path)]
    problems = module_cycles(imports)
    assert len(problems) == 1 and problems[0].startswith("cycle between hostapp.engine.a, hostapp.engine.b:")


def test_the_reader_sees_every_kind_of_import(tmp_path):
    """The checker itself: imports in functions, under TYPE_CHECKING, relative and by name."""
    source = tmp_path / "hostapp" / "ui" / "probe.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from hostapp.store.journal import OperationJournal\n"
        "def later():\n"
        "    import hostapp.transport.http\n"
        "    from ..engine import service\n"
        "    from . import adapter\n"
        "    importlib.import_module('hostapp.auth.oauth')\n",
        encoding="utf-8",
    )
    known = {"hostapp.engine.service", "hostapp.ui.adapter"}
    found = [(imp.line, imp.imported) for imp in imports_of(source, known, root=tmp_path)]
    assert sorted(found) == [
        (1, "typing"),
        (3, "hostapp.store.journal"),
        (5, "hostapp.transport.http"),
        (6, "hostapp.engine.service"),
        (7, "hostapp.ui.adapter"),
        (8, "hostapp.auth.oauth"),
    ]


if __name__ == "__main__":
    imports = all_imports()
    everything = (
        unplaced_modules() + layer_violations(imports) + qt_violations(imports) + package_cycles(imports)
        + module_cycles(imports)
    )
    print("\n".join(everything) or "no violations")
    sys.exit(1 if everything else 0)
