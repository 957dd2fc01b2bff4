"""The house is a tree: no module of `edge_hf` imports, directly or through others, itself.

Every import counts: at module level, inside functions (lazy imports), under `if TYPE_CHECKING:`,
absolute and relative. A lazy import hides a circle from Python, not from the reader: the two
modules still cannot be understood (or moved) one without the other.

`experiments` is one package too, run as `python -m experiments.<name>` from the repository root:
its modules import each other as `experiments.realbench` (never `realbench`, which would load the
same file a second time under another name) and none edits `sys.path`.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "edge_hf"
EXPERIMENTS = ROOT / "experiments"


@dataclass(frozen=True, order=True)
class ImportLine:
    """One import statement of the package, where it is and what kind it is."""

    path: str  # relative to the package's parent: edge_hf/core/contract.py
    line: int
    text: str
    where: str  # "", "in a function" or "under TYPE_CHECKING"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}" + (f"  ({self.where})" if self.where else "")


# module -> imported module -> the lines that import it
Graph = dict[str, dict[str, list[ImportLine]]]


def module_names(root: Path) -> dict[str, Path]:
    """Every module under the package `root` (named like `root.name`), dotted name -> file."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name of the module an `ImportFrom` reads from."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    # `from . import x` in a package's __init__ is relative to the package itself.
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of a module, at any depth, with where it sits."""
    found: list[tuple[ast.Import | ast.ImportFrom, str]] = []

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append((node, where))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            where = where or "in a function"
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(node, ast.If) and _is_type_checking(node.test) and child in node.body:
                inner = "under TYPE_CHECKING"
            visit(child, inner)

    visit(tree, "")
    return found


def _targets(
    node: ast.Import | ast.ImportFrom, name: str, path: Path, modules: dict[str, Path]
) -> Iterator[str]:
    """The modules of the package one import statement reads (`from a import b` with `b` a
    submodule reads `a.b`; otherwise `a`)."""
    if isinstance(node, ast.Import):
        wanted = [a.name for a in node.names]
    else:
        source = _resolve(name, path.name == "__init__.py", node)
        wanted = [f"{source}.{a.name}" for a in node.names]
        wanted = [sub if sub in modules else source for sub in wanted]
    for target in wanted:
        # `import a.b.c` names a.b.c; an unknown tail (a.b.attr) falls back to its module.
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            yield target


def import_graph(root: Path) -> Graph:
    """Module -> the modules of the package it imports -> the import lines that do it."""
    modules = module_names(root)
    graph: Graph = {name: {} for name in modules}
    for name, path in modules.items():
        source = path.read_text()
        for node, where in _imports(ast.parse(source, filename=str(path))):
            text = " ".join((ast.get_source_segment(source, node) or "").split())
            line = ImportLine(path.relative_to(root.parent).as_posix(), node.lineno, text, where)
            for target in _targets(node, name, path, modules):
                lines = graph[name].setdefault(target, [])
                if line not in lines:
                    lines.append(line)
    return graph


def knots(graph: Graph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm): each module of
    a group reaches every other one through imports. Empty for a tree (a DAG)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def circle_in(graph: Graph, knot: list[str]) -> list[str]:
    """One import circle through the first module of `knot`, as [a, b, ..., a] (shortest, BFS)."""
    start, members = knot[0], set(knot)
    came_from: dict[str, str] = {}
    queue = [start]
    for node in queue:
        for nxt in sorted(graph[node].keys() & members):
            if nxt == start:
                back = [node]  # node, its predecessor, ..., start
                while back[-1] != start:
                    back.append(came_from[back[-1]])
                return [*reversed(back), start]
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"{knot} is not a knot")


def circles(graph: Graph) -> list[str]:
    """Each knot of `graph` in words: its modules, one circle through them and every import
    between them (the lines that close it: the knot is cut when enough of them go)."""
    found = []
    for knot in knots(graph):
        members = set(knot)
        lines = sorted(
            {line for a in knot for b, at in graph[a].items() if b in members for line in at}
        )
        found.append(
            f"{', '.join(knot)} (e.g. {' -> '.join(circle_in(graph, knot))}), closed by:\n"
            + "\n".join(f"  {line}" for line in lines)
        )
    return found


def test_edge_hf_has_no_import_cycle() -> None:
    found = circles(import_graph(PACKAGE))
    assert found == [], "import circles in edge_hf:\n" + "\n".join(found)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_check_sees_lazy_type_checking_and_relative_imports(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import os\nfrom pkg.b import thing\n",
            "pkg/b.py": "def f():\n    from .sub import c\n",
            "pkg/sub/__init__.py": "",
            "pkg/sub/c.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\n"
            ),
            "pkg/d.py": "import pkg.a\n",  # reaches the knot but is not in it
        },
    )
    graph = import_graph(pkg)
    assert set(graph["pkg.b"]) == {"pkg.sub.c"}
    assert knots(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert circles(graph) == [
        "pkg.a, pkg.b, pkg.sub.c (e.g. pkg.a -> pkg.b -> pkg.sub.c -> pkg.a), closed by:\n"
        "  pkg/a.py:2: from pkg.b import thing\n"
        "  pkg/b.py:2: from .sub import c  (in a function)\n"
        "  pkg/sub/c.py:3: from ..a import x  (under TYPE_CHECKING)"
    ]


def test_the_check_names_each_knot_apart(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg import b\n",
            "pkg/b.py": "import pkg.a\nfrom pkg import c\n",
            "pkg/c.py": "",
            "pkg/x.py": "from . import y\n",
            "pkg/y.py": "def f():\n    from pkg.x import g\n",
        },
    )
    assert knots(import_graph(pkg)) == [["pkg.a", "pkg.b"], ["pkg.x", "pkg.y"]]


def test_the_check_passes_a_tree_with_a_package_reexporting_its_modules(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/conf/__init__.py": "from pkg.conf.schema import Config\nfrom . import load\n",
            "pkg/conf/schema.py": "import pkg.base\n",
            "pkg/conf/load.py": "from pkg.conf import schema\n",
            "pkg/base.py": "",
            "pkg/app.py": "from pkg.conf import Config\n",
        },
    )
    graph = import_graph(pkg)
    assert set(graph["pkg.conf"]) == {"pkg.conf.schema", "pkg.conf.load"}
    assert set(graph["pkg.conf.load"]) == {"pkg.conf.schema"}
    assert set(graph["pkg.app"]) == {"pkg.conf"}
    assert knots(graph) == []


def test_experiments_have_no_import_cycle() -> None:
    found = circles(import_graph(EXPERIMENTS))
    assert found == [], "import circles in experiments:\n" + "\n".join(found)


def _sibling_names(root: Path) -> set[str]:
    """The names a module directly under `root` would have if `root` itself were on sys.path."""
    return {
        path.stem if path.is_file() else path.name
        for path in root.iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }


def path_hacks(root: Path, package: Path | None = None) -> list[str]:
    """Every import under `root` that reads a module of the package `package` (default: `root`)
    by its bare name (`import realbench`, `from pose_head import x`: works only with `package` on
    sys.path, and loads the file a second time beside `experiments.realbench`), and every use of
    `sys.path`."""
    siblings = _sibling_names(package or root)
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        rel = path.relative_to(root.parent).as_posix()
        tree = ast.parse(source, filename=str(path))
        for node, _ in _imports(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                names = [node.module or ""] if node.level == 0 else []
            if any(n.partition(".")[0] in siblings for n in names):
                text = " ".join((ast.get_source_segment(source, node) or "").split())
                found.append((rel, node.lineno, text))
        for sub in ast.walk(tree):
            if (
                isinstance(sub, ast.Attribute)
                and sub.attr == "path"
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "sys"
            ):
                found.append((rel, sub.lineno, "sys.path"))
    return [f"{rel}:{line}: {text}" for rel, line, text in sorted(found)]


def test_experiments_import_their_package_by_its_full_name() -> None:
    assert (EXPERIMENTS / "__init__.py").is_file()
    found = path_hacks(EXPERIMENTS) + path_hacks(ROOT / "tests", package=EXPERIMENTS)
    for scripts in ("benchmarks", "deploy"):  # (run by the venv's python: edge_hf is installed)
        found += path_hacks(ROOT / scripts, package=EXPERIMENTS)
    assert found == [], "imports that need experiments/ on sys.path:\n" + "\n".join(found)


def test_the_path_check_sees_bare_sibling_imports_and_sys_path(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/a.py": "",
            "pkg/tool.py": "import os\nfrom pkg.sub import a\nfrom .sub.a import b\n",
            "pkg/bad.py": "import sys\nsys.path.insert(0, '.')\nimport sub.a as a\n",
            "pkg/lazy.py": "def f():\n    from tool import x\n",
        },
    )
    assert path_hacks(pkg) == [
        "pkg/bad.py:2: sys.path",
        "pkg/bad.py:3: import sub.a as a",
        "pkg/lazy.py:2: from tool import x",
    ]


def test_experiment_scripts_run_as_modules_from_the_repository_root() -> None:
    """`python -m experiments.<name> --help` with no PYTHONPATH: the root alone is enough."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for name in ("real_benchmark", "pose_head", "look_bench"):
        r = subprocess.run(
            [sys.executable, "-m", f"experiments.{name}", "--help"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, f"experiments.{name}:\n{r.stderr}"
        assert r.stdout.startswith(f"usage: python -m experiments.{name} "), r.stdout[:200]
